"""Long-document learning check: a labelled passage hidden at a random position inside
600-2,000 words of unrelated real news; windowed classification against truncation
and against chance.

Why the figure means something:

- Needles (`--needles`):
  - `newsgroups` (default): a passage of up to 40 words from each of the 200 Usenet
    posts of gensim's `mini_newsgroup` (alt.atheism / sci.space, 100 each; headers,
    quoted lines and addresses removed), labelled by its newsgroup;
  - `polarity`: the 200 movie-review sentences (pos / neg) of gensim's
    `pang_lee_polarity.cor`. Sentiment of one sentence from 150 examples is barely
    learnable even without a haystack (the `needle alone` row says how far), so this
    mostly measures the needle task, not the windows.
  Split 3/4 train, 1/4 test by a seeded shuffle; every passage is hidden in
  `--train_copies` (training) or `--test_copies` (test) different haystacks: a window
  holds the passage in about one document window out of 17, and the copies give the
  windowed model as many passage windows to learn from as `needle alone` sees.
- Haystack: a run of 600-2,000 consecutive words of gensim's `lee_background.cor`
  (ABC news, 2001), one run per document, with the sentence inserted at a uniformly
  random word position; the news carries no sentiment label.
- Systems: `text_classification` fine-tuned from MiniLM with `--long_documents=truncate`
  (it sees the first `max_seq_length` pieces, so it finds the sentence only when it
  sits at the start) and with `--long_documents=windows` (every window trained with its
  document's label; answers aggregated with `window_aggregation`, max and mean both
  reported); chance is 0.5 (balanced labels).
- Reported: accuracy overall and by where the passage sits (inside the first window
  or later), with the positions of the test passages; `needle alone` (the same model
  fine-tuned and tested on the bare passages, no haystack) is the ceiling.

Usage (from the repository root):

    PYTHONPATH=. python benchmarks/long_document_learning_check.py [--quick]
    [--needles newsgroups|polarity] [--train_copies 3] [--test_copies 2]
    [--epochs 1.5] [--batch_size 16] [--learning_rate 5e-5] [--max_seq_length 128]
"""

from __future__ import annotations

import argparse
import os
import random
import re
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:
    sys.path.insert(0, REPO)


