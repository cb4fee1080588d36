"""The four task families of `finetune_speed_vs_hf_trainer.py`: real text written as the
files a user hands `tools/run_finetuning.py`, which the Hugging Face side reads too.

Every family comes from test data that the `demo` extra's gensim 4.4.0 wheel ships (no
download), split so that no dev example shares its source with a training one:

- `sentences`: the main job's data, gensim's `pang_lee_polarity.cor` (200 movie-review
  sentences, `__label__pos/neg`, Latin-1), 25 per label held out by a seeded shuffle (the
  same 150 / 50 sizes as the main job, not its SHA-256 split), written as `train.tsv` /
  `dev.tsv` (`text<TAB>label`): `--task=text_classification --data_dir=DIR`.
- `pairs`: sentence pairs from the English Wikipedia excerpt
  (`_wiki_sentences.read_sentences`; sentences of 4-50 words): half are two consecutive
  sentences of an article (`next`), half a sentence and one from another article
  (`random`), as BERT's next-sentence pairs. Every fifth article goes to dev. Written as
  `text<TAB>text_pair<TAB>label`: `--task=text_classification --text_pair_column=text_pair`.
  (No installed package ships real sentence-pair data: tensorflow-datasets holds only the
  builders of SNLI, PAWS, GLUE, which download.)
- `tagging`: `ner_learning_check.py`'s data: the 300 ABC news articles of
  `lee_background.cor` as CoNLL words, tagged PER/ORG/LOC/MISC (IOB2) by its gazetteer;
  the articles that mention a held-out set of entities are dev. Written in the CoNLL-2003
  layout (`eng.train`, `eng.testa`: `word POS chunk tag`, `-DOCSTART-` per article):
  `--task=conll2003 --data_dir=DIR`, the README's command.
- `spans`: `_squad_cloze.py`'s cloze questions over the Wikipedia excerpt's paragraphs
  (the answer a removed entity-like span; dev from other articles), in the SQuAD v1.1
  layout (`train-v1.1.json`, `dev-v1.1.json`): `--task=squad_v1.1 --data_dir=DIR`.

`build(name, data_dir, quick)` writes one family's files and returns its `Family`: the
tool's task flags, what the Hugging Face worker (`_hf_trainer_finetune.py`) reads, the
dev metrics to report, and the family's learning rate, epochs and maximum length.
"""

from __future__ import annotations

import dataclasses
import json
import os
import random

FAMILIES = ("sentences", "pairs", "tagging", "spans")


@dataclasses.dataclass
class Family:
    """One task family's data and settings.

    Attributes:
        name: one of `FAMILIES`.
        description: the data, in one line.
        tool_flags: `tools/run_finetuning.py`'s task flags (`--task`, `--data_dir`, the
            task's options): what a user passes for this data.
        hf_data: what `_hf_trainer_finetune.py` reads (`kind`, files, labels).
        metrics: the dev metrics reported, primary first, as named in the tool's
            `eval_results.json` (`_hf_trainer_finetune.py` reports the same names).
        learning_rate: peak learning rate of both sides.
        num_train_epochs: epochs of both sides.
        max_seq_length: tokens per sequence of both sides.
        counts: training and dev examples (questions for `spans`).
    """

    name: str
    description: str
    tool_flags: list[str]
    hf_data: dict
    metrics: tuple[str, ...]
    learning_rate: float
    num_train_epochs: float
    max_seq_length: int
    counts: dict


def _gensim_test_data(name: str) -> str:
    import gensim

    path = os.path.join(os.path.dirname(gensim.__file__), "test", "test_data", name)
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path}: missing (gensim==4.4.0, the demo extra, ships it)")
    return path


def _clean(text: str) -> str:
    return " ".join(text.replace("\t", " ").split())


def _write_tsv(path: str, header: tuple[str, ...], rows) -> None:
    with open(path, "w", encoding="utf-8") as f:
        f.write("\t".join(header) + "\n")
        for row in rows:
            f.write("\t".join(_clean(field) for field in row) + "\n")


