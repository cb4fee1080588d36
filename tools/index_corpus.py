"""Embeds a corpus with an embedding model and writes its search index.

--model is a SavedModel of export_saved_model.py --kind=sentence_embedding (a version
or model directory), a fine-tuned directory of run_finetuning.py
--task=sentence_embedding, or a sentence-transformers directory or installed
checkpoint name (all-MiniLM-L6-v2). --corpus_file is BEIR's corpus.jsonl
({"_id", "title", "text"} a line), a TSV or CSV with a header line (--id_column,
--text_column, --title_column), or a .txt file of one text a line. The document
prompt is --document_prompt, else the model's own (the export's or the task's).

It writes to --output_dir, atomically: vectors.npy (float32), documents.jsonl (ids and
texts), manifest.json (model, dim, normalized, prompts, count) and, above 100k
documents or with --index=approximate, faiss.index (FAISS's inverted-file index).

Usage:
  python tools/index_corpus.py --model=all-MiniLM-L6-v2 --corpus_file=corpus.jsonl \
      --output_dir=index/
  python tools/index_corpus.py --model=exports/minilm --corpus_file=docs.tsv \
      --id_column=doc_id --text_column=body --output_dir=index/
"""

from keras_bert_zoo.utils import extras, startup

# Before TensorFlow loads: the command line checked, the CPU kernels chosen
# (keras_bert_zoo/utils/startup.py).
startup.start_tool(
    __file__,
    kernels=True,
    extras=[extras.when_flag("index", lambda v: v == "approximate", "search")],
)

import os  # noqa: E402
import time  # noqa: E402

from absl import flags, logging  # noqa: E402

from keras_bert_zoo.search import corpus as corpus_files  # noqa: E402
from keras_bert_zoo.search import index, tool_flags  # noqa: E402
from keras_bert_zoo.utils import cli  # noqa: E402

_EMBEDDER = tool_flags.define_embedder_flags()
_CORPUS_FILE = flags.DEFINE_string(
    "corpus_file", None, "The corpus: .jsonl (BEIR's), .tsv / .csv with a header, or .txt."
)
_OUTPUT_DIR = flags.DEFINE_string("output_dir", None, "Where the index is written.")
_CORPUS_FORMAT = flags.DEFINE_enum(
    "corpus_format",
    "auto",
    list(corpus_files.FILE_FORMATS),
    "The corpus's layout (auto: by extension).",
)
_ID_COLUMN = flags.DEFINE_string(
    "id_column", None, "The id column (default: _id in JSONL, id in TSV/CSV, else row numbers)."
)
_TEXT_COLUMN = flags.DEFINE_string("text_column", "text", "The text column.")
_TITLE_COLUMN = flags.DEFINE_string(
    "title_column", "title", "A title column joined before the text, when present."
)
_DOCUMENT_PROMPT = flags.DEFINE_string(
    "document_prompt", None, "Prepended to every document (default: the model's document prompt)."
)
_INDEX = flags.DEFINE_enum(
    "index",
    "auto",
    list(index.INDEX_KINDS),
    "auto: a FAISS index above 100k documents (exact search below); exact; approximate.",
)
_NLIST = flags.DEFINE_integer(
    "nlist", None, "The FAISS index's inverted lists (default: 4 sqrt(documents)).", lower_bound=1
)
startup.define_onednn_flag()
flags.mark_flags_as_required(["model", "corpus_file", "output_dir"])


def main(argv):
    cli.refuse_arguments(argv)
    startup.log_kernel_choice()
    corpus = corpus_files.read_corpus(
        _CORPUS_FILE.value,
        file_format=_CORPUS_FORMAT.value,
        id_column=_ID_COLUMN.value,
        text_column=_TEXT_COLUMN.value,
        title_column=_TITLE_COLUMN.value or None,
    )
    logging.info("Read %d documents from %s", len(corpus), _CORPUS_FILE.value)
    model = _EMBEDDER.model.value
    embedder = tool_flags.open_embedder_from_flags(_EMBEDDER)
    prompt = embedder.document_prompt if _DOCUMENT_PROMPT.value is None else _DOCUMENT_PROMPT.value
    start = time.monotonic()
    vectors = embedder.embed(corpus.texts, prompt=prompt, what="documents")
    seconds = time.monotonic() - start
    approximate = None
    if index.wants_approximate(len(corpus), _INDEX.value):
        logging.info("Building the FAISS index of %d vectors", len(vectors))
        approximate = index.FaissIndex.build(vectors, nlist=_NLIST.value)
    index.write_index(
        _OUTPUT_DIR.value,
        corpus.ids,
        corpus.texts,
        vectors,
        {
            # A directory by its absolute path: search_corpus may run from elsewhere.
            "model": os.path.abspath(model) if os.path.exists(model) else model,
            "model_kind": embedder.kind,
            "document_prompt": prompt or None,
            "query_prompt": embedder.query_prompt,
            "corpus_file": _CORPUS_FILE.value,
        },
        approximate=approximate,
    )
    print(
        f"indexed {len(corpus)} documents of {_CORPUS_FILE.value} with {_EMBEDDER.model.value}: "
        f"{vectors.shape[1]} dimensions, {len(corpus) / max(seconds, 1e-9):.0f} documents/s"
        f"{', FAISS index' if approximate is not None else ''} -> {_OUTPUT_DIR.value}"
    )


def run():
    """The console script `keras-bert-zoo-index-corpus`, and this file."""
    cli.run(main)


if __name__ == "__main__":
    run()
