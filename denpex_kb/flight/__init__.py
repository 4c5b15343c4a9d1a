"""Hang analysis from PyTorch flight-recorder dumps: which rank never entered which collective.

PyTorch's flight recorder keeps a ring buffer of each rank's recent collectives (``TORCH_FR_BUFFER_SIZE``,
formerly ``TORCH_NCCL_TRACE_BUFFER_SIZE``). ProcessGroupNCCL writes it on a timeout
(``TORCH_NCCL_DUMP_ON_TIMEOUT``) to ``<prefix><global rank>`` (``TORCH_FR_DUMP_TEMP_FILE``, formerly
``TORCH_NCCL_DEBUG_INFO_TEMP_FILE``, default ``/tmp/nccl_trace_rank_``); a gloo job gets the same bytes from
``torch._C._distributed_c10d._dump_fr_trace()`` (or ``_dump_fr_trace_json()``).

Formats read here (checked against the writers' headers shipped in the released wheels):

- 2.2: a bare pickled list of entries (``pg_id``, ``seq_id``, ``profiling_name``, ``input_sizes``,
  ``output_sizes``, ``time_created_us``, ``state``, ``retired``, ``frames``); no version, no group names.
- version "2.1" (torch 2.4): a dict with ``version``, ``pg_config``, ``entries`` (and ``nccl_comm_state``);
  entries have ``record_id``, ``pg_id``, ``process_group`` (name, desc), ``collective_seq_id``,
  ``p2p_seq_id``, ``op_id``, ``is_p2p``, sizes and dtypes, ``time_created_ns``, ``state``, ``frames``...
- version "2.4" (torch 2.7.1) adds ``pg_status`` and ``timeout_ms``; version "2.10" (torch 2.9.1, 2.13.0) adds
  ``comm_lib_version``, ``thread_id`` and ``thread_name``. The JSON form (``dump_json``) has the same keys, no
  frames, and ``0`` for an unknown discovery time.

A dump is untrusted input: it is unpickled by `SafeUnpickler`, which refuses every global (no class, no
function is ever looked up), so only plain containers and scalars can come out of it. No torch import.
"""

from .analysis import Analysis, Hang, Mismatch, analyze, analyze_paths
from .dump import (
    Dump,
    DumpError,
    Entry,
    SafeUnpickler,
    expand_paths,
    parse_dump,
    paused_collector,
    rank_from_name,
    read_dump,
    read_dumps,
    safe_loads,
)
from .text import fold_into_report, format_text

__all__ = [
    "Analysis",
    "Dump",
    "DumpError",
    "Entry",
    "Hang",
    "Mismatch",
    "SafeUnpickler",
    "analyze",
    "analyze_paths",
    "expand_paths",
    "fold_into_report",
    "format_text",
    "parse_dump",
    "paused_collector",
    "rank_from_name",
    "read_dump",
    "read_dumps",
    "safe_loads",
]
