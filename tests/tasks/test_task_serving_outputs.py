"""The tagging and multiple choice tasks without their data: `state()` saved with the
model rebuilds the task (`save_finetuned` -> `load_finetuned`), and `serving_outputs`
answers raw strings in TF ops exactly as `postprocess` does, in plain dense tensors.

References: the library's Python answers (`tasks.predict` -> `postprocess`,
`entity_metrics.entities`), a Python restatement of the word split with
`unicodedata` (tests/text/reference_wordpiece.py's character classes) and Python
string slicing for the character offsets.
"""

import csv
import importlib.util
import pathlib
import random
import string
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_bert_zoo import tasks
from keras_bert_zoo.models import BertEncoder
from keras_bert_zoo.tasks import tagging
from keras_bert_zoo.tasks.tagging import metrics as entity_metrics
from keras_bert_zoo.text import BertTokenizer

HERE = pathlib.Path(__file__).resolve().parent


def _load_module(path, name):
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


reference = _load_module(HERE.parent / "text" / "reference_wordpiece.py", "kbz_serving_reference")
hostile = _load_module(HERE.parent / "text" / "hostile_text.py", "kbz_serving_hostile")

VOCAB = [
    "[PAD]",
    "[UNK]",
    "[CLS]",
    "[SEP]",
    "[MASK]",
    *string.ascii_lowercase,
    *(f"##{c}" for c in string.ascii_lowercase),
    *string.digits,
    *(f"##{c}" for c in string.digits),
    ".",
    ",",
    "-",
    "!",
    "?",
    "the",
    "eu",
    "german",
    "she",
    "walks",
]
WORDS = [
    "Peter",
    "Blackburn",
    "EU",
    "rejects",
    "German",
    "call",
    "to",
    "boycott",
    "British",
    "lamb",
    ".",
    ",",
    "1996-08-22",
    "Café",
    "naïve",
    "Ångström",
    "日本",
    "x" * 120,
]
# Raw sentences the word pool cannot give: hostile text, invalid UTF-8, empty ones.
ODD_SENTENCES = [line.encode("utf-8") for line in hostile.HOSTILE_LINES] + list(
    hostile.HOSTILE_BYTES
)


def tiny_encoder(seed=0):
    keras.utils.set_random_seed(seed)
    return BertEncoder(
        vocab_size=len(VOCAB),
        hidden_size=32,
        num_layers=2,
        num_heads=4,
        intermediate_size=64,
        max_position_embeddings=64,
    )


def random_sentences(seed, count, max_words=30):
    rng = random.Random(seed)
    return [
        " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, max_words))).encode("utf-8")
        for _ in range(count)
    ]


def to_numpy(outputs):
    for name, value in outputs.items():
        assert isinstance(value, tf.Tensor) and not isinstance(value, tf.RaggedTensor), name
    return {name: value.numpy() for name, value in outputs.items()}


# === Entities in TF ops read as entity_metrics reads them ===


@pytest.mark.parametrize("scheme", ["IOB1", "IOB2", "raw"])
def test_entity_spans_follow_entity_metrics(scheme):
    if scheme == "raw":
        tags = ["O", "NN", "VB", "B-X"]
    else:
        # Untyped and hyphenated types and stray prefixes too: the chunker restates
        # conlleval's rules, not a cleaned-up version of them.
        tags = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC", "B", "I", "B-MISC-X", "I-MISC-X", "E-PER"]
    rng = np.random.default_rng(0)
    lengths = rng.integers(0, 12, size=400)
    flat = rng.integers(0, len(tags), size=int(lengths.sum()))
    tag_ids = tf.RaggedTensor.from_row_lengths(flat, lengths)
    spans = {
        key: value.numpy() for key, value in tagging.entity_spans(tag_ids, tags, scheme).items()
    }
    extract = entity_metrics.raw_entities if scheme == "raw" else entity_metrics.entities
    expected = [
        (sentence, entity_type, first, last)
        for sentence, row in enumerate(tag_ids.to_list())
        for entity_type, first, last in extract([tags[i] for i in row])
    ]
    got = [
        (int(s), t.decode("utf-8"), int(f), int(e))
        for s, t, f, e in zip(
            spans["sentence"], spans["type"], spans["first_word"], spans["last_word"], strict=True
        )
    ]
    assert got == expected
    assert len(expected) > 500


# === Word split ===


