"""Pretraining end to end on a real Wikipedia dump: vocabulary, records, bert_tiny from scratch.

Not a CI test: a few minutes of CPU that show the whole pretraining path learns.

1. The MediaWiki dump excerpt gensim 4.4.0 ships
   (`gensim/test/test_data/enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2`,
   found through importlib) is split by article into two dumps: every
   `--heldout_every`-th article is held out, the rest trains.
2. A WordPiece vocabulary is learned from the training articles (markup stripped,
   sentences split: `pretraining.export_sentences`, then `text.vocab.build_vocab`, what
   `tools/create_pretraining_data.py --output_text_file` and `tools/build_vocab.py` do).
3. Pretraining records are created from the two `.xml.bz2` dumps themselves
   (`pretraining.create_pretraining_data`, what `tools/create_pretraining_data.py` runs).
4. bert_tiny (L=2, H=128, A=2) is pretrained from scratch (`runners.pretraining`, what
   `tools/run_pretraining.py` runs), evaluated on the held-out articles' records every
   `--eval_every` steps.

It prints the curve (step, held-out masked-LM accuracy and loss, NSP accuracy), the
most-frequent-token baseline (the held-out accuracy of always predicting the masked
token most frequent in the training records' labels) and the majority-class NSP
baseline, and the pass criterion: masked-LM accuracy at least `--min_mlm_gain` above
the baseline and NSP balanced accuracy (the mean of the accuracies on is-next and on
random-next pairs, 0.5 for any constant answer: a few held-out articles give unbalanced
pairs) at least `--min_nsp_accuracy`.

Usage:
    python benchmarks/pretraining_end_to_end.py          # 1500 steps (19 min, loaded 2 cores)
    python benchmarks/pretraining_end_to_end.py --quick  # smoke run, a few minutes
    python benchmarks/pretraining_end_to_end.py --train_steps=6000 --work_dir=/tmp/e2e
"""

from __future__ import annotations

import bz2
import collections
import dataclasses
import importlib.util
import json
import logging
import os
import platform
import re
import shutil
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from absl import app, flags  # noqa: E402

DUMP_NAME = "enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"

_QUICK = flags.DEFINE_bool("quick", False, "Smoke run: 30 articles, 60 steps.")
_TRAIN_STEPS = flags.DEFINE_integer(
    "train_steps", 1500, "Optimizer steps (meant as 5-8 min on 2 idle CPU cores; 19 min loaded)."
)
_EVAL_EVERY = flags.DEFINE_integer("eval_every", 250, "Steps between held-out evaluations.")
_BATCH_SIZE = flags.DEFINE_integer("train_batch_size", 32, "Sequences per step.")
_LEARNING_RATE = flags.DEFINE_float("learning_rate", 1e-3, "Peak learning rate.")
_VOCAB_SIZE = flags.DEFINE_integer("vocab_size", 8192, "WordPiece vocabulary size.")
_MAX_SEQ_LENGTH = flags.DEFINE_integer("max_seq_length", 128, "Tokens per sequence.")
_DUPE_FACTOR = flags.DEFINE_integer("dupe_factor", 5, "Masked copies of the training data.")
_HELDOUT_EVERY = flags.DEFINE_integer("heldout_every", 10, "Every n-th article is held out.")
_MIN_MLM_GAIN = flags.DEFINE_float(
    "min_mlm_gain", 0.05, "Pass: held-out MLM accuracy at least this far above the baseline."
)
_MIN_NSP_ACCURACY = flags.DEFINE_float(
    "min_nsp_accuracy",
    0.6,
    "Pass: held-out NSP balanced accuracy (the mean of the accuracies on is-next and on "
    "random-next pairs; 0.5 for any constant answer) at least this.",
)
_WORK_DIR = flags.DEFINE_string("work_dir", None, "Directory for everything (default: a temp dir).")


def find_dump() -> str:
    spec = importlib.util.find_spec("gensim")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("gensim is not installed (pip install gensim==4.4.0)")
    path = os.path.join(list(spec.submodule_search_locations)[0], "test", "test_data", DUMP_NAME)
    if not os.path.isfile(path):
        raise SystemExit(f"{path} is missing: gensim 4.4.0's test data holds it")
    return path


