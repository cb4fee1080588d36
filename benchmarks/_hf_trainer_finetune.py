"""One Hugging Face `transformers.Trainer` fine-tuning run, as its own process, for
`finetune_speed_vs_hf_trainer.py` (which measures the process's peak memory).

    python benchmarks/_hf_trainer_finetune.py SPEC.json RESULT.json

SPEC.json: `data` (a `_finetune_families.Family.hf_data`), `model_dir`, `batch_size`,
`max_seq_length`, `learning_rate`, `num_train_epochs` or `max_steps`, `seed`,
`warmup_ratio`, `weight_decay`, `group_by_length`, `torch_compile`, `warmup_steps`
(steps left out of the steady-state rate), `output_dir`.

What runs is Hugging Face's documented recipe for each kind, nothing of keras_bert_zoo
(this process never imports TensorFlow):

- `classification`: `AutoModelForSequenceClassification` (a new head), the model
  directory's tokenizer with `truncation=True, max_length=...` and no padding, batches
  padded to their longest row by `DataCollatorWithPadding` (Trainer's default collator);
  accuracy.
- `tagging`: `AutoModelForTokenClassification`, words tokenized with
  `is_split_into_words=True`, the tag on each word's first piece (-100 elsewhere),
  `DataCollatorForTokenClassification` (the collator the token-classification docs use:
  it pads the labels too); entity precision / recall / F1 by conlleval's rules (words
  cut off by the truncation count as `O`).
- `spans`: `AutoModelForQuestionAnswering`, `run_qa.py`'s features (question + context,
  `truncation="only_second"`, `stride` windows with offset mappings; a window without the
  answer points at [CLS]), `DataCollatorWithPadding`; answers decoded as `run_qa.py`'s
  post-processing does (n-best starts and ends inside the context, at most
  `max_answer_length` pieces, best window per question); the official SQuAD v1.1 EM / F1.

Timing, from Trainer's own clock: `train_samples_per_second` (the whole `train()`: the
steps where `torch.compile` compiles included), and a steady-state rate from a callback's
`time.perf_counter()` at each step's end (a step's time runs from the previous step's
end: data loading included), leaving out the first `warmup_steps` steps and, with
`torch_compile`, every later step in which Dynamo / AOTAutograd / Inductor compiled
(their counters moved: a new shape, e.g. an epoch's last, smaller batch, recompiles).
A wrapper around the collator counts the real and computed (padded) tokens of every
training batch.
"""

from __future__ import annotations

import collections
import json
import os
import re
import string
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("USE_TF", "0")


# === Reading the files `_finetune_families.py` wrote ===


def read_tsv(path: str) -> list[dict[str, str]]:
    with open(path, encoding="utf-8") as f:
        header = f.readline().rstrip("\n").split("\t")
        return [dict(zip(header, line.rstrip("\n").split("\t"), strict=True)) for line in f]


def read_conll(path: str) -> list[tuple[list[str], list[str]]]:
    sentences, words, tags = [], [], []
    with open(path, encoding="utf-8") as f:
        for line in f:
            fields = line.split()
            if not fields or fields[0] == "-DOCSTART-":
                if words:
                    sentences.append((words, tags))
                words, tags = [], []
                continue
            words.append(fields[0])
            tags.append(fields[-1])
    if words:
        sentences.append((words, tags))
    return sentences


def read_squad(path: str) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        data = json.load(f)["data"]
    return [
        {
            "id": qa["id"],
            "question": qa["question"],
            "context": paragraph["context"],
            "answers": qa["answers"],
        }
        for article in data
        for paragraph in article["paragraphs"]
        for qa in paragraph["qas"]
    ]


# === Metrics ===


def _chunk_end(previous_tag, tag, previous_type, type_):
    return (
        previous_tag in ("B", "I")
        and tag in ("B", "O")
        or previous_tag in ("B", "I")
        and tag == "I"
        and previous_type != type_
    )


def _chunk_start(previous_tag, tag, previous_type, type_):
    return tag == "B" or (tag == "I" and (previous_tag == "O" or previous_type != type_))


def entities(tags: list[str]) -> set[tuple[str, int, int]]:
    """(type, first, last) chunks of IOB tags by conlleval's rules (an I- after O or after
    another type starts a chunk)."""
    chunks, start, previous_tag, previous_type = set(), None, "O", ""
    for index, label in enumerate([*tags, "O"]):
        tag, _, type_ = label.partition("-")
        if _chunk_end(previous_tag, tag, previous_type, type_) and start is not None:
            chunks.add((previous_type, start, index - 1))
            start = None
        if _chunk_start(previous_tag, tag, previous_type, type_):
            start = index
        previous_tag, previous_type = tag, type_
    return chunks


