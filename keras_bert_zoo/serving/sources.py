"""Where an export's model comes from, loaded once whatever the format.

* `FinetunedSource`: a fine-tuned model directory (`tasks.save_finetuned`, what
  `tools/run_finetuning.py` writes) or a loaded `tasks.FinetunedModel`; kind `"task"`.
* `PretrainedSource`: a pretrained checkpoint (Google or Hugging Face layout, with its
  `vocab.txt`; or the name of an installed one, `all-MiniLM-L6-v2`) served as an
  `"encoder"` (pooled and sequence outputs), a `"masked_lm"` (top-k fill-ins for each
  `[MASK]`), a `"sentence_embedding"` (one vector a text: the pooling and
  normalisation of a sentence-transformers model's `modules.json`, else mean pooling,
  normalised) or a `"hub_encoder_pair"` (the TF Hub style pair's encoder, with its MLM
  head when the checkpoint has one; its `pooled_output` is BERT's pooler, whatever
  the checkpoint's sentence-transformers files say).
* `ModelSource`: a model in memory with its task (any `tasks.servable.Servable`) and
  tokenizer; also what the other two load into, and what every exporter builds from.

`as_source` takes a source, a `FinetunedModel` or a fine-tuned directory.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from typing import Any, ClassVar

from keras_bert_zoo.serving.exporter import Option, OptionError

logger = logging.getLogger(__name__)

TASK = "task"
ENCODER = "encoder"
MASKED_LM = "masked_lm"
HUB_ENCODER_PAIR = "hub_encoder_pair"
SENTENCE_EMBEDDING = "sentence_embedding"
# Every kind a source loads, in the order the tool lists them.
KINDS = (TASK, ENCODER, MASKED_LM, SENTENCE_EMBEDDING, HUB_ENCODER_PAIR)

MAX_SEQ_LENGTH = Option(
    "max_seq_length",
    None,
    "Packed length (pretrained kinds; default 128, for sentence_embedding the "
    "sentence-transformers model's own max_seq_length; a task keeps its own).",
    type=int,
)
TOP_K = Option("top_k", 5, "masked_lm: fill-ins per [MASK].", type=int)
TEXT_FIELDS = Option(
    "text_fields", ("sentence",), "encoder / masked_lm: names of the 1-3 text inputs.", type=list
)
QUERY_PROMPT = Option(
    "query_prompt",
    None,
    "sentence_embedding: a prefix for queries (e.g. 'query: '); the export gains a query "
    "signature that prepends it.",
)
DOCUMENT_PROMPT = Option(
    "document_prompt",
    None,
    "sentence_embedding: a prefix for documents (e.g. 'passage: '); the export gains a "
    "document signature that prepends it.",
)
ALLOW_PARTIAL = Option(
    "allow_partial",
    False,
    "masked_lm: accept a checkpoint without MLM head (left random).",
    type=bool,
)


@dataclasses.dataclass(frozen=True)
class ModelSource:
    """A model in memory and what serves it: what every exporter builds from.

    Attributes:
        task: the `tasks.servable.Servable` (a task with its state restored,
            `EncoderServable`, `MaskedLMServable`); None for the TF Hub style pair.
        model: the trained Keras model `task.build_model` made (for the pair, a
            `BertEncoder` or `BertPretrainer`).
        tokenizer: the `BertTokenizer` it was trained with.
        preprocessor: the task's preprocessor; default `task.make_preprocessor(tokenizer)`.
        name: the export's default model name (SavedModel), or None.
        max_seq_length: the TF Hub style pair's packed length (default 128).
    """

    task: Any
    model: Any
    tokenizer: Any
    preprocessor: Any = None
    name: str | None = None
    max_seq_length: int | None = None

    kinds: ClassVar[tuple[str, ...]] = KINDS
    default_kind: ClassVar[str | None] = None

    @property
    def names_itself(self) -> bool:
        return self.name is not None

    def load(self, kind: str | None = None) -> ModelSource:
        return self

    def task_preprocessor(self):
        """The preprocessor given, else the task's own."""
        if self.preprocessor is not None:
            return self.preprocessor
        return self.task.make_preprocessor(self.tokenizer)


