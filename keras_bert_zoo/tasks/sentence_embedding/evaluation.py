"""The metrics of a `sentence_embedding` split, by what it holds: `evaluate_embeddings`.

- scored pairs: STS, the Spearman and Pearson correlations of each pair's cosine with
  its score (primary: `spearman`);
- retrieval files (queries, corpus, judgements): each judged query's exact search over
  the corpus, `mrr@10`, `ndcg@10`, `recall@1/10/100`, `map` (primary: `ndcg@10`);
- pairs or triplets without scores: each anchor's search among the split's positives
  (each distinct text once), its own positive the one relevant document (primary:
  `mrr@10`).

The metrics are `tasks.sentence_embedding.metrics`' (exact search, one matrix product a
chunk of queries).

Example:

```python
from keras_bert_zoo.tasks.sentence_embedding.evaluation import evaluate_embeddings

evaluate_embeddings([answer.vectors for answer in answers], examples)  # {"spearman": ...}
```
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from keras_bert_zoo.tasks.sentence_embedding import metrics
from keras_bert_zoo.tasks.sentence_embedding.reader import (
    PAIRS,
    RETRIEVAL,
    SCORED_PAIRS,
    TEXTS,
    EmbeddingExample,
)
from keras_bert_zoo.utils.errors import UserError

# The metric that picks the best model, by what the evaluation split holds.
PRIMARY_METRICS = {SCORED_PAIRS: "spearman", RETRIEVAL: "ndcg@10", PAIRS: "mrr@10"}


def _pair_retrieval(vectors: np.ndarray, examples: Sequence[EmbeddingExample]) -> dict:
    corpus_index: dict[str, int] = {}
    relevance = []
    for example in examples:
        position = corpus_index.setdefault(example.texts[1], len(corpus_index))
        relevance.append({position: 1.0})
    first = {}
    for row, example in enumerate(examples):
        first.setdefault(example.texts[1], row)
    corpus = vectors[[first[text] for text in corpus_index], 1]
    return metrics.retrieval_metrics(vectors[:, 0], corpus, relevance)


def _retrieval(vectors: np.ndarray, examples: Sequence[EmbeddingExample]) -> dict:
    is_query = np.array([example.relevant is not None for example in examples])
    queries = [example for example in examples if example.relevant is not None]
    documents = [example for example in examples if example.relevant is None]
    relevance = metrics.relevance_by_index(
        [query.text_id for query in queries],
        [document.text_id for document in documents],
        {query.text_id: dict(query.relevant) for query in queries},
    )
    return metrics.retrieval_metrics(vectors[is_query, 0], vectors[~is_query, 0], relevance)


def evaluate_embeddings(
    vectors: Sequence[np.ndarray], examples: Sequence[EmbeddingExample]
) -> dict[str, float]:
    """The metrics of the examples' vectors (see the module docstring).

    Args:
        vectors: one float array `[texts, dim]` an example, in example order.
        examples: the split's examples, all of one kind.

    Raises:
        UserError: no examples, examples of several kinds, texts to embed (no gold).
    """
    if len(vectors) != len(examples):
        raise UserError(f"{len(vectors)} answers for {len(examples)} examples")
    if not examples:
        raise UserError("No examples to evaluate")
    kinds = {example.kind for example in examples}
    if len(kinds) != 1 or TEXTS in kinds:
        raise UserError(f"cannot evaluate examples of kinds {sorted(kinds)} (texts have no gold)")
    kind = kinds.pop()
    stacked = np.stack([np.asarray(vector, np.float32) for vector in vectors])
    if kind == SCORED_PAIRS:
        scores = [example.score for example in examples]
        return metrics.sts_metrics(stacked[:, 0], stacked[:, 1], scores)
    if kind == RETRIEVAL:
        return _retrieval(stacked, examples)
    return _pair_retrieval(stacked, examples)
