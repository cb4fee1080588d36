"""The prediction files of a `sentence_embedding` split: the vectors and their texts.

`embeddings_<split>.npy` holds float32 `[examples, dim]` (one text an example, as a file
of texts to embed) or `[examples, texts, dim]` (pairs, triplets: anchor, positive,
negatives in column order), row `i` the vectors of line `i` of
`embeddings_<split>.jsonl`: `{"index": i, "id": ..., "texts": [...]}` (`"text"` for
one text), the texts as read (without prompts). Both are written atomically.

Example:

```python
import json

import numpy as np

vectors = np.load("runs/emb/embeddings_test.npy")
ids = [json.loads(line)["id"] for line in open("runs/emb/embeddings_test.jsonl")]
```
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence

import numpy as np

from keras_bert_zoo.tasks.sentence_embedding.reader import EmbeddingExample
from keras_bert_zoo.utils.atomic import atomic_open
from keras_bert_zoo.utils.errors import UserError


def write_embedding_files(
    vectors: Sequence[np.ndarray],
    examples: Sequence[EmbeddingExample],
    output_dir: str,
    split: str,
) -> list[str]:
    """Writes `embeddings_<split>.npy` and `.jsonl` (the module docstring); returns
    their paths.

    Args:
        vectors: one float array `[texts, dim]` an example.
        examples: the examples, in the same order.
        output_dir: the directory.
        split: the split's name.
    """
    if len(vectors) != len(examples):
        raise UserError(f"{len(vectors)} answers for {len(examples)} examples")
    array = np.stack([np.asarray(v, np.float32) for v in vectors]) if vectors else np.zeros((0, 0))
    if array.ndim == 3 and array.shape[1] == 1:
        array = array[:, 0]
    vectors_path = os.path.join(output_dir, f"embeddings_{split}.npy")
    records_path = os.path.join(output_dir, f"embeddings_{split}.jsonl")
    with atomic_open(vectors_path, "wb") as f:
        np.save(f, array, allow_pickle=False)
    with atomic_open(records_path) as f:
        for index, example in enumerate(examples):
            record = {"index": index, "id": example.text_id or example.example_id}
            if len(example.texts) == 1:
                record["text"] = example.texts[0]
            else:
                record["texts"] = list(example.texts)
            f.write(json.dumps(record, ensure_ascii=False) + "\n")
    return [vectors_path, records_path]
