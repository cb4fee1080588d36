"""The losses of sentence embedding models, over the vectors of groups of texts.

Every loss reads `y_pred` as `BertTextGroupEmbedder` gives it: float `[batch, texts,
dim]`, row `i` the vectors of example `i`'s texts.

- `MultipleNegativesRankingLoss` (pairs, triplets): column 0 the anchor, column 1 its
  positive, columns 2.. its hard negatives; `y_true` is not read.
- `CoSENTLoss` and `CosineSimilarityLoss` (scored pairs): columns 0 and 1 the two
  texts, `y_true` the pair's score `[batch]`.
- `MatryoshkaLoss` wraps any of them: the same loss at nested prefixes of the vectors.

Each computes cosines itself (the vectors need not be normalized), as
sentence-transformers' losses of the same names do, and is restated in numpy by the
tests.

The global batch: under a `tf.distribute` strategy each replica sees its share of the
batch, but the in-batch negatives must be the global batch's, as users expect of a
larger batch. The in-batch losses all-gather the candidates across replicas
(`ReplicaContext.all_gather`, whose gradient sums the replicas' gradients and keeps
each its own rows) and keep the replica's own rows as queries. Each replica's loss is
then its share of the global mean (Keras' convention, which the training step sums
across replicas), so the summed loss and gradient equal the one-device loss and
gradient on the global batch (for replicas of equal batches, as Keras' own mean).

Under a strategy of several replicas the all-gather is a synchronization point
(`merge_call`): the loss must run in the function `strategy.run` runs, not inside a
`tf.function` nested in it (an XLA-compiled forward pass) nor in a `tf.while_loop`
body; TensorFlow raises "`merge_call` called while defining a new graph" there. Each
loss says what its rows read with `batch_scope` (`"global"`: gathered; `"replica"`:
its replica's batch), from which the training step (`training.step`) keeps it out of
XLA under several replicas and refuses gradient accumulation (whose micro-batches
would each see only their own negatives).

`models.gradient_cache.cached_loss_and_gradients` computes any of these losses and
its gradients chunk by chunk of the batch (GradCache), for batches of in-batch
negatives larger than memory allows.
"""

from __future__ import annotations

from collections.abc import Sequence

import keras
import tensorflow as tf

from keras_bert_zoo.utils.errors import UserError

# sentence-transformers' default scale (inverse temperature) of both in-batch losses.
DEFAULT_SCALE = 20.0


def cosine_similarities(a, b):
    """`[n, m]` cosines of the rows of `a` `[n, dim]` with those of `b` `[m, dim]`."""
    a = tf.math.l2_normalize(a, axis=-1, epsilon=1e-24)
    b = tf.math.l2_normalize(b, axis=-1, epsilon=1e-24)
    return tf.matmul(a, b, transpose_b=True)


def paired_cosines(a, b):
    """`[n]` cosines of the rows of `a` with the same rows of `b`."""
    a = tf.math.l2_normalize(a, axis=-1, epsilon=1e-24)
    b = tf.math.l2_normalize(b, axis=-1, epsilon=1e-24)
    return tf.reduce_sum(a * b, axis=-1)


def _replica_context():
    """The replica context of a strategy with several replicas, else None."""
    context = tf.distribute.get_replica_context()
    if context is None or context.num_replicas_in_sync == 1:
        return None
    return context


def gather_global_batch(tensor, enabled: bool = True):
    """`(gathered, offset)`: `tensor` of every replica concatenated along the batch axis
    (in replica order) and where this replica's rows start in it; `tensor` itself and 0
    on one replica, in a cross-replica context, or when not `enabled`.

    The gradient of the gathered tensor flows back to each replica's own rows, summed
    over the replicas that read them (`ReplicaContext.all_gather`'s gradient).

    Args:
        tensor: a tensor `[batch, ...]`. One tensor, not a nest: the gradient of
            `all_gather` packs a nest's gradients into one tensor, which fails for
            tensors of different ranks (TensorFlow 2.21).
        enabled: gather at all.
    """
    context = _replica_context() if enabled else None
    if context is None:
        return tensor, tf.constant(0, tf.int32)
    gathered = context.all_gather(tensor, axis=0)
    # Replicas may hold different numbers of rows (a last, smaller batch).
    sizes = context.all_gather(tf.shape(tensor)[:1], axis=0)
    offset = tf.reduce_sum(sizes[: context.replica_id_in_sync_group])
    return gathered, offset


