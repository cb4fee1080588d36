"""Token tagging tasks (`conll2003`, `token_classification`): readers, the windowed
WordPiece preprocessor, word-level alignment, end to end training and the CoNLL
prediction files (scored back with seqeval, the conlleval-compatible reference)."""

import os
import random
import string
import warnings

import keras
import numpy as np
import pytest
import tensorflow as tf
from seqeval.metrics import f1_score

from keras_bert_zoo import tasks
from keras_bert_zoo.tasks import tagging
from keras_bert_zoo.text import BertTokenizer

# Letters and digits as pieces, so most words become several WordPieces; a few whole
# words stay one piece.
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
    "eu",
    "the",
    "to",
    "call",
    "german",
]

PERSONS = [("Peter", "Blackburn"), ("John", "Major"), ("Anna", "Schmidt"), ("Li",)]
ORGANIZATIONS = [("EU",), ("Reuters",), ("European", "Commission")]
LOCATIONS = [("Germany",), ("London",), ("Brussels",), ("New", "Zealand")]
MISCELLANEOUS = [("German",), ("British",)]
FILLER = [
    "rejects",
    "the",
    "call",
    "to",
    "boycott",
    "lamb",
    "said",
    "on",
    "in",
    ".",
    ",",
    "1996-08-22",
]


@pytest.fixture(scope="module")
def tokenizer():
    return BertTokenizer(VOCAB, lowercase=True)


def tiny_encoder(seed=0):
    from keras_bert_zoo.models import BertEncoder

    keras.utils.set_random_seed(seed)
    return BertEncoder(
        vocab_size=len(VOCAB),
        hidden_size=32,
        num_layers=2,
        num_heads=4,
        intermediate_size=64,
        max_position_embeddings=64,
    )


def make_sentences(seed, count):
    """Random sentences with IOB1 tags as the original CoNLL-2003 writes them."""
    rng = random.Random(seed)
    sentences = []
    for _ in range(count):
        words, tags = [], []
        previous_type = None
        for _ in range(rng.randint(2, 12)):
            kind = rng.random()
            if kind < 0.55:
                words.append(rng.choice(FILLER))
                tags.append("O")
                previous_type = None
                continue
            entity_type, names = rng.choice(
                [
                    ("PER", PERSONS),
                    ("ORG", ORGANIZATIONS),
                    ("LOC", LOCATIONS),
                    ("MISC", MISCELLANEOUS),
                ]
            )
            name = rng.choice(names)
            first = "B" if previous_type == entity_type else "I"  # IOB1
            for index, word in enumerate(name):
                words.append(word)
                tags.append(f"{first if index == 0 else 'I'}-{entity_type}")
            previous_type = entity_type
        sentences.append((words, tags))
    return sentences


def write_conll(path, sentences, documents_every=5, delimiter=" "):
    """The official layout: `token POS chunk NER`, -DOCSTART- lines, blank lines."""
    lines = []
    for index, (words, tags) in enumerate(sentences):
        if index % documents_every == 0:
            lines += [delimiter.join(["-DOCSTART-", "-X-", "-X-", "O"]), ""]
        for word, tag in zip(words, tags, strict=True):
            lines.append(delimiter.join([word, "NNP", "I-NP", tag]))
        lines.append("")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")


# === Readers ===


def test_reader_takes_the_official_layout_and_tab_copies(tmp_path):
    sentences = make_sentences(1, 7)
    write_conll(tmp_path / "eng.train", sentences, documents_every=3)
    examples = tagging.read_column_file(str(tmp_path / "eng.train"), "train")
    assert [list(e.words) for e in examples] == [w for w, _ in sentences]
    assert [list(e.tags) for e in examples] == [t for _, t in sentences]
    assert [e.documents_before for e in examples] == [1, 0, 0, 1, 0, 0, 1]
    assert examples[0].source == f"{tmp_path / 'eng.train'}:3"
    assert examples[1].example_id == "train-1"

    (tmp_path / "tabs").mkdir()
    write_conll(tmp_path / "tabs" / "train.txt", sentences, documents_every=3, delimiter="\t")
    from_tabs = tagging.read_column_file(str(tmp_path / "tabs" / "train.txt"), "train")
    assert [(e.words, e.tags) for e in from_tabs] == [(e.words, e.tags) for e in examples]


