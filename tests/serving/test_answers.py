"""The loaded SavedModel answers what the Python path answers, per task family.

References: the task's own host-side path (`tasks.predict`: fixed-length features,
`model.predict`, numpy post-processing) for the sentence tasks and SQuAD, and numpy
restatements (softmax, top-k, joining word pieces) of the masked LM and encoder
answers over `model.predict` on ids packed outside the graph.
"""

import numpy as np
import pytest
import tensorflow as tf

from keras_bert_zoo import tasks
from keras_bert_zoo.tasks.question_answering import QuestionAnsweringExample
from keras_bert_zoo.text import BertPreprocessor

PAIRS = [
    ("the cat sat on the mat .", "the dog ran fast"),
    ("a very good film", "surely the same movie"),
    ("", "never"),
    ("big red car , small blue house !", "maybe a river ?"),
    (" ".join(["the old man read a book"] * 20), "no"),
]


def _strings(values):
    return tf.constant([value.encode("utf-8") for value in values])


@pytest.mark.slow
def test_sentence_classification_answers_and_example_api(sentence_pair_export, loaded):
    export = sentence_pair_export
    task, saved = export.task, loaded(export)
    examples = task.examples_from_texts(PAIRS)
    reference = tasks.predict(task, export.model, examples, export.preprocessor)
    served = saved.signatures["serving_default"](
        premise=_strings([p for p, _ in PAIRS]), hypothesis=_strings([h for _, h in PAIRS])
    )
    labels = [label.decode() for label in served["label"].numpy()]
    assert labels == [answer.label for answer in reference]
    expected = np.array([[a.probabilities[name] for name in task.label_names] for a in reference])
    np.testing.assert_allclose(served["probabilities"].numpy(), expected, atol=1e-5)
    assert np.ptp(expected, axis=0).max() > 1e-3  # the inputs get different answers
    np.testing.assert_array_equal(
        served["label_id"].numpy(), [task.label_names.index(label) for label in labels]
    )

    # TF Serving's Classify API: serialized tf.Examples with the text fields as features.
    serialized = [
        tf.train.Example(
            features=tf.train.Features(
                feature={
                    "premise": tf.train.Feature(bytes_list=tf.train.BytesList(value=[p.encode()])),
                    "hypothesis": tf.train.Feature(
                        bytes_list=tf.train.BytesList(value=[h.encode()])
                    ),
                }
            )
        ).SerializeToString()
        for p, h in PAIRS
    ]
    classified = saved.signatures["serve_examples"](inputs=tf.constant(serialized))
    classes = classified["classes"].numpy().astype(str)
    assert (classes == np.array(task.label_names)).all()
    np.testing.assert_allclose(classified["scores"].numpy(), expected, atol=1e-5)
    # A missing feature fails the request and names the field.
    partial = tf.train.Example(
        features=tf.train.Features(
            feature={"premise": tf.train.Feature(bytes_list=tf.train.BytesList(value=[b"x"]))}
        )
    ).SerializeToString()
    with pytest.raises(tf.errors.InvalidArgumentError, match="hypothesis"):
        saved.signatures["serve_examples"](inputs=tf.constant([partial]))

    # serve_ids: the raw logits of the model for ids packed outside the graph.
    ids = export.preprocessor(
        (tf.constant([p for p, _ in PAIRS]), tf.constant([h for _, h in PAIRS]))
    )
    logits = saved.signatures["serve_ids"](**ids)["logits"].numpy()
    np.testing.assert_allclose(logits, export.model.predict(ids, verbose=0), atol=1e-5)


@pytest.mark.slow
def test_regression_answers_and_example_api(regression_export, loaded):
    export = regression_export
    task, saved = export.task, loaded(export)
    examples = task.examples_from_texts(PAIRS)
    reference = [
        answer.score for answer in tasks.predict(task, export.model, examples, export.preprocessor)
    ]
    served = saved.signatures["serving_default"](
        sentence1=_strings([p for p, _ in PAIRS]), sentence2=_strings([h for _, h in PAIRS])
    )
    np.testing.assert_allclose(served["score"].numpy(), reference, atol=1e-5)
    serialized = [
        tf.train.Example(
            features=tf.train.Features(
                feature={
                    "sentence1": tf.train.Feature(
                        bytes_list=tf.train.BytesList(value=[p.encode()])
                    ),
                    "sentence2": tf.train.Feature(
                        bytes_list=tf.train.BytesList(value=[h.encode()])
                    ),
                }
            )
        ).SerializeToString()
        for p, h in PAIRS
    ]
    regressed = saved.signatures["serve_examples"](inputs=tf.constant(serialized))["outputs"]
    assert regressed.shape == (len(PAIRS),) and regressed.dtype == tf.float32
    np.testing.assert_allclose(regressed.numpy(), reference, atol=1e-5)


CONTEXTS = [
    "The Normans were the people who in the 10th and 11th centuries gave their name to "
    "Normandy, a region in France. They were descended from Norse raiders and pirates "
    "from Denmark, Iceland and Norway who, under their leader Rollo, agreed to swear "
    "fealty to King Charles III of West Francia.",
    "Zürich's Café Odéon opened in 1911; 中文 visitors and émigrés met there.",
    "",
    "Short context.",
]
QUESTIONS = ["Who gave their name to Normandy?", "When did the café open?", "Anything?", ""]


