"""A retrieval set from real Wikipedia articles, split by article: a paragraph's first
sentence asks for the rest of its paragraph (the inverse cloze task).

Source: the English Wikipedia excerpt gensim ships as test data (`_wiki_sentences.
wiki_path()`: 106 articles after the redirects), read by the pretraining package's own
readers: `pretraining.corpus.iter_mediawiki_pages` (articles, redirects skipped) and
`pretraining.wikitext` (`clean_wikitext`: markup removed, one paragraph a line;
`split_sentences`). A paragraph counts when it has at least two sentences and
`min_words` words (list items, captions and stubs do not).

Examples: the query is a paragraph's first sentence, its one relevant document the
paragraph without that sentence (Lee et al. 2019's inverse cloze task, with the
sentence always removed). The articles are split, by a seeded shuffle, into training
articles and held-out articles (about `held_out_fraction` of the paragraphs): training
pairs come only from the first, the queries and the whole corpus (every held-out
paragraph) only from the second, so no held-out text is seen in training and the
distractors of a query include the other paragraphs of its own article.

Example:

```python
from benchmarks._wiki_retrieval import read_articles, split_by_article, write_beir

articles = read_articles()
split = split_by_article(articles, held_out_fraction=0.25, seed=0)
files = write_beir("/tmp/wiki_beir", split.held_out)  # queries_file, corpus_file, qrels_file
```
"""

from __future__ import annotations

import dataclasses
import json
import os
import random

from benchmarks._wiki_sentences import wiki_path

MIN_WORDS = 40


@dataclasses.dataclass(frozen=True)
class Article:
    """An article's title and its paragraphs, each a list of sentences."""

    title: str
    paragraphs: tuple[tuple[str, ...], ...]


@dataclasses.dataclass(frozen=True)
class Pair:
    """A query (a paragraph's first sentence) and its paragraph's remainder."""

    pair_id: str
    title: str
    query: str
    document: str


@dataclasses.dataclass(frozen=True)
class Split:
    """Pairs of the training articles and of the held-out articles."""

    train: list[Pair]
    held_out: list[Pair]
    train_articles: int
    held_out_articles: int


def read_articles(path: str | None = None, min_words: int = MIN_WORDS) -> list[Article]:
    """The excerpt's articles with at least one paragraph of two sentences and
    `min_words` words, in dump order."""
    from keras_bert_zoo.pretraining import corpus, wikitext

    input_file = corpus.sniff_input_file(path or wiki_path())
    articles = []
    for page in corpus.iter_mediawiki_pages(input_file, corpus.CorpusStats()):
        paragraphs = []
        for paragraph in wikitext.clean_wikitext(page.wikitext or ""):
            sentences = wikitext.split_sentences(paragraph)
            if len(sentences) >= 2 and len(paragraph.split()) >= min_words:
                paragraphs.append(tuple(sentences))
        if paragraphs:
            articles.append(Article(page.title or "", tuple(paragraphs)))
    if not articles:
        raise ValueError(f"{input_file.path}: no paragraphs of {min_words} words found")
    return articles


def article_pairs(article: Article, index: int) -> list[Pair]:
    """One `Pair` a paragraph: its first sentence, the rest of it."""
    return [
        Pair(f"a{index}p{number}", article.title, sentences[0], " ".join(sentences[1:]))
        for number, sentences in enumerate(article.paragraphs)
    ]


def split_by_article(articles: list[Article], held_out_fraction: float, seed: int) -> Split:
    """Articles in a seeded random order go to the held-out side until it holds about
    `held_out_fraction` of all paragraphs; the rest train."""
    order = list(range(len(articles)))
    random.Random(seed).shuffle(order)
    total = sum(len(article.paragraphs) for article in articles)
    held_out, train, held_out_count, held_articles = [], [], 0, 0
    for index in order:
        pairs = article_pairs(articles[index], index)
        if held_out_count < held_out_fraction * total:
            held_out += pairs
            held_out_count += len(pairs)
            held_articles += 1
        else:
            train += pairs
    return Split(train, held_out, len(articles) - held_articles, held_articles)


def _shingles(text: str, width: int = 8) -> set[tuple[str, ...]]:
    words = text.lower().split()
    return {tuple(words[i : i + width]) for i in range(len(words) - width + 1)}


