"""Mines hard negatives for (anchor, positive) training pairs with an embedding model.

Each anchor of --train_file (TSV, CSV or JSONL with --anchor_column and
--positive_column) is searched against the file's positives (or --corpus_file's
texts) by cosine; its positives and repeats of its texts are never its negatives, and
a candidate is skipped within --skip_top of the top, when it scores above the
positive's score minus --margin, or above --max_score (likely false negatives). The
next --num_negatives are written to --output_file as the columns negative_1 ..
negative_k beside anchor and positive (TSV; .csv or .jsonl by extension), atomically:
the file run_finetuning.py --task=sentence_embedding reads as triplets with hard
negatives. Anchors left with too few candidates are dropped and counted.

--model is what index_corpus.py takes: a SavedModel, a fine-tuned directory, a
sentence-transformers directory or an installed checkpoint's name; its query prompt
goes before the anchors and its document prompt before the rest.

Usage:
  python tools/mine_hard_negatives.py --model=all-MiniLM-L6-v2 --train_file=pairs.tsv \
      --output_file=triplets.tsv --num_negatives=3 --margin=0.05
"""

from keras_bert_zoo.utils import startup

# Before TensorFlow loads: the command line checked, the CPU kernels chosen
# (keras_bert_zoo/utils/startup.py).
startup.start_tool(__file__, kernels=True)

from absl import flags, logging  # noqa: E402

from keras_bert_zoo.search import corpus as corpus_files  # noqa: E402
from keras_bert_zoo.search import mining, tool_flags  # noqa: E402
from keras_bert_zoo.utils import cli  # noqa: E402

_EMBEDDER = tool_flags.define_embedder_flags()
_TRAIN_FILE = flags.DEFINE_string(
    "train_file", None, "The (anchor, positive) pairs: .tsv / .csv with a header, or .jsonl."
)
_OUTPUT_FILE = flags.DEFINE_string(
    "output_file", None, "Where the rows with negatives go (.tsv; .csv or .jsonl by extension)."
)
_CORPUS_FILE = flags.DEFINE_string(
    "corpus_file", None, "Mine among this corpus's texts (default: the file's positives)."
)
_ANCHOR_COLUMN = flags.DEFINE_string("anchor_column", mining.ANCHOR, "The anchor column.")
_POSITIVE_COLUMN = flags.DEFINE_string("positive_column", mining.POSITIVE, "The positive column.")
_NUM_NEGATIVES = flags.DEFINE_integer("num_negatives", 3, "Negatives a row.", lower_bound=1)
_MARGIN = flags.DEFINE_float(
    "margin",
    None,
    "Skip a candidate scoring above the positive's cosine minus this (e.g. 0.05).",
    lower_bound=0.0,
)
_MAX_SCORE = flags.DEFINE_float("max_score", None, "Skip a candidate whose cosine is above this.")
_SKIP_TOP = flags.DEFINE_integer(
    "skip_top", 0, "Skip this many of the nearest non-positive candidates.", lower_bound=0
)
_QUERY_PROMPT = flags.DEFINE_string(
    "query_prompt", None, "Prepended to the anchors (default: the model's query prompt)."
)
_DOCUMENT_PROMPT = flags.DEFINE_string(
    "document_prompt", None, "Prepended to the candidates (default: the model's document prompt)."
)
startup.define_onednn_flag()
flags.mark_flags_as_required(["model", "train_file", "output_file"])


def main(argv):
    cli.refuse_arguments(argv)
    startup.log_kernel_choice()
    settings = mining.MiningSettings(
        num_negatives=_NUM_NEGATIVES.value,
        margin=_MARGIN.value,
        max_score=_MAX_SCORE.value,
        skip_top=_SKIP_TOP.value,
    )
    pairs = mining.read_pairs(
        _TRAIN_FILE.value,
        anchor_column=_ANCHOR_COLUMN.value,
        positive_column=_POSITIVE_COLUMN.value,
    )
    candidates = None
    if _CORPUS_FILE.value:
        candidates = corpus_files.read_corpus(_CORPUS_FILE.value).texts
    embedder = tool_flags.open_embedder_from_flags(_EMBEDDER)
    if _QUERY_PROMPT.value is not None:
        embedder.query_prompt = _QUERY_PROMPT.value or None
    if _DOCUMENT_PROMPT.value is not None:
        embedder.document_prompt = _DOCUMENT_PROMPT.value or None
    logging.info("Mining %d pairs of %s", len(pairs.anchors), _TRAIN_FILE.value)
    rows, dropped = mining.mine_pairs(embedder, pairs, settings, candidates=candidates)
    mining.write_triplets(_OUTPUT_FILE.value, rows, settings.num_negatives)
    print(
        f"wrote {len(rows)} rows with {settings.num_negatives} hard negatives each to "
        f"{_OUTPUT_FILE.value}"
        + (f" ({dropped} anchors with too few candidates left out)" if dropped else "")
    )


def run():
    """The console script `keras-bert-zoo-mine-hard-negatives`, and this file."""
    cli.run(main)


if __name__ == "__main__":
    run()
