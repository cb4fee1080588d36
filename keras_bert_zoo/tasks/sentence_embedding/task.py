"""`sentence_embedding`: train, evaluate and serve a bi-encoder on the task contract.

One shared encoder embeds every text alone (`models.BertTextGroupEmbedder` in
training, its `embedder`, a `BertSentenceEmbedder`, to serve): pooling over the real
tokens (`pooling`: the init checkpoint's sentence-transformers setting, else `mean`),
an optional projection (`embedding_dim`) and L2 normalization (`normalize_embeddings`,
likewise).

Training data (`reader`): pairs and triplets train with in-batch negatives
(`MultipleNegativesRankingLoss`: every positive and hard negative of the batch is a
candidate of every anchor, at `scale`; `symmetric_loss` adds the reverse term), scored
pairs with CoSENT (or `loss=cosine_similarity`: the squared error of the cosine);
`matryoshka_dims` takes the loss at nested prefixes too (`MatryoshkaLoss`);
`gradient_cache_chunk_size` embeds each batch in chunks (GradCache) through the task's
`training_loss_fn`. Prompts (`query_prompt`, `document_prompt`) are prepended to the
anchor/query texts and to the others, in training, evaluation and the export.

Evaluation (`evaluation`), by what the eval data holds: STS on scored pairs
(`spearman`, the primary metric, and `pearson`), retrieval on BEIR's files (`ndcg@10`
primary, `mrr@10`, `recall@1/10/100`, `map`), or the retrieval of each anchor's
positive among the split's positives (`mrr@10` primary). An `eval_file` and the
retrieval files are two evaluation splits (`dev`, `retrieval`), each reported under its
name; the first one's primary metric picks the best model.

Predictions (`--mode=predict` on `predict_file`): `embeddings_<split>.npy` and
`embeddings_<split>.jsonl` (`prediction_files`).

State (saved with the model, read by the export): the kind of training data, the
pooling and normalization as resolved, the projection width, the Matryoshka widths and
the prompts.

Example:

```python
from keras_bert_zoo import tasks

task = tasks.create_task("sentence_embedding", train_file="pairs.tsv", eval_file="sts.tsv")
task.use_init_checkpoint("all-MiniLM-L6-v2")  # pooling and normalization from it
examples = task.read("dev")
preprocessor = task.make_preprocessor(tokenizer)
model = task.build_model(encoder)
answers = tasks.predict(task, model, examples, preprocessor)
print(task.evaluate(answers, examples))  # {"spearman": ..., "pearson": ...}
```
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import tensorflow as tf

from keras_bert_zoo.tasks._shared import check_sequence_length
from keras_bert_zoo.tasks.registry import register_task
from keras_bert_zoo.tasks.sentence_embedding import evaluation
from keras_bert_zoo.tasks.sentence_embedding.distillation import EmbeddingDistillation
from keras_bert_zoo.tasks.sentence_embedding.features import EXAMPLE_INDEX, embedding_features
from keras_bert_zoo.tasks.sentence_embedding.options import (
    COSENT,
    COSINE_SIMILARITY,
    DOCUMENT,
    MULTIPLE_NEGATIVES_RANKING,
    QUERY,
    SENTENCE_EMBEDDING_OPTIONS,
    read_settings,
)
from keras_bert_zoo.tasks.sentence_embedding.prediction_files import write_embedding_files
from keras_bert_zoo.tasks.sentence_embedding.reader import (
    PAIRS,
    RETRIEVAL_SPLIT,
    SCORED_PAIRS,
    TEXTS,
    EmbeddingExample,
    EmbeddingFiles,
    single_text_example,
)
from keras_bert_zoo.tasks.sentence_embedding.serving import (
    EMBEDDING_TEXT_FIELD,
    EmbeddingServing,
)
from keras_bert_zoo.tasks.task import Task
from keras_bert_zoo.utils.errors import UserError

DEFAULT_POOLING = "mean"
DEFAULT_NORMALIZE = True
_STATE_KEYS = (
    "training_data",
    "pooling",
    "normalize",
    "embedding_dim",
    "matryoshka_dims",
    "query_prompt",
    "document_prompt",
)


@dataclasses.dataclass(frozen=True)
class EmbeddingAnswer:
    """The vectors of an example's texts: float32 `[texts, dim]`, in its texts' order."""

    vectors: np.ndarray


@register_task("sentence_embedding")
class SentenceEmbeddingTask(EmbeddingDistillation, EmbeddingServing, Task):
    """Sentence embeddings (bi-encoders): see the module docstring.

    Splits: `train` (`train_file`), `dev` (`eval_file`), `retrieval` (`queries_file` +
    `corpus_file` + `qrels_file`), `test` (`predict_file`, the texts to embed). With
    both evaluation splits, `dev` picks the best model.

    Served by `serving.EmbeddingServing`: `serving_default` takes raw texts `sentence`
    and answers `embedding` (float32 `[batch, dim]`, the texts as given), the `query`
    and `document` signatures prepend the task's prompts (when set).
    """

    text_fields = (EMBEDDING_TEXT_FIELD,)
    higher_is_better = True
    options = SENTENCE_EMBEDDING_OPTIONS
    default_max_seq_length = 128
    label_keys = ("label",)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # A length not given takes the init checkpoint's (`use_init_checkpoint`).
        self._length_given = kwargs.get("max_seq_length") is not None
        self.settings = read_settings(self.option_values)
        self.files = EmbeddingFiles(
            self.task_name, self.data_dir, self.option_values, self.settings, encoding=self.encoding
        )
        self._pooling = self.option_values["pooling"]
        self._normalize = self.settings.normalize
        self._training_data: str | None = None
        self._eval_kind: str | None = None
        self._examples: dict[str, list[EmbeddingExample]] = {}

    # === Settings ===

    @property
    def pooling(self) -> str:
        """`mean`, `cls` or `max`: the option, else the init checkpoint's, else mean."""
        return self._pooling or DEFAULT_POOLING

    @property
    def normalize(self) -> bool:
        """Whether the vectors are L2-normalized (option, checkpoint, else True)."""
        return DEFAULT_NORMALIZE if self._normalize is None else self._normalize

    @property
    def prompts(self) -> dict[str, str]:
        """`{role: prefix}` of the query and document texts."""
        return {
            QUERY: self.option_values["query_prompt"] or "",
            DOCUMENT: self.option_values["document_prompt"] or "",
        }

    @property
    def query_prompt(self) -> str | None:
        """The anchor/query prefix, or None (what the export's `query` signature adds)."""
        return self.prompts[QUERY] or None

    @property
    def document_prompt(self) -> str | None:
        """The document prefix, or None (the export's `document` signature adds it)."""
        return self.prompts[DOCUMENT] or None

    def use_init_checkpoint(self, path: str) -> None:
        """Takes the pooling, normalization and (without `max_seq_length`) the length
        the options leave open from the sentence-transformers settings of `path`
        (`modules.json`, `sentence_bert_config.json`), when it has them."""
        from keras_bert_zoo.checkpoints.sentence_transformers import (
            read_sentence_transformers_settings,
        )

        settings = read_sentence_transformers_settings(path)
        if settings is None:
            return
        if self._pooling is None:
            self._pooling = settings.pooling
        if self._normalize is None:
            self._normalize = settings.normalize
        if not self._length_given and settings.max_seq_length:
            self.max_seq_length = int(settings.max_seq_length)

    @property
    def training_data(self) -> str:
        """What the training file holds: `pairs` (pairs, triplets) or `scored_pairs`."""
        if self._training_data is None:
            if not self.files.has("train"):
                raise UserError(
                    f"{self.task_name}: pass --train_file (pairs, triplets or scored pairs)"
                )
            self._training_data = self.files.kind("train")
        return self._training_data

    @property
    def primary_metric(self) -> str:
        """By the (first) evaluation split's data: `spearman` (scored pairs),
        `ndcg@10` (retrieval files), `mrr@10` (pairs)."""
        if self._eval_kind is None:
            splits = self.split_names()["eval"]
            if not splits:
                return evaluation.PRIMARY_METRICS[SCORED_PAIRS]
            self._eval_kind = self.files.kind(splits[0])
        return evaluation.PRIMARY_METRICS[self._eval_kind]

    # === Data ===

    def split_names(self) -> dict[str, tuple[str, ...]]:
        """`train`, `test` and the evaluation splits: `dev` (`eval_file`) and
        `retrieval` (the retrieval files), each when given."""
        return {
            mode: tuple(split for split in splits if self.files.has(split))
            for mode, splits in (
                ("train", ("train",)),
                ("eval", ("dev", RETRIEVAL_SPLIT)),
                ("predict", ("test",)),
            )
        }

    def read(self, split: str) -> list[EmbeddingExample]:
        known = ("train", "dev", RETRIEVAL_SPLIT, "test")
        if split not in known:
            raise UserError(
                f"{self.task_name} has no split {split!r}; its splits are {', '.join(known)}"
            )
        if split not in self._examples:
            examples = self.files.examples(split)
            if split == "train":
                self._training_data = examples[0].kind
            self._examples[split] = examples
        return list(self._examples[split])

    def examples_from_texts(self, texts, split: str = "input") -> list[EmbeddingExample]:
        """Examples of raw texts to embed (one string each), as documents
        (`predict_text_role`)."""
        role = self.option_values["predict_text_role"]
        examples = []
        for index, text in enumerate(texts):
            if not isinstance(text, str):
                raise UserError(
                    f"{self.task_name} embeds one text an item; item {index} is {text!r}"
                )
            examples.append(
                single_text_example(
                    f"{split}-{index}", text, role, TEXTS, str(index), f"{split} item {index}"
                )
            )
        return examples

    # === Features ===

    def make_preprocessor(self, tokenizer):
        """The one single-text `BertPreprocessor`: every text is packed alone."""
        from keras_bert_zoo.text import BertPreprocessor

        return BertPreprocessor(tokenizer, sequence_length=self.max_seq_length)

    def features(self, examples, preprocessor, *, training: bool) -> tf.data.Dataset:
        """One feature an example: its texts (prompted) packed `[texts, seq_len]`,
        `example_index` and, for scored pairs, the score as `label`."""
        examples = list(examples)
        with_scores = bool(examples) and examples[0].kind == SCORED_PAIRS
        if training and examples and examples[0].kind not in (PAIRS, SCORED_PAIRS):
            raise UserError(f"{examples[0].source}: training needs pairs, triplets or scored pairs")
        return embedding_features(
            examples, preprocessor, prompts=self.prompts, with_scores=with_scores
        )

    # === Model ===

    def build_model(self, encoder):
        """`BertTextGroupEmbedder(encoder, pooling, embedding_dim, normalize)`."""
        from keras_bert_zoo.models import BertTextGroupEmbedder

        check_sequence_length(self.max_seq_length, encoder)
        model = BertTextGroupEmbedder(
            encoder,
            pooling=self.pooling,
            embedding_dim=self.settings.embedding_dim,
            normalize=self.normalize,
        )
        dims = self.settings.matryoshka_dims
        if dims and dims[0] > model.output_dim:
            raise UserError(
                f"--matryoshka_dims={','.join(map(str, dims))}: the vectors are "
                f"{model.output_dim} wide"
            )
        return model

    def _loss_name(self) -> str:
        chosen, data = self.option_values["loss"], self.training_data
        if chosen == "auto":
            return MULTIPLE_NEGATIVES_RANKING if data == PAIRS else COSENT
        if data == PAIRS and chosen != MULTIPLE_NEGATIVES_RANKING:
            raise UserError(
                f"--loss={chosen} trains on scored pairs; the training file holds pairs "
                f"without a --score_column ({self.option_values['score_column']!r})"
            )
        if data == SCORED_PAIRS and chosen == MULTIPLE_NEGATIVES_RANKING:
            raise UserError(
                "--loss=multiple_negatives_ranking trains on pairs or triplets; the training "
                "file holds scored pairs (use cosent or cosine_similarity)"
            )
        return chosen

    def loss(self):
        """By the training data and `loss`: `MultipleNegativesRankingLoss` (pairs,
        triplets), `CoSENTLoss` or `CosineSimilarityLoss` (scored pairs), wrapped in
        `MatryoshkaLoss` with `matryoshka_dims`."""
        from keras_bert_zoo.models import embedding_losses

        name, scale = self._loss_name(), float(self.option_values["scale"])
        if name == MULTIPLE_NEGATIVES_RANKING:
            loss = embedding_losses.MultipleNegativesRankingLoss(
                scale=scale, symmetric=bool(self.option_values["symmetric_loss"])
            )
        elif name == COSENT:
            loss = embedding_losses.CoSENTLoss(scale=scale)
        else:
            assert name == COSINE_SIMILARITY
            loss = embedding_losses.CosineSimilarityLoss()
        if self.settings.matryoshka_dims:
            loss = embedding_losses.MatryoshkaLoss(loss, self.settings.matryoshka_dims)
        return loss

    def training_loss_fn(self):
        """GradCache's loss function with `gradient_cache_chunk_size`, else None."""
        chunk_size = int(self.option_values["gradient_cache_chunk_size"])
        if chunk_size <= 0:
            return None
        from keras_bert_zoo.models.gradient_cache import gradient_cache_loss_fn

        return gradient_cache_loss_fn(chunk_size)

    # === Answers ===

    def postprocess(self, outputs, meta, examples) -> list[EmbeddingAnswer]:
        """One `EmbeddingAnswer` an example: its texts' vectors, in example order."""
        vectors = np.asarray(outputs, np.float32)
        order = np.asarray(meta[EXAMPLE_INDEX])
        if vectors.shape[0] != len(examples) or sorted(order.tolist()) != list(
            range(len(examples))
        ):
            raise RuntimeError(
                f"{self.task_name}: {vectors.shape[0]} outputs do not match "
                f"{len(examples)} examples"
            )
        ordered = np.empty_like(vectors)
        ordered[order] = vectors
        return [
            EmbeddingAnswer(row[: len(example.texts)])
            for row, example in zip(ordered, examples, strict=True)
        ]

    def evaluate(self, answers, examples) -> dict[str, float]:
        """STS, retrieval or pair-retrieval metrics (`evaluation.evaluate_embeddings`)."""
        return evaluation.evaluate_embeddings([answer.vectors for answer in answers], examples)

    def write_predictions(self, answers, examples, output_dir: str, split: str) -> list[str]:
        """Writes `embeddings_<split>.npy` and `embeddings_<split>.jsonl`
        (`prediction_files.write_embedding_files`)."""
        return write_embedding_files(
            [answer.vectors for answer in answers], examples, output_dir, split
        )

    # === State ===

    def state(self) -> dict[str, Any]:
        """What serving needs: the training data's kind, pooling, normalization,
        projection and Matryoshka widths, prompts."""
        return {
            # Known once the training file is read (or the state loaded).
            "training_data": self._training_data,
            "pooling": self.pooling,
            "normalize": self.normalize,
            "embedding_dim": self.settings.embedding_dim,
            "matryoshka_dims": list(self.settings.matryoshka_dims),
            "query_prompt": self.prompts[QUERY],
            "document_prompt": self.prompts[DOCUMENT],
        }

    def description(self, tokenizer) -> dict[str, Any]:
        """`Task.description` and, as a pretrained embedding export records them, the
        prompts, pooling and normalization at its top (what search tools read)."""
        return {
            **super().description(tokenizer),
            "query_prompt": self.query_prompt,
            "document_prompt": self.document_prompt,
            "pooling": self.pooling,
            "normalize": self.normalize,
        }

    def load_state(self, state) -> None:
        state = dict(state)
        if not state:
            return
        missing = [key for key in _STATE_KEYS if key not in state]
        if missing:
            raise UserError(f"{self.task_name}: the saved task state lacks {missing}")
        for option, key in (("pooling", "pooling"), ("normalize_embeddings", "normalize")):
            given = self.option_values[option]
            if option == "normalize_embeddings":
                given = self.settings.normalize
            if given is not None and given != state[key]:
                raise UserError(
                    f"--{option}={given} contradicts the saved model's {key}={state[key]}"
                )
        for key in ("query_prompt", "document_prompt", "embedding_dim", "matryoshka_dims"):
            if self.state()[key] != state[key]:
                raise UserError(
                    f"--{key}={self.option_values[key]!r} contradicts the saved model's "
                    f"{key}={state[key]!r}"
                )
        self._pooling, self._normalize = state["pooling"], bool(state["normalize"])
        if state["training_data"] is not None:
            self._training_data = state["training_data"]
