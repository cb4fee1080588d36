"""`SquadPreprocessor` windows against a plain restatement of google-research/bert's
`convert_examples_to_features`, and round trips: gold positions fed as logits decode
back to exactly the original answer text.

The reference tokens and character offsets come from Hugging Face `tokenizers`
(`BertWordPieceTokenizer`, real MiniLM vocabulary), not from the code under test.
"""

import bz2
import importlib.util
import os
import random
import unicodedata
import xml.etree.ElementTree as ET

import numpy as np
import pytest
import tensorflow as tf

from keras_bert_zoo.tasks import create_task
from keras_bert_zoo.tasks.feature_extraction import demo_model_dir
from keras_bert_zoo.tasks.question_answering import QuestionAnsweringExample
from keras_bert_zoo.tasks.question_answering.reader import GoldAnswer
from keras_bert_zoo.text import BertTokenizer

WIKI_NAME = "enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"


@pytest.fixture(scope="module")
def vocab_path():
    return os.path.join(demo_model_dir(), "vocab.txt")


@pytest.fixture(scope="module")
def tokenizer(vocab_path):
    return BertTokenizer(vocab_path, lowercase=True)


@pytest.fixture(scope="module")
def reference_tokenizer(vocab_path):
    import tokenizers

    return tokenizers.BertWordPieceTokenizer(vocab_path, lowercase=True)


@pytest.fixture(scope="module")
def wiki_paragraphs():
    """Long lines of real wikitext (markup, punctuation, numbers), first articles only."""
    spec = importlib.util.find_spec("gensim")
    path = os.path.join(list(spec.submodule_search_locations)[0], "test", "test_data", WIKI_NAME)
    lines = []
    with bz2.open(path) as f:
        for _, element in ET.iterparse(f):
            if element.tag.rsplit("}", 1)[-1] == "text" and element.text:
                lines.extend(line for line in element.text.split("\n") if len(line) > 300)
            element.clear()
            if len(lines) >= 60:
                break
    return lines


# === The reference: google-research/bert's feature conversion, restated ===


def reference_tokens(reference_tokenizer, text):
    """(ids, char starts, char ends); an uncased token's end also covers the combining
    marks (Mn) right after it (documented behaviour of SquadPreprocessor)."""
    encoding = reference_tokenizer.encode(text, add_special_tokens=False)
    starts, ends = [], []
    for start, end in encoding.offsets:
        while end < len(text) and unicodedata.category(text[end]) == "Mn":
            end += 1
        starts.append(start)
        ends.append(end)
    return list(encoding.ids), starts, ends


def check_is_max_context(doc_spans, cur_span_index, position):
    best_score = None
    best_span_index = None
    for span_index, (span_start, span_length) in enumerate(doc_spans):
        end = span_start + span_length - 1
        if position < span_start or position > end:
            continue
        num_left_context = position - span_start
        num_right_context = end - position
        score = min(num_left_context, num_right_context) + 0.01 * span_length
        if best_score is None or score > best_score:
            best_score = score
            best_span_index = span_index
    return cur_span_index == best_span_index


