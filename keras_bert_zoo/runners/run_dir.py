"""The run directory: what every job writes in `--output_dir` besides checkpoints.

- the resume fingerprint: a rerun with the same `--output_dir` continues the run only
  when it is the same run (`check_same_run`);
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
from collections.abc import Mapping, Sequence
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


def check_same_run(
    path: str, saved: Mapping[str, Any], current: Mapping[str, Any], keys: Sequence[str]
) -> None:
    """Refuses to resume a different run: `saved` (read from `path`, the directory's
    fingerprint file) and `current` must agree on every key of `keys`."""
    for key in keys:
        if json_safe(saved.get(key)) != json_safe(current.get(key)):
            raise UserError(
                f"{path}: this output directory holds a run with {key}={saved.get(key)!r}, "
                f"but this run has {current.get(key)!r}. Use another --output_dir (or "
                "delete this one) to start a different run"
            )


# === eval_results.json ===


def read_history(output_dir: str) -> list[dict]:
    """The `history` of `output_dir/eval_results.json` (empty if none or unreadable)."""
    path = os.path.join(output_dir, EVAL_RESULTS_FILE)
    if not os.path.isfile(path):
        return []
    try:
        with open(path, encoding="utf-8") as f:
            return list(json.load(f).get("history", []))
    except (OSError, ValueError, AttributeError) as error:
        logger.warning("Ignoring unreadable %s: %s", path, error)
        return []


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
