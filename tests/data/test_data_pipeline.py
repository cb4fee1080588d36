"""Tests for keras_bert_zoo.data.pipeline: sources, sharding, shuffling, batching."""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text as tf_text

from keras_bert_zoo.data import pipeline

VOCAB = [
    "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]",
    "the", "cat", "sat", "on", "mat", "dog", "ran", "a", "##s", "fast",
]  # fmt: skip
IDS = {token: i for i, token in enumerate(VOCAB)}


class ToyPreprocessor(tf.Module):
    """A small batched preprocessor: strings [B] -> dict of int32 [B, seq_length]."""

    def __init__(self, vocab, seq_length):
        super().__init__()
        self.seq_length = seq_length
        self.tokenizer = tf_text.FastBertTokenizer(
            vocab=vocab, token_out_type=tf.int32, lower_case_nfd_strip_accents=True
        )
        self.cls_id = vocab.index("[CLS]")
        self.sep_id = vocab.index("[SEP]")

    def __call__(self, texts):
        ids = self.tokenizer.tokenize(texts)[:, : self.seq_length - 2]
        n = ids.nrows()
        cls = tf.RaggedTensor.from_tensor(tf.fill([n, 1], self.cls_id))
        sep = tf.RaggedTensor.from_tensor(tf.fill([n, 1], self.sep_id))
        ids = tf.concat([cls, ids, sep], axis=1)
        shape = [None, self.seq_length]
        word_ids = ids.to_tensor(0, shape=shape)
        mask = tf.ones_like(ids).to_tensor(0, shape=shape)
        return {
            "input_word_ids": word_ids,
            "input_mask": mask,
            "input_type_ids": tf.zeros_like(word_ids),
        }


def expected_ids(text, seq_length):
    pieces = {"cats": ["cat", "##s"], "mats": ["mat", "##s"], "dogs": ["dog", "##s"]}
    tokens = []
    for word in text.lower().split():
        tokens.extend(pieces.get(word, [word]))
    ids = [IDS["[CLS]"]] + [IDS.get(t, IDS["[UNK]"]) for t in tokens][: seq_length - 2]
    ids.append(IDS["[SEP]"])
    return ids + [0] * (seq_length - len(ids))


SENTENCES = [
    "The cat sat on the mat",
    "a dog ran",
    "Dogs ran fast",
    "the cats sat",
    "a cat",
    "the dog sat on a mat fast fast",
    "cat",
    "mats",
]


def write_lines(path, lines):
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    return str(path)


def values(ds):
    return [x.decode() if isinstance(x, bytes) else x for x in ds.as_numpy_iterator()]


@pytest.fixture
def numbered_files(tmp_path):
    """4 files with 3, 5, 2 and 4 lines, named so that glob order != creation order."""
    sizes = [3, 5, 2, 4]
    files = []
    for f, size in enumerate(sizes):
        path = tmp_path / f"part-{f:02d}.txt"
        write_lines(path, [f"f{f} l{i}" for i in range(size)])
        files.append(str(path))
    return files


def flat(lists):
    return [x for sub in lists for x in sub]


def round_robin(lists):
    out, i = [], 0
    while any(i < len(x) for x in lists):
        out.extend(x[i] for x in lists if i < len(x))
        i += 1
    return out


def file_lines(files):
    return [[line.strip() for line in open(f) if line.strip()] for f in files]


# ------------------------------------------------------------------------ sources


def test_list_files_sorted_and_comma_patterns(tmp_path, numbered_files):
    assert pipeline.list_files(str(tmp_path / "part-*.txt")) == numbered_files
    assert pipeline.list_files(f"{numbered_files[3]},{numbered_files[0]}") == [
        numbered_files[0],
        numbered_files[3],
    ]
    with pytest.raises(ValueError, match="No files match"):
        pipeline.list_files(str(tmp_path / "missing-*"))


