"""Readers for SQuAD-format question answering data: the official JSON and tensorflow-datasets.

The official layout is
`{"version", "data": [{"title", "paragraphs": [{"context", "qas": [{"id", "question",
"answers": [{"text", "answer_start"}], "is_impossible", "plausible_answers"}]}]}]}`
with `answer_start` a character (code point) offset into `context`.

Malformed input raises `ValueError` naming the file, the JSON path
(`data[3].paragraphs[0].qas[7]`) and the question id. Where google-research/bert's
`run_squad.py` skips a training question (its answer text is not found at
`answer_start`, judged on whitespace-separated words), the reader skips it too, logs
the original's line, and counts it.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Iterable, Mapping
from typing import Any

from absl import logging

from keras_bert_zoo.tasks._shared import as_text, prepared_tfds_builder
from keras_bert_zoo.utils.errors import UserError


@dataclasses.dataclass(frozen=True)
class GoldAnswer:
    """A gold answer: its text and character offset into the context."""

    text: str
    answer_start: int

    @property
    def answer_end(self) -> int:
        """Character offset one past the answer's last character."""
        return self.answer_start + len(self.text)


@dataclasses.dataclass(frozen=True)
class QuestionAnsweringExample:
    """One question about one context.

    Attributes:
        example_id: the question id (`qas[].id`), unique in the data set.
        question: the question text.
        context: the paragraph, exactly as in the data (answers are substrings of it).
        answers: gold answers; training uses the first. Empty for unanswerable or
            unlabelled questions.
        is_impossible: SQuAD v2.0 unanswerable question.
        title: the article title.
        plausible_answers: v2.0's plausible (but wrong) answers of unanswerable questions.
        has_gold: False for unlabelled data (no `answers` field).
    """

    example_id: str
    question: str
    context: str
    answers: tuple[GoldAnswer, ...] = ()
    is_impossible: bool = False
    title: str = ""
    plausible_answers: tuple[GoldAnswer, ...] = ()
    has_gold: bool = True

    @property
    def answer_span(self) -> tuple[int, int]:
        """Character span `[start, end)` of the training answer, `(-1, -1)` for none."""
        if self.is_impossible or not self.answers:
            return -1, -1
        answer = self.answers[0]
        return answer.answer_start, answer.answer_end

    @property
    def gold_texts(self) -> list[str]:
        return [answer.text for answer in self.answers]


# === The original's skip rule ===


def _is_bert_whitespace(char: str) -> bool:
    # run_squad.py's is_whitespace (narrow no-break space included).
    return char in " \t\r\n" or ord(char) == 0x202F


def answer_found_like_original(context: str, answer: GoldAnswer) -> bool:
    """google-research/bert's training check: the whitespace-separated words spanning
    `answer_start .. answer_end - 1`, joined by single spaces, contain the answer text
    with its whitespace collapsed the same way.
    """
    char_to_word = []
    words: list[str] = []
    previous_is_whitespace = True
    for char in context:
        if _is_bert_whitespace(char):
            previous_is_whitespace = True
        else:
            if previous_is_whitespace:
                words.append(char)
            else:
                words[-1] += char
            previous_is_whitespace = False
        char_to_word.append(len(words) - 1)
    last = answer.answer_start + len(answer.text) - 1
    start_word = char_to_word[answer.answer_start]
    end_word = char_to_word[max(last, answer.answer_start)]
    actual = " ".join(words[max(start_word, 0) : end_word + 1])
    cleaned = " ".join(answer.text.split())
    return actual.find(cleaned) != -1


# === Validation shared by both sources ===