def reference_split(text):
    """(start, end) character spans of the words, from unicodedata classes."""
    spans, start = [], None

    def dropped(char):
        return ord(char) in (0, 0xFFFD) or reference.is_control(char)

    def close(end):
        nonlocal start
        if start is not None and not all(dropped(c) for c in text[start:end]):
            spans.append((start, end))
        start = None

    for index, char in enumerate(text):
        if not dropped(char) and (reference.is_whitespace(char) or char.isspace()):
            close(index)
        elif not dropped(char) and (reference.is_punctuation(char) or reference.is_cjk(ord(char))):
            close(index)
            spans.append((index, index + 1))
        elif start is None:
            start = index
    close(len(text))
    return spans


def test_split_words_gives_character_offsets_into_the_original():
    sentences = ODD_SENTENCES + random_sentences(1, 50) + [b"", b"\xff", "x\u0301 !\u0301".encode()]
    words, starts, ends = tagging.split_words(tf.constant(sentences))
    for raw, row, row_starts, row_ends in zip(
        sentences, words.to_list(), starts.to_list(), ends.to_list(), strict=True
    ):
        text = raw.decode("utf-8", errors="replace")
        spans = list(zip(row_starts, row_ends, strict=True))
        assert spans == reference_split(text), text
        assert [w.decode("utf-8") for w in row] == [text[s:e] for s, e in spans]


# === Token tagging ===

TRAIN_TAGS = ("O", "B-LOC", "B-ORG", "B-PER", "I-LOC", "I-ORG", "I-PER")


def write_training_file(path):
    rng = random.Random(3)
    lines = []
    for _ in range(20):
        previous = "O"
        for word in rng.sample(WORDS[:12], 5):
            tag = rng.choice(TRAIN_TAGS)
            if tag.startswith("I-") and previous[2:] != tag[2:]:
                tag = "B-" + tag[2:]  # well-formed IOB2
            lines.append(f"{word} {tag}")
            previous = tag
        lines.append("")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def randomize_head(model, seed):
    """Large random head weights: a random model whose tags vary from word to word, so
    the entity reading meets every pattern (I- starts, type changes, long spans)."""
    rng = np.random.default_rng(seed)
    for weight in model.token_classification_head.weights:
        weight.assign(rng.normal(0, 1.0, weight.shape).astype("float32"))


@pytest.fixture(scope="module")
def tagger(tmp_path_factory):
    root = tmp_path_factory.mktemp("tagging")
    data = root / "data"
    data.mkdir()
    write_training_file(data / "train.txt")
    task = tasks.create_task(
        "token_classification", data_dir=str(data), max_seq_length=12, window_stride=4
    )
    tokenizer = BertTokenizer(VOCAB, lowercase=True)
    model = task.build_model(tiny_encoder())
    randomize_head(model, 0)
    directory = root / "finetuned"
    tasks.save_finetuned(str(directory), task, model, tokenizer)
    return task, model, tokenizer, directory


def check_tagging_serving(task, model, preprocessor, sentences):
    """Serving outputs == postprocess answers, and entity_metrics' entities of them."""
    served = to_numpy(task.serving_outputs(model, preprocessor)(sentence=tf.constant(sentences)))
    examples = task.examples_from_texts(sentences)
    answers = tasks.predict(task, model, examples, preprocessor, batch_size=8)
    assert served["word_count"].tolist() == [len(example.words) for example in examples]
    entity_total = 0
    for index, (raw, example, answer) in enumerate(zip(sentences, examples, answers, strict=True)):
        text = raw.decode("utf-8", errors="replace")
        count = len(example.words)
        assert served["word_tags"][index, :count].astype(str).tolist() == list(answer)
        assert served["word_tags"][index, count:].tolist() == [b""] * (
            served["word_tags"].shape[1] - count
        )
        starts = served["word_start"][index, :count].tolist()
        ends = served["word_end"][index, :count].tolist()
        assert list(zip(starts, ends, strict=True)) == reference_split(text)
        assert [text[s:e] for s, e in zip(starts, ends, strict=True)] == list(example.words)
        assert (served["word_start"][index, count:] == -1).all()
        expected = (
            entity_metrics.raw_entities(answer)
            if task.training_tag_scheme == "raw"
            else entity_metrics.entities(answer)
        )
        number = served["entity_count"][index]
        assert number == len(expected)
        scores = served["word_score"][index]
        got = []
        for slot, (_, first, last) in enumerate(expected):
            start, end = served["entity_start"][index, slot], served["entity_end"][index, slot]
            assert (start, end) == (starts[first], ends[last])
            entity_text = served["entity_text"][index, slot].decode("utf-8")
            assert entity_text == text[start:end]
            assert served["entity_score"][index, slot] == pytest.approx(
                scores[first : last + 1].mean(), abs=1e-6
            )
            got.append(served["entity_type"][index, slot].decode("utf-8"))
        assert got == [entity_type for entity_type, _, _ in expected]
        assert (served["entity_start"][index, number:] == -1).all()
        assert (served["entity_type"][index, number:] == b"").all()
        entity_total += number
    return served, answers, entity_total


