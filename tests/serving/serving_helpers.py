"""Helpers of the serving tests (loaded by path: `load_helpers()` in conftest.py).

Every model is a tiny random encoder (hidden 16, one layer) with weights drawn large
enough that answers are decisive (no near-ties for float noise to flip), under the
real uncased MiniLM vocabulary (30,522 WordPieces) where tokenization matters
(SQuAD, masked LM, encoder) and the sentence fixtures' small vocabulary elsewhere.
"""

from __future__ import annotations

import dataclasses
import pathlib
import sys
from typing import Any

import numpy as np

from keras_bert_zoo import serving
from keras_bert_zoo.models import BertEncoder

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tasks"))
import sentence_fixtures  # noqa: E402, F401  (re-exported: helpers.sentence_fixtures)
from finetuning_test_helpers import run_tool_as_user  # noqa: E402, F401  (re-exported)

# Texts that exercise the robustness paths: mixed lengths, empty, long, non-ASCII,
# combining marks, control characters, invalid UTF-8 (as bytes).
HOSTILE_TEXTS = [
    "a good film",
    "",
    "Crème brûlée, naïve café: 中文字符 and 😀 emoji",
    "e\u0301 combining and \u200b zero width and \x00 nul and \t tabs\n newlines",
    " ".join(["very long text well past the sequence length"] * 60),
    b"invalid \xff\xfe utf-8 \xc3( bytes",
    b"\xed\xa0\x80 surrogate and overlong \xc0\xaf",
    "   ",
]


@dataclasses.dataclass
class Export:
    """An export and the in-memory objects it was made from."""

    name: str
    task: Any
    model: Any
    tokenizer: Any
    preprocessor: Any
    exported: serving.ExportedModel

    @property
    def path(self) -> str:
        return self.exported.path

    @property
    def served_preprocessor(self):
        return serving.serving_preprocessor(self.preprocessor)

    def eager_answer(self, inputs: dict) -> dict[str, np.ndarray]:
        """The in-memory Keras model's answers (the task's serving function run eagerly)."""
        import tensorflow as tf

        answer = serving.signatures.replace_invalid_utf8(
            self.task.serving_outputs(self.model, self.served_preprocessor)
        )
        outputs = answer(**{key: tf.constant(value) for key, value in inputs.items()})
        return {key: np.asarray(value) for key, value in outputs.items()}


def randomize(model, seed: int, scale: float = 0.3):
    rng = np.random.default_rng(seed)
    for variable in model.weights:
        if "seed_generator" in variable.path:
            continue
        shape = tuple(variable.shape)
        if "gamma" in variable.path:
            value = 1.0 + 0.1 * rng.standard_normal(shape)
        else:
            value = scale * rng.standard_normal(shape)
        variable.assign(value.astype(variable.dtype))
    return model


def tiny_encoder(vocab_size: int) -> BertEncoder:
    return BertEncoder(
        vocab_size=vocab_size,
        hidden_size=16,
        num_layers=1,
        num_heads=2,
        intermediate_size=32,
        max_position_embeddings=64,
    )


def text_inputs(text_fields, texts) -> dict[str, np.ndarray]:
    """`{field: [batch] bytes}`: field j of row i is `texts[(i + j) % len(texts)]`."""

    def as_bytes(text):
        return text.encode("utf-8") if isinstance(text, str) else text

    return {
        field: np.array(
            [as_bytes(texts[(row + column) % len(texts)]) for row in range(len(texts))], object
        )
        for column, field in enumerate(text_fields)
    }


def save_tiny_classifier(root: pathlib.Path, directory: pathlib.Path, seed: int, lowercase=True):
    """A two-sentence `text_classification` task over `sentence_fixtures.VOCABULARY`, a
    tiny classifier with seeded random weights, saved as a fine-tuned directory at
    `directory` (its data under `root / "data"`). Returns `(task, model, tokenizer)`."""
    from keras_bert_zoo import tasks
    from keras_bert_zoo.text import BertTokenizer

    data_dir = root / "data"
    data_dir.mkdir()
    rows = ["text\tlabel", "a good film\tpos", "a bad film\tneg"]
    (data_dir / "train.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    task = tasks.create_task("text_classification", data_dir=str(data_dir), max_seq_length=16)
    task.read("train")
    vocabulary = sentence_fixtures.VOCABULARY
    model = randomize(task.build_model(tiny_encoder(len(vocabulary))), seed)
    tokenizer = BertTokenizer(vocabulary, lowercase=lowercase)
    tasks.save_finetuned(str(directory), task, model, tokenizer)
    return task, model, tokenizer


def run_tool_main(tool, *args):
    """`tool.main` of a loaded tool module with `args` as its command line (the flags
    are reset afterwards)."""
    flags = tool.flags.FLAGS
    try:
        flags(["tool", *args])
        tool.main(["tool"])
    finally:
        flags.unparse_flags()
