"""The static creator end to end: records in the original format, the algorithm's
properties on them, agreement with the port, determinism, parallelism, bad input."""

import bz2
import dataclasses
import glob
import os

import numpy as np
import pytest
import tensorflow as tf
from pretraining_synthetic import VOCAB, synthetic_documents, write_corpus
from pretraining_synthetic import unmasked_ids as synthetic_unmasked_ids

from keras_bert_zoo.data import pretraining as data_pretraining
from keras_bert_zoo.pretraining import corpus, creator

SEQ, PRED = 64, 10
CLS, SEP, MASK = VOCAB.index("[CLS]"), VOCAB.index("[SEP]"), VOCAB.index("[MASK]")


def config(vocab_file, **overrides):
    settings = dict(
        vocab_file=vocab_file,
        max_seq_length=SEQ,
        max_predictions_per_seq=PRED,
        dupe_factor=3,
        random_seed=7,
        chunk_chars=20_000,
    )
    settings.update(overrides)
    return creator.CreationConfig(**settings)


def read_records(paths, seq=SEQ, pred=PRED):
    """Every record parsed with the original feature spec (names, int64/float, lengths)."""
    spec = data_pretraining.pretraining_feature_spec(seq, pred)
    raw = list(tf.data.TFRecordDataset(paths))
    parsed = tf.io.parse_example(tf.stack(raw), spec)
    return {k: v.numpy() for k, v in parsed.items()}


def unmasked_ids(records):
    return synthetic_unmasked_ids(
        records["input_ids"],
        records["masked_lm_positions"],
        records["masked_lm_ids"],
        records["masked_lm_weights"],
    )


def file_bytes(paths):
    out = []
    for path in paths:
        with open(path, "rb") as f:
            out.append(f.read())
    return out


@pytest.fixture(scope="module")
def created(tmp_path_factory, corpus_file, vocab_file):
    out = tmp_path_factory.mktemp("created")
    summary = creator.create_pretraining_data(
        corpus_file, str(out / "train.tfrecord@3"), config(vocab_file), num_workers=0
    )
    return summary, read_records(summary.output_files)


def test_records_follow_the_original_layout_and_algorithm(created):
    summary, records = created
    n = len(records["input_ids"])
    assert n == summary.stats.instances == sum(summary.records_per_file) > 500
    assert summary.records_per_file[0] - summary.records_per_file[-1] in (0, 1)  # round-robin
    restored = unmasked_ids(records)
    for row in range(n):
        ids, mask = restored[row], records["input_mask"][row]
        length = int(mask.sum())
        assert np.all(mask[:length] == 1) and np.all(ids[length:] == 0) and ids[0] == CLS
        seps = np.flatnonzero(ids[:length] == SEP)
        assert len(seps) == 2 and seps[1] == length - 1
        segments = records["segment_ids"][row]
        assert np.all(segments[: seps[0] + 1] == 0) and np.all(segments[seps[0] + 1 : length] == 1)
        assert np.all(segments[length:] == 0)
        count = int(records["masked_lm_weights"][row].sum())
        assert count == min(PRED, max(1, int(round(length * 0.15))), length - 3)
        positions = records["masked_lm_positions"][row, :count]
        assert np.all(np.diff(positions) > 0) and not set(positions) & {0, seps[0], seps[1]}
        assert np.all(records["masked_lm_positions"][row, count:] == 0)
        assert np.all(records["masked_lm_ids"][row, count:] == 0)
        # Unmasked positions hold the original ids.
        others = np.setdiff1d(np.arange(length), positions)
        assert np.array_equal(records["input_ids"][row, others], ids[others])
    masked = records["input_ids"][np.arange(n)[:, None], records["masked_lm_positions"]]
    real = records["masked_lm_weights"] > 0
    mask_share = np.mean(masked[real] == MASK)
    assert abs(mask_share - 0.8) < 0.02
    # Above 1/2: one-sentence chunks are always random next (the port agrees, below).
    assert 0.45 < records["next_sentence_labels"].mean() < 0.7
    assert abs(summary.masked_fraction - real.sum() / records["input_mask"].sum()) < 1e-9


