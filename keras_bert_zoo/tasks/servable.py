"""The serving half of the task contract: what the exporter reads of anything it serves.

`Task` (`tasks.task`) extends `Servable`; the pretrained encoder and masked LM
(`keras_bert_zoo.serving.servables`) implement it without being tasks. Everything the
exporter (`keras_bert_zoo.serving`) reads is declared here, with a default:

```
servable.task_name, .text_fields,
         .max_seq_length                   -> the name, the serving inputs, the packed length
servable.make_preprocessor(tokenizer)      -> the Keras layer the SavedModel runs
servable.serving_outputs(model, preproc.)  -> `serving_default`'s answers
servable.serving_model(model, truncate_dim=)
                                           -> the model an export runs (default `model`)
servable.extra_signatures(model, preproc.) -> more raw-text signatures ({} by default)
servable.state()                           -> what the trained model needs of it ({})
servable.label_names                       -> one name per class of the head's output, in
                                              output order, or None (default)
servable.serving_api                       -> "classify", "regress" or None (default): the
                                              TF Serving example API (`serve_examples`)
                                              the answers support (see SERVING_API_ANSWERS)
servable.description(tokenizer)            -> export.json's "task" entry (a task: what
                                              `tasks.saving` writes to task.json)
```
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Mapping
from typing import Any, Literal

import tensorflow as tf

from keras_bert_zoo.utils.errors import UserError

ServingApi = Literal["classify", "regress"]

CLASSIFY_API: ServingApi = "classify"
REGRESS_API: ServingApi = "regress"

# The answers of `serving_default` that each TF Serving example API needs:
# * "classify": `PROBABILITIES_ANSWER`, floating `[batch, len(label_names)]`, one
#   probability per label name (in `label_names` order); `serve_examples` returns the
#   label names as `classes` and these as `scores`.
# * "regress": `SCORE_ANSWER`, floating `[batch]`; `serve_examples` returns it as
#   `outputs`.
PROBABILITIES_ANSWER = "probabilities"
SCORE_ANSWER = "score"
SERVING_API_ANSWERS: Mapping[str, str] = {
    CLASSIFY_API: PROBABILITIES_ANSWER,
    REGRESS_API: SCORE_ANSWER,
}


class Servable(abc.ABC):
    """The serving half of the contract: what the exporter reads of anything it serves.

    `Task` extends it; `keras_bert_zoo.serving.servables` gives it to a pretrained
    encoder and masked LM. The exporter reads exactly these and nothing else (no
    attribute is probed for): a subclass overrides a default to declare more.

    Attributes:
        task_name: the name export.json records (a task's registry name).
        text_fields: the raw string inputs of `serving_default`, in packing order.
        max_seq_length: the packed length.
    """

    task_name: str
    text_fields: tuple[str, ...] = ()
    max_seq_length: int

    @abc.abstractmethod
    def make_preprocessor(self, tokenizer) -> Any:
        """The Keras layer that turns this task's raw text into model inputs.

        The same layer runs in the training pipeline and in the exported SavedModel.
        """

    def serving_outputs(self, model, preprocessor) -> Callable[..., dict[str, tf.Tensor]]:
        """A function from the raw string tensors named `text_fields` (each `[batch]`)
        to a dict of answer tensors, with the post-processing in TF ops, so that an
        exported SavedModel answers what `postprocess` answers."""
        raise NotImplementedError(f"{type(self).__name__} does not export a serving function yet")

    def serving_model(self, model, *, truncate_dim: int | None = None):
        """The model an export runs of the trained `model`: what `serve_ids` takes and
        answers, and what `serving_outputs` and `extra_signatures` get. Default: `model`
        itself; `truncate_dim` (cut embedding vectors to their first components) is
        refused, there being no vectors to cut."""
        if truncate_dim is not None:
            raise UserError(
                f"truncate_dim={truncate_dim}: {self.task_name} answers no embedding vectors"
            )
        return model

    def extra_signatures(self, model, preprocessor) -> dict[str, Callable]:
        """Raw-text signatures beside `serving_default`, `{name: fn}`, each `fn` a function
        of the same `text_fields` as `serving_outputs`' (an embedding model's `query` and
        `document`, which prepend their prompts). Default: none."""
        return {}

    def state(self) -> dict[str, Any]:
        """What a trained model needs from the task to be used without its training data.

        JSON-serializable: label names read from the training files, a label set given
        as an option, ... The runner saves it beside each checkpoint (the exporter with
        the SavedModel) and hands it to `load_state` before it evaluates, predicts or
        exports in a new process.
        """
        return {}

    def confusion_matrix(self, answers, examples) -> dict[str, Any] | None:
        """A single-label classifier's `{"labels": [...], "matrix": [[count]]}` (rows: the
        gold label, columns: the predicted one, in `labels` order) of `answers` to
        `examples`; None (default) for tasks that do not pick one label per example."""
        return None

    def learned_state_keys(self) -> tuple[str, ...]:
        """The keys of `state()` that training changes (e.g. tuned thresholds): they
        belong to a trained model's task.json, not to the run's fingerprint, which a
        resumed run must match before it has learned them again."""
        return ()

    @property
    def label_names(self) -> tuple[str, ...] | None:
        """One name per class of the head's output, in output order, or None (default:
        no classes, or none known). Export.json lists them; the "classify" API returns
        them as `classes`."""
        return None

    @property
    def serving_api(self) -> ServingApi | None:
        """Which TF Serving example API the `serving_default` answers support:
        `"classify"` (answers carry `PROBABILITIES_ANSWER`, floating
        `[batch, len(label_names)]`), `"regress"` (answers carry `SCORE_ANSWER`,
        floating `[batch]`) or None (default: no `serve_examples` signature).

        The exporter checks a declared API against the traced answers and refuses an
        export whose answers lack what the API needs.
        """
        return None

    def description(self, tokenizer) -> dict[str, Any]:
        """The JSON export.json records as its "task": enough to tell what was exported
        and with which settings. Default: the name, length, text fields and casing."""
        return {
            "task_name": self.task_name,
            "max_seq_length": self.max_seq_length,
            "text_fields": list(self.text_fields),
            "lowercase": bool(tokenizer.lowercase),
        }
