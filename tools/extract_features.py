"""Runs a pretrained BERT over sentences and prints (or writes) its features.

With no flags it loads the real all-MiniLM-L6-v2 BERT that the `demo` extra installs,
embeds a few built-in sentences, and prints the cosine similarities of their mean-pooled
embeddings: related sentences score high, unrelated ones low.

Usage:
  python tools/extract_features.py
  python tools/extract_features.py --model_dir=/path/to/uncased_L-12_H-768_A-12 \
      --input_file=sentences.txt --output_file=features.jsonl --layers=-1,-2
"""

import os

from keras_bert_zoo.utils import startup

# Before TensorFlow loads: the command line checked, the CPU kernels chosen
# (keras_bert_zoo/utils/startup.py).
startup.start_tool(__file__, kernels=True)

from absl import flags, logging  # noqa: E402

from keras_bert_zoo.tasks import feature_extraction  # noqa: E402
from keras_bert_zoo.utils import cli, cpu_kernels  # noqa: E402
from keras_bert_zoo.utils.errors import UserError  # noqa: E402

_MODEL_DIR = flags.DEFINE_string(
    "model_dir", None, "Google or Hugging Face checkpoint directory (default: demo MiniLM)."
)
_INPUT_FILE = flags.DEFINE_string(
    "input_file", None, "Text file, one sentence per line (default: built-in sentences)."
)
_OUTPUT_FILE = flags.DEFINE_string(
    "output_file", None, "Write per-token features as JSON lines (extract_features layout)."
)
_LAYERS = flags.DEFINE_list("layers", ["-1"], "Encoder layers to write, negative from top.")
_MAX_SEQ_LENGTH = flags.DEFINE_integer("max_seq_length", 128, "Tokens per sequence.")
_BATCH_SIZE = flags.DEFINE_integer("batch_size", 32, "Sentences per batch.")
_JIT_COMPILE = flags.DEFINE_bool(
    "jit_compile",
    None,
    "Compile the encoder with XLA. Default: as measured fastest for the CPU's kind "
    "(docs/speed.md).",
)
startup.define_onednn_flag()

DEFAULT_SENTENCES = [
    "A man is playing a guitar on stage.",
    "Someone performs music with a guitar in front of an audience.",
    "The stock market fell sharply after the announcement.",
    "Shares dropped quickly when the news came out.",
    "A cat is sleeping on the windowsill.",
]


def _jit_compile() -> bool:
    """The start's choice (`--jit_compile` included), or the flag (this module imported
    by a test: nothing chosen), else XLA."""
    choice = cpu_kernels.chosen()
    if choice is not None:
        return choice.inference_jit_compile
    return True if _JIT_COMPILE.value is None else _JIT_COMPILE.value


def main(argv):
    del argv
    startup.log_kernel_choice()
    model_dir = _MODEL_DIR.value or feature_extraction.demo_model_dir()
    if _INPUT_FILE.value:
        with open(_INPUT_FILE.value, encoding="utf-8") as f:
            sentences = [line.strip() for line in f if line.strip()]
        if not sentences:
            raise UserError(f"--input_file={_INPUT_FILE.value}: no non-empty lines")
    else:
        sentences = DEFAULT_SENTENCES
    try:
        layers = tuple(int(layer) for layer in _LAYERS.value)
    except ValueError:
        raise UserError(f"--layers={','.join(_LAYERS.value)}: must be integers") from None

    logging.info("Loading %s", model_dir)
    extractor = feature_extraction.FeatureExtractor.from_pretrained(
        model_dir,
        sequence_length=_MAX_SEQ_LENGTH.value,
        batch_size=_BATCH_SIZE.value,
        jit_compile=_jit_compile(),
    )
    features = extractor(sentences, layers=layers)
    print(f"model: {model_dir}")
    print(
        f"sentences: {len(sentences)}  sequence_output layer shape: "
        f"{features[f'layer_{layers[0]}'].shape}  pooled_output: {features['pooled_output'].shape}"
    )
    similarities = feature_extraction.cosine_similarity_matrix(features["sentence_embeddings"])
    print("cosine similarity of mean-pooled embeddings:")
    for i, sentence in enumerate(sentences):
        row = " ".join(f"{value:5.2f}" for value in similarities[i])
        print(f"  [{i}] {row}  {sentence[:60]}")
    if _OUTPUT_FILE.value:
        with open(os.path.join(model_dir, "vocab.txt"), encoding="utf-8") as f:
            vocab = [line.rstrip("\n") for line in f]
        tokens = [[vocab[i] for i in row] for row in features["input_word_ids"].tolist()]
        feature_extraction.write_features_jsonl(
            _OUTPUT_FILE.value, sentences, features, tokens, layers
        )
        print(f"wrote {_OUTPUT_FILE.value}")


def run():
    """The console script `keras-bert-zoo-extract-features`, and this file."""
    cli.run(main)


if __name__ == "__main__":
    run()
