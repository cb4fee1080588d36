"""The held-out split of a data set that comes as one file (`text_classification`'s
`heldout_fraction`).

Per label (one group for a regression), the `fraction` of the examples whose SHA-256
of `seed:row` is smallest go to `dev` (rounded half up), so the split is the same on
every machine and in every version of every library. Examples keep their file order in
both splits.

Example:

```python
from keras_bert_zoo.tasks.sentence.heldout import heldout_positions, heldout_split

held_out = heldout_positions(examples, 0.25, seed=12345, by_label=True)
dev = heldout_split(examples, "dev", held_out)
```
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from typing import Any

from keras_bert_zoo.tasks.sentence.examples import SentenceExample


def _heldout_rank(seed: int, row: int) -> bytes:
    return hashlib.sha256(f"{seed}:{row}".encode()).digest()


def heldout_positions(
    examples: Sequence[SentenceExample], fraction: float, seed: int, *, by_label: bool
) -> set[int]:
    """Positions (in `examples`) of the held-out examples: per label (`by_label`; else
    one group), the `fraction` share with the smallest seeded hashes."""
    groups: dict[Any, list[int]] = {}
    for position, example in enumerate(examples):
        key = example.label if by_label else None
        groups.setdefault(key, []).append(position)
    held_out = set()
    for positions in groups.values():
        count = math.floor(fraction * len(positions) + 0.5)
        ranked = sorted(positions, key=lambda p: _heldout_rank(seed, p))
        held_out.update(ranked[:count])
    return held_out


def heldout_split(
    examples: Sequence[SentenceExample], split: str, held_out: set[int]
) -> list[SentenceExample]:
    """The examples of `split`: `dev` the held-out ones, `train` the others, in file
    order, their ids renamed `{split}-{index}`."""
    keep = (lambda p: p in held_out) if split == "dev" else (lambda p: p not in held_out)
    return [
        SentenceExample(
            example_id=f"{split}-{example.index}",
            texts=example.texts,
            label=example.label,
            index=example.index,
            source=example.source,
        )
        for p, example in enumerate(examples)
        if keep(p)
    ]