@pytest.mark.slow
def test_squad_answers_match_the_host_decoder(squad_export, loaded):
    export = squad_export
    task, saved = export.task, loaded(export)
    examples = [
        QuestionAnsweringExample(example_id=str(i), question=q, context=c, has_gold=False)
        for i, (q, c) in enumerate(zip(QUESTIONS, CONTEXTS, strict=True))
    ]
    reference = tasks.predict(task, export.model, examples, export.preprocessor)
    served = saved.signatures["serving_default"](
        question=_strings(QUESTIONS), context=_strings(CONTEXTS)
    )
    served = {key: value.numpy() for key, value in served.items()}
    for row, (answer, context) in enumerate(zip(reference, CONTEXTS, strict=True)):
        text = served["answer_text"][row].decode("utf-8")
        assert text == answer.text
        assert (served["answer_start"][row], served["answer_end"][row]) == (
            answer.start,
            answer.end,
        )
        if text:
            assert context[answer.start : answer.end] == text  # character offsets
        assert served["best_text"][row].decode("utf-8") == answer.best_text
        assert served["answer_score"][row] == pytest.approx(answer.best_score, abs=1e-4)
        assert served["null_score_diff"][row] == pytest.approx(answer.null_score_diff, abs=1e-4)
    # The long context was windowed: its best span may come from a later window.
    assert (
        len(
            export.preprocessor(
                {"question": tf.constant(QUESTIONS[:1]), "context": tf.constant(CONTEXTS[:1])}
            )["example_index"]
        )
        > 1
    )
    assert any(served["best_text"][row] for row in range(len(CONTEXTS)))
    # serve_ids: the raw start/end logits of the model for the given window ids.
    windows = export.preprocessor(
        {"question": tf.constant(QUESTIONS), "context": tf.constant(CONTEXTS)}
    )
    ids = {name: windows[name] for name in ("input_word_ids", "input_mask", "input_type_ids")}
    logits = saved.signatures["serve_ids"](**ids)
    expected = export.model.predict(ids, verbose=0)
    for key in ("start_logits", "end_logits"):
        np.testing.assert_allclose(logits[key].numpy(), expected[key], atol=1e-5)


MASKED = [
    "Paris is the capital of [MASK].",
    "The [MASK] sat on the [MASK] , then [MASK] away.",
    "no mask here",
    "[MASK]",
    "",
    "a long text " * 30 + "[MASK] at the end is cut off",
]


def _masked_ids(tokenizer, text, sequence_length):
    """Word ids of `[CLS] text [SEP]` with the literal [MASK]s as the mask token,
    built in Python from the tokenizer's ids of each part."""
    ids = []
    for index, part in enumerate(text.split("[MASK]")):
        if index:
            ids.append(tokenizer.mask_token_id)
        ids.extend(tokenizer(tf.constant([part])).to_list()[0])
    ids = ids[: sequence_length - 2]
    return [tokenizer.cls_token_id, *ids, tokenizer.sep_token_id]


@pytest.mark.slow
def test_masked_lm_fill_ins_match_a_numpy_top_k(masked_lm_export, loaded):
    export = masked_lm_export
    tokenizer, saved, length = export.tokenizer, loaded(export), export.task.max_seq_length
    served = saved.signatures["serving_default"](sentence=_strings(MASKED))
    served = {key: value.numpy() for key, value in served.items()}
    vocabulary = np.array(tokenizer.get_vocabulary())
    rows = [_masked_ids(tokenizer, text, length) for text in MASKED]
    positions = [
        [i for i, token in enumerate(row) if token == tokenizer.mask_token_id] for row in rows
    ]
    assert [len(p) for p in positions] == [1, 3, 0, 1, 0, 0]
    most = max(len(p) for p in positions)
    word_ids = np.zeros((len(rows), length), np.int32)
    mask = np.zeros_like(word_ids)
    for i, row in enumerate(rows):
        word_ids[i, : len(row)] = row
        mask[i, : len(row)] = 1
    padded_positions = np.array([p + [0] * (most - len(p)) for p in positions], np.int32)
    logits = export.model.predict(
        {
            "input_word_ids": word_ids,
            "input_mask": mask,
            "input_type_ids": np.zeros_like(word_ids),
            "masked_lm_positions": padded_positions,
        },
        verbose=0,
    )["masked_lm_logits"].astype(np.float64)
    probabilities = np.exp(logits - logits.max(-1, keepdims=True))
    probabilities /= probabilities.sum(-1, keepdims=True)
    top_k = export.task.top_k
    np.testing.assert_array_equal(served["mask_count"], [len(p) for p in positions])
    for i, row_positions in enumerate(positions):
        count = len(row_positions)
        np.testing.assert_array_equal(served["mask_positions"][i, :count], row_positions)
        assert (served["mask_positions"][i, count:] == -1).all()
        best = np.argsort(-probabilities[i], axis=-1, kind="stable")[:, :top_k]
        for m in range(count):
            np.testing.assert_array_equal(served["fill_in_ids"][i, m], best[m])
            tokens = [token.decode("utf-8") for token in served["fill_in_tokens"][i, m]]
            assert tokens == vocabulary[best[m]].tolist()
            np.testing.assert_allclose(
                served["fill_in_probabilities"][i, m], probabilities[i, m, best[m]], atol=1e-6
            )
        assert (served["fill_in_ids"][i, count:] == -1).all()
        assert (served["fill_in_tokens"][i, count:] == b"").all()
        filled = list(rows[i])
        for m, position in enumerate(row_positions):
            filled[position] = best[m, 0]
        words = [vocabulary[t] for t in filled[1:-1]]
        assert served["filled_text"][i].decode("utf-8") == " ".join(words).replace(" ##", "")