@pytest.mark.slow
def test_tagging_reloads_without_data_and_serves_postprocess_answers(tagger):
    task, model, tokenizer, directory = tagger
    assert task.state() == {"tags": list(TRAIN_TAGS), "tag_scheme": "IOB2"}
    finetuned = tasks.load_finetuned(str(directory))  # no data_dir
    assert finetuned.task.data_dir is None
    assert finetuned.task.state() == task.state()
    sentences = random_sentences(2, 40) + ODD_SENTENCES + [b"", b"\xff\xfe", b"   "]
    served, answers, entities = check_tagging_serving(
        finetuned.task, finetuned.model, finetuned.preprocessor, sentences
    )
    assert entities > 100  # the random head tags plenty of entities
    # The model and preprocessor in the process that trained them answer the same.
    original = tasks.predict(
        task, model, task.examples_from_texts(sentences), task.make_preprocessor(tokenizer)
    )
    assert original == answers
    # Probabilities: the softmax of the logits postprocess reads.
    outputs, meta = tasks.predict_raw(
        finetuned.task,
        finetuned.model,
        finetuned.task.examples_from_texts(sentences[:5]),
        finetuned.preprocessor,
    )
    rows, positions = np.nonzero(meta["word_index"] >= 0)
    logits = outputs[rows, positions]
    probabilities = np.exp(logits - logits.max(-1, keepdims=True))
    probabilities = (probabilities / probabilities.sum(-1, keepdims=True)).max(-1)
    order = np.lexsort((meta["word_index"][rows, positions], meta["example_index"][rows]))
    flat_scores = np.concatenate(
        [served["word_score"][i, : served["word_count"][i]] for i in range(5)]
    )
    np.testing.assert_allclose(flat_scores, probabilities[order], atol=1e-5)


@pytest.mark.slow
def test_tagging_serving_windows_long_sentences_and_mixed_batches(tagger):
    task, model, tokenizer, _ = tagger
    preprocessor = task.make_preprocessor(tokenizer)
    long_sentence = " ".join(WORDS * 12).encode("utf-8")  # hundreds of pieces, 12 per window
    sentences = [long_sentence, b"", b"EU", long_sentence[:300], b"\x80 Peter \xc3"]
    served, _, _ = check_tagging_serving(task, model, preprocessor, sentences)
    assert served["word_count"][0] == len(tagging.split_words(tf.constant([long_sentence]))[0][0])
    assert served["word_count"][1] == 0 and served["entity_count"][1] == 0
    # A batch of nothing but empty sentences, and an empty batch.
    empty = to_numpy(task.serving_outputs(model, preprocessor)(tf.constant(["", " "])))
    assert empty["words"].shape == (2, 0) and empty["entity_type"].shape == (2, 0)
    assert empty["word_count"].tolist() == empty["entity_count"].tolist() == [0, 0]
    none = to_numpy(task.serving_outputs(model, preprocessor)(tf.constant([], tf.string)))
    assert none["entity_count"].shape == (0,) and none["word_tags"].shape == (0, 0)


@pytest.mark.slow
def test_raw_tags_serve_one_word_entities(tmp_path):
    (tmp_path / "train.txt").write_text("EU NNP\nrejects VBZ\n. .\n\nthe DT\n", encoding="utf-8")
    task = tasks.create_task("token_classification", data_dir=str(tmp_path), max_seq_length=10)
    assert task.state() == {"tags": [".", "DT", "NNP", "VBZ"], "tag_scheme": "raw"}
    model = task.build_model(tiny_encoder(1))
    randomize_head(model, 1)
    restored = tasks.create_task("token_classification", max_seq_length=10)
    restored.load_state(task.state())
    preprocessor = restored.make_preprocessor(BertTokenizer(VOCAB, lowercase=True))
    _, answers, entities = check_tagging_serving(
        restored, model, preprocessor, random_sentences(4, 10)
    )
    assert entities == sum(len(answer) for answer in answers)  # no tag is O


