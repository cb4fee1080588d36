"""A corpus's vectors on disk and the search over them: exact, or FAISS's approximate index.

Exact search is one matrix product a chunk of queries
(`tasks.sentence_embedding.metrics.exact_search`, by cosine): enough up to ~10^5
documents (`EXACT_LIMIT`), and the default below. Above, an inverted-file index of
FAISS (`faiss.IndexIVFFlat` over inner products of unit vectors: the cosine), which
scans the `nprobe` lists nearest each query out of `nlist` (the `search` extra
installs `faiss-cpu`; docs/embeddings.md, "Semantic search" has the measurements that chose FAISS
over ScaNN, and `benchmarks/search_index.py` the recall and speed).

An index directory (`tools/index_corpus.py` writes it atomically; `load_index` reads it):

```
manifest.json    format_version, model, model_kind, dim, normalized, document_prompt,
                 query_prompt, count, corpus_file, approximate (the FAISS file or null)
vectors.npy      float32 [count, dim], in corpus order
documents.jsonl  {"id": ..., "text": ...} a line, in the vectors' order
faiss.index      the approximate index, when one was built
```

Example:

```python
from keras_bert_zoo.search.index import load_index

index = load_index("index/")
scores, positions = index.search(query_vectors, top_k=10)
index.ids[positions[0, 0]]
```
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from keras_bert_zoo.serving.layout import read_description
from keras_bert_zoo.tasks.sentence_embedding.metrics import exact_search
from keras_bert_zoo.utils import extras
from keras_bert_zoo.utils.atomic import atomic_directory
from keras_bert_zoo.utils.errors import UserError

# Exact search up to this many documents (one matrix product a chunk of queries).
EXACT_LIMIT = 100_000
INDEX_KINDS = ("auto", "exact", "approximate")
FORMAT_VERSION = 1
MANIFEST_FILE = "manifest.json"
VECTORS_FILE = "vectors.npy"
DOCUMENTS_FILE = "documents.jsonl"
FAISS_FILE = "faiss.index"
# Training points FAISS asks for per inverted list (it warns below 39).
_POINTS_PER_LIST = 39


class SearchIndexError(UserError):
    """An index directory or a search request that is not what it must be."""


def _unit(vectors) -> np.ndarray:
    vectors = np.ascontiguousarray(vectors, np.float32)
    return vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)


def _faiss():
    extras.require("search", "the approximate index (FAISS)")
    import faiss

    return faiss


def default_nlist(count: int) -> int:
    """Inverted lists for `count` vectors: 4 sqrt(count) (FAISS's guidance for
    IndexIVF), at most one per 39 vectors (what k-means trains on)."""
    return max(1, min(int(4 * math.sqrt(count)), count // _POINTS_PER_LIST))


def default_nprobe(nlist: int) -> int:
    """Lists scanned a query: a third of them, at least 8. Measured by
    `benchmarks/search_index.py` on MiniLM vectors of 4000 Wikipedia sentences (102
    lists), recall@10 against exact search is 0.88 scanning 16 lists, 0.97 at 32 and
    0.998 at 64: a third keeps it near 0.97, still 3x less scanned than exact search."""
    return min(nlist, max(8, nlist // 3))


class ExactIndex:
    """Exact search by cosine over `vectors` (`metrics.exact_search`).

    Args:
        vectors: float `[documents, dim]`.
    """

    kind = "exact"

    def __init__(self, vectors):
        self.vectors = np.asarray(vectors, np.float32)

    def search(self, queries, top_k: int) -> tuple[np.ndarray, np.ndarray]:
        """`(scores, positions)`, float32 and int64 `[queries, min(top_k, documents)]`,
        best first."""
        return exact_search(queries, self.vectors, top_k)


class FaissIndex:
    """FAISS's inverted-file index over unit vectors (inner product = cosine).

    Args:
        index: a trained `faiss.IndexIVFFlat` holding the documents' unit vectors.
        nprobe: lists scanned a query (None: `default_nprobe`).
    """

    kind = "approximate"

    def __init__(self, index, nprobe: int | None = None):
        self.index = index
        self.nprobe = nprobe

    @property
    def nprobe(self) -> int:
        return self.index.nprobe

    @nprobe.setter
    def nprobe(self, nprobe: int | None) -> None:
        nlist = self.index.nlist
        nprobe = default_nprobe(nlist) if nprobe is None else int(nprobe)
        if nprobe < 1:
            raise SearchIndexError(f"nprobe={nprobe}: must be >= 1")
        self.index.nprobe = min(nprobe, nlist)

    @classmethod
    def build(cls, vectors, *, nlist: int | None = None, nprobe: int | None = None, seed: int = 0):
        """Trains the lists on `vectors` (k-means) and adds them.

        Args:
            vectors: float `[documents, dim]` (normalised here).
            nlist: inverted lists (None: `default_nlist`).
            nprobe: lists scanned a query (None: `default_nprobe`).
            seed: k-means' seed.
        """
        faiss = _faiss()
        vectors = _unit(vectors)
        nlist = default_nlist(len(vectors)) if nlist is None else int(nlist)
        if not 1 <= nlist <= len(vectors):
            raise SearchIndexError(
                f"nlist={nlist}: must be between 1 and the {len(vectors)} vectors"
            )
        quantizer = faiss.IndexFlatIP(vectors.shape[1])
        index = faiss.IndexIVFFlat(quantizer, vectors.shape[1], nlist, faiss.METRIC_INNER_PRODUCT)
        index.cp.seed = seed
        index.cp.min_points_per_centroid = 1  # a small corpus: no warning, same lists
        index.train(vectors)
        index.add(vectors)
        built = cls(index, nprobe)
        built._quantizer = quantizer  # FAISS's Python wrapper does not own it
        return built

    def search(self, queries, top_k: int) -> tuple[np.ndarray, np.ndarray]:
        """`(scores, positions)` `[queries, min(top_k, documents)]`, best first; a query
        whose scanned lists hold fewer than `top_k` documents has -1 positions (score
        -inf) at the end."""
        top_k = min(int(top_k), self.index.ntotal)
        scores, positions = self.index.search(_unit(queries), top_k)
        scores = np.where(positions < 0, -np.inf, scores).astype(np.float32)
        return scores, positions.astype(np.int64)

    def save(self, path: str) -> None:
        _faiss().write_index(self.index, os.fspath(path))

    @classmethod
    def load(cls, path: str, nprobe: int | None = None) -> FaissIndex:
        return cls(_faiss().read_index(os.fspath(path)), nprobe)


def wants_approximate(count: int, kind: str = "auto") -> bool:
    """Whether `kind` (`auto`, `exact`, `approximate`) means FAISS for `count`
    documents: `auto` above `EXACT_LIMIT`."""
    if kind not in INDEX_KINDS:
        raise SearchIndexError(f"index kind {kind!r}: expected one of {INDEX_KINDS}")
    return kind == "approximate" or (kind == "auto" and count > EXACT_LIMIT)


@dataclasses.dataclass
class CorpusIndex:
    """A corpus's ids, texts and vectors, and the search over them.

    Attributes:
        ids, texts: the documents, in the vectors' order.
        vectors: float32 `[count, dim]`.
        manifest: the directory's `manifest.json` (see the module docstring).
        approximate: the FAISS index, when the directory holds one.
    """

    ids: list[str]
    texts: list[str]
    vectors: np.ndarray
    manifest: dict[str, Any]
    approximate: FaissIndex | None = None

    def searcher(self, kind: str = "auto", *, nprobe: int | None = None):
        """The index a search runs: `exact`, `approximate` (the saved FAISS index, else
        one built now), or `auto` (approximate above `EXACT_LIMIT` documents, or when
        the directory holds one)."""
        if kind == "auto" and self.approximate is not None:
            kind = "approximate"
        if not wants_approximate(len(self.ids), kind):
            return ExactIndex(self.vectors)
        if self.approximate is None:
            self.approximate = FaissIndex.build(self.vectors)
        if nprobe is not None:
            self.approximate.nprobe = nprobe
        return self.approximate

    def search(self, query_vectors, top_k: int, kind: str = "auto", *, nprobe: int | None = None):
        """`(scores, positions)` of each query's `top_k` documents, best first."""
        query_vectors = np.asarray(query_vectors, np.float32)
        if query_vectors.ndim != 2 or query_vectors.shape[1] != self.vectors.shape[1]:
            raise SearchIndexError(
                f"query vectors of shape {query_vectors.shape} for an index of "
                f"{self.vectors.shape[1]} dimensions (embed the queries with the index's model: "
                f"{self.manifest.get('model')})"
            )
        if top_k < 1:
            raise SearchIndexError(f"top_k={top_k}: must be >= 1")
        return self.searcher(kind, nprobe=nprobe).search(query_vectors, top_k)