class FinetunedSource:
    """A fine-tuned model: a directory `tasks.save_finetuned` wrote (model.keras,
    vocab.txt, task.json), a fine-tuning run's `--output_dir` (its `finetuned/`, the
    model `run_finetuning --mode=export` exports) or a loaded `tasks.FinetunedModel`.
    Its export's default model name is the task name with `/` replaced by `_`
    (`glue_sst2`).

    Args:
        finetuned: the directory or the `FinetunedModel`.
    """

    kinds: ClassVar[tuple[str, ...]] = (TASK,)
    default_kind: ClassVar[str] = TASK
    names_itself: ClassVar[bool] = True
    options: ClassVar[tuple[Option, ...]] = ()

    def __init__(self, finetuned):
        self.finetuned = finetuned

    def load(self, kind: str | None = TASK) -> ModelSource:
        from keras_bert_zoo.tasks.saving import FinetunedModel, load_finetuned

        check_kind(self, kind)
        finetuned = self.finetuned
        if not isinstance(finetuned, FinetunedModel):
            finetuned = load_finetuned(model_dir_of_run(os.fspath(finetuned)))
        return ModelSource(
            finetuned.task,
            finetuned.model,
            finetuned.tokenizer,
            preprocessor=finetuned.preprocessor,
            name=finetuned.task.task_name.replace("/", "_"),
        )


class PretrainedSource:
    """A pretrained checkpoint (Google or Hugging Face layout, with its `vocab.txt`), or
    a pretraining run's `--output_dir` (the checkpoint layout it wrote at its end,
    `export_google/` or `export_huggingface/`).

    Args:
        checkpoint_dir: str. The checkpoint directory or the run directory.
        max_seq_length: int or None. The packed length served (None: 128; a
            sentence embedding model's own).
        top_k: int. masked_lm: fill-ins per `[MASK]`.
        text_fields: the 1-3 text inputs (encoder, masked_lm).
        query_prompt, document_prompt: str or None. sentence_embedding: the prompts of
            the `query` / `document` signatures.
        allow_partial: bool. Accept a checkpoint without the MLM head (masked_lm, and
            the pair's `mlm`), which is then left random.
    """

    kinds: ClassVar[tuple[str, ...]] = (ENCODER, MASKED_LM, SENTENCE_EMBEDDING, HUB_ENCODER_PAIR)
    default_kind: ClassVar[str] = ENCODER
    names_itself: ClassVar[bool] = False
    options: ClassVar[tuple[Option, ...]] = (
        MAX_SEQ_LENGTH,
        TOP_K,
        TEXT_FIELDS,
        QUERY_PROMPT,
        DOCUMENT_PROMPT,
        ALLOW_PARTIAL,
    )

    def __init__(
        self,
        checkpoint_dir: str,
        *,
        max_seq_length: int | None = MAX_SEQ_LENGTH.default,
        top_k: int = TOP_K.default,
        text_fields=TEXT_FIELDS.default,
        query_prompt: str | None = QUERY_PROMPT.default,
        document_prompt: str | None = DOCUMENT_PROMPT.default,
        allow_partial: bool = ALLOW_PARTIAL.default,
    ):
        from keras_bert_zoo.checkpoints.installed import resolve_installed_checkpoint

        checkpoint_dir = resolve_installed_checkpoint(os.fspath(checkpoint_dir))
        self.checkpoint_dir = checkpoint_dir_of_run(checkpoint_dir)
        self.max_seq_length = max_seq_length
        self.top_k = top_k
        self.text_fields = tuple(text_fields)
        self.query_prompt = query_prompt
        self.document_prompt = document_prompt
        self.allow_partial = allow_partial

    def load(self, kind: str | None = ENCODER) -> ModelSource:
        from keras_bert_zoo.serving.servables import pretrained_servable

        kind = kind or self.default_kind
        check_kind(self, kind)
        if kind == HUB_ENCODER_PAIR:
            model, tokenizer = self._encoder_with_any_mlm_head()
            return ModelSource(None, model, tokenizer, max_seq_length=self.max_seq_length)
        servable, model, tokenizer = pretrained_servable(
            self.checkpoint_dir,
            kind,
            max_seq_length=self.max_seq_length,
            top_k=self.top_k,
            text_fields=self.text_fields,
            allow_partial=self.allow_partial,
            query_prompt=self.query_prompt,
            document_prompt=self.document_prompt,
        )
        return ModelSource(servable, model, tokenizer)

    def _encoder_with_any_mlm_head(self):
        """The checkpoint as a `BertPretrainer` when it holds the MLM head (or with
        `allow_partial`), else as a `BertEncoder`; and its tokenizer."""
        from keras_bert_zoo.checkpoints import CheckpointError, from_pretrained
        from keras_bert_zoo.text import BertTokenizer

        vocab = os.path.join(self.checkpoint_dir, "vocab.txt")
        if not os.path.isfile(vocab):
            raise FileNotFoundError(f"{self.checkpoint_dir}: no vocab.txt beside the checkpoint")
        try:
            model = from_pretrained(
                self.checkpoint_dir, model="pretrainer", allow_partial=self.allow_partial
            )
        except CheckpointError:
            model = from_pretrained(self.checkpoint_dir)
        return model, BertTokenizer(vocab)


