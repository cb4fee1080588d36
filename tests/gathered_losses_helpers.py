"""The tiny sentence embedding model, batches and training steps that the tests of
losses over the whole batch (in-batch negatives, CoSENT; gradient caching) share, in
one process or in a child process of several logical devices."""

import keras
import numpy as np
import tensorflow as tf

from keras_bert_zoo.models import BertEncoder
from keras_bert_zoo.models.sentence_embedder import BertTextGroupEmbedder
from keras_bert_zoo.training import Trainer
from keras_bert_zoo.training import step as step_lib

SMALL = {
    "vocab_size": 97,
    "hidden_size": 32,
    "num_layers": 1,
    "num_heads": 4,
    "intermediate_size": 64,
    "max_position_embeddings": 64,
}
GLOBAL_BATCH, SEQ_LEN = 8, 7
LEARNING_RATE = 0.5


def group_batch(texts, seed):
    """`(x, y)`: `GLOBAL_BATCH` rows of `texts` token sequences of varied lengths, and
    distinct scores in [0, 1) (CoSENT reads their order)."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(3, SEQ_LEN + 1, (GLOBAL_BATCH, texts))
    mask = (np.arange(SEQ_LEN) < lengths[..., None]).astype("int32")
    x = {
        "input_word_ids": rng.integers(1, 97, (GLOBAL_BATCH, texts, SEQ_LEN)).astype("int32")
        * mask,
        "input_mask": mask,
        "input_type_ids": np.zeros_like(mask),
    }
    return x, rng.permutation(GLOBAL_BATCH).astype("float32") / GLOBAL_BATCH


def make_group_model(strategy, make_loss, *, dropout=0.0, optimizer=None, seed=1):
    """A compiled `BertTextGroupEmbedder` (projection to 16) in `strategy`'s scope, with
    weights drawn from `seed` (the default initialization gives near-identical vectors,
    whose losses barely move)."""
    with strategy.scope():
        model = BertTextGroupEmbedder(
            BertEncoder(**SMALL, hidden_dropout=dropout, attention_dropout=dropout),
            embedding_dim=16,
        )
        model.compile(optimizer=optimizer or keras.optimizers.SGD(LEARNING_RATE), loss=make_loss())
    x, _ = group_batch(2, 0)
    model({k: v[:2] for k, v in x.items()})
    rng = np.random.default_rng(seed)
    for variable in model.weights:
        if variable.dtype in ("float32", "float16"):
            value = 0.3 * rng.standard_normal(variable.shape) + ("gamma" in variable.path)
            variable.assign(value.astype("float32"))
    return model


def train_steps(model, strategy, loss_fn, x, y, *, steps, jit_compile=False, accumulation=1):
    """The losses of `steps` steps of `step.TrainStep` on the global batch `(x, y)`,
    each replica reading its consecutive share of the rows."""
    per_replica = GLOBAL_BATCH // strategy.num_replicas_in_sync

    def next_batch(context):
        start = context.replica_id_in_sync_group * per_replica
        rows = slice(start, start + per_replica)
        return {k: tf.constant(v[rows]) for k, v in x.items()}, tf.constant(y[rows])

    spec = (
        {k: tf.TensorSpec((per_replica, *v.shape[1:]), tf.int32) for k, v in x.items()},
        tf.TensorSpec((per_replica,), tf.float32),
    )
    step_lib.build_training_state(model, strategy, spec)
    train_step = step_lib.TrainStep(
        model,
        strategy=strategy,
        loss_fn=loss_fn,
        gradient_accumulation_steps=accumulation,
        jit_compile=jit_compile,
    )
    loop = train_step.make_loop(next_batch)
    with step_lib.gradients_reduced_by_the_step(train_step.optimizer):
        losses, _, _ = loop(tf.constant(steps))
    return losses.numpy()


def train_with_trainer(model, strategy, loss_fn, x, y, *, steps, model_dir, jit_compile=False):
    """The losses of `steps` steps of `Trainer.train` on the global batch `(x, y)`: the
    worker's pipeline gives each replica its consecutive share of the rows in turn."""
    per_replica = GLOBAL_BATCH // strategy.num_replicas_in_sync

    def dataset_fn(input_context):
        # Each worker's consecutive rows, as its replicas' shares.
        per_worker = GLOBAL_BATCH // input_context.num_input_pipelines
        rows = tf.data.Dataset.from_tensor_slices((x, y))
        mine = rows.skip(input_context.input_pipeline_id * per_worker).take(per_worker)
        return mine.batch(per_replica, drop_remainder=True).repeat()

    trainer = Trainer(
        model,
        model_dir=model_dir,
        strategy=strategy,
        loss_fn=loss_fn,
        jit_compile=jit_compile,
        steps_per_loop=steps,
        checkpoint_every=0,
        progress="none",
    )
    return trainer.train(dataset_fn, steps).losses


def in_chunks_loss_fn(chunk_size):
    """A loss function of the uncached loss over the rows embedded `chunk_size` at a
    time (a batch that is a multiple of it), as GradCache's chunks embed them, drawing
    the same dropout masks from the same seed states."""

    def loss_fn(model, x, y, sample_weight):
        def rows(start):
            return tf.nest.map_structure(lambda t: t[start : start + chunk_size], x)

        batch = tf.nest.flatten(x)[0].shape[0]
        starts = range(0, batch, chunk_size)
        y_pred = tf.concat([model(rows(start), training=True) for start in starts], 0)
        loss = model.compute_loss(
            x=x, y=y, y_pred=y_pred, sample_weight=sample_weight, training=True
        )
        return loss, y_pred

    return loss_fn


def copy_seed_states(source, target, offset=0):
    """Sets `target`'s dropout seed states to `source`'s (plus `offset`: other masks)."""
    from keras_bert_zoo.models.gradient_cache import _seed_states

    theirs = _seed_states(target)
    assert theirs, "the model's dropout layers have seed generators"
    for ours, state in zip(_seed_states(source), theirs, strict=True):
        state.assign(ours.numpy() + offset)