def write_index(
    output_dir: str,
    ids: Sequence[str],
    texts: Sequence[str],
    vectors,
    manifest: Mapping[str, Any],
    *,
    approximate: FaissIndex | None = None,
) -> str:
    """Writes an index directory (see the module docstring) atomically: the files land
    together, or none does.

    Args:
        output_dir: the directory.
        ids, texts: the documents.
        vectors: float `[count, dim]`, their vectors.
        manifest: what to record of the model (`model`, `model_kind`, prompts, ...);
            `dim`, `count`, `normalized` and `approximate` are filled in.
        approximate: a FAISS index over `vectors` to save beside them.
    """
    vectors = np.ascontiguousarray(vectors, np.float32)
    if vectors.ndim != 2 or not len(ids) == len(texts) == len(vectors):
        raise SearchIndexError(
            f"{len(ids)} ids, {len(texts)} texts and vectors of shape {vectors.shape}"
        )
    norms = np.linalg.norm(vectors, axis=1)
    manifest = {
        **manifest,
        "format_version": FORMAT_VERSION,
        "dim": int(vectors.shape[1]),
        "count": len(vectors),
        "normalized": bool(np.allclose(norms, 1.0, atol=1e-4)),
        "approximate": FAISS_FILE if approximate is not None else None,
    }
    with atomic_directory(output_dir) as temp_dir:
        np.save(os.path.join(temp_dir, VECTORS_FILE), vectors)
        with open(os.path.join(temp_dir, DOCUMENTS_FILE), "w", encoding="utf-8") as f:
            for identifier, text in zip(ids, texts, strict=True):
                f.write(json.dumps({"id": identifier, "text": text}, ensure_ascii=False) + "\n")
        if approximate is not None:
            approximate.save(os.path.join(temp_dir, FAISS_FILE))
        with open(os.path.join(temp_dir, MANIFEST_FILE), "w", encoding="utf-8") as f:
            json.dump(manifest, f, indent=2, sort_keys=True, ensure_ascii=False)
            f.write("\n")
    stale = os.path.join(output_dir, FAISS_FILE)
    if approximate is None and os.path.exists(stale):
        os.remove(stale)  # an earlier write's: the manifest no longer names it
    return output_dir