def newsgroup_passages(test_data: str, words: int = 40) -> list[tuple[str, str]]:
    """(label, passage) per post of gensim's pickled 20-newsgroups sample."""
    import io
    import pickle
    import zlib

    class _BunchAsDict(pickle.Unpickler):
        # The pickle names sklearn's old `Bunch` class; a dict holds the same fields.
        def find_class(self, module, name):
            if name == "Bunch":
                return dict
            return super().find_class(module, name)

    with open(os.path.join(test_data, "mini_newsgroup"), "rb") as f:
        bunch = _BunchAsDict(io.BytesIO(zlib.decompress(f.read())), encoding="latin-1").load()
    passages = []
    for post, target in zip(bunch["data"], bunch["target"], strict=True):
        body = post.split("\n\n", 1)[-1]
        lines = [
            line
            for line in body.splitlines()
            if not line.lstrip().startswith((">", "|", ":"))
            and "@" not in line
            and not re.search(r"writes:|wrote:|^-- ?$", line)
        ]
        text = " ".join(" ".join(lines).split()[:words])
        if len(text.split()) >= 8:
            passages.append((bunch["target_names"][int(target)].split(".")[-1], text))
    return passages


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="80 train / 30 test documents")
    parser.add_argument("--epochs", type=float, default=1.5)
    parser.add_argument("--batch_size", type=int, default=16)
    parser.add_argument("--learning_rate", type=float, default=5e-5)
    parser.add_argument("--max_seq_length", type=int, default=128)
    parser.add_argument("--window_stride", type=int, default=96)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--train_copies", type=int, default=3, help="Haystacks per training passage."
    )
    parser.add_argument("--test_copies", type=int, default=2, help="Haystacks per test passage.")
    parser.add_argument("--needles", choices=("newsgroups", "polarity"), default="newsgroups")
    args = parser.parse_args()

    import gensim
    import keras
    import numpy as np

    from keras_bert_zoo import from_pretrained, tasks
    from keras_bert_zoo.tasks.feature_extraction import demo_model_dir
    from keras_bert_zoo.text import BertTokenizer

    test_data = os.path.join(os.path.dirname(gensim.__file__), "test", "test_data")
    if args.needles == "newsgroups":
        needles = newsgroup_passages(test_data)
    else:
        with open(os.path.join(test_data, "pang_lee_polarity.cor"), encoding="latin-1") as f:
            needles = [
                (label.removeprefix("__label__"), sentence.strip())
                for label, sentence in (line.split(" ", 1) for line in f if line.strip())
            ]
    with open(os.path.join(test_data, "lee_background.cor"), encoding="latin-1") as f:
        news = f.read().split()
    rng = random.Random(args.seed)
    rng.shuffle(needles)
    cut = 3 * len(needles) // 4
    splits = {"train": needles[:cut], "dev": needles[cut:]}
    if args.quick:
        splits = {"train": splits["train"][:80], "dev": splits["dev"][:30]}
    data_dir = tempfile.mkdtemp(prefix="long_document_check_")
    needle_dir = os.path.join(data_dir, "needle_alone")
    os.makedirs(needle_dir)
    positions = {}
    for split, rows in splits.items():
        positions[split] = []
        with (
            open(os.path.join(data_dir, f"{split}.tsv"), "w", encoding="utf-8") as documents,
            open(os.path.join(needle_dir, f"{split}.tsv"), "w", encoding="utf-8") as bare,
        ):
            documents.write("text\tlabel\n")
            bare.write("text\tlabel\n")
            copies = args.train_copies if split == "train" else args.test_copies
            for label, sentence in rows:
                bare.write(sentence.replace("\t", " ") + f"\t{label}\n")
                for _ in range(copies):
                    length = rng.randint(600, 2000)
                    start = rng.randrange(len(news) - length)
                    words = news[start : start + length]
                    at = rng.randrange(length + 1)
                    words[at:at] = sentence.split()
                    positions[split].append(at)
                    documents.write(" ".join(words).replace("\t", " ") + f"\t{label}\n")
    print(
        f"{len(splits['train'])} train / {len(splits['dev'])} test passages; "
        f"{len(positions['train'])} train / {len(positions['dev'])} test documents of "
        "600-2,000 news words"
    )
    print("test passage word positions: " + " ".join(str(p) for p in positions["dev"]))

    model_dir = demo_model_dir()
    tokenizer = BertTokenizer(os.path.join(model_dir, "vocab.txt"))
    results = {}
    systems = (("needle alone", needle_dir, "truncate"), ("truncate", data_dir, "truncate"))
    for name, directory, mode in systems + (("windows", data_dir, "windows"),):
        task = tasks.create_task(
            "text_classification",
            data_dir=directory,
            max_seq_length=args.max_seq_length,
            long_documents=mode,
            window_stride=args.window_stride,
            window_aggregation="max",
        )
        train, test = task.read("train"), task.read("dev")
        preprocessor = task.make_preprocessor(tokenizer)
        features = sum(1 for _ in task.features(train, preprocessor, training=False))
        # The bare passages are repeated as often as the documents hide each one.
        repeats = args.train_copies if directory == needle_dir else 1
        steps = max(1, int(args.epochs * repeats * features / args.batch_size))
        keras.utils.set_random_seed(args.seed)
        model = task.build_model(from_pretrained(model_dir))
        model.compile(
            optimizer=keras.optimizers.AdamW(args.learning_rate, weight_decay=0.01),
            loss=task.loss(),
            metrics=task.metrics(),
            jit_compile=False,
        )
        print(f"{name}: {features} training rows, {steps} steps of {args.batch_size}")
        dataset = tasks.training_dataset_fn(task, train, preprocessor, args.batch_size, seed=0)()
        model.fit(dataset, steps_per_epoch=steps, epochs=1, verbose=2)
        outputs, meta = tasks.predict_raw(task, model, test, preprocessor)
        gold = np.array([e.label for e in test])
        aggregations = ("max", "mean") if mode == "windows" else ("max",)
        for aggregation in aggregations:
            task.option_values["window_aggregation"] = aggregation
            answers = task.postprocess(outputs, meta, test)
            if mode == "windows":
                name = f"windows ({aggregation})"
            results[name] = np.array([a.label for a in answers]) == gold
        # The first window holds the words before about max_seq_length - 2 pieces.
    first_window = np.array(positions["dev"]) < (args.max_seq_length - 2) * 0.7
    early_count, later_count = int(first_window.sum()), int((~first_window).sum())
    print(f"\n{'system':18s} accuracy  first window ({early_count})  later ({later_count})")
    ceiling = results.pop("needle alone").mean()
    print(f"{'needle alone':18s} {ceiling:8.3f}  (no haystack: the ceiling)")
    for name, correct in results.items():
        later = correct[~first_window].mean() if (~first_window).any() else float("nan")
        early = correct[first_window].mean() if first_window.any() else float("nan")
        print(f"{name:18s} {correct.mean():8.3f}  {early:8.3f}  {later:8.3f}")
    print(f"{'chance':18s} {0.5:8.3f}")


if __name__ == "__main__":
    main()