def test_the_written_line_names_few_files_each_and_sums_up_many(created):
    summary, _ = created
    (line,) = [line for line in summary.lines() if line.startswith("Wrote ")]
    counts = zip(summary.output_files, summary.records_per_file, strict=True)
    assert line == "Wrote " + ", ".join(f"{n} to {path}" for path, n in counts)
    many = dataclasses.replace(
        summary,
        output_files=[f"out/train.tfrecord-{i:05d}-of-00256" for i in range(256)],
        records_per_file=[1] * 63 + [0] * 193,
    )
    (line,) = [line for line in many.lines() if line.startswith("Wrote ")]
    assert line == (
        "Wrote 63 to 256 files (out/train.tfrecord-00000-of-00256 ... "
        "out/train.tfrecord-00255-of-00256), 0 to 1 a file, 193 empty"
    )


def test_segments_are_corpus_text(created, corpus_documents, port, vocab_file):
    """Unmasked, every A segment is a contiguous run of one document's tokens, as the
    port's pure-Python tokenizer splits them (so the tokenizations agree)."""
    _, records = created
    tokenizer = port.FullTokenizer(vocab_file, do_lower_case=True)
    documents = [
        " "
        + " ".join(
            str(i) for s in doc for i in tokenizer.convert_tokens_to_ids(tokenizer.tokenize(s))
        )
        + " "
        for doc in corpus_documents
    ]
    n = len(records["input_ids"])
    ids = unmasked_ids(records)
    for row in range(0, n, 7):
        sep = int(np.flatnonzero(ids[row] == SEP)[0])
        segment_a = " " + " ".join(str(i) for i in ids[row, 1:sep]) + " "
        assert any(segment_a in doc for doc in documents), row


def test_agrees_with_the_port_on_the_same_input(created, corpus_file, vocab_file, port, tmp_path):
    """Same input and flags: instance count, NSP balance, lengths and masking agree."""
    summary, ours = created
    path = str(tmp_path / "port.tfrecord")
    written = port.run(
        corpus_file,
        path,
        vocab_file,
        max_seq_length=SEQ,
        max_predictions_per_seq=PRED,
        dupe_factor=3,
        random_seed=7,
    )
    theirs = read_records([path])
    assert abs(summary.stats.instances / written - 1) < 0.05
    # NSP balance: two samples of about 1,250 pairs; allow 4 standard errors of the
    # difference of two binomial proportions (about 0.08), no more.
    ours_random, theirs_random = ours["next_sentence_labels"], theirs["next_sentence_labels"]
    pooled = np.concatenate([ours_random.ravel(), theirs_random.ravel()]).mean()
    standard_error = np.sqrt(
        pooled * (1 - pooled) * (1 / ours_random.size + 1 / theirs_random.size)
    )
    assert abs(ours_random.mean() - theirs_random.mean()) < 4 * standard_error
    assert abs(ours["input_mask"].sum(1).mean() / theirs["input_mask"].sum(1).mean() - 1) < 0.02
    assert (
        abs(ours["masked_lm_weights"].sum(1).mean() / theirs["masked_lm_weights"].sum(1).mean() - 1)
        < 0.02
    )


@pytest.mark.slow
def test_same_seed_same_files_any_worker_count(created, corpus_file, vocab_file, tmp_path):
    summary, _ = created
    again = creator.create_pretraining_data(
        corpus_file, str(tmp_path / "again.tfrecord@3"), config(vocab_file), num_workers=2
    )
    assert again.workers == 2 and again.chunks == summary.chunks > 2
    assert file_bytes(again.output_files) == file_bytes(summary.output_files)
    other = creator.create_pretraining_data(
        corpus_file,
        str(tmp_path / "other.tfrecord"),
        config(vocab_file, random_seed=8),
        num_workers=0,
    )
    assert b"".join(file_bytes(other.output_files)) != b"".join(file_bytes(summary.output_files))


@pytest.mark.slow
def test_whole_word_masking_masks_every_piece(corpus_file, vocab_file, tmp_path):
    summary = creator.create_pretraining_data(
        corpus_file,
        str(tmp_path / "wwm.tfrecord"),
        config(vocab_file, do_whole_word_mask=True, dupe_factor=1),
        num_workers=0,
    )
    records = read_records(summary.output_files)
    n = len(records["input_ids"])
    ids = unmasked_ids(records)
    real = records["masked_lm_weights"] > 0
    continuation = np.array([t.startswith("##") for t in VOCAB])
    multi = 0
    for row in range(n):
        chosen = set(records["masked_lm_positions"][row][real[row]].tolist())
        for p in chosen:
            start = p
            while continuation[ids[row, start]] and ids[row, start - 1] not in (CLS, SEP):
                start -= 1
            end = p + 1
            while continuation[ids[row, end]]:
                end += 1
            assert set(range(start, end)) <= chosen
            multi += end - start > 1
    assert multi > 100