def _sentences(data_dir: str, quick: bool, seed: int) -> Family:
    with open(_gensim_test_data("pang_lee_polarity.cor"), encoding="latin-1") as f:
        rows = [line.split(" ", 1) for line in f if line.strip()]
    by_label: dict[str, list[str]] = {}
    for tag, text in rows:
        by_label.setdefault(tag.removeprefix("__label__"), []).append(text.strip())
    rng = random.Random(seed)
    train, dev = [], []
    for label in sorted(by_label):
        texts = by_label[label]
        rng.shuffle(texts)
        dev += [(text, label) for text in texts[:25]]
        train += [(text, label) for text in texts[25:]]
    rng.shuffle(train)
    _write_tsv(os.path.join(data_dir, "train.tsv"), ("text", "label"), train)
    _write_tsv(os.path.join(data_dir, "dev.tsv"), ("text", "label"), dev)
    return Family(
        name="sentences",
        description="pang_lee_polarity.cor movie-review sentences (the main job's data)",
        tool_flags=["--task=text_classification", f"--data_dir={data_dir}"],
        hf_data={
            "kind": "classification",
            "train": os.path.join(data_dir, "train.tsv"),
            "dev": os.path.join(data_dir, "dev.tsv"),
            "text_columns": ["text"],
        },
        metrics=("accuracy",),
        learning_rate=5e-5,
        num_train_epochs=10.0,  # the main job's
        max_seq_length=128,
        counts={"train": len(train), "dev": len(dev)},
    )


def _pairs(data_dir: str, quick: bool, seed: int) -> Family:
    from benchmarks._wiki_sentences import read_sentences

    articles = [
        [s for s in article if 4 <= len(s.split()) <= 50] for article in read_sentences(20_000)
    ]
    splits = {"train": [], "dev": []}
    for number, article in enumerate(articles):
        if len(article) >= 2:
            splits["dev" if number % 5 == 4 else "train"].append(article)
    sizes = {"train": 192, "dev": 64} if quick else {"train": 800, "dev": 200}
    rng = random.Random(seed)
    written = {}
    for split, group in splits.items():
        consecutive = [(i, j) for i, a in enumerate(group) for j in range(len(a) - 1)]
        chosen = rng.sample(consecutive, sizes[split])
        rows = []
        for index, (i, j) in enumerate(chosen):
            first = group[i][j]
            if index % 2 == 0:
                rows.append((first, group[i][j + 1], "next"))
            else:
                other = rng.choice([k for k in range(len(group)) if k != i])
                rows.append((first, rng.choice(group[other]), "random"))
        rng.shuffle(rows)
        _write_tsv(os.path.join(data_dir, f"{split}.tsv"), ("text", "text_pair", "label"), rows)
        written[split] = len(rows)
    return Family(
        name="pairs",
        description="Wikipedia sentence pairs: consecutive (next) or from another article "
        "(random); dev from other articles",
        tool_flags=[
            "--task=text_classification",
            f"--data_dir={data_dir}",
            "--text_pair_column=text_pair",
        ],
        hf_data={
            "kind": "classification",
            "train": os.path.join(data_dir, "train.tsv"),
            "dev": os.path.join(data_dir, "dev.tsv"),
            "text_columns": ["text", "text_pair"],
        },
        metrics=("accuracy",),
        learning_rate=5e-5,
        num_train_epochs=2.0,
        max_seq_length=128,
        counts=written,
    )


def _write_conll(path: str, documents) -> int:
    sentences = 0
    with open(path, "w", encoding="utf-8") as f:
        f.write("-DOCSTART- -X- -X- O\n\n")
        for index, document in enumerate(documents):
            if index:
                f.write("-DOCSTART- -X- -X- O\n\n")
            for words, tags in document:
                for word, tag in zip(words, tags, strict=True):
                    f.write(f"{word} _ _ {tag}\n")
                f.write("\n")
                sentences += 1
    return sentences