def test_encoder_outputs_match_the_fixed_length_model(encoder_export, loaded):
    export = encoder_export
    texts = [t for t in MASKED] + ["Crème brûlée 中文"]
    served = loaded(export).signatures["serving_default"](sentence=_strings(texts))
    fixed = BertPreprocessor(export.tokenizer, sequence_length=export.task.max_seq_length)
    ids = fixed(tf.constant(texts))
    expected = export.model.predict(ids, verbose=0)
    mask = served["input_mask"].numpy()
    length = mask.shape[1]
    assert length == int(ids["input_mask"].numpy().sum(1).max())  # padded to the longest
    np.testing.assert_array_equal(mask, ids["input_mask"].numpy()[:, :length])
    np.testing.assert_allclose(
        served["pooled_output"].numpy(), expected["pooled_output"], atol=1e-5
    )
    real = mask.astype(bool)
    np.testing.assert_allclose(
        served["sequence_output"].numpy()[real],
        expected["sequence_output"][:, :length][real],
        atol=1e-5,
    )


SENTENCES = [
    "Ada Lovelace met Charles Babbage in London",
    "the weather in Zürich was cold",
    "",
    " ".join(["John Smith visited Paris and Berlin"] * 6),  # many windows of 16 pieces
]


@pytest.mark.slow
def test_tagging_answers_match_postprocess(tagging_export, loaded):
    from keras_bert_zoo.tasks.tagging import TaggedSentence

    export = tagging_export
    task = export.task
    examples = [
        TaggedSentence(example_id=str(i), words=tuple(text.split()), tags=None)
        for i, text in enumerate(SENTENCES)
    ]
    reference = tasks.predict(task, export.model, examples, export.preprocessor)
    served = loaded(export).signatures["serving_default"](sentence=_strings(SENTENCES))
    served = {key: value.numpy() for key, value in served.items()}
    for row, (example, tags) in enumerate(zip(examples, reference, strict=True)):
        count = int(served["word_count"][row])
        assert count == len(example.words)
        words = [w.decode() for w in served["words"][row, :count]]
        assert words == list(example.words)
        assert [t.decode() for t in served["word_tags"][row, :count]] == list(tags)
        # Entities: spans of the sentence, by character offsets.
        for e in range(int(served["entity_count"][row])):
            start, end = served["entity_start"][row, e], served["entity_end"][row, e]
            assert SENTENCES[row][start:end] == served["entity_text"][row, e].decode()
            assert served["entity_type"][row, e].decode() in {"PER", "LOC", "ORG", "MISC"}
    assert served["entity_count"].sum() > 0
    # serve_ids: the token classifier's raw logits for the given window ids.
    windows = export.preprocessor(tf.ragged.constant([list(e.words) for e in examples]))
    ids = {name: windows[name] for name in ("input_word_ids", "input_mask", "input_type_ids")}
    logits = loaded(export).signatures["serve_ids"](**ids)["logits"].numpy()
    np.testing.assert_allclose(logits, export.model.predict(ids, verbose=0), atol=1e-5)


@pytest.mark.slow
def test_multiple_choice_answers_match_postprocess(choice_export, loaded):
    from keras_bert_zoo.tasks.multiple_choice import MultipleChoiceExample

    export = choice_export
    rows = [
        ("the man sat on the mat", ("and read a book", "the car ran fast", "")),
        ("", ("a", "b", "c")),
        ("a very old red house " * 10, ("surely same", "maybe other", "never")),
    ]
    examples = [
        MultipleChoiceExample(example_id=str(i), context=c, choices=choices, label=None)
        for i, (c, choices) in enumerate(rows)
    ]
    reference = tasks.predict(export.task, export.model, examples, export.preprocessor)
    inputs = {"context": _strings([c for c, _ in rows])}
    for index in range(3):
        inputs[f"ending{index}"] = _strings([choices[index] for _, choices in rows])
    served = loaded(export).signatures["serving_default"](**inputs)
    np.testing.assert_array_equal(served["label"].numpy(), [a.label for a in reference])
    np.testing.assert_allclose(served["scores"].numpy(), [a.scores for a in reference], atol=1e-5)
    assert served["scores"].shape == (3, 3)
