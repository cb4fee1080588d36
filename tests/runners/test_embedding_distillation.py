"""Distillation with an embedding teacher (`runners.distillation` on `sentence_embedding`):
the `vectors` soft-target loss against a numpy restatement (through the projection when
the widths differ), a tiny run whose student's vectors move toward the teacher's
(cosines computed in numpy), the teacher-output cache against the live teacher, a
sentence-transformers checkpoint as the teacher, and the one-line refusals."""

import json
import pathlib
import sys

import numpy as np
import pytest
import tensorflow as tf

from keras_bert_zoo import tasks
from keras_bert_zoo.inputs import TEACHER_OUTPUTS
from keras_bert_zoo.models import BertEncoder, BertTextGroupEmbedder
from keras_bert_zoo.models.distillation import SoftTargetLoss, TaskDistiller
from keras_bert_zoo.runners import distillation, finetuning
from keras_bert_zoo.text import BertPreprocessor
from keras_bert_zoo.utils.errors import UserError

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tasks"))
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))
import finetuning_test_helpers as helpers  # noqa: E402
import sentence_embedding_fixtures as fixtures  # noqa: E402
from test_distillation_job import QUICK  # noqa: E402  (a few steps of a tiny model)

SEQUENCE_LENGTH = 16


# The teacher's training file is the student's too unless the run names another: an
# empty one leaves the transfer texts alone.
TRANSFER_ONLY = {"train_file": ""}


def _texts(count, seed):
    """`count` one-topic sentences of the fixtures' vocabulary."""
    return [text for row in fixtures.triplets(count, seed=seed) for text in row][:count]


def _cosines(a, b):
    a = a / np.linalg.norm(a, axis=-1, keepdims=True)
    b = b / np.linalg.norm(b, axis=-1, keepdims=True)
    return np.sum(a * b, axis=-1)


def _embed(model, tokenizer, texts):
    """The texts' vectors from a group model's one-text embedder, packed here."""
    preprocessor = BertPreprocessor(tokenizer, sequence_length=SEQUENCE_LENGTH)
    x = {name: value.numpy() for name, value in preprocessor(np.array(texts)).items()}
    return np.asarray(model.embedder.predict(x, verbose=0), np.float64)


@pytest.fixture(scope="module")
def teacher(tmp_path_factory):
    """A 2-block sentence-embedding teacher fine-tuned on 48 triplets (an STS dev file),
    its data, a transfer file of 40 texts and a 16-wide checkpoint for students."""
    root = tmp_path_factory.mktemp("embedding_teacher")
    checkpoint = helpers.write_tiny_checkpoint(root / "bert", fixtures.VOCABULARY, num_layers=2)
    narrow = helpers.write_tiny_checkpoint(
        root / "narrow", fixtures.VOCABULARY, seed=1, hidden_size=16, intermediate_size=32
    )
    untrained = helpers.write_tiny_checkpoint(root / "untrained", fixtures.VOCABULARY, seed=2)
    triplets = fixtures.write_table(
        root / "triplets.tsv", ["anchor", "positive", "negative"], fixtures.triplets(48)
    )
    sts = fixtures.write_table(
        root / "sts_dev.tsv", ["anchor", "positive", "score"], fixtures.scored_pairs(20)
    )
    transfer = root / "transfer.txt"
    transfer.write_text("\n".join(_texts(40, seed=5)) + "\n", encoding="utf-8")
    finetuning.run_finetuning(
        helpers.quick_config(
            task="sentence_embedding",
            init_checkpoint=checkpoint,
            output_dir=str(root / "teacher"),
            mode="train",
            train_batch_size=8,
            num_train_steps=24,
            max_seq_length=SEQUENCE_LENGTH,
            do_lower_case=True,
            task_options={"train_file": triplets},
        )
    )
    return {
        "root": root,
        "teacher": str(root / "teacher"),
        "triplets": triplets,
        "sts": sts,
        "transfer": str(transfer),
        "narrow": narrow,
        "untrained": untrained,
    }


def _config(fixture, output_dir, **settings):
    options = {"eval_file": fixture["sts"], "score_range": "0,5", **settings.pop("options", {})}
    return distillation.DistillationConfig(
        **{
            **QUICK,
            "teacher": fixture["teacher"],
            "output_dir": str(output_dir),
            "transfer_file": fixture["transfer"],
            "train_batch_size": 8,
            "task_options": options,
            **settings,
        }
    )


