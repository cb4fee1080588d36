"""`--batching=packed` (once `--packed_sequences`) through the fine-tuning runner
(`runners.finetuning.run_finetuning`, what `tools/run_finetuning.py` calls).

Reference: the same run with padded batches. On gensim's real movie-review sentences
(their real lengths, well under `--max_seq_length`) both runs start from the same
weights and read the same batches; packing changes only which positions are computed,
so every step's loss and gradient norm must agree to float rounding. The encoder's
dropout is 0 (packed rows draw other dropout masks); the classification head keeps its
0.1: it sees `[batch, hidden]` pooled outputs in both runs and draws the same masks.

The weights are drawn with `initializer_range=0.2`, not BERT's 0.02: at 0.02 attention
is near uniform and the loss barely depends on it, so a packed step whose examples
attend across their row moved the losses by only 2e-5 (relative). At 0.2 that mistake
moves them by about 4% and the gradient norms by about 47%, while the packed run
agrees with the padded one to about 1e-7 (measured on CPU).
"""

import os
import pathlib
import random
import sys

import numpy as np
import pytest

from keras_bert_zoo.runners import demo, finetuning
from keras_bert_zoo.tasks.feature_extraction import demo_model_dir
from keras_bert_zoo.text.vocab import load_vocab

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tasks"))  # the fine-tuning fixtures
import finetuning_test_helpers as helpers  # noqa: E402
from qa_test_helpers import load_local_module, write_squad  # noqa: E402

MINILM_VOCAB = os.path.join(demo_model_dir(), "vocab.txt")
STEPS = 8


@pytest.fixture(scope="module")
def no_dropout_checkpoint(tmp_path_factory):
    """A tiny random BERT over the real MiniLM vocabulary, encoder dropout 0, weights
    large enough for attention to matter (see the module docstring)."""
    return helpers.write_tiny_checkpoint(
        tmp_path_factory.mktemp("tiny_no_dropout"),
        load_vocab(MINILM_VOCAB),
        layout="google",
        num_layers=2,
        hidden_dropout=0.0,
        attention_dropout=0.0,
        initializer_range=0.2,
    )


@pytest.mark.slow
def test_packed_run_follows_the_padded_loss_trajectory(
    no_dropout_checkpoint, tmp_path, packed_batch_keys
):
    packed_batches = packed_batch_keys
    results = {}
    for packed_sequences, batching in ((False, "padded"), (True, "packed")):
        results[packed_sequences] = finetuning.run_finetuning(
            demo.demo_config(
                init_checkpoint=no_dropout_checkpoint,
                output_dir=str(tmp_path / f"packed_{packed_sequences}"),
                mode="train",
                num_train_steps=STEPS,
                learning_rate=2e-3,
                lr_schedule="constant",
                steps_per_loop=4,
                checkpoint_layouts=(),
                progress="none",
                batching=batching,
            )
        )
    padded, packed_run = results[False].training, results[True].training
    # The packed run trained through the packed step, on packed batches.
    assert packed_batches and all("sequence_ids" in keys for keys in packed_batches)
    assert len(packed_run.losses) == len(padded.losses) == STEPS
    assert np.all(np.isfinite(packed_run.losses))
    # Not a constant: equal trajectories say something.
    assert np.ptp(padded.losses) > 1e-3, padded.losses
    # Float rounding: about 1e-7 here; a wrong attention mask: 4e-2 and 0.5.
    np.testing.assert_allclose(packed_run.losses, padded.losses, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(packed_run.gradient_norms, padded.gradient_norms, rtol=1e-3)


def _write_conll(data_dir):
    tagging = load_local_module("test_tagging.py")
    tagging.write_conll(data_dir / "eng.train", tagging.make_sentences(10, 8))


def _write_squad(data_dir):
    squad = load_local_module("test_question_answering_end_to_end.py")
    write_squad(data_dir / "train-v1.1.json", squad.make_paragraphs(random.Random(0), 4, False))


def _write_swag(data_dir):
    choice = load_local_module("test_multiple_choice.py")
    choice.write_swag(data_dir / "train.csv", choice.swag_rows(10, 8))


@pytest.mark.parametrize(
    ("task", "write_data", "model"),
    [
        ("conll2003", _write_conll, "BertTokenClassifier"),
        ("squad_v1.1", _write_squad, "BertSpanLabeler"),
        ("swag", _write_swag, "BertMultipleChoice"),
    ],
)
def test_tasks_that_cannot_be_packed_are_refused_before_training(task, write_data, model, tmp_path):
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    write_data(data_dir)
    output_dir = tmp_path / "run"
    config = helpers.quick_config(
        task=task,
        mode="train",
        data_dir=str(data_dir),
        init_checkpoint="bert_tiny_uncased",
        vocab_file=MINILM_VOCAB,
        output_dir=str(output_dir),
        max_seq_length=96,
        num_train_steps=2,
        train_batch_size=4,
        batching="packed",
    )
    with pytest.raises(ValueError, match=rf"task '{task}': --batching=packed .* {model}"):
        finetuning.run_finetuning(config)
    # Refused before anything of the run was written.
    assert not (output_dir / "task.json").exists()
    assert not (output_dir / "checkpoints").exists()