def model_dir_of_run(path: str) -> str:
    """`path`, or its `finetuned/` when `path` is a fine-tuning run's `--output_dir` (its
    task.json beside `finetuned/`, the run's model, as `run_finetuning --mode=export`
    takes it) rather than a fine-tuned directory."""
    from keras_bert_zoo.tasks.saving import MODEL_FILE, TASK_FILE
    from keras_bert_zoo.utils.run_layout import FINETUNED_DIR

    inner = os.path.join(path, FINETUNED_DIR)
    if (
        not os.path.isfile(os.path.join(path, MODEL_FILE))
        and os.path.isfile(os.path.join(path, TASK_FILE))
        and os.path.isfile(os.path.join(inner, MODEL_FILE))
    ):
        logger.info("%s is a fine-tuning run: using its model, %s", path, inner)
        return inner
    return path


def task_and_preprocessor(source) -> tuple[Any, Any] | None:
    """`(task, preprocessor)` of a source whose task is known without loading its model
    (a fine-tuned directory's comes from its task.json and vocabulary; a `ModelSource`
    and a `FinetunedModel` hold theirs), for the checks an exporter makes before the
    model loads; None for a pretrained checkpoint (the encoder packs sentences)."""
    from keras_bert_zoo.tasks.saving import FinetunedModel

    if isinstance(source, ModelSource):
        return source.task, source.task_preprocessor()
    if not isinstance(source, FinetunedSource):
        return None
    finetuned = source.finetuned
    if isinstance(finetuned, FinetunedModel):
        return finetuned.task, finetuned.preprocessor
    from keras_bert_zoo.tasks.saving import (
        TASK_FILE,
        finetuned_tokenizer,
        read_task_description,
        task_from_description,
    )

    path = model_dir_of_run(os.fspath(finetuned))
    if not os.path.isfile(os.path.join(path, TASK_FILE)):
        return None  # loading it says what is missing
    description = read_task_description(path)
    task = task_from_description(description)
    return task, task.make_preprocessor(finetuned_tokenizer(path, description))


