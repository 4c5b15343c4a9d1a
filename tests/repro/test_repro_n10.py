"""Wrapper entries (ray-worker-died, sagemaker-user-script-error) in a whole log: `scan` must name the failure
they wrap as the root cause and report the wrapper as collateral.

The logs are assembled from real lines only: the wrappers' text as users pasted it in public issues (and as the
upstream source prints it), around a real CUDA out-of-memory line taken from kb/cuda-out-of-memory.yaml's examples.
"""

from __future__ import annotations

from denpex_kb import scan

# kb/cuda-out-of-memory.yaml, example from https://github.com/RistoranteRist/FastFlow/issues/4
CUDA_OOM = (
    "RuntimeError: CUDA out of memory. Tried to allocate 74.00 MiB (GPU 0; 11.91 GiB total capacity; 10.79 GiB "
    "already allocated; 12.94 MiB free; 11.21 GiB reserved in total by PyTorch) If reserved memory is >> allocated "
    "memory try setting max_split_size_mb to avoid fragmentation.  See documentation for Memory Management and "
    "PYTORCH_CUDA_ALLOC_CONF"
)


def _ids(findings) -> set[str | None]:
    return {f.id for f in findings}


def test_ray_wrapper_around_cuda_oom_is_collateral():
    # Ray driver output: ray.get() re-raises the remote error as RayTaskError(<cause>) with the worker's traceback
    # (https://github.com/markingprowlik/EasyR1/issues/9), then the colocated actor is reported dead
    # (https://github.com/verl-project/verl/issues/4921).
    lines = [
        "Traceback (most recent call last):",
        '  File "/workspaces/EasyR1/verl/single_controller/ray/base.py", line 47, in func',
        "    output = ray.get(output)",
        "ray.exceptions.RayTaskError(OutOfMemoryError): ray::WorkerDict.actor_rollout_ref_update_actor() "
        "(pid=118848, ip=10.130.71.7, actor_id=b2ba64f62469495ea505301701000000, "
        "repr=<verl.single_controller.ray.base.WorkerDict object at 0x7b8aac2e25c0>)",
        '  File "/workspaces/EasyR1/verl/single_controller/ray/base.py", line 432, in func',
        CUDA_OOM,
        "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.",
        "        class_name: create_colocated_worker_cls.<locals>.WorkerDict",
        "        actor_id: 5066c201b724a3936948a11201000000",
        "        pid: 87687",
        "The actor is dead because its worker process has died. Worker exit type: SYSTEM_ERROR Worker exit detail: "
        "Worker unexpectedly exits with a connection error code 2. End of file. There are some potential root causes. "
        "(1) The process is killed by SIGKILL by OOM killer due to high memory usage. (2) ray stop --force is called. "
        "(3) The worker is crashed unexpectedly due to SIGSEGV or other unexpected errors.",
    ]
    report = scan(lines)
    assert report.initiating is not None
    assert report.initiating.id == "cuda-out-of-memory"
    assert "ray-worker-died" in _ids(report.collateral)


def test_ray_wrapper_alone_is_reported():
    # Without the wrapped error in the log, scan still names the wrapper (the most telling fallout).
    lines = [
        "2023-01-03 10:33:59,262 WARNING worker.py:1851 -- A worker died or was killed while executing a task by an "
        "unexpected system error. To troubleshoot the problem, check the logs for the dead worker. RayTask ID: "
        "be0b7347b0de0ee661f8264c798330a1fb9495ac01000000 Worker ID: "
        "3b61456135c8a2927850fed0656f24db22c3f18b7709071caf6110cd Node ID: "
        "bb7ad71d7c2e3dc14ef6d5f1d815e38190100fea0a70c30cac2c1f75 Worker IP address: x.x.x.x Worker port: 40371 "
        "Worker PID: 279406 Worker exit type: SYSTEM_ERROR Worker exit detail: Worker unexpectedly exits with a "
        "connection error code 2. End of file.",
    ]
    report = scan(lines)
    assert report.initiating is not None
    assert report.initiating.id == "ray-worker-died"


def test_sagemaker_wrapper_around_cuda_oom_is_collateral():
    # A training job's log: the script's own error, then the toolkit's failure report and the SDK's exception
    # (wrapper lines from https://github.com/aws/sagemaker-python-sdk/issues/658,
    # https://github.com/huggingface/notebooks/issues/136 and https://github.com/aws/amazon-sagemaker-examples/issues/3444).
    lines = [
        "2023-02-28 09:23:39,944 sagemaker-training-toolkit INFO     Invoking user script",
        "Traceback (most recent call last):",
        CUDA_OOM,
        "2019-02-25 17:22:36,331 sagemaker-containers ERROR ExecuteUserScriptError:",
        "sagemaker.exceptions.UnexpectedStatusException: Error for Training job cluster-eames-: Failed. Reason: "
        "AlgorithmError: ExecuteUserScriptError:",
        "ExitCode 1",
    ]
    report = scan(lines)
    assert report.initiating is not None
    assert report.initiating.id == "cuda-out-of-memory"
    assert "sagemaker-user-script-error" in _ids(report.collateral)


def test_sagemaker_wrapper_alone_is_reported():
    lines = [
        "UnexpectedStatusException: Error for Training job pytorch-training-2020-10-26-17-35-06-746: Failed. "
        "Reason: AlgorithmError: ExecuteUserScriptError:",
        'Command "/opt/conda/bin/python train_deploy.py --backend gloo --epochs 1 --num_labels 2"',
    ]
    report = scan(lines)
    assert report.initiating is not None
    assert report.initiating.id == "sagemaker-user-script-error"