def entity_scores(gold: list[list[str]], predicted: list[list[str]]) -> dict[str, float]:
    found = correct = expected = 0
    for gold_tags, predicted_tags in zip(gold, predicted, strict=True):
        gold_chunks, predicted_chunks = entities(gold_tags), entities(predicted_tags)
        found += len(predicted_chunks)
        expected += len(gold_chunks)
        correct += len(gold_chunks & predicted_chunks)
    precision = correct / found if found else 0.0
    recall = correct / expected if expected else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"f1": f1, "precision": precision, "recall": recall}


def _normalize_answer(text: str) -> str:
    """The official SQuAD v1.1 normalization."""
    text = "".join(ch for ch in text.lower() if ch not in set(string.punctuation))
    text = re.sub(r"\b(a|an|the)\b", " ", text)
    return " ".join(text.split())


def _f1(prediction: str, truth: str) -> float:
    predicted, gold = _normalize_answer(prediction).split(), _normalize_answer(truth).split()
    common = collections.Counter(predicted) & collections.Counter(gold)
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision, recall = same / len(predicted), same / len(gold)
    return 2 * precision * recall / (precision + recall)


def squad_v1_scores(examples: list[dict], predictions: dict[str, str]) -> dict[str, float]:
    """`evaluate-v1.1.py`: the best EM and F1 over each question's answers, in percent."""
    exact = f1 = 0.0
    for example in examples:
        truths = [answer["text"] for answer in example["answers"]]
        prediction = predictions.get(example["id"], "")
        exact += max(_normalize_answer(prediction) == _normalize_answer(t) for t in truths)
        f1 += max(_f1(prediction, t) for t in truths)
    return {"exact_match": 100.0 * exact / len(examples), "f1": 100.0 * f1 / len(examples)}


# === Features ===


class Rows:
    """A torch map-style dataset of feature dicts (what Trainer iterates)."""

    def __init__(self, rows: list[dict]):
        self.rows = rows

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, index):
        return self.rows[index]


def _model_inputs(encoding, index=None):
    keys = ("input_ids", "token_type_ids", "attention_mask")
    if index is None:
        return {key: encoding[key] for key in keys if key in encoding}
    return {key: encoding[key][index] for key in keys if key in encoding}


def classification_features(data, tokenizer, max_length):
    train, dev = read_tsv(data["train"]), read_tsv(data["dev"])
    labels = sorted({row["label"] for row in train})

    def encode(rows):
        columns = [[row[column] for row in rows] for column in data["text_columns"]]
        encoding = tokenizer(*columns, truncation=True, max_length=max_length)
        return [
            {**_model_inputs(encoding, i), "labels": labels.index(row["label"])}
            for i, row in enumerate(rows)
        ]

    return labels, encode(train), encode(dev), dev


def tagging_features(data, tokenizer, max_length):
    tags = data["tags"]
    train, dev = read_conll(data["train"]), read_conll(data["dev"])

    def encode(sentences):
        encoding = tokenizer(
            [words for words, _ in sentences],
            is_split_into_words=True,
            truncation=True,
            max_length=max_length,
        )
        rows = []
        for i, (_, sentence_tags) in enumerate(sentences):
            word_ids, previous, labels = encoding.word_ids(i), None, []
            for word in word_ids:
                first = word is not None and word != previous
                labels.append(tags.index(sentence_tags[word]) if first else -100)
                previous = word
            rows.append({**_model_inputs(encoding, i), "labels": labels})
        return rows, encoding

    train_rows, _ = encode(train)
    dev_rows, dev_encoding = encode(dev)
    return tags, train_rows, dev_rows, (dev, dev_encoding)


def span_features(data, tokenizer, max_length):
    train, dev = read_squad(data["train"]), read_squad(data["dev"])

    def encode(examples, training):
        encoding = tokenizer(
            [e["question"].lstrip() for e in examples],
            [e["context"] for e in examples],
            truncation="only_second",
            max_length=max_length,
            stride=data["doc_stride"],
            return_overflowing_tokens=True,
            return_offsets_mapping=True,
        )
        rows, windows = [], []
        for i, offsets in enumerate(encoding["offset_mapping"]):
            example_index = encoding["overflow_to_sample_mapping"][i]
            sequence_ids = encoding.sequence_ids(i)
            row = _model_inputs(encoding, i)
            if training:
                answer = examples[example_index]["answers"][0]
                start_char = answer["answer_start"]
                end_char = start_char + len(answer["text"])
                context = [k for k, s in enumerate(sequence_ids) if s == 1]
                first, last = context[0], context[-1]
                if offsets[first][0] > start_char or offsets[last][1] < end_char:
                    row["start_positions"] = row["end_positions"] = 0
                else:
                    start = first
                    while start <= last and offsets[start][0] <= start_char:
                        start += 1
                    end = last
                    while end >= first and offsets[end][1] >= end_char:
                        end -= 1
                    row["start_positions"], row["end_positions"] = start - 1, end + 1
            rows.append(row)
            windows.append(
                (
                    example_index,
                    [o if sequence_ids[k] == 1 else None for k, o in enumerate(offsets)],
                )
            )
        return rows, windows

    train_rows, _ = encode(train, training=True)
    dev_rows, dev_windows = encode(dev, training=False)
    return None, train_rows, dev_rows, (dev, dev_windows)


