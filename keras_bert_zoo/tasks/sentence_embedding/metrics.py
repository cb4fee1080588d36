"""The metrics of sentence embeddings, in numpy on the host: STS and retrieval.

- STS (semantic textual similarity): the Spearman and Pearson correlations of the
  cosine of each pair's vectors with its gold score (`sts_metrics`), as
  sentence-transformers' `EmbeddingSimilarityEvaluator` reports them; the tests compare
  them with scipy's.
- Retrieval: queries, a corpus and relevance judgements; each query's exact search over
  the whole corpus by cosine, one matrix product a chunk of queries (`exact_search`,
  `relevant_ranks`), and MRR@10, nDCG@10, Recall@1/10/100 and MAP
  (`retrieval_metrics`) with trec_eval's definitions (the tests compare them with
  `ir_measures` over `pytrec_eval`). Exact search is enough up to ~10^5 documents
  (a chunk of 128 queries against 10^5 vectors is a 51 MB score matrix, and every
  query is one row of one matrix product); beyond, an approximate index.

Retrieval definitions, for a query with relevant documents `R` (judged grade > 0) at
ranks `r` (1 = best) of the search over the corpus:

```
MRR@k    = 1 / (rank of the first relevant document), 0 if it ranks below k
Recall@k = |relevant in the top k| / |R|
MAP      = mean over R of (relevant at or above its rank) / its rank   (the whole ranking)
nDCG@k   = sum_{top k} grade / log2(rank + 1), over the same sum of the ideal ranking
```

Grades are the gains of nDCG (trec_eval's linear gain; binary judgements give
sentence-transformers' `InformationRetrievalEvaluator` values). Each metric is the mean
over the queries that have a relevant document; documents of equal score rank in corpus
order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from keras_bert_zoo.utils.errors import UserError

# Queries a matrix product: the score matrix is chunk x corpus float32.
DEFAULT_CHUNK_SIZE = 128


# === STS ===


def _average_ranks(values: np.ndarray) -> np.ndarray:
    """Ranks from 1, ties sharing the mean of their positions (scipy's "average")."""
    order = np.argsort(values, kind="mergesort")
    ordered = values[order]
    starts = np.concatenate([[True], ordered[1:] != ordered[:-1]])
    bounds = np.append(np.flatnonzero(starts), values.size)
    ranks = np.empty(values.size, np.float64)
    ranks[order] = ((bounds[:-1] + bounds[1:] - 1) / 2.0 + 1.0)[np.cumsum(starts) - 1]
    return ranks


def _correlation(x: np.ndarray, y: np.ndarray) -> float:
    """Pearson's r; NaN for a constant input or fewer than two pairs (scipy's value)."""
    if x.size < 2 or (x == x[0]).all() or (y == y[0]).all():
        return float("nan")
    x, y = x - x.mean(), y - y.mean()
    return float(np.clip(x @ y / (np.linalg.norm(x) * np.linalg.norm(y)), -1.0, 1.0))


def _unit_rows(vectors) -> np.ndarray:
    vectors = np.asarray(vectors, np.float32)
    if vectors.ndim != 2:
        raise UserError(f"expected vectors [count, dim], got shape {vectors.shape}")
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.maximum(norms, 1e-12)


def paired_cosines(embeddings_a, embeddings_b) -> np.ndarray:
    """float64 `[n]`: the cosine of each row of `embeddings_a` with the same row of
    `embeddings_b`."""
    a, b = _unit_rows(embeddings_a), _unit_rows(embeddings_b)
    if a.shape != b.shape:
        raise UserError(f"{a.shape[0]} first texts' vectors for {b.shape[0]} second texts'")
    return np.sum(a.astype(np.float64) * b.astype(np.float64), axis=1)


def sts_metrics(embeddings_a, embeddings_b, scores) -> dict[str, float]:
    """`{"spearman": ..., "pearson": ...}`: the correlations of each pair's cosine with
    its gold score (any scale: STS's 0-5 or 0-1).

    Args:
        embeddings_a, embeddings_b: float `[pairs, dim]`, the vectors of each pair's
            first and second text.
        scores: float `[pairs]`, the gold scores.
    """
    cosines = paired_cosines(embeddings_a, embeddings_b)
    scores = np.asarray(scores, np.float64).reshape(-1)
    if scores.shape != cosines.shape:
        raise UserError(f"{scores.size} gold scores for {cosines.size} pairs")
    if not (np.isfinite(scores).all() and np.isfinite(cosines).all()):
        return {"spearman": float("nan"), "pearson": float("nan")}
    return {
        "spearman": _correlation(_average_ranks(cosines), _average_ranks(scores)),
        "pearson": _correlation(cosines, scores),
    }


# === Retrieval ===


def _score_chunks(query_embeddings, corpus_embeddings, chunk_size: int):
    """`(start, scores)` a chunk of queries: their cosines with every document,
    float32 `[chunk, corpus]`, one matrix product."""
    queries, corpus = _unit_rows(query_embeddings), _unit_rows(corpus_embeddings)
    if queries.shape[1] != corpus.shape[1]:
        raise UserError(
            f"queries of {queries.shape[1]} dimensions against a corpus of {corpus.shape[1]}"
        )
    for start in range(0, queries.shape[0], chunk_size):
        yield start, queries[start : start + chunk_size] @ corpus.T


def exact_search(
    query_embeddings, corpus_embeddings, top_k: int, chunk_size: int = DEFAULT_CHUNK_SIZE
) -> tuple[np.ndarray, np.ndarray]:
    """Each query's `top_k` documents by cosine, best first (ties in corpus order).

    Args:
        query_embeddings: float `[queries, dim]`.
        corpus_embeddings: float `[documents, dim]`.
        top_k: int, documents a query (at most the corpus).
        chunk_size: queries a matrix product.

    Returns:
        `(scores, indices)`: float32 and int64 `[queries, min(top_k, documents)]`.
    """
    top_k = min(int(top_k), len(corpus_embeddings))
    all_scores, all_indices = [], []
    for _, scores in _score_chunks(query_embeddings, corpus_embeddings, chunk_size):
        # A stable sort of the negated scores: equal scores keep corpus order.
        if top_k < scores.shape[1]:
            candidates = np.argpartition(-scores, top_k - 1, axis=1)[:, :top_k]
            # argpartition may cut through a tie: widen to every document scoring at
            # least the k-th best, then sort stably.
            kth = np.take_along_axis(scores, candidates, axis=1).min(axis=1, keepdims=True)
            indices = []
            for row, threshold in zip(scores, kth[:, 0], strict=True):
                kept = np.flatnonzero(row >= threshold)
                indices.append(kept[np.argsort(-row[kept], kind="stable")][:top_k])
            indices = np.stack(indices)
        else:
            indices = np.argsort(-scores, axis=1, kind="stable")
        all_indices.append(indices)
        all_scores.append(np.take_along_axis(scores, indices, axis=1))
    if not all_indices:
        return np.zeros((0, top_k), np.float32), np.zeros((0, top_k), np.int64)
    return np.concatenate(all_scores), np.concatenate(all_indices).astype(np.int64)


def relevance_by_index(
    query_ids: Sequence, corpus_ids: Sequence, judgements: Mapping[object, Mapping[object, float]]
) -> list[dict[int, float]]:
    """The judgements by position: for each query of `query_ids`, `{corpus index:
    grade}` of its judged documents (empty for a query without judgements).

    Args:
        query_ids: the queries' ids, in the order of their vectors.
        corpus_ids: the documents' ids, in the order of their vectors.
        judgements: `{query id: {document id: grade}}` (qrels); grades > 0 are
            relevant. Judgements of queries not in `query_ids` are not read.

    Raises:
        UserError: a judged document is not in the corpus, or an id repeats.
    """
    for what, ids in (("query", query_ids), ("corpus", corpus_ids)):
        if len(set(ids)) != len(ids):
            repeated = sorted({str(i) for i in ids if list(ids).count(i) > 1})[:3]
            raise UserError(f"{what} ids repeat: {', '.join(repeated)}")
    position = {document: index for index, document in enumerate(corpus_ids)}
    relevance = []
    for query in query_ids:
        judged = {}
        for document, grade in judgements.get(query, {}).items():
            if document not in position:
                raise UserError(
                    f"query {query!r}: the judged document {document!r} is not in the corpus"
                )
            judged[position[document]] = float(grade)
        relevance.append(judged)
    return relevance


def relevant_ranks(
    query_embeddings,
    corpus_embeddings,
    relevance: Sequence[Mapping[int, float]],
    chunk_size: int = DEFAULT_CHUNK_SIZE,
) -> list[np.ndarray]:
    """For each query, the ranks (from 1) of its relevant documents (grade > 0) in its
    exact search over the whole corpus, in the order of `relevance[q]`'s relevant keys.

    A document's rank is 1 + the documents scoring higher + those scoring the same
    earlier in the corpus: counted, not sorted, so it costs one comparison per
    (relevant document, corpus document).
    """
    if len(relevance) != len(query_embeddings):
        raise UserError(f"{len(relevance)} queries' judgements for {len(query_embeddings)} queries")
    positions = np.arange(len(corpus_embeddings))
    ranks = []
    for start, scores in _score_chunks(query_embeddings, corpus_embeddings, chunk_size):
        for row, judged in zip(scores, relevance[start : start + len(scores)], strict=True):
            relevant = np.array([d for d, grade in judged.items() if grade > 0], np.int64)
            wanted = row[relevant][:, None]
            above = (row[None, :] > wanted).sum(axis=1)
            tied_before = ((row[None, :] == wanted) & (positions[None, :] < relevant[:, None])).sum(
                axis=1
            )
            ranks.append(1 + above + tied_before)
    return ranks


def retrieval_metrics(
    query_embeddings,
    corpus_embeddings,
    relevance: Sequence[Mapping[int, float]],
    *,
    mrr_at: Sequence[int] = (10,),
    ndcg_at: Sequence[int] = (10,),
    recall_at: Sequence[int] = (1, 10, 100),
    chunk_size: int = DEFAULT_CHUNK_SIZE,
) -> dict[str, float]:
    """MRR@k, nDCG@k, Recall@k and MAP of each query's exact search over the corpus
    (see the module docstring), averaged over the queries with a relevant document.

    Args:
        query_embeddings: float `[queries, dim]`.
        corpus_embeddings: float `[documents, dim]`.
        relevance: one `{corpus index: grade}` a query (`relevance_by_index` makes it
            from ids).
        mrr_at, ndcg_at, recall_at: the cutoffs of each metric.
        chunk_size: queries a matrix product.

    Returns:
        `{"mrr@10": ..., "ndcg@10": ..., "recall@1": ..., "recall@10": ...,
        "recall@100": ..., "map": ...}` (keys by the cutoffs given).

    Raises:
        UserError: no query has a relevant document.
    """
    ranks = relevant_ranks(query_embeddings, corpus_embeddings, relevance, chunk_size)
    totals = {f"mrr@{k}": 0.0 for k in mrr_at}
    totals.update({f"ndcg@{k}": 0.0 for k in ndcg_at})
    totals.update({f"recall@{k}": 0.0 for k in recall_at})
    totals["map"] = 0.0
    scored = 0
    for query_ranks, judged in zip(ranks, relevance, strict=True):
        if query_ranks.size == 0:
            continue
        scored += 1
        grades = np.array([grade for grade in judged.values() if grade > 0], np.float64)
        order = np.argsort(query_ranks, kind="stable")
        query_ranks, grades = query_ranks[order], grades[order]
        for k in mrr_at:
            totals[f"mrr@{k}"] += 1.0 / query_ranks[0] if query_ranks[0] <= k else 0.0
        for k in recall_at:
            totals[f"recall@{k}"] += np.count_nonzero(query_ranks <= k) / query_ranks.size
        ideal = np.sort(grades)[::-1]
        for k in ndcg_at:
            top = query_ranks <= k
            gain = np.sum(grades[top] / np.log2(query_ranks[top] + 1.0))
            best = np.sum(ideal[:k] / np.log2(np.arange(2, min(k, ideal.size) + 2)))
            totals[f"ndcg@{k}"] += gain / best
        totals["map"] += np.mean(np.arange(1, query_ranks.size + 1) / query_ranks)
    if not scored:
        raise UserError("no query has a relevant document in the judgements")
    return {name: float(total / scored) for name, total in totals.items()}