# === The loss ===


def _group_inputs(tokenizer, texts, width):
    preprocessor = BertPreprocessor(tokenizer, sequence_length=SEQUENCE_LENGTH)
    packed = preprocessor(tf.constant(texts))
    return {
        name: np.asarray(value).reshape(-1, width, SEQUENCE_LENGTH)
        for name, value in packed.items()
    }


@pytest.mark.slow
def test_vectors_loss_is_the_mse_of_the_projected_students_vectors(teacher):
    finetuned = tasks.load_finetuned(str(pathlib.Path(teacher["teacher"]) / "finetuned"))
    student = BertTextGroupEmbedder(
        BertEncoder(
            vocab_size=len(fixtures.VOCABULARY),
            **{**helpers.TINY_ENCODER, "hidden_size": 16, "intermediate_size": 32},
        )
    )
    distiller = TaskDistiller(
        finetuned.model, student, "vectors", temperature=3.0, hard_label_weight=0.0
    )
    assert distiller.vector_projection is not None
    x = _group_inputs(finetuned.tokenizer, _texts(12, seed=3), width=2)
    loss = float(distiller.compute_loss(x, None, distiller(x, training=False), training=False))

    # numpy: the two models' vectors, the projection's kernel and bias.
    teacher_vectors = np.asarray(finetuned.model.predict(x, verbose=0), np.float64)
    student_vectors = np.asarray(student.predict(x, verbose=0), np.float64)
    kernel, bias = (np.asarray(w, np.float64) for w in distiller.vector_projection.get_weights())
    assert student_vectors.shape == (6, 2, 16) and teacher_vectors.shape == (6, 2, 32)
    expected = np.mean((student_vectors @ kernel + bias - teacher_vectors) ** 2)
    assert loss == pytest.approx(expected, rel=1e-5)
    assert expected > 0.01  # two different models

    # The loss alone, no temperature: the plain MSE of equal-width vectors.
    a, b = np.random.default_rng(0).normal(size=(2, 4, 3, 8)).astype("float32")
    vectors_loss = SoftTargetLoss("vectors", temperature=4.0)
    assert float(vectors_loss(a, b)) == pytest.approx(np.mean((b - a) ** 2), rel=1e-6)


@pytest.mark.slow
def test_cached_teacher_vectors_give_the_live_teachers_loss(teacher):
    finetuned = tasks.load_finetuned(str(pathlib.Path(teacher["teacher"]) / "finetuned"))
    student = BertTextGroupEmbedder(
        BertEncoder(
            vocab_size=len(fixtures.VOCABULARY), **{**helpers.TINY_ENCODER, "hidden_size": 16}
        )
    )
    distiller = TaskDistiller(finetuned.model, student, "vectors", hard_label_weight=0.0)
    x = _group_inputs(finetuned.tokenizer, _texts(12, seed=4), width=3)
    live = float(distiller.compute_loss(x, None, distiller(x), training=False))
    cached_x = {**x, TEACHER_OUTPUTS: finetuned.model.predict(x, verbose=0)}
    cached = float(distiller.compute_loss(cached_x, None, distiller(cached_x), training=False))
    assert cached == pytest.approx(live, rel=1e-6)


# === Runs ===


