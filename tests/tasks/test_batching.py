"""No padding computed: `--batching=bucketed` batches (`data.bucketing`, `tasks.datasets`)
and sorted, trimmed prediction (`tasks.prediction`), family by family against the padded
batches they replace.

For every task family (sentences, pairs, regression, multi-label, long-document windows,
tagging, spans, multiple choice, and the distiller of the per-position ones), on tiny
random models without dropout:

- a trimmed batch holds the padded batch's examples, its per-position features (tags,
  token metadata) cut with the inputs, and gives the padded batch's loss (through the
  job's loss function) and outputs at every kept position, within 1e-5;
- prediction on sorted, trimmed batches returns the padded run's outputs and answers, in
  the input's order, from one trace of the model.

And for training: the stream of bucketed batches is a deterministic function of the step
(a skipped pipeline gives the batches an uninterrupted one gives), its batches are full,
the `Trainer` traces its loop once for every length, and a run resumed from a checkpoint
ends with the weights of an uninterrupted one, bit for bit.
"""

import pathlib
import random
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_bert_zoo import tasks
from keras_bert_zoo.data.bucketing import length_buckets, length_grouped, trim_batch
from keras_bert_zoo.models import BertEncoder
from keras_bert_zoo.runners.loss_and_weights import model_loss_fn
from keras_bert_zoo.tasks import datasets, prediction
from keras_bert_zoo.text import BertTokenizer

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import sentence_fixtures as fixtures  # noqa: E402
from qa_test_helpers import load_local_module, write_squad  # noqa: E402

squad_tests = load_local_module("test_question_answering_end_to_end.py")
tagging_tests = load_local_module("test_tagging.py")
choice_tests = load_local_module("test_multiple_choice.py")

FAMILIES = (
    "sentences",
    "pairs",
    "regression",
    "multi_label",
    "windows",
    "tagging",
    "spans",
    "multiple_choice",
)
BATCH = 4


def _write_rows(path, rows):
    lines = ["text\tlabel"] + [f"{text}\t{label}" for text, label in rows]
    pathlib.Path(path).write_text("\n".join(lines) + "\n", encoding="utf-8")


def _family_task(name, root):
    """`(task, examples, vocabulary)` of family `name`, its files written under `root`."""
    rng = random.Random(0)
    if name in ("sentences", "pairs", "regression"):
        fixtures.write_glue(str(root))
        glue = {"sentences": ("glue/sst2", "SST-2"), "pairs": ("glue/mrpc", "MRPC")}
        glue["regression"] = ("glue/stsb", "STS-B")
        task_name, folder = glue[name]
        task = tasks.create_task(task_name, data_dir=str(root / folder), max_seq_length=48)
        return task, task.read("train"), fixtures.VOCABULARY
    if name == "multi_label":
        rows = []
        for index in range(12):
            keywords = ["good", "bad", "maybe"][: 1 + index % 3]
            text = " ".join(fixtures.long_document(rng, rng.randint(2, 10), k)[0] for k in keywords)
            rows.append((text, ",".join(keywords)))
        _write_rows(root / "labels.tsv", rows)
        task = tasks.create_task(
            "text_classification",
            data_dir=str(root),
            max_seq_length=48,
            train_file="labels.tsv",
            multi_label=True,
        )
        return task, task.read("train"), fixtures.VOCABULARY
    if name == "windows":
        rows = [
            (fixtures.long_document(rng, rng.randint(4, 60), "good")[0], str(i % 2))
            for i in range(10)
        ]
        _write_rows(root / "documents.tsv", rows)
        task = tasks.create_task(
            "text_classification",
            data_dir=str(root),
            max_seq_length=32,
            train_file="documents.tsv",
            long_documents="windows",
            window_stride=12,
        )
        return task, task.read("train"), fixtures.VOCABULARY
    if name == "tagging":
        tagging_tests.write_conll(root / "eng.train", tagging_tests.make_sentences(0, 14))
        task = tasks.create_task(
            "conll2003", data_dir=str(root), max_seq_length=64, window_stride=16
        )
        return task, task.read("train"), tagging_tests.VOCAB
    if name == "spans":
        write_squad(root / "train-v1.1.json", squad_tests.make_paragraphs(rng, 6, False))
        task = tasks.create_task(
            "squad_v1.1",
            data_dir=str(root),
            max_seq_length=128,
            max_query_length=16,
            doc_stride=32,
        )
        return task, task.read("train"), squad_tests.vocabulary()
    if name == "multiple_choice":
        choice_tests.write_swag(root / "train.csv", choice_tests.swag_rows(0, 12))
        task = tasks.create_task("swag", data_dir=str(root), max_seq_length=96)
        return task, task.read("train"), choice_tests.VOCAB
    raise ValueError(name)


