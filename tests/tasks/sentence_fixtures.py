"""Small GLUE data sets in the official file layouts, a vocabulary that covers them, and
an independent statement of each task's layout for the tests to compare against.

Every split's label is carried by a keyword (`good` / `bad`, `surely` / `maybe` /
`never`, ...), so a tiny encoder learns it in a few dozen steps. Some texts hold bare
`"` characters, as GLUE's real files do.
"""

from __future__ import annotations

import os
import random

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
FILLERS = (
    "the a cat dog sat on mat ran fast slow movie film is was very red blue big small man "
    "woman car house tree river book read wrote saw city old new green quiet loud"
).split()
KEYWORDS = "good bad surely maybe never yes no same other".split()
PUNCTUATION = list('.,?!"')
VOCABULARY = SPECIALS + FILLERS + KEYWORDS + PUNCTUATION

# Keyword per label, per task.
BINARY = {"0": "bad", "1": "good"}
ENTAILMENT = {"entailment": "yes", "not_entailment": "no"}
MNLI = {"contradiction": "never", "entailment": "surely", "neutral": "maybe"}
STSB_SCORES = {0.0: "other", 1.25: "no", 2.5: "maybe", 3.75: "yes", 5.0: "same"}

# Rows per split (QQP's train file also gets one broken row, which is skipped).
SIZES = {"train": 12, "dev": 8, "test": 6}


def _sentence(rng: random.Random, keyword: str | None = None, quote: bool = False) -> str:
    words = rng.choices(FILLERS, k=rng.randint(3, 6))
    if keyword is not None:
        words.insert(rng.randint(0, len(words)), keyword)
    text = " ".join(words)
    if quote:
        text = f'"{text}"'
    return text + rng.choice([" .", " ?", "!", ""])


def _labels(split: str, names) -> list:
    names = list(names)
    return [names[i % len(names)] for i in range(SIZES[split])]


def _write(path: str, lines: list[str], bom: bool = False) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="") as f:
        if bom:
            f.write("\ufeff")
        f.write("".join(line + "\n" for line in lines))


class Expected:
    """What the fixture files hold, split by split: (texts, label, index) rows."""

    def __init__(self):
        self.rows: dict[str, list[tuple[tuple[str, ...], object, str]]] = {}


