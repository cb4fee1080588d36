"""An independent float64 numpy re-derivation of BERT's forward pass.

Written from the paper / google-research/bert `modeling.py`, not from the code under
test. Weights are passed as plain numpy arrays in google-research/bert's layout
(`[in, out]` kernels, `[H, H]` query/key/value kernels whose columns are the heads
concatenated), so the tests also check that the library's `[H, heads, head_size]`
einsum layout means the same thing.
"""

import math

import numpy as np

_erf = np.vectorize(math.erf, otypes=[np.float64])


def gelu_exact(x):
    """x * Phi(x) with the erf form (Hugging Face's "gelu")."""
    x = np.asarray(x, np.float64)
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


def gelu_tanh(x):
    """The tanh approximation (google-research/bert's "gelu")."""
    x = np.asarray(x, np.float64)
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))


ACTIVATIONS = {
    "gelu": gelu_exact,
    "gelu_approximate": gelu_tanh,
    "relu": lambda x: np.maximum(x, 0.0),
    "tanh": np.tanh,
    "linear": lambda x: x,
}


def layer_norm(x, gamma, beta, epsilon=1e-12):
    x = np.asarray(x, np.float64)
    mean = x.mean(axis=-1, keepdims=True)
    variance = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(variance + epsilon) * gamma + beta


def softmax(x, axis=-1):
    x = x - x.max(axis=axis, keepdims=True)
    e = np.exp(x)
    return e / e.sum(axis=axis, keepdims=True)


def log_softmax(x, axis=-1):
    x = np.asarray(x, np.float64)
    shifted = x - x.max(axis=axis, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=axis, keepdims=True))


def embeddings(w, word_ids, type_ids, epsilon=1e-12):
    """w: word [V,H], type [T,H], position [P,H], ln_gamma, ln_beta."""
    seq_len = word_ids.shape[1]
    x = w["word"][word_ids] + w["type"][type_ids] + w["position"][:seq_len][None]
    return layer_norm(x, w["ln_gamma"], w["ln_beta"], epsilon)


def self_attention(w, x, mask, num_heads):
    """w: q_kernel/k_kernel/v_kernel [H,H], *_bias [H], o_kernel [H,H], o_bias [H].

    mask: [B, S] (1 for real keys) or [B, S_query, S_key]; masked keys get -10000 as in
    the original (exp underflows to 0 relative to real keys either way).
    """
    batch, seq_len, hidden = x.shape
    head = hidden // num_heads

    def split(t):  # [B, S, H] -> [B, heads, S, head]
        return t.reshape(batch, seq_len, num_heads, head).transpose(0, 2, 1, 3)

    q = split(x @ w["q_kernel"] + w["q_bias"])
    k = split(x @ w["k_kernel"] + w["k_bias"])
    v = split(x @ w["v_kernel"] + w["v_bias"])
    scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(head)
    if mask is not None:
        mask = np.asarray(mask, np.float64)
        mask = mask[:, None, None, :] if mask.ndim == 2 else mask[:, None, :, :]
        scores = scores + (1.0 - mask) * -10000.0
    probs = softmax(scores, axis=-1)
    context = (probs @ v).transpose(0, 2, 1, 3).reshape(batch, seq_len, hidden)
    return context @ w["o_kernel"] + w["o_bias"]


def encoder_block(w, x, mask, num_heads, activation, epsilon=1e-12):
    """Post-LN block: LN(x + Attn(x)); LN(x + W2 act(W1 x))."""
    attention = self_attention(w, x, mask, num_heads)
    x = layer_norm(x + attention, w["attn_ln_gamma"], w["attn_ln_beta"], epsilon)
    intermediate = ACTIVATIONS[activation](x @ w["ffn_in_kernel"] + w["ffn_in_bias"])
    output = intermediate @ w["ffn_out_kernel"] + w["ffn_out_bias"]
    return layer_norm(x + output, w["out_ln_gamma"], w["out_ln_beta"], epsilon)


def pooler(w, sequence_output):
    return np.tanh(sequence_output[:, 0] @ w["pooler_kernel"] + w["pooler_bias"])


def encoder(w, word_ids, mask, type_ids, num_heads, activation, epsilon=1e-12):
    """w: {"embeddings": {...}, "layers": [{...}, ...], "pooler_kernel", "pooler_bias"}."""
    x = embeddings(w["embeddings"], word_ids, type_ids, epsilon)
    layer_outputs = []
    for layer in w["layers"]:
        x = encoder_block(layer, x, mask, num_heads, activation, epsilon)
        layer_outputs.append(x)
    return {
        "sequence_output": x,
        "pooled_output": pooler(w, x),
        "encoder_outputs": layer_outputs,
    }


