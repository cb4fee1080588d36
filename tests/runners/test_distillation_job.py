"""The distillation job (`keras_bert_zoo.runners.distillation`) end to end, for every task
family, with tiny teachers: its output directory is an ordinary fine-tuning run's
(evaluated, predicted and loaded by the fine-tuning job and the task contract), it records
the teacher's evaluation beside the student's, and bad input is one error naming it."""

import json
import pathlib
import random
import shutil
import sys
import textwrap

import numpy as np
import pytest

from keras_bert_zoo import tasks
from keras_bert_zoo.runners import distillation, finetuning

HERE = pathlib.Path(__file__).resolve().parent
REPO_ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE.parent / "tasks"))  # the fine-tuning fixtures
import finetuning_test_helpers as helpers  # noqa: E402
from qa_test_helpers import load_local_module, write_squad  # noqa: E402

squad_tests = load_local_module("test_question_answering_end_to_end.py")
tagging_tests = load_local_module("test_tagging.py")
choice_tests = load_local_module("test_multiple_choice.py")

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
FILLERS = "the a film movie plot actors story was is very quite and but it".split()
KEYWORDS = {"pos": "great", "neg": "awful"}


def _reviews(count, seed):
    rng = random.Random(seed)
    rows = []
    for index in range(count):
        label = ("pos", "neg")[index % 2]
        words = rng.choices(FILLERS, k=rng.randint(3, 7))
        words.insert(rng.randint(0, len(words)), KEYWORDS[label])
        rows.append((" ".join(words) + " .", label))
    return rows


# A few steps of a tiny model.
QUICK = dict(
    learning_rate=5e-3,
    lr_schedule="constant",
    warmup_proportion=0.0,
    steps_per_loop=4,
    progress="none",
    seed=0,
)


def _quick(**settings):
    """A distillation configuration for a few steps of a tiny model."""
    return distillation.DistillationConfig(**{**QUICK, **settings})


# === Sentence classification: the whole contract ===


