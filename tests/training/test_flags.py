"""`--packed_sequences`: a flag of the training core, so of every training binary."""

from absl import flags

from keras_bert_zoo.runners import finetuning
from keras_bert_zoo.runners import pretraining as pretraining_run
from keras_bert_zoo.training import flags as training_flags


def test_packed_sequences_is_a_training_flag_off_by_default_that_reaches_the_trainer():
    values = flags.FlagValues()
    training_flags.define_flags(values)
    values(["prog", "--output_dir=/tmp/run"])
    assert values.packed_sequences is False
    assert training_flags.trainer_kwargs(values)["packed_sequences"] is False
    assert training_flags.TrainingOptions().packed_sequences is False
    help_text = values["packed_sequences"].help
    for words in ("block-diagonal", "shorter than --max_seq_length", "tagging", "pretraining"):
        assert words in help_text, words

    values = flags.FlagValues()
    training_flags.define_flags(values)
    values(["prog", "--output_dir=/tmp/run", "--packed_sequences"])
    assert training_flags.trainer_kwargs(values)["packed_sequences"] is True
    values = flags.FlagValues()
    training_flags.define_flags(values)
    values(["prog", "--output_dir=/tmp/run", "--nopacked_sequences"])
    assert training_flags.trainer_kwargs(values)["packed_sequences"] is False


def test_both_runners_read_packed_sequences_from_their_command_line():
    values = flags.FlagValues()
    finetuning.define_flags(values)
    values(["run_finetuning", "--task=glue/sst2", "--output_dir=/tmp/x"])
    assert finetuning.config_from_flags(values).packed_sequences is False
    values = flags.FlagValues()
    finetuning.define_flags(values)
    values(["run_finetuning", "--task=glue/sst2", "--output_dir=/tmp/x", "--packed_sequences"])
    config = finetuning.config_from_flags(values)
    assert config.packed_sequences is True
    assert training_flags.trainer_kwargs(config)["packed_sequences"] is True
    # Without --task (the main job) the given flag changes the main job's setting.
    assert finetuning.explicit_flag_values(values)["packed_sequences"] is True

    values = flags.FlagValues()
    pretraining_run.define_flags(values)
    values(["run_pretraining", "--output_dir=/tmp/x", "--packed_sequences"])
    config = pretraining_run.config_from_flags(values)
    assert config.packed_sequences is True
    assert training_flags.trainer_kwargs(config)["packed_sequences"] is True
