"""`--batching` (`--packed_sequences` before: a deprecated switch of it now): a setting of the
training core, so a flag of every training binary, which the job turns into what the Trainer
trains through (packed batches and their loss)."""

import keras
import pytest
from absl import flags

from keras_bert_zoo.models import BertClassifier, BertEncoder, head_positions
from keras_bert_zoo.models.sequence_packing import forward
from keras_bert_zoo.runners import finetuning
from keras_bert_zoo.runners import pretraining as pretraining_run
from keras_bert_zoo.training import default_loss_fn
from keras_bert_zoo.training.options import TrainingOptions
from keras_bert_zoo.utils import settings


def _options(values) -> TrainingOptions:
    return TrainingOptions(**settings.flag_values_of(TrainingOptions, values))


def _classifier():
    encoder = BertEncoder(
        vocab_size=30, hidden_size=8, num_layers=1, num_heads=2, intermediate_size=16
    )
    return BertClassifier(encoder, num_classes=2)


def _reaches_the_trainer(config) -> bool:
    """Whether the job packs: its batches' transformation and the packed loss function
    (`auto` is resolved for the model: `loss_fn` first)."""
    job = finetuning.FinetuningJob(config)
    loss_fn, transform = job.loss_fn(_classifier()), job.dataset_transform()
    assert (transform is not None) == (loss_fn is forward.packed_loss_fn)
    return transform is not None


def test_batching_is_a_training_flag_auto_by_default_and_packed_sequences_its_old_switch():
    values = flags.FlagValues()
    settings.define_flags(TrainingOptions, values)
    values(["prog", "--output_dir=/tmp/run"])
    assert values.batching == "auto" and values.packed_sequences is None
    assert _options(values).batching == "auto"
    assert TrainingOptions().batching == "auto"
    help_text = values["batching"].help
    for words in ("block-diagonal", "shorter than --max_seq_length", "tagging", "pretraining"):
        assert words in help_text, words
    assert "--batching=packed" in values["packed_sequences"].help

    for command_line, batching in (
        (["--packed_sequences"], "packed"),
        (["--nopacked_sequences"], "padded"),
        (["--batching=bucketed"], "bucketed"),
        (["--batching=packed", "--packed_sequences"], "packed"),
    ):
        values = flags.FlagValues()
        settings.define_flags(TrainingOptions, values)
        values(["prog", "--output_dir=/tmp/run", *command_line])
        assert _options(values).batching == batching, command_line
    values = flags.FlagValues()
    settings.define_flags(TrainingOptions, values)
    values(["prog", "--output_dir=/tmp/run", "--batching=bucketed", "--packed_sequences"])
    with pytest.raises(ValueError, match="--packed_sequences means --batching=packed"):
        _options(values)
    # The old keyword and attribute, for one release.
    with pytest.warns(DeprecationWarning, match="packed_sequences is batching now"):
        options = TrainingOptions(packed_sequences=True)
    assert options.batching == "packed"
    with pytest.warns(DeprecationWarning):
        assert options.packed_sequences is True
    with pytest.warns(DeprecationWarning):
        assert TrainingOptions(packed_sequences=False).batching == "padded"


def test_both_runners_read_batching_from_their_command_line():
    values = flags.FlagValues()
    finetuning.define_flags(values)
    values(["run_finetuning", "--task=glue/sst2", "--output_dir=/tmp/x", "--batching=padded"])
    config = finetuning.config_from_flags(values)
    assert config.batching == "padded"
    assert not _reaches_the_trainer(config)
    for flag in ("--packed_sequences", "--batching=packed"):
        values = flags.FlagValues()
        finetuning.define_flags(values)
        values(["run_finetuning", "--task=glue/sst2", "--output_dir=/tmp/x", flag])
        config = finetuning.config_from_flags(values)
        assert config.batching == "packed"
        assert _reaches_the_trainer(config)
        # Without --task (the main job) the given flag changes the main job's setting.
        assert finetuning.explicit_flag_values(values)["batching"] == "packed"
    # The default: what the sentence family measured fastest (packed rows).
    values = flags.FlagValues()
    finetuning.define_flags(values)
    values(["run_finetuning", "--task=glue/sst2", "--output_dir=/tmp/x"])
    assert _reaches_the_trainer(finetuning.config_from_flags(values))

    values = flags.FlagValues()
    pretraining_run.define_flags(values)
    values(["run_pretraining", "--output_dir=/tmp/x", "--packed_sequences"])
    config = pretraining_run.config_from_flags(values)
    assert config.batching == "packed"
    job = pretraining_run.PretrainingJob(config)
    assert job.dataset_transform() is not None
    assert job.loss_fn(_classifier()) is forward.packed_loss_fn
    # Pretraining's records are full rows: auto keeps them padded.
    job = pretraining_run.PretrainingJob(pretraining_run.PretrainingConfig(output_dir="/tmp/x"))
    assert job.dataset_transform() is None


def _packed_rows(job, lengths, seq_len=16) -> int:
    """Rows of the packed batch the job's transformation makes of examples of `lengths`."""
    import numpy as np
    import tensorflow as tf

    mask = np.array([[1] * n + [0] * (seq_len - n) for n in lengths], np.int32)
    x = {"input_word_ids": mask * 7, "input_mask": mask, "input_type_ids": mask * 0}
    batches = tf.data.Dataset.from_tensors((x, np.zeros(len(lengths), np.int32)))
    packed, _ = next(iter(job.dataset_transform()(batches)))
    return int(packed["input_word_ids"].shape[0])


def test_packed_rows_are_rounded_only_where_a_step_is_compiled_per_shape():
    # Five rows' worth of examples (first fit: 16 | 9+7 | 9+7 | 9+7 | 9): without XLA the
    # loop is traced once whatever the rows, so the batch keeps its five; with XLA (or on
    # a TPU) the rows are rounded up to 4's multiples, 8, to bound the compilations.
    lengths = [16, 9, 9, 9, 9, 7, 7, 7]
    for jit_compile, strategy, rows in (
        (False, "one_device", 5),
        (None, "one_device", 5),  # the tools' choice on every CPU kind: no XLA to train
        (True, "one_device", 8),
        (False, "tpu", 8),
    ):
        config = finetuning.FinetuningConfig(
            task="glue/sst2",
            output_dir="/tmp/x",
            batching="packed",
            jit_compile=jit_compile,
            distribution_strategy=strategy,
        )
        assert _packed_rows(finetuning.FinetuningJob(config), lengths) == rows, (
            jit_compile,
            strategy,
        )


def test_the_job_picks_the_loss_function_of_its_model():
    # Padded batches: the head positions' loss for the models that declare their heads'
    # positions, else the model's own call.
    classifier = _classifier()
    config = finetuning.FinetuningConfig(task="glue/sst2", output_dir="/tmp/x", batching="padded")
    job = finetuning.FinetuningJob(config)
    assert job.loss_fn(classifier) is head_positions.head_positions_loss_fn
    plain = keras.Sequential([keras.layers.Dense(2)])
    assert job.loss_fn(plain) is default_loss_fn
