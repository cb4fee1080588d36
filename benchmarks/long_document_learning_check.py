"""Long-document learning check: a labelled movie-review sentence hidden at a random
position inside 600-2,000 words of unrelated real news; windowed classification
against truncation and against chance.

Why the figure means something:

- Needles: the 200 labelled sentences (pos / neg) of gensim's `pang_lee_polarity.cor`
  (real movie-review snippets); split 3/4 train, 1/4 test by a seeded shuffle.
- Haystack: a run of 600-2,000 consecutive words of gensim's `lee_background.cor`
  (ABC news, 2001), one run per document, with the sentence inserted at a uniformly
  random word position; the news carries no sentiment label.
- Systems: `text_classification` fine-tuned from MiniLM with `--long_documents=truncate`
  (it sees the first `max_seq_length` pieces, so it finds the sentence only when it
  sits at the start) and with `--long_documents=windows` (every window trained with its
  document's label; answers aggregated with `window_aggregation`, max and mean both
  reported); chance is 0.5 (balanced labels).
- Reported: accuracy overall and by where the sentence sits (inside the first window
  or later), with the positions of the test sentences.

Usage (from the repository root):

    PYTHONPATH=. python benchmarks/long_document_learning_check.py [--quick]
    [--epochs 2] [--batch_size 16] [--learning_rate 5e-5] [--max_seq_length 128]
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:
    sys.path.insert(0, REPO)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="80 train / 30 test documents")
    parser.add_argument("--epochs", type=float, default=2.0)
    parser.add_argument("--batch_size", type=int, default=16)
    parser.add_argument("--learning_rate", type=float, default=5e-5)
    parser.add_argument("--max_seq_length", type=int, default=128)
    parser.add_argument("--window_stride", type=int, default=96)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    import gensim
    import keras
    import numpy as np

    from keras_bert_zoo import from_pretrained, tasks
    from keras_bert_zoo.tasks.feature_extraction import demo_model_dir
    from keras_bert_zoo.text import BertTokenizer

    test_data = os.path.join(os.path.dirname(gensim.__file__), "test", "test_data")
    with open(os.path.join(test_data, "pang_lee_polarity.cor"), encoding="latin-1") as f:
        needles = [line.split(" ", 1) for line in f if line.strip()]
    with open(os.path.join(test_data, "lee_background.cor"), encoding="latin-1") as f:
        news = f.read().split()
    rng = random.Random(args.seed)
    rng.shuffle(needles)
    cut = 3 * len(needles) // 4
    splits = {"train": needles[:cut], "dev": needles[cut:]}
    if args.quick:
        splits = {"train": splits["train"][:80], "dev": splits["dev"][:30]}
    data_dir = tempfile.mkdtemp(prefix="long_document_check_")
    positions = {}
    for split, rows in splits.items():
        positions[split] = []
        with open(os.path.join(data_dir, f"{split}.tsv"), "w", encoding="utf-8") as f:
            f.write("text\tlabel\n")
            for label, sentence in rows:
                length = rng.randint(600, 2000)
                start = rng.randrange(len(news) - length)
                words = news[start : start + length]
                at = rng.randrange(length + 1)
                words[at:at] = sentence.split()
                positions[split].append(at)
                f.write(
                    " ".join(words).replace("\t", " ")
                    + "\t"
                    + label.removeprefix("__label__")
                    + "\n"
                )
    print(f"{len(splits['train'])} train / {len(splits['dev'])} test documents of 600-2000 words")
    print("test sentence word positions: " + " ".join(str(p) for p in positions["dev"]))

    model_dir = demo_model_dir()
    tokenizer = BertTokenizer(os.path.join(model_dir, "vocab.txt"))
    results = {}
    for mode in ("truncate", "windows"):
        task = tasks.create_task(
            "text_classification",
            data_dir=data_dir,
            max_seq_length=args.max_seq_length,
            long_documents=mode,
            window_stride=args.window_stride,
            window_aggregation="max",
        )
        train, test = task.read("train"), task.read("dev")
        preprocessor = task.make_preprocessor(tokenizer)
        features = sum(1 for _ in task.features(train, preprocessor, training=False))
        steps = max(1, int(args.epochs * features / args.batch_size))
        keras.utils.set_random_seed(args.seed)
        model = task.build_model(from_pretrained(model_dir))
        model.compile(
            optimizer=keras.optimizers.AdamW(args.learning_rate, weight_decay=0.01),
            loss=task.loss(),
            metrics=task.metrics(),
            jit_compile=False,
        )
        print(f"{mode}: {features} training rows, {steps} steps of {args.batch_size}")
        dataset = tasks.training_dataset_fn(task, train, preprocessor, args.batch_size, seed=0)()
        model.fit(dataset, steps_per_epoch=steps, epochs=1, verbose=2)
        outputs, meta = tasks.predict_raw(task, model, test, preprocessor)
        gold = np.array([e.label for e in test])
        aggregations = ("max", "mean") if mode == "windows" else ("max",)
        for aggregation in aggregations:
            task.option_values["window_aggregation"] = aggregation
            answers = task.postprocess(outputs, meta, test)
            name = mode if mode == "truncate" else f"windows ({aggregation})"
            results[name] = np.array([a.label for a in answers]) == gold
        # The first window holds the words before about max_seq_length - 2 pieces.
    first_window = np.array(positions["dev"]) < (args.max_seq_length - 2) * 0.7
    early_count, later_count = int(first_window.sum()), int((~first_window).sum())
    print(f"\n{'system':18s} accuracy  first window ({early_count})  later ({later_count})")
    for name, correct in results.items():
        later = correct[~first_window].mean() if (~first_window).any() else float("nan")
        early = correct[first_window].mean() if first_window.any() else float("nan")
        print(f"{name:18s} {correct.mean():8.3f}  {early:8.3f}  {later:8.3f}")
    print(f"{'chance':18s} {0.5:8.3f}")


if __name__ == "__main__":
    main()
