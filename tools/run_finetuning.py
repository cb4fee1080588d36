"""Fine-tunes, evaluates and predicts any task; with no flags, runs the main job.

With no `--task` it runs the built-in main job: the real pretrained all-MiniLM-L6-v2
(the `demo` extra) fine-tuned on the 200 labelled movie-review sentences gensim ships,
50 held out; it prints progress, the held-out accuracy, the wall time and its answers
for a few raw sentences. Any flag given changes that job's setting.

With `--task`, it runs `--mode` (train | train_and_eval | eval | predict | export) on that task
(`--helpfull` lists them and every flag: the runner's, the training core's, and each
task's options). Flags keep google-research/bert's `run_classifier.py` names and
defaults: `--train_batch_size=32 --learning_rate=5e-5 --num_train_epochs=3
--warmup_proportion=0.1`, `--max_seq_length` the task's (128; 384 for SQuAD),
`--do_lower_case` read from the vocabulary. `--eval_every` defaults to once per epoch.
Rerunning a killed training command resumes it. See `keras_bert_zoo/runners/finetuning.py`
for the output directory's layout.

Usage:
  python tools/run_finetuning.py
  python tools/run_finetuning.py --task=glue/mrpc --data_dir=glue_data/MRPC \
      --init_checkpoint=uncased_L-12_H-768_A-12 --output_dir=/tmp/mrpc --learning_rate=2e-5
  python tools/run_finetuning.py --task=glue/mrpc --data_dir=glue_data/MRPC \
      --output_dir=/tmp/mrpc --mode=predict
  python tools/run_finetuning.py --mode=export --init_checkpoint=/tmp/mrpc \
      --output_dir=/tmp/mrpc_hf --checkpoint_layouts=huggingface
"""

import importlib.util
import os

from keras_bert_zoo.utils import startup


def _unknown_task(arguments: list[str]) -> str | None:
    """A --task typo ends the tool at once, not after TensorFlow's start-up: the task
    names are read from keras_bert_zoo/tasks/names.py, loaded by path (the tasks
    package's __init__ imports TensorFlow)."""
    package = importlib.util.find_spec("keras_bert_zoo")
    path = os.path.join(list(package.submodule_search_locations)[0], "tasks", "names.py")
    spec = importlib.util.spec_from_file_location("_keras_bert_zoo_task_names", path)
    names = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(names)
    return names.unknown_task_message(arguments)


# Before TensorFlow loads: the command line checked, the CPU kernels chosen
# (keras_bert_zoo/utils/startup.py).
startup.start_tool(__file__, kernels=True, check=_unknown_task)

from absl import flags  # noqa: E402

from keras_bert_zoo.runners import demo, finetuning  # noqa: E402
from keras_bert_zoo.utils import cli  # noqa: E402

finetuning.define_flags()
startup.define_onednn_flag()
FLAGS = flags.FLAGS


def main(argv):
    cli.refuse_arguments(argv)
    startup.log_kernel_choice()
    if FLAGS.task is None and FLAGS.mode in ("train", "train_and_eval"):
        demo.run_demo(demo.demo_config(**finetuning.explicit_flag_values(FLAGS)))
        return
    print(finetuning.summary(finetuning.run_finetuning(finetuning.config_from_flags(FLAGS))))


def run():
    """The console script `keras-bert-zoo-run-finetuning`, and this file."""
    cli.run(main)


if __name__ == "__main__":
    run()