def split_dump(dump: str, train_path: str, heldout_path: str, every: int, max_pages=None):
    """Writes two MediaWiki dumps: every `every`-th article page to `heldout_path`."""
    with bz2.open(dump, "rt", encoding="utf-8") as f:
        xml = f.read()
    first = xml.index("<page>")
    header, footer = xml[:first], "</mediawiki>\n"
    pages = re.findall(r"<page>.*?</page>\s*", xml[first:], flags=re.S)
    articles = [p for p in pages if "<ns>0</ns>" in p and "<redirect" not in p]
    if max_pages:
        articles = articles[:max_pages]
    heldout = articles[every - 1 :: every]
    train = [p for i, p in enumerate(articles) if (i + 1) % every]
    for path, chosen in ((train_path, train), (heldout_path, heldout)):
        with bz2.open(path, "wt", encoding="utf-8") as out:
            out.write(header + "".join(chosen) + footer)
    return len(train), len(heldout)


def masked_label_counts(files, max_seq_length, max_predictions):
    """Counts of the real masked-LM labels and of the NSP labels of the records."""
    import numpy as np

    from keras_bert_zoo.data.pretraining import pretraining_dataset

    labels, nsp = collections.Counter(), collections.Counter()
    dataset = pretraining_dataset(
        files, 1024, max_seq_length=max_seq_length, max_predictions_per_seq=max_predictions
    )
    for batch in dataset:
        ids = batch["masked_lm_ids"].numpy()
        real = batch["masked_lm_weights"].numpy() > 0
        labels.update(np.asarray(ids[real]).tolist())
        nsp.update(batch["next_sentence_labels"].numpy().tolist())
    return labels, nsp


