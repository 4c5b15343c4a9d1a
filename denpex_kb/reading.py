"""Bytes in: a log opened whatever it is (a file, a named pipe, stdin; gzip, bzip2, xz or zstd), read in chunks
that end at line breaks with over-long lines cut, and line breaks counted without copies.

Every problem with the input is a `ScanError` that names it and says what to give instead.
"""

from __future__ import annotations

import gzip
import io
import os
import stat
import threading
from collections.abc import Callable, Iterator
from functools import lru_cache
from pathlib import Path
from typing import Any, BinaryIO

from .normalize import MAX_LINE
from .report import ScanError

CHUNK = 8 << 20  # bytes read (or, in a memory map, searched) at a time


def _keep_ends(data: bytes) -> bytes:
    """An over-long unfinished line, shortened: its first MAX_LINE bytes and, when a carriage return came after
    them, the first MAX_LINE bytes of its last segment (what a redrawn line ends with)."""
    cr = data.rfind(b"\r", MAX_LINE)
    if cr < 0:
        return data[:MAX_LINE]
    return data[:MAX_LINE] + b"\r" + data[cr + 1 : cr + 1 + MAX_LINE]




def open_path(path: Path) -> BinaryIO:
    try:
        st = path.stat()
    except FileNotFoundError:
        raise ScanError(f"{path}: no such file") from None
    except OSError as exc:
        raise ScanError(f"{path}: {exc.strerror}") from None
    if stat.S_ISDIR(st.st_mode):
        raise ScanError(f"{path}: is a directory; give the log files inside it")
    if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode):
        # /dev/zero, /dev/urandom, a disk: endless or not a log. (A terminal on stdin is read as usual.)
        raise ScanError(f"{path}: is a device, not a log file; give a log file (or pipe the log on stdin)")
    try:
        if stat.S_ISFIFO(st.st_mode):
            fh: BinaryIO = _open_fifo(path)
        else:
            fh = open(path, "rb")  # noqa: SIM115
    except PermissionError:
        raise ScanError(f"{path}: permission denied") from None
    except OSError as exc:
        raise ScanError(f"{path}: {exc.strerror}") from None
    try:
        return decoded(fh, str(path), owned=True, seekable=stat.S_ISREG(st.st_mode))
    except BaseException:
        fh.close()
        raise


# Compressed or archived input, told by its first bytes (never by the file name): decompressed where the
# standard library can, refused with a message otherwise, so that "no failure found" is only ever said of text.
_MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"\x1f\x8b", "gzip"),
    (b"BZh", "bzip2"),
    (b"\xfd7zXZ\x00", "xz"),
    (b"\x28\xb5\x2f\xfd", "zstd"),
    (b"\x04\x22\x4d\x18", "lz4"),
    (b"PK\x03\x04", "zip"),
    (b"7z\xbc\xaf\x27\x1c", "7z"),
)
HEAD_BYTES = max(len(m) for m, _ in _MAGIC)


def codec(head: bytes) -> str | None:
    for magic, kind in _MAGIC:
        if head.startswith(magic):
            if kind == "bzip2" and not (len(head) >= 4 and head[3:4] in b"123456789"):
                continue  # "BZh" then a block size digit; a log line may well start with "BZh..."
            return kind
    return None


class _Decoded(io.RawIOBase):
    """A decompressing reader that closes what it reads from (when it owns it)."""

    def __init__(self, reader: Any, owned: Any, kind: str) -> None:
        self.reader = reader
        self.owned = owned
        self.kind = kind

    def readable(self) -> bool:
        return True

    def read(self, n: int = -1) -> bytes:
        data: bytes = self.reader.read(n)
        return data

    def read1(self, n: int = -1) -> bytes:
        data: bytes = self.reader.read1(n) if hasattr(self.reader, "read1") else self.reader.read(n)
        return data

    def close(self) -> None:
        try:
            self.reader.close()
        finally:
            if self.owned is not None:
                self.owned.close()
            super().close()