def test_text_line_dataset_strips_skips_empty_and_interleaves(tmp_path, numbered_files):
    single = write_lines(tmp_path / "one.txt", ["  hello world ", "", "   ", "second\t"])
    assert values(pipeline.text_line_dataset(single)) == ["hello world", "second"]
    raw = pipeline.text_line_dataset(single, strip=False, skip_empty_lines=False)
    assert values(raw) == ["  hello world ", "", "   ", "second\t"]

    ds = pipeline.text_line_dataset(str(tmp_path / "part-*.txt"))
    assert ds.element_spec == tf.TensorSpec([], tf.string)
    assert values(ds) == round_robin(file_lines(numbered_files))


def test_text_line_dataset_gzip(tmp_path):
    import gzip

    path = tmp_path / "a.txt.gz"
    with gzip.open(path, "wt") as f:
        f.write("x\ny\n")
    assert values(pipeline.text_line_dataset(str(path), compression_type="GZIP")) == [
        "x",
        "y",
    ]


def test_shard_files_when_enough_files(numbered_files):
    all_lines = file_lines(numbered_files)
    shards = []
    for i in range(2):
        ctx = tf.distribute.InputContext(
            num_input_pipelines=2, input_pipeline_id=i, num_replicas_in_sync=2
        )
        assert pipeline.shard_info(len(numbered_files), ctx) == ("files", 2, i)
        shards.append(values(pipeline.text_line_dataset(numbered_files, input_context=ctx)))
    # Worker i reads exactly files i and i + 2.
    assert shards[0] == round_robin([all_lines[0], all_lines[2]])
    assert shards[1] == round_robin([all_lines[1], all_lines[3]])
    assert not set(shards[0]) & set(shards[1])
    assert sorted(shards[0] + shards[1]) == sorted(flat(all_lines))


def test_shard_records_when_fewer_files_than_workers(numbered_files):
    files = numbered_files[:2]
    lines = file_lines(files)
    shards = []
    for i in range(3):
        ctx = tf.distribute.InputContext(3, i, 3)
        assert pipeline.shard_info(2, ctx) == ("records", 3, i)
        # Shuffled file order must not break disjointness: records are sharded per file.
        shards.append(
            values(pipeline.text_line_dataset(files, input_context=ctx, shuffle=True, seed=100 + i))
        )
    for i, shard in enumerate(shards):
        assert sorted(shard) == sorted(lines[0][i::3] + lines[1][i::3])
    assert sorted(flat(shards)) == sorted(flat(lines))
    assert len(set(flat(shards))) == len(flat(lines))


def test_no_sharding_without_context_or_single_pipeline():
    assert pipeline.shard_info(1, None) == ("none", 1, 0)
    assert pipeline.shard_info(1, tf.distribute.InputContext(1, 0, 8)) == ("none", 1, 0)


def test_tfrecord_dataset_parses_and_shards(tmp_path):
    paths = []
    for f in range(3):
        path = str(tmp_path / f"r-{f}.tfrecord")
        with tf.io.TFRecordWriter(path) as w:
            for i in range(4):
                ex = tf.train.Example(
                    features=tf.train.Features(
                        feature={
                            "x": tf.train.Feature(int64_list=tf.train.Int64List(value=[f * 10 + i]))
                        }
                    )
                )
                w.write(ex.SerializeToString())
        paths.append(path)

    def parse(record):
        return tf.io.parse_single_example(record, {"x": tf.io.FixedLenFeature([], tf.int64)})["x"]

    ds = pipeline.tfrecord_dataset(str(tmp_path / "r-*.tfrecord"), parse)
    assert [int(x) for x in ds.as_numpy_iterator()] == round_robin(
        [[f * 10 + i for i in range(4)] for f in range(3)]
    )
    shard1 = pipeline.tfrecord_dataset(paths, parse, input_context=tf.distribute.InputContext(2, 1))
    assert [int(x) for x in shard1.as_numpy_iterator()] == [10, 11, 12, 13]
    # Batched parsing through make_plain_batches gives the same values.
    batched = pipeline.make_plain_batches(
        pipeline.tfrecord_dataset(paths),
        lambda r: tf.io.parse_example(r, {"x": tf.io.FixedLenFeature([], tf.int64)})["x"],
        batch_size=5,
    )
    assert np.concatenate(list(batched.as_numpy_iterator())).tolist() == [
        int(x) for x in ds.as_numpy_iterator()
    ]


