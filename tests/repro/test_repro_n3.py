"""Reproductions for the Hugging Face setup failures and for launcher/orchestrator wrappers.

The Hugging Face tests run the real transformers / datasets / huggingface_hub in a subprocess, without network
access to the Hub (offline mode), and check that `scan` names the entry. They need an interpreter that has
those packages: the current one, or the one named by DENPEX_HF_PYTHON (e.g. a scratch venv).

The wrapper tests build a multi-line log from real lines (a known root cause, then the wrapper's own text as
the software prints it, with its source in a comment) and check that `scan` keeps the root cause as the
initiating failure and reports the wrapper as collateral.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from denpex_kb import scan

HF_PYTHON = os.environ.get("DENPEX_HF_PYTHON", sys.executable)


def _has(module: str) -> bool:
    try:
        proc = subprocess.run([HF_PYTHON, "-c", f"import {module}"], capture_output=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return proc.returncode == 0


def _run_hf(tmp_path: Path, body: str, offline: bool = True) -> str:
    script = tmp_path / "load.py"
    script.write_text(textwrap.dedent(body))
    env = {**os.environ, "HF_HOME": str(tmp_path / "hf-home"), "OMP_NUM_THREADS": "1"}
    if offline:
        env["HF_HUB_OFFLINE"] = "1"
    proc = subprocess.run([HF_PYTHON, str(script)], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, timeout=300, env=env)
    assert proc.returncode != 0, proc.stdout
    return proc.stdout


needs_transformers = pytest.mark.skipif(not _has("transformers"), reason="transformers not importable by DENPEX_HF_PYTHON")
needs_datasets = pytest.mark.skipif(not _has("datasets"), reason="datasets not importable by DENPEX_HF_PYTHON")


def _initiating(output: str) -> str | None:
    report = scan(output.splitlines())
    return report.initiating.id if report.initiating else None


# --- hf-hub-unreachable -----------------------------------------------------------------------------------


@pytest.mark.repro
@needs_transformers
def test_offline_uncached_model_is_hf_hub_unreachable(tmp_path):
    output = _run_hf(tmp_path, """
        from transformers import AutoConfig
        AutoConfig.from_pretrained("bert-base-uncased")
        """)
    assert "We couldn't connect to 'https://huggingface.co'" in output
    assert _initiating(output) == "hf-hub-unreachable"


@pytest.mark.repro
@needs_transformers
def test_local_files_only_is_hf_hub_unreachable(tmp_path):
    output = _run_hf(tmp_path, """
        from huggingface_hub import hf_hub_download
        hf_hub_download("bert-base-uncased", "config.json", local_files_only=True)
        """, offline=False)
    assert "outgoing traffic has been disabled" in output
    assert _initiating(output) == "hf-hub-unreachable"


@pytest.mark.repro
@needs_datasets
def test_offline_uncached_dataset_is_hf_hub_unreachable(tmp_path):
    output = _run_hf(tmp_path, """
        import datasets
        datasets.load_dataset("stanfordnlp/imdb")
        """)
    assert "ConnectionError" in output
    assert _initiating(output) == "hf-hub-unreachable"


# --- transformers-unknown-architecture --------------------------------------------------------------------


@pytest.mark.repro
@needs_transformers
def test_unknown_model_type_is_transformers_unknown_architecture(tmp_path):
    model = tmp_path / "ckpt"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"model_type": "denpex_unreleased_moe", "hidden_size": 8}))
    output = _run_hf(tmp_path, f"""
        from transformers import AutoConfig
        AutoConfig.from_pretrained({str(model)!r})
        """)
    assert "does not recognize this architecture" in output
    assert _initiating(output) == "transformers-unknown-architecture"


# Verbatim traceback of transformers 4.23.1 (before the explanatory ValueError existed), from
# https://github.com/jianghoucheng/AlphaEdit/issues/27
OLD_TRANSFORMERS_KEYERROR = """\
Traceback (most recent call last):
  File "/usr/local/lib/python3.9/runpy.py", line 197, in _run_module_as_main
    return _run_code(code, main_globals, None,
  File "/usr/local/lib/python3.9/runpy.py", line 87, in _run_code
    exec(code, run_globals)
  File "/workspace/AlphaEdit/experiments/evaluate.py", line 547, in <module>
    main(
  File "/workspace/AlphaEdit/experiments/evaluate.py", line 118, in main
    model = AutoModelForCausalLM.from_pretrained(model_name).cuda()
  File "/usr/local/lib/python3.9/site-packages/transformers/models/auto/auto_factory.py", line 434, in from_pretrained
    config, kwargs = AutoConfig.from_pretrained(
  File "/usr/local/lib/python3.9/site-packages/transformers/models/auto/configuration_auto.py", line 790, in from_pretrained
    config_class = CONFIG_MAPPING[config_dict["model_type"]]
  File "/usr/local/lib/python3.9/site-packages/transformers/models/auto/configuration_auto.py", line 497, in __getitem__
    raise KeyError(key)
KeyError: 'llama'
"""


def test_old_transformers_keyerror_traceback_is_unknown_architecture():
    report = scan(OLD_TRANSFORMERS_KEYERROR.splitlines())
    assert report.initiating is not None
    assert report.initiating.id == "transformers-unknown-architecture"


def test_unrelated_keyerror_is_not_unknown_architecture():
    # https://github.com/alxndrTL/mamba.py/issues/63: a KeyError from a project's own config parsing
    log = """\
Traceback (most recent call last):
  File "<stdin>", line 1, in <module>
  File "/usr/local/lib/python3.10/dist-packages/mambapy/lm.py", line 289, in from_pretrained
    config = MambaConfig(d_model=config_data['d_model'], n_layers=config_data['n_layers'])
KeyError: 'n_layers'
"""
    report = scan(log.splitlines())
    assert all(f.id != "transformers-unknown-architecture" for f in report.findings)


# --- hf-datasets-cast-error -------------------------------------------------------------------------------


@pytest.mark.repro
@needs_datasets
@pytest.mark.parametrize("fmt, first, second", [
    ("json", '{"text": "a", "label": 1}\n', '{"text": "b", "score": 0.5}\n'),
    ("csv", "text,label\na,1\n", "text,label,extra\nb,2,x\n"),
])
def test_files_with_different_columns_are_hf_datasets_cast_error(tmp_path, fmt, first, second):
    ext = "jsonl" if fmt == "json" else "csv"
    (tmp_path / f"a.{ext}").write_text(first)
    (tmp_path / f"b.{ext}").write_text(second)
    output = _run_hf(tmp_path, f"""
        import datasets
        datasets.load_dataset({fmt!r}, data_files=["a.{ext}", "b.{ext}"])
        """)
    assert "An error occurred while generating the dataset" in output
    report = scan(output.splitlines())
    assert report.initiating is not None and report.initiating.id == "hf-datasets-cast-error"


# --- wrappers: the wrapped failure stays initiating -------------------------------------------------------

# A real CUDA OOM line (kb/cuda-out-of-memory.yaml, from https://github.com/RistoranteRist/FastFlow/issues/4).
CUDA_OOM = (
    "RuntimeError: CUDA out of memory. Tried to allocate 74.00 MiB (GPU 0; 11.91 GiB total capacity; 10.79 GiB "
    "already allocated; 12.94 MiB free; 11.21 GiB reserved in total by PyTorch) If reserved memory is >> allocated "
    "memory try setting max_split_size_mb to avoid fragmentation.  See documentation for Memory Management and "
    "PYTORCH_CUDA_ALLOC_CONF"
)


def _assert_wrapped(log: str, root: str, wrapper: str) -> None:
    report = scan(log.splitlines())
    assert report.initiating is not None and report.initiating.id == root, report.to_dict()
    wrappers = [f for f in report.findings if f.id == wrapper]
    assert wrappers, f"{wrapper} not reported: {report.to_dict()}"
    assert all(f.role == "collateral" for f in wrappers)


def test_mpi_abort_after_cuda_oom_keeps_the_oom_initiating():
    # Open MPI --tag-output prefixes ([1,N]<stderr>:) and the launcher's teardown blocks as printed in
    # https://github.com/ChenRocks/UNITER/issues/31 (whose root cause was this CUDA OOM on rank 0), and the
    # [mpi-abort] text of ompi/mpi/help-mpi-api.txt.
    log = "\n".join([
        "[1,0]<stderr>:Traceback (most recent call last):",
        '[1,0]<stderr>:  File "train.py", line 120, in <module>',
        "[1,0]<stderr>:    loss.backward()",
        f"[1,0]<stderr>:{CUDA_OOM}",
        "[1,1]<stderr>:RuntimeError: Horovod has been shut down. This was caused by an exception on one of the ranks "
        "or an attempt to allreduce, allgather or broadcast a tensor after one of the ranks finished execution. If "
        "the shutdown was caused by an exception, you should see the exception in the log before the first shutdown "
        "message.",
        "--------------------------------------------------------------------------",
        "MPI_ABORT was invoked on rank 0 in communicator MPI_COMM_WORLD",
        "with errorcode 1.",
        "",
        "NOTE: invoking MPI_ABORT causes Open MPI to kill all MPI processes.",
        "You may or may not see output from other processes, depending on",
        "exactly when Open MPI kills them.",
        "--------------------------------------------------------------------------",
        "--------------------------------------------------------------------------",
        "Primary job  terminated normally, but 1 process returned",
        "a non-zero exit code. Per user-direction, the job has been aborted.",
        "--------------------------------------------------------------------------",
        "--------------------------------------------------------------------------",
        "mpirun detected that one or more processes exited with non-zero status, thus causing",
        "the job to be terminated. The first process to do so was:",
        "",
        "  Process name: [[50371,1],0]",
        "  Exit code:    1",
        "--------------------------------------------------------------------------",
    ])
    _assert_wrapped(log, "cuda-out-of-memory", "mpi-abort-collateral")


def test_mpi_teardown_alone_is_reported_as_fallout():
    # https://github.com/horovod/horovod/issues/469: nothing but the launcher's report
    log = "\n".join([
        "-------------------------------------------------------",
        "Primary job  terminated normally, but 1 process returned",
        "a non-zero exit code. Per user-direction, the job has been aborted.",
        "-------------------------------------------------------",
        "--------------------------------------------------------------------------",
        "mpirun noticed that process rank 7 with PID 0 on node HOSTNAME exited on signal 9 (Killed).",
        "--------------------------------------------------------------------------",
    ])
    report = scan(log.splitlines())
    assert report.initiating is not None and report.initiating.id == "mpi-abort-collateral"
