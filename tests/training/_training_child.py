"""A small training run in its own process, for the resume and distribution tests.

Run as a script (the tests start it with subprocess): it builds a model, trains it with
`Trainer` and writes the per-step losses and the final weights to `--out` (.npz).
Logical CPU devices and `TF_CONFIG` must be set up before TensorFlow starts, which is
why these runs live in their own processes.
"""

import argparse
import logging
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def parse_args(argv):
    parser = argparse.ArgumentParser()
    parser.add_argument("--strategy", default="one_device")
    parser.add_argument("--logical_cpus", type=int, default=1)
    parser.add_argument("--model", choices=["pretrainer", "classifier"], default="pretrainer")
    parser.add_argument("--preset", default="small", help="'small' or a preset name")
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--steps_per_loop", type=int, default=1)
    parser.add_argument("--checkpoint_every", type=int, default=2)
    parser.add_argument("--keep_checkpoints", type=int, default=3)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--accumulation", type=int, default=1)
    parser.add_argument("--jit", action="store_true")
    parser.add_argument("--dropout", type=float, default=0.1)
    parser.add_argument("--input_state", default="iterator")
    parser.add_argument("--clip_norm", type=float, default=1.0)
    parser.add_argument("--learning_rate", type=float, default=1e-3)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--model_dir", required=True)
    parser.add_argument("--out", default=None)
    return parser.parse_args(argv)


SMALL = {
    "vocab_size": 97,
    "hidden_size": 32,
    "num_layers": 1,
    "num_heads": 4,
    "intermediate_size": 64,
    "max_position_embeddings": 64,
}
SEQ_LEN = 24
PREDICTIONS = 5


