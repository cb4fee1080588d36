"""Re-ranking a search's top-k with a cross-encoder: a fine-tuned sentence-pair model.

A bi-encoder embeds the query and each document apart; a cross-encoder reads them
together (`[CLS] query [SEP] document [SEP]`), which ranks better and costs one model
call per (query, document) pair, so it re-scores only the top-k of the search. The
cross-encoder is any fine-tuned sentence-pair task of this package
(`tools/run_finetuning.py --task=text_classification --text_pair_column=...`, or a GLUE
pair task such as `glue/qnli` or `glue/stsb`), loaded with `tasks.load_finetuned` and
run by `tasks.predict` (the task's own preprocessing and answers). A pair's score is
the probability of the relevant class (`label`: the task's positive class, "1", by
default) or, for a regression task, its predicted score.

Example:

```python
from keras_bert_zoo.search.reranking import CrossEncoderReranker

reranker = CrossEncoderReranker("qnli_finetuned/", label="entailment")
reranker.scores("who wrote hamlet?", ["Hamlet is a play by Shakespeare.", "Paris."])
```
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from keras_bert_zoo.utils.errors import UserError
from keras_bert_zoo.utils.progress import ProgressLog

DEFAULT_BATCH_SIZE = 32


class RerankerError(UserError):
    """A `--reranker` that is not a fine-tuned sentence-pair model, or a `--reranker_label`
    it does not have."""


class CrossEncoderReranker:
    """Scores (query, document) pairs with a fine-tuned sentence-pair model.

    Args:
        finetuned_dir: a directory written by `tools/run_finetuning.py` for a task of two
            texts (`finetuned/`), or that run's `--output_dir`.
        label: the class whose probability is the score (None: the task's positive
            class); not read for a regression task.
        batch_size: pairs a model call.

    Raises:
        RerankerError: the task does not read two texts, or has no class `label`.
    """

    def __init__(
        self, finetuned_dir: str, label: str | None = None, batch_size: int = DEFAULT_BATCH_SIZE
    ):
        from keras_bert_zoo.serving.sources import model_dir_of_run
        from keras_bert_zoo.tasks.saving import load_finetuned

        # A fine-tuning run's --output_dir stands for its model, as for export_saved_model.
        self.finetuned = load_finetuned(model_dir_of_run(finetuned_dir))
        task = self.finetuned.task
        self.batch_size = int(batch_size)
        text_fields = tuple(getattr(task, "text_fields", ()))
        if len(text_fields) != 2 or not hasattr(task, "examples_from_texts"):
            raise RerankerError(
                f"--reranker={finetuned_dir}: a {task.task_name} model reads "
                f"{len(text_fields) or 'no'} text(s) {list(text_fields)}; a re-ranker reads two "
                "(fine-tune text_classification with --text_pair_column, or a GLUE pair task)"
            )
        self.is_regression = bool(getattr(task, "is_regression", False))
        self.label = None
        if not self.is_regression:
            names = list(getattr(task, "label_names", None) or ())
            label = getattr(task, "positive_label", None) if label is None else label
            if label not in names:
                raise RerankerError(
                    f"--reranker={finetuned_dir}: the {task.task_name} model has no class "
                    f"{label!r} (its classes: {names}); pass --reranker_label"
                )
            self.label = label

    def scores(self, query: str, documents: Sequence[str]) -> np.ndarray:
        """float64 `[len(documents)]`: each (query, document) pair's score."""
        return self.pair_scores([(query, document) for document in documents])

    def pair_scores(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        """float64 `[len(pairs)]`: each pair's score (the class's probability, or the
        regression's score). A pass over many pairs logs its progress (pairs/s, ETA)."""
        from keras_bert_zoo.tasks.prediction import predict

        if not pairs:
            return np.zeros((0,), np.float64)
        task, model, preprocessor = (
            self.finetuned.task,
            self.finetuned.model,
            self.finetuned.preprocessor,
        )
        progress = ProgressLog(len(pairs), "(query, document) pairs", verb="re-scored")
        answers = predict(
            task,
            model,
            task.examples_from_texts(list(pairs)),
            preprocessor,
            self.batch_size,
            on_features=progress.update,
        )
        progress.finish()
        if self.is_regression:
            return np.array([answer.score for answer in answers], np.float64)
        return np.array([answer.probabilities[self.label] for answer in answers], np.float64)

    def rerank(self, query: str, documents: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """`(order, scores)`: the documents' positions by the cross-encoder's score,
        best first (ties keep the given order), and those scores."""
        scores = self.scores(query, documents)
        order = np.argsort(-scores, kind="stable")
        return order, scores[order]