def masked_lm_head(w, sequence_output, positions, word_embeddings, activation, epsilon=1e-12):
    """w: transform_kernel [H,H], transform_bias, ln_gamma, ln_beta, output_bias [V]."""
    batch_index = np.arange(sequence_output.shape[0])[:, None]
    gathered = sequence_output[batch_index, positions]  # [B, P, H]
    x = ACTIVATIONS[activation](gathered @ w["transform_kernel"] + w["transform_bias"])
    x = layer_norm(x, w["ln_gamma"], w["ln_beta"], epsilon)
    return x @ np.asarray(word_embeddings, np.float64).T + w["output_bias"]


def pretraining_losses(mlm_logits, mlm_ids, mlm_weights, nsp_logits, nsp_labels):
    """google-research/bert run_pretraining.py's get_masked_lm_output / get_next_sentence_output."""
    log_probs = log_softmax(mlm_logits)
    nll = -np.take_along_axis(log_probs, np.asarray(mlm_ids)[..., None], axis=-1)[..., 0]
    weights = np.asarray(mlm_weights, np.float64)
    mlm_loss = (nll * weights).sum() / (weights.sum() + 1e-5)
    nsp_log_probs = log_softmax(nsp_logits)
    labels = np.asarray(nsp_labels).reshape(-1)
    nsp_loss = -nsp_log_probs[np.arange(len(labels)), labels].mean()
    return mlm_loss, nsp_loss


# --- Reading weights out of the Keras layers (plain variable reads, no computation) --------


def _np(variable):
    return np.asarray(variable.numpy(), np.float64)


def embeddings_weights(layer):
    """From a `BertEmbeddings` layer."""
    return {
        "word": _np(layer.word_embeddings.embeddings),
        "type": _np(layer.token_type_embeddings.embeddings),
        "position": _np(layer.position_embeddings),
        "ln_gamma": _np(layer.layer_norm.gamma),
        "ln_beta": _np(layer.layer_norm.beta),
    }


def attention_weights(layer):
    """From a `BertSelfAttention`: [H, heads, head] kernels flattened to Google's [H, H]."""
    w = {}
    for short, sub in (("q", layer.query), ("k", layer.key), ("v", layer.value)):
        kernel = _np(sub.kernel)
        w[f"{short}_kernel"] = kernel.reshape(kernel.shape[0], -1)
        w[f"{short}_bias"] = _np(sub.bias).reshape(-1)
    kernel = _np(layer.attention_output.kernel)  # [heads, head, H]
    w["o_kernel"] = kernel.reshape(-1, kernel.shape[-1])
    w["o_bias"] = _np(layer.attention_output.bias)
    return w


def block_weights(block):
    """From a `TransformerEncoderBlock`."""
    w = attention_weights(block.attention)
    w.update(
        {
            "attn_ln_gamma": _np(block.attention_layer_norm.gamma),
            "attn_ln_beta": _np(block.attention_layer_norm.beta),
            "ffn_in_kernel": _np(block.intermediate_dense.kernel),
            "ffn_in_bias": _np(block.intermediate_dense.bias),
            "ffn_out_kernel": _np(block.output_dense.kernel),
            "ffn_out_bias": _np(block.output_dense.bias),
            "out_ln_gamma": _np(block.output_layer_norm.gamma),
            "out_ln_beta": _np(block.output_layer_norm.beta),
        }
    )
    return w


def encoder_weights(encoder):
    """From a `BertEncoder`."""
    return {
        "embeddings": embeddings_weights(encoder.embeddings),
        "layers": [block_weights(block) for block in encoder.transformer_layers],
        "pooler_kernel": _np(encoder.pooler_dense.kernel),
        "pooler_bias": _np(encoder.pooler_dense.bias),
    }


def masked_lm_weights(head):
    """From a `MaskedLMHead` (decoder table read separately)."""
    return {
        "transform_kernel": _np(head.transform_dense.kernel),
        "transform_bias": _np(head.transform_dense.bias),
        "ln_gamma": _np(head.transform_layer_norm.gamma),
        "ln_beta": _np(head.transform_layer_norm.beta),
        "output_bias": _np(head.output_bias),
    }