@pytest.mark.slow
def test_students_vectors_move_toward_the_teachers(teacher, tmp_path):
    """A 1-block student of the teacher's width from another random BERT, trained on
    the transfer texts alone: its vectors of held-out texts come closer to the
    teacher's (cosines in numpy), its STS metric is reported beside the teacher's, and
    the student is an ordinary fine-tuned model."""
    output_dir = tmp_path / "student"
    config = _config(
        teacher,
        output_dir,
        student=teacher["untrained"],
        num_train_steps=40,
        eval_every=40,
        learning_rate=1e-3,
        options=TRANSFER_ONLY,
    )
    finetuned_teacher = tasks.load_finetuned(str(pathlib.Path(teacher["teacher"]) / "finetuned"))
    held_out = _texts(30, seed=11)
    teacher_vectors = _embed(finetuned_teacher.model, finetuned_teacher.tokenizer, held_out)
    # Before: the student as the job builds it.
    job = distillation.DistillationJob(config)
    job.prepare(None)
    start = job.build_model().student
    before = _cosines(_embed(start, finetuned_teacher.tokenizer, held_out), teacher_vectors)

    result = distillation.run_distillation(config)
    student = tasks.load_finetuned(str(output_dir / "finetuned"))
    after = _cosines(_embed(student.model, student.tokenizer, held_out), teacher_vectors)
    assert len(student.model.encoder.transformer_layers) == 1
    assert after.mean() > before.mean() + 0.05, (before.mean(), after.mean())

    record = json.loads((output_dir / "eval_results.json").read_text(encoding="utf-8"))
    teacher_spearman = record["teacher"]["results"]["sts_dev"]["spearman"]
    assert record["fraction_of_teacher"]["sts_dev"] == pytest.approx(
        record["results"]["sts_dev"]["spearman"] / teacher_spearman
    )
    assert "fraction of the teacher's spearman: sts_dev" in distillation.summary(result)


@pytest.mark.slow
def test_a_narrower_student_learns_through_the_projection_and_serves_its_own_width(
    teacher, tmp_path
):
    """A 16-wide student of the 32-wide teacher, on the triplets (their task loss too)
    and the transfer texts: the loss falls, the saved student answers 16-wide unit
    vectors and holds no projection."""
    output_dir = tmp_path / "narrow"
    result = distillation.run_distillation(
        _config(
            teacher,
            output_dir,
            student=teacher["narrow"],
            num_train_steps=24,
            mode="train",
            options={"train_file": teacher["triplets"]},
        )
    )
    losses = np.asarray(result.training.losses)
    assert losses[-4:].mean() < losses[:4].mean()
    student = tasks.load_finetuned(str(output_dir / "finetuned"))
    vectors = _embed(student.model, student.tokenizer, _texts(5, seed=2))
    assert vectors.shape == (5, 16)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=-1), 1.0, atol=1e-5)
    names = [weight.path for weight in student.model.weights]
    assert not any("vector_projection" in name for name in names)


@pytest.mark.slow
def test_transfer_texts_are_grouped_to_the_training_width_with_weight_0(teacher, tmp_path):
    job = distillation.DistillationJob(
        _config(
            teacher,
            tmp_path / "job",
            student_layers="1",
            options={"train_file": teacher["triplets"]},
        )
    )
    job.prepare(None)
    texts = pathlib.Path(teacher["transfer"]).read_text(encoding="utf-8").splitlines()
    # 40 texts in triplets: 14 examples, the last completed from the first texts.
    assert len(job.transfer_examples) == 14
    assert job.transfer_examples[0].texts == tuple(texts[:3])
    assert job.transfer_examples[-1].texts == (texts[39], texts[0], texts[1])
    rows = list(job._training_features().as_numpy_iterator())
    assert [float(row["sample_weight"]) for row in rows] == [1.0] * 48 + [0.0] * 14
    assert {row["input_word_ids"].shape for row in rows} == {(3, SEQUENCE_LENGTH)}


@pytest.mark.slow
def test_cached_teacher_vectors_train_as_the_teacher_in_the_step(teacher, tmp_path):
    """`--cache_teacher_outputs`: the cache holds the teacher's vectors of every
    transfer text (the teacher run here), and the losses are the live run's."""
    settings = dict(student_layers="1", num_train_steps=8, mode="train", options=TRANSFER_ONLY)
    live = distillation.run_distillation(_config(teacher, tmp_path / "live", **settings))
    cached_dir = tmp_path / "cached"
    cached = distillation.run_distillation(
        _config(teacher, cached_dir, cache_teacher_outputs=True, **settings)
    )
    np.testing.assert_allclose(cached.training.losses, live.training.losses, rtol=1e-4)

    finetuned = tasks.load_finetuned(str(pathlib.Path(teacher["teacher"]) / "finetuned"))
    texts = pathlib.Path(teacher["transfer"]).read_text(encoding="utf-8").splitlines()
    expected = _embed(finetuned.model, finetuned.tokenizer, texts)
    meta = json.loads((cached_dir / "teacher_outputs.json").read_text(encoding="utf-8"))
    assert meta["rows"] == 40 and meta["outputs"] == {"outputs": [1, 32]}
    spec = {"outputs": tf.io.FixedLenFeature([1, 32], tf.float32)}
    records = tf.data.TFRecordDataset(str(cached_dir / "teacher_outputs.tfrecord"))
    written = np.stack([tf.io.parse_single_example(r, spec)["outputs"][0] for r in records])
    np.testing.assert_allclose(written, expected, rtol=1e-5, atol=1e-6)


