"""Prints the BERT presets (sizes and parameter counts) and the pretrained checkpoints
that installed packages ship (names `--init_checkpoint` and `from_pretrained` accept).

Usage: python tools/list_presets.py [--names_only]
"""

from keras_bert_zoo.utils import startup

# Before TensorFlow loads: the command line checked (keras_bert_zoo/utils/startup.py).
startup.start_tool(__file__)

from absl import flags  # noqa: E402

from keras_bert_zoo.checkpoints.installed import (  # noqa: E402
    format_installed_checkpoints,
    list_installed_checkpoints,
)
from keras_bert_zoo.config import format_presets_table, list_presets  # noqa: E402
from keras_bert_zoo.utils import cli  # noqa: E402

_NAMES_ONLY = flags.DEFINE_bool("names_only", False, "Print only the preset names.")


def main(argv):
    del argv
    if _NAMES_ONLY.value:
        print("\n".join(list_presets() + list_installed_checkpoints()))
        return
    print(format_presets_table())
    print()
    print(format_installed_checkpoints())


def run():
    """The console script `keras-bert-zoo-list-presets`, and this file."""
    cli.run(main)


if __name__ == "__main__":
    run()
