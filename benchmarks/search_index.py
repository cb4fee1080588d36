"""The approximate index against exact search: recall@10 and queries per second.

Two workloads, each searched by exact search (`tasks.sentence_embedding.metrics
.exact_search`, one matrix product a chunk of 128 queries: the default up to 100k
documents) and by FAISS's `IndexIVFFlat` (`keras_bert_zoo.search.index.FaissIndex`,
`nlist = 4 sqrt(documents)`) at several `nprobe` (lists scanned a query; the default
is a third of them):

- real text: all-MiniLM-L6-v2 vectors (through `keras_bert_zoo.search.embedders`) of
  sentences of the English Wikipedia excerpt gensim ships as test data
  (`benchmarks/_wiki_sentences.py`), the queries other articles' sentences;
- scale: `--random_documents` random unit vectors of 384 dimensions (uniform on the
  sphere: no structure at all, the hardest case for an inverted file), the queries
  random unit vectors too.

recall@10 is the share of exact search's top 10 that the index returns; the rates are
medians of timed passes over all the queries (`benchmarks/_timing.py`), both sides on
the same threads. The measurement that chose FAISS over ScaNN is in docs/embeddings.md
("Semantic search").

Usage:

    PYTHONPATH=. python benchmarks/search_index.py                 # ~3 min on 2 cores
    PYTHONPATH=. python benchmarks/search_index.py --quick         # smoke run
    PYTHONPATH=. python benchmarks/search_index.py --documents 5000 --random_documents 200000
"""

from __future__ import annotations

import argparse
import os
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:
    sys.path.insert(0, REPO)

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402

from benchmarks._timing import format_table, time_callable  # noqa: E402

TOP_K = 10


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="Smoke run: small sizes.")
    parser.add_argument("--documents", type=int, default=4000, help="Wikipedia sentences indexed.")
    parser.add_argument("--queries", type=int, default=300, help="Queries of each workload.")
    parser.add_argument("--random_documents", type=int, default=50_000)
    parser.add_argument("--dim", type=int, default=384, help="Width of the random vectors.")
    parser.add_argument("--nprobe", default="4,8,16,32,64", help="FAISS nprobe values.")
    parser.add_argument("--repeats", type=int, default=5, help="Timed passes a configuration.")
    args = parser.parse_args(argv)
    if args.quick:
        args.documents, args.queries, args.random_documents, args.repeats = 600, 50, 5000, 3
    return args


def wikipedia_vectors(documents: int, queries: int):
    """MiniLM vectors of `documents` sentences and of `queries` sentences of other
    articles (the last articles read)."""
    from benchmarks._wiki_sentences import read_sentences
    from keras_bert_zoo.search.embedders import open_embedder

    articles = read_sentences(max_sentences=(documents + queries) * 2)
    corpus, held_out = [], []
    for article in articles:
        target = corpus if len(corpus) < documents else held_out
        target.extend(article)
    corpus, held_out = corpus[:documents], held_out[:queries]
    if len(held_out) < queries:
        raise SystemExit(f"the excerpt has {len(corpus) + len(held_out)} sentences; ask fewer")
    embedder = open_embedder("all-MiniLM-L6-v2", batch_size=64)
    start = time.monotonic()
    corpus_vectors = embedder.embed(corpus, what="sentences")
    seconds = time.monotonic() - start
    query_vectors = embedder.embed(held_out, what="queries")
    print(
        f"real text: {len(corpus)} Wikipedia sentences embedded by all-MiniLM-L6-v2 in "
        f"{seconds:.0f} s ({len(corpus) / seconds:.0f}/s); {len(held_out)} query sentences of "
        "other articles"
    )
    return corpus_vectors, query_vectors


def random_unit_vectors(count: int, dim: int, seed: int) -> np.ndarray:
    vectors = np.random.default_rng(seed).standard_normal((count, dim)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def recall_at_k(found: np.ndarray, exact: np.ndarray) -> float:
    return float(
        np.mean([len(set(a) & set(b)) / len(b) for a, b in zip(found, exact, strict=True)])
    )


def compare(name: str, documents: np.ndarray, queries: np.ndarray, nprobes, repeats: int):
    """Rows of (configuration, recall@10, queries/s, build seconds) for one workload."""
    from keras_bert_zoo.search.index import ExactIndex, FaissIndex, default_nprobe

    exact_index = ExactIndex(documents)
    _, exact = exact_index.search(queries, TOP_K)
    timing = time_callable(lambda: exact_index.search(queries, TOP_K), warmup=1, repeats=repeats)
    rows = [["exact (matrix product)", "1.000", f"{len(queries) / timing.median:.0f}", "-"]]
    start = time.monotonic()
    built = FaissIndex.build(documents)
    build_seconds = time.monotonic() - start
    nlist = built.index.nlist
    for nprobe in sorted({*nprobes, default_nprobe(nlist)}):
        if nprobe > nlist:
            continue
        built.nprobe = nprobe
        _, found = built.search(queries, TOP_K)
        timing = time_callable(lambda: built.search(queries, TOP_K), warmup=1, repeats=repeats)
        label = f"FAISS IVFFlat nlist={nlist} nprobe={nprobe}"
        if nprobe == default_nprobe(nlist):
            label += " (default)"
        rows.append(
            [
                label,
                f"{recall_at_k(found, exact):.3f}",
                f"{len(queries) / timing.median:.0f}",
                f"{build_seconds:.1f}",
            ]
        )
    print(f"\n{name}: {len(documents)} documents, {len(queries)} queries, recall@{TOP_K}")
    print(format_table(["index", f"recall@{TOP_K}", "queries/s", "build s"], rows))


def main(argv=None) -> None:
    args = parse_args(argv)
    nprobes = [int(value) for value in args.nprobe.split(",")]
    import faiss

    print(
        f"FAISS {faiss.__version__}, {faiss.omp_get_max_threads()} threads; numpy {np.__version__}"
    )
    documents, queries = wikipedia_vectors(args.documents, args.queries)
    compare("real text (MiniLM, Wikipedia)", documents, queries, nprobes, args.repeats)
    compare(
        f"random unit vectors (dim {args.dim})",
        random_unit_vectors(args.random_documents, args.dim, seed=0),
        random_unit_vectors(args.queries, args.dim, seed=1),
        nprobes,
        args.repeats,
    )


if __name__ == "__main__":
    main()
