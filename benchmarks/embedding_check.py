"""Sentence-embedding learning check (issue 46): MiniLM fine-tuned as a bi-encoder on real
Wikipedia text, against the untouched MiniLM, on held-out articles; in-batch against hard
negatives; a Matryoshka model's vectors at half their width.

Why the figure means something:

- Data (`_wiki_retrieval.py`): gensim's English Wikipedia excerpt, read by the
  pretraining package's MediaWiki readers, paragraphs of >= 40 words and 2 sentences.
  Query: a paragraph's first sentence; its one relevant document: the rest of the
  paragraph (the inverse cloze task). Split BY ARTICLE (seeded): training pairs from
  about 3/4 of the paragraphs' articles, the queries and the whole corpus (every
  held-out paragraph, so the other paragraphs of a query's own article are among the
  distractors) from the other articles. No held-out text is seen in training.
- Every system is produced and scored by the tools as a user types them (child
  processes, printed): `tools/run_finetuning.py --task=sentence_embedding` scores the
  held-out queries with `--queries_file/--corpus_file/--qrels_file` (BEIR layout; exact
  search; nDCG@10 the primary metric, MRR@10, Recall@10):
  1. the untouched all-MiniLM-L6-v2 (`--mode=eval`);
  2. MiniLM fine-tuned on the training pairs, in-batch negatives (MNRL, scale 20);
  3. hard negatives: `tools/mine_hard_negatives.py` over the training pairs' positives
     (`--num_negatives`, `--margin`) with model 2 (`--mine_with=in_batch`, the default)
     or the untouched MiniLM (`--mine_with=minilm`: 3 need not wait for 2), then MiniLM
     fine-tuned again, from its pretrained weights, with the same steps, batch and
     learning rate on the triplets (the mined negative joins the in-batch candidates);
  4. the same as 2 with `--matryoshka_dims=384,192,96`, scored at full width by the
     run, and at half width (192) through `tools/export_saved_model.py
     --truncate_dim=192` and `tools/index_corpus.py` (the export's vectors of the
     corpus and of the queries) with the task's own retrieval evaluation
     (`tasks.sentence_embedding.evaluation`); the run's full-width vectors cut to 192
     and normalised again must equal the export's (checked, printed);
  plus, from the vectors run 2 wrote (`embeddings_dev.npy`), model 2 cut to 192 (what
  Matryoshka training buys at that width).
  `--jobs N` runs up to N independent chains of tools side by side (1, the untouched
  eval; 2 (then mining and 3 with the default `--mine_with`); mining and 3; 4, its
  export and indexes); each tool's wall and CPU seconds are its own (`os.wait4`).
- The goals (issue 46): 2 beats 1 on the held-out nDCG@10; 3 beats 2 (or the note says
  why not); 4 at half width keeps >= 95% of its full-width nDCG@10.
- Caveats: one split and one seed; about a thousand queries with one relevant document
  each: a difference of 0.01 nDCG@10 is about the noise of another seed (the script
  prints the paired bootstrap interval of each comparison over the queries). MiniLM's
  own training data includes Wikipedia-derived pairs, so the untouched model starts
  strong; the fine-tuned runs are short (CPU).

Usage (from the repository root):

    PYTHONPATH=. python benchmarks/embedding_check.py            # ~15 min on 2 idle cores
    PYTHONPATH=. python benchmarks/embedding_check.py --quick    # smoke run: a few steps
    [--steps 40] [--batch_size 32] [--learning_rate 5e-5] [--max_seq_length 128]
    [--train_pairs 2000] [--max_queries N] [--num_negatives 1] [--margin 0.05]
    [--held_out_fraction 0.25] [--mine_with in_batch|minilm] [--jobs 1] [--seed 0]
    [--work_dir DIR [--reuse]]

`--work_dir` keeps every run, log and export (about 1 GB); `--reuse` with it keeps the
steps an earlier run of the script there finished (same flags: nothing checks them).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import json
import os
import platform
import shlex
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:
    sys.path.insert(0, REPO)

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from benchmarks import _wiki_retrieval as wiki  # noqa: E402
from benchmarks._onednn_runs import cpu_description  # noqa: E402
from benchmarks._timing import format_table  # noqa: E402

MINILM = "all-MiniLM-L6-v2"
METRICS = ("ndcg@10", "mrr@10", "recall@10")
PRIMARY = "ndcg@10"
MATRYOSHKA_DIMS = (384, 192, 96)
HALF = 192


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="Smoke run: a few steps, few texts.")
    parser.add_argument("--steps", type=int, default=40, help="Optimizer steps of each run.")
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--learning_rate", type=float, default=5e-5)
    parser.add_argument("--max_seq_length", type=int, default=128)
    parser.add_argument("--train_pairs", type=int, default=2000, help="At most this many.")
    parser.add_argument("--max_queries", type=int, default=None, help="Default: all held out.")
    parser.add_argument("--held_out_fraction", type=float, default=0.25)
    parser.add_argument("--num_negatives", type=int, default=1, help="Mined a training pair.")
    parser.add_argument("--margin", type=float, default=0.05, help="mine_hard_negatives --margin.")
    parser.add_argument(
        "--mine_with",
        choices=("in_batch", "minilm"),
        default="in_batch",
        help="The model that mines the hard negatives: run 2 (then 3 waits for it) or MiniLM.",
    )
    parser.add_argument(
        "--systems",
        type=lambda text: [part for part in text.split(",") if part],
        default=["in_batch", "hard", "matryoshka"],
        help="Which of in_batch (2), hard (3), matryoshka (4) to run beside the untouched MiniLM.",
    )
    parser.add_argument(
        "--jobs", type=int, default=1, help="Independent runs side by side (1: one at a time)."
    )
    parser.add_argument("--bootstrap", type=int, default=1000, help="Resamples of the queries.")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--work_dir", default=None, help="Keep the runs here (default: a tmp dir).")
    parser.add_argument(
        "--reuse",
        action="store_true",
        help="With --work_dir: keep the steps an earlier run with the same flags finished.",
    )
    args = parser.parse_args(argv)
    unknown = set(args.systems) - {"in_batch", "hard", "matryoshka"}
    if unknown:
        parser.error(f"--systems: unknown {sorted(unknown)}")
    if "hard" in args.systems and args.mine_with == "in_batch" and "in_batch" not in args.systems:
        parser.error("--systems=hard mines with run 2: add in_batch, or --mine_with=minilm")
    if args.quick:
        args.steps, args.train_pairs, args.held_out_fraction = 4, 256, 0.05
        args.max_queries, args.bootstrap = 64, 200
    return args


class Tools:
    """Runs the repository's tools as child processes, as a user types them; logs each
    one's output to a file and keeps its wall and CPU seconds (in `seconds.json`);
    `chains` runs independent sequences of tools side by side (`jobs` at a time).

    With `reuse`, a step whose log says it finished in an earlier run of the script
    in the same work directory is not run again (its seconds are the earlier ones).
    """

    def __init__(self, work_dir: str, reuse: bool = False, jobs: int = 1):
        self.work_dir = work_dir
        self.reuse = reuse
        self.jobs = jobs
        self.lock = threading.Lock()
        self.record = os.path.join(work_dir, "seconds.json")
        self.seconds: dict[str, tuple[float, float]] = {}
        if reuse and os.path.isfile(self.record):
            with open(self.record, encoding="utf-8") as f:
                self.earlier = {name: tuple(pair) for name, pair in json.load(f).items()}
        else:
            self.earlier = {}

    def run(self, name: str, tool: str, *flags: str) -> None:
        command = [sys.executable, os.path.join("tools", f"{tool}.py"), *flags]
        print(f"$ {shlex.join(['python', *command[1:]])}", flush=True)
        if name in self.earlier:
            self.seconds[name] = self.earlier[name]
            print(f"  reused ({self.work_dir}/{name}.log)", flush=True)
            return
        log = os.path.join(self.work_dir, f"{name}.log")
        start = time.perf_counter()
        with open(log, "w", encoding="utf-8") as out:
            child = subprocess.Popen(command, cwd=REPO, stdout=out, stderr=subprocess.STDOUT)
            # wait4: this child's own CPU time, also when other tools run beside it.
            _, status, usage = os.wait4(child.pid, 0)
            child.returncode = os.waitstatus_to_exitcode(status)
        wall = time.perf_counter() - start
        cpu = usage.ru_utime + usage.ru_stime
        if child.returncode != 0:
            with open(log, encoding="utf-8") as f:
                tail = "".join(f.readlines()[-25:])
            raise SystemExit(f"{tool} failed with status {child.returncode} (log {log}):\n{tail}")
        with self.lock:
            self.seconds[name] = (wall, cpu)
            # Merged with what is there: another invocation may share the directory.
            recorded = {}
            if os.path.isfile(self.record):
                with open(self.record, encoding="utf-8") as f:
                    recorded = json.load(f)
            with open(self.record, "w", encoding="utf-8") as f:
                json.dump({**recorded, **self.earlier, **self.seconds}, f)
        print(f"  {name}: done in {wall:.0f} s ({cpu:.0f} CPU s)", flush=True)

    def chains(self, *chains) -> None:
        """Runs each chain (a list of `(name, tool, *flags)` steps, in order) beside the
        others, `jobs` chains at a time; the first failure ends the script."""
        with concurrent.futures.ThreadPoolExecutor(self.jobs) as pool:
            futures = [pool.submit(lambda c=c: [self.run(*step) for step in c]) for c in chains]
            for future in futures:
                future.result()


def eval_results(output_dir: str) -> tuple[str, dict[str, float]]:
    """`(split, metrics)` of the run's one evaluated split (the retrieval files')."""
    with open(os.path.join(output_dir, "eval_results.json"), encoding="utf-8") as f:
        results = json.load(f)["results"]
    if len(results) != 1:
        raise SystemExit(f"{output_dir}: expected one evaluated split, got {sorted(results)}")
    return next(iter(results.items()))


def held_out_examples(files: dict[str, str], splits: set[str]):
    """The task's own examples of the retrieval files: queries (with their judgements)
    then documents, the order of the rows of `embeddings_<split>.npy`. `splits`: the
    names the runs gave the retrieval split (`dev` before e6df4aa, `retrieval` since;
    runs reused from an older checkout may differ), the first this library reads."""
    from keras_bert_zoo import tasks
    from keras_bert_zoo.utils.errors import UserError

    task = tasks.create_task("sentence_embedding", **files)
    for split in sorted(splits):
        try:
            return task.read(split)
        except UserError:
            continue
    raise SystemExit(f"this keras_bert_zoo reads none of the runs' splits {sorted(splits)}")


def run_vectors(output_dir: str, split: str, examples) -> np.ndarray:
    """The vectors an eval wrote (`embeddings_<split>.npy`), checked to be the examples'."""
    directory = os.path.join(output_dir, "predictions")
    with open(os.path.join(directory, f"embeddings_{split}.jsonl"), encoding="utf-8") as f:
        ids = [json.loads(line)["id"] for line in f]
    if ids != [example.text_id for example in examples]:
        raise SystemExit(f"{directory}: the written vectors are not the held-out texts'")
    return np.load(os.path.join(directory, f"embeddings_{split}.npy"))