def reference_features(reference_tokenizer, question, context, answer, settings):
    """Every window of one example as dicts of lists, as run_squad.py builds them."""
    seq_length, doc_stride, max_query_length = settings
    cls_id, sep_id = 101, 102
    query_ids = reference_tokenizer.encode(question, add_special_tokens=False).ids
    query_ids = query_ids[:max_query_length]
    doc_ids, doc_starts, doc_ends = reference_tokens(reference_tokenizer, context)
    max_tokens_for_doc = seq_length - len(query_ids) - 3
    doc_spans = []
    start_offset = 0
    while start_offset < len(doc_ids):
        length = min(len(doc_ids) - start_offset, max_tokens_for_doc)
        doc_spans.append((start_offset, length))
        if start_offset + length == len(doc_ids):
            break
        start_offset += min(length, doc_stride)
    tok_start = tok_end = None
    if answer is not None:
        char_start, char_end = answer
        inside = [
            i for i in range(len(doc_ids)) if doc_starts[i] < char_end and doc_ends[i] > char_start
        ]
        tok_start, tok_end = inside[0], inside[-1]
    windows = []
    for span_index, (span_start, span_length) in enumerate(doc_spans):
        tokens = [cls_id] + query_ids + [sep_id]
        segment_ids = [0] * len(tokens)
        char_starts = [-1] * len(tokens)
        char_ends = [-1] * len(tokens)
        max_context = [0] * len(tokens)
        for i in range(span_length):
            split_token_index = span_start + i
            tokens.append(doc_ids[split_token_index])
            segment_ids.append(1)
            char_starts.append(doc_starts[split_token_index])
            char_ends.append(doc_ends[split_token_index])
            max_context.append(int(check_is_max_context(doc_spans, span_index, split_token_index)))
        tokens.append(sep_id)
        segment_ids.append(1)
        char_starts.append(-1)
        char_ends.append(-1)
        max_context.append(0)
        input_mask = [1] * len(tokens)
        padding = seq_length - len(tokens)
        start_position = end_position = 0
        if tok_start is not None:
            doc_end = span_start + span_length - 1
            if tok_start >= span_start and tok_end <= doc_end:
                doc_offset = len(query_ids) + 2
                start_position = tok_start - span_start + doc_offset
                end_position = tok_end - span_start + doc_offset
        windows.append(
            {
                "input_word_ids": tokens + [0] * padding,
                "input_mask": input_mask + [0] * padding,
                "input_type_ids": segment_ids + [0] * padding,
                "token_char_start": char_starts + [-1] * padding,
                "token_char_end": char_ends + [-1] * padding,
                "token_is_max_context": max_context + [0] * padding,
                "start_positions": start_position,
                "end_positions": end_position,
            }
        )
    return windows


def make_task(settings=(384, 128, 64), **options):
    seq_length, doc_stride, max_query_length = settings
    return create_task(
        "extractive_qa",
        max_seq_length=seq_length,
        doc_stride=doc_stride,
        max_query_length=max_query_length,
        **options,
    )


def window_features(task, tokenizer, examples):
    # One preprocessor per (task, tokenizer): the task traces its featurizer once.
    preprocessors = task.__dict__.setdefault("_test_preprocessors", {})
    if id(tokenizer) not in preprocessors:
        preprocessors[id(tokenizer)] = task.make_preprocessor(tokenizer)
    preprocessor = preprocessors[id(tokenizer)]
    return list(task.features(examples, preprocessor, training=True).as_numpy_iterator())


@pytest.fixture(scope="module")
def default_task():
    """The paper's settings: 384 / 128 / 64."""
    return make_task()


def example(example_id, question, context, answer_text=None, occurrence=0):
    answers = ()
    if answer_text is not None:
        start = -1
        for _ in range(occurrence + 1):
            start = context.index(answer_text, start + 1)
        answers = (GoldAnswer(answer_text, start),)
    return QuestionAnsweringExample(example_id, question, context, answers)


@pytest.mark.slow
def test_windows_match_the_original_on_real_text(tokenizer, reference_tokenizer, wiki_paragraphs):
    rng = random.Random(0)
    settings = (96, 24, 12)
    contexts = list(wiki_paragraphs[:24])
    # Contexts of several hundred tokens, and one exactly filling a window.
    contexts.append(" ".join(wiki_paragraphs[24:34]))
    contexts.append(" ".join(["word"] * (96 - 3 - 3)))
    examples, answers = [], []
    for i, context in enumerate(contexts):
        question = " ".join(
            rng.sample(context.split(), min(len(context.split()), rng.randint(3, 20)))
        )
        _, starts, ends = reference_tokens(reference_tokenizer, context)
        if i % 5 == 4:
            answers.append(None)
            examples.append(QuestionAnsweringExample(f"q{i}", question, context))
            continue
        first = rng.randrange(len(starts))
        last = min(len(starts) - 1, first + rng.randint(0, 12))
        span = (starts[first], ends[last])
        answers.append(span)
        text = context[span[0] : span[1]]
        examples.append(
            QuestionAnsweringExample(f"q{i}", question, context, (GoldAnswer(text, span[0]),))
        )
    task = make_task(settings)
    got = window_features(task, tokenizer, examples)
    expected = []
    for index, (ex, span) in enumerate(zip(examples, answers, strict=True)):
        for window in reference_features(
            reference_tokenizer, ex.question, ex.context, span, settings
        ):
            expected.append({**window, "example_index": index})
    assert len(got) == len(expected)
    assert max(w["example_index"] for w in expected) == len(examples) - 1
    for number, (ours, reference) in enumerate(zip(got, expected, strict=True)):
        for key, value in reference.items():
            np.testing.assert_array_equal(ours[key], value, err_msg=f"window {number} {key}")
    # Several windows per long context, and answers outside a window point at [CLS].
    counts = np.bincount([w["example_index"] for w in expected])
    assert counts.max() >= 10
    assert sum(w["start_positions"] == 0 for w in expected) > len(examples)


