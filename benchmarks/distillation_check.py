"""Distillation check (issue 36): how much of a fine-tuned MiniLM teacher a student with
half or a third of its layers keeps, distilled or trained on labels alone, and how much
faster its SavedModel serves raw text, in one run.

Data (real text no one here wrote, all shipped with gensim; `_distillation_data.py`):

- Task: `text_classification` of 20-word passages of the Usenet posts of gensim's
  `mini_newsgroup` by newsgroup (alt.atheism vs sci.space), at most 16 passages a post,
  split by post (half the posts of each newsgroup for training, half for dev): 649
  training and 559 dev passages (dev majority class 0.572). Short passages make the
  task harder (the teacher reaches 0.89; 0.93 on 40-word passages) and give twice
  the dev passages of 40-word ones; 96% of them fit `--max_seq_length=48`.
- Transfer set: unlabelled 20-word passages of gensim's English Wikipedia excerpt
  (another corpus: encyclopaedia prose, not Usenet posts), the `--transfer_size`
  most similar by TF-IDF to each newsgroup's training passages (religion, philosophy,
  astronauts, the Apollo missions, ... and, past the first few hundred, general text).

Systems, each trained by the library's jobs, each evaluated on the same dev passages
with the task's accuracy (the final model of each run, not a best-on-dev pick):

1. teacher: `run_finetuning` of the real all-MiniLM-L6-v2 weights (6 layers, H=384),
   `--init_checkpoint=all-MiniLM-L6-v2`;
2. for each `--layers` count (default 3 and 2; `student_layers="3"` keeps the teacher's
   blocks 0,2,4, `"2"` blocks 0,3, with its embeddings, pooler and head: DistilBERT's
   initialization):
   (a) labels only: `run_distillation` with `soft_target_weight=0`,
       `hard_label_weight=1` and no transfer file, i.e. fine-tuning on the labels from
       exactly the initialization the distilled student gets (the same job and
       seed), with the teacher's recipe (epochs, learning rate);
   (b) distilled: `run_distillation` with the transfer file: the labelled rows train
       on the labels and the teacher's soft targets, the transfer rows on the soft
       targets alone (`--hidden_state_weight` adds TinyBERT's hidden-state MSE).
       Temperature: `--temperature` (default 2, DistilBERT's choice; the loss is
       scaled by T^2). With two classes the soft target is one number, the teacher's
       margin: at T = 1 the fine-tuned teacher puts p > 0.99 on 69% of the transfer
       rows (median 0.995), where the KL has almost no gradient left to teach the
       margin; at T = 2 none is above 0.99 (median 0.93), at T = 4 the median is 0.79.
       T = 1 and T = 4 gave the same 3-layer accuracy as T = 2 in one run each.

Printed: each system's dev accuracy and its fraction of the teacher's, the training
time; then every final model exported as a SavedModel the way
`tools/export_saved_model.py --finetuned_dir` does (`serving.export_finetuned` with the
tool's defaults: float32, the default tokenizer ops, padding-free auto) and loaded with
`tf.saved_model.load`, and `serving_default` timed on raw dev passages with
`serving_latency.measure` (every configuration's requests interleaved in a fresh
random order, one untimed pass first): batch-1 p50/p99 and process CPU per request,
batch-32 sentences/s; then each export against the teacher's export (p50 speed-up,
batch-32 throughput ratio), and the issue's goals: the 3-layer distilled student keeps
>= 97% of the teacher's accuracy at >= 1.8x its batch-32 throughput and beats the
3-layer label-only student.

Caveat: 559 dev passages from 99 posts; one passage is 0.18 points of accuracy and
passages of one post are correlated, so differences of a point between systems are
within noise (a different `--seed` changes the split of posts, the initial head and
the data order). For each student size the script prints the paired comparison of
distilled and labels-only on the dev passages (passages only one of them gets right,
exact McNemar p-value).

Usage (from the repository root):

    PYTHONPATH=. python benchmarks/distillation_check.py            # the measurement
    PYTHONPATH=. python benchmarks/distillation_check.py --quick    # smoke run, ~2-3 min
    PYTHONPATH=. python benchmarks/distillation_check.py --temperature 4 \
        --hidden_state_weight 1 --distill_epochs 4 --transfer_size 2000
    # the teacher's outputs computed once against the teacher in every step
    PYTHONPATH=. python benchmarks/distillation_check.py --cache_teacher_outputs \
        --skip_serving --layers 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:
    sys.path.insert(0, REPO)

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from benchmarks import _distillation_data as data  # noqa: E402
from benchmarks._timing import format_table  # noqa: E402

TEACHER = "teacher (6 layers)"


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--quick", action="store_true", help="Smoke run: tiny sizes, 2-layer students only."
    )
    parser.add_argument("--layers", default="3,2", help="Student layer counts.")
    parser.add_argument("--passage_words", type=int, default=20)
    parser.add_argument("--max_passages", type=int, default=16, help="Per post.")
    parser.add_argument("--transfer_size", type=int, default=1600)
    parser.add_argument("--max_seq_length", type=int, default=48)
    parser.add_argument("--batch_size", type=int, default=32, help="Training batch size.")
    parser.add_argument("--teacher_epochs", type=float, default=6.0)
    parser.add_argument("--learning_rate", type=float, default=1e-4, help="Teacher and (a).")
    parser.add_argument("--label_epochs", type=float, default=None, help="(a); default: teacher's.")
    parser.add_argument("--distill_epochs", type=float, default=3.0, help="(b), over all rows.")
    parser.add_argument("--distill_learning_rate", type=float, default=1e-4)
    parser.add_argument("--temperature", type=float, default=2.0)
    parser.add_argument("--hard_label_weight", type=float, default=1.0, help="(b).")
    parser.add_argument("--soft_target_weight", type=float, default=1.0, help="(b).")
    parser.add_argument("--hidden_state_weight", type=float, default=0.0, help="(b).")
    parser.add_argument("--requests", type=int, default=200, help="Batch-1 requests timed.")
    parser.add_argument("--batches", type=int, default=20, help="Batch-32 batches timed.")
    parser.add_argument("--warmup", type=int, default=3, help="Untimed requests first.")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--work_dir",
        default=None,
        help="Keep the runs and exports here (default: a temporary dir).",
    )
    parser.add_argument("--skip_serving", action="store_true", help="Accuracy table only.")
    parser.add_argument(
        "--cache_teacher_outputs",
        action="store_true",
        help="Also train each distilled student on teacher outputs computed once "
        "(run_distillation --cache_teacher_outputs) and compare the training times.",
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.layers, args.max_passages, args.transfer_size = "2", 1, 32
        args.teacher_epochs, args.distill_epochs = 1.0, 1.0
        args.requests, args.batches, args.warmup = 10, 2, 1
    args.label_epochs = args.label_epochs or args.teacher_epochs
    return args


# === Training ===


def common_settings(args, data_dir) -> dict:
    return dict(
        task="text_classification",
        data_dir=data_dir,
        max_seq_length=args.max_seq_length,
        train_batch_size=args.batch_size,
        eval_every=0,  # at the end only: the final model is the one reported
        export_best=False,
        progress="none",
        seed=args.seed,
    )


def train_teacher(args, data_dir, output_dir):
    from keras_bert_zoo.runners.finetuning import FinetuningConfig, run_finetuning

    return run_finetuning(
        FinetuningConfig(
            **common_settings(args, data_dir),
            init_checkpoint="all-MiniLM-L6-v2",
            output_dir=output_dir,
            num_train_epochs=args.teacher_epochs,
            learning_rate=args.learning_rate,
        )
    )


def train_student(args, data_dir, teacher_dir, output_dir, layers, transfer_file, cache=False):
    """(a) with `transfer_file=None`: labels only; (b) otherwise: distilled, with the
    teacher in every step or (`cache`) its outputs computed once."""
    from keras_bert_zoo.runners.distillation import DistillationConfig, run_distillation

    settings = dict(
        **common_settings(args, data_dir),
        teacher=teacher_dir,
        student_layers=str(layers),
        output_dir=output_dir,
    )
    if transfer_file is None:
        settings.update(
            num_train_epochs=args.label_epochs,
            learning_rate=args.learning_rate,
            soft_target_weight=0.0,
            hard_label_weight=1.0,
        )
    else:
        settings.update(
            num_train_epochs=args.distill_epochs,
            learning_rate=args.distill_learning_rate,
            transfer_file=transfer_file,
            temperature=args.temperature,
            hard_label_weight=args.hard_label_weight,
            soft_target_weight=args.soft_target_weight,
            hidden_state_weight=args.hidden_state_weight,
            cache_teacher_outputs=cache,
        )
    return run_distillation(DistillationConfig(**settings))


def correct_on_dev(result) -> list[bool]:
    """Per dev passage: the run's final model labels it right."""
    examples, answers = result.eval_answers
    return [
        answer.label == example.label
        for example, answer in zip(examples["dev"], answers["dev"], strict=True)
    ]


