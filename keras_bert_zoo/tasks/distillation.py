"""The distillation half of the task contract: how a teacher's outputs become a
student's soft targets, and the unlabelled examples the teacher labels.

```
task.soft_targets()          -> a `SOFT_TARGET_KINDS` kind per model output
task.read_transfer_file(p)   -> unlabelled examples (`transfer-{n}`) of the transfer set
task.transfer_example(...)   -> one such example from a line's `text_fields`
task.check_distillation(...) -> refuses the settings the task cannot distil with
```

`Task` (`tasks.task`) extends `Distillable`, as it extends `Servable` for the serving
half; `runners.distillation` reads a task through these and nothing else.
"""

from __future__ import annotations

from typing import Literal

from keras_bert_zoo.models import distillation
from keras_bert_zoo.tasks._shared import read_tab_separated_fields

# How a teacher's output becomes the soft targets a student is trained on
# (`Task.soft_targets`), one kind per model output:
# * "classes": softmax over the last axis, one distribution per row: logits
#   `[batch, num_classes]` (sentence classification) or `[batch, num_choices]`
#   (multiple choice, a distribution over the choices).
# * "labels": an independent sigmoid per unit of `[batch, num_labels]` logits
#   (multi-label classification).
# * "score": a regression score `[batch, 1]`, matched by squared error, without a
#   temperature.
# * "positions": softmax over the sequence axis of `[batch, seq_len]` logits, the
#   padded positions (`input_mask == 0`) excluded (span heads: SQuAD start/end).
# * "token_classes": softmax over the last axis at every position of
#   `[batch, seq_len, num_classes]` logits, averaged over the real tokens
#   (`input_mask == 1`) (tagging).
# * "vectors": an embedding model's vectors `[..., dim]`, matched by their mean squared
#   error, through a learned projection when the student's width is not the teacher's
#   (sentence embeddings).
SoftTargetKind = Literal["classes", "labels", "score", "positions", "token_classes", "vectors"]

# The names are the distillation losses' own (`models.distillation.KINDS`).
SOFT_CLASSES: SoftTargetKind = distillation.CLASSES
SOFT_LABELS: SoftTargetKind = distillation.LABELS
SOFT_SCORE: SoftTargetKind = distillation.SCORE
SOFT_POSITIONS: SoftTargetKind = distillation.POSITIONS
SOFT_TOKEN_CLASSES: SoftTargetKind = distillation.TOKEN_CLASSES
SOFT_VECTORS: SoftTargetKind = distillation.VECTORS
SOFT_TARGET_KINDS: tuple[str, ...] = distillation.KINDS

# The example id of the n-th example (from 0) of `Distillable.read_transfer_file`.
TRANSFER_EXAMPLE_ID = "transfer-{}"


class Distillable:
    """What distillation reads of a task (`Task` extends it). The defaults declare no
    soft targets and read no transfer files; a task family overrides `soft_targets` and
    `transfer_example` to take part.

    The transfer-file reader uses the task's own settings, which `Task` sets:

    Attributes:
        task_name: the task's registry name (for messages).
        text_fields: the raw text fields, one per tab-separated field of a line.
        encoding: the text encoding of the task's files.
    """

    task_name: str
    text_fields: tuple[str, ...]
    encoding: str

    def soft_targets(self) -> SoftTargetKind | dict[str, SoftTargetKind]:
        """How a teacher's outputs become soft targets for a student of the same task.

        Returns:
            One kind of `SOFT_TARGET_KINDS` for a model with one output, or a dict
            `{output_name: kind}` with the keys of the model's output dict (SQuAD:
            `{"start_logits": "positions", "end_logits": "positions"}`). See the
            `SOFT_*` constants for what each kind means.

        Raises:
            NotImplementedError: the task declares none (the default).
        """
        raise NotImplementedError(
            f"{type(self).__name__} declares no soft targets; distillation needs them"
        )

    def check_distillation(self, *, hard_label_weight: float) -> None:
        """Refuses, in one line naming the flag, distillation settings the task cannot
        train with (the default accepts every setting).

        Args:
            hard_label_weight: `--hard_label_weight`, the task's own loss's weight.

        Raises:
            UserError: the settings cannot work for this task.
        """
        del hard_label_weight

    def read_transfer_file(self, path: str) -> list:
        """Unlabelled in-domain examples for a teacher to label (distillation's transfer
        set): one example per line, the task's `text_fields` separated by tabs.

        The file is decoded with `self.encoding`; blank lines are skipped. Example `n`
        (from 0) is `transfer-{n}` and has no label, as the task's own unlabelled test
        examples, so `features(examples, preprocessor, training=False)` takes them. A
        family may accept its own format as well (see its override).

        Args:
            path: the file.

        Returns:
            The examples, in file order.

        Raises:
            FileNotFoundError: `path` does not exist (the message names it).
            ValueError: the file is empty (naming it), or a line has another number of
                fields than `text_fields` (naming `path:line`, the number expected and
                the field names), or an example is malformed (the family's check).
        """
        rows = read_tab_separated_fields(
            path,
            self.text_fields,
            encoding=self.encoding,
            description=f"{self.task_name} transfer file",
        )
        return [
            self.transfer_example(TRANSFER_EXAMPLE_ID.format(n), fields, source)
            for n, (source, fields) in enumerate(rows)
        ]

    def transfer_example(self, example_id: str, fields: tuple[str, ...], source: str):
        """One unlabelled example from the `text_fields` of a transfer file's line.

        Args:
            example_id: the example's id (`transfer-{n}`).
            fields: the line's texts, one per name of `text_fields`, in that order.
            source: `"path:line"`, for error messages.

        Raises:
            NotImplementedError: the task reads no transfer files (the default).
        """
        raise NotImplementedError(
            f"{type(self).__name__} reads no transfer files; distillation needs them"
        )