def decoded(fh: Any, name: str, *, owned: bool, seekable: bool = False) -> BinaryIO:
    """`fh`, decompressed when its first bytes say it is gzip, bzip2 or xz; ScanError for a format that is
    not read (zstd without a decoder, lz4, zip, 7z)."""
    parts: list[bytes] = []
    got = 0
    while got < HEAD_BYTES:  # a pipe may hand over fewer bytes than asked
        part = fh.read(HEAD_BYTES - got)
        if not part:
            break
        parts.append(part)
        got += len(part)
    head = b"".join(parts)
    if seekable:
        fh.seek(0)
        src: Any = fh
    else:
        src = _Prepend(head, fh, owned=owned)
    kind = codec(head)
    if kind is None:
        return src  # type: ignore[no-any-return]
    if kind == "gzip":
        reader: Any = gzip.GzipFile(fileobj=src)
    elif kind == "bzip2":
        import bz2

        reader = bz2.BZ2File(src)
    elif kind == "xz":
        import lzma

        reader = lzma.LZMAFile(src)  # noqa: SIM115 - returned open; _Decoded closes it
    elif kind == "zstd":
        try:
            import zstandard
        except ImportError:
            raise ScanError(
                f"{name}: zstd-compressed, and no zstd decoder is installed; decompress it first "
                f"(zstd -dc FILE | denpex-kb scan -) or pip install zstandard"
            ) from None
        reader = zstandard.ZstdDecompressor().stream_reader(src, read_across_frames=True)
    else:
        raise ScanError(f"{name}: {'an lz4-compressed stream' if kind == 'lz4' else f'a {kind} archive'}, not a log; "
                        "extract the log first")
    return _Decoded(reader, src if owned else None, kind)  # type: ignore[return-value]


FIFO_WAIT = 60.0  # seconds a named pipe may stay without a writer (DENPEX_KB_FIFO_WAIT overrides)


def _open_fifo(path: Path) -> BinaryIO:
    """A named pipe, opened without blocking: a pipe that no process ever opens for writing would otherwise hang
    the scan forever. Waits up to FIFO_WAIT seconds for the first data (or a writer that closes)."""
    import select

    try:
        wait = float(os.environ.get("DENPEX_KB_FIFO_WAIT", FIFO_WAIT))
    except ValueError:
        wait = FIFO_WAIT
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        poller = select.poll()
        poller.register(fd, select.POLLIN | select.POLLHUP)
        if not poller.poll(max(wait, 0) * 1000):
            raise ScanError(f"{path}: a named pipe that nothing wrote to within {wait:g} s (DENPEX_KB_FIFO_WAIT sets the wait)")
        os.set_blocking(fd, True)
        return open(fd, "rb", closefd=True)
    except BaseException:
        os.close(fd)
        raise


def refuse_endless_stdin(fh: Any) -> None:
    """Raise ScanError when stdin is a device that never ends (stdin < /dev/zero); a terminal or /dev/null is fine."""
    try:
        fd = fh.fileno()
        st = os.fstat(fd)
    except (AttributeError, OSError, ValueError):
        return
    if not stat.S_ISCHR(st.st_mode) or os.isatty(fd):
        return
    try:
        null = os.stat(os.devnull)
    except OSError:
        return
    if st.st_rdev != null.st_rdev:
        raise ScanError("stdin is a device, not a log (e.g. /dev/zero); give a log file or pipe the log in")


class _Prepend(io.RawIOBase):
    """A stream whose first bytes were already read to sniff for compression."""

    def __init__(self, head: bytes, rest: BinaryIO, owned: bool = True) -> None:
        self.head = head
        self.rest = rest
        self.owned = owned

    def readable(self) -> bool:
        return True

    def read(self, n: int | None = -1) -> bytes:
        if self.head:
            out, self.head = self.head, b""
            if n is None or n < 0:
                return out + self.rest.read()
            if n < len(out):
                out, self.head = out[:n], out[n:]
                return out
            return out + self.rest.read(n - len(out)) if n > len(out) else out
        return self.rest.read(n)  # type: ignore[arg-type]  # None reads to the end, as io's readers take it

    def close(self) -> None:
        if self.owned:
            self.rest.close()
        super().close()