# ---------------------------------------------------------------------- shuffling


def shuffled(files, seed, epochs=2, shuffle_files=True):
    src = pipeline.text_line_dataset(files, shuffle=shuffle_files, seed=seed)
    ds = pipeline.make_plain_batches(src, None, 1, shuffle_buffer=64, seed=seed, repeat=epochs)
    return [x[0].decode() for x in ds.as_numpy_iterator()]


def test_seeded_shuffle_is_reproducible_and_seed_dependent(numbered_files):
    everything = sorted(flat(file_lines(numbered_files)))
    a = shuffled(numbered_files, seed=7)
    b = shuffled(numbered_files, seed=7)
    c = shuffled(numbered_files, seed=8)
    n = len(everything)
    assert a == b
    assert a != c
    for order in (a, c):
        assert sorted(order[:n]) == everything and sorted(order[n:]) == everything
    assert a[:n] != a[n:]  # reshuffled each epoch, still reproducible
    assert a[:n] != round_robin(file_lines(numbered_files))


def test_file_shuffle_is_seeded(numbered_files):
    def order(seed):
        return values(pipeline.text_line_dataset(numbered_files, shuffle=True, seed=seed))

    orders = {tuple(order(s)) for s in range(6)}
    assert order(3) == order(3)
    assert len(orders) > 1


def test_deterministic_option_is_set(numbered_files):
    src = pipeline.text_line_dataset(numbered_files, deterministic=True)
    assert src.options().deterministic is True
    ds = pipeline.make_plain_batches(src, None, 2, deterministic=False)
    assert ds.options().deterministic is False


# ----------------------------------------------------------------------- batching


def test_make_plain_batches_preprocesses_whole_batches(tmp_path):
    path = write_lines(tmp_path / "s.txt", SENTENCES)
    prep = ToyPreprocessor(VOCAB, 8)
    calls = []

    def counting(texts):
        calls.append(texts.shape)
        return prep(texts)

    ds = pipeline.make_plain_batches(pipeline.text_line_dataset(path), counting, 3)
    batches = list(ds.as_numpy_iterator())
    assert calls and all(shape.rank == 1 for shape in calls)  # traced on batches
    assert [b["input_word_ids"].shape for b in batches] == [(3, 8), (3, 8), (2, 8)]
    word_ids = np.concatenate([b["input_word_ids"] for b in batches])
    np.testing.assert_array_equal(word_ids, [expected_ids(s, 8) for s in SENTENCES])
    mask = np.concatenate([b["input_mask"] for b in batches])
    np.testing.assert_array_equal(mask, (word_ids != 0).astype(np.int32))
    assert all(b["input_word_ids"].dtype == np.int32 for b in batches)

    dropped = pipeline.make_plain_batches(
        pipeline.text_line_dataset(path), prep, 3, drop_remainder=True
    )
    assert dropped.element_spec["input_word_ids"].shape.as_list() == [3, 8]
    assert len(list(dropped)) == 2