class _Builder:
    """Turns raw question records into examples, checking them as it goes."""

    def __init__(self, source: str, *, version_2_with_negative: bool, training: bool):
        self.source = source
        self.version_2_with_negative = version_2_with_negative
        self.training = training
        self.examples: list[QuestionAnsweringExample] = []
        self.where_by_id: dict[str, str] = {}
        self.num_skipped = 0

    def fail(self, where: str, message: str, question_id: str | None = None):
        named = f" (question id {question_id!r})" if question_id is not None else ""
        raise UserError(f"{self.source}: {where}{named}: {message}")

    def answers(self, raw, where, question_id, context, field) -> tuple[GoldAnswer, ...]:
        if not isinstance(raw, list):
            self.fail(where, f"`{field}` must be a list, got {type(raw).__name__}", question_id)
        answers = []
        for i, item in enumerate(raw):
            item_where = f"{where}.{field}[{i}]"
            if not isinstance(item, Mapping) or "text" not in item or "answer_start" not in item:
                self.fail(item_where, "an answer needs `text` and `answer_start`", question_id)
            text, start = item["text"], item["answer_start"]
            if not isinstance(text, str):
                self.fail(item_where, "`text` must be a string", question_id)
            if isinstance(start, bool) or not isinstance(start, int):
                self.fail(
                    item_where, f"`answer_start` must be an integer, got {start!r}", question_id
                )
            if start < 0 or start + len(text) > len(context):
                self.fail(
                    item_where,
                    f"answer_start {start} with answer {text!r} ({len(text)} characters) is "
                    f"out of range for a context of {len(context)} characters",
                    question_id,
                )
            if not text:
                self.fail(item_where, "empty answer text", question_id)
            answers.append(GoldAnswer(text, start))
        return tuple(answers)

    def add(self, qa: Mapping[str, Any], context: Any, title: str, where: str) -> None:
        if not isinstance(qa, Mapping):
            self.fail(where, f"a question must be an object, got {type(qa).__name__}")
        question_id = qa.get("id")
        if question_id is None or (isinstance(question_id, str) and not question_id.strip()):
            question = qa.get("question")
            self.fail(where, f"question has no id (question: {question!r})")
        if not isinstance(question_id, str):
            self.fail(where, f"question id must be a string, got {question_id!r}")
        if question_id in self.where_by_id:
            self.fail(
                where,
                f"duplicate question id, first seen at {self.where_by_id[question_id]}",
                question_id,
            )
        self.where_by_id[question_id] = where
        question = qa.get("question")
        if not isinstance(question, str) or not question.strip():
            self.fail(where, f"missing or empty `question`: {question!r}", question_id)
        if not isinstance(context, str):
            self.fail(
                where, f"`context` must be a string, got {type(context).__name__}", question_id
            )
        if not context.strip():
            self.fail(where, "empty context", question_id)
        try:
            context.encode("utf-8")
            question.encode("utf-8")
        except UnicodeEncodeError as error:
            self.fail(where, f"text is not valid Unicode ({error})", question_id)
        is_impossible = qa.get("is_impossible", False)
        if not isinstance(is_impossible, bool):
            self.fail(
                where, f"`is_impossible` must be true or false, got {is_impossible!r}", question_id
            )
        if is_impossible and not self.version_2_with_negative:
            self.fail(
                where,
                "unanswerable question (is_impossible) in a task without no-answer "
                "support; use squad_v2.0 (or version_2_with_negative=True)",
                question_id,
            )
        has_gold = "answers" in qa
        answers = self.answers(qa.get("answers", []), where, question_id, context, "answers")
        plausible = self.answers(
            qa.get("plausible_answers", []), where, question_id, context, "plausible_answers"
        )
        if has_gold and not answers and not is_impossible:
            if self.version_2_with_negative:
                self.fail(where, "no answers and is_impossible is not true", question_id)
            self.fail(where, "no answers (SQuAD v1.1 questions all have one)", question_id)
        if self.training:
            if not has_gold:
                self.fail(where, "training questions need `answers`", question_id)
            if not is_impossible and not answer_found_like_original(context, answers[0]):
                words = context[answers[0].answer_start : answers[0].answer_end]
                logging.warning(
                    "Could not find answer: %r vs. %r (question %s, %s)",
                    words,
                    answers[0].text,
                    question_id,
                    where,
                )
                self.num_skipped += 1
                return
        self.examples.append(
            QuestionAnsweringExample(
                example_id=question_id,
                question=question,
                context=context,
                answers=answers if not is_impossible else (),
                is_impossible=is_impossible,
                title=title,
                plausible_answers=plausible,
                has_gold=has_gold,
            )
        )


def _log_skips(builder: _Builder) -> None:
    if builder.num_skipped:
        logging.warning(
            "%s: skipped %d training question(s) whose answer text is not at answer_start",
            builder.source,
            builder.num_skipped,
        )


# === Official JSON ===


