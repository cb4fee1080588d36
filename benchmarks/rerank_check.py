"""Re-ranking check (issue 46): what a cross-encoder, trained with the project's
sentence-pair task on the same Wikipedia pairs, adds when it re-ranks the top of the
untouched MiniLM's semantic search, on held-out articles.

Why the figure means something:

- Data: embedding_check.py's (`_wiki_retrieval.prepare`, the same defaults: seed 0,
  held-out fraction 0.25, 2,000 training pairs at most): gensim's English Wikipedia
  excerpt, a paragraph's first sentence the query and the rest of the paragraph its
  one relevant document, split BY ARTICLE: training pairs from about 3/4 of the
  articles, the queries and the whole corpus (every held-out paragraph, so a query's
  distractors include the other paragraphs of its own article) from the others.
- The cross-encoder is the project's pair task as a user types it (every tool a child
  process, its command printed): `tools/run_finetuning.py --task=text_classification
  --text_column=query --text_pair_column=document --label_column=label
  --init_checkpoint=all-MiniLM-L6-v2 --mode=train`, on the training pairs only: each
  (query, its paragraph's rest) labelled 1, (query, a hard negative) labelled 0. The
  negative is mined by `tools/mine_hard_negatives.py --model=all-MiniLM-L6-v2
  --num_negatives=1 --margin=...` among the training pairs' positives: the paragraph the
  untouched MiniLM ranks nearest that is not the query's own (and scores below its
  positive's cosine minus the margin: closer ones are likely false negatives), often a
  paragraph of the same article: the near misses a re-ranker has to put below the
  relevant paragraph. Beside it, `--random_negatives` (default 1) other pairs'
  paragraphs, drawn at random, labelled 0: with the mined negatives alone the pair task
  sat at chance (loss 0.693) for ~480 of 600 steps and re-ranked far below MiniLM; one
  random negative a pair gets it learning (docs/embeddings.md, "Semantic search"). A training pair
  whose anchor the miner finds no negative for is left out (counted in the output).
- The search: `tools/index_corpus.py --model=all-MiniLM-L6-v2` indexes the held-out
  corpus (the untouched MiniLM is the bi-encoder; exact search), and
  `tools/search_corpus.py --queries_file` answers the held-out queries twice:
  1. the bi-encoder alone, `--top_k=K` (`--rerank_top_k`, default 20): its first 10
     are what `--top_k=10` answers (exact search; the re-ranked file's `rank` fields
     are checked to name the same documents), and its Recall@K is the most re-ranking
     can reach (a relevant document outside the top K is never re-scored);
  2. `--top_k=10 --reranker=<the cross-encoder's run> --rerank_top_k=K`.
- The scores are computed from the answer files (`--output_file`'s JSON lines) by the
  task's own retrieval metrics (`tasks.sentence_embedding.metrics.retrieval_metrics`,
  trec_eval's definitions, tested against ir_measures): each answered list goes in as
  a search whose scores order its documents as listed, any judged document it lacks
  below them, so a cutoff within the list's length is exact. Checked: the bi-encoder's
  file scores what the same metrics give from the index's vectors (the queries
  indexed too), the figure `run_finetuning --mode=eval` reports for the untouched
  MiniLM (embedding_check's first row, on the same queries). nDCG@10 is primary; the
  95% paired bootstrap interval of the nDCG@10 difference is over the queries.
- Cost: each search's wall seconds (process start, TensorFlow and the models' loading
  included) and queries/s over them, and the re-ranking's own: the difference of the
  two searches' walls, a query and per re-scored (query, document) pair.
- Caveats: one split, one seed, one training run of a few hundred steps on CPU; a few
  hundred to a thousand queries with one relevant document each (a difference of 0.01
  nDCG@10 is within the noise of another seed: read the interval). The training pairs
  are the inverse cloze task's, the same kind as the held-out ones: a cross-encoder
  trained on another kind of pair would add less. MiniLM, the bi-encoder, is
  untouched; a fine-tuned bi-encoder (embedding_check) narrows the room at the top.

Usage (from the repository root):

    PYTHONPATH=. python benchmarks/rerank_check.py            # ~17 min on 2 idle cores
    PYTHONPATH=. python benchmarks/rerank_check.py --quick    # smoke run: a few minutes
    [--steps 800] [--batch_size 16] [--learning_rate 1e-4] [--max_seq_length 128]
    [--train_pairs 1500] [--max_queries 500] [--rerank_top_k 20] [--margin 0.05]
    [--random_negatives 1] [--held_out_fraction 0.25] [--bootstrap 1000] [--seed 0]
    [--work_dir DIR [--reuse]]

`--work_dir` keeps the runs, logs, index and answer files (about 300 MB); `--reuse` with
it keeps the steps an earlier run of the script there finished (same flags: nothing
checks them).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import sys
import time

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:
    sys.path.insert(0, REPO)

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from benchmarks import _wiki_retrieval as wiki  # noqa: E402
from benchmarks._timing import format_table  # noqa: E402
from benchmarks.embedding_check import (  # noqa: E402
    METRICS,
    MINILM,
    PRIMARY,
    Tools,
    describe_environment,
    held_out_examples,
    paired_interval,
    score,
    served_vectors,
    work_directory,
)
from benchmarks.finetune_speed_vs_hf_trainer import loops_from_log  # noqa: E402

TOP_K = 10
# The retrieval files' split name in run_finetuning's reader (embedding_check reads it
# from a run's eval_results.json; no sentence_embedding run here).
RETRIEVAL_SPLIT = "retrieval"
_LOSS = re.compile(r"\bstep (\d+)/\d+\s+loss ([0-9.eE+-]+)")


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="Smoke run: a few steps, few texts.")
    parser.add_argument("--steps", type=int, default=800, help="The cross-encoder's steps.")
    parser.add_argument("--batch_size", type=int, default=16)
    parser.add_argument("--learning_rate", type=float, default=1e-4)
    parser.add_argument("--max_seq_length", type=int, default=128)
    parser.add_argument(
        "--train_pairs",
        type=int,
        default=1500,
        help="Training pairs at most (each a positive and a negative row).",
    )
    parser.add_argument("--max_queries", type=int, default=500, help="0: all held out.")
    parser.add_argument(
        "--rerank_top_k", type=int, default=20, help="Documents re-scored a query (K >= 10)."
    )
    parser.add_argument("--margin", type=float, default=0.05, help="mine_hard_negatives --margin.")
    parser.add_argument(
        "--random_negatives",
        type=int,
        default=1,
        help="Per training pair, this many more negatives: other pairs' positives, drawn at "
        "random (seeded). Easy ones: with the mined ones alone the pair task can sit at "
        "chance for hundreds of steps.",
    )
    parser.add_argument("--held_out_fraction", type=float, default=0.25)
    parser.add_argument("--bootstrap", type=int, default=1000, help="Resamples of the queries.")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--work_dir", default=None, help="Keep the runs here (default: a tmp dir).")
    parser.add_argument(
        "--reuse",
        action="store_true",
        help="With --work_dir: keep the steps an earlier run with the same flags finished.",
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.steps, args.train_pairs, args.held_out_fraction = 6, 128, 0.05
        args.max_queries, args.bootstrap = 48, 200
    if args.rerank_top_k < TOP_K:
        parser.error(f"--rerank_top_k={args.rerank_top_k}: at least the answers' {TOP_K}")
    args.max_queries = args.max_queries or None
    return args


def pair_rows(triplets_file: str, seed: int, random_negatives: int = 0) -> list[dict]:
    """The cross-encoder's rows of the mined triplets: (query, positive) labelled 1,
    (query, negative) labelled 0, and `random_negatives` (query, another triplet's
    positive) labelled 0 a triplet, shuffled (seeded)."""
    with open(triplets_file, encoding="utf-8") as f:
        triplets = [json.loads(line) for line in f]
    rng = random.Random(seed)
    rows = []
    for index, triplet in enumerate(triplets):
        rows.append({"query": triplet["anchor"], "document": triplet["positive"], "label": 1})
        rows.append({"query": triplet["anchor"], "document": triplet["negative_1"], "label": 0})
        others = [i for i in rng.sample(range(len(triplets)), random_negatives + 1) if i != index]
        for other in others[:random_negatives]:
            document = triplets[other]["positive"]
            rows.append({"query": triplet["anchor"], "document": document, "label": 0})
    rng.shuffle(rows)
    return rows


def ranking_metrics(ranked_ids, judged, recall_at=(TOP_K,)) -> dict[str, float]:
    """The task's retrieval metrics (`metrics.retrieval_metrics`) of one answered list
    (document ids, best first) against the query's judgements `{document id: grade}`.

    The list goes in as an exact search over one-hot document vectors, the query's
    vector scoring the listed documents in their order, above the judged documents the
    list lacks (score 0): those rank below the whole list, so every cutoff up to the
    list's length is exact."""
    from keras_bert_zoo.tasks.sentence_embedding import metrics

    listed = set(ranked_ids)
    documents = list(ranked_ids) + [document for document in judged if document not in listed]
    query = np.zeros((1, len(documents)), np.float32)
    query[0, : len(ranked_ids)] = np.arange(len(ranked_ids), 0, -1)
    relevance = metrics.relevance_by_index(["query"], documents, {"query": judged})
    return metrics.retrieval_metrics(
        query,
        np.eye(len(documents), dtype=np.float32),
        relevance,
        mrr_at=(TOP_K,),
        ndcg_at=(TOP_K,),
        recall_at=recall_at,
    )