def decode_gold(task, tokenizer, examples):
    """Features -> logits peaked at the gold positions of each window -> answers."""
    features = window_features(task, tokenizer, examples)
    seq_length = task.max_seq_length
    start_logits = np.full((len(features), seq_length), -10.0, np.float32)
    end_logits = np.full((len(features), seq_length), -10.0, np.float32)
    for row, window in enumerate(features):
        if window["start_positions"] > 0:
            start_logits[row, window["start_positions"]] = 10.0
            end_logits[row, window["end_positions"]] = 10.0
    meta = {key: np.stack([w[key] for w in features]) for key in task.feature_meta(features[0])}
    outputs = {"start_logits": start_logits, "end_logits": end_logits}
    return task.postprocess(outputs, meta, examples), features


def assert_round_trip(task, tokenizer, examples):
    answers, features = decode_gold(task, tokenizer, examples)
    for answer, ex in zip(answers, examples, strict=True):
        gold = ex.answers[0]
        assert answer.text == gold.text, (ex.example_id, answer.text, gold.text)
        assert (answer.start, answer.end) == (gold.answer_start, gold.answer_end)
        assert ex.context[answer.start : answer.end] == gold.text
    return features


@pytest.mark.slow
def test_round_trip_accents_cjk_emoji_whitespace(tokenizer, default_task):
    cases = [
        (
            "Où est né Zoë?",
            "Zoë Saldaña est née à Passaic.  Elle a vécu à Saint-Domingue.",
            "Zoë Saldaña",
        ),
        (
            "Where?",
            "The Cafe\u0301 de Flore (decomposed accent) is in Paris.",
            "Cafe\u0301 de Flore",
        ),
        ("Which city?", "北京大学位于北京市海淀区，是一所大学。", "北京市海淀区"),
        ("Which city mixed?", "The office moved to 東京 Tokyo in 1998.", "東京 Tokyo"),
        ("What emoji?", "She replied 😀 and then ❤️ before leaving.", "😀 and then ❤️"),
        ("Emoji alone?", "Signal: 🚀 launched.", "🚀"),
        (
            "Whose name?",
            "The   winner\t\twas  Ana\tMaría   López , of  Spain.",
            "Ana\tMaría   López",
        ),
        ("Tabs?", "line one\n\nline\ttwo   ends here", "line\ttwo   ends"),
        ("Accents upper?", "ÉCOLE NORMALE SUPÉRIEURE is in ÎLE-DE-FRANCE.", "ÎLE-DE-FRANCE"),
        ("Dash?", "Score: 3–1 (after extra time).", "3–1"),
    ]
    examples = [example(f"u{i}", q, c, a) for i, (q, c, a) in enumerate(cases)]
    assert_round_trip(default_task, tokenizer, examples)


def numbered_words(count):
    """Words that are one word piece each in the uncased vocabulary."""
    base = [
        "alpha",
        "bravo",
        "charlie",
        "delta",
        "echo",
        "golf",
        "hotel",
        "india",
        "window",
        "lima",
        "mike",
        "november",
        "oscar",
        "papa",
        "quebec",
        "romeo",
        "sierra",
        "tango",
    ]
    return [base[i % len(base)] for i in range(count)]


