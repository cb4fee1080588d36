"""Prints the BERT presets (sizes and parameter counts).

Usage: python tools/list_presets.py [--names_only]
"""

from absl import flags

from keras_bert_zoo.config import format_presets_table, list_presets
from keras_bert_zoo.utils import cli

_NAMES_ONLY = flags.DEFINE_bool("names_only", False, "Print only the preset names.")


def main(argv):
    del argv
    print("\n".join(list_presets()) if _NAMES_ONLY.value else format_presets_table())


if __name__ == "__main__":
    cli.run(main)
