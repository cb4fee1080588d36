"""Which layout of the training batches is fastest, per task family: `--batching=auto`'s table.

For every task family the fine-tuning job trains (`runners.loss_and_weights.TASK_FAMILIES`
but pretraining, whose records are full rows), the job itself (`run_finetuning`, or
`run_distillation`) trains the installed all-MiniLM-L6-v2 (6 blocks, hidden 384) on real
text, once per layout:

- `padded`: every row `max_seq_length` long (the old default);
- `bucketed`: batches of similar lengths (windows of 8 batches of the shuffled stream
  sorted by length), each cut to its longest row rounded up to a multiple of 16;
- `packed`: several examples per row, block-diagonal attention (the families whose
  model has one output per example: `BertClassifier`).

The data (gensim's test data, which the `demo` extra installs; no download):

| family | data | max_seq_length |
|---|---|---|
| sentences | pang_lee_polarity.cor movie-review sentences (`_finetune_families`) | 128 |
| pairs | Wikipedia sentence pairs (`_finetune_families`) | 128 |
| regression | the review sentences, a score each (label 0 or 1, + length / 100) | 128 |
| multi_label | the review sentences, label sets (polarity; `long` past 20 words) | 128 |
| windows | lee_background.cor news articles, `--long_documents=windows` | 128 |
| tagging | lee_background.cor news, gazetteer NER tags (`_finetune_families`) | 128 |
| spans | cloze questions over Wikipedia paragraphs (`_finetune_families`) | 384 |
| multiple_choice | a Wikipedia sentence and 4 candidate next sentences | 128 |
| sentence_embedding | Wikipedia pairs: a first sentence, its paragraph (`_wiki_retrieval`) | 128 |
| distillation | a 3-block student of a MiniLM teacher of the review sentences | 128 |

Each run trains `--steps` steps of `--batch_size` sequences in loops of
`--steps_per_loop`; its rate is the sequences of every loop but the first (tracing) over
their wall time, from the Trainer's own history. Layouts alternate within each of
`--repeats` rounds (in a rotated order); the medians are printed with the ratio of each
layout to padded and the fastest layout, the choice `BATCHING_BY_FAMILY` should hold.
No assertion: the figures depend on the machine (run it on a quiet one).

Usage (from the repository root):

    PYTHONPATH=. python benchmarks/batching_choice.py [--families sentences,tagging]
        [--steps 20] [--batch_size 16] [--repeats 3] [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:
    sys.path.insert(0, REPO)

FAMILIES = (
    "sentences",
    "pairs",
    "regression",
    "multi_label",
    "windows",
    "tagging",
    "spans",
    "multiple_choice",
    "sentence_embedding",
    "distillation",
)
LAYOUTS = ("padded", "bucketed", "packed")
PACKING_FAMILIES = ("sentences", "pairs", "regression", "multi_label", "windows")
MODEL = "all-MiniLM-L6-v2"


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--families", default=",".join(FAMILIES))
    parser.add_argument("--layouts", default=",".join(LAYOUTS))
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--steps_per_loop", type=int, default=5)
    parser.add_argument("--batch_size", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="smoke run: 2 loops of 2 steps")
    parser.add_argument("--json", default=None, help="also write the medians here")
    args = parser.parse_args(argv)
    args.families = [f for f in args.families.split(",") if f]
    args.layouts = [layout for layout in args.layouts.split(",") if layout]
    for name in args.families:
        if name not in FAMILIES:
            parser.error(f"--families: unknown {name!r}; choose from {FAMILIES}")
    if args.quick:
        args.steps, args.steps_per_loop, args.repeats = 4, 2, 1
    return args


# === The data of each family ===


def _gensim_file(name: str) -> str:
    import gensim

    return os.path.join(os.path.dirname(gensim.__file__), "test", "test_data", name)


def _write_tsv(path, header, rows):
    with open(path, "w", encoding="utf-8") as f:
        f.write("\t".join(header) + "\n")
        for row in rows:
            f.write("\t".join(" ".join(str(v).replace("\t", " ").split()) for v in row) + "\n")


def _review_rows():
    with open(_gensim_file("pang_lee_polarity.cor"), encoding="latin-1") as f:
        rows = [line.split(" ", 1) for line in f if line.strip()]
    return [(text.strip(), tag.removeprefix("__label__")) for tag, text in rows]


def family_settings(name: str, data_dir: str, quick: bool) -> dict:
    """The `FinetuningConfig` settings of family `name`, its files written to `data_dir`."""
    from benchmarks import _finetune_families

    os.makedirs(data_dir, exist_ok=True)
    if name in ("sentences", "pairs", "tagging", "spans"):
        family = _finetune_families.build(name, data_dir, quick=quick)
        settings = {"max_seq_length": family.max_seq_length}
        options = {}
        for flag in family.tool_flags:
            key, _, value = flag.lstrip("-").partition("=")
            if key in ("task", "data_dir"):
                settings[key] = value
            else:
                options[key] = value
        settings["task_options"] = options
        return settings
    if name in ("regression", "multi_label"):
        rows = _review_rows()
        if name == "regression":
            rows = [(text, float(label == "pos") + len(text.split()) / 100) for text, label in rows]
            options = {"regression": True}
        else:
            rows = [
                (text, ",".join([label] + (["long"] if len(text.split()) > 20 else [])))
                for text, label in rows
            ]
            options = {"multi_label": True}
        _write_tsv(os.path.join(data_dir, "train.tsv"), ("text", "label"), rows)
        return {
            "task": "text_classification",
            "data_dir": data_dir,
            "max_seq_length": 128,
            "task_options": {"train_file": "train.tsv", **options},
        }
    if name == "windows":
        with open(_gensim_file("lee_background.cor"), encoding="utf-8") as f:
            articles = [line.strip() for line in f if line.strip()]
        rows = [(text, "long" if len(text.split()) > 300 else "short") for text in articles]
        _write_tsv(os.path.join(data_dir, "train.tsv"), ("text", "label"), rows)
        return {
            "task": "text_classification",
            "data_dir": data_dir,
            "max_seq_length": 128,
            "task_options": {"train_file": "train.tsv", "long_documents": "windows"},
        }
    if name == "multiple_choice":
        from benchmarks._wiki_sentences import read_sentences

        articles = [a for a in read_sentences(4000) if len(a) >= 2]
        rng = random.Random(0)
        with open(os.path.join(data_dir, "train.jsonl"), "w", encoding="utf-8") as f:
            for number in range(400):
                article = articles[number % len(articles)]
                index = rng.randrange(len(article) - 1)
                others = [rng.choice(rng.choice(articles)) for _ in range(3)]
                choices = [article[index + 1], *others]
                label = rng.randrange(4)
                choices[0], choices[label] = choices[label], choices[0]
                record = {"context": article[index], "choices": choices, "label": label}
                f.write(json.dumps(record) + "\n")
        return {"task": "multiple_choice", "data_dir": data_dir, "max_seq_length": 128}
    if name == "sentence_embedding":
        from benchmarks import _wiki_retrieval

        split = _wiki_retrieval.split_by_article(
            _wiki_retrieval.read_articles(), held_out_fraction=0.25, seed=0
        )
        _wiki_retrieval.write_pairs(os.path.join(data_dir, "pairs.jsonl"), split.train)
        return {
            "task": "sentence_embedding",
            "data_dir": data_dir,
            "max_seq_length": 128,
            "task_options": {"train_file": "pairs.jsonl"},
        }
    if name == "distillation":
        return family_settings("sentences", data_dir, quick)
    raise ValueError(name)


# === One run ===


def train_rate(settings: dict, layout: str, args, work_dir: str, teacher: str | None) -> float:
    """Sequences per second of one training run (every loop but the first)."""
    from keras_bert_zoo.runners import distillation, finetuning

    common = dict(
        mode="train",
        batching=layout,
        num_train_steps=args.steps,
        steps_per_loop=args.steps_per_loop,
        train_batch_size=args.batch_size,
        checkpoint_every=0,
        checkpoint_every_seconds=0,
        progress="none",
        output_dir=tempfile.mkdtemp(prefix=f"{layout}_", dir=work_dir),
        learning_rate=5e-5,
        warmup_proportion=0.0,
    )
    if teacher is None:
        result = finetuning.run_finetuning(
            finetuning.FinetuningConfig(init_checkpoint=MODEL, **settings, **common)
        )
    else:
        settings = {k: v for k, v in settings.items() if k != "task"}
        result = distillation.run_distillation(
            distillation.DistillationConfig(
                teacher=teacher, student_layers="3", **settings, **common
            )
        )
    loops = result.training.history[1:]
    seconds = sum(args.steps_per_loop / loop["steps_per_second"] for loop in loops)
    return args.steps_per_loop * args.batch_size * len(loops) / seconds


def fine_tuned_teacher(settings: dict, work_dir: str) -> str:
    """A MiniLM teacher of `settings`' task (2 steps: its speed is what counts)."""
    from keras_bert_zoo.runners import finetuning

    output_dir = os.path.join(work_dir, "teacher")
    finetuning.run_finetuning(
        finetuning.FinetuningConfig(
            init_checkpoint=MODEL,
            mode="train",
            num_train_steps=2,
            train_batch_size=8,
            progress="none",
            output_dir=output_dir,
            **settings,
        )
    )
    return output_dir