def _write(path, text):
    path.write_text(text, encoding="utf-8")
    return path


def test_reader_errors_name_file_and_line(tmp_path):
    good = "-DOCSTART- -X- -X- O\n\nEU NNP I-NP I-ORG\nrejects VBZ I-VP O\n\n"
    _write(tmp_path / "train.txt", good + "Peter NNP I-PER\n")
    task = tasks.create_task("conll2003", data_dir=str(tmp_path))
    with pytest.raises(
        ValueError,
        match=r"train\.txt:6: the word 'Peter' is missing a column: 3 columns where the "
        r"file's lines have 4 \(word \.\.\. tag, as on line 3\)",
    ):
        task.read("train")

    _write(tmp_path / "train.txt", good + "Peter\n")
    task = tasks.create_task("conll2003", data_dir=str(tmp_path))
    with pytest.raises(ValueError, match=r"train\.txt:6: the word 'Peter' has no tag: 1 column"):
        task.read("train")

    _write(tmp_path / "train.txt", good + "Peter NNP I-NP B-PERSON\n")
    task = tasks.create_task("conll2003", data_dir=str(tmp_path))
    with pytest.raises(ValueError, match=r"train\.txt:6: unknown tag 'B-PERSON'"):
        task.read("train")

    _write(tmp_path / "train.txt", "EU\nrejects\n")
    with pytest.raises(ValueError, match=r"train\.txt:1: expected a word and a tag column"):
        tasks.create_task("conll2003", data_dir=str(tmp_path)).read("train")

    (tmp_path / "train.txt").write_bytes(b"EU NNP I-NP I-ORG\nM\xfcnchen NNP I-NP I-LOC\n")
    with pytest.raises(ValueError, match=r"train\.txt:2: not valid utf-8"):
        tasks.create_task("conll2003", data_dir=str(tmp_path)).read("train")
    latin = tasks.create_task("conll2003", data_dir=str(tmp_path), encoding="latin-1")
    assert latin.read("train")[0].words == ("EU", "München")

    # Generic task: dev tags must be in the training tag set.
    generic = tmp_path / "generic"
    generic.mkdir()
    _write(generic / "train.txt", "a B-X\nb I-X\n\nc O\n")
    _write(generic / "dev.txt", "a B-X\n\nb B-Y\n")
    task = tasks.create_task("token_classification", data_dir=str(generic))
    assert task.tags == ("O", "B-X", "I-X")
    with pytest.raises(ValueError, match=r"dev\.txt:3: unknown tag 'B-Y'.*read from .*train\.txt"):
        task.read("dev")

    missing = tasks.create_task("conll2003", data_dir=str(tmp_path / "nowhere"))
    with pytest.raises(FileNotFoundError, match="eng.train"):
        missing.read("train")


