"""`--packed_sequences`: a setting of the training core, so a flag of every training binary,
which the job turns into what the Trainer trains through (packed batches and their loss)."""

import keras
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
    """Whether the job packs: its batches' transformation and the packed loss function."""
    job = finetuning.FinetuningJob(config)
    transform, loss_fn = job.dataset_transform(), job.loss_fn(_classifier())
    assert (transform is not None) == (loss_fn is forward.packed_loss_fn)
    return transform is not None


def test_packed_sequences_is_a_training_flag_off_by_default_that_reaches_the_trainer():
    values = flags.FlagValues()
    settings.define_flags(TrainingOptions, values)
    values(["prog", "--output_dir=/tmp/run"])
    assert values.packed_sequences is False
    assert _options(values).packed_sequences is False
    assert TrainingOptions().packed_sequences is False
    help_text = values["packed_sequences"].help
    for words in ("block-diagonal", "shorter than --max_seq_length", "tagging", "pretraining"):
        assert words in help_text, words

    values = flags.FlagValues()
    settings.define_flags(TrainingOptions, values)
    values(["prog", "--output_dir=/tmp/run", "--packed_sequences"])
    assert _options(values).packed_sequences is True
    values = flags.FlagValues()
    settings.define_flags(TrainingOptions, values)
    values(["prog", "--output_dir=/tmp/run", "--nopacked_sequences"])
    assert _options(values).packed_sequences is False


def test_both_runners_read_packed_sequences_from_their_command_line():
    values = flags.FlagValues()
    finetuning.define_flags(values)
    values(["run_finetuning", "--task=glue/sst2", "--output_dir=/tmp/x"])
    config = finetuning.config_from_flags(values)
    assert config.packed_sequences is False
    assert not _reaches_the_trainer(config)
    values = flags.FlagValues()
    finetuning.define_flags(values)
    values(["run_finetuning", "--task=glue/sst2", "--output_dir=/tmp/x", "--packed_sequences"])
    config = finetuning.config_from_flags(values)
    assert config.packed_sequences is True
    assert _reaches_the_trainer(config)
    # Without --task (the main job) the given flag changes the main job's setting.
    assert finetuning.explicit_flag_values(values)["packed_sequences"] is True

    values = flags.FlagValues()
    pretraining_run.define_flags(values)
    values(["run_pretraining", "--output_dir=/tmp/x", "--packed_sequences"])
    config = pretraining_run.config_from_flags(values)
    assert config.packed_sequences is True
    job = pretraining_run.PretrainingJob(config)
    assert job.dataset_transform() is not None
    assert job.loss_fn(_classifier()) is forward.packed_loss_fn


def test_the_job_picks_the_loss_function_of_its_model():
    # Padded batches: the head positions' loss for the models that declare their heads'
    # positions, else the model's own call.
    classifier = _classifier()
    config = finetuning.FinetuningConfig(task="glue/sst2", output_dir="/tmp/x")
    job = finetuning.FinetuningJob(config)
    assert job.loss_fn(classifier) is head_positions.head_positions_loss_fn
    plain = keras.Sequential([keras.layers.Dense(2)])
    assert job.loss_fn(plain) is default_loss_fn
