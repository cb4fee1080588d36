"""The run directory: what every job writes in `--output_dir` besides checkpoints.

- the resume fingerprint: a rerun with the same `--output_dir` continues the run only
  when it is the same run (`check_same_run`, one line naming every setting that
  differs; `runners.fingerprint` says what is compared), or starts over there with
  `--overwrite_output_dir` (`clear_run`);
- `eval_results.json`: the last evaluation and the history of every evaluation of the
  directory, earlier (killed) runs' included (`EvalHistory`, `write_eval_results`);
- JSON-safe values (`json_safe`: JSON has no NaN);
- the clean-up of what a kill in the middle of an atomic write leaves
  (`remove_stale_temporaries`).

Every file is written through `keras_bert_zoo.utils.atomic`.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from keras_bert_zoo.checkpoints.export import export_checkpoint  # noqa: F401 - moved there
from keras_bert_zoo.utils.atomic import (  # noqa: F401 - json_safe, remove_stale_temporaries moved there
    json_safe,
    remove_stale_temporaries,
    write_json_atomically,
)
from keras_bert_zoo.utils.deprecation import moved_names
from keras_bert_zoo.utils.errors import UserError
from keras_bert_zoo.utils.run_layout import (  # noqa: F401 - re-exported
    CHECKPOINT_LAYOUTS,
    CHECKPOINTS_DIR,
    EVAL_RESULTS_FILE,
    EXPORT_DIRS,
)

logger = logging.getLogger(__name__)


# The old names of `check_checkpoint_layouts` and `CHECKPOINT_LAYOUTS`, for one release.
__getattr__ = moved_names(
    __name__,
    [],
    renamed={
        "check_export_formats": (__name__, "check_checkpoint_layouts"),
        "EXPORT_FORMATS": ("keras_bert_zoo.utils.run_layout", "CHECKPOINT_LAYOUTS"),
    },
)


def check_checkpoint_layouts(layouts: Sequence[str]) -> tuple[str, ...]:
    """`layouts` as a tuple; an unknown layout is an error naming it."""
    layouts = tuple(layouts)
    unknown = sorted(set(layouts) - set(CHECKPOINT_LAYOUTS))
    if unknown:
        raise UserError(f"checkpoint_layouts {unknown} unknown; choose from {CHECKPOINT_LAYOUTS}")
    return layouts


# === Resuming the same run, or starting over ===

OVERWRITE_FLAG = "--overwrite_output_dir"


def setting_differences(
    saved: Mapping[str, Any], current: Mapping[str, Any], keys: Sequence[str] | None = None
) -> list[tuple[str, Any, Any]]:
    """`(key, saved value, current value)` of each key of `keys` (default: the keys both
    have, in `current`'s order) whose values differ as JSON."""
    if keys is None:
        keys = [key for key in current if key in saved]
    return [
        (key, saved.get(key), current.get(key))
        for key in keys
        if json_safe(saved.get(key)) != json_safe(current.get(key))
    ]


def _shown(value: Any) -> str:
    """A recorded value as the refusal shows it: short, a digest by its first digits."""
    if value is None:
        return "unset"
    if isinstance(value, str):
        text = value[:19] if value.startswith("sha256:") else value
    else:
        text = json.dumps(json_safe(value), sort_keys=True)
    return text if len(text) <= 80 else text[:77] + "..."


def other_run_error(path: str, differences: Sequence[tuple[str, Any, Any]]) -> UserError:
    """The one line that refuses to resume a run with other settings: each setting that
    differs (`key old -> new`) and the two ways on."""
    changes = ", ".join(f"{key} {_shown(old)} -> {_shown(new)}" for key, old, new in differences)
    return UserError(
        f"{path}: this output directory holds a run with other settings: {changes}. Use "
        f"another --output_dir, or {OVERWRITE_FLAG} to start over here (it removes that run)"
    )


def check_same_run(
    path: str,
    saved: Mapping[str, Any],
    current: Mapping[str, Any],
    keys: Sequence[str] | None = None,
) -> None:
    """Refuses to resume a different run: `saved` (read from `path`, a fingerprint file
    of the directory) and `current` must agree on every key of `keys` (default: the keys
    both have); every difference is named in one line."""
    differences = setting_differences(saved, current, keys)
    if differences:
        raise other_run_error(path, differences)


def clear_run(output_dir: str, entries: Iterable[str]) -> list[str]:
    """Removes the run in `output_dir` (`--overwrite_output_dir`): its `entries` (names
    in it); returns those removed. Other files stay.

    Each entry is first renamed into one dot-named temporary directory, the checkpoints
    first, which is then deleted. A kill at any moment leaves either the whole old run
    or a directory without checkpoints, so never a part of it that a rerun resumes; the
    temporary is removed by the next run (`remove_stale_temporaries`).
    """
    if not os.path.isdir(output_dir):
        return []
    ordered = [CHECKPOINTS_DIR, *(name for name in entries if name != CHECKPOINTS_DIR)]
    present = [
        name for name in dict.fromkeys(ordered) if os.path.lexists(os.path.join(output_dir, name))
    ]
    if not present:
        return []
    trash = tempfile.mkdtemp(dir=output_dir, prefix=".overwritten.tmp-")
    for name in present:
        os.replace(os.path.join(output_dir, name), os.path.join(trash, name))
    shutil.rmtree(trash, ignore_errors=True)
    kept = sorted(name for name in os.listdir(output_dir) if not name.startswith("."))
    logger.info(
        "Started over in %s: removed %s%s",
        output_dir,
        ", ".join(present),
        f" (kept {', '.join(kept)}: not written by a run)" if kept else "",
    )
    return present


# === eval_results.json ===


def read_eval_results(output_dir: str) -> dict:
    """`output_dir/eval_results.json` (empty if none or unreadable)."""
    path = os.path.join(output_dir, EVAL_RESULTS_FILE)
    if not os.path.isfile(path):
        return {}
    try:
        with open(path, encoding="utf-8") as f:
            record = json.load(f)
    except (OSError, ValueError) as error:
        logger.warning("Ignoring unreadable %s: %s", path, error)
        return {}
    if not isinstance(record, dict):
        logger.warning("Ignoring unreadable %s: not a JSON object", path)
        return {}
    return record


def read_history(output_dir: str) -> list[dict]:
    """The `history` of `output_dir/eval_results.json` (empty if none or unreadable)."""
    return list(read_eval_results(output_dir).get("history", []))


class EvalHistory:
    """The evaluations of a run directory: earlier runs' and this run's.

    Earlier entries at or after this run's first evaluation belong to steps a killed
    run had gone past; this run redoes them, so they are dropped.
    """

    def __init__(self, output_dir: str, *, redoes_later_steps: bool = True):
        self.previous = read_history(output_dir)
        self.run: list[dict] = []
        # An `eval` run evaluates a saved model: it adds to the history, redoing nothing.
        self.redoes_later_steps = redoes_later_steps

    def add(self, step: int | None, results: Mapping[str, Any], **extra) -> None:
        self.run.append({"step": step, **extra, "results": results})

    @property
    def last(self) -> dict | None:
        """This run's newest evaluation."""
        return self.run[-1] if self.run else None

    def so_far(self) -> list[dict]:
        if not self.run or not self.redoes_later_steps:
            return list(self.previous) + list(self.run)
        first = self.run[0]["step"] or 0
        return [e for e in self.previous if (e.get("step") or 0) < first] + list(self.run)


def write_eval_results(output_dir: str, record: Mapping[str, Any]) -> str:
    """Writes `record` (`step`, `results`, `history`, and what the job adds) as
    `output_dir/eval_results.json`, NaN as null."""
    return write_json_atomically(os.path.join(output_dir, EVAL_RESULTS_FILE), json_safe(record))
