"""Converts a BERT checkpoint between the google-research/bert and Hugging Face layouts.

Usage:
    python tools/convert_checkpoint.py --input=uncased_L-12_H-768_A-12 \
        --output=/tmp/bert_hf --output_format=huggingface [--include_heads]

The input layout is recognised from its files (bert_config.json + *.ckpt.index, or
config.json + model.safetensors / pytorch_model.bin). vocab.txt is copied along.
"""

from keras_bert_zoo.utils import startup

# Before TensorFlow loads: the command line checked (keras_bert_zoo/utils/startup.py).
startup.start_tool(__file__)

from absl import app, flags, logging  # noqa: E402

from keras_bert_zoo.checkpoints import convert_checkpoint  # noqa: E402
from keras_bert_zoo.utils import cli  # noqa: E402

_INPUT = flags.DEFINE_string("input", None, "Checkpoint directory (or Google checkpoint prefix).")
_OUTPUT = flags.DEFINE_string("output", None, "Output directory.")
_OUTPUT_FORMAT = flags.DEFINE_enum(
    "output_format", None, ["google", "huggingface"], "Layout to write."
)
_INCLUDE_HEADS = flags.DEFINE_bool(
    "include_heads", False, "Also convert the pretraining (masked LM and NSP) heads."
)
_ALLOW_PARTIAL = flags.DEFINE_bool(
    "allow_partial", False, "Convert what matches instead of failing on missing tensors."
)
flags.mark_flags_as_required(["input", "output", "output_format"])


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    output = convert_checkpoint(
        _INPUT.value,
        _OUTPUT.value,
        _OUTPUT_FORMAT.value,
        include_heads=_INCLUDE_HEADS.value,
        allow_partial=_ALLOW_PARTIAL.value,
    )
    logging.info("Wrote %s checkpoint to %s", _OUTPUT_FORMAT.value, output)


def run():
    """The console script `keras-bert-zoo-convert-checkpoint`, and this file."""
    cli.run(main)


if __name__ == "__main__":
    run()