def write_glue(root: str, seed: int = 0) -> dict[str, Expected]:
    """Writes CoLA, SST-2, MRPC, STS-B, QQP, MNLI (+ diagnostic), QNLI, RTE and WNLI under
    `root` as `download_glue_data.py` lays them out; returns the expected rows."""
    rng = random.Random(seed)
    expected: dict[str, Expected] = {}

    def add(task, split, texts, label, index):
        expected.setdefault(task, Expected()).rows.setdefault(split, []).append(
            (tuple(texts), label, str(index))
        )

    # CoLA: header-less train/dev (source, label, mark, sentence); test with a header.
    for split in ("train", "dev"):
        lines = []
        for row, label in enumerate(_labels(split, BINARY)):
            sentence = _sentence(rng, BINARY[label], quote=row == 2)
            mark = "" if label == "1" else "*"
            lines.append(f"gj0{row % 3}\t{label}\t{mark}\t{sentence}")
            add("glue/cola", split, [sentence], label, row)
        _write(f"{root}/CoLA/{split}.tsv", lines)
    lines = ["index\tsentence"]
    for row in range(SIZES["test"]):
        sentence = _sentence(rng, rng.choice(list(BINARY.values())))
        lines.append(f"{row}\t{sentence}")
        add("glue/cola", "test", [sentence], None, row)
    _write(f"{root}/CoLA/test.tsv", lines)

    # SST-2: sentence, label; test: index, sentence.
    for split in ("train", "dev"):
        lines = ["sentence\tlabel"]
        for row, label in enumerate(_labels(split, BINARY)):
            sentence = _sentence(rng, BINARY[label], quote=row == 3)
            lines.append(f"{sentence}\t{label}")
            add("glue/sst2", split, [sentence], label, row)
        _write(f"{root}/SST-2/{split}.tsv", lines)
    lines = ["index\tsentence"]
    for row in range(SIZES["test"]):
        sentence = _sentence(rng, rng.choice(list(BINARY.values())))
        lines.append(f"{row}\t{sentence}")
        add("glue/sst2", "test", [sentence], None, row)
    _write(f"{root}/SST-2/test.tsv", lines)

    # MRPC: the label is "Quality"; train.tsv keeps the MSR corpus's byte order mark.
    for split in ("train", "dev"):
        lines = ["Quality\t#1 ID\t#2 ID\t#1 String\t#2 String"]
        for row, label in enumerate(_labels(split, BINARY)):
            first, second = _sentence(rng), _sentence(rng, BINARY[label])
            lines.append(f"{label}\t{1000 + row}\t{2000 + row}\t{first}\t{second}")
            add("glue/mrpc", split, [first, second], label, row)
        _write(f"{root}/MRPC/{split}.tsv", lines, bom=split == "train")
    lines = ["index\t#1 ID\t#2 ID\t#1 String\t#2 String"]
    for row in range(SIZES["test"]):
        first, second = _sentence(rng), _sentence(rng, rng.choice(list(BINARY.values())))
        lines.append(f"{row}\t{3000 + row}\t{4000 + row}\t{first}\t{second}")
        add("glue/mrpc", "test", [first, second], None, row)
    _write(f"{root}/MRPC/test.tsv", lines)

    # STS-B: ten columns, the score last; test without it.
    stsb_header = "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2"
    for split in ("train", "dev"):
        lines = [stsb_header + "\tscore"]
        for row, score in enumerate(_labels(split, STSB_SCORES)):
            first, second = _sentence(rng), _sentence(rng, STSB_SCORES[score])
            lines.append(
                f"{row}\tmain-captions\tMSRvid\t2012test\t{row:04d}\tnone\tnone\t"
                f"{first}\t{second}\t{score:.3f}"
            )
            add("glue/stsb", split, [first, second], score, row)
        _write(f"{root}/STS-B/{split}.tsv", lines)
    lines = [stsb_header]
    for row in range(SIZES["test"]):
        first, second = _sentence(rng), _sentence(rng, rng.choice(list(STSB_SCORES.values())))
        lines.append(f"{row}\tmain-news\theadlines\t2015\t{row:04d}\tnone\tnone\t{first}\t{second}")
        add("glue/stsb", "test", [first, second], None, row)
    _write(f"{root}/STS-B/test.tsv", lines)

    # QQP: id, qid1, qid2, question1, question2, is_duplicate; train has a broken row
    # (a question cut short by a stray newline), which the reference loaders drop.
    for split in ("train", "dev"):
        lines = ["id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate"]
        for row, label in enumerate(_labels(split, BINARY)):
            first, second = _sentence(rng) + " ?", _sentence(rng, BINARY[label]) + " ?"
            question_id = 500 + row
            lines.append(f"{question_id}\t{2 * row}\t{2 * row + 1}\t{first}\t{second}\t{label}")
            add("glue/qqp", split, [first, second], label, question_id)
            if split == "train" and row == 4:
                lines.append("999\t77\t78\tis the cat on the mat")
        _write(f"{root}/QQP/{split}.tsv", lines)
    lines = ["id\tquestion1\tquestion2"]
    for row in range(SIZES["test"]):
        first, second = _sentence(rng), _sentence(rng, rng.choice(list(BINARY.values())))
        lines.append(f"{row}\t{first}\t{second}")
        add("glue/qqp", "test", [first, second], None, row)
    _write(f"{root}/QQP/test.tsv", lines)

    # MNLI: train 12 columns, dev 16 (five annotator labels), test 10.
    head = "index\tpromptID\tpairID\tgenre\tsentence1_binary_parse\tsentence2_binary_parse"
    head += "\tsentence1_parse\tsentence2_parse\tsentence1\tsentence2"
    for split, labels_header in (
        ("train", "\tlabel1\tgold_label"),
        ("dev_matched", "\tlabel1\tlabel2\tlabel3\tlabel4\tlabel5\tgold_label"),
        ("dev_mismatched", "\tlabel1\tlabel2\tlabel3\tlabel4\tlabel5\tgold_label"),
    ):
        lines = [head + labels_header]
        size_split = "train" if split == "train" else "dev"
        for row, label in enumerate(_labels(size_split, MNLI)):
            first, second = _sentence(rng), _sentence(rng, MNLI[label], quote=row == 1)
            parses = f"( {first} )\t( {second} )\t(ROOT {first})\t(ROOT {second})"
            votes = label if split == "train" else "\t".join([label] * 5)
            lines.append(
                f"{row}\t{31193 + row}\t{31193 + row}n\tfiction\t{parses}\t{first}\t{second}"
                f"\t{votes}\t{label}"
            )
            add("glue/mnli", split, [first, second], label, row)
        _write(f"{root}/MNLI/{split}.tsv", lines)
    for split in ("test_matched", "test_mismatched"):
        lines = [head]
        for row in range(SIZES["test"]):
            first = _sentence(rng)
            second = _sentence(rng, rng.choice(list(MNLI.values())))
            parses = f"( {first} )\t( {second} )\t(ROOT {first})\t(ROOT {second})"
            lines.append(f"{row}\t{row}\t{row}e\tgovernment\t{parses}\t{first}\t{second}")
            add("glue/mnli", split, [first, second], None, row)
        _write(f"{root}/MNLI/{split}.tsv", lines)
    lines = ["index\tsentence1\tsentence2"]
    for row in range(5):
        first, second = _sentence(rng), _sentence(rng, rng.choice(list(MNLI.values())))
        lines.append(f"{row}\t{first}\t{second}")
        add("glue/mnli", "diagnostic", [first, second], None, row)
    _write(f"{root}/diagnostic/diagnostic.tsv", lines)

    # QNLI: index, question, sentence, label. RTE and WNLI: index, sentence1, sentence2, label.
    for task, directory, columns, labels in (
        ("glue/qnli", "QNLI", "question\tsentence", ENTAILMENT),
        ("glue/rte", "RTE", "sentence1\tsentence2", ENTAILMENT),
        ("glue/wnli", "WNLI", "sentence1\tsentence2", BINARY),
    ):
        for split in ("train", "dev"):
            lines = [f"index\t{columns}\tlabel"]
            for row, label in enumerate(_labels(split, labels)):
                first, second = _sentence(rng), _sentence(rng, labels[label])
                lines.append(f"{row}\t{first}\t{second}\t{label}")
                add(task, split, [first, second], label, row)
            _write(f"{root}/{directory}/{split}.tsv", lines)
        lines = [f"index\t{columns}"]
        for row in range(SIZES["test"]):
            first, second = _sentence(rng), _sentence(rng, rng.choice(list(labels.values())))
            lines.append(f"{row}\t{first}\t{second}")
            add(task, "test", [first, second], None, row)
        _write(f"{root}/{directory}/test.tsv", lines)
    return expected