def _without_dropout(model):
    """`model` with every dropout rate 0: training passes give the same outputs."""
    for layer in model._flatten_layers():  # noqa: SLF001
        if isinstance(layer, keras.layers.Dropout):
            layer.rate = 0.0
    for sublayer in model._flatten_layers():  # noqa: SLF001
        for name in ("hidden_dropout", "attention_dropout", "dropout_rate"):
            if isinstance(getattr(sublayer, name, None), float):
                setattr(sublayer, name, 0.0)
    return model


def _tiny_model(task, vocabulary, seed=0):
    keras.utils.set_random_seed(seed)
    encoder = BertEncoder(
        vocab_size=len(vocabulary),
        hidden_size=16,
        num_layers=1,
        num_heads=2,
        intermediate_size=32,
        max_position_embeddings=128,
        hidden_dropout=0.0,
        attention_dropout=0.0,
    )
    model = _without_dropout(task.build_model(encoder))
    model.compile(optimizer="sgd", loss=task.loss())
    return model


class Family:
    def __init__(self, name, root):
        self.name = name
        self.task, self.examples, vocabulary = _family_task(name, root)
        self.preprocessor = self.task.make_preprocessor(BertTokenizer(vocabulary, lowercase=True))
        self.model = _tiny_model(self.task, vocabulary)
        self.vocabulary = vocabulary
        # The features once (tokenizing traces the preprocessor: seconds a dataset).
        rows = list(self.task.features(self.examples, self.preprocessor, training=False))
        self.stacked = {key: np.stack([np.asarray(r[key]) for r in rows]) for key in rows[0]}

    def features(self):
        return tf.data.Dataset.from_tensor_slices(self.stacked)

    def batches(self, batching):
        return datasets.batched_dataset(
            self.task, (), None, BATCH, batching=batching, features=self.features()
        )


# One `Family` per name for the whole file (its features cost a preprocessor trace):
# the tests read it; the one that trains makes its own models.
_FAMILIES = {}


def _family(name, tmp_path_factory):
    if name not in _FAMILIES:
        _FAMILIES[name] = Family(name, tmp_path_factory.mktemp(name))
    return _FAMILIES[name]


@pytest.fixture(scope="module", params=FAMILIES)
def family(request, tmp_path_factory):
    return _family(request.param, tmp_path_factory)


def _split(task, batch):
    return task.split_features({key: tf.convert_to_tensor(value) for key, value in batch.items()})


def _assert_close_at_kept_positions(trimmed, padded, mask, atol=1e-5):
    """Outputs equal at every position of the trimmed batch (all of a per-example one)."""
    trimmed, padded = np.asarray(trimmed, np.float64), np.asarray(padded, np.float64)
    if trimmed.shape != padded.shape:  # a sequence axis: the mask's last
        axis = np.ndim(mask) - 1
        padded = np.take(padded, np.arange(trimmed.shape[axis]), axis=axis)
    np.testing.assert_allclose(trimmed, padded, atol=atol, rtol=1e-5)


# === Trimmed batches ===