def load_preprocessor(source: str, *, max_seq_length: int | None = None):
    """The preprocessing a model was trained with, in one call, without loading the
    model: raw text in, the model's inputs out (`preprocessor(texts)` or in tf.data).

    Args:
        source: a fine-tuned directory or the `--output_dir` of its run (its task's own
            preprocessor: tokenizer, packing and length as in training), a checkpoint
            directory (Google, Hugging Face or sentence-transformers, with its
            `vocab.txt`), or an installed checkpoint's name (`all-MiniLM-L6-v2`).
        max_seq_length: the packed length of a checkpoint's texts (None: a
            sentence-transformers model's own, else 128). A fine-tuned model keeps the
            length it was trained with: another one is refused.

    Example:

    ```python
    preprocessor = keras_bert_zoo.load_preprocessor("all-MiniLM-L6-v2")
    inputs = preprocessor(tf.constant(["a first sentence", "another one"]))
    ```
    """
    from keras_bert_zoo.checkpoints.installed import resolve_installed_checkpoint
    from keras_bert_zoo.serving.servables import sentence_embedding_length
    from keras_bert_zoo.tasks.saving import (
        TASK_FILE,
        finetuned_tokenizer,
        read_task_description,
        task_from_description,
    )
    from keras_bert_zoo.text import BertPreprocessor, BertTokenizer
    from keras_bert_zoo.utils.errors import UserError

    path = model_dir_of_run(resolve_installed_checkpoint(os.fspath(source)))
    if os.path.isfile(os.path.join(path, TASK_FILE)):
        description = read_task_description(path)
        task = task_from_description(description)
        if max_seq_length is not None and max_seq_length != task.max_seq_length:
            raise UserError(
                f"max_seq_length={max_seq_length}: {path} was trained at "
                f"{task.max_seq_length} tokens, the length its preprocessor keeps"
            )
        return task.make_preprocessor(finetuned_tokenizer(path, description))
    vocab = os.path.join(path, "vocab.txt")
    if os.path.isfile(vocab):
        length = sentence_embedding_length(path, max_seq_length)
        return BertPreprocessor(BertTokenizer(vocab), sequence_length=length)
    raise FileNotFoundError(
        f"{source}: no task.json or vocab.txt (expected a fine-tuned directory, a run's "
        "--output_dir, a checkpoint directory or an installed checkpoint's name)"
    )


def load_inference_model(source: str):
    """The model a fine-tuned directory (or its run's `--output_dir`) serves, in one
    call: the one its preprocessor's batches go into (`FinetunedModel.inference_model`:
    a sentence embedder's embedder, not its training model)."""
    from keras_bert_zoo.tasks.saving import load_finetuned

    return load_finetuned(model_dir_of_run(os.fspath(source))).inference_model


def checkpoint_dir_of_run(path: str) -> str:
    """`path`, or the checkpoint layout a pretraining run's `--output_dir` holds
    (`export_google/`, else `export_huggingface/`: the run's model, written at its end);
    a run that wrote none is a `UserError` saying how to write one."""
    from keras_bert_zoo.utils.errors import UserError
    from keras_bert_zoo.utils.run_layout import CHECKPOINTS_DIR, CONFIG_FILE, EXPORT_DIRS

    if not (
        os.path.isfile(os.path.join(path, CONFIG_FILE))
        and os.path.isdir(os.path.join(path, CHECKPOINTS_DIR))
    ):
        return path
    for name in EXPORT_DIRS.values():
        layout = os.path.join(path, name)
        if os.path.isdir(layout):
            logger.info("%s is a pretraining run: exporting its model, %s", path, layout)
            return layout
    raise UserError(
        f"{path} is a pretraining run without a checkpoint layout "
        f"({' or '.join(EXPORT_DIRS.values())}): write one with tools/run_pretraining.py "
        f"--mode=export --output_dir={path}"
    )


def check_kind(source, kind: str | None) -> None:
    """Refuses (`OptionError`) a kind `source` does not load (None: its own)."""
    if kind is not None and kind not in source.kinds:
        raise OptionError(
            f"{{kind}}={kind}: a {type(source).__name__} exports {', '.join(source.kinds)}"
        )


def as_source(source):
    """`source` itself when it is one (it has `load`), else a `FinetunedSource` of it (a
    fine-tuned directory or a `tasks.FinetunedModel`)."""
    if hasattr(source, "load") and hasattr(source, "kinds"):
        return source
    return FinetunedSource(source)
