"""Reproductions of setup failures whose text the dynamic loader prints the same on a CPU-only machine.

A missing CUDA-stack library fails in glibc's loader before any GPU is touched, so an extension module linked
against a stub libnccl.so.2 that is then removed, or ctypes asked for libcudnn.so.9, shows the real message. Each
test runs the real software in a subprocess and checks that `scan` names the expected entry as the root cause.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig

import pytest

torch = pytest.importorskip("torch")

from _helpers import run_failing, torchrun_args, write_script  # noqa: E402

from denpex_kb import scan  # noqa: E402


def _root(output: str) -> str | None:
    report = scan(output.splitlines())
    return report.initiating.id if report.initiating else None


def _build_ext_linked_to_missing_nccl(tmp_path) -> None:
    """Compile `fake_nccl_ext` against a stub libnccl.so.2, then delete the stub so the import cannot load it."""
    if shutil.which("gcc") is None:
        pytest.skip("needs gcc to build the extension")
    write_script(tmp_path, "stub.c", "int ncclGetVersion(int *v){*v=0;return 0;}\n")
    write_script(
        tmp_path,
        "ext.c",
        """
        #include <Python.h>
        int ncclGetVersion(int *v);
        static struct PyModuleDef m = {PyModuleDef_HEAD_INIT, "fake_nccl_ext", NULL, -1, NULL};
        PyMODINIT_FUNC PyInit_fake_nccl_ext(void){int v; ncclGetVersion(&v); return PyModule_Create(&m);}
        """,
    )
    subprocess.run(
        ["gcc", "-shared", "-fPIC", "-o", "libnccl.so.2", "-Wl,-soname,libnccl.so.2", "stub.c"],
        cwd=tmp_path, check=True,
    )
    ext = "fake_nccl_ext" + sysconfig.get_config_var("EXT_SUFFIX")
    subprocess.run(
        ["gcc", "-shared", "-fPIC", "-I" + sysconfig.get_paths()["include"], "-o", ext, "ext.c", "-L.",
         "-l:libnccl.so.2"],
        cwd=tmp_path, check=True,
    )
    (tmp_path / "libnccl.so.2").unlink()


@pytest.mark.repro
def test_ctypes_load_of_missing_cudnn_is_shared_library_not_found(tmp_path):
    script = write_script(tmp_path, "job.py", "import ctypes\nctypes.CDLL('libcudnn.so.9')\n")
    output = run_failing([sys.executable, str(script)], tmp_path)
    assert "libcudnn.so.9: cannot open shared object file" in output
    assert _root(output) == "shared-library-not-found"


@pytest.mark.repro
def test_extension_linked_to_missing_nccl_under_torchrun_is_shared_library_not_found(tmp_path):
    _build_ext_linked_to_missing_nccl(tmp_path)
    script = write_script(tmp_path, "job.py", "import torch.distributed\nimport fake_nccl_ext\n")
    output = run_failing(torchrun_args(script, nproc=2, tee=True), tmp_path, timeout=90)
    assert "ImportError: libnccl.so.2: cannot open shared object file" in output
    assert _root(output) == "shared-library-not-found"


@pytest.mark.repro
def test_old_libstdcxx_first_on_loader_path_is_glibcxx_version_not_found(tmp_path):
    if shutil.which("gcc") is None:
        pytest.skip("needs gcc to build the stub library")
    old = tmp_path / "old"
    old.mkdir()
    write_script(tmp_path, "std.c", "int fake_cxx_sym(void){return 1;}\n")
    write_script(tmp_path, "old.map", "GLIBCXX_3.4.19 { global: fake_cxx_sym; local: *; };\n")
    subprocess.run(
        ["gcc", "-shared", "-fPIC", "-Wl,--version-script=old.map", "-Wl,-soname,libstdc++.so.6",
         "-o", str(old / "libstdc++.so.6"), "std.c"],
        cwd=tmp_path, check=True,
    )
    script = write_script(tmp_path, "job.py", "import torch\n")
    output = run_failing([sys.executable, str(script)], tmp_path, env={"LD_LIBRARY_PATH": str(old)})
    assert "libstdc++.so.6: version `GLIBCXX_" in output and "not found (required by" in output
    assert _root(output) == "glibcxx-version-not-found"
