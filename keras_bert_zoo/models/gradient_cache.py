"""GradCache: a loss over a whole batch of vectors, with its gradients, computed chunk
by chunk of the batch (Gao et al., 2021, "Scaling Deep Contrastive Learning Batch Size
under Memory Limited Setup"; sentence-transformers' `CachedMultipleNegativesRankingLoss`).

In-batch negatives get better with the batch, but a batch's activations grow with it.
GradCache keeps only the vectors of the whole batch in memory and the activations of
one chunk at a time, with the same loss and gradients as one pass, for any loss of
`models.embedding_losses`:

1. embed each chunk without recording gradients, and keep the vectors only;
2. compute the loss on all the vectors and its gradient with respect to them;
3. embed each chunk again, recording, and backpropagate that chunk's share of the
   vectors' gradient into the weights; the chunks' weight gradients add up.

Step 3 replays step 1's dropout: every seed generator of the model is set back to its
state before step 1, so each chunk draws the same masks twice. The loss and gradients
equal those of one pass over the batch made of the same chunks (with dropout off, or in
inference mode: exactly those of `model(x)` on the whole batch, to float rounding).
Under a strategy the loss's all-gather sits in step 2 (once a step, in the replica
function, outside the chunks' loops), so the vectors' gradient of each replica already
includes every replica's share.

Two entry points:

- `cached_loss_and_gradients`: the loss, its gradients and the vectors, returned (call
  it outside any tape);
- `gradient_cache_loss_fn(chunk_size)`: a `training.Trainer` loss function. Its loss is
  the model's compiled loss on the batch (steps 1 and 2), and the gradient a
  `tf.GradientTape` takes of it is step 3's (a `tf.custom_gradient`), so the Trainer,
  its strategies and loss scaling train with GradCache unchanged.
"""

from __future__ import annotations

import keras
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


def _check_chunk_size(chunk_size) -> int:
    if int(chunk_size) < 1:
        raise UserError(f"chunk_size={chunk_size}: must be >= 1")
    return int(chunk_size)


class _Chunks:
    """A batch `x` cut into `num_chunks` chunks of `chunk_size` rows, and the passes of
    `model` over them: steps 1 and 3 of GradCache (the module docstring)."""

    def __init__(self, model, x, chunk_size: int, training: bool):
        self.model = model
        self.training = training
        self.batch = tf.shape(tf.nest.flatten(x)[0])[0]
        self.chunk_size = chunk_size
        self.num_chunks = (self.batch + chunk_size - 1) // chunk_size
        self._chunks = tf.nest.map_structure(
            lambda t: _in_chunks(t, self.num_chunks, chunk_size), x
        )
        self._seeds = _seed_states(model)
        self._seeds_before = [tf.identity(state) for state in self._seeds]

    def _chunk(self, i):
        return tf.nest.map_structure(lambda t: t[i], self._chunks)

    def _vectors(self, i):
        return tf.cast(self.model(self._chunk(i), training=self.training), tf.float32)

    def embed(self):
        """Step 1: `(y_pred, vectors)`: the batch's vectors `[batch, ...]` (no gradient
        recorded) and the same, chunked `[num_chunks, chunk_size, ...]`."""

        def embed(i):
            return tf.stop_gradient(self._vectors(i))

        first = embed(tf.constant(0))
        _, vectors = tf.while_loop(
            lambda i, _: i < self.num_chunks,
            lambda i, vectors: (i + 1, vectors.write(i, embed(i))),
            (
                tf.constant(1),
                tf.TensorArray(tf.float32, size=self.num_chunks, element_shape=first.shape).write(
                    0, first
                ),
            ),
        )
        vectors = vectors.stack()
        # The filler rows of the last chunk are dropped: the loss sees the batch alone.
        y_pred = tf.reshape(vectors, tf.concat([[-1], tf.shape(vectors)[2:]], 0))[: self.batch]
        return y_pred, vectors

    def chunked_gradient(self, y_pred_gradient, vectors):
        """The gradient of the vectors `[batch, ...]`, chunked like `vectors`; zero for
        the filler rows, which then add nothing to the weights' gradients."""
        filler = [[0, self.num_chunks * self.chunk_size - self.batch]] + [[0, 0]] * (
            y_pred_gradient.shape.rank - 1
        )
        return tf.reshape(tf.pad(y_pred_gradient, filler), tf.shape(vectors))

    def backpropagate(self, vector_gradients, variables):
        """Step 3: the gradients of `sum(vectors * vector_gradients)` with respect to
        `variables` (one dense tensor each, None where none flows), chunk by chunk, under
        step 1's dropout."""
        for state, saved in zip(self._seeds, self._seeds_before, strict=True):
            state.assign(saved)

        def backpropagate(i):
            with tf.GradientTape() as tape:
                surrogate = tf.reduce_sum(self._vectors(i) * vector_gradients[i])
            gradients = tape.gradient(surrogate, variables)
            return [None if g is None else tf.convert_to_tensor(g) for g in gradients]

        first = backpropagate(tf.constant(0))
        present = [j for j, g in enumerate(first) if g is not None]

        def accumulate(i, sums):
            gradients = backpropagate(i)
            return i + 1, [total + gradients[j] for total, j in zip(sums, present, strict=True)]

        _, sums = tf.while_loop(
            lambda i, _: i < self.num_chunks,
            accumulate,
            (tf.constant(1), [first[j] for j in present]),
        )
        gradients = [None] * len(variables)
        for j, total in zip(present, sums, strict=True):
            gradients[j] = total
        return gradients


