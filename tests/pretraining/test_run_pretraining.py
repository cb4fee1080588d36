"""The pretraining runner (`keras_bert_zoo.runners.pretraining`) on a tiny model.

One phase-1 run (records made by our creator from the synthetic corpus, L=2, H=32,
64 positions) is shared by the module; the other tests resume it, extend it to 128
positions (phase 2), evaluate and export it in `--mode=eval|export`, or feed the
runner other inputs. References: a numpy restatement of the evaluation metrics,
`transformers.BertForPreTraining` for the Hugging Face export, the port of the
original creator for foreign records (see tests/tools/test_run_pretraining_tool.py).
The parts the job orchestrates are tested on their own in
tests/tasks/test_pretraining_task.py, tests/data/test_pretraining_record_inspection.py
and tests/checkpoints/test_checkpoint_resize.py.
"""

import json
import os
import re
import shutil

import numpy as np
import pytest
from pretraining_synthetic import SYLLABLES, VOCAB, write_corpus

from keras_bert_zoo.data.pretraining_records import inspect_records
from keras_bert_zoo.pretraining import CreationConfig, create_pretraining_data
from keras_bert_zoo.runners.pretraining import PretrainingConfig, run_pretraining
from keras_bert_zoo.tasks.pretraining import evaluate_pretraining

PHASE1_STEPS = 30
SEQ = 64
PREDICTIONS = 10
TINY = {
    "vocab_size": len(VOCAB),
    "hidden_size": 32,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "intermediate_size": 64,
    "hidden_act": "gelu",
    "hidden_dropout_prob": 0.0,
    "attention_probs_dropout_prob": 0.0,
    "max_position_embeddings": SEQ,
    "type_vocab_size": 2,
    "initializer_range": 0.02,
}


def cyclic_documents(num_documents, seed):
    """Documents whose sentences walk the syllables in a fixed cycle, each sentence going
    on where the previous one stopped: a masked word is its left neighbour's successor
    and "is next" pairs continue the cycle, so a tiny model learns both objectives in
    a few dozen steps (the random-word corpus of the other tests has nothing to learn)."""
    rng = np.random.default_rng(seed)
    documents = []
    for _ in range(num_documents):
        position = int(rng.integers(len(SYLLABLES)))
        sentences = []
        for _ in range(int(rng.integers(2, 8))):
            length = int(rng.integers(4, 12))
            words = [SYLLABLES[(position + i) % len(SYLLABLES)] for i in range(length)]
            position += length
            sentences.append(" ".join(words) + " .")
        documents.append(sentences)
    return documents


def _records(directory, corpus_file, vocab_file, seq, predictions, shards=2, dupe=2):
    os.makedirs(directory, exist_ok=True)
    create_pretraining_data(
        corpus_file,
        f"{directory}/records.tfrecord@{shards}",
        CreationConfig(
            vocab_file=vocab_file,
            max_seq_length=seq,
            max_predictions_per_seq=predictions,
            dupe_factor=dupe,
            chunk_chars=20_000,
        ),
        num_workers=0,
        progress_interval=1e9,
    )
    return f"{directory}/records.tfrecord-*"


@pytest.fixture(scope="module")
def data(tmp_path_factory, vocab_file):
    root = tmp_path_factory.mktemp("run_pretraining_data")
    corpus_file = write_corpus(root / "train.txt", cyclic_documents(120, seed=1))
    heldout_corpus = write_corpus(root / "heldout.txt", cyclic_documents(30, seed=7))
    config_file = root / "bert_config.json"
    config_file.write_text(json.dumps(TINY), encoding="utf-8")
    return {
        "train": _records(root / "train64", corpus_file, vocab_file, SEQ, PREDICTIONS),
        "heldout": _records(root / "heldout64", heldout_corpus, vocab_file, SEQ, PREDICTIONS, 1),
        "train128": _records(root / "train128", corpus_file, vocab_file, 128, 20, 1, 1),
        "bert_config_file": str(config_file),
        "vocab_file": vocab_file,
        "corpus_file": corpus_file,
        "root": root,
    }