def near_duplicates(held_out: list[Pair], train: list[Pair], share: float = 0.5) -> int:
    """Held-out documents with more than `share` of their 8-word runs in the training
    texts (a paragraph an article repeats from another: the split by article does not
    see it)."""
    seen: set[tuple[str, ...]] = set()
    for pair in train:
        seen |= _shingles(pair.query) | _shingles(pair.document)
    count = 0
    for pair in held_out:
        runs = _shingles(pair.document)
        count += bool(runs) and len(runs & seen) > share * len(runs)
    return count


def _one_line(text: str) -> str:
    return " ".join(text.split())


def write_jsonl(path: str, rows: list[dict]) -> str:
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    return path


def write_pairs(path: str, pairs: list[Pair]) -> str:
    """Training pairs as JSON lines `{"anchor", "positive"}`: the columns
    `sentence_embedding` and `tools/mine_hard_negatives.py` read by default."""
    return write_jsonl(
        path, [{"anchor": _one_line(p.query), "positive": _one_line(p.document)} for p in pairs]
    )


def write_beir(
    directory: str, pairs: list[Pair], max_queries: int | None = None, seed: int = 0
) -> dict[str, str]:
    """BEIR's `queries.jsonl`, `corpus.jsonl` and `qrels/test.tsv` of the pairs: the
    queries of all pairs (or of `max_queries` drawn by `seed`), every pair's document
    (no title: a title would name the article all its paragraphs share), one judgement
    a query. Returns the task options naming the files."""
    asked = pairs
    if max_queries is not None and max_queries < len(pairs):
        asked = random.Random(seed).sample(pairs, max_queries)
    queries = [{"_id": f"q-{p.pair_id}", "text": _one_line(p.query)} for p in asked]
    documents = [
        {"_id": f"d-{p.pair_id}", "title": "", "text": _one_line(p.document)} for p in pairs
    ]
    qrels = os.path.join(directory, "qrels", "test.tsv")
    os.makedirs(os.path.dirname(qrels), exist_ok=True)
    with open(qrels, "w", encoding="utf-8") as f:
        f.write("query-id\tcorpus-id\tscore\n")
        for p in asked:
            f.write(f"q-{p.pair_id}\td-{p.pair_id}\t1\n")
    return {
        "queries_file": write_jsonl(os.path.join(directory, "queries.jsonl"), queries),
        "corpus_file": write_jsonl(os.path.join(directory, "corpus.jsonl"), documents),
        "qrels_file": qrels,
    }


@dataclasses.dataclass(frozen=True)
class Prepared:
    """The files of a benchmark run: training pairs and the held-out BEIR files."""

    articles: list[Article]
    split: Split
    train: list[Pair]
    pairs_file: str
    files: dict[str, str]
    query_count: int

    def description(self) -> str:
        """One line: what was read, trained on and held out."""
        split = self.split
        return (
            f"data: {len(self.articles)} Wikipedia articles; training: {len(self.train)} pairs "
            f"of {split.train_articles} articles; held out: {self.query_count} queries against "
            f"{len(split.held_out)} paragraphs of {split.held_out_articles} other articles "
            f"({near_duplicates(split.held_out, self.train)} of them share over half their "
            "8-word runs with the training pairs)"
        )


def prepare(
    data_dir: str,
    train_pairs: int,
    held_out_fraction: float,
    max_queries: int | None,
    seed: int,
) -> Prepared:
    """The excerpt split by article (`seed`); at most `train_pairs` training pairs (a
    seeded sample) in `data_dir/train_pairs.jsonl` (`write_pairs`), the held-out BEIR
    files in `data_dir/held_out/` (`write_beir`, `max_queries` of them asked)."""
    articles = read_articles()
    split = split_by_article(articles, held_out_fraction, seed)
    train = split.train
    if len(train) > train_pairs:
        train = random.Random(seed).sample(train, train_pairs)
    pairs_file = write_pairs(os.path.join(data_dir, "train_pairs.jsonl"), train)
    files = write_beir(os.path.join(data_dir, "held_out"), split.held_out, max_queries, seed)
    with open(files["queries_file"], encoding="utf-8") as f:
        query_count = sum(1 for _ in f)
    return Prepared(articles, split, train, pairs_file, files, query_count)