def test_make_plain_batches_with_labels_and_pad_to_longest():
    texts = ["a cat", "the cat sat on the mat", "cat", "dog", "a dog ran", "the"]
    labels = list(range(len(texts)))
    prep = ToyPreprocessor(VOCAB, 16)
    src = tf.data.Dataset.from_tensor_slices((texts, labels))
    ds = pipeline.make_plain_batches(
        src, lambda t, y: (prep(t), y), batch_size=3, pad_to_longest=True, cache=True
    )
    batches = list(ds.as_numpy_iterator())
    # Longest per batch: [CLS] the cat sat on the mat [SEP] = 8; [CLS] a dog ran [SEP] = 5.
    assert [b[0]["input_word_ids"].shape for b in batches] == [(3, 8), (3, 5)]
    assert [b[0]["input_mask"].shape for b in batches] == [(3, 8), (3, 5)]
    np.testing.assert_array_equal(batches[1][0]["input_word_ids"], [
        expected_ids("dog", 5), expected_ids("a dog ran", 5), expected_ids("the", 5)
    ])  # fmt: skip
    assert np.concatenate([b[1] for b in batches]).tolist() == labels
    # Caching does not change a second epoch.
    assert [b[1].tolist() for b in ds.as_numpy_iterator()] == [[0, 1, 2], [3, 4, 5]]


def test_cache_to_file(tmp_path):
    src = tf.data.Dataset.range(5)
    prefix = str(tmp_path / "cache" / "c")
    os.makedirs(os.path.dirname(prefix))
    ds = pipeline.make_plain_batches(src, lambda x: x * 2, 2, cache=prefix)
    assert [b.tolist() for b in ds.as_numpy_iterator()] == [[0, 2], [4, 6], [8]]
    assert any(name.startswith("c") for name in os.listdir(tmp_path / "cache"))


def test_trim_to_longest_leaves_other_features():
    batch = {
        "input_word_ids": tf.constant([[2, 5, 3, 0, 0, 0], [2, 3, 0, 0, 0, 0]]),
        "input_mask": tf.constant([[1, 1, 1, 0, 0, 0], [1, 1, 0, 0, 0, 0]]),
        "masked_lm_positions": tf.constant([[1, 0, 0, 0], [0, 0, 0, 0]]),
    }
    out = pipeline.trim_to_longest(batch)
    assert out["input_word_ids"].numpy().tolist() == [[2, 5, 3], [2, 3, 0]]
    assert out["input_mask"].shape == (2, 3)
    assert out["masked_lm_positions"].shape == (2, 4)
    single = pipeline.trim_to_longest({k: v[0] for k, v in batch.items()})
    assert single["input_word_ids"].numpy().tolist() == [2, 5, 3]
    with pytest.raises(ValueError):
        pipeline.trim_to_longest({"x": tf.zeros([2, 3])})


def test_bucketing_groups_similar_lengths():
    rng = np.random.default_rng(0)
    words = ["the", "cat", "sat", "on", "mat", "dog", "ran", "a", "fast"]
    texts = [" ".join(rng.choice(words, size=int(n))) for n in rng.integers(1, 14, size=60)]
    prep = ToyPreprocessor(VOCAB, 16)
    src = tf.data.Dataset.from_tensor_slices((texts, np.arange(60)))
    boundaries = [6, 11]  # lengths (with [CLS]/[SEP]) 3-5 | 6-10 | 11-15
    ds = pipeline.make_bucketed_batches(
        src,
        lambda t, y: (prep(t), y),
        batch_size=4,
        bucket_boundaries=boundaries,
        preprocess_chunk_size=16,
    )
    seen = []
    for features, ids in ds.as_numpy_iterator():
        lengths = features["input_mask"].sum(axis=1)
        buckets = np.searchsorted(boundaries, lengths, side="right")
        assert len(set(buckets.tolist())) == 1, lengths
        assert features["input_word_ids"].shape[1] == lengths.max()  # padded to longest
        for row, i in zip(features["input_word_ids"], ids, strict=True):
            full = expected_ids(texts[i], 16)
            np.testing.assert_array_equal(row, full[: len(row)])
        seen.extend(ids.tolist())
    assert sorted(seen) == list(range(60))

    to_boundary = pipeline.make_bucketed_batches(
        src,
        lambda t, y: (prep(t), y),
        batch_size=4,
        bucket_boundaries=boundaries + [17],  # every length must be < the last one
        pad_to_bucket_boundary=True,
        drop_remainder=True,
    )
    widths = {f["input_word_ids"].shape[1] for f, _ in to_boundary.as_numpy_iterator()}
    assert widths <= {5, 10, 16} and len(widths) > 1  # boundary - 1
    with pytest.raises(ValueError, match="increase"):
        pipeline.make_bucketed_batches(src, None, 4, bucket_boundaries=[5, 5])