# === Refusals ===


@pytest.mark.parametrize(
    "settings, message",
    [
        (
            dict(hidden_state_weight=1.0),
            r"--hidden_state_weight and --attention_weight read a task model's encoder blocks",
        ),
        (
            dict(options={"gradient_cache_chunk_size": 4, "train_file": "TRIPLETS"}),
            r"sentence_embedding: the task's own training step .* does not run the distiller",
        ),
        (
            dict(options={"train_file": "STS"}),
            r"--hard_label_weight=1: the scored pairs' CoSENT loss ranks a whole batch",
        ),
        (
            dict(transfer_file=None, options=TRANSFER_ONLY),
            r"sentence_embedding: nothing to distil on",
        ),
    ],
)
def test_what_cannot_work_is_one_error_naming_it(teacher, tmp_path, settings, message):
    options = {
        key: {"TRIPLETS": teacher["triplets"], "STS": teacher["sts"]}.get(value, value)
        for key, value in settings.pop("options", {}).items()
    }
    with pytest.raises(UserError, match=message) as error:
        distillation.run_distillation(
            _config(
                teacher,
                tmp_path / "student",
                student_layers="1",
                num_train_steps=2,
                options=options,
                **settings,
            )
        )
    assert "\n" not in str(error.value)
    assert not (tmp_path / "student").exists()


def _labels_file(directory):
    return fixtures.write_table(
        directory / "labels.tsv",
        ["text", "label"],
        [(text, ("a", "b")[i % 2]) for i, text in enumerate(_texts(16, seed=1))],
    )


@pytest.fixture(scope="module")
def classifier(teacher, tmp_path_factory):
    """A text classifier of one step on the fixtures' vocabulary, and its labels file."""
    root = tmp_path_factory.mktemp("classifier")
    labels = _labels_file(root)
    finetuning.run_finetuning(
        helpers.quick_config(
            task="text_classification",
            init_checkpoint=str(teacher["root"] / "bert"),
            output_dir=str(root / "classifier"),
            mode="train",
            train_batch_size=8,
            num_train_steps=1,
            max_seq_length=SEQUENCE_LENGTH,
            task_options={"train_file": labels},
        )
    )
    return root / "classifier", labels


@pytest.mark.slow
def test_a_teacher_that_is_no_embedding_model_is_refused(teacher, classifier, tmp_path):
    """A fine-tuned classifier as the teacher of a sentence_embedding student, and a
    plain BERT checkpoint as a classification teacher: one line each."""
    classifier_dir, labels = classifier
    with pytest.raises(UserError, match=r"--task=sentence_embedding but .* text_classification"):
        distillation.run_distillation(
            _config(
                teacher,
                tmp_path / "a",
                teacher=str(classifier_dir),
                task="sentence_embedding",
            )
        )
    with pytest.raises(UserError, match=r"holds no trained text_classification head"):
        distillation.run_distillation(
            distillation.DistillationConfig(
                **QUICK,
                teacher=str(teacher["root"] / "bert"),
                task="text_classification",
                output_dir=str(tmp_path / "b"),
                mode="train",
                student_layers="1",
                max_seq_length=SEQUENCE_LENGTH,
                task_options={"train_file": labels},
            )
        )
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


# === A sentence-transformers checkpoint as the teacher ===