def main(argv):
    del argv
    logging.getLogger().setLevel(logging.INFO)
    from absl import logging as absl_logging

    absl_logging.set_verbosity(absl_logging.INFO)
    import tensorflow as tf

    from keras_bert_zoo.config import BertConfig
    from keras_bert_zoo.pretraining import CreationConfig, create_pretraining_data, export_sentences
    from keras_bert_zoo.runners.pretraining import PretrainingConfig, run_pretraining
    from keras_bert_zoo.text import vocab as vocab_lib

    quick = _QUICK.value
    train_steps = 60 if quick else _TRAIN_STEPS.value
    eval_every = 20 if quick else _EVAL_EVERY.value
    vocab_size = 2000 if quick else _VOCAB_SIZE.value
    dupe_factor = 2 if quick else _DUPE_FACTOR.value
    seq, predictions = _MAX_SEQ_LENGTH.value, max(1, round(_MAX_SEQ_LENGTH.value * 0.15))
    work_dir = _WORK_DIR.value or tempfile.mkdtemp(prefix="pretraining_e2e_")
    os.makedirs(work_dir, exist_ok=True)
    timings = {}

    def say(text=""):
        print(text, flush=True)

    dump = find_dump()
    say(f"Dump: {dump} ({os.path.getsize(dump) / 1e6:.2f} MB)")
    say(
        f"Python {platform.python_version()}, TensorFlow {tf.__version__}, "
        f"{os.cpu_count()} CPU(s), {platform.processor() or platform.machine()}"
    )

    start = time.time()
    train_dump = os.path.join(work_dir, "train.xml.bz2")
    heldout_dump = os.path.join(work_dir, "heldout.xml.bz2")
    train_articles, heldout_articles = split_dump(
        dump, train_dump, heldout_dump, _HELDOUT_EVERY.value, max_pages=30 if quick else None
    )
    say(f"Articles: {train_articles} train, {heldout_articles} held out")

    sentences = os.path.join(work_dir, "train_sentences.txt")
    say(export_sentences(train_dump, sentences))
    vocab_file = os.path.join(work_dir, "vocab.txt")
    tokens = vocab_lib.build_vocab(
        vocab_lib.read_lines([sentences]), vocab_size=vocab_size, lowercase=True
    )
    vocab_lib.write_vocab(vocab_file, tokens)
    say(f"Vocabulary: {len(tokens)} WordPiece tokens learned from the training articles")
    timings["vocabulary"] = time.time() - start

    start = time.time()
    records_dir = os.path.join(work_dir, "records")
    if os.path.isdir(records_dir):
        shutil.rmtree(records_dir)
    creation = CreationConfig(
        vocab_file=vocab_file,
        max_seq_length=seq,
        max_predictions_per_seq=predictions,
        dupe_factor=dupe_factor,
        chunk_chars=300_000,
    )
    train_summary = create_pretraining_data(
        train_dump, os.path.join(records_dir, "train.tfrecord@4"), creation
    )
    heldout_summary = create_pretraining_data(
        heldout_dump,
        os.path.join(records_dir, "heldout.tfrecord"),
        dataclasses.replace(creation, dupe_factor=1, random_seed=54321),
    )
    say(
        f"Records: {sum(train_summary.records_per_file)} train instances "
        f"(dupe_factor {dupe_factor}), {sum(heldout_summary.records_per_file)} held out; "
        f"{seq} tokens, {predictions} predictions"
    )
    timings["records"] = time.time() - start

    train_files = train_summary.output_files
    heldout_files = heldout_summary.output_files
    train_labels, _ = masked_label_counts(train_files, seq, predictions)
    heldout_labels, heldout_nsp = masked_label_counts(heldout_files, seq, predictions)
    most_frequent, _ = train_labels.most_common(1)[0]
    baseline = heldout_labels[most_frequent] / sum(heldout_labels.values())
    nsp_baseline = max(heldout_nsp.values()) / sum(heldout_nsp.values())
    say(
        f"Most-frequent-token baseline: always {tokens[most_frequent]!r} -> held-out MLM "
        f"accuracy {baseline:.4f}; majority-class NSP baseline {nsp_baseline:.4f} (balanced: 0.5)"
    )

    config_file = os.path.join(work_dir, "bert_config.json")
    tiny = BertConfig.from_preset(
        "bert_tiny_uncased", vocab_size=len(tokens), max_position_embeddings=512
    )
    with open(config_file, "w", encoding="utf-8") as f:
        json.dump(tiny.to_google_dict(), f, indent=2)
    output_dir = os.path.join(work_dir, "bert_tiny")
    if os.path.isdir(output_dir):
        shutil.rmtree(output_dir)
    start = time.time()
    result = run_pretraining(
        PretrainingConfig(
            input_file=",".join(train_files),
            eval_input_file=",".join(heldout_files),
            eval_steps=0,
            eval_batch_size=64,
            bert_config_file=config_file,
            vocab_file=vocab_file,
            output_dir=output_dir,
            num_train_steps=train_steps,
            warmup_proportion=0.05,
            learning_rate=_LEARNING_RATE.value,
            train_batch_size=_BATCH_SIZE.value,
            steps_per_loop=min(50, eval_every),
            checkpoint_every=eval_every * 5,
            eval_every=eval_every,
            progress="log",
        )
    )
    timings["pretraining"] = time.time() - start

    say()
    say("Held-out curve (bert_tiny from scratch):")
    say(f"{'step':>7} {'MLM acc':>8} {'MLM loss':>9} {'NSP acc':>8} {'NSP bal':>8} {'NSP loss':>9}")
    for entry in result.eval_history:
        r = entry["results"]
        say(
            f"{entry['step']:>7} {r['masked_lm_accuracy']:>8.4f} {r['masked_lm_loss']:>9.4f} "
            f"{r['next_sentence_accuracy']:>8.4f} {r['next_sentence_balanced_accuracy']:>8.4f} "
            f"{r['next_sentence_loss']:>9.4f}"
        )
    final = result.eval_results
    training = result.training
    speed = [h["steps_per_second"] for h in training.history[1:]] or [0.0]
    say()
    say(f"Baselines: MLM most-frequent-token {baseline:.4f}, NSP majority class {nsp_baseline:.4f}")
    say(
        f"Final (step {result.step}): MLM accuracy {final['masked_lm_accuracy']:.4f} "
        f"(+{final['masked_lm_accuracy'] - baseline:.4f} over the baseline), NSP accuracy "
        f"{final['next_sentence_accuracy']:.4f}, balanced "
        f"{final['next_sentence_balanced_accuracy']:.4f}; {len(heldout_files)} "
        f"held-out file(s), {int(final['masked_lm_predictions'])} masked positions, "
        f"{int(final['sequences'])} sequences"
    )
    say(
        "Wall time: "
        + ", ".join(f"{name} {seconds:.0f} s" for name, seconds in timings.items())
        + f"; training speed {sorted(speed)[len(speed) // 2]:.2f} steps/s (median loop)"
    )
    passed = (
        final["masked_lm_accuracy"] >= baseline + _MIN_MLM_GAIN.value
        and final["next_sentence_balanced_accuracy"] >= _MIN_NSP_ACCURACY.value
    )
    say(
        f"PASS criterion (MLM accuracy >= baseline + {_MIN_MLM_GAIN.value}, NSP balanced "
        "accuracy >= "
        f"{_MIN_NSP_ACCURACY.value}): {'PASS' if passed else 'FAIL'}"
        + (" (a --quick run is too short to be judged)" if quick else "")
    )
    say(f"Everything is under {work_dir}")
    if not passed and not quick:
        sys.exit(1)


if __name__ == "__main__":
    app.run(main)
