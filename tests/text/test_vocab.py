"""Vocabulary reading, atomic writing, learning, and the tools/build_vocab.py binary."""

import os
import subprocess
import sys

import pytest
import tensorflow as tf

from keras_bert_zoo.text import BertTokenizer, build_vocab, load_vocab, write_vocab

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "tests", "tasks"))
import finetuning_test_helpers  # noqa: E402

CORPUS = [
    "The cat sat on the mat.",
    "The dog sat on the log!",
    "Cats and dogs: friends or foes?",
    "A café in Zürich serves coffee.",
] * 20


def test_write_and_load_round_trip(tmp_path):
    path = str(tmp_path / "vocab.txt")
    tokens = ["[PAD]", "[UNK]", "héllo", "##s", "中"]
    assert write_vocab(path, tokens) == path
    assert load_vocab(path) == tokens
    assert open(path, encoding="utf-8").read() == "".join(t + "\n" for t in tokens)
    assert os.listdir(tmp_path) == ["vocab.txt"]


def test_write_is_atomic_and_validates(tmp_path):
    path = str(tmp_path / "vocab.txt")
    write_vocab(path, ["[UNK]", "old"])
    for bad in (["[UNK]", "two words"], ["[UNK]", ""], ["[UNK]", "a", "a"], ["[UNK]", "x\n"]):
        with pytest.raises(ValueError):
            write_vocab(path, bad)
        assert load_vocab(path) == ["[UNK]", "old"]
    write_vocab(path, ["[UNK]", "new"])
    assert load_vocab(path) == ["[UNK]", "new"]
    assert sorted(os.listdir(tmp_path)) == ["vocab.txt"]


def test_load_strips_like_the_original_and_rejects_garbage(tmp_path):
    path = tmp_path / "vocab.txt"
    path.write_bytes(b"[PAD]\r\n [UNK] \nword\n")
    assert load_vocab(str(path)) == ["[PAD]", "[UNK]", "word"]
    path.write_bytes(b"")
    with pytest.raises(ValueError, match="empty"):
        load_vocab(str(path))
    path.write_bytes(b"ok\n\xff\xfe\n")
    with pytest.raises(ValueError, match="UTF-8"):
        load_vocab(str(path))


@pytest.mark.parametrize("lowercase", [True, False])
def test_build_vocab_covers_its_corpus(lowercase, tmp_path):
    vocab = build_vocab(CORPUS, vocab_size=200, lowercase=lowercase)
    assert vocab[:5] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    assert len(vocab) <= 200 and len(set(vocab)) == len(vocab)
    assert any(t != t.lower() for t in vocab[5:]) is not lowercase
    assert ("café" in vocab or "cafe" in vocab) if lowercase else "Zürich" in vocab
    tokenizer = BertTokenizer(vocabulary=write_vocab(str(tmp_path / "v.txt"), vocab))
    assert tokenizer.lowercase is lowercase
    ids = tokenizer(tf.constant(CORPUS[:4])).flat_values.numpy()
    assert tokenizer.unknown_token_id not in ids


def test_build_vocab_from_datasets_and_arguments():
    from_lines = build_vocab(CORPUS, vocab_size=120, lowercase=True)
    scalar_ds = tf.data.Dataset.from_tensor_slices(CORPUS)
    assert build_vocab(scalar_ds, vocab_size=120, lowercase=True) == from_lines
    assert build_vocab(scalar_ds.batch(7), vocab_size=120, lowercase=True) == from_lines
    custom = build_vocab(CORPUS, 120, True, reserved_tokens=["[PAD]", "[UNK]", "[X]"])
    assert custom[:3] == ["[PAD]", "[UNK]", "[X]"]
    with pytest.raises(ValueError, match="vocab_size"):
        build_vocab(CORPUS, vocab_size=5, lowercase=True)
    with pytest.raises(TypeError):
        build_vocab("a single string", vocab_size=50, lowercase=True)


def run_tool_in_process(load_tool, *args):
    """The tool's `main` in this process, as `cli.run` runs it: a `CompletedProcess`."""
    with load_tool("build_vocab") as tool:
        status, stdout, stderr = finetuning_test_helpers.run_tool_as_user(
            tool, "build_vocab", *args
        )
    return subprocess.CompletedProcess(["build_vocab", *args], status, stdout, stderr)


