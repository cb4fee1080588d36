"""`tasks.pretraining`: the pretraining task the job orchestrates, on a tiny random
`BertPretrainer` (L=1, H=16) and records written by `data.pretraining`, so every count
is known. The task's training on real data is tested through the runner in
tests/pretraining/test_run_pretraining.py.
"""

import dataclasses
import json

import numpy as np
import pytest

from keras_bert_zoo.config import BertConfig
from keras_bert_zoo.data.pretraining import write_pretraining_examples
from keras_bert_zoo.tasks.pretraining import (
    PretrainingInput,
    PretrainingTask,
    export_pretrained,
    pretraining_bert_config,
    read_bert_config,
    resolve_training_input,
)

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
WORDS = "the a cat dog sat ran on under mat log and then it was big small red blue".split()
VOCAB = SPECIALS + WORDS + ["."]
SEQ, PRED = 24, 4
TINY = {
    "vocab_size": len(VOCAB),
    "hidden_size": 16,
    "num_hidden_layers": 1,
    "num_attention_heads": 2,
    "intermediate_size": 32,
    "max_position_embeddings": SEQ,
    "type_vocab_size": 2,
}
NUM_RECORDS = 11


@dataclasses.dataclass
class Settings:
    """The fields of `runners.pretraining.PretrainingConfig` the task reads."""

    vocab_file: str | None = None
    bert_config_file: str | None = None
    preset: str | None = None
    input_mode: str = "records"
    do_lower_case: bool | None = None
    masked_lm_prob: float = 0.15
    short_seq_prob: float = 0.1
    do_whole_word_mask: bool = False
    shuffle_buffer: int = 8


def _instance(rng):
    first = rng.integers(len(SPECIALS), len(VOCAB), size=int(rng.integers(2, 6))).tolist()
    second = rng.integers(len(SPECIALS), len(VOCAB), size=int(rng.integers(2, 6))).tolist()
    ids = [2, *first, 3, *second, 3]
    positions = [1, len(first) + 2]
    return {
        "input_ids": ids,
        "segment_ids": [0] * (len(first) + 2) + [1] * (len(second) + 1),
        "masked_lm_positions": positions,
        "masked_lm_ids": [ids[p] for p in positions],
        "next_sentence_label": int(rng.integers(2)),
    }


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    root = tmp_path_factory.mktemp("pretraining_task")
    rng = np.random.default_rng(0)
    records = str(root / "records.tfrecord")
    write_pretraining_examples(records, (_instance(rng) for _ in range(NUM_RECORDS)), SEQ, PRED)
    vocab = root / "vocab.txt"
    vocab.write_text("".join(t + "\n" for t in VOCAB), encoding="utf-8")
    corpus = root / "corpus.txt"
    documents = [
        "\n".join(" ".join(rng.choice(WORDS, 5)) + " ." for _ in range(4)) for _ in range(6)
    ]
    corpus.write_text("\n\n".join(documents) + "\n", encoding="utf-8")
    config_file = root / "bert_config.json"
    config_file.write_text(json.dumps(TINY), encoding="utf-8")
    return {"records": records, "vocab": str(vocab), "corpus": str(corpus),
            "config": str(config_file), "root": root}  # fmt: skip


def _task(files, **settings):
    settings = Settings(**{"bert_config_file": files["config"], **settings})
    return PretrainingTask.from_settings(settings, lengths=PretrainingInput((), SEQ, PRED))