@pytest.mark.slow
def test_trimmed_batches_hold_the_padded_examples_loss_and_outputs(family):
    task, model = family.task, family.model
    padded_length = task.max_seq_length
    buckets = length_buckets(padded_length)
    loss_fn = model_loss_fn(model)
    trimmed_lengths = set()
    for trimmed, padded in zip(
        family.batches("bucketed").as_numpy_iterator(),
        family.batches("padded").as_numpy_iterator(),
        strict=True,
    ):
        mask = padded["input_mask"]
        length = trimmed["input_mask"].shape[-1]
        trimmed_lengths.add(length)
        real = (mask != 0).sum(axis=-1).max()
        assert (
            length in buckets and real <= length and length == min(b for b in buckets if b >= real)
        )
        # Every feature: the padded one, cut along the sequence axis when per position.
        assert trimmed.keys() == padded.keys()
        for key, value in padded.items():
            cut = value[..., :length] if key == "input_mask" else value
            if value.shape[: mask.ndim] == mask.shape and key != "input_mask":
                cut = np.take(value, np.arange(length), axis=mask.ndim - 1)
                assert trimmed[key].shape[mask.ndim - 1] == length, key
            np.testing.assert_array_equal(trimmed[key], cut, err_msg=key)
        # The real tokens are all kept: dropped columns were padding only.
        assert not np.take(mask, np.arange(length, mask.shape[-1]), axis=mask.ndim - 1).any()
        # The loss the job trains on, and the outputs (no dropout: the model's own).
        losses, outputs = [], []
        for batch in (trimmed, padded):
            loss, y_pred = loss_fn(model, *_split(task, batch))
            losses.append(float(loss))
            outputs.append(y_pred)
        assert losses[0] == pytest.approx(losses[1], abs=1e-5, rel=1e-5), family.name
        tf.nest.map_structure(
            lambda t, p, mask=mask: _assert_close_at_kept_positions(t, p, mask), *outputs
        )
    assert min(trimmed_lengths) < padded_length or family.name == "windows", trimmed_lengths


@pytest.mark.slow
@pytest.mark.parametrize("name", ["tagging", "spans"])
def test_a_distillers_loss_is_the_same_on_trimmed_batches(name, tmp_path_factory):
    """The distiller of a per-position head (token classes, span positions), with every
    term: the same loss on the trimmed batch as on the padded one. (A sentence head's
    soft targets are per example: its family's test covers the student's loss.)"""
    from keras_bert_zoo.models.distillation import TaskDistiller

    case = _family(name, tmp_path_factory)
    # The teacher: the family's model made again (the distiller freezes its teacher).
    teacher = _tiny_model(case.task, case.vocabulary)
    student = _tiny_model(case.task, case.vocabulary, seed=1)
    distiller = TaskDistiller(
        teacher,
        student,
        case.task.soft_targets(),
        temperature=2.0,
        hidden_state_weight=1.0,
        attention_weight=1.0,
    )
    distiller.compile(optimizer="sgd", loss=case.task.loss())
    loss_fn = model_loss_fn(distiller)
    for trimmed, padded in zip(
        case.batches("bucketed").as_numpy_iterator(),
        case.batches("padded").as_numpy_iterator(),
        strict=True,
    ):
        losses = [
            float(loss_fn(distiller, *_split(case.task, batch))[0]) for batch in (trimmed, padded)
        ]
        assert losses[0] == pytest.approx(losses[1], abs=1e-5, rel=1e-5)


# === Prediction: sorted, trimmed, in the input's order ===


