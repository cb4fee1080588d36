"""Child processes that tests start (tools, workers of a cluster): their environment,
free ports, and running several at once."""

import importlib.util
import json
import os
import pathlib
import socket
import subprocess
import sys

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]


def environment(extra=None) -> dict[str, str]:
    """This process's environment, for a child that imports this checkout (not whatever
    the venv's editable install points at), logs quietly and is no cluster's worker
    unless `extra` says so (`TF_CONFIG`)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT), env.get("PYTHONPATH", "")]).rstrip(
        os.pathsep
    )
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    env.pop("TF_CONFIG", None)
    env.update(extra or {})
    return env


def run_tool(script: str, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """`python tools/<script> <args>` as a user runs it, from the checkout, its output
    captured as text."""
    return subprocess.run(
        [sys.executable, script, *args],
        capture_output=True,
        text=True,
        env=environment(),
        cwd=REPO_ROOT,
        timeout=timeout,
    )


def free_ports(count: int) -> list[int]:
    """`count` distinct ports on 127.0.0.1 that were free a moment ago."""
    sockets = [socket.socket(socket.AF_INET, socket.SOCK_STREAM) for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def worker_environments(count: int) -> list[dict[str, str]]:
    """The environments of a `count`-worker MultiWorkerMirroredStrategy cluster on
    127.0.0.1: one `TF_CONFIG` each."""
    workers = [f"127.0.0.1:{port}" for port in free_ports(count)]
    return [
        environment(
            {
                "TF_CONFIG": json.dumps(
                    {"cluster": {"worker": workers}, "task": {"type": "worker", "index": index}}
                )
            }
        )
        for index in range(count)
    ]


def run_together(commands, envs, timeout: float, cwd=None) -> tuple[list[int], list[str]]:
    """Runs the commands at once (the workers of one cluster, or a single command);
    returns `(returncodes, outputs)`, stdout and stderr together. At `timeout` seconds
    (a hung collective) every process is killed, and its output says so."""
    processes = [
        subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
            cwd=cwd,
        )
        for command, env in zip(commands, envs, strict=True)
    ]
    outputs = []
    try:
        for process in processes:
            try:
                outputs.append(process.communicate(timeout=timeout)[0])
            except subprocess.TimeoutExpired:
                for other in processes:
                    other.kill()
                outputs.append(process.communicate()[0] + f"\n[killed after {timeout} s]")
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.wait()
    return [process.returncode for process in processes], outputs


def import_by_path(name: str, path) -> object:
    """The module at `path` (another test file, for its helpers), imported as `name`."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
