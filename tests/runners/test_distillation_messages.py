"""What run_distillation says (issue 47, point 11): --student_layers=0 is refused with the
range that is valid (it named "the teacher's 1000000 blocks", a placeholder of the check
made before the teacher is read), the summary prints the student's primary metric as a
fraction of the teacher's (the README said so; it did not), and a file the task cannot
decode names the flag, --encoding (it named the Python API, `Task(encoding=...)`)."""

import types

import pytest

from keras_bert_zoo.runners import distillation
from keras_bert_zoo.tasks._shared import read_tab_separated_fields
from keras_bert_zoo.tasks.question_answering.reader import read_squad_json
from keras_bert_zoo.tasks.tagging.reader import read_column_file
from keras_bert_zoo.utils.errors import UserError


@pytest.mark.parametrize(
    "value, message",
    [
        ("0", r"^--student_layers=0: a count of blocks \(1 or more\) or distinct block indices"),
        ("-1,2", r"^--student_layers=-1,2: a count of blocks \(1 or more\) or distinct"),
        ("1,1", r"^--student_layers=1,1: a block index is given twice$"),
    ],
)
def test_student_layers_out_of_any_range_are_refused_before_the_teacher_loads(
    tmp_path, value, message
):
    config = distillation.DistillationConfig(
        teacher=str(tmp_path / "teacher"),  # not read: the flags are checked first
        student_layers=value,
        output_dir=str(tmp_path / "student"),
    )
    with pytest.raises(UserError, match=message) as raised:
        distillation.run_distillation(config)
    assert "1000000" not in str(raised.value)
    assert not (tmp_path / "student").exists()


def test_student_layers_against_the_teacher_name_its_blocks():
    with pytest.raises(UserError, match=r"a count from 1 to the teacher's 6 blocks"):
        distillation.parse_student_layers("0", 6)
    assert distillation.parse_student_layers("3", 6) == [0, 2, 4]


def test_the_summary_prints_the_fraction_of_the_teachers_metric():
    result = types.SimpleNamespace(
        task=types.SimpleNamespace(primary_metric="accuracy"),
        config=types.SimpleNamespace(teacher="runs/teacher", output_dir="runs/student"),
        eval_results={"dev": {"accuracy": 0.8, "loss": 0.5}},
        teacher_results={"dev": {"accuracy": 0.9, "loss": 0.3}},
        step=12,
        prediction_files={},
        exports={"keras": "runs/student/finetuned"},
        training=None,
    )
    lines = distillation.summary(result).splitlines()
    assert lines == [
        "teacher (runs/teacher):",
        "  dev: accuracy 0.9000 (primary), loss 0.3000",
        "eval_results.json (step 12):",
        "  dev: accuracy 0.8000 (primary), loss 0.5000",
        "  fraction of the teacher's accuracy: dev 0.8889",
        "keras: runs/student/finetuned",
    ]


def test_an_undecodable_file_names_the_encoding_flag(tmp_path):
    latin1 = "caf\xe9 cr\xe8me".encode("latin-1")
    transfer = tmp_path / "transfer.txt"
    transfer.write_bytes(b"a fine film\n" + latin1 + b"\n")
    with pytest.raises(UserError, match=r"transfer.txt:2: .*; pass --encoding with") as raised:
        read_tab_separated_fields(str(transfer), ("sentence",))
    assert "Task(" not in str(raised.value)
    conll = tmp_path / "train.conll"
    conll.write_bytes(b"EU B-ORG\n" + latin1.split()[0] + b" O\n")
    with pytest.raises(UserError, match=r"train.conll:2: .*; pass --encoding with"):
        read_column_file(str(conll), "train")
    squad = tmp_path / "train.json"
    squad.write_bytes(b'{"data": [], "title": "' + latin1 + b'"}')
    with pytest.raises(UserError, match=r"train.json: not valid utf-8 .*; pass --encoding with"):
        read_squad_json(str(squad), version_2_with_negative=False, training=False)
