"""Small sentence-embedding data sets written by the tests: pairs, triplets, scored
pairs and BEIR retrieval files over a vocabulary that covers them.

Each anchor and its positive share a topic word (`cat`, `river`, ...), so a tiny
encoder learns to pair them in a few dozen steps; negatives carry another topic.
"""

from __future__ import annotations

import csv
import json
import os
import random

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
TOPICS = "cat dog river city book car tree movie song ship".split()
FILLERS = "the a is was very on in big small old new red blue green quiet loud".split()
VOCABULARY = SPECIALS + TOPICS + FILLERS + ["query", ":", "passage", "."]


def sentence(rng: random.Random, topic: str) -> str:
    words = rng.choices(FILLERS, k=rng.randint(2, 5))
    words.insert(rng.randint(0, len(words)), topic)
    return " ".join(words)


def triplets(count: int, seed: int = 0) -> list[tuple[str, str, str]]:
    """`(anchor, positive, negative)` rows: anchor and positive on one topic."""
    rng = random.Random(seed)
    rows = []
    for index in range(count):
        topic = TOPICS[index % len(TOPICS)]
        other = TOPICS[(index + 1 + rng.randrange(len(TOPICS) - 1)) % len(TOPICS)]
        rows.append((sentence(rng, topic), sentence(rng, topic), sentence(rng, other)))
    return rows


def scored_pairs(count: int, seed: int = 1) -> list[tuple[str, str, float]]:
    """`(a, b, score)` rows on STS's 0-5 scale: 5 for one topic, 0 for two."""
    rng = random.Random(seed)
    rows = []
    for index in range(count):
        topic = TOPICS[index % len(TOPICS)]
        same = index % 2 == 0
        other = topic if same else TOPICS[(index + 3) % len(TOPICS)]
        rows.append((sentence(rng, topic), sentence(rng, other), 5.0 if same else 0.0))
    return rows


def write_table(path, header, rows, delimiter="\t") -> str:
    """A TSV/CSV file (CSV quoting), `header` None for none."""
    path = str(path)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f, delimiter=delimiter, lineterminator="\n")
        if header is not None:
            writer.writerow(header)
        writer.writerows(rows)
    return path


def write_jsonl(path, records) -> str:
    path = str(path)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        for record in records:
            f.write((record if isinstance(record, str) else json.dumps(record)) + "\n")
    return path


def write_beir(directory, count: int = 12, seed: int = 2) -> dict[str, str]:
    """BEIR's queries.jsonl, corpus.jsonl and qrels/test.tsv: one relevant document a
    query (same topic), plus unjudged documents of every topic."""
    rng = random.Random(seed)
    queries, corpus, qrels = [], [], []
    for index in range(count):
        topic = TOPICS[index % len(TOPICS)]
        queries.append({"_id": f"q{index}", "text": sentence(rng, topic)})
        corpus.append({"_id": f"d{index}", "title": topic, "text": sentence(rng, topic)})
        qrels.append((f"q{index}", f"d{index}", 1))
    for index in range(count):
        topic = TOPICS[(index + 5) % len(TOPICS)]
        corpus.append({"_id": f"x{index}", "title": "", "text": sentence(rng, topic)})
    directory = str(directory)
    return {
        "queries_file": write_jsonl(os.path.join(directory, "queries.jsonl"), queries),
        "corpus_file": write_jsonl(os.path.join(directory, "corpus.jsonl"), corpus),
        "qrels_file": write_table(
            os.path.join(directory, "qrels", "test.tsv"), ["query-id", "corpus-id", "score"], qrels
        ),
    }