def test_skips_and_truncations_are_counted(vocab_file, tmp_path, caplog):
    documents = synthetic_documents(20, seed=3)
    path = tmp_path / "odd.txt"
    write_corpus(path, documents, extra_blank_lines=True)
    with open(path, "ab") as f:
        f.write(b"One sentence only .\n\n")  # a one-sentence document
        f.write(b",,,\n\xff\xfe\n\n")  # no word piece ... and invalid UTF-8 only: empty
        f.write((" ".join(["kalo"] * 200) + " .\n").encode())  # longer than max_seq_length
        f.write(b"Tail sentence .\n")
    with caplog.at_level("WARNING"):
        summary = creator.create_pretraining_data(
            str(path),
            str(tmp_path / "o.tfrecord"),
            config(vocab_file, dupe_factor=1),
            num_workers=0,
        )
    s = summary.stats
    assert summary.corpus.invalid_utf8_lines == 1
    assert s.one_sentence_documents >= 1 and s.long_sentences == 1
    lines = path.read_text(encoding="utf-8", errors="ignore").split("\n")
    long_line = next(i for i, line in enumerate(lines, 1) if line.startswith("kalo kalo"))
    assert f"{path}:{long_line}" in caplog.text
    assert "longer than max_seq_length" in caplog.text
    assert "\n".join(summary.lines()).count("Instances:") == 1


def test_empty_documents_are_skipped_and_named(vocab_file, tmp_path, caplog):
    path = tmp_path / "empty_docs.txt"
    path.write_bytes(b"Kalo mine .\nRuta so .\n\n\x01\x02\n\n" + b"Devi pa .\n")
    with caplog.at_level("WARNING"):
        summary = creator.create_pretraining_data(
            str(path),
            str(tmp_path / "o.tfrecord"),
            config(vocab_file, dupe_factor=1),
            num_workers=0,
        )
    assert summary.stats.empty_documents == 1 and summary.stats.documents == 2
    assert f"{path}:4" in caplog.text


@pytest.mark.parametrize(
    "patterns, outputs, overrides, message",
    [
        ("{tmp}/missing-*.txt", "{tmp}/o.tfrecord", {}, "missing-"),
        ("{corpus}", "", {}, "output_file"),
        ("{corpus}", "{tmp}/o.tfrecord", {"max_seq_length": 4}, "max_seq_length must be >= 5"),
        ("{corpus}", "{tmp}/o.tfrecord", {"vocab_file": "/nonexistent/vocab.txt"}, "vocab.txt"),
        ("{corpus}", "{tmp}/o.tfrecord", {"dupe_factor": 0}, "dupe_factor"),
    ],
)
def test_bad_settings(corpus_file, vocab_file, tmp_path, patterns, outputs, overrides, message):
    with pytest.raises(ValueError, match=message):
        creator.create_pretraining_data(
            patterns.format(tmp=tmp_path, corpus=corpus_file),
            outputs.format(tmp=tmp_path),
            config(overrides.pop("vocab_file", vocab_file), **overrides),
            num_workers=0,
        )