def fine_tune_teacher(root, **sizes):
    """A 2-block teacher fine-tuned on 48 keyword reviews (`root/data/reviews.tsv`, a
    quarter held out) into `root/teacher`, `sizes` overriding the run's; returns
    `(data_dir, the tiny checkpoint it started from)`."""
    data_dir = root / "data"
    data_dir.mkdir()
    lines = ["text\tlabel"] + [f"{text}\t{label}" for text, label in _reviews(48, 0)]
    (data_dir / "reviews.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    vocabulary = SPECIALS + FILLERS + list(KEYWORDS.values()) + ["."]
    checkpoint = helpers.write_tiny_checkpoint(root / "bert", vocabulary, num_layers=2)
    settings = {"max_seq_length": 16, "train_batch_size": 8, "num_train_steps": 40, **sizes}
    finetuning.run_finetuning(
        helpers.quick_config(
            task="text_classification",
            data_dir=str(data_dir),
            task_options={"train_file": "reviews.tsv", "heldout_fraction": 0.25},
            init_checkpoint=checkpoint,
            output_dir=str(root / "teacher"),
            **settings,
        )
    )
    return data_dir, checkpoint


@pytest.fixture(scope="module")
def reviews_teacher(tmp_path_factory):
    """A 2-block teacher fine-tuned on keyword reviews, and its data."""
    tmp_path = tmp_path_factory.mktemp("reviews")
    data_dir, _ = fine_tune_teacher(tmp_path)
    transfer = tmp_path / "transfer.txt"
    transfer.write_text("\n".join(text for text, _ in _reviews(20, 1)) + "\n", encoding="utf-8")
    return tmp_path, data_dir, transfer


@pytest.mark.slow
def test_student_run_is_a_finetuning_run_with_the_teachers_metrics_beside(
    reviews_teacher, tmp_path
):
    root, data_dir, transfer = reviews_teacher
    output_dir = tmp_path / "student"
    result = distillation.run_distillation(
        _quick(
            teacher=str(root / "teacher"),
            data_dir=str(data_dir),
            output_dir=str(output_dir),
            student_layers="1",
            transfer_file=str(transfer),
            hidden_state_weight=1.0,
            attention_weight=1.0,
            train_batch_size=8,
            num_train_steps=12,
            eval_every=6,
        )
    )
    # The student: the teacher's first block, trained.
    student = tasks.load_finetuned(str(output_dir / "finetuned"))
    teacher = tasks.load_finetuned(str(root / "teacher" / "finetuned"))
    assert len(student.model.encoder.transformer_layers) == 1
    assert student.task.task_name == teacher.task.task_name
    assert student.tokenizer.get_vocabulary() == teacher.tokenizer.get_vocabulary()
    assert (output_dir / "best" / "model.keras").is_file()

    record = json.loads((output_dir / "eval_results.json").read_text(encoding="utf-8"))
    assert record["step"] == 12 and [h["step"] for h in record["history"]] == [6, 12]
    # The teacher's dev accuracy, computed here from its own predictions.
    dev = result.eval_answers[0]["dev"]
    answers = tasks.predict(teacher.task, teacher.model, dev, teacher.preprocessor)
    teacher_accuracy = np.mean([a.label == e.label for e, a in zip(dev, answers, strict=True)])
    assert record["teacher"]["results"]["dev"]["accuracy"] == pytest.approx(teacher_accuracy)
    saved = json.loads((output_dir / "distillation.json").read_text(encoding="utf-8"))
    assert saved["teacher_results"] == record["teacher"]["results"]
    assert saved["student_layers"] == "1" and saved["hidden_state_weight"] == 1.0
    assert record["fraction_of_teacher"]["dev"] == pytest.approx(
        record["results"]["dev"]["accuracy"] / teacher_accuracy
    )
    # The fine-tuning job evaluates the directory as it evaluates its own.
    again = finetuning.run_finetuning(
        finetuning.FinetuningConfig(
            mode="eval", output_dir=str(output_dir), data_dir=str(data_dir), progress="none"
        )
    )
    assert again.eval_results == result.eval_results
    summary = distillation.summary(result)
    assert "teacher (" in summary and "finetuned" in summary


@pytest.mark.slow
def test_transfer_rows_carry_no_label_weight(reviews_teacher, tmp_path):
    root, data_dir, transfer = reviews_teacher
    job = distillation.DistillationJob(
        _quick(
            teacher=str(root / "teacher"),
            data_dir=str(data_dir),
            output_dir=str(tmp_path / "student"),
            transfer_file=str(transfer),
        )
    )
    job.prepare(None)
    rows = list(job._training_features().as_numpy_iterator())
    weights = [float(row["sample_weight"]) for row in rows]
    assert weights == [1.0] * len(job.train_examples) + [0.0] * 20
    # The transfer rows are the file's texts, tokenized by the teacher's tokenizer.
    import tensorflow as tf

    expected = job.preprocessor(tf.constant(transfer.read_text(encoding="utf-8").splitlines()))
    transferred = np.stack([row["input_word_ids"] for row in rows[-20:]])
    np.testing.assert_array_equal(transferred, np.asarray(expected["input_word_ids"]))


@pytest.mark.slow
def test_resuming_a_different_distillation_is_refused(reviews_teacher, live_student):
    settings, output_dir, _ = live_student
    with pytest.raises(ValueError, match=r"run_settings\.json: .*temperature 2\.0 -> 4\.0"):
        distillation.run_distillation(
            _quick(**settings, output_dir=str(output_dir), temperature=4.0)
        )


@pytest.mark.parametrize(
    "settings, message",
    [
        (dict(student_layers="0,5"), r"--student_layers=0,5: distinct block indices from 0 to 1"),
        (dict(student_layers="3"), r"--student_layers=3: a count from 1 to the teacher's 2"),
        (dict(student_layers="x"), r"--student_layers=x: expected block indices"),
        (dict(layer_map="0-1"), r"--layer_map=0-1: expected student:teacher block pairs"),
        (dict(student="bert_tiny_uncased", student_layers="1"), r"--student .* not both"),
        (dict(transfer_file="missing.txt"), r"--transfer_file=missing.txt: no such file"),
        (
            dict(cache_teacher_outputs=True, attention_weight=1.0),
            r"--cache_teacher_outputs holds the teacher's outputs, not its blocks",
        ),
        (
            dict(cache_teacher_outputs=True, soft_target_weight=0.0),
            r"--cache_teacher_outputs with --soft_target_weight=0",
        ),
    ],
)
def test_bad_settings_are_one_error_naming_the_flag(reviews_teacher, tmp_path, settings, message):
    root, data_dir, _ = reviews_teacher
    with pytest.raises((ValueError, FileNotFoundError), match=message):
        distillation.run_distillation(
            _quick(
                teacher=str(root / "teacher"),
                data_dir=str(data_dir),
                output_dir=str(tmp_path / "student"),
                num_train_steps=2,
                **settings,
            )
        )
    assert not (tmp_path / "student").exists()


def test_a_teacher_that_is_no_finetuned_model_is_named(reviews_teacher, tmp_path):
    root, data_dir, _ = reviews_teacher
    with pytest.raises(ValueError, match=r"--teacher=.*bert is a checkpoint, not a fine-tuned"):
        distillation.run_distillation(
            _quick(
                teacher=str(root / "bert"), data_dir=str(data_dir), output_dir=str(tmp_path / "s")
            )
        )


def test_a_transfer_file_in_the_wrong_format_is_named_with_its_line(reviews_teacher, tmp_path):
    root, data_dir, _ = reviews_teacher
    transfer = tmp_path / "pairs.txt"
    transfer.write_text("a great film\nthe plot\tis awful\n", encoding="utf-8")
    with pytest.raises(ValueError, match=rf"{transfer}:2: expected 1 tab-separated field"):
        distillation.run_distillation(
            _quick(
                teacher=str(root / "teacher"),
                data_dir=str(data_dir),
                output_dir=str(tmp_path / "s"),
                transfer_file=str(transfer),
            )
        )


@pytest.mark.slow
def test_a_preset_student_of_another_width(reviews_teacher, tmp_path):
    """`--student=<preset>`: the preset's architecture on the teacher's vocabulary, hidden
    states learned through the projection."""
    root, data_dir, _ = reviews_teacher
    output_dir = tmp_path / "student"
    distillation.run_distillation(
        _quick(
            teacher=str(root / "teacher"),
            data_dir=str(data_dir),
            output_dir=str(output_dir),
            student="bert_tiny_uncased",
            hidden_state_weight=1.0,
            max_seq_length=16,
            train_batch_size=8,
            num_train_steps=4,
            mode="train",
        )
    )
    student = tasks.load_finetuned(str(output_dir / "finetuned")).model
    assert student.encoder.hidden_size == 128  # bert_tiny's, the teacher's is 32
    assert student.encoder.vocab_size == len(SPECIALS + FILLERS) + 3


# === Every other family: span, tagging, multiple choice ===


def _squad(tmp_path):
    rng = random.Random(0)
    data_dir = tmp_path / "squad"
    write_squad(data_dir / "train-v1.1.json", squad_tests.make_paragraphs(rng, 24, False))
    write_squad(data_dir / "dev-v1.1.json", squad_tests.make_paragraphs(rng, 4, False))
    vocabulary = squad_tests.vocabulary()
    transfer = [
        f"{qa['question']}\t{context}"
        for context, qas in squad_tests.make_paragraphs(rng, 3, False)
        for qa in qas
    ]
    settings = dict(
        task="squad_v1.1",
        max_seq_length=48,
        task_options=dict(doc_stride=16, max_query_length=12, n_best_size=5, max_answer_length=8),
    )
    return data_dir, vocabulary, transfer, settings


def _conll(tmp_path):
    data_dir = tmp_path / "conll2003"
    data_dir.mkdir()
    tagging_tests.write_conll(data_dir / "eng.train", tagging_tests.make_sentences(10, 24))
    tagging_tests.write_conll(data_dir / "eng.testa", tagging_tests.make_sentences(11, 6))
    tagging_tests.write_conll(data_dir / "eng.testb", tagging_tests.make_sentences(12, 4))
    transfer = [
        " ".join(word for word, *_ in sentence) for sentence in tagging_tests.make_sentences(13, 6)
    ]
    return data_dir, tagging_tests.VOCAB, transfer, dict(task="conll2003", max_seq_length=16)


def _swag(tmp_path):
    data_dir = tmp_path / "swag"
    data_dir.mkdir()
    choice_tests.write_swag(data_dir / "train.csv", choice_tests.swag_rows(10, 24))
    choice_tests.write_swag(data_dir / "val.csv", choice_tests.swag_rows(11, 8))
    # sent1, sent2, ending0..3: the columns after the id, video, gold-source ones.
    transfer = ["\t".join(row[4:6] + row[7:11]) for row in choice_tests.swag_rows(12, 4, False)]
    return data_dir, choice_tests.VOCAB, transfer, dict(task="swag", max_seq_length=24)


@pytest.mark.slow
@pytest.mark.parametrize("family", [_squad, _conll, _swag], ids=["squad", "conll", "swag"])
def test_every_family_distils_into_a_directory_the_finetuning_job_evaluates(family, tmp_path):
    data_dir, vocabulary, transfer_lines, settings = family(tmp_path)
    checkpoint = helpers.write_tiny_checkpoint(tmp_path / "bert", vocabulary, num_layers=2)
    task_settings = {k: v for k, v in settings.items() if k != "task"}
    finetuning.run_finetuning(
        helpers.quick_config(
            **settings,
            data_dir=str(data_dir),
            init_checkpoint=checkpoint,
            output_dir=str(tmp_path / "teacher"),
            train_batch_size=8,
            num_train_steps=3,
            mode="train",
        )
    )
    transfer = tmp_path / "transfer.txt"
    transfer.write_text("\n".join(transfer_lines) + "\n", encoding="utf-8")
    result = distillation.run_distillation(
        _quick(
            **{k: v for k, v in task_settings.items() if k != "max_seq_length"},
            teacher=str(tmp_path / "teacher"),
            data_dir=str(data_dir),
            output_dir=str(tmp_path / "student"),
            student_layers="1",
            transfer_file=str(transfer),
            hidden_state_weight=1.0,
            attention_weight=1.0,
            train_batch_size=8,
            num_train_steps=3,
            mode="train",
        )
    )
    assert np.all(np.isfinite(result.training.losses))
    # The fine-tuning job evaluates the student as a model it fine-tuned itself.
    evaluated = finetuning.run_finetuning(
        finetuning.FinetuningConfig(
            mode="eval",
            output_dir=str(tmp_path / "student"),
            data_dir=str(data_dir),
            progress="none",
        )
    )
    assert evaluated.task.task_name == settings["task"]
    assert len(evaluated.model.encoder.transformer_layers) == 1
    assert evaluated.eval_results and all(evaluated.eval_results.values())


# === Teacher outputs computed once ===


def _student_weights(output_dir):
    return tasks.load_finetuned(str(output_dir / "finetuned")).model.get_weights()


def _transfer_settings(reviews_teacher, **settings):
    """A 1-block student of the reviews teacher, on its data and transfer file."""
    root, data_dir, transfer = reviews_teacher
    return dict(
        teacher=str(root / "teacher"),
        data_dir=str(data_dir),
        student_layers="1",
        transfer_file=str(transfer),
        train_batch_size=8,
        mode="train",
        **settings,
    )


def _assert_cache_holds_the_teachers_logits(output_dir, settings, tmp_path):
    """The cache, read with TensorFlow's own parser, is the teacher run here on the
    texts of the training split and the transfer file, in that order."""
    import tensorflow as tf

    teacher = tasks.load_finetuned(str(pathlib.Path(settings["teacher"]) / "finetuned"))
    job = distillation.DistillationJob(_quick(**settings, output_dir=str(tmp_path / "x")))
    job.prepare(None)
    texts = [example.texts[0] for example in job.train_examples + job.transfer_examples]
    expected = teacher.model(teacher.preprocessor(tf.constant(texts)), training=False)
    meta = json.loads((output_dir / "teacher_outputs.json").read_text(encoding="utf-8"))
    assert meta["rows"] == len(texts) == 36 + 20
    records = tf.data.TFRecordDataset(str(output_dir / "teacher_outputs.tfrecord"))
    spec = {"outputs": tf.io.FixedLenFeature([2], tf.float32)}
    written = np.stack([tf.io.parse_single_example(r, spec)["outputs"] for r in records])
    np.testing.assert_allclose(written, np.asarray(expected), rtol=1e-5, atol=1e-6)


@pytest.fixture(scope="module")
def live_student(reviews_teacher, tmp_path_factory):
    """`(settings, output directory, result)` of a 1-block student of the reviews
    teacher trained 8 steps with the teacher in the step (checkpoints at 4 and 8)."""
    settings = _transfer_settings(reviews_teacher, num_train_steps=8, checkpoint_every=4)
    output_dir = tmp_path_factory.mktemp("live") / "student"
    result = distillation.run_distillation(_quick(**settings, output_dir=str(output_dir)))
    return settings, output_dir, result


@pytest.mark.slow
def test_cached_teacher_outputs_train_as_the_teacher_in_the_step(live_student, tmp_path):
    """`--cache_teacher_outputs`: the cache holds the teacher's outputs of every training
    feature in order (the teacher run here on the same texts), the student trains as with
    the teacher in the step, and a resumed run reads the cache back and ends bitwise as
    the uninterrupted one."""
    settings, live_dir, live = live_student
    cached_dir = tmp_path / "cached"
    cached = distillation.run_distillation(
        _quick(**settings, output_dir=str(cached_dir), cache_teacher_outputs=True)
    )

    _assert_cache_holds_the_teachers_logits(cached_dir, settings, tmp_path)

    np.testing.assert_allclose(cached.training.losses, live.training.losses, rtol=1e-4)
    for got, want in zip(_student_weights(cached_dir), _student_weights(live_dir), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)

    # The run stopped after its step-4 checkpoint (a copy of it, the later checkpoint
    # and the final model removed), then resumed.
    resumed_dir = tmp_path / "resumed"
    shutil.copytree(cached_dir, resumed_dir)
    records_file = resumed_dir / "teacher_outputs.tfrecord"
    written_at = records_file.stat().st_mtime_ns
    for path in [*(resumed_dir / "checkpoints").glob("ckpt-00000008*"), resumed_dir / "finetuned"]:
        shutil.rmtree(path) if path.is_dir() else path.unlink()
    again = distillation.run_distillation(
        _quick(**settings, output_dir=str(resumed_dir), cache_teacher_outputs=True)
    )
    assert again.training.restored_step == 4
    assert records_file.stat().st_mtime_ns == written_at  # read back, not written again
    for got, want in zip(_student_weights(resumed_dir), _student_weights(cached_dir), strict=True):
        np.testing.assert_array_equal(got, want)


WORKER = textwrap.dedent(
    """
    import json, logging, sys
    from keras_bert_zoo.runners import distillation

    logging.basicConfig(level=logging.INFO, format="%(message)s")

    result = distillation.run_distillation(
        distillation.DistillationConfig(**json.loads(sys.argv[1]))
    )
    print("LOSSES", json.dumps([float(loss) for loss in result.training.losses]))
    """
)


@pytest.mark.slow
def test_two_workers_distil_from_cached_outputs(reviews_teacher, tmp_path):
    """`--cache_teacher_outputs` under `multi_worker_mirrored` (two processes on
    127.0.0.1): the chief writes the cache in the run directory, the other worker its own
    copy in a temporary directory that is gone when it exits."""
    import child_process

    settings = _transfer_settings(reviews_teacher, num_train_steps=6)
    output_dir = tmp_path / "student"
    temporary = tmp_path / "workers_tmp"
    temporary.mkdir()
    environments = child_process.worker_environments(2)
    for environment in environments:
        environment["TMPDIR"] = str(temporary)
    command = [
        sys.executable,
        "-c",
        WORKER,
        json.dumps(
            {
                **QUICK,
                **settings,
                "cache_teacher_outputs": True,
                "output_dir": str(output_dir),
                "distribution_strategy": "multi_worker_mirrored",
            }
        ),
    ]
    codes, outputs = child_process.run_together(
        [command, command], environments, 300, cwd=REPO_ROOT
    )
    assert codes == [0, 0], "\n".join(output[-3000:] for output in outputs)
    for output in outputs:
        losses = json.loads(output.split("LOSSES ", 1)[1].splitlines()[0])
        assert len(losses) == 6 and np.all(np.isfinite(losses))
    chief, other = outputs
    assert f"written to {output_dir / 'teacher_outputs.tfrecord'}" in chief, chief[-3000:]
    assert f"written to {temporary / 'teacher_outputs_'}" in other, other[-3000:]
    _assert_cache_holds_the_teachers_logits(output_dir, settings, tmp_path)
    assert not list(temporary.glob("teacher_outputs_*"))
    assert (
        len(tasks.load_finetuned(str(output_dir / "finetuned")).model.encoder.transformer_layers)
        == 1
    )