def test_tagging_state_is_checked(tagger):
    task, _, _, _ = tagger
    state = task.state()
    conll = tasks.create_task("conll2003")
    with pytest.raises(ValueError, match="differ from this task's"):
        conll.load_state(state)
    conll_state = {"tags": list(tagging.CONLL2003_TAGS), "tag_scheme": "IOB1"}
    conll.load_state(conll_state)
    assert conll.state() == conll_state
    with pytest.raises(ValueError, match="not IOB1 or IOB2"):
        conll.load_state({**conll_state, "tag_scheme": "raw"})
    with pytest.raises(ValueError, match="tag_scheme=IOB2"):
        tasks.create_task("conll2003", tag_scheme="IOB2").load_state(conll_state)
    with pytest.raises(ValueError, match="no valid tags"):
        tasks.create_task("token_classification").load_state({"tag_scheme": "IOB2"})
    with pytest.raises(ValueError, match="differ"):
        tasks.create_task("token_classification", tag_set="O,B-X,I-X").load_state(state)
    with pytest.raises(ValueError, match="data_dir"):
        tasks.create_task("token_classification").state()  # nothing to read it from


# === Multiple choice ===


def tiny_choice_model(task, seed):
    model = task.build_model(tiny_encoder(seed))
    rng = np.random.default_rng(seed)
    for weight in model.choice_head.weights:
        weight.assign(rng.normal(0, 1.0, weight.shape).astype("float32"))
    return model


def random_choice_texts(seed, count, fields):
    rng = random.Random(seed)
    phrases = ["she walks", "the call", "German lamb .", "", "café naïve", "x" * 130]
    texts = []
    for _ in range(count):
        texts.append(
            tuple(" ".join(rng.choices(phrases, k=rng.randint(0, 8))) for _ in range(fields))
        )
    texts.append(tuple(["\xff bad bytes \xc3".encode("latin-1")] * fields))  # invalid UTF-8
    texts.append(tuple([""] * fields))
    texts.append(tuple([" ".join(["she walks to the call"] * 60)] * fields))  # truncated
    return texts


def check_choice_serving(task, model, preprocessor, texts):
    columns = list(zip(*texts, strict=True))
    inputs = {
        name: tf.constant(list(column), tf.string)
        for name, column in zip(task.text_fields, columns, strict=True)
    }
    served = to_numpy(task.serving_outputs(model, preprocessor)(**inputs))
    examples = task.examples_from_texts(
        [
            tuple(t.decode("utf-8", "replace") if isinstance(t, bytes) else t for t in item)
            for item in texts
        ]
    )
    answers = tasks.predict(task, model, examples, preprocessor, batch_size=8)
    assert served["scores"].shape == (len(texts), task.num_choices)
    assert served["scores"].dtype == np.float32 and served["label"].dtype == np.int32
    np.testing.assert_allclose(served["scores"], [a.scores for a in answers], atol=1e-6)
    assert served["label"].tolist() == [a.label for a in answers]
    return served, answers


@pytest.mark.slow
def test_multiple_choice_reloads_without_data_and_serves_postprocess_answers(tmp_path):
    import json

    data = tmp_path / "data"
    data.mkdir()
    records = [
        {"context": "she walks", "choices": ["a", "b", "c"], "label": i % 3} for i in range(4)
    ]
    (data / "train.jsonl").write_text("\n".join(json.dumps(r) for r in records) + "\n")
    task = tasks.create_task("multiple_choice", data_dir=str(data), max_seq_length=24)
    assert task.state() == {"num_choices": 3}
    assert task.text_fields == ("context", "ending0", "ending1", "ending2")
    tokenizer = BertTokenizer(VOCAB, lowercase=True)
    model = tiny_choice_model(task, 2)
    tasks.save_finetuned(str(tmp_path / "finetuned"), task, model, tokenizer)
    finetuned = tasks.load_finetuned(str(tmp_path / "finetuned"))
    assert finetuned.task.state() == {"num_choices": 3}
    assert finetuned.task.text_fields == task.text_fields
    texts = random_choice_texts(5, 30, 4)
    served, answers = check_choice_serving(
        finetuned.task, finetuned.model, finetuned.preprocessor, texts
    )
    assert len(set(served["label"].tolist())) == 3  # a model whose answers vary
    original = tasks.predict(
        task, model, task.examples_from_texts(texts[:-2]), task.make_preprocessor(tokenizer)
    )
    assert [a.label for a in original] == [a.label for a in answers[:-2]]
    # Positional texts answer the same as named ones.
    columns = [tf.constant(list(c)) for c in zip(*texts, strict=True)]
    positional = to_numpy(task.serving_outputs(finetuned.model, finetuned.preprocessor)(*columns))
    np.testing.assert_array_equal(positional["label"], served["label"])

    with pytest.raises(ValueError, match="takes 3 choices, this task 4"):
        tasks.create_task("swag").load_state({"num_choices": 3})
    with pytest.raises(ValueError, match="not a positive integer"):
        tasks.create_task("multiple_choice").load_state({"num_choices": "3"})
    with pytest.raises(ValueError, match="data_dir"):
        tasks.create_task("multiple_choice").state()


