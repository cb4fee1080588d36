r"""Pretrains BERT (masked LM + next sentence prediction), google-research/bert's recipe.

Reads pretraining TFRecords (ours from tools/create_pretraining_data.py, or the
original's), or masks on the fly (--input_mode=remask_records | dynamic_text), trains
with the shared training flags (optimizer, schedule, clipping, accumulation, precision,
XLA, strategy: --helpfull lists them), evaluates on held-out records, checkpoints
(rerunning a killed command resumes it) and exports the model with its MLM and NSP
heads in the google-research/bert and Hugging Face layouts. --mode=eval evaluates a
run's newest checkpoint (or --init_checkpoint) on --eval_input_file; --mode=export
writes it in those layouts. The job is keras_bert_zoo/runners/pretraining.py.

Usage (the paper's two phases: 90% of the steps at 128 tokens, then 512):
  python tools/run_pretraining.py --input_file='data128/train.tfrecord-*' \
      --eval_input_file=data128/heldout.tfrecord --preset=bert_base_uncased \
      --vocab_file=vocab.txt --output_dir=/tmp/phase1 --train_batch_size=256 \
      --num_train_steps=900000 --num_warmup_steps=10000 --learning_rate=1e-4
  python tools/run_pretraining.py --input_file='data512/train.tfrecord-*' \
      --eval_input_file=data512/heldout.tfrecord --init_checkpoint=/tmp/phase1 \
      --max_seq_length=512 --output_dir=/tmp/phase2 --train_batch_size=256 \
      --num_train_steps=100000 --num_warmup_steps=1000 --learning_rate=1e-4
  python tools/run_pretraining.py --mode=eval --output_dir=/tmp/phase2 \
      --eval_input_file=data512/heldout.tfrecord --eval_steps=0
"""

from keras_bert_zoo.utils import startup

# Before TensorFlow loads: the command line checked, the CPU kernels chosen
# (keras_bert_zoo/utils/startup.py).
startup.start_tool(__file__, kernels=True)

from absl import flags  # noqa: E402

from keras_bert_zoo.runners import pretraining  # noqa: E402
from keras_bert_zoo.utils import cli  # noqa: E402

pretraining.define_flags()
startup.define_onednn_flag()
FLAGS = flags.FLAGS


def main(argv):
    cli.refuse_arguments(argv)
    startup.log_kernel_choice()
    print(pretraining.summary(pretraining.run_pretraining(pretraining.config_from_flags(FLAGS))))


def run():
    """The console script `keras-bert-zoo-run-pretraining`, and this file."""
    cli.run(main)


if __name__ == "__main__":
    run()