def load_index(index_dir: str) -> CorpusIndex:
    """Reads an index directory written by `write_index`.

    Raises:
        FileNotFoundError: no such directory or manifest.
        SearchIndexError: a file is missing, or the files disagree.
    """
    index_dir = os.fspath(index_dir)
    manifest_path = os.path.join(index_dir, MANIFEST_FILE)
    if not os.path.isfile(manifest_path):
        raise FileNotFoundError(
            f"{index_dir}: no {MANIFEST_FILE} (expected a directory written by "
            "tools/index_corpus.py)"
        )
    manifest = read_description(manifest_path)
    if manifest.get("format_version", 0) > FORMAT_VERSION:
        raise SearchIndexError(
            f"{manifest_path}: format_version {manifest['format_version']} is newer than "
            f"this keras_bert_zoo reads ({FORMAT_VERSION})"
        )
    for name in (VECTORS_FILE, DOCUMENTS_FILE):
        if not os.path.isfile(os.path.join(index_dir, name)):
            raise SearchIndexError(f"{index_dir}: no {name}")
    vectors = np.load(os.path.join(index_dir, VECTORS_FILE), allow_pickle=False)
    ids, texts = [], []
    documents_path = os.path.join(index_dir, DOCUMENTS_FILE)
    with open(documents_path, encoding="utf-8") as f:
        for number, line in enumerate(f, start=1):
            try:
                document = json.loads(line)
                ids.append(str(document["id"]))
                texts.append(str(document["text"]))
            except (json.JSONDecodeError, KeyError, TypeError):
                raise SearchIndexError(
                    f'{documents_path}:{number}: expected {{"id": ..., "text": ...}}'
                ) from None
    if vectors.ndim != 2 or len(vectors) != len(ids) or len(ids) != manifest.get("count"):
        raise SearchIndexError(
            f"{index_dir}: {len(ids)} documents, vectors of shape {vectors.shape} and a manifest "
            f"count of {manifest.get('count')}"
        )
    approximate = None
    if manifest.get("approximate"):
        path = os.path.join(index_dir, manifest["approximate"])
        if not os.path.isfile(path):
            raise SearchIndexError(
                f"{index_dir}: the manifest names {manifest['approximate']}, which is absent"
            )
        approximate = FaissIndex.load(path)
        if approximate.index.ntotal != len(ids):
            raise SearchIndexError(
                f"{path}: {approximate.index.ntotal} vectors for {len(ids)} documents"
            )
    return CorpusIndex(ids, texts, vectors.astype(np.float32, copy=False), manifest, approximate)