SWAG_HEADER = ["", "video-id", "fold-ind", "startphrase", "sent1", "sent2", "gold-source"]


@pytest.mark.slow
def test_swag_serves_its_own_fields_packed_as_in_training(tmp_path):
    """The served (sent1, sent2, endings) answer what the CSV's examples answer."""
    texts = random_choice_texts(6, 20, 6)
    path = tmp_path / "val.csv"
    with open(path, "w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(SWAG_HEADER + [f"ending{i}" for i in range(4)] + ["label"])
        for index, item in enumerate(texts):
            item = [t.decode("utf-8", "replace") if isinstance(t, bytes) else t for t in item]
            # The reader refuses empty endings and sent1; the server takes them.
            endings = [ending or "?" for ending in item[2:]]
            row = [index, "v", index, "", item[0] or "?", item[1], "gold", *endings, 0]
            writer.writerow(row)
    task = tasks.create_task("swag", data_dir=str(tmp_path), max_seq_length=20)
    assert task.state() == {"num_choices": 4}
    assert task.text_fields == ("sent1", "sent2", "ending0", "ending1", "ending2", "ending3")
    examples = task.read("dev")
    served_texts = [(e.context, e.choice_prefix, *e.choices) for e in examples]
    model = tiny_choice_model(task, 3)
    tokenizer = BertTokenizer(VOCAB, lowercase=True)
    tasks.save_finetuned(str(tmp_path / "finetuned"), task, model, tokenizer)
    finetuned = tasks.load_finetuned(str(tmp_path / "finetuned"))
    served, answers = check_choice_serving(
        finetuned.task, finetuned.model, finetuned.preprocessor, served_texts
    )
    from_csv = tasks.predict(task, model, examples, task.make_preprocessor(tokenizer))
    assert [a.label for a in from_csv] == served["label"].tolist()
    np.testing.assert_allclose(served["scores"], [a.scores for a in from_csv], atol=1e-6)
    # Empty and invalid UTF-8 fields are served too.
    check_choice_serving(finetuned.task, finetuned.model, finetuned.preprocessor, texts)


# === Export: the serving functions save as plain-tensor signatures ===


@pytest.mark.slow
def test_serving_functions_export_as_saved_model_signatures(tagger, tmp_path):
    task, model, tokenizer, _ = tagger
    preprocessor = task.make_preprocessor(tokenizer)
    module = tf.Module()
    module.model, module.preprocessor = model, preprocessor
    module.serve = tf.function(
        task.serving_outputs(model, preprocessor),
        input_signature=[tf.TensorSpec([None], tf.string, name="sentence")],
    )
    tf.saved_model.save(
        module, str(tmp_path / "tagging"), signatures={"serving_default": module.serve}
    )
    loaded = tf.saved_model.load(str(tmp_path / "tagging"))
    sentences = tf.constant(random_sentences(7, 6) + [b"", b"\xffEU"])
    from_signature = loaded.signatures["serving_default"](sentence=sentences)
    expected = to_numpy(task.serving_outputs(model, preprocessor)(sentences))
    got = to_numpy(from_signature)
    assert sorted(got) == sorted(expected)
    for name, value in expected.items():
        if value.dtype.kind == "f":
            np.testing.assert_allclose(got[name], value, atol=1e-6, err_msg=name)
        else:
            np.testing.assert_array_equal(got[name], value, err_msg=name)
