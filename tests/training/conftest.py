"""Helpers for the training tests: the training child process and its results."""

import pathlib
import re
import signal
import subprocess
import sys

import child_process
import numpy as np
import pytest

CHILD = pathlib.Path(__file__).resolve().parent / "_training_child.py"
REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]


child_env = child_process.environment


def run_child(args, *, kill_after_step=None, timeout=300, env=None):
    """Runs the training child; with `kill_after_step`, SIGKILLs it once it has logged
    that step. Returns `(returncode, output)`."""
    process = subprocess.Popen(
        [sys.executable, str(CHILD), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env or child_env(),
    )
    lines = []
    try:
        for line in process.stdout:
            lines.append(line)
            if kill_after_step is not None and re.search(
                rf"reporting: step {kill_after_step}/", line
            ):
                process.send_signal(signal.SIGKILL)
                break
        process.wait(timeout=timeout)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    output = "".join(lines)
    return process.returncode, output


def run_cluster(args, num_workers=2, timeout=300):
    """Runs `num_workers` training children as one MultiWorkerMirroredStrategy cluster on
    127.0.0.1 (TF_CONFIG). Returns `(returncodes, outputs)`."""
    return child_process.run_together(
        [[sys.executable, str(CHILD), *args]] * num_workers,
        child_process.worker_environments(num_workers),
        timeout,
    )


def load_result(path):
    with np.load(path) as data:
        losses = data["losses"]
        weights = [data[k] for k in sorted(data.files) if k.startswith("w")]
        restored = int(data["restored"])
    return losses, weights, restored


@pytest.fixture(scope="session")
def run_training():
    """`run_training(args, kill_after_step=None) -> (returncode, output)`."""
    return run_child


@pytest.fixture(scope="session")
def run_worker_cluster():
    """`run_worker_cluster(args) -> (returncodes, outputs)` of a 2-worker cluster."""
    return run_cluster


@pytest.fixture(scope="session")
def load_training_result():
    """`load_training_result(npz) -> (losses, weights, restored_step)`."""
    return load_result