def _loss_and_vector_gradient(loss, y, y_pred, sample_weight, loss_scale):
    """Step 2: `(loss, d(loss * loss_scale) / d y_pred)`."""
    with tf.GradientTape() as tape:
        tape.watch(y_pred)
        value = tf.cast(loss(y, y_pred, sample_weight), tf.float32)
        scaled = value if loss_scale is None else value * tf.cast(loss_scale, tf.float32)
    return value, tape.gradient(scaled, y_pred)


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
    chunks of `chunk_size` rows (GradCache, the module docstring).

    Memory then grows with `chunk_size`, not the batch, while the loss still sees every
    vector of the batch (all its in-batch negatives).

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

    Example:

    ```python
    loss, gradients, _ = cached_loss_and_gradients(
        group_model, x, loss=MultipleNegativesRankingLoss(), chunk_size=32
    )
    optimizer.apply(gradients, group_model.trainable_variables)
    ```
    """
    chunk_size = _check_chunk_size(chunk_size)
    variables = list(model.trainable_variables if variables is None else variables)
    chunks = _Chunks(model, x, chunk_size, training)
    y_pred, vectors = chunks.embed()
    value, y_pred_gradient = _loss_and_vector_gradient(loss, y, y_pred, sample_weight, loss_scale)
    gradients = chunks.backpropagate(chunks.chunked_gradient(y_pred_gradient, vectors), variables)
    return value, gradients, y_pred


def _dynamic_scale(model):
    """The dynamic loss scale of `model`'s `LossScaleOptimizer`, or None."""
    optimizer = getattr(model, "optimizer", None)
    if isinstance(optimizer, keras.optimizers.LossScaleOptimizer):
        return optimizer.dynamic_scale
    return None


def gradient_cache_loss_fn(chunk_size: int):
    """A `training.Trainer` loss function (`f(model, x, y, sample_weight) -> (loss,
    y_pred)`, as `training.step.default_loss_fn`) that trains with GradCache.

    Its loss is the model's compiled loss on the whole batch (`model.compute_loss` on
    the vectors of steps 1 and 2, the module docstring): the task's loss, with every
    in-batch negative of the batch (of the global batch, gathered, under a strategy).
    The gradient a tape takes of it with respect to the model's weights is step 3's,
    chunk by chunk (a `tf.custom_gradient`): memory grows with `chunk_size`, not the
    batch. The tape records no chunk's forward pass: nothing differentiates through
    steps 1 and 2. `y_pred` (for the compiled metrics) carries no gradient.

    Under a `LossScaleOptimizer` the vectors' gradient is taken of the scaled loss (its
    `dynamic_scale`, which the training step multiplies the loss by), so float16 chunks
    backpropagate scaled gradients, as an uncached pass would.

    Args:
        chunk_size: int, rows of the batch embedded at once.

    Returns:
        The loss function.

    Raises:
        UserError: `chunk_size` < 1, or a model with regularization losses (their
            weight gradients would not pass through the vectors).

    Example:

    ```python
    trainer = Trainer(group_model, model_dir=output_dir, loss_fn=gradient_cache_loss_fn(32))
    ```
    """
    chunk_size = _check_chunk_size(chunk_size)

    def loss_fn(model, x, y, sample_weight):
        if model.losses:
            raise UserError(
                f"Gradient caching reads the loss from the vectors only; {model.name!r} adds "
                f"{len(model.losses)} regularization loss(es), whose gradients it would drop"
            )
        flat_x = tf.nest.flatten(x)
        results = {}

        @tf.custom_gradient
        def cached_loss(*flat_inputs):
            chunks = _Chunks(model, tf.nest.pack_sequence_as(x, flat_inputs), chunk_size, True)
            y_pred, vectors = chunks.embed()
            scale = _dynamic_scale(model)
            value, y_pred_gradient = _loss_and_vector_gradient(
                lambda y_true, y_pred, weight: model.compute_loss(
                    x=x, y=y_true, y_pred=y_pred, sample_weight=weight, training=True
                ),
                y,
                y_pred,
                sample_weight,
                scale,
            )
            vector_gradients = chunks.chunked_gradient(y_pred_gradient, vectors)
            results["y_pred"] = y_pred

            def grad_fn(upstream, variables=None):
                # `variables`: those the chunks read, as the tape records them (under a
                # strategy, this replica's). Integer ones (seed states) get None.
                differentiable = [
                    j for j, v in enumerate(variables or ()) if v.trainable and v.dtype.is_floating
                ]
                computed = chunks.backpropagate(
                    vector_gradients, [variables[j] for j in differentiable]
                )
                # The vectors' gradient is of the loss times `scale`; `upstream` is what
                # the tape multiplies the loss by (the same scale, or 1).
                factor = upstream if scale is None else upstream / tf.cast(scale, tf.float32)
                gradients = [None] * len(variables or ())
                for j, gradient in zip(differentiable, computed, strict=True):
                    if gradient is not None:
                        gradients[j] = gradient * tf.cast(factor, gradient.dtype)
                return [None] * len(flat_inputs), gradients

            return value, grad_fn

        loss = cached_loss(*flat_x)
        return loss, results["y_pred"]

    return loss_fn
