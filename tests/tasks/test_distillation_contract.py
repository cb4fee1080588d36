"""The task contract's distillation half: `Task.soft_targets()` (how a teacher's outputs
become soft targets) and `Task.read_transfer_file(path)` (unlabelled examples for the
teacher), for every task family.

For each family: the declared kinds match the structure and shapes of the built
model's outputs, a transfer file's examples featurize (`training=False`) into the
model's inputs and no labels, their texts are the file's, and malformed files raise
naming the file (and line).
"""

import json
import re
import string

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_bert_zoo import tasks
from keras_bert_zoo.models import BertEncoder
from keras_bert_zoo.tasks.distillation import (
    SOFT_CLASSES,
    SOFT_LABELS,
    SOFT_POSITIONS,
    SOFT_SCORE,
    SOFT_TARGET_KINDS,
    SOFT_TOKEN_CLASSES,
)
from keras_bert_zoo.tasks.task import Task
from keras_bert_zoo.text import BertTokenizer

# Letters as pieces: every word tokenizes, most into several WordPieces.
VOCAB = [
    "[PAD]",
    "[UNK]",
    "[CLS]",
    "[SEP]",
    "[MASK]",
    *string.ascii_lowercase,
    *(f"##{c}" for c in string.ascii_lowercase),
    ".",
    ",",
    "?",
    "the",
]
SEQUENCE_LENGTH = 24


@pytest.fixture(scope="module")
def tokenizer():
    return BertTokenizer(VOCAB, lowercase=True)


@pytest.fixture(scope="module")
def encoder():
    keras.utils.set_random_seed(0)
    return BertEncoder(
        vocab_size=len(VOCAB),
        hidden_size=16,
        num_layers=1,
        num_heads=2,
        intermediate_size=32,
        max_position_embeddings=64,
    )


def _write(path, lines, encoding="utf-8"):
    path.write_text("".join(line + "\n" for line in lines), encoding=encoding)
    return str(path)


# === One task per family (and kind), with a transfer file and its expected texts ===


def _task_factory(name, **options):
    """`fn(tmp_path)`: the task registered as `name`, with `options`."""
    options.setdefault("max_seq_length", SEQUENCE_LENGTH)

    def make(tmp_path):
        return tasks.create_task(name, data_dir=str(tmp_path), **options)

    return make


def _multiple_choice_task(tmp_path):
    task = tasks.create_task("multiple_choice", data_dir=str(tmp_path), max_seq_length=16)
    task.load_state({"num_choices": 3})  # the head's width, as a fine-tuned model's state
    return task


PAIR_LINES = ["the cat sat .\ta cat sat", "dog\tno dog here ."]

# (task factory, the kind(s) declared, transfer lines, the fields of each line)
FAMILIES = {
    "sst2": (_task_factory("glue/sst2"), SOFT_CLASSES, ["the cat sat .", "a dog ran fast ?"]),
    "mrpc": (_task_factory("glue/mrpc"), SOFT_CLASSES, PAIR_LINES),
    "stsb": (_task_factory("glue/stsb"), SOFT_SCORE, PAIR_LINES),
    "multi_label": (
        _task_factory("text_classification", multi_label=True, label_names="a,b,c"),
        SOFT_LABELS,
        ["the cat sat .", "the dog ."],
    ),
    "text_regression": (
        _task_factory("text_classification", regression=True, text_pair_column="pair"),
        SOFT_SCORE,
        PAIR_LINES,
    ),
    "squad": (
        _task_factory("squad_v1.1", max_query_length=8, doc_stride=4),
        {"start_logits": SOFT_POSITIONS, "end_logits": SOFT_POSITIONS},
        # The second context is longer than a window: it makes several features.
        [
            "who sat ?\tthe cat sat on the mat .",
            "where ?\t" + " ".join(["far", "away", "in", "the", "old", "town"] * 4),
        ],
    ),
    "conll2003": (
        _task_factory("conll2003"),
        SOFT_TOKEN_CLASSES,
        ["EU rejects German call .", "Peter  Blackburn\u00a0Jr said"],
    ),
    "multiple_choice": (
        _multiple_choice_task,
        SOFT_CLASSES,
        ["she sat .\tthen ran\tthen slept\tthen ate", "he\tsang\tdanced\tread"],
    ),
    "swag": (
        _task_factory("swag", max_seq_length=16),
        SOFT_CLASSES,
        ["she sat .\t\ta\tb\tc\td", "he\tthen\tsang\tdanced\tread\tate"],
    ),
}


def _example_texts(example) -> tuple[str, ...]:
    """The texts of an example of any family, in `text_fields` order."""
    if hasattr(example, "texts"):  # sentence
        return example.texts
    if hasattr(example, "question"):  # question answering
        return (example.question, example.context)
    if hasattr(example, "words"):  # tagging: one sentence
        return (" ".join(example.words),)
    prefix = (example.choice_prefix,) if example.choice_prefix else ()
    return (example.context, *prefix, *example.choices)


