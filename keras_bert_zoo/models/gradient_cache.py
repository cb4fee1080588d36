"""GradCache: a loss over a whole batch of vectors, with its gradients, computed chunk
by chunk of the batch (Gao et al., 2021, "Scaling Deep Contrastive Learning Batch Size
under Memory Limited Setup"; sentence-transformers' `CachedMultipleNegativesRankingLoss`).

In-batch negatives get better with the batch, but a batch's activations grow with it.
`cached_loss_and_gradients` keeps only the vectors of the whole batch in memory and the
activations of one chunk at a time, with the same loss and gradients as one pass (see
its docstring), for any loss of `models.embedding_losses`.
"""

from __future__ import annotations

import tensorflow as tf

from keras_bert_zoo.utils.errors import UserError


def _in_chunks(tensor, num_chunks, chunk_size):
    """`[batch, ...]` -> `[num_chunks, chunk_size, ...]`, the rows repeated from the
    first to fill the last chunk: every chunk has one static shape (XLA needs it)."""
    rows = tf.range(num_chunks * chunk_size) % tf.shape(tensor)[0]
    shape = tf.concat([[num_chunks, chunk_size], tf.shape(tensor)[1:]], 0)
    return tf.reshape(tf.gather(tensor, rows), shape)


def _seed_states(model) -> list:
    """The state variables of every random seed generator of `model` (dropout's)."""
    states, seen = [], set()
    for layer in [model, *model._flatten_layers(include_self=False)]:  # noqa: SLF001
        for generator in getattr(layer, "_seed_generators", ()):
            if id(generator.state) not in seen:
                seen.add(id(generator.state))
                states.append(generator.state)
    return states


def cached_loss_and_gradients(
    model,
    x,
    y=None,
    sample_weight=None,
    *,
    loss,
    chunk_size: int,
    variables=None,
    training: bool = True,
    loss_scale=None,
):
    """`(loss, gradients, y_pred)` of `loss(y, model(x), sample_weight)`, computed in
    chunks of `chunk_size` rows (GradCache: Gao et al., 2021, "Scaling Deep Contrastive
    Learning Batch Size under Memory Limited Setup"; sentence-transformers'
    `CachedMultipleNegativesRankingLoss`).

    Memory then grows with `chunk_size`, not the batch, while the loss still sees every
    vector of the batch (all its in-batch negatives):

    1. embed each chunk without recording gradients, and keep the vectors only;
    2. compute the loss on all the vectors and its gradient with respect to them;
    3. embed each chunk again, recording, and backpropagate that chunk's share of the
       vectors' gradient into the weights; the chunks' weight gradients add up.

    Step 3 replays step 1's dropout: every seed generator of `model` is set back to its
    state before step 1, so each chunk draws the same masks twice. The loss and
    gradients equal those of one pass over the batch made of the same chunks (with
    dropout off, or in inference mode: exactly those of `model(x)` on the whole batch,
    to float rounding). Under a strategy the loss's all-gather sits in step 2, so the
    vectors' gradient of each replica already includes every replica's share.

    Call it instead of a forward pass under a `tf.GradientTape` (outside any tape: it
    records its own), in a replica context under a strategy; gradients are not summed
    across replicas.

    Args:
        model: maps `x` to `y_pred` row by row (`BertTextGroupEmbedder`).
        x: the model's inputs, a nest of tensors `[batch, ...]`.
        y: the labels `loss` reads (None for `MultipleNegativesRankingLoss`).
        sample_weight: `[batch]` or None.
        loss: a `keras.losses.Loss` (or callable `(y_true, y_pred, sample_weight)`).
        chunk_size: int, rows embedded at once.
        variables: the variables to differentiate (default: the trainable ones).
        training: bool, the model's mode (dropout).
        loss_scale: float scalar or None: the gradients are those of `loss *
            loss_scale` (a `LossScaleOptimizer`'s dynamic scale); the returned loss is
            not scaled.

    Returns:
        `(loss, gradients, y_pred)`: the float32 scalar loss, one dense gradient per
        variable (None for a variable the loss does not reach), and the vectors of the
        whole batch.
    """
    if int(chunk_size) < 1:
        raise UserError(f"chunk_size={chunk_size}: must be >= 1")
    chunk_size = int(chunk_size)
    variables = list(model.trainable_variables if variables is None else variables)
    batch = tf.shape(tf.nest.flatten(x)[0])[0]
    num_chunks = (batch + chunk_size - 1) // chunk_size
    chunks = tf.nest.map_structure(lambda t: _in_chunks(t, num_chunks, chunk_size), x)
    seeds = _seed_states(model)
    seeds_before = [tf.identity(state) for state in seeds]

    def chunk(i):
        return tf.nest.map_structure(lambda t: t[i], chunks)

    # 1. The vectors, chunk by chunk, nothing recorded.
    def embed(i):
        return tf.stop_gradient(tf.cast(model(chunk(i), training=training), tf.float32))

    first_vectors = embed(tf.constant(0))
    _, vectors = tf.while_loop(
        lambda i, _: i < num_chunks,
        lambda i, vectors: (i + 1, vectors.write(i, embed(i))),
        (
            tf.constant(1),
            tf.TensorArray(tf.float32, size=num_chunks, element_shape=first_vectors.shape).write(
                0, first_vectors
            ),
        ),
    )
    vectors = vectors.stack()
    # The filler rows of the last chunk are dropped: the loss sees the batch alone.
    y_pred = tf.reshape(vectors, tf.concat([[-1], tf.shape(vectors)[2:]], 0))[:batch]

    # 2. The loss and its gradient with respect to the vectors.
    with tf.GradientTape() as tape:
        tape.watch(y_pred)
        value = tf.cast(loss(y, y_pred, sample_weight), tf.float32)
        scaled = value if loss_scale is None else value * tf.cast(loss_scale, tf.float32)
    # Zero for the filler rows: they add nothing to the weights' gradients.
    y_pred_gradient = tape.gradient(scaled, y_pred)
    filler = [[0, num_chunks * chunk_size - batch]] + [[0, 0]] * (y_pred.shape.rank - 1)
    vector_gradients = tf.reshape(tf.pad(y_pred_gradient, filler), tf.shape(vectors))

    # 3. Each chunk again, with the same dropout, its share of the gradient backpropagated.
    for state, saved in zip(seeds, seeds_before, strict=True):
        state.assign(saved)

    def backpropagate(i):
        with tf.GradientTape() as chunk_tape:
            chunk_vectors = tf.cast(model(chunk(i), training=training), tf.float32)
            surrogate = tf.reduce_sum(chunk_vectors * vector_gradients[i])
        gradients = chunk_tape.gradient(surrogate, variables)
        return [None if g is None else tf.convert_to_tensor(g) for g in gradients]

    first = backpropagate(tf.constant(0))
    present = [j for j, g in enumerate(first) if g is not None]

    def accumulate(i, sums):
        gradients = backpropagate(i)
        return i + 1, [total + gradients[j] for total, j in zip(sums, present, strict=True)]

    _, sums = tf.while_loop(
        lambda i, _: i < num_chunks,
        accumulate,
        (tf.constant(1), [first[j] for j in present]),
    )
    gradients = [None] * len(variables)
    for j, total in zip(present, sums, strict=True):
        gradients[j] = total
    return value, gradients, y_pred
