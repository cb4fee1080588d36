"""The fine-tuning runner (`keras_bert_zoo.runners.finetuning`) end to end on SQuAD, CoNLL-2003
NER, SWAG and `text_classification` (the main job's path, on gensim's real movie
reviews), with tiny encoders; its flags; and its bad-input errors.

Each run is checked against independent references: the official SQuAD v1.1 evaluation
(restated in `squad_official_evaluation.py`), seqeval, scikit-learn, and PyTorch
`transformers` loading the Hugging Face export. The nine GLUE tasks go through the
runner in `test_sentence_finetuning.py`.
"""

import json
import math
import os
import pathlib
import random
import sys
import warnings

import numpy as np
import pytest
import sklearn.metrics
from absl import flags

from keras_bert_zoo import tasks
from keras_bert_zoo.runners import demo, finetuning, run_dir, run_outputs, sources
from keras_bert_zoo.tasks.feature_extraction import demo_model_dir
from keras_bert_zoo.text.vocab import load_vocab
from keras_bert_zoo.utils import atomic, settings

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tasks"))  # the fine-tuning fixtures
import finetuning_test_helpers as helpers  # noqa: E402
from qa_test_helpers import load_local_module, write_squad  # noqa: E402

squad_official = load_local_module("squad_official_evaluation.py")
squad_tests = load_local_module("test_question_answering_end_to_end.py")
tagging_tests = load_local_module("test_tagging.py")
choice_tests = load_local_module("test_multiple_choice.py")


