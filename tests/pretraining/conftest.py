"""Fixtures of the pretraining-data tests: the synthetic corpus, its vocabulary, the port."""

import importlib.util
import os
import pathlib
import sys

import pytest
from pretraining_synthetic import VOCAB, synthetic_documents, write_corpus

WIKI_NAME = "enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"
BG_WIKI_NAME = "bgwiki-latest-pages-articles-shortened.xml.bz2"
_PORT_NAME = "kbz_tests_original_create_pretraining_data"


def package_dir(name):
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        pytest.fail(f"{name} is not installed (pip install -e '.[test]')")
    return list(spec.submodule_search_locations)[0]


def load_port():
    """benchmarks/_original_create_pretraining_data.py, the single-process port."""
    if _PORT_NAME not in sys.modules:
        path = (
            pathlib.Path(__file__).resolve().parents[2]
            / "benchmarks"
            / "_original_create_pretraining_data.py"
        )
        spec = importlib.util.spec_from_file_location(_PORT_NAME, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[_PORT_NAME] = module
        spec.loader.exec_module(module)
    return sys.modules[_PORT_NAME]


@pytest.fixture(scope="session")
def port():
    return load_port()


@pytest.fixture(scope="session")
def vocab_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("vocab") / "vocab.txt"
    path.write_text("".join(t + "\n" for t in VOCAB), encoding="utf-8")
    return str(path)


@pytest.fixture(scope="session")
def corpus_documents():
    return synthetic_documents(120, seed=1)


@pytest.fixture(scope="session")
def corpus_file(tmp_path_factory, corpus_documents):
    return write_corpus(tmp_path_factory.mktemp("corpus") / "corpus.txt", corpus_documents)


@pytest.fixture(scope="session")
def wiki_path():
    path = os.path.join(package_dir("gensim"), "test", "test_data", WIKI_NAME)
    if not os.path.exists(path):
        pytest.fail(f"{path} missing (pip install -e '.[test]')")
    return path


@pytest.fixture(scope="session")
def bg_wiki_path():
    """gensim's real Bulgarian Wikipedia dump: UTF-16 (it starts with FF FE) in bzip2."""
    path = os.path.join(package_dir("gensim"), "test", "test_data", BG_WIKI_NAME)
    if not os.path.exists(path):
        pytest.fail(f"{path} missing (pip install -e '.[test]')")
    return path


@pytest.fixture(scope="session")
def crime_and_punishment_path():
    """The opening of Dostoevsky's Crime and Punishment (Russian, then English), as gensim
    ships it."""
    path = os.path.join(package_dir("gensim"), "test", "test_data", "crime-and-punishment.txt")
    if not os.path.exists(path):
        pytest.fail(f"{path} missing (pip install -e '.[test]')")
    return path