def read_squad_json(
    path: str,
    *,
    version_2_with_negative: bool,
    training: bool,
    encoding: str = "utf-8",
    expected_version: str | None = None,
) -> tuple[list[QuestionAnsweringExample], int]:
    """Reads a SQuAD-format JSON file.

    Args:
        path: the file (`train-v1.1.json`, `dev-v2.0.json`, ...).
        version_2_with_negative: allow unanswerable questions (SQuAD v2.0).
        training: apply the original's training checks (one answer needed; questions
            whose answer is not found at `answer_start` are skipped and counted).
        encoding: the file's text encoding.
        expected_version: the `version` field the task expects; another value logs a
            warning, as the official evaluation scripts do.

    Returns:
        (examples in file order, number of skipped training questions).
    """
    if not os.path.isfile(path):
        raise FileNotFoundError(f"SQuAD file not found: {path}")
    try:
        with open(path, encoding=encoding) as f:
            data = json.load(f)
    except json.JSONDecodeError as error:
        raise UserError(
            f"{path}: not valid JSON (line {error.lineno}, column {error.colno}): {error.msg}"
        ) from None
    except UnicodeDecodeError as error:
        raise UserError(
            f"{path}: not valid {encoding} text ({error}); pass --encoding with the file's "
            "encoding (for example --encoding=latin-1)"
        ) from None
    builder = _Builder(path, version_2_with_negative=version_2_with_negative, training=training)
    if not isinstance(data, Mapping) or not isinstance(data.get("data"), list):
        builder.fail("top level", 'expected an object with a "data" list of articles')
    version = data.get("version")
    if expected_version is not None and version is not None and version != expected_version:
        logging.warning("%s: version %r, expected %r", path, version, expected_version)
    for a, article in enumerate(data["data"]):
        where = f"data[{a}]"
        if not isinstance(article, Mapping) or not isinstance(article.get("paragraphs"), list):
            builder.fail(where, 'an article must be an object with a "paragraphs" list')
        title = article.get("title", "")
        for p, paragraph in enumerate(article["paragraphs"]):
            paragraph_where = f"{where}.paragraphs[{p}]"
            if not isinstance(paragraph, Mapping) or not isinstance(paragraph.get("qas"), list):
                builder.fail(paragraph_where, 'a paragraph must be an object with a "qas" list')
            if "context" not in paragraph:
                builder.fail(paragraph_where, "paragraph has no `context`")
            for q, qa in enumerate(paragraph["qas"]):
                builder.add(qa, paragraph["context"], str(title), f"{paragraph_where}.qas[{q}]")
    _log_skips(builder)
    return builder.examples, builder.num_skipped


# === tensorflow-datasets ===


def _tfds_answers(record: Mapping[str, Any], field: str) -> list[dict[str, Any]]:
    raw = record.get(field)
    if raw is None:
        return []
    return [
        {"text": as_text(text), "answer_start": int(start)}
        for text, start in zip(raw["text"], raw["answer_start"], strict=True)
    ]


def tfds_records_to_examples(
    records: Iterable[Mapping[str, Any]],
    source: str,
    *,
    version_2_with_negative: bool,
    training: bool,
) -> tuple[list[QuestionAnsweringExample], int]:
    """Examples from tensorflow-datasets `squad` records (numpy values), checked as JSON is."""
    builder = _Builder(source, version_2_with_negative=version_2_with_negative, training=training)
    for i, record in enumerate(records):
        qa = {
            "id": as_text(record["id"]),
            "question": as_text(record["question"]),
            "answers": _tfds_answers(record, "answers"),
            "plausible_answers": _tfds_answers(record, "plausible_answers"),
        }
        if "is_impossible" in record:
            qa["is_impossible"] = bool(record["is_impossible"])
        builder.add(
            qa, as_text(record["context"]), as_text(record.get("title", b"")), f"record {i}"
        )
    _log_skips(builder)
    return builder.examples, builder.num_skipped


def read_squad_tfds(
    name: str,
    split: str,
    *,
    data_dir: str | None,
    version_2_with_negative: bool,
    training: bool,
) -> tuple[list[QuestionAnsweringExample], int]:
    """Reads a prepared tensorflow-datasets SQuAD (`squad/v1.1`, `squad/v2.0`).

    Nothing is downloaded: an unprepared data set raises `FileNotFoundError` saying so.
    """
    import tensorflow_datasets as tfds

    builder = prepared_tfds_builder(
        name,
        data_dir,
        lambda builder: (
            f"tensorflow-datasets {name!r} is not prepared in {builder.data_dir_root!r}. "
            f"Prepare it (`tfds build {name}`) or pass data_dir with the official JSON files."
        ),
    )
    dataset = builder.as_dataset(split=split, shuffle_files=False)
    return tfds_records_to_examples(
        tfds.as_numpy(dataset),
        f"tfds:{name}[{split}]",
        version_2_with_negative=version_2_with_negative,
        training=training,
    )