def test_deprecated_make_batches_dispatches_to_both_builders():
    """`make_batches` (one release more) gives what the builder of its mode gives."""
    texts = ["the cat", "a dog ran fast", "the mat", "on", "a cat sat on the mat", "dog"]
    prep = ToyPreprocessor(VOCAB, 16)
    src = tf.data.Dataset.from_tensor_slices(texts)

    def values(ds):
        return [b["input_word_ids"].tolist() for b in ds.as_numpy_iterator()]

    plain = dict(batch_size=4, shuffle_buffer=8, seed=3, pad_to_longest=True)
    bucketed = dict(batch_size=2, bucket_boundaries=[5], preprocess_chunk_size=3)
    with pytest.warns(DeprecationWarning, match="make_plain_batches"):
        old_plain = pipeline.make_batches(src, prep, **plain)
    with pytest.warns(DeprecationWarning):
        old_bucketed = pipeline.make_batches(src, prep, **bucketed)
    assert values(old_plain) == values(pipeline.make_plain_batches(src, prep, **plain))
    assert values(old_bucketed) == values(pipeline.make_bucketed_batches(src, prep, **bucketed))
    with pytest.warns(DeprecationWarning), pytest.raises(ValueError, match="not both"):
        pipeline.make_batches(src, prep, bucket_boundaries=[5], pad_to_longest=True)


# ------------------------------------------------------------------ tensorflow-datasets


@pytest.fixture(scope="module")
def tiny_tfds(tmp_path_factory):
    import tensorflow_datasets as tfds

    class TinyTextDataset(tfds.core.GeneratorBasedBuilder):
        """Twenty labelled sentences, built locally."""

        VERSION = tfds.core.Version("1.0.0")

        def _info(self):
            return tfds.core.DatasetInfo(
                builder=self,
                features=tfds.features.FeaturesDict(
                    {
                        "text": tfds.features.Text(),
                        "label": tfds.features.ClassLabel(num_classes=2),
                    }
                ),
                supervised_keys=("text", "label"),
            )

        def _split_generators(self, dl_manager):
            return {"train": self._generate_examples(20)}

        def _generate_examples(self, n):
            for i in range(n):
                yield (
                    i,
                    {"text": f"{SENTENCES[i % len(SENTENCES)]} {i}", "label": i % 2},
                )

    data_dir = str(tmp_path_factory.mktemp("tfds"))
    one = TinyTextDataset(data_dir=data_dir)
    one.download_and_prepare()
    sharded_dir = str(tmp_path_factory.mktemp("tfds_sharded"))
    four = TinyTextDataset(data_dir=sharded_dir)
    four.download_and_prepare(download_config=tfds.download.DownloadConfig(num_shards=4))
    return {"one": one, "four": four, "data_dir": data_dir, "name": one.name}


def texts_of(ds):
    return [ex["text"].decode() for ex in ds.as_numpy_iterator()]