def _config(data, output_dir, **overrides):
    settings = dict(
        input_file=data["train"],
        eval_input_file=data["heldout"],
        eval_steps=0,
        eval_batch_size=32,
        bert_config_file=data["bert_config_file"],
        vocab_file=data["vocab_file"],
        output_dir=str(output_dir),
        num_train_steps=PHASE1_STEPS,
        num_warmup_steps=3,
        learning_rate=5e-3,
        decay_from_step_zero=False,
        lr_schedule="constant",
        train_batch_size=16,
        steps_per_loop=5,
        checkpoint_every=10,
        eval_every=15,
        shuffle_buffer=200,
        progress="none",
    )
    settings.update(overrides)
    return PretrainingConfig(**settings)


@pytest.fixture(scope="module")
def phase1(data, tmp_path_factory):
    output_dir = tmp_path_factory.mktemp("phase1")
    return run_pretraining(_config(data, output_dir))


# === Training ===


@pytest.mark.slow
def test_loss_falls_and_everything_is_written(phase1):
    losses = phase1.training.losses
    assert len(losses) == PHASE1_STEPS and np.all(np.isfinite(losses))
    assert np.mean(losses[-5:]) < np.mean(losses[:5]) - 0.5, losses
    # Training metrics of the model reach the log and TensorBoard.
    assert {"masked_lm_accuracy", "next_sentence_accuracy"} <= set(phase1.training.history[-1])
    output_dir = phase1.config.output_dir
    for name in ("bert_config.json", "vocab.txt", "eval_results.json", "train", "eval"):
        assert os.path.exists(os.path.join(output_dir, name)), name
    saved = json.loads(open(os.path.join(output_dir, "eval_results.json")).read())
    assert saved["step"] == PHASE1_STEPS
    assert [entry["step"] for entry in saved["history"]] == [15, 30]
    assert saved["results"]["masked_lm_accuracy"] == pytest.approx(
        phase1.eval_results["masked_lm_accuracy"]
    )
    # A trained MLM beats the uniform guess over the vocabulary by far.
    assert phase1.eval_results["masked_lm_accuracy"] > 3 / len(VOCAB)
    # The counts print as integers ("sequences 111", not "sequences 111.0000": issue 47).
    from keras_bert_zoo.runners.pretraining import summary

    printed = summary(phase1)
    sequences = phase1.eval_results["sequences"]
    assert isinstance(sequences, int)
    assert re.search(rf"sequences {sequences}(,|$)", printed, re.M), printed
    assert re.search(r"masked_lm_predictions \d+(,|$)", printed, re.M), printed
    assert re.search(r"masked_lm_accuracy 0\.\d{4}", printed), printed


