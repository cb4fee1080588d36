"""Answers queries from a corpus index of index_corpus.py: the top-k documents.

Each query (--query, repeatable, or --queries_file: a .txt file of one query a line, or
BEIR's queries.jsonl) is embedded with the index's model (or --model) after its query
prompt (--query_prompt, else the model's), and answered by exact search (one matrix
product; the default up to 100k documents) or the FAISS index (above, or
--index=approximate). It prints each query's documents: rank, id, cosine and text.

With --reranker, a fine-tuned sentence-pair model (run_finetuning.py
--task=text_classification --text_pair_column=..., or a GLUE pair task) re-scores the
top --rerank_top_k documents as a cross-encoder, and the list is printed in its order:
its score is the probability of --reranker_label (default: the task's positive class)
or a regression's score; each line keeps the document's retrieval rank and cosine.
--output_file writes the answers as JSON lines too.

Usage:
  python tools/search_corpus.py --index_dir=index/ --query="how do vaccines work?"
  python tools/search_corpus.py --index_dir=index/ --queries_file=queries.jsonl \
      --top_k=5 --reranker=qnli_finetuned/ --reranker_label=entailment
"""

from keras_bert_zoo.utils import startup

# Before TensorFlow loads: the command line checked, the CPU kernels chosen
# (keras_bert_zoo/utils/startup.py).
startup.start_tool(__file__, kernels=True)

import json  # noqa: E402

from absl import app, flags  # noqa: E402

from keras_bert_zoo.search import corpus as corpus_files  # noqa: E402
from keras_bert_zoo.search import index, reranking, tool_flags  # noqa: E402
from keras_bert_zoo.search.answers import answer_queries  # noqa: E402
from keras_bert_zoo.utils import cli  # noqa: E402
from keras_bert_zoo.utils.atomic import atomic_open  # noqa: E402

_INDEX_DIR = flags.DEFINE_string("index_dir", None, "The index directory of index_corpus.py.")
_QUERY = flags.DEFINE_multi_string("query", [], "A query; repeat for more.")
_QUERIES_FILE = flags.DEFINE_string(
    "queries_file", None, "Queries: .txt (one a line), or .jsonl / .tsv / .csv (id and text)."
)
_TOP_K = flags.DEFINE_integer("top_k", 10, "Documents a query.", lower_bound=1)
_INDEX = flags.DEFINE_enum(
    "index",
    "auto",
    list(index.INDEX_KINDS),
    "auto: the FAISS index when the directory has one or above 100k documents, else exact "
    "search; exact; approximate (built now when the directory has none).",
)
_NPROBE = flags.DEFINE_integer(
    "nprobe",
    None,
    "Inverted lists the FAISS index scans a query (default: a third of them).",
    lower_bound=1,
)
_EMBEDDER = tool_flags.define_embedder_flags(
    f"{tool_flags.MODEL_HELP} Embeds the queries (default: the index's model)."
)
_QUERY_PROMPT = flags.DEFINE_string(
    "query_prompt", None, "Prepended to every query (default: the index's query prompt)."
)
_RERANKER = flags.DEFINE_string(
    "reranker",
    None,
    "A fine-tuned sentence-pair model (or its run's --output_dir) that re-scores the "
    "top documents.",
)
_RERANKER_LABEL = flags.DEFINE_string(
    "reranker_label", None, "The re-ranker's relevant class (default: its positive class)."
)
_RERANK_TOP_K = flags.DEFINE_integer(
    "rerank_top_k", None, "Documents the re-ranker re-scores (default: --top_k).", lower_bound=1
)
_OUTPUT_FILE = flags.DEFINE_string("output_file", None, "Also write the answers as JSON lines.")
_TEXT_CHARS = flags.DEFINE_integer(
    "text_chars", 120, "Characters of a document printed (0: all).", lower_bound=0
)
startup.define_onednn_flag()
flags.mark_flags_as_required(["index_dir"])


def _queries() -> list[str]:
    queries = list(_QUERY.value)
    if _QUERIES_FILE.value:
        queries += corpus_files.read_corpus(_QUERIES_FILE.value, description="queries").texts
    if not queries:
        raise app.UsageError("give --query=TEXT (repeatable) or --queries_file")
    return queries


def _shown(text: str) -> str:
    limit = _TEXT_CHARS.value
    text = " ".join(text.split())
    return text if not limit or len(text) <= limit else text[: limit - 3] + "..."


def _print(answers, reranked: bool) -> None:
    for answer in answers:
        print(f"query: {answer['query']}")
        for place, hit in enumerate(answer["documents"], start=1):
            scores = f"cosine {hit['cosine']:.4f}"
            if "rerank_score" in hit:
                scores = f"rerank {hit['rerank_score']:.4f}  {scores} (was {hit['rank']})"
            print(f"  {place:>3}. {hit['id']}  {scores}  {_shown(hit['text'])}")
    if reranked:
        print(f"re-ranked by {_RERANKER.value}")


def main(argv):
    cli.refuse_arguments(argv)
    startup.log_kernel_choice()
    queries = _queries()
    corpus_index = index.load_index(_INDEX_DIR.value)
    reranker = None
    if _RERANKER.value:
        reranker = reranking.CrossEncoderReranker(
            _RERANKER.value, label=_RERANKER_LABEL.value, batch_size=_EMBEDDER.batch_size.value
        )
    model = _EMBEDDER.model.value or corpus_index.manifest.get("model")
    embedder = tool_flags.open_embedder_from_flags(_EMBEDDER, model)
    prompt = _QUERY_PROMPT.value
    if prompt is None:
        prompt = corpus_index.manifest.get("query_prompt") or embedder.query_prompt
    vectors = embedder.embed(queries, prompt=prompt, what="queries")
    depth = max(_TOP_K.value, _RERANK_TOP_K.value or 0)
    scores, positions = corpus_index.search(vectors, depth, _INDEX.value, nprobe=_NPROBE.value)
    answers = answer_queries(
        corpus_index,
        queries,
        scores,
        positions,
        top_k=_TOP_K.value,
        reranker=reranker,
        rerank_top_k=_RERANK_TOP_K.value,
    )
    _print(answers, reranker is not None)
    if _OUTPUT_FILE.value:
        with atomic_open(_OUTPUT_FILE.value) as f:
            for answer in answers:
                f.write(json.dumps(answer, ensure_ascii=False) + "\n")
        print(f"wrote {_OUTPUT_FILE.value}")


def run():
    """The console script `keras-bert-zoo-search-corpus`, and this file."""
    cli.run(main)


if __name__ == "__main__":
    run()
