"""Texts -> vectors, from any of the three forms an embedding model takes on disk.

`open_embedder(model)` reads what `model` names and returns a `TextEmbedder`:

| `model`                                   | embeds with                                  |
|-------------------------------------------|----------------------------------------------|
| a SavedModel (`saved_model.pb`; or its    | the export's `serving_default` (raw text ->  |
| model directory: the newest version)      | `embedding`), in batches                     |
| a fine-tuned directory (`task.json`)      | the fine-tuned model's `embedder` and the    |
|                                           | task's preprocessor                          |
| a sentence-transformers directory, or an  | `BertSentenceEmbedder` over its weights, the |
| installed name (`all-MiniLM-L6-v2`)       | pooling and normalisation of its modules     |

The Keras models run through the prediction engine (`tasks.prediction`: batches of
texts of similar length, each trimmed to its longest row); a SavedModel answers the
batches it is given. Each embedder knows the prompts its model was trained or exported
with (`query_prompt`, `document_prompt`: the task's options, the export's
description), which the caller prepends (`embed(texts, prompt=...)`). A progress line
is logged every `utils.progress.PROGRESS_SECONDS`.

Example:

```python
from keras_bert_zoo.search.embedders import open_embedder

embedder = open_embedder("all-MiniLM-L6-v2")
vectors = embedder.embed(["A man plays a guitar.", "Stocks fell."])  # (2, 384) float32
```
"""

from __future__ import annotations

import abc
import os
from collections.abc import Sequence

import numpy as np

from keras_bert_zoo.utils.errors import UserError
from keras_bert_zoo.utils.progress import ProgressLog

DEFAULT_BATCH_SIZE = 64
# Texts tokenized per preprocessor call.
_TOKENIZE_BATCH = 256

SAVED_MODEL = "saved_model"
FINETUNED = "finetuned"
SENTENCE_TRANSFORMERS = "sentence_transformers"


class EmbedderError(UserError):
    """A `--model` that is none of the three forms an embedding model takes."""


class TextEmbedder(abc.ABC):
    """Embeds texts into float32 vectors, one row a text.

    Attributes:
        source: what the model was opened from (the path or installed name).
        kind: `saved_model`, `finetuned` or `sentence_transformers`.
        query_prompt, document_prompt: the model's prompts (None: none).
        batch_size: texts a model call.
    """

    kind: str = ""

    def __init__(
        self,
        source: str,
        *,
        query_prompt: str | None = None,
        document_prompt: str | None = None,
        batch_size: int = DEFAULT_BATCH_SIZE,
    ):
        if batch_size < 1:
            raise UserError(f"batch_size={batch_size}: must be >= 1")
        self.source = source
        self.query_prompt = query_prompt or None
        self.document_prompt = document_prompt or None
        self.batch_size = int(batch_size)

    def embed(self, texts: Sequence[str], *, prompt: str | None = None, what: str = "texts"):
        """float32 `[len(texts), dim]`: the vectors of `prompt + text` for each text.

        Args:
            texts: the texts.
            prompt: prepended to every text (None: none).
            what: what the texts are, for the progress lines.
        """
        texts = [f"{prompt or ''}{text}" for text in texts]
        if not texts:
            raise UserError("no texts to embed")
        progress = ProgressLog(len(texts), what, verb="embedded")
        chunks = []
        for chunk in self._embed_batches(texts, progress):
            chunks.append(np.asarray(chunk, np.float32))
        vectors = np.concatenate(chunks)
        progress.finish()
        if vectors.ndim != 2 or len(vectors) != len(texts):
            raise UserError(
                f"{self.source}: answered vectors of shape {vectors.shape} for {len(texts)} texts"
            )
        return vectors

    @abc.abstractmethod
    def _embed_batches(self, texts: list[str], progress: ProgressLog):
        """Yields the vectors of `texts` in order, in chunks, updating `progress`."""


class _InputsAreFeatures:
    """What the prediction engine reads of a task: the features are the model's inputs
    (a `BertSentenceEmbedder` takes the preprocessor's dict as it comes)."""

    @staticmethod
    def split_features(features):
        return dict(features), None, None


class KerasTextEmbedder(TextEmbedder):
    """A `BertSentenceEmbedder` and its preprocessor, run by the prediction engine.

    Args:
        model: a `BertSentenceEmbedder` (or a model with one as `embedder`).
        preprocessor: the single-text `BertPreprocessor`.
        source, kind, query_prompt, document_prompt, batch_size: as `TextEmbedder`'s.
    """

    def __init__(self, model, preprocessor, source: str, *, kind: str, **kwargs):
        super().__init__(source, **kwargs)
        self.model = getattr(model, "embedder", model)
        self.preprocessor = preprocessor
        self.kind = kind

    def _embed_batches(self, texts, progress):
        import tensorflow as tf

        from keras_bert_zoo.tasks.prediction import outputs_by_batch

        features = (
            tf.data.Dataset.from_tensor_slices(tf.constant(texts))
            .batch(_TOKENIZE_BATCH)
            .map(self.preprocessor, num_parallel_calls=tf.data.AUTOTUNE)
            .unbatch()
        )
        done = 0
        for _, vectors in outputs_by_batch(
            _InputsAreFeatures(), self.model, features, self.batch_size
        ):
            done += len(vectors)
            progress.update(done)
            yield vectors