@pytest.mark.slow
def test_eval_metrics_match_a_numpy_restatement(phase1, data):
    from keras_bert_zoo.data.pretraining import pretraining_dataset

    dataset = pretraining_dataset(
        sorted(inspect_records(data["heldout"]).files),
        7,  # a last partial batch, so the weighting across batches is exercised
        max_seq_length=SEQ,
        max_predictions_per_seq=PREDICTIONS,
        split_labels=True,
    )
    ours = evaluate_pretraining(phase1.model, dataset)
    nll_sum = correct_sum = weight_sum = nsp_nll_sum = nsp_correct = sequences = 0.0
    all_labels, all_guesses = [], []
    for x, y in dataset:
        out = phase1.model(x, training=False)
        logits = np.asarray(out["masked_lm_logits"], np.float64)
        log_probs = logits - logits.max(-1, keepdims=True)
        log_probs -= np.log(np.exp(log_probs).sum(-1, keepdims=True))
        ids = y["masked_lm_ids"].numpy()
        weights = y["masked_lm_weights"].numpy().astype(np.float64)
        nll = -np.take_along_axis(log_probs, ids[..., None], -1)[..., 0]
        nll_sum += (nll * weights).sum()
        correct_sum += ((logits.argmax(-1) == ids) * weights).sum()
        weight_sum += weights.sum()
        nsp = np.asarray(out["next_sentence_logits"], np.float64)
        nsp_log = nsp - np.log(np.exp(nsp).sum(-1, keepdims=True))
        labels = y["next_sentence_labels"].numpy()
        nsp_nll_sum += -nsp_log[np.arange(len(labels)), labels].sum()
        nsp_correct += (nsp.argmax(-1) == labels).sum()
        all_labels.append(labels)
        all_guesses.append(nsp.argmax(-1))
        sequences += len(labels)
    assert ours["sequences"] == sequences
    assert ours["masked_lm_predictions"] == weight_sum
    assert ours["masked_lm_accuracy"] == pytest.approx(correct_sum / weight_sum, abs=1e-6)
    assert ours["masked_lm_loss"] == pytest.approx(nll_sum / weight_sum, rel=1e-5)
    assert ours["next_sentence_accuracy"] == pytest.approx(nsp_correct / sequences, abs=1e-6)
    assert ours["next_sentence_loss"] == pytest.approx(nsp_nll_sum / sequences, rel=1e-5)
    from sklearn.metrics import balanced_accuracy_score

    assert ours["next_sentence_balanced_accuracy"] == pytest.approx(
        balanced_accuracy_score(np.concatenate(all_labels), np.concatenate(all_guesses)),
        abs=1e-6,
    )


@pytest.mark.slow
def test_resume_from_a_checkpoint_ends_as_the_uninterrupted_run(phase1, data, tmp_path):
    # phase1 as a run killed after its step-20 checkpoint: the newest checkpoint gone.
    output_dir = tmp_path / "resumed"
    shutil.copytree(phase1.config.output_dir, output_dir)
    shutil.rmtree(output_dir / "checkpoints" / "ckpt-00000030")
    for name in ("export_google", "export_huggingface"):
        shutil.rmtree(output_dir / name)
    resumed = run_pretraining(_config(data, output_dir))
    assert resumed.training.restored_step == 20 and resumed.step == PHASE1_STEPS
    # Same weights, optimizer state and input position: the same last 10 steps, bitwise.
    np.testing.assert_array_equal(resumed.training.losses, phase1.training.losses[20:])
    for old, new in zip(phase1.model.weights, resumed.model.weights, strict=True):
        np.testing.assert_array_equal(old.numpy(), new.numpy(), err_msg=new.path)
    history = json.loads((output_dir / "eval_results.json").read_text())["history"]
    assert [entry["step"] for entry in history] == [15, 30]
    assert (output_dir / "export_huggingface" / "model.safetensors").is_file()


