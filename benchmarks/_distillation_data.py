"""The data of `distillation_check.py`: a real labelled task and a real unlabelled
transfer set from another corpus, both from gensim's test data (no download).

- Task: passages of the 198 Usenet posts of gensim's `mini_newsgroup` (alt.atheism /
  sci.space, 99 each; headers, quoted lines and addresses removed by
  `long_document_learning_check.newsgroup_passages`), labelled by their newsgroup. Each
  post is cut into consecutive passages of `passage_words` words (a last piece shorter
  than half that is dropped), at most `max_passages` per post, so that a few very long
  posts do not make up the data set. The split is by POST (a seeded shuffle within
  each newsgroup): no dev passage comes from a post any training passage comes from.
- Transfer set: passages of the same length cut from the articles of gensim's English
  Wikipedia excerpt (`_wiki_sentences.read_sentences`: 106 articles, Anarchism to
  Algorithm, among them Apollo 11, Apollo 8, Astronaut, Amateur astronomy, Allah,
  Aristotle, Altruism, Schopenhauer), as in-domain as this corpus allows: the
  candidates are ranked by TF-IDF cosine similarity to the centroid of each
  newsgroup's TRAINING passages (the dev split is never looked at), and the best
  `count // 2` for each newsgroup are kept (a passage close to both counts once).
  The transfer rows carry no label: the teacher's outputs are their only targets.
"""

from __future__ import annotations

import os
import random

LABELS = ("atheism", "space")


def _test_data() -> str:
    import gensim

    return os.path.join(os.path.dirname(gensim.__file__), "test", "test_data")


def _cut(words: list[str], passage_words: int, max_passages: int | None) -> list[str]:
    pieces = [words[i : i + passage_words] for i in range(0, len(words), passage_words)]
    pieces = [piece for piece in pieces if len(piece) >= max(1, passage_words // 2)]
    if max_passages is not None:
        pieces = pieces[:max_passages]
    return [" ".join(piece) for piece in pieces]


def newsgroup_split(
    passage_words: int = 20,
    max_passages: int = 16,
    dev_fraction: float = 0.5,
    seed: int = 0,
) -> dict[str, list[tuple[str, str]]]:
    """`{"train": [(text, label), ...], "dev": [...]}`, split by post (see the module
    docstring)."""
    from benchmarks.long_document_learning_check import newsgroup_passages

    posts = newsgroup_passages(_test_data(), words=10**9)
    rng = random.Random(seed)
    split = {"train": [], "dev": []}
    for label in LABELS:
        texts = [text for name, text in posts if name == label]
        rng.shuffle(texts)
        cut = round(len(texts) * (1.0 - dev_fraction))
        for name, group in (("train", texts[:cut]), ("dev", texts[cut:])):
            for text in group:
                split[name] += [(p, label) for p in _cut(text.split(), passage_words, max_passages)]
    for rows in split.values():
        rng.shuffle(rows)
    return split


def wikipedia_passages(passage_words: int = 20) -> list[str]:
    """Every passage of `passage_words` consecutive words of each article of the
    Wikipedia excerpt (sentences joined in order, cut at word counts)."""
    from benchmarks._wiki_sentences import read_sentences

    passages = []
    for article in read_sentences(max_sentences=10**9):
        words = " ".join(article).replace("\t", " ").split()
        passages += _cut(words, passage_words, None)
    return passages


def transfer_set(
    train: list[tuple[str, str]], count: int, passage_words: int = 20
) -> tuple[list[str], dict[str, float]]:
    """`count` Wikipedia passages closest to the training passages of each newsgroup
    (see the module docstring), and a summary of the selection (candidates, the
    similarity of the last passage kept)."""
    import numpy as np
    from sklearn.feature_extraction.text import TfidfVectorizer

    candidates = wikipedia_passages(passage_words)
    if count >= len(candidates):
        return candidates, {"candidates": len(candidates), "threshold": 0.0}
    vectorizer = TfidfVectorizer(sublinear_tf=True, stop_words="english", min_df=2)
    vectorizer.fit([text for text, _ in train] + candidates)
    matrix = vectorizer.transform(candidates)
    chosen: list[int] = []
    thresholds = []
    for label in LABELS:
        rows = vectorizer.transform([text for text, name in train if name == label])
        centroid = np.asarray(rows.mean(axis=0)).ravel()
        centroid /= np.linalg.norm(centroid) or 1.0
        scores = matrix @ centroid  # rows are L2-normalised: cosine similarity
        taken = 0
        for index in np.argsort(-scores):
            if taken == count // 2 + (count % 2 if label == LABELS[0] else 0):
                break
            if index not in chosen:
                chosen.append(int(index))
                taken += 1
                last = float(scores[index])
        thresholds.append(last)
    rng = random.Random(0)
    rng.shuffle(chosen)
    return [candidates[i] for i in chosen], {
        "candidates": len(candidates),
        **{f"last_similarity_{label}": t for label, t in zip(LABELS, thresholds, strict=True)},
    }


def write_task(data_dir: str, split: dict[str, list[tuple[str, str]]]) -> None:
    """`train.tsv` and `dev.tsv` (`text<TAB>label`, with a header) in `data_dir`, the
    files `text_classification` reads by default."""
    os.makedirs(data_dir, exist_ok=True)
    for name, rows in split.items():
        with open(os.path.join(data_dir, f"{name}.tsv"), "w", encoding="utf-8") as f:
            f.write("text\tlabel\n")
            for text, label in rows:
                f.write(text.replace("\t", " ") + f"\t{label}\n")


def write_transfer_file(path: str, passages: list[str]) -> None:
    """One passage a line (`text_classification`'s one text field)."""
    with open(path, "w", encoding="utf-8") as f:
        for passage in passages:
            f.write(passage.replace("\t", " ").replace("\n", " ") + "\n")