def _has_no_label(example) -> bool:
    if hasattr(example, "has_gold"):
        return not example.has_gold and not example.answers and not example.is_impossible
    if hasattr(example, "words"):
        return example.tags is None
    return example.label is None


@pytest.mark.slow
@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_soft_targets_match_the_model_and_transfer_examples_featurize(
    family, tmp_path, tokenizer, encoder
):
    make_task, declared, lines = FAMILIES[family]
    task = make_task(tmp_path)
    kinds = task.soft_targets()
    assert kinds == declared

    # A blank line and CRLF endings are skipped and dropped.
    path = tmp_path / "transfer.tsv"
    path.write_bytes(("\r\n".join(lines[:1] + ["", "  "] + lines[1:]) + "\r\n").encode())
    examples = task.read_transfer_file(str(path))
    assert [example.example_id for example in examples] == [
        f"transfer-{n}" for n in range(len(lines))
    ]
    assert all(_has_no_label(example) for example in examples)
    if family == "conll2003":
        # Words are separated by runs of spaces; a no-break space stays in its word.
        assert examples[1].words == ("Peter", "Blackburn\u00a0Jr", "said")
        lines = [re.sub(" +", " ", line) for line in lines]
    expected = [tuple(line.split("\t")) for line in lines]
    if family == "swag":  # an empty sent2 is no prefix
        expected = [tuple(field for field in fields if field) for fields in expected]
    assert [_example_texts(example) for example in examples] == expected

    preprocessor = task.make_preprocessor(tokenizer)
    dataset = task.features(examples, preprocessor, training=False)
    keys = set(dataset.element_spec)
    assert set(task.model_input_names()) <= keys
    assert not keys & set(task.label_keys), f"labels in the transfer features: {keys}"
    batch = next(iter(dataset.batch(64)))
    covered = np.unique(batch["example_index"].numpy())
    assert covered.tolist() == list(range(len(examples)))
    if family == "squad":  # the long context made several windows
        assert len(batch["example_index"]) > len(examples)
    x, y, _ = task.split_features(batch)
    assert y is None

    model = task.build_model(encoder)
    outputs = model(x, training=False)
    mask = x["input_mask"]
    if isinstance(outputs, dict):
        assert isinstance(kinds, dict) and set(kinds) == set(outputs)
    else:
        assert isinstance(kinds, str)
        outputs, kinds = {"output": outputs}, {"output": kinds}
    rows = mask.shape[0]
    for name, kind in kinds.items():
        assert kind in SOFT_TARGET_KINDS
        shape = tuple(outputs[name].shape)
        if kind == SOFT_POSITIONS:
            assert shape == tuple(mask.shape), name  # one logit per position
        elif kind == SOFT_TOKEN_CLASSES:
            assert shape[:2] == tuple(mask.shape) and shape[2] == len(task.tags)
        elif kind == SOFT_SCORE:
            assert shape == (rows, 1)
        elif family in ("multiple_choice", "swag"):
            assert shape == (rows, task.num_choices) and mask.shape[1] == task.num_choices
        else:
            assert shape == (rows, len(task.label_names))


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_malformed_transfer_files_name_the_file_and_line(family, tmp_path):
    make_task, _, lines = FAMILIES[family]
    task = make_task(tmp_path)
    fields = task.text_fields
    # Line 3 (after a blank line) has a field too many.
    path = _write(tmp_path / "bad.tsv", [lines[0], "", lines[1] + "\textra"])
    plural = "s" if len(fields) > 1 else ""
    message = re.escape(
        f"{path}:3: expected {len(fields)} tab-separated field{plural} ({', '.join(fields)})"
    )
    with pytest.raises(ValueError, match=message):
        task.read_transfer_file(path)
    missing = str(tmp_path / "missing.tsv")
    with pytest.raises(FileNotFoundError, match=re.escape(missing)):
        task.read_transfer_file(missing)
    empty = _write(tmp_path / "empty.tsv", ["", "   "])
    with pytest.raises(ValueError, match=re.escape(f"{empty}: the file is empty")):
        task.read_transfer_file(empty)


def test_a_field_too_few_and_bad_bytes_are_named_too(tmp_path):
    task = tasks.create_task("glue/mrpc", data_dir=str(tmp_path))
    path = _write(tmp_path / "pairs.tsv", ["a\tb", "only one"])
    with pytest.raises(
        ValueError,
        match=rf"{path}:2: expected 2 tab-separated fields \(sentence1, sentence2\), found 1",
    ):
        task.read_transfer_file(path)
    (tmp_path / "latin.tsv").write_bytes("a\tb\ncaf\u00e9\tx\n".encode("latin-1"))
    with pytest.raises(ValueError, match=r"latin\.tsv:2: byte 0xe9"):
        task.read_transfer_file(str(tmp_path / "latin.tsv"))
    # The task's encoding reads it.
    latin = tasks.create_task("glue/mrpc", data_dir=str(tmp_path), encoding="latin-1")
    assert latin.read_transfer_file(str(tmp_path / "latin.tsv"))[1].texts == ("caf\u00e9", "x")


