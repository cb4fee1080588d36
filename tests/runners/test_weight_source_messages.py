"""What `--init_checkpoint` (any flag `runners.sources` resolves) says when it names
nothing: every kind of name it would have taken, the installed checkpoints included
(issue 47: they were missing, though the resolver takes them)."""

import pytest

from keras_bert_zoo.checkpoints.installed import list_installed_checkpoints
from keras_bert_zoo.config import list_presets
from keras_bert_zoo.runners.sources import resolve_weight_source


def test_an_unknown_name_lists_the_installed_checkpoints_and_the_presets(tmp_path):
    given = str(tmp_path / "all-MiniLM-L6")  # a near miss of the installed one
    with pytest.raises(FileNotFoundError) as raised:
        resolve_weight_source(given)
    message = str(raised.value)
    assert message.startswith(f"--init_checkpoint={given}: no such file or directory")
    installed = list_installed_checkpoints()
    assert installed, "the test environment ships all-MiniLM-L6-v2"
    assert f"installed checkpoint ({', '.join(installed)})" in message
    assert f"preset name ({', '.join(list_presets())})" in message
