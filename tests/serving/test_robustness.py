"""Robust inputs: hostile texts, a 10,000-string fuzz, and concurrent callers, on
the loaded SavedModels (what a server runs)."""

import concurrent.futures

import numpy as np
import pytest
import tensorflow as tf

FUZZ_SEED = 20240611


def _call(loaded, inputs):
    outputs = loaded.signatures["serving_default"](
        **{key: tf.constant(value) for key, value in inputs.items()}
    )
    return {key: value.numpy() for key, value in outputs.items()}


def _check_answers(export, inputs, outputs):
    """Answers are well-formed for the task family, whatever the input."""
    batch = len(next(iter(inputs.values())))
    for key, value in outputs.items():
        assert value.shape[:1] == (batch,), key
        if value.dtype.kind == "f":
            assert np.isfinite(value).all(), key
    if "probabilities" in outputs:
        np.testing.assert_allclose(outputs["probabilities"].sum(-1), 1.0, atol=1e-5)
        names = {name.encode() for name in export.task.label_names}
        assert set(outputs["label"].tolist()) <= names
    if "answer_text" in outputs:
        for row in range(batch):
            context = inputs["context"][row]
            start, end = int(outputs["answer_start"][row]), int(outputs["answer_end"][row])
            text = outputs["answer_text"][row]
            if start < 0:
                assert (start, end, text) == (-1, -1, b"")
                continue
            # Offsets index the text with invalid bytes replaced, as Python replaces them.
            decoded = context.decode("utf-8", errors="replace")
            assert 0 <= start < end <= len(decoded)
            assert decoded[start:end].encode("utf-8") == text
    if "mask_count" in outputs:
        count = outputs["mask_count"]
        assert (
            (outputs["fill_in_ids"] >= 0).sum(axis=(1, 2))
            == count * outputs["fill_in_ids"].shape[2]
        ).all()


@pytest.mark.slow
def test_hostile_texts_get_answers_from_every_export(all_exports, loaded, helpers):
    for export in all_exports:
        inputs = helpers.text_inputs(export.task.text_fields, helpers.HOSTILE_TEXTS)
        outputs = _call(loaded(export), inputs)
        _check_answers(export, inputs, outputs)
        # Each row answers as it would alone: batching (mixed lengths, padding) does
        # not leak between rows.
        for row in (0, 2, 4):
            alone = _call(loaded(export), {k: v[row : row + 1] for k, v in inputs.items()})
            for key, value in alone.items():
                # The batch pads per-row lists (words, entities, masks, tokens) to its
                # longest row: the row alone is the batched row without that padding.
                batched = outputs[key][row : row + 1]
                batched = batched[tuple(slice(0, n) for n in value.shape)]
                if value.dtype.kind == "f":
                    np.testing.assert_allclose(batched, value, atol=1e-5, err_msg=key)
                else:
                    np.testing.assert_array_equal(batched, value, err_msg=f"{export.name} {key}")
    # The empty batch too.
    for export in all_exports:
        empty = {field: np.array([], object) for field in export.task.text_fields}
        outputs = _call(loaded(export), empty)
        assert all(value.shape[0] == 0 for value in outputs.values()), export.name


def _fuzz_strings(rng, count):
    """Random bytes, random code points (astral, combining, controls, lone surrogates
    encoded with surrogatepass: invalid UTF-8), vocabulary words and long runs."""
    words = "the a cat sat on mat good bad film [MASK] 中 é ##ing".split()
    strings = []
    for index in range(count):
        kind = index % 4
        if kind == 0:
            strings.append(rng.bytes(int(rng.integers(0, 120))))
        elif kind == 1:
            points = rng.integers(0, 0x110000, size=int(rng.integers(0, 60)))
            strings.append("".join(map(chr, points)).encode("utf-8", "surrogatepass"))
        elif kind == 2:
            strings.append(" ".join(rng.choice(words, size=int(rng.integers(0, 30)))).encode())
        else:
            strings.append((rng.choice(words) + " ") * int(rng.integers(50, 400)))
            strings[-1] = strings[-1].encode()
    return strings


@pytest.mark.slow
def test_fuzz_ten_thousand_random_strings(sentence_pair_export, squad_export, loaded):
    """10,000 strings through the sentence-pair export (5,000 pairs, batches of 100),
    1,000 more through SQuAD: no crash, well-formed answers."""
    rng = np.random.default_rng(FUZZ_SEED)
    strings = _fuzz_strings(rng, 10_000)
    rng.shuffle(strings)
    saved = loaded(sentence_pair_export)
    fields = sentence_pair_export.task.text_fields
    for start in range(0, 10_000, 200):
        chunk = strings[start : start + 200]
        inputs = {
            fields[0]: np.array(chunk[0::2], object),
            fields[1]: np.array(chunk[1::2], object),
        }
        _check_answers(sentence_pair_export, inputs, _call(saved, inputs))
    saved = loaded(squad_export)
    more = _fuzz_strings(rng, 1_000)
    for start in range(0, 1_000, 100):
        chunk = more[start : start + 100]
        inputs = {
            "question": np.array(chunk[0::2], object),
            "context": np.array(chunk[1::2], object),
        }
        _check_answers(squad_export, inputs, _call(saved, inputs))


@pytest.mark.slow
def test_eight_threads_get_the_serial_answers(sentence_pair_export, squad_export, loaded, helpers):
    rng = np.random.default_rng(7)
    for export in (sentence_pair_export, squad_export):
        saved = loaded(export)
        texts = helpers.HOSTILE_TEXTS + [
            s.decode("utf-8", "replace") for s in _fuzz_strings(rng, 16)
        ]
        requests = []
        for _ in range(24):
            rows = rng.choice(len(texts), size=int(rng.integers(1, 6)))
            requests.append(
                helpers.text_inputs(export.task.text_fields, [texts[row] for row in rows])
            )
        serial = [_call(saved, request) for request in requests]
        with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
            parallel = list(pool.map(_call, [saved] * len(requests), requests))
        for want, got in zip(serial, parallel, strict=True):
            assert sorted(want) == sorted(got)
            for key in want:
                np.testing.assert_array_equal(got[key], want[key], err_msg=f"{export.name} {key}")