# === Scoring the predictions ===


def score_classification(logits, labels, dev_rows):
    import numpy as np

    predicted = np.argmax(logits, axis=-1)
    gold = np.asarray([row["labels"] for row in dev_rows])
    return {"accuracy": float(np.mean(predicted == gold))}


def score_tagging(logits, tags, dev_rows, reference):
    import numpy as np

    sentences, encoding = reference
    gold, predicted = [], []
    for i, (words, sentence_tags) in enumerate(sentences):
        word_ids = encoding.word_ids(i)
        best = np.argmax(logits[i][: len(word_ids)], axis=-1)
        answer, previous = ["O"] * len(words), None
        for position, word in enumerate(word_ids):
            if word is not None and word != previous:
                answer[word] = tags[int(best[position])]
            previous = word
        gold.append(sentence_tags)
        predicted.append(answer)
    return entity_scores(gold, predicted)


def score_spans(outputs, data, reference):
    import numpy as np

    examples, windows = reference
    start_logits, end_logits = outputs
    best: dict[int, tuple[float, str]] = {}
    n_best = data["n_best_size"]
    for i, (example_index, offsets) in enumerate(windows):
        starts = np.argsort(start_logits[i][: len(offsets)])[::-1][:n_best]
        ends = np.argsort(end_logits[i][: len(offsets)])[::-1][:n_best]
        context = examples[example_index]["context"]
        for s in starts:
            for e in ends:
                if offsets[s] is None or offsets[e] is None:
                    continue
                if e < s or e - s + 1 > data["max_answer_length"]:
                    continue
                score = float(start_logits[i][s] + end_logits[i][e])
                if example_index not in best or score > best[example_index][0]:
                    best[example_index] = (score, context[offsets[s][0] : offsets[e][1]])
    predictions = {
        example["id"]: best.get(index, (0.0, ""))[1] for index, example in enumerate(examples)
    }
    return squad_v1_scores(examples, predictions)


# === The run ===


def _compile_counters():
    """Totals of torch.compile's compilation counters (they move when it compiles)."""
    from torch._dynamo.utils import counters

    return tuple(sum(counters[name].values()) for name in ("frames", "aot_autograd", "inductor"))


class _CountingCollator:
    """The collator, counting the real and the computed tokens of each batch."""

    def __init__(self, collator):
        self.collator = collator
        self.real_tokens = 0
        self.computed_tokens = 0
        self.rows: list[int] = []  # of each batch, in order (the loader does not prefetch)

    def __call__(self, features):
        batch = self.collator(features)
        self.rows.append(len(features))
        self.real_tokens += int(batch["attention_mask"].sum())
        self.computed_tokens += int(batch["attention_mask"].numel())
        return batch


def training_arguments(spec: dict):
    """Trainer's defaults, with the shared settings; `group_by_length` is a boolean of
    TrainingArguments before transformers 5, `train_sampling_strategy` after."""
    import inspect

    import transformers

    parameters = inspect.signature(transformers.TrainingArguments.__init__).parameters
    arguments = dict(
        output_dir=spec["output_dir"],
        per_device_train_batch_size=spec["batch_size"],
        per_device_eval_batch_size=32,
        learning_rate=spec["learning_rate"],
        weight_decay=spec["weight_decay"],
        seed=spec["seed"],
        use_cpu=True,
        save_strategy="no",
        report_to="none",
        disable_tqdm=True,
        torch_compile=spec["torch_compile"],
    )
    if spec.get("max_steps"):
        arguments["max_steps"] = spec["max_steps"]
    else:
        arguments["num_train_epochs"] = spec["num_train_epochs"]
    if "warmup_ratio" in parameters:
        arguments["warmup_ratio"] = spec["warmup_ratio"]
    else:  # transformers 5: a float below 1 is a ratio of the steps
        arguments["warmup_steps"] = spec["warmup_ratio"]
    if spec["group_by_length"]:
        if "group_by_length" in parameters:
            arguments["group_by_length"] = True
        else:
            arguments["train_sampling_strategy"] = "group_by_length"
    return transformers.TrainingArguments(**arguments)


