"""Multi-label learning check: fine-tune MiniLM on real news articles with topic labels a
script derives from the whole article, reading only the article's opening.

Why the figure means something:

- Text: the 300 real news articles of gensim's `lee_background.cor` (ABC news, 2001).
- Labels: topic sets derived here from each WHOLE article by keyword rules (`TOPICS`:
  an article has a topic when it mentions two or more of its words, counting
  repeats); an article may have none, one or several. The model reads only the
  first `max_seq_length` pieces (truncation), so it must infer topics from the
  opening, not find the counted words.
- Split: whole articles, 2/3 train, 1/3 test, by a seeded shuffle.
- Baselines on the same test articles: the per-label majority (a label predicted for
  every article when most training articles have it), and the per-label-frequency
  guesser (each label drawn with its training frequency; its expected F1 averaged
  over 200 draws).
- Metrics: `text_classification --multi_label`'s micro/macro F1 and subset accuracy
  (equal to scikit-learn's, see tests/tasks/test_multi_label.py), at threshold 0.5 and
  with thresholds tuned on the training articles' predictions.

Usage (from the repository root):

    PYTHONPATH=. python benchmarks/multi_label_learning_check.py [--quick]
    [--epochs 10] [--batch_size 16] [--learning_rate 1e-4] [--max_seq_length 128]
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

TOPICS = {
    "fires": r"\b(?:bushfires?|fires?|blazes?|firefighters?)\b",
    "middle_east": r"\b(?:Israel\w*|Palestin\w*|Arafat|Sharon|Gaza|Hamas)\b",
    "afghanistan": r"\b(?:Afghan\w*|Taliban|Kabul|Kandahar|bin Laden|al Qaeda)\b",
    "politics": r"\b(?:Howard|Labor|election|Senate|Parliament|Opposition|Beazley)\b",
    "economy": r"\b(?:economy|dollar|shares|market|interest rates?|Reserve Bank|ASX)\b",
    "courts": r"\b(?:court|judge|charged|trial|sentenced|police)\b",
}


def topic_labels(article: str) -> tuple[str, ...]:
    return tuple(name for name, pattern in TOPICS.items() if len(re.findall(pattern, article)) >= 2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--epochs", type=float, default=10.0)
    parser.add_argument("--batch_size", type=int, default=16)
    parser.add_argument("--learning_rate", type=float, default=1e-4)
    parser.add_argument("--max_seq_length", type=int, default=128)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    import gensim
    import keras
    import numpy as np

    from keras_bert_zoo import from_pretrained, tasks
    from keras_bert_zoo.tasks.feature_extraction import demo_model_dir
    from keras_bert_zoo.tasks.sentence import multi_label
    from keras_bert_zoo.text import BertTokenizer

    corpus = os.path.join(
        os.path.dirname(gensim.__file__), "test", "test_data", "lee_background.cor"
    )
    with open(corpus, encoding="latin-1") as f:
        articles = [line.strip() for line in f if line.strip()]
    rng = random.Random(args.seed)
    order = list(range(len(articles)))
    rng.shuffle(order)
    cut = 2 * len(order) // 3
    data_dir = tempfile.mkdtemp(prefix="multi_label_check_")
    for split, positions in (("train", order[:cut]), ("dev", order[cut:])):
        with open(os.path.join(data_dir, f"{split}.tsv"), "w", encoding="utf-8") as f:
            f.write("\t".join(["text", *TOPICS]) + "\n")
            for position in positions:
                labels = topic_labels(articles[position])
                text = articles[position].replace("\t", " ")
                f.write("\t".join([text, *("1" if t in labels else "0" for t in TOPICS)]) + "\n")

    task = tasks.create_task(
        "text_classification",
        data_dir=data_dir,
        max_seq_length=args.max_seq_length,
        label_columns=",".join(TOPICS),
    )
    train, test = task.read("train"), task.read("dev")
    names = task.label_names
    gold_train = multi_label.multi_hot([e.label for e in train], names)
    gold = multi_label.multi_hot([e.label for e in test], names)
    print(f"corpus {corpus}: {len(train)} train / {len(test)} test articles")
    print(
        "label frequency (train): "
        + ", ".join(f"{n} {f:.2f}" for n, f in zip(names, gold_train.mean(axis=0), strict=True))
    )

    model_dir = demo_model_dir()
    tokenizer = BertTokenizer(os.path.join(model_dir, "vocab.txt"))
    preprocessor = task.make_preprocessor(tokenizer)
    keras.utils.set_random_seed(args.seed)
    model = task.build_model(from_pretrained(model_dir))
    epochs = 1.0 if args.quick else args.epochs
    steps = max(1, int(epochs * len(train) / args.batch_size))
    model.compile(
        optimizer=keras.optimizers.AdamW(args.learning_rate, weight_decay=0.01),
        loss=task.loss(),
        metrics=task.metrics(),
        jit_compile=False,
    )
    dataset = tasks.training_dataset_fn(task, train, preprocessor, args.batch_size, seed=0)()
    model.fit(dataset, steps_per_epoch=steps, epochs=1, verbose=2)

    rows = []
    answers = tasks.predict(task, model, test, preprocessor)
    rows.append(("fine-tuned MiniLM, threshold 0.5", task.evaluate(answers, test)))
    train_answers = tasks.predict(task, model, train, preprocessor)
    train_probabilities = np.array([[a.probabilities[n] for n in names] for a in train_answers])
    thresholds = multi_label.tune_thresholds(train_probabilities, gold_train)
    probabilities = np.array([[a.probabilities[n] for n in names] for a in answers])
    rows.append(
        (
            "fine-tuned MiniLM, thresholds tuned on train",
            multi_label.multi_label_report(gold, probabilities >= thresholds, names),
        )
    )
    majority = np.broadcast_to(gold_train.mean(axis=0) > 0.5, gold.shape)
    rows.append(("per-label majority", multi_label.multi_label_report(gold, majority, names)))
    draws = np.random.default_rng(args.seed)
    frequency = gold_train.mean(axis=0)
    reports = [
        multi_label.multi_label_report(gold, draws.uniform(size=gold.shape) < frequency, names)
        for _ in range(200)
    ]
    rows.append(
        (
            "per-label frequency (mean of 200 draws)",
            {key: float(np.mean([r[key] for r in reports])) for key in reports[0]},
        )
    )
    print(f"\n{'system':48s} micro_f1 macro_f1 subset_acc")
    for name, report in rows:
        print(
            f"{name:48s} {report['micro_f1']:8.3f} {report['macro_f1']:8.3f} "
            f"{report['subset_accuracy']:10.3f}"
        )


if __name__ == "__main__":
    main()
