"""The environment of a child process that a test starts (a tool, a worker)."""

import os
import pathlib

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
