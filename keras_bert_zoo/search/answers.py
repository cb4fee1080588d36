"""A search's answers: each query's documents, re-ranked by a cross-encoder when given.

`answer_queries` turns the `(scores, positions)` of `CorpusIndex.search` into one
`{"query", "documents"}` dict a query, each document `{"rank", "id", "cosine",
"text"}` (`rank`: its place in the retrieval, from 1). With a re-ranker, the first
`rerank_top_k` documents are re-scored (`"rerank_score"`) and put in the re-ranker's
order, ahead of the rest; `rank` and `cosine` stay the retrieval's, so a reader sees
what re-ranking moved.

Example:

```python
from keras_bert_zoo.search.answers import answer_queries

scores, positions = corpus_index.search(query_vectors, 10)
answers = answer_queries(corpus_index, queries, scores, positions, top_k=10)
answers[0]["documents"][0]["id"]
```
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def answer_queries(
    corpus_index,
    queries: Sequence[str],
    scores,
    positions,
    *,
    top_k: int,
    reranker=None,
    rerank_top_k: int | None = None,
) -> list[dict[str, Any]]:
    """One dict a query: its `top_k` documents, in retrieval order or, with
    `reranker` (a `CrossEncoderReranker`), the re-ranker's order of the first
    `rerank_top_k` (default `top_k`) before the rest.

    Args:
        corpus_index: the `CorpusIndex` searched (its ids and texts).
        queries: the queries' texts.
        scores, positions: `CorpusIndex.search`'s, `[queries, depth]` (position -1:
            none).
        top_k: documents a query in the answer.
        reranker: re-scores (query, document) pairs, or None.
        rerank_top_k: documents re-scored a query.
    """
    answers = []
    for query, row_scores, row_positions in zip(queries, scores, positions, strict=True):
        hits = [
            {
                "rank": rank,
                "id": corpus_index.ids[position],
                "cosine": float(score),
                "text": corpus_index.texts[position],
            }
            for rank, (score, position) in enumerate(
                zip(row_scores, row_positions, strict=True), start=1
            )
            if position >= 0
        ]
        answers.append({"query": query, "documents": hits})
    if reranker is not None:
        _rerank_heads(answers, reranker, rerank_top_k or top_k)
    for answer in answers:
        answer["documents"] = answer["documents"][:top_k]
    return answers


def _rerank_heads(answers, reranker, depth: int) -> None:
    """Re-orders each answer's first `depth` documents by the re-ranker's scores.

    Every query's pairs go to the re-ranker in one call: one prediction pass batches
    them by length, where a call a query built a dataset and met new batch shapes each
    time (1.8 s a query for 20 pairs on a 2-core CPU, `benchmarks/rerank_check.py`)."""
    import numpy as np

    heads = [answer["documents"][:depth] for answer in answers]
    pairs = [
        (answer["query"], hit["text"])
        for answer, head in zip(answers, heads, strict=True)
        for hit in head
    ]
    pair_scores = reranker.pair_scores(pairs)
    start = 0
    for answer, head in zip(answers, heads, strict=True):
        head_scores = np.asarray(pair_scores[start : start + len(head)])
        start += len(head)
        order = np.argsort(-head_scores, kind="stable")  # ties keep the retrieval order
        reranked = [{**head[i], "rerank_score": float(head_scores[i])} for i in order]
        answer["documents"] = reranked + answer["documents"][len(head) :]
