"""Multiple choice data: `MultipleChoiceExample`, the official SWAG CSV and JSON lines.

SWAG: context = `sent1`, choice i = `ending_i`, joined after `sent2` (the
`choice_prefix`; `startphrase` is `sent1 + " " + sent2`). JSON lines: one record
`{"context", "choices", "label", "id"}` per line. Malformed input raises `ValueError`
naming the file and line.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import os

from keras_bert_zoo.utils.errors import UserError

SWAG_NUM_CHOICES = 4
SWAG_ENDINGS = tuple(f"ending{i}" for i in range(SWAG_NUM_CHOICES))


@dataclasses.dataclass(frozen=True)
class MultipleChoiceExample:
    """One question with its candidate choices.

    Attributes:
        example_id: SWAG's `fold-ind`, the JSON record's `id`, or `{split}-{index}`.
        context: sentence A of every pair.
        choices: the candidates (sentence B without `choice_prefix`).
        label: the index of the right choice, or None when unlabelled.
        choice_prefix: text joined before every choice with a space (SWAG's `sent2`).
        source: `"path:line"` of the record.
    """

    example_id: str
    context: str
    choices: tuple[str, ...]
    label: int | None
    choice_prefix: str = ""
    source: str = ""


def read_swag_csv(path: str, split: str, encoding: str = "utf-8") -> list[MultipleChoiceExample]:
    """Examples of an official SWAG CSV (`train.csv`, `val.csv`, `test.csv`).

    Columns (by header name, any order; the leading unnamed index is ignored):
    `video-id, fold-ind, startphrase, sent1, sent2, gold-source, ending0..ending3,
    label`; the test file has no `label`.

    Raises:
        ValueError: naming the file and line, for a missing column, a missing or
            empty ending, or a label that is not 0-3.
    """
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path}: no such file")
    examples = []
    with open(path, encoding=encoding, newline="") as f:
        reader = csv.DictReader(f)
        header = reader.fieldnames or []
        missing = [name for name in ("sent1", "sent2", *SWAG_ENDINGS) if name not in header]
        if missing:
            raise UserError(f"{path}:1: SWAG header lacks {missing}; header is {header}")
        labelled = "label" in header
        for row in reader:
            line = reader.line_num
            where = f"{path}:{line}"
            for name in ("sent1", *SWAG_ENDINGS):
                if row.get(name) is None or not row[name].strip():
                    raise UserError(f"{where}: {name} is missing or empty")
            if row.get("sent2") is None:
                raise UserError(f"{where}: sent2 is missing")
            label = None
            if labelled:
                label = parse_label(row.get("label"), SWAG_NUM_CHOICES, where)
            example_id = (row.get("fold-ind") or "").strip() or str(len(examples))
            examples.append(
                MultipleChoiceExample(
                    example_id=example_id,
                    context=row["sent1"],
                    choices=tuple(row[name] for name in SWAG_ENDINGS),
                    label=label,
                    choice_prefix=row["sent2"],
                    source=where,
                )
            )
    return examples


def parse_label(value, num_choices: int, where: str) -> int:
    """A choice index `0..num_choices - 1` from a CSV field, a JSON value or a number.

    Raises:
        ValueError: naming `where`, for anything else (booleans included).
    """
    if isinstance(value, bool):
        value = None
    try:
        label = int(value.strip()) if isinstance(value, str) else int(value)
    except (TypeError, ValueError):
        raise UserError(
            f"{where}: label {value!r} is not a choice index 0-{num_choices - 1}"
        ) from None
    if not 0 <= label < num_choices:
        raise UserError(f"{where}: label {label} is outside 0-{num_choices - 1}")
    return label


def read_choice_jsonl(
    path: str, split: str, num_choices: int | None = None, encoding: str = "utf-8"
) -> list[MultipleChoiceExample]:
    """Examples of a JSON-lines file: `{"context": str, "choices": [str, ...], "label":
    int, "id": optional}` per line (`label` absent in every line of an unlabelled file).

    Args:
        num_choices: choices every record must have; None takes the first record's.

    Raises:
        ValueError: naming the file and line, for invalid JSON, a missing field, a
            wrong number of choices, an empty choice, a label outside 0..N-1, or a
            label on some lines only.
    """
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path}: no such file")
    examples = []
    labelled = None
    with open(path, encoding=encoding) as f:
        for line_number, line in enumerate(f, start=1):
            if not line.strip():
                continue
            where = f"{path}:{line_number}"
            try:
                record = json.loads(line)
            except json.JSONDecodeError as e:
                raise UserError(f"{where}: invalid JSON ({e.msg})") from None
            if not isinstance(record, dict):
                raise UserError(f"{where}: expected a JSON object, got {type(record).__name__}")
            context = record.get("context")
            if not isinstance(context, str):
                raise UserError(f"{where}: 'context' must be a string, got {context!r}")
            choices = record.get("choices")
            if not isinstance(choices, list) or not all(isinstance(c, str) for c in choices):
                raise UserError(f"{where}: 'choices' must be a list of strings")
            if num_choices is None:
                num_choices = len(choices)
                if num_choices < 2:
                    raise UserError(f"{where}: {num_choices} choice(s); need at least 2")
            if len(choices) != num_choices:
                raise UserError(
                    f"{where}: {len(choices)} choices where the data have {num_choices}"
                )
            for index, choice in enumerate(choices):
                if not choice.strip():
                    raise UserError(f"{where}: choice {index} is empty")
            has_label = record.get("label") is not None
            if labelled is None:
                labelled = has_label
            elif has_label != labelled:
                raise UserError(
                    f"{where}: 'label' is {'present' if has_label else 'missing'} here but "
                    f"{'present' if labelled else 'missing'} on the file's first record"
                )
            label = parse_label(record["label"], num_choices, where) if has_label else None
            example_id = record.get("id")
            examples.append(
                MultipleChoiceExample(
                    example_id=f"{split}-{len(examples)}"
                    if example_id is None
                    else str(example_id),
                    context=context,
                    choices=tuple(choices),
                    label=label,
                    source=where,
                )
            )
    return examples