def served_vectors(index_dirs: dict[str, str], examples) -> np.ndarray:
    """The vectors `index_corpus` wrote of the queries and of the corpus, in the
    examples' order."""
    by_id = {}
    for directory in index_dirs.values():
        with open(os.path.join(directory, "documents.jsonl"), encoding="utf-8") as f:
            ids = [json.loads(line)["id"] for line in f]
        by_id.update(zip(ids, np.load(os.path.join(directory, "vectors.npy")), strict=True))
    return np.stack([by_id[example.text_id] for example in examples])


def cut(vectors, dim: int) -> np.ndarray:
    """The first `dim` components, normalised again (what `--truncate_dim` serves)."""
    prefix = np.asarray(vectors, np.float32)[:, :dim]
    return prefix / np.linalg.norm(prefix, axis=1, keepdims=True)


def score(vectors, examples) -> dict[str, float]:
    """The task's retrieval metrics of these vectors (`evaluation.evaluate_embeddings`,
    what `run_finetuning --mode=eval` reports)."""
    from keras_bert_zoo.tasks.sentence_embedding.evaluation import evaluate_embeddings

    return evaluate_embeddings([row[None] for row in vectors], examples)


def per_query_ndcg(vectors, examples) -> np.ndarray:
    """nDCG@10 of each query: one relevant document, 1 / log2(rank + 1) within 10."""
    from keras_bert_zoo.tasks.sentence_embedding import metrics

    is_query = np.array([example.relevant is not None for example in examples])
    relevance = metrics.relevance_by_index(
        [e.text_id for e in examples if e.relevant is not None],
        [e.text_id for e in examples if e.relevant is None],
        {e.text_id: dict(e.relevant) for e in examples if e.relevant is not None},
    )
    ranks = metrics.relevant_ranks(vectors[is_query], vectors[~is_query], relevance)
    return np.array([1.0 / np.log2(r[0] + 1.0) if r[0] <= 10 else 0.0 for r in ranks])


