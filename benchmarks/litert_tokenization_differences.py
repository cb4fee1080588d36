"""How the raw-text LiteRT export tokenizes differently from google-research/bert.

The raw-text `.tflite` (`keras_bert_zoo/serving/formats/litert.py`, `raw_text=True`) tokenizes
with tensorflow-text's `FastBertTokenizer`, the only BERT tokenizer with TFLite
kernels. This script converts that tokenizer alone to a `.tflite` (the same settings
as the export: `litert.fast_bert_tokenizer`) and runs it under
`InterpreterWithCustomOps` with tensorflow-text's kernels, on:

- every non-empty line of the Wikipedia excerpt gensim ships (28,661 lines), and
- every code point between two letters (`"x<c>y"`, U+0001..U+10FFFF without
  surrogates),

against the project's reference statement of google-research/bert's tokenizer
(tests/text/reference_wordpiece.py), with the uncased vocabulary of all-MiniLM-L6-v2,
uncased (as that model) and cased (the same vocabulary, no lower-casing: the
algorithm's difference only). Each differing line is put down to the first cause
that holds for it:

1. `unassigned in Python`: it holds a code point that Python 3.11's `unicodedata`
   (Unicode 14) leaves unassigned and TensorFlow's ICU assigns;
2. `compatibility folding` (uncased): a character whose NFKD differs from its NFD
   (`… -> ...`, `½ -> 1⁄2`, `№ -> No`, full-width forms, ligatures), which the
   normalizer folds and BERT keeps;
3. `case folding` (uncased): a character whose `casefold()` differs from `lower()`
   (`ß -> ss`, final `ς -> σ`), or a capital sigma (Python lower-cases it to `ς` at
   a word's end, ICU to `σ`);
4. `word over 200 characters`: a word BERT turns into [UNK] by its character count;
5. `character class`: anything else: a character both assign whose class
   (punctuation, whitespace, control, CJK) differs between TF's ICU and Python's
   `unicodedata` (examples printed).

Usage:
    PYTHONPATH=. python benchmarks/litert_tokenization_differences.py [--lines N]
"""

from __future__ import annotations

import argparse
import bz2
import collections
import importlib.util
import os
import sys
import tempfile
import unicodedata
import xml.etree.ElementTree as ET

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:
    sys.path.insert(0, REPO)
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

WIKI_NAME = "enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"
BATCH = 4096
CAUSES = (
    "unassigned in Python",
    "compatibility folding",
    "case folding",
    "word over 200 characters",
    "character class",
)