def _read_jsonl(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def _no_temporaries(directory):
    left = [p for p in pathlib.Path(directory).rglob(".*") if p.name != ".gitattributes"]
    assert not left, left


# === Flags ===


def test_flags_have_run_classifier_defaults_and_every_training_flag():
    from keras_bert_zoo.training.options import TrainingOptions

    flag_values = flags.FlagValues()
    finetuning.define_flags(flag_values)
    flag_values(["run_finetuning", "--task=glue/mrpc", "--output_dir=/tmp/x", "--doc_stride=64"])
    config = finetuning.config_from_flags(flag_values)
    # google-research/bert's run_classifier.py defaults.
    assert (config.train_batch_size, config.learning_rate, config.num_train_epochs) == (
        32,
        5e-5,
        3.0,
    )
    assert config.warmup_proportion == 0.1
    assert config.max_seq_length is None  # the task's: 128 for GLUE, 384 for SQuAD
    assert config.do_lower_case is None  # read from the vocabulary
    # Every training-core flag is a field of the config.
    for name in settings.flag_names(TrainingOptions):
        assert name in flag_values and hasattr(config, name), name
    # Every task option is a flag; only the given ones reach the task.
    for name in tasks.all_task_options():
        assert name in flag_values, name
    assert config.task_options == {"doc_stride": 64}
    # No --task: the main job, with only the given flags changed.
    flag_values = flags.FlagValues()
    finetuning.define_flags(flag_values)
    flag_values(["run_finetuning", "--num_train_epochs=2", "--heldout_seed=7"])
    assert flag_values.task is None
    explicit = finetuning.explicit_flag_values(flag_values)
    assert explicit == {"num_train_epochs": 2.0, "task_options": {"heldout_seed": 7}}
    demo_settings = demo.demo_config(**explicit)
    assert demo_settings.task == "text_classification" and demo_settings.num_train_epochs == 2.0
    assert demo_settings.task_options["heldout_seed"] == 7
    assert demo_settings.task_options["train_file"] == demo.DEMO_DATA_FILE
    assert demo_settings.init_checkpoint == "all-MiniLM-L6-v2"


def test_eval_results_json_writes_nan_as_null(tmp_path):
    task = tasks.create_task("glue/stsb", data_dir=str(tmp_path))
    path = run_dir.write_eval_results(
        str(tmp_path),
        run_outputs.eval_record(
            task,
            {"dev": {"pearson": float("nan"), "spearman": 0.5}},
            step=7,
            model_source="final",
            history=[{"step": 7, "results": {"dev": {"pearson": float("inf")}}}],
        ),
    )
    text = pathlib.Path(path).read_text(encoding="utf-8")
    assert "NaN" not in text and "Infinity" not in text
    written = json.loads(text)
    assert written["results"] == {"dev": {"pearson": None, "spearman": 0.5}}
    assert written["step"] == 7 and written["history"][0]["results"]["dev"]["pearson"] is None
    assert written["primary_metric"] == "spearman"


# === SQuAD ===


@pytest.mark.slow
def test_squad_train_and_eval_then_predict_from_the_saved_model(tmp_path):
    rng = random.Random(0)
    data_dir = tmp_path / "squad"
    write_squad(data_dir / "train-v1.1.json", squad_tests.make_paragraphs(rng, 48, False))
    dev_file = write_squad(data_dir / "dev-v1.1.json", squad_tests.make_paragraphs(rng, 6, False))
    vocabulary = squad_tests.vocabulary()
    checkpoint = helpers.write_tiny_checkpoint(tmp_path / "bert", vocabulary, layout="huggingface")
    options = dict(doc_stride=16, max_query_length=12, n_best_size=5, max_answer_length=8)
    run_dir = tmp_path / "run"
    result = finetuning.run_finetuning(
        helpers.quick_config(
            task="squad_v1.1",
            data_dir=str(data_dir),
            init_checkpoint=checkpoint,
            output_dir=str(run_dir),
            max_seq_length=48,
            task_options=options,
            train_batch_size=16,
            num_train_steps=40,
            learning_rate=3e-3,
            eval_every=20,
        )
    )
    losses = result.training.losses
    assert losses[-8:].mean() < 0.6 * losses[:8].mean(), losses
    dataset = json.loads(pathlib.Path(dev_file).read_text(encoding="utf-8"))["data"]
    dev = result.task.read("dev")
    predictions_path = run_dir / "predictions" / "predictions.json"
    predictions = squad_tests.validate_official_formats(
        predictions_path.parent, dev, version_2=False, n_best_size=5
    )
    eval_results = json.loads((run_dir / "eval_results.json").read_text(encoding="utf-8"))
    reference = squad_official.evaluate_v1_1(dataset, predictions)
    assert eval_results["results"]["dev"] == pytest.approx(reference, abs=1e-9)
    assert eval_results["step"] == 40
    assert [entry["step"] for entry in eval_results["history"]] == [20, 40]
    assert json.loads((run_dir / "best" / "metrics.json").read_text())["metric"] == "dev/f1"

    # A new process would do the same: predict from the saved directory, elsewhere.
    predict_dir = tmp_path / "predict"
    predicted = finetuning.run_finetuning(
        helpers.quick_config(
            mode="predict",
            init_checkpoint=str(run_dir / "finetuned"),
            data_dir=str(data_dir),
            output_dir=str(predict_dir),
        )
    )
    assert predicted.task.option_values["doc_stride"] == 16
    assert predicted.task.max_seq_length == 48
    again = json.loads((predict_dir / "predictions" / "predictions.json").read_text())
    assert again == predictions
    _no_temporaries(run_dir)


# === CoNLL-2003 NER ===


@pytest.mark.slow
def test_conll2003_runner_scores_with_seqeval_and_predicts_from_the_hf_export(tmp_path):
    from seqeval.metrics import f1_score

    data_dir = tmp_path / "conll2003"
    data_dir.mkdir()
    tagging_tests.write_conll(data_dir / "eng.train", tagging_tests.make_sentences(10, 40))
    tagging_tests.write_conll(data_dir / "eng.testa", tagging_tests.make_sentences(11, 12))
    tagging_tests.write_conll(data_dir / "eng.testb", tagging_tests.make_sentences(12, 6))
    checkpoint = helpers.write_tiny_checkpoint(
        tmp_path / "bert", tagging_tests.VOCAB, layout="google", num_layers=2
    )
    run_dir = tmp_path / "run"
    result = finetuning.run_finetuning(
        helpers.quick_config(
            task="conll2003",
            data_dir=str(data_dir),
            init_checkpoint=checkpoint,
            output_dir=str(run_dir),
            max_seq_length=16,
            task_options={"window_stride": 5},
            train_batch_size=16,
            num_train_steps=48,
            checkpoint_layouts=("huggingface",),
        )
    )
    losses = result.training.losses
    assert losses[-8:].mean() < 0.6 * losses[:8].mean(), losses
    documents, sentences = tagging_tests._parse_prediction_file(
        run_dir / "predictions" / "predictions_dev.txt"
    )
    gold = [[columns[1] for columns in sentence] for sentence in sentences]
    predicted = [[columns[2] for columns in sentence] for sentence in sentences]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        reference = f1_score(gold, predicted)
    eval_results = json.loads((run_dir / "eval_results.json").read_text(encoding="utf-8"))
    assert eval_results["results"]["dev"]["f1"] == pytest.approx(reference, abs=1e-9)
    assert eval_results["results"]["dev"]["f1"] > 0.3  # it learned something

    predict_dir = tmp_path / "predict"
    finetuning.run_finetuning(
        helpers.quick_config(
            mode="predict",
            init_checkpoint=str(run_dir / "export_huggingface"),
            data_dir=str(data_dir),
            output_dir=str(predict_dir),
        )
    )
    _, test_sentences = tagging_tests._parse_prediction_file(
        predict_dir / "predictions" / "predictions_test.txt"
    )
    test = result.task.read("test")
    assert [[c[0] for c in s] for s in test_sentences] == [list(e.words) for e in test]
    answers = tasks.predict(result.task, result.model, test, result.preprocessor)
    assert [tuple(c[2] for c in s) for s in test_sentences] == [tuple(a) for a in answers]
    # The model's casing is saved with it: a contradicting flag is an error naming it.
    with pytest.raises(ValueError, match=r"do_lower_case=False contradicts .*task\.json"):
        finetuning.run_finetuning(
            helpers.quick_config(
                mode="eval",
                do_lower_case=False,
                init_checkpoint=str(run_dir / "finetuned"),
                data_dir=str(data_dir),
                output_dir=str(tmp_path / "eval"),
            )
        )


# === SWAG ===


@pytest.mark.slow
def test_swag_runner_accuracy_matches_sklearn_and_predicts_from_the_google_export(tmp_path):
    data_dir = tmp_path / "swag"
    data_dir.mkdir()
    choice_tests.write_swag(data_dir / "train.csv", choice_tests.swag_rows(10, 48))
    choice_tests.write_swag(data_dir / "val.csv", choice_tests.swag_rows(11, 16))
    choice_tests.write_swag(
        data_dir / "test.csv", choice_tests.swag_rows(12, 5, labelled=False), labelled=False
    )
    checkpoint = helpers.write_tiny_checkpoint(
        tmp_path / "bert", choice_tests.VOCAB, layout="google", num_layers=2
    )
    run_dir = tmp_path / "run"
    result = finetuning.run_finetuning(
        helpers.quick_config(
            task="swag",
            data_dir=str(data_dir),
            init_checkpoint=checkpoint,
            output_dir=str(run_dir),
            max_seq_length=24,
            train_batch_size=8,
            num_train_steps=36,
            learning_rate=3e-3,
            checkpoint_layouts=("google",),
        )
    )
    losses = result.training.losses
    assert losses[-8:].mean() < 0.7 * losses[:8].mean(), losses
    rows = choice_tests._read_predictions(run_dir / "predictions" / "predictions_dev.csv")
    dev = result.task.read("dev")
    reference = sklearn.metrics.accuracy_score([e.label for e in dev], [int(r[1]) for r in rows])
    eval_results = json.loads((run_dir / "eval_results.json").read_text(encoding="utf-8"))
    assert eval_results["results"] == {"dev": {"accuracy": pytest.approx(reference, abs=1e-12)}}

    predict_dir = tmp_path / "predict"
    finetuning.run_finetuning(
        helpers.quick_config(
            mode="predict",
            init_checkpoint=str(run_dir / "export_google"),
            data_dir=str(data_dir),
            output_dir=str(predict_dir),
        )
    )
    test = result.task.read("test")
    rows = choice_tests._read_predictions(predict_dir / "predictions" / "predictions_test.csv")
    answers = tasks.predict(result.task, result.model, test, result.preprocessor)
    assert [r[0] for r in rows] == [e.example_id for e in test]
    assert [int(r[1]) for r in rows] == [a.label for a in answers]
    for row, answer in zip(rows, answers, strict=True):
        np.testing.assert_allclose([float(s) for s in row[2].split(" ")], answer.scores, atol=1e-5)


# === text_classification: the main job's path ===


@pytest.fixture(scope="module")
def minilm_vocab_checkpoint(tmp_path_factory):
    """A tiny random BERT over the real MiniLM vocabulary (uncased), Hugging Face layout."""
    vocabulary = load_vocab(os.path.join(demo_model_dir(), "vocab.txt"))
    return helpers.write_tiny_checkpoint(
        tmp_path_factory.mktemp("tiny_minilm_vocab"), vocabulary, layout="huggingface"
    )


@pytest.mark.slow
def test_main_job_path_on_pang_lee_and_transformers_reads_the_export(
    minilm_vocab_checkpoint, tmp_path
):
    import io

    import torch
    import transformers

    output_dir = tmp_path / "demo"
    printed = io.StringIO()
    main_job = demo.run_demo(
        demo.demo_config(
            init_checkpoint=minilm_vocab_checkpoint,
            output_dir=str(output_dir),
            num_train_epochs=3.0,
            learning_rate=1e-3,
            export_best=True,
            checkpoint_layouts=("huggingface",),
            progress="none",
        ),
        out=printed,
    )
    text = printed.getvalue()
    result = main_job.finetuning
    # 150 training and 50 held-out sentences: 28 steps of 16 in 3 epochs, evaluated each,
    # once at the end (not at 27 and again at 28: issue 47).
    assert main_job.num_heldout == 50 and result.num_train_steps == 28
    assert [entry["step"] for entry in result.eval_history] == [9, 18, 28]
    assert f"held-out accuracy: {main_job.accuracy:.3f} on 50 sentences" in text
    assert "wall time:" in text
    # The printed answers come from the TF Serving export, loaded back: they agree with
    # the in-memory Keras model on the same raw sentences.
    assert os.path.isfile(os.path.join(main_job.exported.path, "saved_model.pb"))
    assert main_job.exported.path.startswith(str(output_dir / "serving" / "text_classification"))
    assert len(main_job.served_answers) == len(main_job.answers) > 0
    for (sentence, label, probability), served in zip(
        main_job.answers, main_job.served_answers, strict=True
    ):
        assert label in ("neg", "pos") and 0.5 <= probability <= 1.0
        assert served["label"] == label
        assert served["probabilities"][served["label_id"]] == pytest.approx(probability, abs=1e-5)
        assert f"{label:>4} {max(served['probabilities']):.3f}  {sentence}" in text
    assert "same labels as the in-memory Keras model: yes" in text
    heldout = result.task.read("dev")
    records = _read_jsonl(output_dir / "predictions" / "predictions_dev.jsonl")
    assert [r["text"] for r in records] == [e.texts[0] for e in heldout]
    assert main_job.accuracy == pytest.approx(
        sklearn.metrics.accuracy_score([e.label for e in heldout], [r["label"] for r in records])
    )

    # transformers reads the Hugging Face export, tokenizes the raw held-out sentences
    # with its own BertTokenizer and answers what we wrote.
    export = output_dir / "export_huggingface"
    config = json.loads((export / "config.json").read_text(encoding="utf-8"))
    assert config["architectures"] == ["BertForSequenceClassification"]
    assert config["id2label"] == {"0": "neg", "1": "pos"}
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(export), local_files_only=True)
    model = transformers.BertForSequenceClassification.from_pretrained(
        str(export), local_files_only=True
    )
    model.eval()
    batch = tokenizer(
        [e.texts[0] for e in heldout],
        padding=True,
        truncation=True,
        max_length=64,
        return_tensors="pt",
    )
    with torch.no_grad():
        probabilities = torch.softmax(model(**batch).logits, dim=-1).numpy()
    ours = np.array([[r["probabilities"]["neg"], r["probabilities"]["pos"]] for r in records])
    np.testing.assert_allclose(probabilities, ours, atol=1e-4)

    # eval of the best model, in a new run on the same output directory.
    best = json.loads((output_dir / "best" / "metrics.json").read_text(encoding="utf-8"))
    assert best["metric"] == "dev/accuracy"
    evaluated = finetuning.run_finetuning(
        helpers.quick_config(
            mode="eval",
            output_dir=str(output_dir),
            use_best_model=True,
            data_dir=demo.gensim_test_data_dir(),
        )
    )
    assert evaluated.step == best["step"]
    assert evaluated.eval_results["dev"]["accuracy"] == pytest.approx(best["value"], abs=1e-9)
    written = json.loads((output_dir / "eval_results.json").read_text(encoding="utf-8"))
    assert written["model"].endswith("best") and written["step"] == best["step"]
    assert [e["step"] for e in written["history"]] == [9, 18, 28, best["step"]]
    _no_temporaries(output_dir)


