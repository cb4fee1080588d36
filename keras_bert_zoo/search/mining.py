"""Hard negatives: for each (anchor, positive) pair, the nearest texts that are not its
positive, for a second round of in-batch-negatives training.

In-batch negatives are mostly easy (random texts of the batch); a model learns more
from negatives it ranks near the anchor. The candidates are the training file's
positives (or a given corpus), embedded with the model of the first round; each
anchor's exact search over them (`tasks.sentence_embedding.metrics.exact_search`)
gives, best first, its candidates, of which are skipped:

- the anchor's positives (every positive the file gives that anchor) and any candidate
  whose text is the anchor's or a positive's (a repeated text is no negative);
- `skip_top`: the first `skip_top` of the remaining ranking (sentence-transformers'
  `range_min`): the nearest are often unlabelled positives;
- `margin`: a candidate scoring more than `positive's score - margin` (its
  `absolute_margin`): as close to the anchor as the positive, likely a false negative;
- `max_score`: a candidate scoring above it.

The next `num_negatives` are the row's negatives, written as columns `negative_1` ..
`negative_k` beside `anchor` and `positive` (what `sentence_embedding`'s reader takes
as hard negatives). A row with fewer candidates left is dropped and counted.

Example:

```python
from keras_bert_zoo.search.mining import MiningSettings, mine_hard_negatives

negatives = mine_hard_negatives(
    anchor_vectors, candidate_vectors, positive_scores, excluded, MiningSettings(3)
)
```
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import logging
import os
from collections.abc import Sequence

import numpy as np

from keras_bert_zoo.search.corpus import CorpusFileError, read_rows
from keras_bert_zoo.tasks.sentence_embedding.metrics import exact_search, paired_cosines
from keras_bert_zoo.utils.atomic import atomic_open
from keras_bert_zoo.utils.errors import UserError

logger = logging.getLogger(__name__)

ANCHOR, POSITIVE, NEGATIVE = "anchor", "positive", "negative"
# Candidates searched a row beyond the ones it must skip, before widening.
_EXTRA_DEPTH = 16


@dataclasses.dataclass(frozen=True)
class MiningSettings:
    """What a row's negatives are (see the module docstring).

    Attributes:
        num_negatives: negatives a row.
        margin: skip a candidate scoring above the positive's score minus this (None:
            no margin).
        max_score: skip a candidate scoring above this cosine (None: no limit).
        skip_top: skip this many of the nearest non-positive candidates.
    """

    num_negatives: int = 1
    margin: float | None = None
    max_score: float | None = None
    skip_top: int = 0

    def __post_init__(self):
        if self.num_negatives < 1:
            raise UserError(f"--num_negatives={self.num_negatives}: must be >= 1")
        if self.skip_top < 0:
            raise UserError(f"--skip_top={self.skip_top}: must be >= 0")
        if self.margin is not None and self.margin < 0:
            raise UserError(f"--margin={self.margin}: must be >= 0")


@dataclasses.dataclass(frozen=True)
class PairsFile:
    """A training file's (anchor, positive) rows.

    Attributes:
        anchors, positives: the texts, row by row.
        lines: each row's line in the file.
        path: the file.
    """

    anchors: tuple[str, ...]
    positives: tuple[str, ...]
    lines: tuple[int, ...]
    path: str


def read_pairs(
    path: str,
    *,
    anchor_column: str = ANCHOR,
    positive_column: str = POSITIVE,
    file_format: str = "auto",
) -> PairsFile:
    """The (anchor, positive) rows of a JSONL, TSV or CSV file (other columns not read).

    Raises:
        FileNotFoundError, CorpusFileError: a missing or malformed file, a missing
            column, an empty anchor or positive (file and line named).
    """
    anchors, positives, lines = [], [], []
    for number, row in read_rows(path, [anchor_column, positive_column], file_format=file_format):
        for column in (anchor_column, positive_column):
            if not row[column].strip():
                raise CorpusFileError(f"{path}:{number}: the {column!r} column is empty")
        anchors.append(row[anchor_column].strip())
        positives.append(row[positive_column].strip())
        lines.append(number)
    if not anchors:
        raise CorpusFileError(
            f"{path}: no rows (expected {anchor_column}, {positive_column} pairs)"
        )
    return PairsFile(tuple(anchors), tuple(positives), tuple(lines), path)


def _row_negatives(scores, positions, positive_score, excluded, settings):
    """The row's negatives from its ranking (`scores`, `positions` best first), or None
    when the ranking ran out first."""
    negatives, rank = [], 0
    for score, position in zip(scores, positions, strict=True):
        if position < 0 or position in excluded:
            continue
        rank += 1
        if rank <= settings.skip_top:
            continue
        if settings.max_score is not None and score > settings.max_score:
            continue
        if settings.margin is not None and score > positive_score - settings.margin:
            continue
        negatives.append(int(position))
        if len(negatives) == settings.num_negatives:
            return negatives
    return None


def mine_hard_negatives(
    anchor_vectors,
    candidate_vectors,
    positive_scores: Sequence[float],
    excluded: Sequence[set[int]],
    settings: MiningSettings,
) -> list[list[int] | None]:
    """Each anchor's negatives: positions in `candidate_vectors` (see the module
    docstring), or None for an anchor left with too few candidates.

    Args:
        anchor_vectors: float `[rows, dim]`.
        candidate_vectors: float `[candidates, dim]`.
        positive_scores: each row's cosine with its positive.
        excluded: each row's candidate positions that are never its negatives (its
            positives and their repeats).
        settings: `MiningSettings`.
    """
    rows, count = len(anchor_vectors), len(candidate_vectors)
    if not len(positive_scores) == len(excluded) == rows:
        raise UserError(
            f"{rows} anchors, {len(positive_scores)} scores, {len(excluded)} exclusions"
        )
    negatives: list[list[int] | None] = [None] * rows
    pending = np.arange(rows)
    depth = settings.skip_top + settings.num_negatives + _EXTRA_DEPTH
    depth += max((len(skip) for skip in excluded), default=0)
    while pending.size:
        depth = min(depth, count)
        scores, positions = exact_search(
            np.asarray(anchor_vectors)[pending], candidate_vectors, depth
        )
        still = []
        for row, row_scores, row_positions in zip(pending, scores, positions, strict=True):
            negatives[row] = _row_negatives(
                row_scores, row_positions, positive_scores[row], excluded[row], settings
            )
            if negatives[row] is None and depth < count:
                still.append(row)
        pending, depth = np.array(still, np.int64), depth * 2
    return negatives


@dataclasses.dataclass(frozen=True)
class MinedRow:
    """A training row with its hard negatives (texts)."""

    anchor: str
    positive: str
    negatives: tuple[str, ...]


def mine_pairs(
    embedder,
    pairs: PairsFile,
    settings: MiningSettings,
    *,
    candidates: Sequence[str] | None = None,
) -> tuple[list[MinedRow], int]:
    """`(rows, dropped)`: each pair of `pairs` with its negatives, mined among the
    file's positives (or `candidates`) with `embedder` (its query prompt on the
    anchors, its document prompt on the rest); `dropped` rows had too few candidates.
    """
    pool = list(dict.fromkeys(pairs.positives if candidates is None else candidates))
    position_of = {text: position for position, text in enumerate(pool)}
    # Every positive an anchor has in the file: none is that anchor's negative.
    positives_of: dict[str, set[str]] = {}
    for anchor, positive in zip(pairs.anchors, pairs.positives, strict=True):
        positives_of.setdefault(anchor, set()).add(positive)
    excluded = []
    for anchor in pairs.anchors:
        texts = positives_of[anchor] | {anchor}
        excluded.append({position_of[text] for text in texts if text in position_of})

    anchor_vectors = embedder.embed(pairs.anchors, prompt=embedder.query_prompt, what="anchors")
    positive_vectors = embedder.embed(
        pairs.positives, prompt=embedder.document_prompt, what="positives"
    )
    if candidates is None:
        # The pool is the positives: their vectors again, not a second embedding.
        first = {text: row for row, text in reversed(list(enumerate(pairs.positives)))}
        candidate_vectors = positive_vectors[[first[text] for text in pool]]
    else:
        candidate_vectors = embedder.embed(pool, prompt=embedder.document_prompt, what="candidates")
    positive_scores = paired_cosines(anchor_vectors, positive_vectors)
    found = mine_hard_negatives(
        anchor_vectors, candidate_vectors, positive_scores, excluded, settings
    )
    rows = [
        MinedRow(anchor, positive, tuple(pool[position] for position in negatives))
        for anchor, positive, negatives in zip(pairs.anchors, pairs.positives, found, strict=True)
        if negatives is not None
    ]
    return rows, sum(negatives is None for negatives in found)


def negative_columns(num_negatives: int) -> list[str]:
    """`negative_1` .. `negative_k`."""
    return [f"{NEGATIVE}_{i}" for i in range(1, num_negatives + 1)]


def write_triplets(path: str, rows: Sequence[MinedRow], num_negatives: int) -> str:
    """Writes `anchor`, `positive`, `negative_1..k` rows atomically: JSON lines for
    `.jsonl`, CSV for `.csv`, else TSV (a text holding a tab or a line break is an
    error there: TSV cannot quote it).

    Raises:
        UserError: no rows, or a text a TSV cannot hold.
    """
    if not rows:
        raise UserError(f"{path}: no row has {num_negatives} negatives; nothing written")
    header = [ANCHOR, POSITIVE, *negative_columns(num_negatives)]
    extension = os.path.splitext(path)[1].lower()
    buffer = io.StringIO()
    if extension == ".jsonl":
        for row in rows:
            record = dict(zip(header, (row.anchor, row.positive, *row.negatives), strict=True))
            buffer.write(json.dumps(record, ensure_ascii=False) + "\n")
    elif extension == ".csv":
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow(header)
        writer.writerows((row.anchor, row.positive, *row.negatives) for row in rows)
    else:
        buffer.write("\t".join(header) + "\n")
        for number, row in enumerate(rows, start=1):
            fields = (row.anchor, row.positive, *row.negatives)
            if any(("\t" in field or "\n" in field or "\r" in field) for field in fields):
                raise UserError(
                    f"{path}: row {number} holds a tab or a line break, which a TSV cannot "
                    "hold; name the output .csv or .jsonl"
                )
            buffer.write("\t".join(fields) + "\n")
    with atomic_open(path) as f:
        f.write(buffer.getvalue())
    return path