def read_answers(path: str, queries) -> list[list[dict]]:
    """Each query's answered documents in `search_corpus --output_file`'s file, checked
    to answer the queries (`EmbeddingExample`s) in their order."""
    with open(path, encoding="utf-8") as f:
        answers = [json.loads(line) for line in f]
    if [answer["query"] for answer in answers] != [query.texts[0] for query in queries]:
        raise SystemExit(f"{path}: its answers are not the held-out queries', in their order")
    return [answer["documents"] for answer in answers]


def score_answers(answers, queries, recall_at=(TOP_K,)) -> dict[str, np.ndarray]:
    """`{metric: per-query values}` of the answered lists, read at the first `TOP_K`
    documents (and at `recall_at` for Recall)."""
    per_query: dict[str, list[float]] = {}
    for documents, query in zip(answers, queries, strict=True):
        depth = max(TOP_K, *recall_at)
        if len(documents) < depth:
            raise SystemExit(f"{query.text_id}: {len(documents)} answers, fewer than {depth}")
        ranked = [document["id"] for document in documents]
        for name, value in ranking_metrics(ranked, dict(query.relevant), recall_at).items():
            per_query.setdefault(name, []).append(value)
    return {name: np.array(values) for name, values in per_query.items()}


def check_candidates(alone, reranked, depth: int) -> None:
    """Each re-ranked document keeps its retrieval rank: the bi-encoder's answer names
    the same document there (both searches retrieved the same candidates)."""
    for before, after in zip(alone, reranked, strict=True):
        for document in after:
            rank = document["rank"]
            if rank > depth or before[rank - 1]["id"] != document["id"]:
                raise SystemExit(
                    f"re-ranked {document['id']} at retrieval rank {rank} is not the "
                    "bi-encoder's document there"
                )