# === Bad input ===


def test_casing_that_contradicts_the_vocabulary_is_an_error_naming_it(tmp_path):
    minilm_vocab = os.path.join(demo_model_dir(), "vocab.txt")
    data_dir = str(tmp_path)
    (tmp_path / "train.tsv").write_text("text\tlabel\nGood .\tpos\nBad .\tneg\n", "utf-8")
    config = helpers.quick_config(
        task="text_classification",
        data_dir=data_dir,
        init_checkpoint="bert_tiny_uncased",
        output_dir=str(tmp_path / "out"),
    )
    # An uncased vocabulary (30522 entries, no capitals) with --do_lower_case=false.
    with pytest.raises(ValueError, match=r"--do_lower_case=False contradicts .*vocab\.txt"):
        finetuning.run_finetuning(
            finetuning.dataclasses.replace(config, vocab_file=minilm_vocab, do_lower_case=False)
        )
    # A cased vocabulary with --do_lower_case=true.
    cased = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    cased += [f"Word{i}" for i in range(50)] + [f"word{i}" for i in range(50)]
    cased_file = tmp_path / "cased_vocab.txt"
    cased_file.write_text("\n".join(cased) + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"--do_lower_case=True contradicts .*cased_vocab\.txt"):
        finetuning.run_finetuning(
            finetuning.dataclasses.replace(config, vocab_file=str(cased_file), do_lower_case=True)
        )
    # Inferred from the vocabulary when not given.
    assert sources.make_tokenizer(minilm_vocab, None).lowercase is True
    assert sources.make_tokenizer(str(cased_file), None).lowercase is False
    assert not (tmp_path / "out" / "task.json").exists()  # nothing written before the check