@pytest.mark.slow
def test_prediction_on_sorted_trimmed_batches_answers_in_the_input_order(family):
    task, model, examples = family.task, family.model, family.examples
    outputs, meta = prediction.predict_raw(
        task, model, examples, family.preprocessor, batch_size=3, batching="bucketed"
    )
    answers = task.postprocess(outputs, meta, examples)
    # The padded run, on the same features (tokenized once in the fixture).
    padded = list(prediction.outputs_by_batch(task, model, family.features(), 3, batching="padded"))
    padded_outputs = prediction._concatenate([o for _, o in padded])  # noqa: SLF001
    padded_meta = prediction._concatenate([task.feature_meta(b) for b, _ in padded])  # noqa: SLF001
    padded_answers = task.postprocess(padded_outputs, padded_meta, examples)
    tf.nest.map_structure(np.testing.assert_array_equal, meta, padded_meta)
    mask = family.stacked["input_mask"]
    # The features were out of length order, so the sorted batches reordered them.
    lengths = (mask != 0).reshape(len(mask), -1).sum(axis=1)
    assert (np.diff(lengths) < 0).any()

    def same_at_real_positions(trimmed, padded):
        trimmed, padded = np.asarray(trimmed), np.asarray(padded)
        assert trimmed.shape == padded.shape  # sequence axes padded back
        if trimmed.ndim >= 2 and trimmed.shape[1] == mask.shape[-1] and mask.ndim == 2:
            real = np.broadcast_to(
                mask.reshape(mask.shape + (1,) * (trimmed.ndim - 2)) != 0, trimmed.shape
            )
            np.testing.assert_allclose(trimmed[real], padded[real], atol=1e-5, rtol=1e-5)
        else:
            np.testing.assert_allclose(trimmed, padded, atol=1e-5, rtol=1e-5)

    tf.nest.map_structure(same_at_real_positions, outputs, padded_outputs)
    assert len(answers) == len(padded_answers) == len(examples)
    for answer, padded_answer in zip(answers, padded_answers, strict=True):
        _assert_same_answer(answer, padded_answer)
    # One trace of the model for every length (and the padded run's own).
    forwards = prediction._TRIMMED_FUNCTIONS[model]  # noqa: SLF001
    assert [f.function.experimental_get_tracing_count() for f in forwards.values()] == [1]


def _assert_same_answer(answer, padded):
    if isinstance(answer, tuple | list) and all(isinstance(a, str) for a in answer):
        assert answer == padded  # tags
        return
    for field in ("label", "labels", "example_id", "text", "start", "end"):
        if hasattr(answer, field):
            assert getattr(answer, field) == getattr(padded, field), field
    for field in ("probabilities", "scores", "score", "best_score"):
        got, want = getattr(answer, field, None), getattr(padded, field, None)
        if isinstance(got, dict):
            got, want = list(got.values()), [want[key] for key in got]
        if got is not None:
            np.testing.assert_allclose(got, want, atol=1e-5, err_msg=field)


# === Training: a deterministic stream, one trace, exact resume ===


def _bucketed_training(tmp_path_factory):
    """Texts of 5 to 40 pieces (multi-label sentences), in bucketed training batches."""
    case = _family("multi_label", tmp_path_factory)
    return case, datasets.training_dataset_fn(
        case.task, (), None, BATCH, seed=3, batching="bucketed", features_fn=case.features
    )


