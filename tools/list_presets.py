"""Prints the BERT presets (sizes and parameter counts) and the pretrained checkpoints
that installed packages ship (names `--init_checkpoint` and `from_pretrained` accept).

Usage: python tools/list_presets.py [--names_only]
"""

from absl import flags

from keras_bert_zoo.checkpoints.installed import (
    format_installed_checkpoints,
    list_installed_checkpoints,
)
from keras_bert_zoo.config import format_presets_table, list_presets
from keras_bert_zoo.utils import cli

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