def run(spec: dict) -> dict:
    import numpy as np
    import torch
    import transformers

    started = time.perf_counter()
    data, kind = spec["data"], spec["data"]["kind"]
    tokenizer = transformers.AutoTokenizer.from_pretrained(spec["model_dir"])
    features = {
        "classification": classification_features,
        "tagging": tagging_features,
        "spans": span_features,
    }[kind]
    labels, train_rows, dev_rows, reference = features(data, tokenizer, spec["max_seq_length"])
    transformers.set_seed(spec["seed"])
    if kind == "classification":
        model = transformers.AutoModelForSequenceClassification.from_pretrained(
            spec["model_dir"], num_labels=len(labels)
        )
        collator = transformers.DataCollatorWithPadding(tokenizer)
    elif kind == "tagging":
        model = transformers.AutoModelForTokenClassification.from_pretrained(
            spec["model_dir"], num_labels=len(labels)
        )
        collator = transformers.DataCollatorForTokenClassification(tokenizer)
    else:
        model = transformers.AutoModelForQuestionAnswering.from_pretrained(spec["model_dir"])
        collator = transformers.DataCollatorWithPadding(tokenizer)
    counting = _CountingCollator(collator)
    step_ends: list[float] = []
    compiled_steps: list[int] = []
    compile_counters = _compile_counters if spec["torch_compile"] else lambda: None

    class StepClock(transformers.TrainerCallback):
        def on_step_begin(self, args, state, control, **kwargs):
            self.counters = compile_counters()

        def on_step_end(self, args, state, control, **kwargs):
            step_ends.append(time.perf_counter())
            if compile_counters() != self.counters:
                compiled_steps.append(len(step_ends))

    trainer = transformers.Trainer(
        model=model,
        args=training_arguments(spec),
        train_dataset=Rows(train_rows),
        data_collator=counting,
        processing_class=tokenizer,
        callbacks=[StepClock()],
    )
    setup_seconds = time.perf_counter() - started
    train_start = time.perf_counter()
    output = trainer.train()
    train_seconds = time.perf_counter() - train_start
    # Read before the evaluation, whose batches go through the same collator.
    real_tokens, computed_tokens = counting.real_tokens, counting.computed_tokens
    predictions = trainer.predict(Rows(dev_rows))
    if kind == "classification":
        metrics = score_classification(predictions.predictions, labels, dev_rows)
    elif kind == "tagging":
        metrics = score_tagging(predictions.predictions, labels, dev_rows, reference)
    else:
        metrics = score_spans(predictions.predictions, data, reference)
    steps, warmup = len(step_ends), spec["warmup_steps"]
    step_seconds = [float(x) for x in np.diff([train_start, *step_ends])]
    kept = [
        (counting.rows[step - 1] if step <= len(counting.rows) else spec["batch_size"], seconds)
        for step, seconds in enumerate(step_seconds, start=1)
        if step > warmup and step not in compiled_steps
    ]
    steady = sum(r for r, _ in kept) / sum(s for _, s in kept) if kept else None
    lengths = np.asarray([len(row["input_ids"]) for row in train_rows])
    return {
        "train_samples_per_second": output.metrics.get("train_samples_per_second"),
        "train_runtime": output.metrics.get("train_runtime"),
        "steady_samples_per_second": steady,
        "steps": steps,
        "warmup_steps": warmup,
        "compiled_steps": compiled_steps,
        "compile_step_seconds": sum(step_seconds[step - 1] for step in compiled_steps),
        "step_seconds": step_seconds,
        "train_seconds": train_seconds,
        "setup_seconds": setup_seconds,
        "training_sequences": len(train_rows),
        "mean_real_tokens": float(lengths.mean()),
        "max_real_tokens": int(lengths.max()),
        "trained_real_tokens": real_tokens,
        "trained_computed_tokens": computed_tokens,
        "metrics": metrics,
        "final_loss": output.training_loss,
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "torch_threads": torch.get_num_threads(),
        "tensorflow_imported": "tensorflow" in sys.modules,
    }


def main(argv: list[str]) -> None:
    if len(argv) != 3:
        raise SystemExit(f"usage: {argv[0]} SPEC.json RESULT.json")
    with open(argv[1], encoding="utf-8") as f:
        spec = json.load(f)
    result = run(spec)
    with open(argv[2] + ".tmp", "w", encoding="utf-8") as f:
        json.dump(result, f, indent=1)
    os.replace(argv[2] + ".tmp", argv[2])


if __name__ == "__main__":
    main(sys.argv)