def pretraining_dataset_fn(vocab_size, seed, global_batch):
    """Deterministic MLM+NSP batches from a shuffled, repeated stream with its own RNG.

    `Dataset.random` and the shuffle buffer are part of the iterator state, which is
    what an exact resume has to restore.
    """
    import tensorflow as tf

    def example(index, random_value):
        tokens = tf.random.stateless_uniform(
            [SEQ_LEN], seed=tf.stack([index, 1]), minval=5, maxval=vocab_size, dtype=tf.int64
        )
        length = 8 + tf.cast(tf.math.floormod(index, SEQ_LEN - 8), tf.int32)
        mask = tf.cast(tf.range(SEQ_LEN) < length, tf.int32)
        word_ids = tf.cast(tokens, tf.int32) * mask
        positions = tf.math.floormod(
            tf.cast(random_value, tf.int32) + tf.range(PREDICTIONS) * 3, length - 1
        )
        positions = positions + 1
        x = {
            "input_word_ids": tf.tensor_scatter_nd_update(
                word_ids, positions[:, None], tf.fill([PREDICTIONS], 4)
            ),
            "input_mask": mask,
            "input_type_ids": tf.cast(tf.range(SEQ_LEN) >= length // 2, tf.int32) * mask,
            "masked_lm_positions": positions,
        }
        y = {
            "masked_lm_ids": tf.gather(word_ids, positions),
            "masked_lm_weights": tf.ones([PREDICTIONS], tf.float32),
            "next_sentence_labels": tf.math.floormod(index, 2)[None],
        }
        return x, y

    def dataset_fn(context):
        dataset = tf.data.Dataset.zip(
            tf.data.Dataset.range(400), tf.data.Dataset.random(seed=seed).take(400)
        )
        dataset = dataset.map(example).shuffle(64, seed=seed).repeat()
        return per_pipeline_batches(dataset, context, global_batch)

    return dataset_fn


def per_pipeline_batches(dataset, context, global_batch):
    """Global batch s is the same examples whatever the number of workers and replicas:
    each input pipeline keeps its slice of it, cut into per-replica batches (so
    trajectories can be compared across strategies)."""
    import tensorflow as tf

    pipelines, index = context.num_input_pipelines, context.input_pipeline_id
    share = global_batch // pipelines
    dataset = dataset.batch(global_batch, drop_remainder=True)
    dataset = dataset.map(
        lambda *batch: tf.nest.map_structure(
            lambda t: t[index * share : (index + 1) * share], batch
        )
    )
    dataset = dataset.unbatch()
    return dataset.batch(context.get_per_replica_batch_size(global_batch), drop_remainder=True)


def classifier_dataset_fn(vocab_size, seed, global_batch):
    import numpy as np
    import tensorflow as tf

    rng = np.random.default_rng(seed)
    n = 96
    lengths = rng.integers(6, SEQ_LEN + 1, n)
    mask = (np.arange(SEQ_LEN)[None, :] < lengths[:, None]).astype("int32")
    x = {
        "input_word_ids": rng.integers(5, vocab_size, (n, SEQ_LEN)).astype("int32") * mask,
        "input_mask": mask,
        "input_type_ids": np.zeros((n, SEQ_LEN), "int32"),
    }
    y = (x["input_word_ids"][:, 1] % 2).astype("int32")

    def dataset_fn(context):
        dataset = tf.data.Dataset.from_tensor_slices((x, y))
        dataset = dataset.cache().shuffle(n, seed=seed).repeat()
        return per_pipeline_batches(dataset, context, global_batch)

    return dataset_fn


def main(argv):
    args = parse_args(argv)
    import tensorflow as tf

    if args.logical_cpus > 1:
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration()] * args.logical_cpus
        )
    logging.basicConfig(
        level=logging.INFO, stream=sys.stdout, format="%(levelname)s %(name)s: %(message)s"
    )
    import keras
    import numpy as np

    from keras_bert_zoo.config import BertConfig
    from keras_bert_zoo.models import BertClassifier, BertEncoder, BertPretrainer
    from keras_bert_zoo.training import Trainer, distribute, optimization

    strategy = distribute.get_strategy(args.strategy)
    keras.utils.set_random_seed(args.seed)
    with strategy.scope():
        if args.preset == "small":
            kwargs = dict(SMALL)
        else:
            kwargs = BertConfig.from_preset(args.preset).encoder_kwargs()
        kwargs.update(hidden_dropout=args.dropout, attention_dropout=args.dropout)
        encoder = BertEncoder(**kwargs)
        config = optimization.OptimizerConfig(
            learning_rate=args.learning_rate,
            warmup_steps=2,
            clip_norm=args.clip_norm or None,
        )
        optimizer = optimization.create_optimizer(config, num_train_steps=args.steps)
        if args.model == "pretrainer":
            model = BertPretrainer(encoder)
            model.compile(optimizer=optimizer)
            dataset_fn = pretraining_dataset_fn(kwargs["vocab_size"], args.seed, args.batch)
        else:
            model = BertClassifier(encoder, num_classes=2, dropout=args.dropout)
            model.compile(
                optimizer=optimizer,
                loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                metrics=["accuracy"],
            )
            dataset_fn = classifier_dataset_fn(kwargs["vocab_size"], args.seed, args.batch)
    trainer = Trainer(
        model,
        model_dir=args.model_dir,
        strategy=strategy,
        gradient_accumulation_steps=args.accumulation,
        jit_compile=args.jit,
        steps_per_loop=args.steps_per_loop,
        checkpoint_every=args.checkpoint_every,
        keep_checkpoints=args.keep_checkpoints,
        progress="log",
    )
    result = trainer.train(dataset_fn, args.steps, input_state=args.input_state)
    print(
        f"DONE restored_step={result.restored_step} step={result.step} "
        f"replicas={strategy.num_replicas_in_sync}",
        flush=True,
    )
    if args.out and distribute.is_chief(strategy):
        weights = {
            f"w{i:04d}": keras.ops.convert_to_numpy(v) for i, v in enumerate(model.variables)
        }
        np.savez(args.out, losses=result.losses, restored=result.restored_step or -1, **weights)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
