""" "Did you mean" for task names, enum flag values and task options (issue 61)."""

import pytest

from keras_bert_zoo import tasks
from keras_bert_zoo.tasks import names
from keras_bert_zoo.utils import suggestions
from keras_bert_zoo.utils.errors import UserError


def test_the_closest_choice_is_named_and_nothing_when_none_is_close():
    assert suggestions.did_you_mean("text_clasification", names.TASK_NAMES) == (
        " (did you mean text_classification?)"
    )
    assert suggestions.did_you_mean("glue/mrcp", names.TASK_NAMES) == " (did you mean glue/mrpc?)"
    assert suggestions.did_you_mean("zzz", names.TASK_NAMES) == ""
    assert suggestions.did_you_mean(3, [1, 2]) == ""


def test_absls_enum_message_gains_the_closest_value():
    message = "flag --onednn=of: value should be one of <auto|on|off>"
    assert suggestions.with_suggestion(message) == message + " (did you mean off?)"
    unlike = "flag --quantize=int4: value should be one of <none|dynamic_int8|float16>"
    assert suggestions.with_suggestion(unlike) == unlike
    other = "flag --train_batch_size=0: 0 is not >= 1"
    assert suggestions.with_suggestion(other) == other


def test_an_unknown_task_names_the_closest_before_tensorflow_and_in_the_registry():
    message = names.unknown_task_message(["--task=text_clasification"])
    assert message.startswith(
        "--task=text_clasification: no such task (did you mean text_classification?); "
        "choose from conll2003, "
    )
    assert names.unknown_task_message(["--task", "swg"]).startswith(
        "--task=swg: no such task (did you mean swag?); "
    )
    with pytest.raises(UserError, match=r"^Unknown task 'glue/sst' \(did you mean glue/sst2\?\)"):
        tasks.create_task("glue/sst")


def test_a_task_option_outside_its_choices_names_the_closest():
    with pytest.raises(UserError, match=r"tag_scheme='IOB3' is not one of .*\(did you mean "):
        tasks.create_task("conll2003", tag_scheme="IOB3")