def paired_interval(first, second, resamples: int, seed: int) -> tuple[float, float]:
    """The 95% paired bootstrap interval of mean(first) - mean(second) over queries."""
    rng = np.random.default_rng(seed)
    differences = np.asarray(first) - np.asarray(second)
    means = [
        differences[rng.integers(0, differences.size, differences.size)].mean()
        for _ in range(resamples)
    ]
    return float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


def describe_environment() -> list[str]:
    import keras
    import tensorflow as tf

    return [
        f"python {platform.python_version()}, tensorflow {tf.__version__}, keras "
        f"{keras.__version__}",
        f"CPU: {cpu_description()}; load average {os.getloadavg()[0]:.1f} at the start",
    ]


def work_directory(work_dir: str | None, reuse: bool, prefix: str):
    """A context giving the directory the runs write to: `work_dir` (created; refused
    when it holds files and not `reuse`), else a temporary directory removed after."""
    if work_dir:
        os.makedirs(work_dir, exist_ok=True)
        if os.listdir(work_dir) and not reuse:
            raise SystemExit(f"--work_dir={work_dir} is not empty: pass --reuse, or a new one")
        return contextlib.nullcontext(work_dir)
    return tempfile.TemporaryDirectory(prefix=prefix)


def main(argv=None) -> None:
    args = parse_args(argv)
    # Four runs' checkpoints and an export (about 1 GB): kept only where --work_dir asks.
    with work_directory(args.work_dir, args.reuse, "embedding_check_") as work_dir:
        run(args, work_dir)