def _tagging(data_dir: str, quick: bool, seed: int) -> Family:
    from benchmarks.ner_learning_check import (
        build_matcher,
        choose_held_out,
        load_articles,
        tag_sentence,
    )

    articles = load_articles(_gensim_test_data("lee_background.cor"))
    table, lengths = build_matcher()
    tagged = [
        [(words, tag_sentence(words, table, lengths)) for words in article] for article in articles
    ]
    mentioned = [{e[0] for _, (_, found) in article for e in found} for article in tagged]
    _, dev_articles = choose_held_out(mentioned, random.Random(seed))
    documents = {"train": [], "dev": []}
    for index, article in enumerate(tagged):
        split = "dev" if index in dev_articles else "train"
        documents[split].append([(words, tags) for words, (tags, _) in article])
    if quick:  # whole articles, up to about 320 / 100 sentences
        for split, limit in (("train", 320), ("dev", 100)):
            kept, total = [], 0
            for document in documents[split]:
                if total >= limit:
                    break
                kept.append(document)
                total += len(document)
            documents[split] = kept
    counts = {
        "train": _write_conll(os.path.join(data_dir, "eng.train"), documents["train"]),
        "dev": _write_conll(os.path.join(data_dir, "eng.testa"), documents["dev"]),
    }
    return Family(
        name="tagging",
        description="lee_background.cor news, gazetteer NER tags (IOB2), CoNLL-2003 layout; "
        "dev = articles of held-out entities",
        tool_flags=["--task=conll2003", f"--data_dir={data_dir}"],
        hf_data={
            "kind": "tagging",
            "train": os.path.join(data_dir, "eng.train"),
            "dev": os.path.join(data_dir, "eng.testa"),
            "tags": ["O"] + [f"{p}-{t}" for t in ("PER", "ORG", "LOC", "MISC") for p in "BI"],
        },
        metrics=("f1", "precision", "recall"),
        learning_rate=1e-4,
        num_train_epochs=1.0,
        max_seq_length=128,
        counts=counts,
    )


def _spans(data_dir: str, quick: bool, seed: int) -> Family:
    from benchmarks._squad_cloze import build_cloze_squad

    sizes = (160, 64) if quick else (600, 200)
    train, dev = build_cloze_squad(*sizes, seed=seed)
    paths = {}
    for split, data in (("train", train), ("dev", dev)):
        paths[split] = os.path.join(data_dir, f"{split}-v1.1.json")
        with open(paths[split], "w", encoding="utf-8") as f:
            json.dump(data, f)

    def questions(data):
        return sum(len(p["qas"]) for article in data["data"] for p in article["paragraphs"])

    return Family(
        name="spans",
        description="cloze questions over Wikipedia paragraphs (_squad_cloze.py), SQuAD v1.1 "
        "layout; dev from other articles",
        tool_flags=["--task=squad_v1.1", f"--data_dir={data_dir}"],
        hf_data={
            "kind": "spans",
            "train": paths["train"],
            "dev": paths["dev"],
            # google-research/bert's and Hugging Face run_qa.py's defaults (the tool's
            # doc_stride is the step between windows, Hugging Face's stride their overlap).
            "doc_stride": 128,
            "max_answer_length": 30,
            "n_best_size": 20,
        },
        metrics=("exact_match", "f1"),
        learning_rate=1e-4,
        num_train_epochs=2.0,
        max_seq_length=384,  # both sides' SQuAD default: nearly every paragraph in one window
        counts={"train": questions(train), "dev": questions(dev)},
    )


_BUILDERS = {"sentences": _sentences, "pairs": _pairs, "tagging": _tagging, "spans": _spans}


def build(name: str, data_dir: str, quick: bool = False, seed: int = 0) -> Family:
    """Writes family `name`'s files into `data_dir` (created) and returns its `Family`.

    Args:
        name: one of `FAMILIES`.
        data_dir: where the files go.
        quick: smaller splits, for a smoke run.
        seed: the seed of the split and of the examples chosen (not of training).
    """
    if name not in _BUILDERS:
        raise ValueError(f"unknown family {name!r}; choose from {', '.join(FAMILIES)}")
    os.makedirs(data_dir, exist_ok=True)
    return _BUILDERS[name](data_dir, quick, seed)