def _num_replicas() -> int:
    """What Keras divides a mean loss by under a strategy (`num_replicas_in_sync`)."""
    return tf.distribute.get_strategy().num_replicas_in_sync


def _texts(y_pred, needed: int, loss_name: str):
    texts = y_pred.shape[1]
    if y_pred.shape.rank != 3 or (texts is not None and texts < needed):
        raise UserError(
            f"{loss_name} reads [batch, texts, dim] vectors with at least {needed} texts a "
            f"row; got shape {y_pred.shape}"
        )


def _scope(gather_across_replicas: bool) -> str:
    return "global" if gather_across_replicas else "replica"


def _check_scores(loss, y_true):
    if y_true is None and not isinstance(loss, MultipleNegativesRankingLoss):
        raise UserError(f"{type(loss).__name__} reads the pairs' scores: y_true is None")


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class MultipleNegativesRankingLoss(keras.losses.Loss):
    """In-batch negatives (InfoNCE; sentence-transformers' `MultipleNegativesRankingLoss`).

    For each anchor `a_i` (column 0), the candidates are every positive of the global
    batch (column 1), then every hard negative (columns 2..., all rows' first negatives,
    then all rows' second...); its loss is the cross-entropy of
    `softmax(scale * cos(a_i, candidates))` against its own positive:

    ```
    loss_i = -log softmax_j(scale * cos(a_i, c_j))[positive of i]
    ```

    With `symmetric`, the loss of each row is the mean of that and the reverse
    direction, each positive against every anchor of the global batch
    (sentence-transformers' `MultipleNegativesSymmetricRankingLoss`).

    Args:
        scale: float. Multiplies the cosines (an inverse temperature); 20 by default.
        symmetric: bool. Add the positive -> anchors term.
        gather_across_replicas: bool. Under a strategy, the candidates are the global
            batch's (True, default) or the replica's own.
        reduction, name: as `keras.losses.Loss`'s.

    Call arguments:
        y_true: ignored (None or any placeholder).
        y_pred: float `[batch, texts >= 2, dim]`.

    Returns (unreduced, `call`): float32 `[batch]`, each anchor's loss.
    """

    def __init__(
        self,
        scale=DEFAULT_SCALE,
        symmetric=False,
        gather_across_replicas=True,
        reduction="sum_over_batch_size",
        name="multiple_negatives_ranking",
        **kwargs,
    ):
        super().__init__(reduction=reduction, name=name, **kwargs)
        self.scale = float(scale)
        self.symmetric = bool(symmetric)
        self.gather_across_replicas = bool(gather_across_replicas)

    def __call__(self, y_true, y_pred, sample_weight=None):
        # The labels are the rows' own positives: a batch without labels has y_true None.
        return super().__call__(0.0 if y_true is None else y_true, y_pred, sample_weight)

    def call(self, y_true, y_pred):
        del y_true
        _texts(y_pred, 2, type(self).__name__)
        anchors, candidates = y_pred[:, 0], y_pred[:, 1:]
        everyone, offset = gather_global_batch(y_pred, self.gather_across_replicas)
        all_anchors, all_candidates = everyone[:, 0], everyone[:, 1:]
        # [texts - 1, global batch, dim] -> one column a candidate: every row's positive
        # first (column offset + i is row i's), then the negatives.
        columns = tf.reshape(
            tf.transpose(all_candidates, [1, 0, 2]), [-1, tf.shape(all_candidates)[-1]]
        )
        labels = offset + tf.range(tf.shape(anchors)[0])
        logits = self.scale * cosine_similarities(anchors, columns)
        loss = tf.nn.sparse_softmax_cross_entropy_with_logits(labels, logits)
        if self.symmetric:
            backward = self.scale * cosine_similarities(candidates[:, 0], all_anchors)
            loss = 0.5 * (loss + tf.nn.sparse_softmax_cross_entropy_with_logits(labels, backward))
        return loss

    @property
    def batch_scope(self) -> str:
        """What a row's loss reads: the global batch, or its replica's."""
        return _scope(self.gather_across_replicas)

    def get_config(self):
        return {
            **super().get_config(),
            "scale": self.scale,
            "symmetric": self.symmetric,
            "gather_across_replicas": self.gather_across_replicas,
        }


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class CoSENTLoss(keras.losses.Loss):
    """CoSENT (Su, 2022; sentence-transformers' `CoSENTLoss`) for scored pairs.

    Over every two pairs `(i, j)` of the global batch where pair `j` is scored higher
    than pair `i`, it penalizes `cos_i > cos_j`:

    ```
    loss = log(1 + sum_{score_i < score_j} exp(scale * (cos_i - cos_j)))
    ```

    It ranks the pairs of a batch by their cosines (only the scores' order matters), so
    it is one number for the batch, not a mean of per-pair terms: `call` returns it,
    divided by the number of replicas under a strategy (each replica computes the
    whole global-batch loss, and the step sums the replicas'). Sample weights are not
    supported.

    Args:
        scale: float. Multiplies the cosine differences; 20 by default.
        gather_across_replicas: bool. Under a strategy, rank the global batch's pairs
            (True, default) or the replica's own.
        name: as `keras.losses.Loss`'s.

    Call arguments:
        y_true: float `[batch]` (or `[batch, 1]`), the pairs' scores.
        y_pred: float `[batch, texts >= 2, dim]`: columns 0 and 1 the pair's texts.
    """

    def __init__(
        self,
        scale=DEFAULT_SCALE,
        gather_across_replicas=True,
        name="cosent",
        **kwargs,
    ):
        kwargs.pop("reduction", None)
        super().__init__(reduction="sum_over_batch_size", name=name, **kwargs)
        self.scale = float(scale)
        self.gather_across_replicas = bool(gather_across_replicas)

    def __call__(self, y_true, y_pred, sample_weight=None):
        if sample_weight is not None:
            raise UserError("CoSENTLoss ranks the pairs of a batch: it takes no sample_weight")
        _check_scores(self, y_true)
        return super().__call__(y_true, y_pred)

    def call(self, y_true, y_pred):
        _texts(y_pred, 2, type(self).__name__)
        cosines = paired_cosines(y_pred[:, 0], y_pred[:, 1])
        scores = tf.reshape(tf.cast(y_true, cosines.dtype), [-1])
        pairs, _ = gather_global_batch(
            tf.stack([cosines, tf.stop_gradient(scores)], axis=1), self.gather_across_replicas
        )
        cosines, scores = pairs[:, 0], pairs[:, 1]
        # [i, j]: scale * (cos_i - cos_j), kept where pair j is scored above pair i.
        differences = self.scale * (cosines[:, None] - cosines[None, :])
        ordered = scores[:, None] < scores[None, :]
        terms = tf.boolean_mask(differences, ordered)
        loss = tf.reduce_logsumexp(tf.concat([tf.zeros([1], terms.dtype), terms], 0))
        return loss / tf.cast(_num_replicas(), loss.dtype)

    @property
    def batch_scope(self) -> str:
        """What the loss ranks: the global batch's pairs, or its replica's."""
        return _scope(self.gather_across_replicas)

    def get_config(self):
        config = super().get_config()
        config.pop("reduction", None)
        return {
            **config,
            "scale": self.scale,
            "gather_across_replicas": self.gather_across_replicas,
        }


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class CosineSimilarityLoss(keras.losses.Loss):
    """The squared error of a pair's cosine against its score (sentence-transformers'
    `CosineSimilarityLoss`): `loss_i = (cos(u_i, v_i) - score_i)^2`.

    Scores are on the cosine's scale (e.g. STS's 0-5 divided by 5).

    Call arguments:
        y_true: float `[batch]` (or `[batch, 1]`), the pairs' scores.
        y_pred: float `[batch, texts >= 2, dim]`: columns 0 and 1 the pair's texts.

    Returns (unreduced, `call`): float32 `[batch]`.
    """

    def __init__(self, reduction="sum_over_batch_size", name="cosine_similarity_mse", **kwargs):
        super().__init__(reduction=reduction, name=name, **kwargs)

    def __call__(self, y_true, y_pred, sample_weight=None):
        _check_scores(self, y_true)
        return super().__call__(y_true, y_pred, sample_weight)

    def call(self, y_true, y_pred):
        _texts(y_pred, 2, type(self).__name__)
        cosines = paired_cosines(y_pred[:, 0], y_pred[:, 1])
        return tf.square(cosines - tf.reshape(tf.cast(y_true, cosines.dtype), [-1]))


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class MatryoshkaLoss(keras.losses.Loss):
    """Matryoshka representation learning (Kusupati et al., 2022; sentence-transformers'
    `MatryoshkaLoss`): one loss at nested prefixes of the vectors, summed with weights.

    ```
    loss = sum_k weight_k * inner(y_true, y_pred[..., :dims_k])
    ```

    The first `dims_k` features then work as a vector on their own, so a model trained
    so serves vectors cut to any of `dims` (each prefix is normalized again by the
    cosine; cut vectors of a normalized model must be re-normalized to be used with a
    dot product).

    Args:
        loss: the inner `keras.losses.Loss` (one of this module's); its unreduced
            `call` is evaluated at each prefix, and this loss reduces the weighted sum.
        dims: ints, the prefix widths, each at most the vectors' width (e.g. `(384,
            256, 128, 64)`).
        weights: floats, one a prefix; 1 each by default.
        name: as `keras.losses.Loss`'s; the reduction is the inner loss's.
    """

    def __init__(self, loss, dims: Sequence[int], weights=None, name="matryoshka", **kwargs):
        if isinstance(loss, dict):
            loss = keras.saving.deserialize_keras_object(loss)
        kwargs.pop("reduction", None)
        super().__init__(reduction=loss.reduction, name=name, **kwargs)
        dims = [int(d) for d in dims]
        if not dims or min(dims) < 1:
            raise UserError(f"MatryoshkaLoss dims={dims}: give one or more widths >= 1")
        weights = [1.0] * len(dims) if weights is None else [float(w) for w in weights]
        if len(weights) != len(dims):
            raise UserError(
                f"MatryoshkaLoss: {len(weights)} weights for {len(dims)} dims; give one a width"
            )
        self.loss = loss
        self.dims = dims
        self.weights = weights

    def __call__(self, y_true, y_pred, sample_weight=None):
        if sample_weight is not None and isinstance(self.loss, CoSENTLoss):
            raise UserError("CoSENTLoss ranks the pairs of a batch: it takes no sample_weight")
        _check_scores(self.loss, y_true)
        return super().__call__(0.0 if y_true is None else y_true, y_pred, sample_weight)

    def call(self, y_true, y_pred):
        width = y_pred.shape[-1]
        if width is not None and max(self.dims) > width:
            raise UserError(
                f"MatryoshkaLoss dims={self.dims}: the vectors are {width} wide; every "
                f"width must be at most {width}"
            )
        total = 0.0
        for dim, weight in zip(self.dims, self.weights, strict=True):
            total += weight * self.loss.call(y_true, y_pred[..., :dim])
        return total

    @property
    def batch_scope(self) -> str:
        """The inner loss's (`"row"` for a loss of independent rows)."""
        return getattr(self.loss, "batch_scope", "row")

    def get_config(self):
        config = super().get_config()
        config.pop("reduction", None)
        return {
            **config,
            "loss": keras.saving.serialize_keras_object(self.loss),
            "dims": list(self.dims),
            "weights": list(self.weights),
        }