def main(argv=None):
    args = parse_args(argv)
    import logging

    logging.getLogger().setLevel(logging.WARNING)
    import tensorflow as tf

    print(
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, TF {tf.__version__}"
    )
    print(
        f"{MODEL}, batch {args.batch_size}, {args.steps} steps in loops of "
        f"{args.steps_per_loop}, {args.repeats} rounds\n"
    )
    work_dir = tempfile.mkdtemp(prefix="batching_choice_")
    rows = {}
    for family in args.families:
        settings = family_settings(family, os.path.join(work_dir, family, "data"), args.quick)
        teacher = fine_tuned_teacher(settings, work_dir) if family == "distillation" else None
        layouts = [
            layout for layout in args.layouts if layout != "packed" or family in PACKING_FAMILIES
        ]
        rates = {layout: [] for layout in layouts}
        for round_number in range(args.repeats):
            shift = round_number % len(layouts)
            for layout in layouts[shift:] + layouts[:shift]:
                started = time.time()
                rate = train_rate(settings, layout, args, os.path.join(work_dir, family), teacher)
                rates[layout].append(rate)
                print(
                    f"  {family} {layout}: {rate:.2f} seq/s ({time.time() - started:.0f} s run)",
                    flush=True,
                )
        medians = {layout: statistics.median(values) for layout, values in rates.items()}
        rows[family] = medians
        print_row(family, medians)
    print("\n| family | " + " | ".join(f"{layout} seq/s" for layout in LAYOUTS) + " | fastest |")
    print("|---|" + "---|" * (len(LAYOUTS) + 1))
    for family, medians in rows.items():
        print_row(family, medians, table=True)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(rows, f, indent=2)


def print_row(family, medians, table=False):
    padded = medians.get("padded")
    fastest = max(medians, key=medians.get)

    def cell(layout):
        if layout not in medians:
            return "-"
        ratio = f" ({medians[layout] / padded:.2f}x)" if padded and layout != "padded" else ""
        return f"{medians[layout]:.2f}{ratio}"

    if table:
        print(f"| {family} | " + " | ".join(cell(layout) for layout in LAYOUTS) + f" | {fastest} |")
    else:
        print(
            f"{family}: "
            + ", ".join(f"{layout} {cell(layout)}" for layout in medians)
            + f"; fastest {fastest}"
        )


if __name__ == "__main__":
    main()