def test_the_architecture_comes_from_the_settings_or_the_source(files):
    task = _task(files)
    assert task.bert_config == BertConfig.from_google_dict(TINY)
    assert task.compile_kwargs() == {}  # a BertPretrainer trains on its own objective
    hf_file = files["root"] / "config.json"
    hf_file.write_text(json.dumps(task.bert_config.to_hf_dict()), encoding="utf-8")
    assert read_bert_config(str(hf_file)) == task.bert_config
    # A longer input extends the position table when training, and is refused otherwise.
    longer = pretraining_bert_config(
        bert_config_file=None, preset=None, source_config=task.bert_config, max_seq_length=48
    )
    assert longer.max_position_embeddings == 48
    with pytest.raises(ValueError, match="48 tokens per sequence, more than the model's 24"):
        pretraining_bert_config(
            bert_config_file=None,
            preset=None,
            source_config=task.bert_config,
            max_seq_length=48,
            extend=False,
        )
    with pytest.raises(ValueError, match="Give the architecture"):
        pretraining_bert_config(
            bert_config_file=None, preset=None, source_config=None, max_seq_length=SEQ
        )
    with pytest.raises(ValueError, match="--input_mode=dynamic_text needs --vocab_file"):
        _task(files, input_mode="dynamic_text")


@pytest.mark.slow
@pytest.mark.parametrize("input_mode", ["records", "remask_records", "dynamic_text"])
def test_every_input_mode_gives_training_batches(files, input_mode):
    task = _task(files, input_mode=input_mode, vocab_file=files["vocab"])
    source = files["corpus"] if input_mode == "dynamic_text" else files["records"]
    if input_mode == "dynamic_text":
        assert resolve_training_input(source, input_mode).max_seq_length == 128  # its default
    dataset = task.training_dataset_fn([source], 4, seed=1)()
    x, y = next(iter(dataset))
    assert x["input_word_ids"].shape == (4, SEQ) and x["masked_lm_positions"].shape == (4, PRED)
    assert y["masked_lm_ids"].shape == (4, PRED) and y["next_sentence_labels"].shape == (4,)
    assert int(np.max(x["input_word_ids"])) < len(VOCAB)


def test_evaluation_counts_every_record_and_names_a_damaged_one(files, tmp_path):
    task = _task(files)
    model = task.build_model()
    results = task.evaluate(model, [files["records"]], batch_size=4)
    assert results["sequences"] == NUM_RECORDS
    assert results["masked_lm_predictions"] == 2 * NUM_RECORDS
    assert 0.0 <= results["masked_lm_accuracy"] <= 1.0
    assert results["loss"] == pytest.approx(
        results["masked_lm_loss"] + results["next_sentence_loss"]
    )
    # Two batches only: 8 sequences.
    assert task.evaluate(model, [files["records"]], batch_size=4, steps=2)["sequences"] == 8
    raw = bytearray(open(files["records"], "rb").read())
    raw[len(raw) // 2 : len(raw) // 2 + 32] = bytes(32)
    damaged = tmp_path / "damaged.tfrecord"
    damaged.write_bytes(bytes(raw))
    with pytest.raises(ValueError, match="--eval_input_file: .*damaged.tfrecord"):
        task.evaluate(model, [str(damaged)], batch_size=4)


def test_exports_carry_the_heads_the_vocabulary_and_the_length(files, tmp_path):
    from keras_bert_zoo import from_pretrained

    task = _task(files, vocab_file=files["vocab"])
    model = task.build_model()
    directory = task.export(model, str(tmp_path / "hf"), "huggingface")
    assert (tmp_path / "hf" / "vocab.txt").read_text(encoding="utf-8").split() == VOCAB
    tokenizer_config = json.loads((tmp_path / "hf" / "tokenizer_config.json").read_text())
    assert tokenizer_config["do_lower_case"] is True
    assert tokenizer_config["model_max_length"] == SEQ
    reloaded = from_pretrained(directory, model="pretrainer")
    for old, new in zip(model.weights, reloaded.weights, strict=True):
        if "seed" not in old.path:
            np.testing.assert_array_equal(old.numpy(), new.numpy(), err_msg=new.path)
    # The module function: the same layout from a vocabulary file, or without one.
    export_pretrained(model, str(tmp_path / "google"), "google", None)
    assert not (tmp_path / "google" / "vocab.txt").exists()
    assert (tmp_path / "google" / "bert_model.ckpt.index").is_file()