class SavedModelTextEmbedder(TextEmbedder):
    """An embedding export (`tools/export_saved_model.py`): `serving_default` answers raw
    strings `sentence` with `embedding`; its prompts are read from its description
    (`assets.extra/export.json`).

    Args:
        path: the SavedModel's version directory.
        batch_size: texts a call.
    """

    kind = SAVED_MODEL

    def __init__(self, path: str, *, batch_size: int = DEFAULT_BATCH_SIZE):
        from keras_bert_zoo.models.sentence_embedder import EMBEDDING
        from keras_bert_zoo.serving.layout import read_export_description
        from keras_bert_zoo.serving.loading import load_served_model

        try:
            task = read_export_description(path).get("task") or {}
        except FileNotFoundError:
            task = {}
        super().__init__(
            path,
            query_prompt=task.get("query_prompt"),
            document_prompt=task.get("document_prompt"),
            batch_size=batch_size,
        )
        self.served = load_served_model(path)
        outputs = self.served.function.structured_outputs
        if EMBEDDING not in outputs or len(self.served.text_fields) != 1:
            raise EmbedderError(
                f"{path}: not an embedding export (serving_default takes "
                f"{list(self.served.text_fields)} and answers {sorted(outputs)}; expected one "
                f"text and {EMBEDDING!r}: tools/export_saved_model.py --kind=sentence_embedding)"
            )
        self._field, self._output = self.served.text_fields[0], EMBEDDING

    def _embed_batches(self, texts, progress):
        # The export pads a batch to its longest text: batches of similar lengths (by
        # characters, a proxy of the tokens) waste the least.
        order = np.argsort([len(text) for text in texts], kind="stable")
        vectors = None
        for start in range(0, len(texts), self.batch_size):
            rows = order[start : start + self.batch_size]
            answer = np.asarray(
                self.served(**{self._field: [texts[i] for i in rows]})[self._output]
            )
            if vectors is None:
                vectors = np.zeros((len(texts), *answer.shape[1:]), np.float32)
            vectors[rows] = answer
            progress.update(start + len(rows))
        yield vectors


def _holds_saved_model(path: str) -> bool:
    """A SavedModel version directory, or a TF Serving model directory of versions."""
    from keras_bert_zoo.serving.layout import existing_versions

    return os.path.isfile(os.path.join(path, "saved_model.pb")) or bool(existing_versions(path))


def _finetuned_embedder(path: str, batch_size: int) -> KerasTextEmbedder:
    from keras_bert_zoo.tasks.saving import load_finetuned

    finetuned = load_finetuned(path)
    if not hasattr(finetuned.model, "embedder") and not hasattr(finetuned.model, "embed_sequence"):
        raise EmbedderError(
            f"{path}: a fine-tuned {finetuned.task.task_name} model, not an embedding model "
            "(tools/run_finetuning.py --task=sentence_embedding writes one)"
        )
    options = getattr(finetuned.task, "option_values", {}) or {}
    return KerasTextEmbedder(
        finetuned.model,
        finetuned.preprocessor,
        path,
        kind=FINETUNED,
        query_prompt=options.get("query_prompt"),
        document_prompt=options.get("document_prompt"),
        batch_size=batch_size,
    )


def _sentence_transformers_embedder(
    source: str, path: str, batch_size: int, max_seq_length: int | None
) -> KerasTextEmbedder:
    from keras_bert_zoo.serving.servables import pretrained_servable
    from keras_bert_zoo.text import BertPreprocessor

    servable, model, tokenizer = pretrained_servable(
        path, "sentence_embedding", max_seq_length=max_seq_length
    )
    # Padded to a fixed length (the export pads to each batch's longest): the
    # prediction engine batches the features, then trims each batch to its longest row.
    preprocessor = BertPreprocessor(tokenizer, sequence_length=servable.max_seq_length)
    return KerasTextEmbedder(
        model,
        preprocessor,
        source,
        kind=SENTENCE_TRANSFORMERS,
        batch_size=batch_size,
    )


def open_embedder(
    model: str, *, batch_size: int = DEFAULT_BATCH_SIZE, max_seq_length: int | None = None
) -> TextEmbedder:
    """The `TextEmbedder` of `model` (see the module docstring).

    Args:
        model: a SavedModel (version or model directory), a fine-tuned directory (or
            the --output_dir of its run), a sentence-transformers (or plain BERT)
            checkpoint directory, or an installed checkpoint's name.
        batch_size: texts a model call.
        max_seq_length: the packed length of a checkpoint's texts (None: its
            sentence-transformers length, else 128); the other two forms keep theirs.

    Raises:
        EmbedderError: `model` is none of the three forms.
        FileNotFoundError: no such directory or installed checkpoint.
    """
    from keras_bert_zoo.checkpoints.installed import resolve_installed_checkpoint
    from keras_bert_zoo.serving.client import resolve_version_dir
    from keras_bert_zoo.serving.sources import model_dir_of_run
    from keras_bert_zoo.tasks.saving import TASK_FILE

    # A fine-tuning run's --output_dir stands for its model, as for export_saved_model.
    directory = model_dir_of_run(resolve_installed_checkpoint(os.fspath(model)))
    if not os.path.isdir(directory):
        raise FileNotFoundError(
            f"--model={model}: no such directory (expected a SavedModel, a fine-tuned "
            "directory, a sentence-transformers directory or an installed checkpoint's name)"
        )
    if _holds_saved_model(directory):
        return SavedModelTextEmbedder(resolve_version_dir(directory), batch_size=batch_size)
    if os.path.isfile(os.path.join(directory, TASK_FILE)):
        return _finetuned_embedder(directory, batch_size)
    if os.path.isfile(os.path.join(directory, "vocab.txt")):
        return _sentence_transformers_embedder(
            os.fspath(model), directory, batch_size, max_seq_length
        )
    raise EmbedderError(
        f"--model={model}: no saved_model.pb, task.json or vocab.txt in it (expected a "
        "SavedModel, a fine-tuned directory or a sentence-transformers directory)"
    )
