"""Distils a fine-tuned model into a smaller, faster student of the same task.

`--teacher` is a fine-tuned directory (or a fine-tuning run's `--output_dir`) of any
task; the student starts from the teacher's own blocks (`--student_layers=3` or
`0,2,4`; default half of them) or from `--student` (a preset or any checkpoint
`run_finetuning.py --init_checkpoint` accepts). It trains on the task's training split
(the task's data flags, as `run_finetuning.py` takes them) with the task's loss and
the teacher's soft targets, and on `--transfer_file`'s unlabelled text with the
teacher's alone. The output directory is a fine-tuning run's: evaluate, predict or
export the student with `run_finetuning.py --mode=eval|predict|export` and
`export_saved_model.py --finetuned_dir`. Rerunning a killed command resumes it.

Usage:
  python tools/run_distillation.py --teacher=/tmp/sst2 --data_dir=glue_data/SST-2 \
      --student_layers=3 --transfer_file=unlabelled.txt --output_dir=/tmp/sst2_student
"""

from keras_bert_zoo.utils import startup

# Before TensorFlow loads: the command line checked, the CPU kernels chosen
# (keras_bert_zoo/utils/startup.py).
startup.start_tool(__file__, kernels=True)

from absl import flags  # noqa: E402

from keras_bert_zoo.runners import distillation  # noqa: E402
from keras_bert_zoo.utils import cli  # noqa: E402

distillation.define_distillation_flags()
startup.define_onednn_flag()
FLAGS = flags.FLAGS


def main(argv):
    cli.refuse_arguments(argv)
    startup.log_kernel_choice()
    config = distillation.config_from_distillation_flags(FLAGS)
    print(distillation.summary(distillation.run_distillation(config)))


def run():
    """The console script `keras-bert-zoo-run-distillation`, and this file."""
    cli.run(main)


if __name__ == "__main__":
    run()
