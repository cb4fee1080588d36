"""`SentenceExample`: one example of a sentence or sentence-pair task."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class SentenceExample:
    """One example of a sentence or sentence-pair task.

    Attributes:
        example_id: unique within its split (`"dev-17"`).
        texts: the texts, in the task's `text_fields` order.
        label: the gold label name, the gold score (regression), the tuple of gold
            label names (multi-label, in `label_names` order), or None (test sets).
        index: the id the submission file uses (the file's `index`/`id` column, or the
            row number when the file has none).
        source: where it came from (`"path:line"`), for error messages.
    """

    example_id: str
    texts: tuple[str, ...]
    label: str | float | tuple[str, ...] | None = None
    index: str = ""
    source: str = ""