TASK_DIRECTORIES = {
    "glue/cola": "CoLA",
    "glue/sst2": "SST-2",
    "glue/mrpc": "MRPC",
    "glue/stsb": "STS-B",
    "glue/qqp": "QQP",
    "glue/mnli": "MNLI",
    "glue/qnli": "QNLI",
    "glue/rte": "RTE",
    "glue/wnli": "WNLI",
}

# The GLUE server's file names (the GLUE site's submission instructions).
SUBMISSION_FILES = {
    "glue/cola": {"test": "CoLA.tsv"},
    "glue/sst2": {"test": "SST-2.tsv"},
    "glue/mrpc": {"test": "MRPC.tsv"},
    "glue/stsb": {"test": "STS-B.tsv"},
    "glue/qqp": {"test": "QQP.tsv"},
    "glue/mnli": {
        "test_matched": "MNLI-m.tsv",
        "test_mismatched": "MNLI-mm.tsv",
        "diagnostic": "AX.tsv",
    },
    "glue/qnli": {"test": "QNLI.tsv"},
    "glue/rte": {"test": "RTE.tsv"},
    "glue/wnli": {"test": "WNLI.tsv"},
}


# === Multi-label and long-document fixtures (text_classification) ===

# Label -> the keyword that carries it; a text holds the keywords of its label set.
MULTI_LABELS = {"pos": "good", "neg": "bad", "unsure": "maybe"}


def multi_label_rows(count: int, seed: int = 0) -> list[tuple[str, tuple[str, ...]]]:
    """`(text, labels)` rows: each label present with probability one half (at least
    one), its keyword somewhere in the text; labels in `MULTI_LABELS` order."""
    rng = random.Random(seed)
    rows = []
    for _ in range(count):
        labels = ()
        while not labels:
            labels = tuple(name for name in MULTI_LABELS if rng.random() < 0.5)
        words = rng.choices(FILLERS, k=rng.randint(3, 6))
        for name in labels:
            words.insert(rng.randint(0, len(words)), MULTI_LABELS[name])
        rows.append((" ".join(words), labels))
    return rows


def write_multi_label_tsv(path: str, rows, separator: str = ",", labelled: bool = True) -> None:
    """`text<TAB>labels` with a header; `labels` joined by `separator`."""
    lines = ["text\tlabels" if labelled else "text"]
    for text, labels in rows:
        lines.append(f"{text}\t{separator.join(labels)}" if labelled else text)
    _write(path, lines)


def long_document(rng: random.Random, num_words: int, keyword: str | None) -> tuple[str, int]:
    """A document of `num_words` filler words with `keyword` at a random word position;
    returns `(text, position)` (-1 without a keyword)."""
    words = rng.choices(FILLERS, k=num_words)
    position = -1
    if keyword is not None:
        position = rng.randrange(num_words)
        words[position] = keyword
    return " ".join(words), position