def paired(first: list[bool], second: list[bool]) -> tuple[int, int, float]:
    """Passages only `first` gets right, only `second` gets right, and the exact
    two-sided McNemar p-value (a binomial test on those discordant passages)."""
    from scipy.stats import binomtest

    only_first = sum(a and not b for a, b in zip(first, second, strict=True))
    only_second = sum(b and not a for a, b in zip(first, second, strict=True))
    discordant = only_first + only_second
    p_value = binomtest(only_first, discordant).pvalue if discordant else 1.0
    return only_first, only_second, p_value


def steps_of(output_dir) -> int | None:
    path = os.path.join(output_dir, "eval_results.json")
    if os.path.isfile(path):
        with open(path, encoding="utf-8") as f:
            return json.load(f).get("step")
    return None


# === Serving ===


def export_and_load(finetuned_dir, export_base, name):
    """`tools/export_saved_model.py --finetuned_dir` (its defaults), then loaded."""
    import tensorflow as tf

    from keras_bert_zoo import serving, tasks

    finetuned = tasks.load_finetuned(finetuned_dir)
    exported = serving.export(finetuned, export_base, model_name=name)
    field = finetuned.task.text_fields[0]
    loaded = tf.saved_model.load(exported.path)
    return loaded, field, exported


def serving_configs(exports):
    import tensorflow as tf

    def make(loaded, field):
        default = loaded.signatures["serving_default"]

        def for_batch(batch):
            text = tf.constant(batch)
            return lambda: default(**{field: text})["probabilities"].numpy()

        return for_batch

    return {name: make(loaded, field) for name, (loaded, field) in exports.items()}


