r"""Pretrains BERT (masked LM + next sentence prediction), google-research/bert's recipe.

Reads pretraining TFRecords (ours from tools/create_pretraining_data.py, or the
original's), or masks on the fly (--input_mode=remask_records | dynamic_text), trains
with the shared training flags (optimizer, schedule, clipping, accumulation, precision,
XLA, strategy: --helpfull lists them), evaluates on held-out records, checkpoints
(rerunning a killed command resumes it) and exports the model with its MLM and NSP
heads in the google-research/bert and Hugging Face layouts. All logic lives in
keras_bert_zoo/runners/pretraining.py.

Usage (the paper's two phases: 90% of the steps at 128 tokens, then 512):
  python tools/run_pretraining.py --input_file='data128/train.tfrecord-*' \
      --eval_input_file=data128/heldout.tfrecord --preset=bert_base_uncased \
      --vocab_file=vocab.txt --output_dir=/tmp/phase1 --train_batch_size=256 \
      --num_train_steps=900000 --num_warmup_steps=10000 --learning_rate=1e-4
  python tools/run_pretraining.py --input_file='data512/train.tfrecord-*' \
      --eval_input_file=data512/heldout.tfrecord --init_checkpoint=/tmp/phase1 \
      --max_seq_length=512 --output_dir=/tmp/phase2 --train_batch_size=256 \
      --num_train_steps=100000 --num_warmup_steps=1000 --learning_rate=1e-4
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from absl import app, flags  # noqa: E402

from keras_bert_zoo.runners import pretraining as run  # noqa: E402
from keras_bert_zoo.utils import cli  # noqa: E402

run.define_flags()
FLAGS = flags.FLAGS


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    result = run.run_pretraining(run.config_from_flags(FLAGS))
    print(f"Trained to step {result.step} in {result.seconds:.1f} s")
    if result.eval_results:
        print(
            f"eval_results.json (step {result.step}): "
            + ", ".join(f"{k} {v:.4f}" for k, v in sorted(result.eval_results.items()))
        )
    for layout, path in result.exports.items():
        print(f"{layout}: {path}")


if __name__ == "__main__":
    cli.run(main)