def test_tfds_dataset_reads_local_build_without_download(tiny_tfds):
    ds = pipeline.tfds_dataset(tiny_tfds["name"], "train", data_dir=tiny_tfds["data_dir"])
    got = texts_of(ds)
    assert sorted(got) == sorted(f"{SENTENCES[i % len(SENTENCES)]} {i}" for i in range(20))
    sup = pipeline.tfds_dataset(tiny_tfds["one"], "train[:5]", as_supervised=True)
    pairs = list(sup.as_numpy_iterator())
    assert len(pairs) == 5 and all(int(t.split()[-1]) % 2 == y for t, y in pairs)
    # Through make_plain_batches with the preprocessor.
    prep = ToyPreprocessor(VOCAB, 12)
    batches = pipeline.make_plain_batches(sup, lambda t, y: (prep(t), y), 5)
    (features, _), *_ = batches.as_numpy_iterator()
    np.testing.assert_array_equal(
        features["input_word_ids"], [expected_ids(t.decode(), 12) for t, _ in pairs]
    )


def test_tfds_dataset_refuses_to_download(tiny_tfds, tmp_path):
    with pytest.raises(FileNotFoundError, match="not prepared"):
        pipeline.tfds_dataset(tiny_tfds["name"], "train", data_dir=str(tmp_path / "empty"))


def test_tfds_dataset_shards_records_or_files(tiny_tfds):
    full = texts_of(pipeline.tfds_dataset(tiny_tfds["one"], "train"))
    for key, mode in (("one", "records"), ("four", "files")):
        builder = tiny_tfds[key]
        shards = []
        for i in range(2):
            ctx = tf.distribute.InputContext(2, i, 2)
            n_files = builder.info.splits["train"].num_shards
            assert pipeline.shard_info(n_files, ctx)[0] == mode
            shards.append(texts_of(pipeline.tfds_dataset(builder, "train", input_context=ctx)))
        assert not set(shards[0]) & set(shards[1])
        assert sorted(shards[0] + shards[1]) == sorted(full)
        assert len(shards[0]) == 10 if mode == "records" else len(shards[0]) > 0
    with pytest.raises(ValueError, match="records"):
        pipeline.tfds_dataset(
            tiny_tfds["one"],
            "train",
            input_context=tf.distribute.InputContext(2, 0),
            shuffle=True,
        )


def test_tfds_dataset_seeded_file_shuffle(tiny_tfds):
    def order(seed):
        return texts_of(pipeline.tfds_dataset(tiny_tfds["four"], "train", shuffle=True, seed=seed))

    assert order(1) == order(1)
    assert len({tuple(order(s)) for s in range(5)}) > 1


# ---------------------------------------------------------------------- distribution


def test_distributed_dataset_fn_per_replica_batches(numbered_files):
    lines = flat(file_lines(numbered_files))
    prep = ToyPreprocessor(VOCAB, 8)
    fn = pipeline.distributed_dataset_fn(
        lambda ctx: tf.data.Dataset.zip(
            pipeline.text_line_dataset(numbered_files, input_context=ctx),
            pipeline.text_line_dataset(numbered_files, input_context=ctx),
        ),
        global_batch_size=8,
        preprocess_fn=lambda t, raw: (prep(t), raw),
    )
    got = []
    for i in range(2):
        ctx = tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=i,
                                         num_replicas_in_sync=4)  # fmt: skip
        batches = list(fn(ctx).as_numpy_iterator())
        assert max(b[0]["input_word_ids"].shape[0] for b in batches) == 2  # 8 / 4 replicas
        got.extend(x.decode() for b in batches for x in b[1])
    assert sorted(got) == sorted(lines)
    assert [b.shape for b in fn(None).map(lambda f, r: r).as_numpy_iterator()] == [
        (8,),
        (6,),
    ]