def _read_block(fh: BinaryIO) -> tuple[bytes, ScanError | None]:
    """Up to CHUNK bytes. A compressed stream is read in small steps, so that a truncated or corrupt one
    keeps what came before the damage."""
    if not isinstance(fh, (gzip.GzipFile, _Decoded)):
        try:
            return fh.read(CHUNK) or b"", None
        except OSError as exc:
            return b"", ScanError(f"the log could not be read ({exc}); findings cover what was read")
    parts: list[bytes] = []
    size = 0
    while size < CHUNK:
        try:
            part = fh.read1(min(1 << 20, CHUNK - size))
        except Exception as exc:  # noqa: BLE001 - EOFError, OSError, lzma.LZMAError, zstd errors: a damaged stream
            return b"".join(parts), ScanError(f"the log is truncated or corrupt ({exc}); findings cover what was read")
        if not part:
            break
        parts.append(part)
        size += len(part)
    return b"".join(parts), None


def read_chunks(fh: BinaryIO, limit: int | None, on_bytes: Callable[[int], None] | None, errors: list[ScanError]) -> Iterator[bytes]:
    """Chunks that end at a line break (the last one may not), with over-long lines cut to MAX_LINE bytes.
    `limit`: stop after this many bytes (a worker's share of a file)."""
    carry = b""
    left = limit
    while True:
        block, error = _read_block(fh)
        if left is not None:
            block = block[:left]
            left -= len(block)
        if on_bytes and block:
            on_bytes(len(block))
        if error is not None:
            errors.append(error)
        if not block or error is not None:
            data = carry + block
            if data:
                yield data
            return
        data = carry + block if carry else block
        cut = data.rfind(b"\n")
        if cut < 0:
            # One line longer than a chunk: keep its start (what a signature can need) and its last `\r`
            # segment, drop the rest.
            carry = _keep_ends(data)
            continue
        yield data[: cut + 1] if cut + 1 < len(data) else data
        carry = data[cut + 1 :]
        if len(carry) > MAX_LINE * 4:
            carry = _keep_ends(carry)


NUMPY_FROM = 1 << 20  # below this, bytes.count is as fast and numpy's import is not worth it
_SCRATCH = threading.local()  # count_newlines' buffer: one per thread, since threads may scan at once


@lru_cache(maxsize=1)
def numpy_module() -> Any:
    try:  # counts line breaks about four times faster than bytes.count
        import numpy

        return numpy
    except ImportError:  # pragma: no cover - numpy is a dependency; keep working without it
        return None


def count_newlines(view: Any) -> int:
    """Line breaks in a bytes-like object (bytes, memoryview of a memory map), without copying big ones."""
    np = numpy_module() if len(view) >= NUMPY_FROM else None
    if np is None:
        return (view if isinstance(view, bytes) else bytes(view)).count(b"\n")
    data = np.frombuffer(view, np.uint8)
    scratch = getattr(_SCRATCH, "eq", None)
    if scratch is None or len(scratch) < len(data):
        scratch = _SCRATCH.eq = np.empty(max(len(data), CHUNK), dtype=bool)  # reused: no page faults per call
    out = scratch[: len(data)]
    np.equal(data, 10, out=out)
    return int(np.count_nonzero(out))


class Newlines:
    """The line breaks of one window of bytes (a memory map's), marked in one pass, then counted between any two
    offsets of the window: a window with many candidate lines costs one pass and a cheap count per line, not a
    copy and a byte-by-byte count of each stretch between them."""

    def __init__(self, view: Any) -> None:
        np = numpy_module()
        self.data: bytes | None = None
        self.marks: Any = None
        if np is None:  # pragma: no cover - numpy is a dependency
            self.data = bytes(view)
            return
        data = np.frombuffer(view, np.uint8)
        scratch = getattr(_SCRATCH, "window", None)  # not count_newlines' buffer: both are used at once
        if scratch is None or len(scratch) < len(data):
            scratch = _SCRATCH.window = np.empty(max(len(data), CHUNK), dtype=bool)
        self.marks = scratch[: len(data)]
        np.equal(data, 10, out=self.marks)
        self._count = np.count_nonzero

    def between(self, start: int, end: int) -> int:
        """Line breaks in window[start:end]."""
        if self.marks is None:  # pragma: no cover
            assert self.data is not None
            return self.data.count(b"\n", start, end)
        return int(self._count(self.marks[start:end])) if end > start else 0