def training_figures(log_file: str) -> tuple[float, float, float | None, float | None]:
    """(steps/s over the loops after the first (all of them when one), the same over
    every loop, the first and the last logged loss) of a training log."""
    with open(log_file, encoding="utf-8") as f:
        text = f.read()
    loops, previous, timed = loops_from_log(text), 0, []
    for step, steps_per_second, _ in loops:
        timed.append((step - previous, (step - previous) / steps_per_second))
        previous = step
    if not timed:
        raise SystemExit(f"{log_file}: no step lines with steps_per_second")
    later = timed[1:] or timed
    rate = sum(steps for steps, _ in later) / sum(seconds for _, seconds in later)
    overall = sum(steps for steps, _ in timed) / sum(seconds for _, seconds in timed)
    losses = [float(value) for _, value in _LOSS.findall(text)]
    return rate, overall, (losses[0] if losses else None), (losses[-1] if losses else None)


def main(argv=None) -> None:
    args = parse_args(argv)
    with work_directory(args.work_dir, args.reuse, "rerank_check_") as work_dir:
        run(args, work_dir)


def run(args, work_dir: str) -> None:
    started = time.perf_counter()
    for line in describe_environment():
        print(line)
    depth = args.rerank_top_k

    # === Data ===
    data = wiki.prepare(
        os.path.join(work_dir, "data"),
        args.train_pairs,
        args.held_out_fraction,
        args.max_queries,
        args.seed,
    )
    files = data.files
    print(data.description())
    print(
        f"cross-encoder: {args.steps} steps of {args.batch_size} at lr {args.learning_rate:g}, "
        f"max_seq_length {args.max_seq_length}, seed {args.seed}; re-ranking the top {depth}",
        flush=True,
    )

    tools = Tools(work_dir, reuse=args.reuse)
    length = f"--max_seq_length={args.max_seq_length}"
    paths = {
        name: os.path.join(work_dir, *parts)
        for name, parts in {
            "triplets": ("data", "train_triplets.jsonl"),
            "pairs": ("data", "cross_encoder_train.jsonl"),
            "cross_encoder": ("cross_encoder",),
            "corpus_index": ("index_corpus",),
            "query_index": ("index_queries",),
            "alone": ("answers", "bi_encoder.jsonl"),
            "reranked": ("answers", "reranked.jsonl"),
        }.items()
    }

    # 1. Hard negatives of the training pairs, mined with the untouched MiniLM.
    tools.run(
        "mine",
        "mine_hard_negatives",
        f"--model={MINILM}",
        f"--train_file={data.pairs_file}",
        f"--output_file={paths['triplets']}",
        "--num_negatives=1",
        f"--margin={args.margin}",
        length,
    )
    rows = pair_rows(paths["triplets"], args.seed, args.random_negatives)
    wiki.write_jsonl(paths["pairs"], rows)
    kept = sum(row["label"] for row in rows)
    print(
        f"cross-encoder rows: {len(rows)} ({kept} of {len(data.train)} training pairs "
        f"kept a mined negative; each its positive, its negative and {args.random_negatives} "
        "random ones)",
        flush=True,
    )
    # 2. The cross-encoder: the pair task from MiniLM, as a user types it.
    tools.run(
        "cross_encoder",
        "run_finetuning",
        "--task=text_classification",
        f"--train_file={paths['pairs']}",
        "--text_column=query",
        "--text_pair_column=document",
        "--label_column=label",
        f"--init_checkpoint={MINILM}",
        length,
        "--mode=train",
        f"--num_train_steps={args.steps}",
        f"--train_batch_size={args.batch_size}",
        f"--learning_rate={args.learning_rate}",
        "--checkpoint_every=0",
        "--progress=log",
        f"--seed={args.seed}",
        f"--output_dir={paths['cross_encoder']}",
    )
    # 3. The held-out corpus indexed with the untouched MiniLM (the queries too: the check
    #    against the task's metrics of the vectors).
    for name, what in (("corpus_index", "corpus_file"), ("query_index", "queries_file")):
        tools.run(
            name,
            "index_corpus",
            f"--model={MINILM}",
            f"--corpus_file={files[what]}",
            f"--output_dir={paths[name]}",
            "--index=exact",
            length,
        )
    # 4. The held-out queries answered: the bi-encoder alone, then re-ranked.
    search = [
        "search_corpus",
        f"--index_dir={paths['corpus_index']}",
        f"--queries_file={files['queries_file']}",
        "--index=exact",
        length,
    ]
    tools.run("search_alone", *search, f"--top_k={depth}", f"--output_file={paths['alone']}")
    tools.run(
        "search_reranked",
        *search,
        f"--top_k={TOP_K}",
        f"--reranker={paths['cross_encoder']}",
        f"--rerank_top_k={depth}",
        f"--output_file={paths['reranked']}",
    )

    # === Scores ===
    examples = held_out_examples(files, {RETRIEVAL_SPLIT})
    queries = [example for example in examples if example.relevant is not None]
    alone = read_answers(paths["alone"], queries)
    reranked = read_answers(paths["reranked"], queries)
    check_candidates(alone, reranked, depth)
    per_query = {
        "alone": score_answers(alone, queries, recall_at=(TOP_K, depth)),
        "reranked": score_answers(reranked, queries),
    }
    results = {name: {m: float(v.mean()) for m, v in q.items()} for name, q in per_query.items()}
    from_vectors = score(
        served_vectors({"c": paths["corpus_index"], "q": paths["query_index"]}, examples),
        examples,
    )
    vector_gap = max(abs(from_vectors[m] - results["alone"][m]) for m in METRICS)
    if vector_gap > 5e-3:  # one near-tie flipped by another batch's rounding is not this
        raise SystemExit(
            f"the bi-encoder's answer file scores {results['alone']}, its index's vectors "
            f"{from_vectors}: the scoring of answer files is wrong"
        )

    # === Report ===
    seconds = tools.seconds
    query_count = len(queries)
    labels = {
        "alone": f"{MINILM} (bi-encoder) alone",
        "reranked": f"+ cross-encoder re-ranking its top {depth}",
    }
    searches = {"alone": "search_alone", "reranked": "search_reranked"}
    rows = []
    for name, label in labels.items():
        wall, cpu = seconds[searches[name]]
        rows.append(
            [label]
            + [f"{results[name][m]:.4f}" for m in METRICS]
            + [f"{wall:.0f}", f"{cpu:.0f}", f"{query_count / wall:.1f}"]
        )
    ratios = [results["reranked"][m] / results["alone"][m] for m in METRICS]
    rows.append(["ratio (re-ranked / alone)"] + [f"{r:.3f}" for r in ratios] + ["", "", ""])
    print(
        f"\nheld-out retrieval: {query_count} queries (first sentences) against "
        f"{len(data.split.held_out)} paragraphs of {data.split.held_out_articles} articles "
        "never trained on"
    )
    print(format_table(["system", *METRICS, "search s", "search CPU s", "queries/s"], rows))
    low, high = paired_interval(
        per_query["reranked"][PRIMARY], per_query["alone"][PRIMARY], args.bootstrap, args.seed
    )
    difference = results["reranked"][PRIMARY] - results["alone"][PRIMARY]
    print(
        f"nDCG@10 difference (re-ranked - alone): {difference:+.4f}, 95% paired bootstrap "
        f"over the queries [{low:+.4f}, {high:+.4f}]"
    )
    bound = results["alone"][f"recall@{depth}"]
    print(
        f"the bi-encoder's Recall@{depth} (the most re-ranking its top {depth} can reach at "
        f"Recall@10): {bound:.4f}; its Recall@10 {results['alone']['recall@10']:.4f}"
    )
    improved = int(np.sum(per_query["reranked"][PRIMARY] > per_query["alone"][PRIMARY]))
    worsened = int(np.sum(per_query["reranked"][PRIMARY] < per_query["alone"][PRIMARY]))
    print(f"queries whose nDCG@10 re-ranking raised: {improved}; lowered: {worsened}")
    print(
        "check: the bi-encoder's answer file against the task's metrics of its index's "
        f"vectors: max |difference| {vector_gap:.1e}"
    )

    # === Cost ===
    rate, overall, first_loss, last_loss = training_figures(
        os.path.join(work_dir, "cross_encoder.log")
    )
    losses = (
        f"; loss {first_loss:.3f} at the first loop, {last_loss:.3f} at the last"
        if first_loss is not None
        else ""
    )
    print(
        f"\ncross-encoder training: {args.steps} steps, {rate:.2f} steps/s after the first "
        f"loop ({overall:.2f} over all){losses}"
    )
    extra = seconds["search_reranked"][0] - seconds["search_alone"][0]
    pairs = query_count * depth
    print(
        f"re-ranking's own cost: {extra:.0f} s more wall for {query_count} queries: "
        f"{extra / query_count:.3f} s a query, {pairs / max(extra, 1e-9):.0f} (query, "
        f"document) pairs/s"
    )
    print("each tool's seconds (wall, CPU):")
    for name, (wall, cpu) in seconds.items():
        print(f"  {name}: {wall:.0f} s, {cpu:.0f} CPU s")
    child_cpu = sum(cpu for _, cpu in seconds.values())
    print(
        f"wall time: {time.perf_counter() - started:.0f} s (the tools' CPU time {child_cpu:.0f} "
        f"s; load average {os.getloadavg()[0]:.1f} at the end)"
    )


if __name__ == "__main__":
    main()