def reference_module():
    path = os.path.join(REPO, "tests", "text", "reference_wordpiece.py")
    spec = importlib.util.spec_from_file_location("reference_wordpiece", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def wiki_lines(limit: int | None = None) -> list[str]:
    import gensim

    path = os.path.join(os.path.dirname(gensim.__file__), "test", "test_data", WIKI_NAME)
    lines = []
    with bz2.open(path) as f:
        for _, element in ET.iterparse(f):
            if element.tag.rsplit("}", 1)[-1] == "text" and element.text:
                lines.extend(line for line in element.text.split("\n") if line.strip())
            element.clear()
    return lines[:limit] if limit else lines


def code_point_lines() -> list[str]:
    return [
        "x" + chr(cp) + "y" for cp in range(1, sys.maxunicode + 1) if not 0xD800 <= cp <= 0xDFFF
    ]


class TfliteTokenizer:
    """The export's FastBertTokenizer alone, converted and run with the TFLite kernels."""

    def __init__(self, tokenizer):
        import tensorflow as tf

        from keras_bert_zoo.serving import loading
        from keras_bert_zoo.serving.formats import litert

        fast = litert.fast_bert_tokenizer(tokenizer)

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text")])
        def tokenize(text):
            tokens = fast.tokenize(text)
            return {"ids": tokens.to_tensor(default_value=-1), "lengths": tokens.row_lengths()}

        content = litert.convert(tokenize, "tokenize", "tokenizer", "none", custom_ops=True)
        self._file = tempfile.NamedTemporaryFile(suffix=".tflite")
        self._file.write(content)
        self._file.flush()
        self._run = loading.litert_interpreter(self._file.name, custom_ops=True)
        self._run = self._run.get_signature_runner("tokenize")

    def __call__(self, lines: list[str]) -> list[list[int]]:
        import numpy as np

        rows = []
        for start in range(0, len(lines), BATCH):
            batch = np.array(
                [line.encode("utf-8") for line in lines[start : start + BATCH]], object
            )
            out = self._run(text=batch)
            rows += [
                list(ids[:length]) for ids, length in zip(out["ids"], out["lengths"], strict=True)
            ]
        return rows


def cause(line: str, lowercase: bool, reference) -> str:
    if any(unicodedata.category(c) == "Cn" for c in line):
        return CAUSES[0]
    if lowercase and any(
        unicodedata.normalize("NFKD", c) != unicodedata.normalize("NFD", c) for c in line
    ):
        return CAUSES[1]
    # Python lower-cases a word-final capital sigma to final sigma (ς); ICU to σ.
    if lowercase and any(c.casefold() != c.lower() or c == "\u03a3" for c in line):
        return CAUSES[2]
    words = reference.basic_tokenize(line, lowercase)
    if any(len(word) > 200 for word in words):
        return CAUSES[3]
    return CAUSES[4]


def measure(name, lines, tokenizer, reference, vocab_index, lowercase, examples):
    ours = TfliteTokenizer(tokenizer)(lines)
    vocabulary = tokenizer.get_vocabulary()
    counts = collections.Counter()
    memo = {}
    for line, ids in zip(lines, ours, strict=True):
        expected = reference.tokenize(line, vocab_index, lowercase, memo=memo)
        got = [vocabulary[i] for i in ids]
        if expected != got:
            why = cause(line, lowercase, reference)
            counts[why] += 1
            if len(examples[why]) < 3:
                # Where they part: the first differing token, with its neighbours.
                k = next(
                    (i for i, (e, g) in enumerate(zip(expected, got, strict=False)) if e != g),
                    min(len(expected), len(got)),
                )
                examples[why].append((name, expected[k : k + 4], got[k : k + 4]))
    return counts


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=None, help="Only the first N wiki lines.")
    parser.add_argument("--no_code_points", action="store_true", help="Skip the code points.")
    args = parser.parse_args()

    from keras_bert_zoo.tasks.feature_extraction import demo_model_dir
    from keras_bert_zoo.text import BertTokenizer

    reference = reference_module()
    vocab_path = os.path.join(demo_model_dir(), "vocab.txt")
    corpora = {"wikipedia": wiki_lines(args.lines)}
    if not args.no_code_points:
        corpora["code points"] = code_point_lines()
    examples = collections.defaultdict(list)
    print("lines that tokenize differently from google-research/bert, by cause:")
    header = f"{'casing':<8} {'text':<12} {'lines':>8} {'differ':>7}  " + "  ".join(
        f"{c}" for c in CAUSES
    )
    print(header)
    for lowercase in (True, False):
        tokenizer = BertTokenizer(vocab_path, lowercase=lowercase, validate_case=False)
        vocab_index = {t: i for i, t in enumerate(tokenizer.get_vocabulary())}
        casing = "uncased" if lowercase else "cased"
        for name, lines in corpora.items():
            counts = measure(name, lines, tokenizer, reference, vocab_index, lowercase, examples)
            print(
                f"{casing:<8} {name:<12} {len(lines):>8} {sum(counts.values()):>7}  "
                + "  ".join(f"{counts[c]:>{len(c)}}" for c in CAUSES)
            )
    print("\nexamples (where they part: reference tokens | FastBertTokenizer tokens):")
    for why in CAUSES:
        for name, expected, got in examples[why]:
            print(f"  {why} [{name}]: {expected} | {got}")


if __name__ == "__main__":
    main()
