"""Real sentence lengths for the training benchmarks: Wikipedia sentences, WordPiece ids.

Source: the English Wikipedia dump excerpt gensim ships as test data
(`gensim/test/test_data/enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2`).
Markup is removed with gensim's own `filter_wiki` (the cleaner gensim's `WikiCorpus`
uses); what is left is split into lines and then into sentences at `. `, `? `, `! `
followed by a capital letter or digit (a plain splitter, good enough for lengths: the
pretraining package's cleaner and splitter replace it once that branch lands).

Examples are single sentences and sentence pairs (two consecutive sentences of one
article, as in sentence-pair classification), tokenized by our `BertTokenizer` with the
real uncased vocabulary of the demo MiniLM checkpoint and packed by `BertPreprocessor`
to a fixed length, truncating the longest segment first (the GLUE convention).

Example:

```python
from benchmarks._wiki_sentences import read_sentences, sentence_examples

sentences = read_sentences(max_sentences=2000)  # list of articles' sentence lists
features = sentence_examples(sentences, kind="pairs", count=256, sequence_length=128)
print(features["input_mask"].sum(axis=1).mean())  # real tokens per example
```
"""

from __future__ import annotations

import bz2
import os
import re

import numpy as np

WIKI_FILE = "enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])")
_MIN_WORDS = 4
# filter_wiki keeps MediaWiki's ''italic'' and '''bold''' quote runs.
_QUOTE_RUN = re.compile(r"'{2,}")


def wiki_path() -> str:
    import gensim

    path = os.path.join(os.path.dirname(gensim.__file__), "test", "test_data", WIKI_FILE)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path}: gensim's Wikipedia test excerpt is missing")
    return path


def read_sentences(max_sentences: int = 20_000, path: str | None = None) -> list[list[str]]:
    """Sentences of the excerpt's articles, in order: one list of sentences per article."""
    from gensim.corpora.wikicorpus import extract_pages, filter_wiki

    articles, total = [], 0
    with bz2.open(path or wiki_path(), "rb") as stream:
        for _title, text, _page_id in extract_pages(stream):
            if not text or text.lstrip().lower().startswith("#redirect"):
                continue
            sentences = []
            for line in _QUOTE_RUN.sub("", filter_wiki(text)).splitlines():
                line = line.strip()
                # Leftover list bullets, headings and table rows are not prose.
                if not line or line[0] in "*#|!{}=:;":
                    continue
                for sentence in _SENTENCE_END.split(line):
                    sentence = sentence.strip()
                    if len(sentence.split()) >= _MIN_WORDS:
                        sentences.append(sentence)
            if sentences:
                articles.append(sentences)
                total += len(sentences)
            if total >= max_sentences:
                break
    if not articles:
        raise ValueError(f"{path or wiki_path()}: no sentences found")
    return articles


def make_preprocessor(sequence_length: int):
    """`BertPreprocessor` with the demo MiniLM checkpoint's uncased vocabulary."""
    from keras_bert_zoo.tasks.feature_extraction import demo_model_dir
    from keras_bert_zoo.text import BertPreprocessor, BertTokenizer

    vocab = os.path.join(demo_model_dir(), "vocab.txt")
    return BertPreprocessor(BertTokenizer(vocab, lowercase=True), sequence_length=sequence_length)


def sentence_examples(
    articles: list[list[str]],
    kind: str,
    count: int,
    sequence_length: int = 128,
    seed: int = 0,
    preprocessor=None,
) -> dict[str, np.ndarray]:
    """`count` examples (`kind` "single" or "pairs"), each a fixed-length padded row.

    Returns the int32 arrays `input_word_ids`, `input_mask`, `input_type_ids`
    `[count, sequence_length]`, plus the raw text (`text_a`, `text_b`, lists of str)
    for peers that tokenize themselves.
    """
    import tensorflow as tf

    rng = np.random.default_rng(seed)
    if kind == "single":
        pool = [(s, None) for article in articles for s in article]
    elif kind == "pairs":
        pool = [(a[i], a[i + 1]) for a in articles for i in range(len(a) - 1)]
    else:
        raise ValueError(f"kind must be 'single' or 'pairs', got {kind!r}")
    if len(pool) < count:
        raise ValueError(f"only {len(pool)} {kind} examples in the excerpt, {count} asked for")
    chosen = [pool[i] for i in rng.choice(len(pool), size=count, replace=False)]
    preprocessor = preprocessor or make_preprocessor(sequence_length)
    text_a = [a for a, _ in chosen]
    text_b = [b for _, b in chosen] if kind == "pairs" else None
    segments = (
        (tf.constant(text_a),) if text_b is None else (tf.constant(text_a), tf.constant(text_b))
    )
    features = {k: np.asarray(v, np.int32) for k, v in preprocessor(segments).items()}
    features["text_a"] = text_a
    features["text_b"] = text_b
    return features