def test_empty_question_or_choice_names_the_line(tmp_path):
    squad = tasks.create_task("squad_v2.0", data_dir=str(tmp_path))
    path = _write(tmp_path / "questions.tsv", ["who?\tthe cat.", "why?\t  "])
    with pytest.raises(ValueError, match=f"{path}:2: empty context"):
        squad.read_transfer_file(path)
    choices = _multiple_choice_task(tmp_path)
    path = _write(tmp_path / "choices.tsv", ["she\ta\t\tc"])
    with pytest.raises(ValueError, match=f"{path}:1: ending1 is empty"):
        choices.read_transfer_file(path)


def test_squad_json_transfer_file_drops_the_answers(tmp_path, tokenizer):
    context = "the cat sat on the mat ."
    data = {
        "version": "v2.0",
        "data": [
            {
                "title": "t",
                "paragraphs": [
                    {
                        "context": context,
                        "qas": [
                            {"id": "q1", "question": "who sat ?"},
                            {
                                "id": "q2",
                                "question": "where ?",
                                "answers": [{"text": "the mat", "answer_start": 15}],
                            },
                            # Unanswerable questions are read even by SQuAD v1.1.
                            {"id": "q3", "question": "why ?", "answers": [], "is_impossible": True},
                        ],
                    }
                ],
            }
        ],
    }
    path = tmp_path / "unlabelled.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    task = tasks.create_task(
        "squad_v1.1", data_dir=str(tmp_path), max_seq_length=SEQUENCE_LENGTH, max_query_length=8
    )
    examples = task.read_transfer_file(str(path))
    assert [e.example_id for e in examples] == ["transfer-0", "transfer-1", "transfer-2"]
    assert [e.question for e in examples] == ["who sat ?", "where ?", "why ?"]
    assert all(e.context == context and _has_no_label(e) for e in examples)
    dataset = task.features(examples, task.make_preprocessor(tokenizer), training=False)
    assert not set(dataset.element_spec) & set(task.label_keys)
    # Questions without gold answers cannot be trained on.
    with pytest.raises(ValueError, match="no gold answers"):
        task.features(examples, task.make_preprocessor(tokenizer), training=True)
    with pytest.raises(FileNotFoundError, match="missing.json"):
        task.read_transfer_file(str(tmp_path / "missing.json"))


def test_conll_transfer_file_reads_words_and_drops_the_tags(tmp_path):
    task = tasks.create_task("conll2003", data_dir=str(tmp_path))
    path = _write(
        tmp_path / "unlabelled.conll",
        [
            "-DOCSTART- -X- -X- O",
            "",
            "EU NNP I-NP I-ORG",
            "rejects VBZ I-VP O",
            "",
            "Peter NNP I-NP I-PER",
        ],
    )
    examples = task.read_transfer_file(path)
    assert [(e.example_id, e.words, e.tags) for e in examples] == [
        ("transfer-0", ("EU", "rejects"), None),
        ("transfer-1", ("Peter",), None),
    ]
    assert examples[0].documents_before == 1 and examples[1].source == f"{path}:6"
    # A file of words alone is read too.
    words = _write(tmp_path / "words.conll", ["EU", "rejects", "", "Peter"])
    assert [e.words for e in task.read_transfer_file(words)] == [("EU", "rejects"), ("Peter",)]


def test_base_task_declares_no_soft_targets(tmp_path):
    class Bare(Task):
        text_fields = ("text",)

        def read(self, split):
            return []

        def features(self, examples, preprocessor, *, training):
            return tf.data.Dataset.from_tensors({})

        def make_preprocessor(self, tokenizer):
            return None

        def build_model(self, encoder):
            return None

        def loss(self):
            return None

        def postprocess(self, outputs, meta, examples):
            return []

        def evaluate(self, answers, examples):
            return {}

        def write_predictions(self, answers, examples, output_dir, split):
            return []

    with pytest.raises(NotImplementedError, match="Bare declares no soft targets"):
        Bare().soft_targets()
    path = _write(tmp_path / "texts.tsv", ["a text"])
    with pytest.raises(NotImplementedError, match="Bare reads no transfer files"):
        Bare().read_transfer_file(path)
    assert set(SOFT_TARGET_KINDS) == {
        "classes",
        "labels",
        "score",
        "positions",
        "token_classes",
        "vectors",
    }