@pytest.mark.slow
def test_packed_sequences_follow_the_padded_run(data, tmp_path, packed_batch_keys):
    """`--packed_sequences` reaches the Trainer and trains BertPretrainer on packed
    batches with the padded run's losses and gradient norms, to float rounding.

    The weights are drawn with `initializer_range=0.2` (no dropout, as in TINY): at
    BERT's 0.02 attention is near uniform, and a packed step whose examples attend
    across their row moved the losses by only 2e-5 (relative) here; at 0.2 it moves
    them by 0.7% and the gradient norms by 7%, while correct packing agrees to about
    1e-7 (measured on CPU).
    """
    packed_batches = packed_batch_keys
    config_file = tmp_path / "bert_config.json"
    config_file.write_text(json.dumps({**TINY, "initializer_range": 0.2}), encoding="utf-8")
    runs = {}
    for packed_sequences in (False, True):
        runs[packed_sequences] = run_pretraining(
            _config(
                data,
                tmp_path / f"packed_{packed_sequences}",
                bert_config_file=str(config_file),
                num_train_steps=8,
                eval_input_file=None,
                checkpoint_layouts=(),
                packed_sequences=packed_sequences,
            )
        ).training
    padded, packed_run = runs[False], runs[True]
    assert packed_batches and all("sequence_ids" in keys for keys in packed_batches)
    assert len(packed_run.losses) == 8 and np.ptp(padded.losses) > 1e-2
    # Float rounding: about 1e-7 here; examples attending across their row: 7e-3, 7e-2.
    np.testing.assert_allclose(packed_run.losses, padded.losses, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(packed_run.gradient_norms, padded.gradient_norms, rtol=1e-3)


@pytest.mark.slow
def test_dynamic_text_and_remasked_records_train(data, tmp_path):
    for mode, input_file in (
        ("dynamic_text", data["corpus_file"]),
        ("remask_records", data["train"]),
    ):
        result = run_pretraining(
            _config(
                data,
                tmp_path / mode,
                input_mode=mode,
                input_file=input_file,
                max_seq_length=SEQ,
                max_predictions_per_seq=PREDICTIONS,
                num_train_steps=4,
                eval_steps=1,
                checkpoint_layouts=(),
            )
        )
        assert result.step == 4 and np.all(np.isfinite(result.training.losses)), mode
        assert 0.0 <= result.eval_results["masked_lm_accuracy"] <= 1.0


# === Phase 2: a longer position table ===


@pytest.mark.slow
def test_phase2_extends_the_position_table(phase1, data, tmp_path):
    result = run_pretraining(
        _config(
            data,
            tmp_path / "phase2",
            input_file=data["train128"],
            eval_input_file=None,
            bert_config_file=None,
            init_checkpoint=phase1.config.output_dir,
            num_train_steps=1,
            num_warmup_steps=0,
            # One step of a vanishing learning rate: the loaded weights stay (to 1e-9).
            learning_rate=1e-12,
            weight_decay=0.0,
            checkpoint_layouts=("huggingface",),
        )
    )
    assert result.max_seq_length == 128
    assert result.bert_config.max_position_embeddings == 128
    learned = phase1.model.encoder.embeddings.position_embeddings.numpy()
    table = result.model.encoder.embeddings.position_embeddings.numpy()
    assert table.shape == (128, 32)
    np.testing.assert_allclose(table[:SEQ], learned, atol=1e-9)
    np.testing.assert_allclose(table[SEQ:], learned, atol=1e-9)
    # Every other weight (the heads included) came from phase 1.
    word = result.model.encoder.embeddings.word_embeddings.embeddings.numpy()
    np.testing.assert_allclose(
        word, phase1.model.encoder.embeddings.word_embeddings.embeddings.numpy(), atol=1e-9
    )
    hf_config = json.loads(open(os.path.join(result.exports["huggingface"], "config.json")).read())
    assert hf_config["max_position_embeddings"] == 128


# === Export ===


def _sample_inputs():
    rng = np.random.default_rng(0)
    ids = rng.integers(5, len(VOCAB), size=(3, 20)).astype("int32")
    ids[:, 0], ids[:, 9], ids[:, 19] = 2, 3, 3
    mask = np.ones_like(ids)
    mask[2, 15:] = 0
    types = np.zeros_like(ids)
    types[:, 10:] = 1
    positions = np.array([[1, 4, 12], [2, 3, 17], [5, 6, 0]], "int32")
    return {
        "input_word_ids": ids,
        "input_mask": mask,
        "input_type_ids": types,
        "masked_lm_positions": positions,
    }


@pytest.mark.slow
def test_exports_load_in_from_pretrained_and_transformers(phase1):
    import torch
    import transformers

    from keras_bert_zoo import from_pretrained

    inputs = _sample_inputs()
    expected = {k: np.asarray(v) for k, v in phase1.model(inputs, training=False).items()}
    for layout in ("google", "huggingface"):
        directory = phase1.exports[layout]
        assert os.path.isfile(os.path.join(directory, "vocab.txt"))
        reloaded = from_pretrained(directory, model="pretrainer")
        got = reloaded(inputs, training=False)
        for name, value in expected.items():
            np.testing.assert_allclose(np.asarray(got[name]), value, atol=1e-5, err_msg=layout)

    model = transformers.BertForPreTraining.from_pretrained(
        phase1.exports["huggingface"], local_files_only=True
    )
    model.eval()
    with torch.no_grad():
        out = model(
            input_ids=torch.tensor(inputs["input_word_ids"], dtype=torch.long),
            attention_mask=torch.tensor(inputs["input_mask"], dtype=torch.long),
            token_type_ids=torch.tensor(inputs["input_type_ids"], dtype=torch.long),
        )
    theirs = np.take_along_axis(
        out.prediction_logits.numpy(), inputs["masked_lm_positions"][..., None], axis=1
    )
    np.testing.assert_allclose(theirs, expected["masked_lm_logits"], atol=1e-4)
    np.testing.assert_allclose(
        out.seq_relationship_logits.numpy(), expected["next_sentence_logits"], atol=1e-4
    )


# === --mode=eval and --mode=export: the model of a finished run ===


@pytest.mark.slow
def test_eval_mode_scores_the_newest_checkpoint_as_training_did(phase1, data, tmp_path):
    # The run directory itself: its eval_results.json gains one entry, nothing is redone.
    output_dir = tmp_path / "run"
    shutil.copytree(phase1.config.output_dir, output_dir)
    result = run_pretraining(_config(data, output_dir, mode="eval", input_file=None))
    assert result.mode == "eval" and result.step == PHASE1_STEPS and result.training is None
    for name, value in phase1.eval_results.items():
        assert result.eval_results[name] == pytest.approx(value, rel=1e-5, abs=1e-6), name
    saved = json.loads((output_dir / "eval_results.json").read_text())
    assert saved["step"] == PHASE1_STEPS
    assert [entry["step"] for entry in saved["history"]] == [15, 30, 30]
    assert saved["history"][-1]["model"] == str(output_dir)
    assert not result.exports

    # Another run's directory (or one of its exports) through --init_checkpoint.
    for given in (phase1.config.output_dir, phase1.exports["google"]):
        elsewhere = run_pretraining(
            _config(data, tmp_path / "elsewhere", mode="eval", init_checkpoint=given)
        )
        assert elsewhere.eval_results["masked_lm_accuracy"] == pytest.approx(
            phase1.eval_results["masked_lm_accuracy"], abs=1e-6
        ), given
    assert elsewhere.step is None  # an export does not record its step


def test_export_mode_writes_the_runs_model(phase1, data, tmp_path):
    from keras_bert_zoo import from_pretrained

    result = run_pretraining(
        _config(
            data,
            tmp_path / "exported",
            mode="export",
            input_file=None,
            init_checkpoint=phase1.config.output_dir,
            checkpoint_layouts=("huggingface",),
        )
    )
    assert result.mode == "export" and result.step == PHASE1_STEPS and not result.eval_results
    assert set(result.exports) == {"huggingface"}
    assert not (tmp_path / "exported" / "eval_results.json").exists()
    reloaded = from_pretrained(result.exports["huggingface"], model="pretrainer")
    inputs = _sample_inputs()
    expected = phase1.model(inputs, training=False)
    for name, value in reloaded(inputs, training=False).items():
        np.testing.assert_allclose(np.asarray(value), np.asarray(expected[name]), atol=1e-5)
    assert (tmp_path / "exported" / "export_huggingface" / "vocab.txt").is_file()


def test_inference_modes_say_what_they_miss(data, tmp_path):
    with pytest.raises(ValueError, match="--mode=eval needs --eval_input_file"):
        run_pretraining(_config(data, tmp_path / "a", mode="eval", eval_input_file=None))
    with pytest.raises(FileNotFoundError, match="holds no pretraining run.*--init_checkpoint"):
        run_pretraining(_config(data, tmp_path / "b", mode="export"))
    with pytest.raises(ValueError, match="mode must be one of"):
        _config(data, tmp_path / "c", mode="predict")
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_moved_names_still_resolve_with_a_warning():
    from keras_bert_zoo.checkpoints import resize
    from keras_bert_zoo.data import pretraining_records
    from keras_bert_zoo.runners import pretraining as runner
    from keras_bert_zoo.tasks import pretraining as task

    for name, home in (
        ("inspect_records", pretraining_records),
        ("RecordsInfo", pretraining_records),
        ("extend_position_embeddings", resize),
        ("copy_pretraining_weights", resize),
        ("evaluate_pretraining", task),
        ("export_pretrained", task),
    ):
        with pytest.warns(DeprecationWarning, match=f"{name} moved to {home.__name__}"):
            assert getattr(runner, name) is getattr(home, name)


# === Bad input ===


def test_missing_and_empty_inputs_are_named(data, tmp_path):
    with pytest.raises(FileNotFoundError, match="nothing_here"):
        run_pretraining(_config(data, tmp_path / "a", input_file=str(tmp_path / "nothing_here*")))
    with pytest.raises(ValueError, match="--input_file is empty"):
        run_pretraining(_config(data, tmp_path / "b", input_file=" , "))
    empty = tmp_path / "empty.tfrecord"
    empty.write_bytes(b"")
    with pytest.raises(ValueError, match="hold no record.*empty.tfrecord"):
        run_pretraining(_config(data, tmp_path / "c", input_file=str(empty)))
    text = tmp_path / "notes.txt"
    text.write_text("not a record file\n", encoding="utf-8")
    with pytest.raises(ValueError, match="notes.txt"):
        run_pretraining(_config(data, tmp_path / "d", eval_input_file=str(text)))
    with pytest.raises(ValueError, match="max_seq_length=32.*records"):
        run_pretraining(_config(data, tmp_path / "e", max_seq_length=32))
    assert not os.path.exists(tmp_path / "a") and not os.path.exists(tmp_path / "e")


@pytest.mark.slow
def test_corrupt_record_is_named(data, tmp_path):
    source = sorted(inspect_records(data["train"]).files)[0]
    damaged = tmp_path / "damaged.tfrecord"
    raw = bytearray(open(source, "rb").read())
    middle = len(raw) // 2
    raw[middle : middle + 64] = bytes(64)  # zeroed bytes: the record CRCs no longer match
    damaged.write_bytes(bytes(raw))
    with pytest.raises(ValueError, match="damaged.tfrecord.*damaged TFRecord"):
        run_pretraining(
            _config(
                data,
                tmp_path / "out",
                input_file=str(damaged),
                eval_input_file=None,
                num_train_steps=50,
                checkpoint_layouts=(),
            )
        )


# === The vocabulary's size ===


def test_a_preset_takes_the_vocabularys_size(data, tmp_path):
    """--preset with --vocab_file: the word-embedding table and the masked-LM output have
    the vocabulary's rows (not the preset's 30,522); a --bert_config_file keeps its own
    vocab_size, and one smaller than the vocabulary is refused in one line. (The job's
    model, built as a run builds it; the README's pretraining chain trains one.)"""
    from keras_bert_zoo.runners.pretraining import PretrainingJob

    job = PretrainingJob(
        _config(data, tmp_path / "preset", bert_config_file=None, preset="bert_tiny")
    )
    job.check_inputs()
    job.prepare(None)
    assert job.bert_config.vocab_size == len(VOCAB) < 30522
    model = job.build_model()
    assert model.encoder.embeddings.word_embeddings.embeddings.shape[0] == len(VOCAB)
    assert model.output["masked_lm_logits"].shape[-1] == len(VOCAB)
    small = tmp_path / "small_config.json"
    small.write_text(json.dumps({**TINY, "vocab_size": len(VOCAB) - 1}), encoding="utf-8")
    with pytest.raises(ValueError, match=f"has {len(VOCAB)} tokens but .* {len(VOCAB) - 1} rows"):
        run_pretraining(_config(data, tmp_path / "small", bert_config_file=str(small)))
    assert not (tmp_path / "small").exists()