def test_round_trip_answer_straddling_a_window_boundary(tokenizer, default_task):
    question = "which word?"  # 3 tokens: windows hold 384 - 3 - 3 = 378 context tokens
    words = numbered_words(900)
    words[374:382] = ["the", "answer", "runs", "across", "the", "window", "edge", "here"]
    context = " ".join(words)
    answer = "answer runs across the window edge"
    ex = example("s", question, context, answer)
    features = assert_round_trip(default_task, tokenizer, [ex])
    # Window 0 holds context tokens 0..377 and the answer spans tokens 375..380: [CLS]
    # there; window 1 starts at token 128 (5 = [CLS] + 3 question tokens + [SEP]).
    assert [int(w["start_positions"]) for w in features[:2]] == [0, 375 - 128 + 5]
    assert int(features[1]["end_positions"]) == 380 - 128 + 5


def test_round_trip_question_longer_than_max_query_length(tokenizer, default_task):
    question = " ".join(numbered_words(100)) + "?"
    ex = example("long-q", question, "The answer is forty two, said the machine.", "forty two")
    features = assert_round_trip(default_task, tokenizer, [ex])
    expected_query = tokenizer.tokenize(tf.constant(question)).numpy()[:64]
    ids = features[0]["input_word_ids"]
    np.testing.assert_array_equal(ids[1:65], expected_query)
    assert ids[0] == 101 and ids[65] == 102
    assert features[0]["input_type_ids"][66] == 1 and features[0]["input_type_ids"][65] == 0


@pytest.mark.slow
def test_round_trip_context_much_longer_than_a_window(tokenizer, wiki_paragraphs, default_task):
    context = "\n".join(wiki_paragraphs[:30])  # thousands of tokens
    assert len(tokenizer.tokenize(tf.constant(context)).numpy()) > 5 * 384
    rng = random.Random(1)
    words = [w for w in context.split(" ") if w.isalpha() and len(w) > 3]
    examples = []
    for i in range(12):
        answer = rng.choice(words)
        occurrences = context.count(answer)
        ex = example(
            f"w{i}", f"find {answer}?", context, answer, occurrence=rng.randrange(occurrences)
        )
        # Whole words only: the answer must start and end on token boundaries.
        start, end = ex.answers[0].answer_start, ex.answers[0].answer_end
        if (start > 0 and context[start - 1].isalnum()) or (
            end < len(context) and context[end].isalnum()
        ):
            continue
        examples.append(ex)
    tail = context.rstrip().split(" ")[-1]
    examples.append(
        example("last", "last word?", context, tail, occurrence=context.count(tail) - 1)
    )
    features = assert_round_trip(default_task, tokenizer, examples)
    assert len(features) > 10 * len(examples)


def test_preprocessor_config_round_trip(tokenizer, tmp_path):
    from keras_bert_zoo.tasks.question_answering import SquadPreprocessor

    preprocessor = SquadPreprocessor(tokenizer, max_seq_length=32, doc_stride=5, max_query_length=6)
    # A config carries no vocabulary (it travels as an asset, as in keras-hub).
    preprocessor.tokenizer.save_assets(str(tmp_path))
    restored = SquadPreprocessor.from_config(preprocessor.get_config())
    restored.tokenizer.load_assets(str(tmp_path))
    assert (restored.max_seq_length, restored.doc_stride, restored.max_query_length) == (32, 5, 6)
    inputs = {
        "question": tf.constant(["who wrote the first program?"]),
        "context": tf.constant(["Ada Lovelace wrote it in 1843, long before computers existed."]),
    }
    for key, value in preprocessor(inputs).items():
        np.testing.assert_array_equal(restored(inputs)[key].numpy(), value.numpy(), err_msg=key)
    with pytest.raises(ValueError, match="max_seq_length=16 leaves no room"):
        SquadPreprocessor(tokenizer, max_seq_length=16, max_query_length=13)