def main(argv=None) -> None:
    args = parse_args(argv)
    if args.work_dir:
        os.makedirs(args.work_dir, exist_ok=True)
        run(args, args.work_dir)
        return
    # About 1.7 GB of checkpoints and exports: kept only where --work_dir asks.
    with tempfile.TemporaryDirectory(prefix="distillation_check_") as work_dir:
        run(args, work_dir)


def run(args, work_dir: str) -> None:
    started = time.perf_counter()

    split = data.newsgroup_split(args.passage_words, args.max_passages, seed=args.seed)
    transfer, selection = data.transfer_set(split["train"], args.transfer_size, args.passage_words)
    data_dir = os.path.join(work_dir, "data")
    data.write_task(data_dir, split)
    transfer_file = os.path.join(work_dir, "transfer.txt")
    data.write_transfer_file(transfer_file, transfer)
    dev_labels = [label for _, label in split["dev"]]
    majority = max(dev_labels.count(label) for label in data.LABELS) / len(dev_labels)
    print(
        f"task: mini_newsgroup passages of {args.passage_words} words (alt.atheism vs "
        f"sci.space), split by post: {len(split['train'])} train / {len(split['dev'])} dev "
        f"passages; dev majority class {majority:.3f}"
    )
    print(
        f"transfer set: {len(transfer)} unlabelled Wikipedia passages of "
        f"{selection['candidates']} (TF-IDF closest to each newsgroup's training passages; "
        + ", ".join(f"{k} {v:.3f}" for k, v in selection.items() if k != "candidates")
        + ")"
    )
    print(
        f"max_seq_length {args.max_seq_length}, batch {args.batch_size}; teacher and labels-only: "
        f"{args.label_epochs:g} epochs (teacher {args.teacher_epochs:g}) at lr "
        f"{args.learning_rate:g}; distilled: {args.distill_epochs:g} epochs over labelled + "
        f"transfer rows at lr {args.distill_learning_rate:g}, T={args.temperature:g}, weights "
        f"hard {args.hard_label_weight:g} / soft {args.soft_target_weight:g} / hidden "
        f"{args.hidden_state_weight:g}",
        flush=True,
    )

    systems = {}  # name -> (output_dir, accuracy, seconds)
    teacher_dir = os.path.join(work_dir, "teacher")
    start = time.perf_counter()
    result = train_teacher(args, data_dir, teacher_dir)
    systems[TEACHER] = (teacher_dir, result.eval_results["dev"]["accuracy"])
    correct = {TEACHER: correct_on_dev(result)}
    seconds = {TEACHER: time.perf_counter() - start}
    print(f"{TEACHER}: dev accuracy {systems[TEACHER][1]:.4f} ({seconds[TEACHER]:.0f} s)")
    teacher_finetuned = os.path.join(teacher_dir, "finetuned")
    for layers in [int(n) for n in args.layers.split(",") if n.strip()]:
        kinds = [("labels only", None, False), ("distilled", transfer_file, False)]
        if args.cache_teacher_outputs:
            kinds.append(("distilled, cached", transfer_file, True))
        for kind, transfer_path, cache in kinds:
            name = f"{layers} layers, {kind}"
            output_dir = os.path.join(
                work_dir, f"student_{layers}_{kind.replace(',', '').replace(' ', '_')}"
            )
            start = time.perf_counter()
            result = train_student(
                args, data_dir, teacher_finetuned, output_dir, layers, transfer_path, cache
            )
            seconds[name] = time.perf_counter() - start
            systems[name] = (output_dir, result.eval_results["dev"]["accuracy"])
            correct[name] = correct_on_dev(result)
            print(
                f"{name}: dev accuracy {systems[name][1]:.4f} ({seconds[name]:.0f} s)", flush=True
            )

    teacher_accuracy = systems[TEACHER][1]
    rows = [
        [
            name,
            f"{accuracy:.4f}",
            f"{accuracy / teacher_accuracy:.3f}",
            str(steps_of(output_dir)),
            f"{seconds[name]:.0f}",
        ]
        for name, (output_dir, accuracy) in systems.items()
    ]
    print(f"\ndev accuracy ({len(split['dev'])} passages; majority class {majority:.4f})")
    headers = ["system", "dev accuracy", "/ teacher", "steps", "training s"]
    print(format_table(headers, rows))
    for layers in [int(n) for n in args.layers.split(",") if n.strip()]:
        distilled, labels = f"{layers} layers, distilled", f"{layers} layers, labels only"
        only_distilled, only_labels, p_value = paired(correct[distilled], correct[labels])
        print(
            f"{layers} layers, distilled vs labels only, paired on the dev passages: "
            f"{only_distilled} right only distilled, {only_labels} right only labels-only "
            f"(exact McNemar p = {p_value:.2f})"
        )
        if args.cache_teacher_outputs:
            cached = f"{layers} layers, distilled, cached"
            print(
                f"{layers} layers, distilled: training {seconds[distilled]:.0f} s with the "
                f"teacher in every step, {seconds[cached]:.0f} s with its outputs computed "
                f"once ({seconds[distilled] / seconds[cached]:.2f}x); dev accuracy "
                f"{systems[distilled][1]:.4f} vs {systems[cached][1]:.4f}"
            )
    training_seconds = time.perf_counter() - started
    if args.skip_serving:
        print(f"wall time: {training_seconds:.0f} s")
        return

    # --- Serving: every final model exported and timed side by side ---
    from benchmarks.serving_latency import describe_environment, measure, percentile

    export_base = os.path.join(work_dir, "exports")
    exports = {}
    for index, (name, (output_dir, _)) in enumerate(systems.items()):
        start = time.perf_counter()
        loaded, field, exported = export_and_load(
            os.path.join(output_dir, "finetuned"), export_base, f"model_{index}"
        )
        exports[name] = (loaded, field)
        padding_free = exported.description.get("padding_free")
        print(
            f"export {name}: {time.perf_counter() - start:.0f} s, padding_free={padding_free} "
            f"-> {exported.path}"
        )
    for line in describe_environment(()):
        print(line)
    texts = [text for text, _ in split["dev"]]
    needed = args.requests + args.warmup + 32 * (args.batches + args.warmup)
    texts = [texts[i % len(texts)] for i in range(needed)]
    single = [[text] for text in texts[: args.requests + args.warmup]]
    rest = texts[args.requests + args.warmup :]
    batched = [rest[i * 32 : (i + 1) * 32] for i in range(args.batches + args.warmup)]
    configs = serving_configs(exports)
    latency = measure(configs, single, args.warmup)
    throughput = measure(configs, batched, args.warmup)
    summary = {}
    for name in configs:
        ones = [wall for wall, _ in latency[name][args.warmup :]]
        cpu = statistics.median(c for _, c in latency[name][args.warmup :])
        rate = 32 / statistics.median(wall for wall, _ in throughput[name][args.warmup :])
        summary[name] = (percentile(ones, 50), percentile(ones, 99), cpu, rate)
    teacher = summary[TEACHER]
    rows = [
        [
            name,
            f"{1000 * p50:.2f}",
            f"{1000 * p99:.2f}",
            f"{1000 * cpu:.2f}",
            f"{rate:.1f}",
            f"{teacher[0] / p50:.2f}",
            f"{rate / teacher[3]:.2f}",
        ]
        for name, (p50, p99, cpu, rate) in summary.items()
    ]
    print(
        f"\nserved raw text (serving_default): batch 1, {args.requests} requests; batch 32, "
        f"{args.batches} batches; interleaved across exports"
    )
    headers = [
        "export",
        "p50 ms (b=1)",
        "p99 ms (b=1)",
        "CPU ms (b=1)",
        "sent/s (b=32)",
        "teacher p50 / p50",
        "sent/s / teacher's",
    ]
    print(format_table(headers, rows))

    three_distilled, three_labels = "3 layers, distilled", "3 layers, labels only"
    if three_distilled in systems and three_labels in systems:
        fraction = systems[three_distilled][1] / teacher_accuracy
        speed = summary[three_distilled][3] / teacher[3]
        margin = systems[three_distilled][1] - systems[three_labels][1]
        _, _, p_value = paired(correct[three_distilled], correct[three_labels])

        def verdict(ok):
            return "met" if ok else "NOT met"

        print(
            f"\ngoals (issue 36), 3-layer distilled student: keeps {fraction:.3f} of the "
            f"teacher's accuracy (>= 0.97: {verdict(fraction >= 0.97)}) at {speed:.2f}x its "
            f"batch-32 throughput (>= 1.8: {verdict(speed >= 1.8)}); beats the 3-layer "
            f"labels-only student by {100 * margin:+.2f} points ({verdict(margin > 0)}; "
            f"paired McNemar p = {p_value:.2f}: "
            f"{'significant' if p_value < 0.05 else 'within noise'})"
        )
    print(
        f"wall time: training {training_seconds:.0f} s, total {time.perf_counter() - started:.0f} s"
    )


if __name__ == "__main__":
    main()