def test_the_bucketed_stream_is_full_deterministic_and_skips_exactly(tmp_path_factory):
    case, dataset_fn = _bucketed_training(tmp_path_factory)
    spec = dataset_fn(None).element_spec
    assert spec[0]["input_word_ids"].shape.as_list() == [BATCH, None]
    whole = [x["input_word_ids"] for x, _ in dataset_fn(None).take(12).as_numpy_iterator()]
    skipped = [x["input_word_ids"] for x, _ in dataset_fn(None).skip(7).take(5).as_numpy_iterator()]
    for a, b in zip(whole[7:], skipped, strict=True):
        np.testing.assert_array_equal(a, b)
    assert {len(batch) for batch in whole} == {BATCH}
    assert 1 < len({batch.shape[1] for batch in whole}) <= len(length_buckets(48))
    # Each input pipeline groups its own shard (every other feature here).
    context = tf.distribute.InputContext(
        num_input_pipelines=2, input_pipeline_id=1, num_replicas_in_sync=2
    )
    shard = dataset_fn(context).take(3)
    assert all(len(x["input_word_ids"]) == BATCH // 2 for x, _ in shard)


def test_length_grouped_sorts_windows_and_keeps_every_example():
    lengths = np.array([5, 1, 9, 3, 7, 2, 8, 4, 6, 10, 11, 12], np.int32)
    mask = (np.arange(16)[None, :] < lengths[:, None]).astype(np.int32)
    features = {"input_mask": mask, "index": np.arange(len(lengths))}
    batches = list(
        length_grouped(
            tf.data.Dataset.from_tensor_slices(features), 2, window_batches=3, seed=0
        ).as_numpy_iterator()
    )
    assert [len(b["index"]) for b in batches] == [2] * 6
    for window in range(2):  # each window's batches hold its rows, sorted within batches
        rows = np.concatenate([b["index"] for b in batches[3 * window : 3 * window + 3]])
        assert sorted(rows) == list(range(6 * window, 6 * window + 6))
        grouped = sorted(lengths[b["index"]].tolist() for b in batches[3 * window : 3 * window + 3])
        flat = sorted(lengths[rows].tolist())
        assert grouped == [flat[0:2], flat[2:4], flat[4:6]]
    trimmed = trim_batch(
        {"input_mask": tf.constant(mask[:2]), "index": tf.constant([0, 1])},
        length_buckets(16),
    )
    assert trimmed["input_mask"].shape == (2, 16) and trimmed["index"].shape == (2,)
    assert length_buckets(128) == (16, 32, 48, 64, 80, 96, 112, 128)
    assert length_buckets(384)[-4:] == (192, 256, 320, 384) and len(length_buckets(512)) == 14
    assert length_buckets(40) == (16, 32, 40)


@pytest.mark.slow
def test_the_trainer_traces_once_and_resumes_bit_for_bit_on_bucketed_batches(
    tmp_path, tmp_path_factory
):
    from keras_bert_zoo.training import Trainer

    case, dataset_fn = _bucketed_training(tmp_path_factory)

    def trainer(directory):
        model = _tiny_model(case.task, case.vocabulary)
        model.compile(optimizer=keras.optimizers.Adam(1e-3), loss=case.task.loss())
        return Trainer(
            model,
            model_dir=str(tmp_path / directory),
            steps_per_loop=4,
            checkpoint_every=4,
            progress="none",
            loss_fn=model_loss_fn(model),
        )

    whole = trainer("whole")
    whole.train(dataset_fn, 8, input_state="skip")
    # One trace of the loop for the batches of every length.
    assert whole._train_loop.experimental_get_tracing_count() == 1  # noqa: SLF001
    lengths = {x["input_word_ids"].shape[1] for x, _ in dataset_fn(None).take(8)}
    assert len(lengths) > 1, lengths

    first = trainer("resumed")
    first.train(dataset_fn, 4, input_state="skip")
    resumed = trainer("resumed")
    result = resumed.train(dataset_fn, 8, input_state="skip")
    assert result.restored_step == 4
    for a, b in zip(whole.model.get_weights(), resumed.model.get_weights(), strict=True):
        np.testing.assert_array_equal(a, b)


def test_trim_to_longest_cuts_multiple_choice_rows_along_their_sequence_axis():
    """`data.pipeline.trim_to_longest` on `[batch, choices, seq_len]`: it cut the batch
    axis before (`t[:length]`)."""
    from keras_bert_zoo.data.pipeline import trim_to_longest

    mask = np.zeros((2, 3, 8), np.int32)
    mask[:, :, :3] = 1
    mask[1, 2, :5] = 1
    batch = {"input_mask": mask, "input_word_ids": mask * 7, "label": np.array([0, 2])}
    trimmed = trim_to_longest({key: tf.constant(value) for key, value in batch.items()})
    assert trimmed["input_mask"].shape == trimmed["input_word_ids"].shape == (2, 3, 5)
    np.testing.assert_array_equal(trimmed["input_word_ids"], batch["input_word_ids"][..., :5])
    np.testing.assert_array_equal(trimmed["label"], [0, 2])