def run(args, work_dir: str) -> None:
    started = time.perf_counter()
    for line in describe_environment():
        print(line)

    # === Data ===
    data = wiki.prepare(
        os.path.join(work_dir, "data"),
        args.train_pairs,
        args.held_out_fraction,
        args.max_queries,
        args.seed,
    )
    split, train, pairs_file, files = data.split, data.train, data.pairs_file, data.files
    query_count = data.query_count
    print(data.description())
    print(
        f"runs: {args.steps} steps of {args.batch_size} at lr {args.learning_rate:g}, "
        f"max_seq_length {args.max_seq_length}, seed {args.seed}",
        flush=True,
    )

    tools = Tools(work_dir, reuse=args.reuse, jobs=args.jobs)
    retrieval = [f"--{name}={path}" for name, path in files.items()]
    common = [
        "--task=sentence_embedding",
        f"--init_checkpoint={MINILM}",
        f"--max_seq_length={args.max_seq_length}",
        f"--seed={args.seed}",
        *retrieval,
    ]
    training = [
        "--mode=train_and_eval",
        f"--num_train_steps={args.steps}",
        f"--train_batch_size={args.batch_size}",
        f"--learning_rate={args.learning_rate}",
        "--eval_every=0",
        "--export_best=false",
        "--checkpoint_every=0",
        "--progress=log",
    ]
    out = {name: os.path.join(work_dir, name) for name in ("minilm", "in_batch", "hard", "mrl")}

    triplets_file = os.path.join(work_dir, "data", "train_triplets.jsonl")
    miner = f"{out['in_batch']}/finetuned" if args.mine_with == "in_batch" else MINILM
    export = os.path.join(work_dir, "exports", "mrl_192")
    index_dirs = {what: os.path.join(work_dir, f"index_{what}") for what in ("corpus", "queries")}
    # 1. The untouched MiniLM.
    untouched = [
        ("minilm", "run_finetuning", *common, "--mode=eval", f"--output_dir={out['minilm']}")
    ]
    # 2. In-batch negatives.
    in_batch = [
        (
            "in_batch",
            "run_finetuning",
            *common,
            *training,
            f"--train_file={pairs_file}",
            f"--output_dir={out['in_batch']}",
        )
    ]
    # 3. Hard negatives mined (with model 2 or MiniLM), then MiniLM trained on the triplets.
    hard = [
        (
            "mine",
            "mine_hard_negatives",
            f"--model={miner}",
            f"--train_file={pairs_file}",
            f"--output_file={triplets_file}",
            f"--num_negatives={args.num_negatives}",
            f"--margin={args.margin}",
            f"--max_seq_length={args.max_seq_length}",
        ),
        (
            "hard",
            "run_finetuning",
            *common,
            *training,
            f"--train_file={triplets_file}",
            f"--output_dir={out['hard']}",
        ),
    ]
    # 4. As 2 with Matryoshka; served at half width from its export.
    matryoshka = [
        (
            "mrl",
            "run_finetuning",
            *common,
            *training,
            f"--train_file={pairs_file}",
            f"--matryoshka_dims={','.join(map(str, MATRYOSHKA_DIMS))}",
            f"--output_dir={out['mrl']}",
        ),
        (
            "export",
            "export_saved_model",
            f"--finetuned_dir={out['mrl']}/finetuned",
            f"--export_base={os.path.dirname(export)}",
            f"--model_name={os.path.basename(export)}",
            f"--truncate_dim={HALF}",
        ),
    ] + [
        (
            f"index_{what}",
            "index_corpus",
            f"--model={export}",
            f"--corpus_file={files[f'{what}_file']}",
            f"--output_dir={directory}",
            "--index=exact",
        )
        for what, directory in index_dirs.items()
    ]
    chosen = {"in_batch": in_batch, "hard": hard, "matryoshka": matryoshka}
    chosen = {name: chain for name, chain in chosen.items() if name in args.systems}
    if args.mine_with == "in_batch" and "hard" in chosen:
        chosen["hard"] = chosen.pop("in_batch") + chosen["hard"]
    tools.chains(untouched, *chosen.values())

    # === Scores ===
    ran = ["minilm"] + [name for name in ("in_batch", "hard", "mrl") if name in tools.seconds]
    evaluated = {name: eval_results(out[name]) for name in ran}
    examples = held_out_examples(files, {split for split, _ in evaluated.values()})
    results = {name: metrics for name, (_, metrics) in evaluated.items()}
    vectors = {name: run_vectors(out[name], evaluated[name][0], examples) for name in ran}
    if "mrl" in ran:
        vectors["mrl@192"] = served_vectors(index_dirs, examples)
        results["mrl@192"] = score(vectors["mrl@192"], examples)
        exported_gap = float(np.abs(cut(vectors["mrl"], HALF) - vectors["mrl@192"]).max())
    if "in_batch" in ran:
        vectors["in_batch@192"] = cut(vectors["in_batch"], HALF)
        results["in_batch@192"] = score(vectors["in_batch@192"], examples)
    per_query = {name: per_query_ndcg(v, examples) for name, v in vectors.items()}
    for name in results:  # the per-query figures average to the runs' own nDCG@10
        if abs(per_query[name].mean() - results[name][PRIMARY]) > 1e-6:
            raise SystemExit(f"{name}: per-query nDCG@10 {per_query[name].mean()} is not the run's")

    # === Report ===
    labels = {
        "minilm": "1. all-MiniLM-L6-v2, untouched",
        "in_batch": "2. fine-tuned, in-batch negatives (MNRL)",
        "in_batch@192": f"   2 cut to {HALF} (no Matryoshka)",
        "hard": f"3. as 2 + {args.num_negatives} hard negative(s) mined with "
        f"{'2' if args.mine_with == 'in_batch' else 'MiniLM'}",
        "mrl": f"4. as 2 + Matryoshka {','.join(map(str, MATRYOSHKA_DIMS))}, at 384",
        "mrl@192": "   4 served at 192 (--truncate_dim)",
    }
    runs = {"minilm": "minilm", "in_batch": "in_batch", "hard": "hard", "mrl": "mrl"}
    rows = []
    for name, label in labels.items():
        if name not in results:
            continue
        wall, cpu = tools.seconds.get(runs.get(name, ""), (None, None))
        rows.append(
            [label]
            + [f"{results[name][m]:.4f}" for m in METRICS]
            + [f"{wall:.0f}" if wall is not None else "", f"{cpu:.0f}" if cpu is not None else ""]
        )
    print(
        f"\nheld-out retrieval: {query_count} queries (first sentences) against "
        f"{len(split.held_out)} paragraphs of {split.held_out_articles} articles never trained on"
    )
    print(format_table(["system", *METRICS, "run s", "run CPU s"], rows))
    if "mrl@192" in results:
        print(
            f"the export's {HALF}-wide vectors against the run's cut to {HALF} and normalised: "
            f"max |difference| {exported_gap:.2e}"
        )

    def ratio(label, first, second, goal=None, beats=False):
        if first not in results or second not in results:
            print(f"  {label}: not run")
            return
        value = results[first][PRIMARY] / results[second][PRIMARY]
        low, high = paired_interval(per_query[first], per_query[second], args.bootstrap, args.seed)
        text = (
            f"{value:.3f} ({results[first][PRIMARY]:.4f} / {results[second][PRIMARY]:.4f}; "
            f"difference, 95% paired bootstrap over the queries: [{low:+.4f}, {high:+.4f}])"
        )
        if goal is not None:
            met = value > goal if beats else value >= goal
            text += f"; goal {'>' if beats else '>='} {goal:g}: {'met' if met else 'NOT met'}"
        print(f"  {label}: {text}")

    print("\nratios of nDCG@10:")
    ratio("fine-tuned (2) / untouched (1)", "in_batch", "minilm", 1.0, beats=True)
    ratio("hard negatives (3) / in-batch (2)", "hard", "in_batch", 1.0, beats=True)
    ratio(f"Matryoshka half (4 at {HALF}) / full (4 at 384)", "mrl@192", "mrl", 0.95)
    ratio(f"without Matryoshka, 2 at {HALF} / 2 at 384", "in_batch@192", "in_batch")
    ratio("Matryoshka at full width, 4 / 2", "mrl", "in_batch")
    if "hard" in results:
        with open(triplets_file, encoding="utf-8") as f:
            mined = sum(1 for _ in f)
        print(f"hard negatives: {mined} of {len(train)} training pairs kept a mined negative")
    wall_total = time.perf_counter() - started
    child_cpu = sum(cpu for _, cpu in tools.seconds.values())
    print(
        f"wall time: {wall_total:.0f} s (the tools' CPU time {child_cpu:.0f} s; load average "
        f"{os.getloadavg()[0]:.1f} at the end)"
    )


if __name__ == "__main__":
    main()