def test_truncated_input_fails_and_writes_nothing(corpus_file, vocab_file, tmp_path):
    with open(corpus_file, "rb") as f:
        data = bz2.compress(f.read() * 40)  # several 900 kB bz2 blocks
    truncated = tmp_path / "in" / "cut.txt.bz2"
    truncated.parent.mkdir()
    truncated.write_bytes(data[: len(data) * 2 // 3])
    out = tmp_path / "out"
    with pytest.raises(corpus.CorpusError, match=r"cut\.txt\.bz2.*ends early after line \d+"):
        creator.create_pretraining_data(
            str(truncated), str(out / "w.tfrecord@2"), config(vocab_file), num_workers=0
        )
    assert os.listdir(out) == []  # chunks before the cut were processed, nothing was kept


def test_crash_mid_run_leaves_no_shard(corpus_file, vocab_file, tmp_path, monkeypatch):
    calls = []
    original = creator.ChunkProcessor.__call__

    def crash_on_third_chunk(self, index, documents):
        calls.append(index)
        if index == (0, 2):
            raise RuntimeError("worker died")
        return original(self, index, documents)

    monkeypatch.setattr(creator.ChunkProcessor, "__call__", crash_on_third_chunk)
    out = tmp_path / "out"
    with pytest.raises(RuntimeError, match="worker died"):
        creator.create_pretraining_data(
            corpus_file, str(out / "w.tfrecord@2"), config(vocab_file), num_workers=0
        )
    assert calls == [(0, 0), (0, 1), (0, 2)]
    assert os.listdir(out) == []  # no shard, no temporary file


@pytest.mark.slow
def test_gensim_wikipedia_dump(wiki_path, tmp_path):
    """The real .xml.bz2, with a vocabulary learned from its own text."""
    from keras_bert_zoo.text import build_vocab, write_vocab

    sentences_file = tmp_path / "wiki.txt"
    creator.export_sentences(wiki_path, str(sentences_file), num_workers=0)
    text = sentences_file.read_text(encoding="utf-8")
    assert text.count("\n\n") == 106 and "{{" not in text
    lines = [line for line in text.split("\n") if line][:3000]
    tokens = build_vocab(
        lines,
        vocab_size=3000,
        lowercase=True,
        learn_params={
            "lower_thresh": 20,
            "upper_thresh": 21,
            "slack_ratio": 1.0,
            "num_iterations": 1,
        },
    )
    vocab = write_vocab(str(tmp_path / "vocab.txt"), tokens)
    summary = creator.create_pretraining_data(
        wiki_path,
        str(tmp_path / "wiki.tfrecord@2"),
        creator.CreationConfig(vocab_file=vocab, dupe_factor=1, random_seed=1),
        num_workers=0,
    )
    assert summary.corpus.pages == 206 and summary.corpus.redirect_pages == 99
    assert summary.corpus.non_article_pages == 1 and summary.stats.documents == 106
    assert summary.stats.instances > 5000
    records = read_records(summary.output_files, 128, 20)
    assert len(records["input_ids"]) == summary.stats.instances
    assert abs(summary.masked_fraction - 0.15) < 0.01
    assert 0.45 < summary.random_next_fraction < 0.6
    unk = tokens.index("[UNK]")
    assert np.mean(records["input_ids"][records["input_mask"] > 0] == unk) < 0.01
    # The same records through the library's reader.
    batch = next(
        iter(data_pretraining.pretraining_dataset(summary.output_files, 8, split_labels=True))
    )
    assert batch[0]["input_word_ids"].shape == (8, 128)


def test_export_sentences_of_text_input(corpus_file, corpus_documents, tmp_path):
    out = tmp_path / "sentences.txt"
    creator.export_sentences(corpus_file, str(out), num_workers=0)
    assert out.read_text(encoding="utf-8") == "".join(
        "\n".join(d) + "\n\n" for d in corpus_documents
    )


@pytest.fixture(scope="module")
def tool(load_tool):
    """tools/create_pretraining_data.py imported once (its absl flags are global)."""
    with load_tool("create_pretraining_data") as module:
        yield module


def run_tool(tool, *arguments):
    from absl import flags

    flags.FLAGS.unparse_flags()
    flags.FLAGS(["create_pretraining_data", *arguments])
    tool.main(["create_pretraining_data"])


@pytest.mark.slow
def test_tool_runs_and_reports_bad_input(tool, corpus_file, vocab_file, tmp_path, capsys):
    run_tool(
        tool,
        f"--input_file={corpus_file}",
        f"--output_file={tmp_path}/t.tfrecord@2",
        f"--vocab_file={vocab_file}",
        "--max_seq_length=64",
        "--max_predictions_per_seq=10",
        "--dupe_factor=1",
        "--num_workers=0",
    )
    assert "NSP random next" in capsys.readouterr().out
    assert len(glob.glob(f"{tmp_path}/t.tfrecord-0000?-of-00002")) == 2
    with pytest.raises(ValueError, match=r"nothing-\*\.txt"):
        run_tool(
            tool,
            f"--input_file={tmp_path}/nothing-*.txt",
            f"--output_file={tmp_path}/u.tfrecord",
            f"--vocab_file={vocab_file}",
            "--num_workers=0",
        )
    assert not os.path.exists(f"{tmp_path}/u.tfrecord")
    run_tool(
        tool,
        f"--input_file={corpus_file}",
        f"--output_text_file={tmp_path}/s.txt",
        "--num_workers=0",
    )
    assert os.path.getsize(f"{tmp_path}/s.txt") > 1000