MIRRORED_SCRIPT = textwrap.dedent(
    """
    import json, sys
    import tensorflow as tf
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration(), tf.config.LogicalDeviceConfiguration()])
    from keras_bert_zoo.data import pipeline
    path, = sys.argv[1:]
    out = {}
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    contexts = []
    def source(ctx):
        contexts.append([ctx.num_input_pipelines, ctx.input_pipeline_id, ctx.num_replicas_in_sync])
        return pipeline.text_line_dataset(path, input_context=ctx)
    fn = pipeline.distributed_dataset_fn(
        source, global_batch_size=6,
        preprocess_fn=lambda t: {"n": tf.strings.to_number(t, tf.int32)}, drop_remainder=True)
    dist = strategy.distribute_datasets_from_function(fn)
    replicas = []
    @tf.function
    def step(batch):
        return strategy.run(lambda b: tf.shape(b["n"])[0], args=(batch,))
    sizes = []
    for batch in dist:
        local = strategy.experimental_local_results(batch)
        replicas.append([r["n"].numpy().tolist() for r in local])
        sizes.append([int(s) for s in strategy.experimental_local_results(step(batch))])
    out["num_replicas"] = strategy.num_replicas_in_sync
    out["contexts"] = contexts
    out["replicas"] = replicas
    out["step_sizes"] = sizes
    # Seeded shuffle order, to compare with the parent process.
    ds = pipeline.make_plain_batches(
        pipeline.text_line_dataset(path), None, 4, shuffle_buffer=50, seed=11, repeat=2)
    out["shuffled"] = [x.decode() for b in ds.as_numpy_iterator() for x in b]
    print("RESULT" + json.dumps(out))
    """
)


@pytest.fixture(scope="module")
def mirrored_result(tmp_path_factory):
    path = write_lines(tmp_path_factory.mktemp("mirrored") / "n.txt", [str(i) for i in range(27)])
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ, PYTHONPATH=repo + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    proc = subprocess.run(
        [sys.executable, "-c", MIRRORED_SCRIPT, path],
        check=False,
        capture_output=True,
        text=True,
        env=env,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = [x for x in proc.stdout.splitlines() if x.startswith("RESULT")][-1]
    return path, json.loads(line[len("RESULT") :])


@pytest.mark.slow
def test_mirrored_strategy_on_two_cpus_gets_per_replica_batches(mirrored_result):
    _, out = mirrored_result
    assert out["num_replicas"] == 2
    assert out["contexts"] == [[1, 0, 2]]  # one input pipeline feeding two replicas
    # 27 lines, global batch 6 -> per-replica batch 3, drop_remainder -> 4 steps.
    assert len(out["replicas"]) == 4
    assert all(len(r) == 2 and all(len(x) == 3 for x in r) for r in out["replicas"])
    assert out["step_sizes"] == [[3, 3]] * 4
    flat = [x for step in out["replicas"] for r in step for x in r]
    assert sorted(flat) == list(range(24))


@pytest.mark.slow
def test_seeded_shuffle_is_identical_across_processes(mirrored_result):
    path, out = mirrored_result
    ds = pipeline.make_plain_batches(
        pipeline.text_line_dataset(path), None, 4, shuffle_buffer=50, seed=11, repeat=2
    )
    here = [x.decode() for b in ds.as_numpy_iterator() for x in b]
    assert here == out["shuffled"]
    assert here[:27] != [str(i) for i in range(27)]


# ------------------------------------------------------------ same fn in a SavedModel


def test_preprocessor_same_in_pipeline_and_saved_model(tmp_path):
    prep = ToyPreprocessor(VOCAB, 10)
    path = write_lines(tmp_path / "s.txt", SENTENCES)
    from_pipeline = list(
        pipeline.make_plain_batches(pipeline.text_line_dataset(path), prep, 4).as_numpy_iterator()
    )

    module = tf.Module()
    module.prep = prep
    module.serve = tf.function(
        lambda texts: prep(texts), input_signature=[tf.TensorSpec([None], tf.string)]
    )
    export = str(tmp_path / "export")
    tf.saved_model.save(module, export, signatures={"preprocess": module.serve})
    loaded = tf.saved_model.load(export)
    for i, batch in enumerate(from_pipeline):
        served = loaded.signatures["preprocess"](texts=tf.constant(SENTENCES[4 * i : 4 * i + 4]))
        for key in ("input_word_ids", "input_mask", "input_type_ids"):
            np.testing.assert_array_equal(served[key].numpy(), batch[key])