@pytest.mark.slow
def test_the_installed_minilm_teaches_with_sentence_transformers_vectors(tmp_path):
    """`--teacher=all-MiniLM-L6-v2 --task=sentence_embedding`: the checkpoint's pooling,
    normalization and length are the teacher's, so the cached soft targets of 40 news
    sentences no one here wrote are `SentenceTransformer.encode(...,
    normalize_embeddings=True)`'s within 1e-5; the 2-block student of its own blocks
    trains on them and saves an ordinary fine-tuned directory."""
    import sentence_transformers

    from keras_bert_zoo.checkpoints.installed import resolve_installed_checkpoint

    sys.path.insert(0, str(HERE.parent / "tasks"))
    from test_sentence_embedding_minilm import MINILM, lee_sentences

    texts = lee_sentences(40)
    transfer = tmp_path / "news.txt"
    transfer.write_text("".join(text + "\n" for text in texts), encoding="utf-8")
    output_dir = tmp_path / "student"
    result = distillation.run_distillation(
        distillation.DistillationConfig(
            **QUICK,
            teacher=MINILM,
            task="sentence_embedding",
            transfer_file=str(transfer),
            student_layers="2",
            cache_teacher_outputs=True,
            mode="train",
            train_batch_size=8,
            eval_batch_size=16,
            num_train_steps=2,
            output_dir=str(output_dir),
        )
    )
    reference = sentence_transformers.SentenceTransformer(
        resolve_installed_checkpoint(MINILM), device="cpu"
    ).encode(texts, normalize_embeddings=True, batch_size=16, convert_to_numpy=True)
    spec = {"outputs": tf.io.FixedLenFeature([1, 384], tf.float32)}
    records = tf.data.TFRecordDataset(str(output_dir / "teacher_outputs.tfrecord"))
    written = np.stack([tf.io.parse_single_example(r, spec)["outputs"][0] for r in records])
    assert written.shape == reference.shape == (40, 384)
    np.testing.assert_allclose(written, reference, atol=1e-5)

    student = tasks.load_finetuned(str(output_dir / "finetuned"))
    assert len(student.model.encoder.transformer_layers) == 2
    assert student.task.state()["pooling"] == "mean" and student.task.max_seq_length == 256
    assert result.step == 2


# === The tool ===


def _run_tool(args):
    import subprocess

    import child_process

    completed = subprocess.run(
        [sys.executable, "tools/run_distillation.py", *args],
        capture_output=True,
        text=True,
        env=child_process.environment(),
        cwd=HERE.parents[1],
        timeout=600,
    )
    return completed.returncode, completed.stdout, completed.stderr


@pytest.mark.slow
def test_the_tool_distils_an_embedding_teacher_and_refuses_a_classifier_in_one_line(
    teacher, classifier, tmp_path, load_tool, monkeypatch
):
    """`run_distillation --train_file= --transfer_file=...`: the transfer texts alone,
    the summary's fraction of the teacher's Spearman (the tool's `main` in this
    process); a classifier as the teacher of `--task=sentence_embedding`, as a user
    runs the tool: one line, exit 1, nothing written."""
    from keras_bert_zoo.utils import cli

    classifier_dir, _ = classifier
    common = [
        f"--transfer_file={teacher['transfer']}",
        "--train_file=",
        f"--eval_file={teacher['sts']}",
        "--score_range=0,5",
        "--student_layers=1",
        "--train_batch_size=8",
        "--num_train_steps=4",
        "--steps_per_loop=4",
    ]
    monkeypatch.delenv(cli.TRACEBACK_ENV, raising=False)
    with load_tool("run_distillation") as tool:
        code, stdout, stderr = helpers.run_tool_as_user(
            tool,
            "tools/run_distillation.py",
            f"--teacher={teacher['teacher']}",
            *common,
            f"--output_dir={tmp_path / 'student'}",
        )
    assert code == 0, stderr[-3000:]
    record = json.loads((tmp_path / "student" / "eval_results.json").read_text(encoding="utf-8"))
    fraction = record["fraction_of_teacher"]["sts_dev"]
    assert f"fraction of the teacher's spearman: sts_dev {fraction:.4f}" in stdout
    code, _, stderr = _run_tool(
        [
            f"--teacher={classifier_dir}",
            "--task=sentence_embedding",
            *common,
            f"--output_dir={tmp_path / 'refused'}",
        ]
    )
    assert code == 1 and "Traceback" not in stderr, stderr[-3000:]
    last_line = [line for line in stderr.splitlines() if line.strip()][-1]
    assert last_line.startswith("run_distillation: error: --task=sentence_embedding but ")
    assert "text_classification" in last_line
    assert not (tmp_path / "refused").exists()