def test_other_bad_inputs_are_clear_errors(tmp_path):
    (tmp_path / "train.tsv").write_text("text\tlabel\nGood .\tpos\nBad .\tneg\n", "utf-8")
    vocab_file = tmp_path / "vocab.txt"
    vocab_file.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\ngood\nbad\n.\n", "utf-8")
    config = helpers.quick_config(
        task="text_classification",
        data_dir=str(tmp_path),
        output_dir=str(tmp_path / "out"),
        vocab_file=str(vocab_file),
    )
    replace = finetuning.dataclasses.replace
    with pytest.raises(ValueError, match="--init_checkpoint is required"):
        finetuning.run_finetuning(config)
    with pytest.raises(FileNotFoundError, match="no_such_dir: no such file .* not a preset"):
        finetuning.run_finetuning(replace(config, init_checkpoint=str(tmp_path / "no_such_dir")))
    with pytest.raises(ValueError, match="has no vocab.txt: pass --vocab_file"):
        finetuning.run_finetuning(replace(config, init_checkpoint="bert_tiny", vocab_file=None))
    with pytest.raises(FileNotFoundError, match="needs a fine-tuned model: none in"):
        finetuning.run_finetuning(replace(config, mode="predict"))
    with pytest.raises(ValueError, match="has no eval split here"):
        finetuning.run_finetuning(replace(config, init_checkpoint="bert_tiny"))
    # An output directory that holds another run (another label set) is not resumed.
    other = tasks.create_task("text_classification", data_dir=str(tmp_path), label_names="x,y")
    tokenizer = sources.make_tokenizer(str(vocab_file), True)
    os.makedirs(tmp_path / "out", exist_ok=True)
    (tmp_path / "out" / "task.json").write_text(
        json.dumps(tasks.saving.task_description(other, tokenizer)), "utf-8"
    )
    with pytest.raises(ValueError, match=r"out/task\.json: this output directory holds a run"):
        finetuning.run_finetuning(replace(config, init_checkpoint="bert_tiny", mode="train"))
    with pytest.raises(ValueError, match="mode must be one of"):
        finetuning.FinetuningConfig(mode="fit")


def test_stale_temporaries_of_a_killed_write_are_removed(tmp_path):
    (tmp_path / ".eval_results.json.abc123.tmp").write_text("{", "utf-8")
    (tmp_path / ".best.tmp-xyz_1").mkdir()
    (tmp_path / ".hidden_config").write_text("kept", "utf-8")
    (tmp_path / "eval_results.json").write_text("{}", "utf-8")
    removed = atomic.remove_stale_temporaries(str(tmp_path))
    assert sorted(os.path.basename(p) for p in removed) == [
        ".best.tmp-xyz_1",
        ".eval_results.json.abc123.tmp",
    ]
    assert sorted(os.listdir(tmp_path)) == [".hidden_config", "eval_results.json"]


def test_json_safe_handles_numpy_and_non_finite_values():
    value = {"a": np.float32(0.5), "b": [float("nan"), math.inf], "c": np.float64("nan")}
    assert atomic.json_safe(value) == {"a": 0.5, "b": [None, None], "c": None}