def run_tool(*args):
    """The tool in a fresh process, as a user runs it."""
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run(
        [sys.executable, os.path.join(REPO, "tools", "build_vocab.py"), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )


@pytest.mark.slow
def test_build_vocab_tool(tmp_path, load_tool):
    for i in range(2):
        (tmp_path / f"part{i}.txt").write_text("\n".join(CORPUS[i::2]) + "\n", encoding="utf-8")
    out = tmp_path / "out" / "vocab.txt"
    out.parent.mkdir()
    result = run_tool_in_process(
        load_tool,
        f"--input_files={tmp_path}/part*.txt",
        f"--output_vocab={out}",
        "--vocab_size=150",
        "--nolowercase",
    )
    assert result.returncode == 0, result.stderr
    vocab = load_vocab(str(out))
    assert vocab[:5] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] and "Zürich" in vocab
    assert vocab == build_vocab(CORPUS, vocab_size=150, lowercase=False)
    missing = run_tool(f"--input_files={tmp_path}/nothing*.txt", f"--output_vocab={out}")
    assert missing.returncode != 0 and "No file matches" in missing.stderr


@pytest.mark.slow
def test_build_vocab_reads_dumps_and_compressed_text_as_the_creator_does(tmp_path, load_tool):
    """`--input_files=dump.xml.bz2` learns from the dump's article sentences (it read the
    compressed bytes, and wrote 2004 tokens of single-character garbage): gensim's real
    Bulgarian Wikipedia dump (UTF-16 in bzip2) and gzip-compressed text, read by the
    corpus readers of create_pretraining_data."""
    import gzip
    import shutil

    import gensim

    from keras_bert_zoo.pretraining import corpus
    from keras_bert_zoo.pretraining.vocabulary import learn_vocabulary

    dump = os.path.join(
        os.path.dirname(gensim.__file__),
        "test",
        "test_data",
        "bgwiki-latest-pages-articles-shortened.xml.bz2",
    )
    shutil.copy(dump, tmp_path / "bgwiki.xml.bz2")
    with gzip.open(tmp_path / "more.txt.gz", "wt", encoding="utf-8") as f:
        f.write("\n".join(CORPUS) + "\n")
    inputs = f"{tmp_path}/bgwiki.xml.bz2,{tmp_path}/more.txt.gz"
    out = tmp_path / "vocab.txt"
    result = run_tool_in_process(
        load_tool, f"--input_files={inputs}", f"--output_vocab={out}", "--vocab_size=400"
    )
    assert result.returncode == 0, result.stderr
    vocab = load_vocab(str(out))
    sentences = list(corpus.iter_sentences(inputs))
    assert vocab == build_vocab(sentences, vocab_size=400, lowercase=True)
    assert {"календар", "година", "cat"} <= set(vocab)
    assert f"learned from {len(sentences)} sentences (2 file(s), 1 MediaWiki" in result.stdout
    # A truncated file is the reader's one-line error, as create_pretraining_data says it.
    data = (tmp_path / "bgwiki.xml.bz2").read_bytes()
    (tmp_path / "cut.xml.bz2").write_bytes(data[: len(data) // 2])
    with pytest.raises(corpus.CorpusError, match=r"cut\.xml\.bz2: the bz2 stream ends early"):
        learn_vocabulary(f"{tmp_path}/cut.xml.bz2", vocab_size=400, lowercase=True)


def test_uncased_strips_the_accents_the_readme_says_it_does():
    """README "Pretraining", other languages: uncased lower-cases, decomposes (NFD) and
    drops the combining marks, so Той becomes тои (й loses its breve), ёж еж, Όλοι ολοι,
    and Devanagari loses its vowel signs and virama; cased keeps every word as written."""
    words = {"Той": "тои", "ёж": "еж", "Όλοι": "ολοι", "मनुष्यों": "मनषयो"}
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words.values(), *words]
    text = tf.constant([" ".join(words)])
    uncased = BertTokenizer(vocabulary=tokens, lowercase=True).tokenize(text)
    assert [tokens[i] for i in uncased.flat_values.numpy()] == list(words.values())
    cased = BertTokenizer(vocabulary=tokens, lowercase=False).tokenize(text)
    assert [tokens[i] for i in cased.flat_values.numpy()] == list(words)
