"""The settings of `sentence_embedding` (`TaskOption`s) and what they mean together.

The file options it shares with `text_classification` (`train_file`, `eval_file`,
`predict_file`, `input_format`, `has_header`, `delimiter`) are the same `TaskOption`
objects, so the flags of `run_finetuning` have one meaning. `read_settings` checks the
family's own options and parses their lists.

Example:

```python
from keras_bert_zoo.tasks.sentence_embedding.options import read_settings

settings = read_settings(task.option_values)
settings.matryoshka_dims  # (384, 256, 128, 64)
```
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from keras_bert_zoo.layers.pooling import POOLING_MODES
from keras_bert_zoo.models.embedding_losses import DEFAULT_SCALE
from keras_bert_zoo.tasks.sentence.text_classification_options import (
    TEXT_CLASSIFICATION_OPTIONS,
)
from keras_bert_zoo.tasks.task import TaskOption
from keras_bert_zoo.utils.errors import UserError

_SHARED = {option.name: option for option in TEXT_CLASSIFICATION_OPTIONS}
# The same objects as text_classification's: one flag, one meaning.
SHARED_FILE_OPTIONS = tuple(
    _SHARED[name]
    for name in (
        "train_file",
        "eval_file",
        "predict_file",
        "input_format",
        "has_header",
        "delimiter",
    )
)

# The losses `loss` names; `auto` picks by the data (pairs/triplets: in-batch
# negatives; scored pairs: CoSENT).
MULTIPLE_NEGATIVES_RANKING = "multiple_negatives_ranking"
COSENT = "cosent"
COSINE_SIMILARITY = "cosine_similarity"
LOSSES = ("auto", MULTIPLE_NEGATIVES_RANKING, COSENT, COSINE_SIMILARITY)
PAIR_LOSSES = (MULTIPLE_NEGATIVES_RANKING,)
SCORED_LOSSES = (COSENT, COSINE_SIMILARITY)

QUERY, DOCUMENT = "query", "document"

SENTENCE_EMBEDDING_OPTIONS = (
    *SHARED_FILE_OPTIONS,
    TaskOption(
        "anchor_column",
        "anchor",
        "sentence_embedding: the anchor (query) column, or a scored pair's first text "
        "(default: anchor).",
    ),
    TaskOption(
        "positive_column",
        "positive",
        "sentence_embedding: the positive column, or a scored pair's second text "
        "(default: positive).",
    ),
    TaskOption(
        "negative_columns",
        None,
        "sentence_embedding: comma-separated hard-negative columns (default: every column "
        "whose name starts with 'negative').",
    ),
    TaskOption(
        "score_column",
        "score",
        "sentence_embedding: the score column of scored pairs (default: score; a file "
        "without it holds pairs or triplets).",
    ),
    TaskOption(
        "score_range",
        "0,1",
        "sentence_embedding: 'low,high' of the scores, mapped to [0, 1] (default: 0,1; "
        "STS-B: 0,5); a score outside is an error.",
    ),
    TaskOption(
        "loss",
        "auto",
        "sentence_embedding: the loss; auto: multiple_negatives_ranking for pairs and "
        "triplets, cosent for scored pairs.",
        choices=LOSSES,
    ),
    TaskOption(
        "scale",
        DEFAULT_SCALE,
        "sentence_embedding: the scale (inverse temperature) of the in-batch and CoSENT "
        "losses (default: 20).",
    ),
    TaskOption(
        "symmetric_loss",
        False,
        "sentence_embedding: multiple_negatives_ranking adds the positive -> anchors term "
        "(default: false).",
    ),
    TaskOption(
        "matryoshka_dims",
        None,
        "sentence_embedding: comma-separated prefix widths (e.g. 384,256,128,64) the loss "
        "is also taken at (Matryoshka; default: none).",
    ),
    TaskOption(
        "pooling",
        None,
        "sentence_embedding: mean, cls or max over the real tokens (default: the init "
        "checkpoint's sentence-transformers pooling, else mean).",
    ),
    TaskOption(
        "normalize_embeddings",
        None,
        "sentence_embedding: 'true' or 'false': L2-normalize the vectors (default: the "
        "init checkpoint's sentence-transformers setting, else true).",
    ),
    TaskOption(
        "embedding_dim",
        0,
        "sentence_embedding: a Dense projection to this width (default 0: none, the "
        "encoder's width).",
    ),
    TaskOption(
        "gradient_cache_chunk_size",
        0,
        "sentence_embedding: embed each batch in chunks of this many examples (GradCache, "
        "large in-batch negatives on small memory; default 0: off).",
    ),
    TaskOption(
        "query_prompt",
        "",
        "sentence_embedding: prefix of the anchor/query texts (e.g. 'query: '), in "
        "training, evaluation and the export (default: none).",
    ),
    TaskOption(
        "document_prompt",
        "",
        "sentence_embedding: prefix of positives, negatives and corpus texts (e.g. "
        "'passage: '; default: none).",
    ),
    TaskOption(
        "queries_file",
        None,
        "sentence_embedding: retrieval evaluation queries (BEIR queries.jsonl: _id, "
        "text; or TSV/CSV), relative to --data_dir.",
    ),
    TaskOption(
        "corpus_file",
        None,
        "sentence_embedding: retrieval evaluation corpus (BEIR corpus.jsonl: _id, "
        "title, text; or TSV/CSV), relative to --data_dir.",
    ),
    TaskOption(
        "qrels_file",
        None,
        "sentence_embedding: retrieval judgements (BEIR qrels TSV with a header: "
        "query-id, corpus-id, score), relative to --data_dir.",
    ),
    TaskOption(
        "predict_text_role",
        DOCUMENT,
        "sentence_embedding --mode=predict: the texts of --predict_file are documents "
        "(document_prompt) or queries (query_prompt); default: document.",
        choices=(DOCUMENT, QUERY),
    ),
)


@dataclasses.dataclass(frozen=True)
class EmbeddingSettings:
    """What the options make of a `sentence_embedding` task.

    Attributes:
        negative_columns: the hard-negative columns given, or None (by name prefix).
        score_low, score_high: the range `score_range` maps to [0, 1].
        matryoshka_dims: the Matryoshka widths, widest first, or ().
        embedding_dim: the projection's width, or None.
        normalize: the `normalize_embeddings` given, or None (the checkpoint's).
        retrieval_files: `(queries, corpus, qrels)` options given, or None.
    """

    negative_columns: tuple[str, ...] | None
    score_low: float
    score_high: float
    matryoshka_dims: tuple[int, ...]
    embedding_dim: int | None
    normalize: bool | None
    retrieval_files: tuple[str, str, str] | None


def _comma_list(value) -> tuple[str, ...]:
    return tuple(part.strip() for part in str(value).split(",") if part.strip())


def _positive_int(name: str, text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise UserError(f"--{name}: {text!r} is not an integer") from None
    if value < 1:
        raise UserError(f"--{name}: {value} is not a width >= 1")
    return value


def _flag_bool(name: str, value) -> bool | None:
    if value is None or isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "1", "yes"):
        return True
    if text in ("false", "0", "no"):
        return False
    raise UserError(f"--{name}={value!r}: give true or false")


def read_settings(options: Mapping[str, Any]) -> EmbeddingSettings:
    """The settings of `options` (the task's option values), checked.

    Raises:
        UserError: an option out of range or malformed, naming its flag.
    """
    if options["input_format"] == "fasttext":
        raise UserError(
            "sentence_embedding reads tsv, csv or jsonl files, not --input_format=fasttext"
        )
    if options["pooling"] is not None and options["pooling"] not in POOLING_MODES:
        raise UserError(f"--pooling={options['pooling']!r} is not one of {POOLING_MODES}")
    bounds = _comma_list(options["score_range"])
    try:
        low, high = (float(bound) for bound in bounds)
    except ValueError:
        raise UserError(
            f"--score_range={options['score_range']!r}: give 'low,high' (e.g. 0,5)"
        ) from None
    if not low < high:
        raise UserError(f"--score_range={options['score_range']!r}: low must be below high")
    dims = tuple(
        _positive_int("matryoshka_dims", dim)
        for dim in _comma_list(options["matryoshka_dims"] or "")
    )
    if len(set(dims)) != len(dims):
        raise UserError(f"--matryoshka_dims={options['matryoshka_dims']!r} lists a width twice")
    embedding_dim = int(options["embedding_dim"] or 0)
    if embedding_dim < 0:
        raise UserError(f"--embedding_dim={embedding_dim}: give a width >= 1, or 0 for none")
    if int(options["gradient_cache_chunk_size"]) < 0:
        raise UserError("--gradient_cache_chunk_size must be >= 0 (0: off)")
    if float(options["scale"]) <= 0:
        raise UserError(f"--scale={options['scale']} must be positive")
    retrieval = tuple(options[name] for name in ("queries_file", "corpus_file", "qrels_file"))
    if any(retrieval) and not all(retrieval):
        missing = [
            name
            for name, given in zip(
                ("queries_file", "corpus_file", "qrels_file"), retrieval, strict=True
            )
            if not given
        ]
        raise UserError(
            "retrieval evaluation reads three files: pass "
            f"{', '.join('--' + name for name in missing)} too"
        )
    negatives = options["negative_columns"]
    return EmbeddingSettings(
        negative_columns=_comma_list(negatives) if negatives else None,
        score_low=low,
        score_high=high,
        matryoshka_dims=tuple(sorted(dims, reverse=True)),
        embedding_dim=embedding_dim or None,
        normalize=_flag_bool("normalize_embeddings", options["normalize_embeddings"]),
        retrieval_files=retrieval if all(retrieval) else None,
    )