def test_conll2003_reads_prepared_tensorflow_datasets(tmp_path):
    import tensorflow_datasets as tfds
    from tensorflow_datasets.core.dataset_builders.conll import (
        conll_dataset_builder_utils as conll_lib,
    )

    sentences = make_sentences(2, 4)
    iob2 = [
        (w, [t.replace("I-", "B-", 1) if i == 0 else t for i, t in enumerate(tags)])
        for w, tags in sentences
    ]
    records = [
        (str(i), {"tokens": w, "pos": ["NNP"] * len(w), "chunks": ["B-NP"] * len(w), "ner": t})
        for i, (w, t) in enumerate(iob2)
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tfds.dataset_builders.store_as_tfds_dataset(
            name="conll2003",
            version="1.0.0",
            config="conll2003",
            features=tfds.features.FeaturesDict(dict(conll_lib.CONLL_2003_ORDERED_FEATURES)),
            split_datasets={"dev": records},
            data_dir=str(tmp_path),
            disable_shuffling=True,
        )
    task = tasks.create_task("conll2003", tfds_data_dir=str(tmp_path))
    examples = task.read("dev")
    assert [(list(e.words), list(e.tags)) for e in examples] == [(w, t) for w, t in iob2]

    with pytest.raises(FileNotFoundError, match="not prepared"):
        tasks.create_task("conll2003", tfds_data_dir=str(tmp_path / "empty")).read("dev")


# === Preprocessing: windows and alignment ===


def reference_windows(num_pieces, length, stride):
    """The documented windows: starts k*stride, the last aligned to the end."""
    stride = min(stride, length)
    if num_pieces <= length:
        return [(0, num_pieces)]
    starts, k = [], 0
    while True:
        start = min(k * stride, num_pieces - length)
        starts.append(start)
        if start + length >= num_pieces:
            return [(s, length) for s in starts]
        k += 1


def max_context_window(windows, position):
    """google-research/bert's `_check_is_max_context`: the first window of best score."""
    best, best_score = None, None
    for index, (start, length) in enumerate(windows):
        end = start + length - 1
        if not start <= position <= end:
            continue
        score = min(position - start, end - position) + 0.01 * length
        if best_score is None or score > best_score:
            best, best_score = index, score
    return best


def random_words(rng, count):
    words = []
    for _ in range(count):
        kind = rng.random()
        if kind < 0.05:
            words.append(rng.choice(["\u00ad", "\u200b", "\u0301"]))  # normalize to nothing
        elif kind < 0.15:
            words.append(rng.choice(["EU", "the", "German", "to"]))  # one piece
        else:
            words.append(
                "".join(rng.choice(string.ascii_letters) for _ in range(rng.randint(1, 7)))
            )
    return words


@pytest.mark.parametrize("sequence_length,stride", [(10, 3), (12, 50), (7, 1)])
def test_windows_and_word_positions_match_the_restated_rule(tokenizer, sequence_length, stride):
    rng = random.Random(sequence_length)
    sentences = [random_words(rng, rng.randint(0, 25)) for _ in range(30)]
    layer = tagging.TaggingPreprocessor(tokenizer, sequence_length, window_stride=stride)
    out = {k: v.numpy() for k, v in layer(tf.ragged.constant(sentences, dtype=tf.string)).items()}

    flat = [w for s in sentences for w in s]
    pieces = tokenizer.tokenize(tf.constant(flat, tf.string)).to_list() if flat else []
    unknown = tokenizer.unknown_token_id
    pieces = [p or [unknown] for p in pieces]
    length = sequence_length - 2
    row = 0
    cursor = 0
    for sentence_index, words in enumerate(sentences):
        word_pieces = pieces[cursor : cursor + len(words)]
        cursor += len(words)
        sentence_pieces = [p for wp in word_pieces for p in wp]
        first_piece = np.cumsum([0] + [len(wp) for wp in word_pieces])[:-1]
        windows = reference_windows(len(sentence_pieces), length, stride)
        expected_word_index = np.full((len(windows), sequence_length), -1)
        for word, position in enumerate(first_piece):
            window = max_context_window(windows, position)
            expected_word_index[window, position - windows[window][0] + 1] = word
        for window, (start, size) in enumerate(windows):
            ids = out["input_word_ids"][row + window]
            expected = [
                tokenizer.cls_token_id,
                *sentence_pieces[start : start + size],
                tokenizer.sep_token_id,
            ]
            np.testing.assert_array_equal(ids[: size + 2], expected)
            assert (ids[size + 2 :] == 0).all() and out["input_mask"][
                row + window
            ].sum() == size + 2
            assert out["sentence_index"][row + window] == sentence_index
        np.testing.assert_array_equal(
            out["word_index"][row : row + len(windows)], expected_word_index
        )
        row += len(windows)
    assert row == len(out["sentence_index"])


class OracleTagger(keras.Model):
    """Logits that name a tag from the piece id at each position: the tag a word gets
    is `table[first piece of the word]` only if the task reads the right position."""

    def __init__(self, table, num_tags):
        super().__init__()
        self.table = tf.constant(table, tf.int32)
        self.num_tags = num_tags

    def call(self, inputs):
        return tf.one_hot(tf.gather(self.table, inputs["input_word_ids"]), self.num_tags)


def test_predictions_map_back_one_per_word_across_windows(tokenizer):
    tag_names = ["O", "B-A", "I-A", "B-B", "I-B", "B-C", "I-C", "B-D", "I-D"]
    task = tasks.create_task(
        "token_classification",
        data_dir=None,
        max_seq_length=9,
        window_stride=2,
        tag_set=",".join(tag_names),
    )
    rng = np.random.default_rng(3)
    table = rng.integers(0, len(tag_names), len(VOCAB))
    py_rng = random.Random(5)
    sentences = [random_words(py_rng, py_rng.randint(1, 30)) for _ in range(40)]
    flat = [w for s in sentences for w in s]
    first_pieces = [
        p[0] if p else tokenizer.unknown_token_id
        for p in tokenizer.tokenize(tf.constant(flat)).to_list()
    ]
    gold, cursor = [], 0
    for words in sentences:
        gold.append(tuple(tag_names[table[p]] for p in first_pieces[cursor : cursor + len(words)]))
        cursor += len(words)
    examples = [
        tagging.TaggedSentence(example_id=f"t-{i}", words=tuple(words), tags=None)
        for i, words in enumerate(sentences)
    ]
    preprocessor = task.make_preprocessor(tokenizer)
    model = OracleTagger(table, len(tag_names))
    outputs, meta = tasks.predict_raw(task, model, examples, preprocessor, batch_size=64)
    assert len(outputs) > 2 * len(examples)  # most sentences are split into windows
    answers = task.postprocess(outputs, meta, examples)
    assert [len(a) for a in answers] == [len(s) for s in sentences]
    assert answers == gold


def test_preprocessor_config_round_trip_and_serving_word_split(tokenizer, tmp_path):
    layer = tagging.TaggingPreprocessor(tokenizer, sequence_length=11, window_stride=4)
    # The config holds no vocabulary: the tokenizer's asset gives it back.
    clone = tagging.TaggingPreprocessor.from_config(layer.get_config())
    tokenizer.save_assets(str(tmp_path))
    clone.tokenizer.load_assets(str(tmp_path))
    words = tf.ragged.constant([["Peter", "Blackburn", "rejects", "the", "call"] * 3])
    for key, value in layer(words).items():
        np.testing.assert_array_equal(value.numpy(), clone(words)[key].numpy())

    text = "Café EU rejects German call, Peter\u00a0Blackburn said."
    split, starts, ends = tagging.split_words(tf.constant([text]))
    pieces = [text[s:e] for s, e in zip(starts[0].numpy(), ends[0].numpy(), strict=True)]
    assert [w.decode("utf-8") for w in split[0].numpy()] == pieces
    assert pieces == [
        "Café",
        "EU",
        "rejects",
        "German",
        "call",
        ",",
        "Peter",
        "Blackburn",
        "said",
        ".",
    ]


# === Tasks end to end ===


def _parse_prediction_file(path):
    documents, sentences, current = 0, [], []
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    for index, line in enumerate(lines):
        if not line:
            if current:
                sentences.append(current)
                current = []
            continue
        columns = line.split(" ")
        assert len(columns) == 3, line  # conlleval needs a fixed column count
        if columns[0] == "-DOCSTART-":
            assert columns[1:] == ["O", "O"] and lines[index + 1] == ""
            documents += 1
            continue
        current.append(columns)
    assert not current
    return documents, sentences


@pytest.mark.slow
def test_conll2003_end_to_end_loss_falls_and_files_are_conlleval_input(tokenizer, tmp_path):
    data = tmp_path / "conll2003"
    data.mkdir()
    train = make_sentences(10, 40)
    dev = make_sentences(11, 12)
    write_conll(data / "eng.train", train)
    write_conll(data / "eng.testa", dev)
    task = tasks.create_task("conll2003", data_dir=str(data), max_seq_length=16, window_stride=5)
    assert task.primary_metric == "f1"
    train_examples, dev_examples = task.read("train"), task.read("dev")
    preprocessor = task.make_preprocessor(tokenizer)

    model = task.build_model(tiny_encoder())
    # XLA compilation would dominate a fit of a few dozen steps.
    model.compile(
        optimizer=keras.optimizers.Adam(5e-3),
        loss=task.loss(),
        metrics=task.metrics(),
        jit_compile=False,
    )
    dataset = tasks.training_dataset_fn(task, train_examples, preprocessor, 16, seed=1)(None)
    history = model.fit(dataset, steps_per_epoch=12, epochs=4, verbose=0)
    losses = history.history["loss"]
    assert losses[-1] < 0.6 * losses[0], losses

    answers = tasks.predict(task, model, dev_examples, preprocessor, batch_size=16)
    assert [len(a) for a in answers] == [len(e.words) for e in dev_examples]
    metrics = task.evaluate(answers, dev_examples)
    gold = [list(e.tags) for e in dev_examples]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert metrics["f1"] == pytest.approx(f1_score(gold, [list(a) for a in answers]), abs=1e-9)
    assert metrics["f1"] > 0.3  # it learned something in 48 steps

    (path,) = task.write_predictions(answers, dev_examples, str(tmp_path / "out"), "dev")
    assert os.path.basename(path) == "predictions_dev.txt"
    documents, sentences = _parse_prediction_file(path)
    assert documents == sum(e.documents_before for e in dev_examples) > 1
    assert [[c[0] for c in s] for s in sentences] == [list(e.words) for e in dev_examples]
    assert [[c[1] for c in s] for s in sentences] == gold
    assert [tuple(c[2] for c in s) for s in sentences] == answers
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        file_f1 = f1_score(
            [[c[1] for c in s] for s in sentences], [[c[2] for c in s] for s in sentences]
        )
    assert file_f1 == pytest.approx(metrics["f1"], abs=1e-9)


@pytest.mark.slow
def test_token_classification_reads_any_column_layout(tokenizer, tmp_path):
    # Tab-separated, word in column 1 (with spaces inside), POS tags in column 2: raw tags.
    rows = [
        [("1", "New York", "NNP"), ("2", "rejects", "VBZ"), ("3", ".", ".")],
        [("1", "the", "DT"), ("2", "lamb", "NN")],
    ]
    text = "\n\n".join("\n".join("\t".join(r) + "\tx" for r in s) for s in rows) + "\n"
    _write(tmp_path / "train.txt", text)
    _write(tmp_path / "dev.txt", text)
    _write(tmp_path / "test.txt", "the\nlamb\n\nNew York\n")
    task = tasks.create_task(
        "token_classification",
        data_dir=str(tmp_path),
        word_column=1,
        tag_column=2,
        column_delimiter="tab",  # the one-column test file holds no tab to detect
        max_seq_length=8,
    )
    assert task.tags == (".", "DT", "NN", "NNP", "VBZ")
    dev = task.read("dev")
    assert dev[0].words == ("New York", "rejects", ".")
    test = task.read("test")
    assert [e.tags for e in test] == [None, None]
    preprocessor = task.make_preprocessor(tokenizer)
    assert "label" not in next(iter(task.features(test, preprocessor, training=False)))

    table = np.arange(len(VOCAB)) % len(task.tags)
    model = OracleTagger(table, len(task.tags))
    answers = tasks.predict(task, model, dev, preprocessor)
    metrics = task.evaluate(answers, dev)
    assert "strict_f1" not in metrics and 0 <= metrics["f1"] <= 1  # raw tags: conlleval -r
    (path,) = task.write_predictions(answers, dev, str(tmp_path / "out"), "dev")
    first = open(path, encoding="utf-8").read().split("\n")[0]
    assert first.split("\t") == ["New York", "NNP", answers[0][0]]  # tabs: words hold spaces

    test_answers = tasks.predict(task, model, test, preprocessor)
    (path,) = task.write_predictions(test_answers, test, str(tmp_path / "out"), "test")
    lines = open(path, encoding="utf-8").read().split("\n")
    assert lines[:3] == [f"the\t{test_answers[0][0]}", f"lamb\t{test_answers[0][1]}", ""]


def test_registered_names_and_options():
    for name in ("conll2003", "token_classification"):
        assert name in tasks.list_tasks()
    options = tasks.all_task_options()
    assert options["window_stride"].default == 64
    assert options["tag_scheme"].choices == ("auto", "IOB1", "IOB2", "raw")
    with pytest.raises(ValueError, match="raw"):
        tasks.create_task("conll2003", tag_scheme="raw")
    with pytest.raises(ValueError, match="window_stride"):
        tasks.create_task("conll2003", window_stride=0)
