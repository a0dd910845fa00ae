"""Tests for smat.evaluation.faithfulness with a bag-of-words model of known behaviour."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.tree_util import Partial

from smat.evaluation import faithfulness as F

VOCAB = 12
aopc = F.comprehensiveness_sufficiency
MASK_ID = 0  # weight 0: replacing a token by [MASK] removes exactly its contribution


def bow_proba(weights, input_ids, attention_mask, token_type_ids):
    """Two-class bag-of-words logistic model: logit = sum of attended token weights."""
    z = jnp.sum(weights[input_ids] * attention_mask.astype(weights.dtype), axis=1)  # (B,)
    p = jax.nn.sigmoid(z)
    return jnp.stack([1.0 - p, p], axis=1)  # (B, 2)


def _weights(seed=0):
    w = np.random.default_rng(seed).normal(size=VOCAB).astype(np.float32)
    w[MASK_ID] = 0.0
    return jnp.asarray(w)


def _reference(weights, ids, att, special, scores, bins, target=None):
    """Per-example, per-bin Python loop implementing ERASER's definition directly."""
    w = np.asarray(weights, np.float64)

    def prob(row_ids, row_att):
        z = np.sum(w[row_ids] * row_att)
        p1 = 1.0 / (1.0 + np.exp(-z))
        return np.array([1.0 - p1, p1])

    comp, suff = [], []
    for b in range(ids.shape[0]):
        maskable = np.flatnonzero((att[b] == 1) & ~special[b])
        full = prob(ids[b], att[b])
        y = int(np.argmax(full)) if target is None else int(target[b])
        order = maskable[np.argsort(-scores[b][maskable], kind="stable")]
        c_row, s_row = [], []
        for q in bins:
            k = min(max(1, math.ceil(round(q * len(maskable), 9))), len(maskable))
            removed = ids[b].copy()
            removed[order[:k]] = MASK_ID
            kept = ids[b].copy()
            kept[order[k:]] = MASK_ID
            c_row.append(full[y] - prob(removed, att[b])[y] if len(maskable) else 0.0)
            s_row.append(full[y] - prob(kept, att[b])[y] if len(maskable) else 0.0)
        comp.append(np.mean(c_row))
        suff.append(np.mean(s_row))
    return np.array(comp), np.array(suff)


def _batch(seed=0, batch=6, seq=9):
    rng = np.random.default_rng(seed)
    ids = rng.integers(1, VOCAB, (batch, seq)).astype(np.int32)
    lengths = rng.integers(1, seq + 1, batch)
    att = (np.arange(seq)[None] < lengths[:, None]).astype(np.int32)
    special = np.zeros((batch, seq), bool)
    special[:, 0] = True  # [CLS]
    special[np.arange(batch), lengths - 1] = True  # [SEP]
    special |= att == 0  # padding
    ids = np.where(att == 1, ids, MASK_ID + 1).astype(np.int32)
    scores = rng.integers(-3, 4, (batch, seq)).astype(np.float32)  # ties on purpose
    return ids, att, special, scores


def test_num_tokens_per_bin():
    k = F.num_tokens_per_bin(jnp.asarray([30, 7, 1, 0, 200]), bins=(0.01, 0.1, 0.5, 1.0))
    assert k.tolist() == [[1, 1, 1, 0, 2], [3, 1, 1, 0, 20], [15, 4, 1, 0, 100],
                          [30, 7, 1, 0, 200]]


@pytest.mark.parametrize("bins", [(), (0.0,), (1.5,), (-0.1, 0.5)])
def test_bins_are_validated(bins):
    with pytest.raises(ValueError, match="bins"):
        F.num_tokens_per_bin(jnp.asarray([3]), bins=bins)


def test_hand_computed_single_example():
    w = jnp.zeros(VOCAB).at[2].set(2.0).at[3].set(-1.0).at[4].set(0.5).at[5].set(-1.5)
    ids = jnp.asarray([[5, 2, 4, 3, 5]])  # [CLS]=5 and [SEP]=5 carry weight -1.5 each
    special = jnp.asarray([[True, False, False, False, True]])
    scores = w[ids] + jnp.asarray([[100.0, 0, 0, 0, 100.0]])  # specials scored highest
    r = aopc(Partial(bow_proba, w), ids, scores, attention_mask=jnp.ones((1, 5)),
                       special_tokens_mask=special, replacement_id=MASK_ID, bins=(0.3, 0.5))

    def p0(z):  # probability of class 0, the prediction (z = -1.5 < 0)
        return 1.0 / (1.0 + math.exp(z))

    base = -3.0  # the special tokens' contribution, never removed
    full = p0(base + 1.5)
    assert r.target.tolist() == [0]
    assert float(r.full_probability[0]) == pytest.approx(full, rel=1e-6)
    # k = ceil(0.3 * 3) = 1 -> remove token id 2 (score 2); k = ceil(1.5) = 2 -> also id 4.
    assert r.num_selected[:, 0].tolist() == [1, 2]
    np.testing.assert_allclose(r.comprehensiveness_per_bin[:, 0],
                               [full - p0(base - 0.5), full - p0(base - 1.0)], rtol=1e-5)
    # Sufficiency keeps the top-k and the special tokens; the rest become [MASK].
    np.testing.assert_allclose(r.sufficiency_per_bin[:, 0],
                               [full - p0(base + 2.0), full - p0(base + 2.5)], rtol=1e-5)
    assert float(r.comprehensiveness[0]) == pytest.approx(
        (2 * full - p0(base - 0.5) - p0(base - 1.0)) / 2, rel=1e-5)
    assert float(r.mean_sufficiency) == pytest.approx(float(r.sufficiency[0]))


def test_matches_python_loop_reference():
    w = _weights(1)
    ids, att, special, scores = _batch(seed=3, batch=8, seq=11)
    r = aopc(Partial(bow_proba, w), ids, scores, attention_mask=att,
                       special_tokens_mask=special, replacement_id=MASK_ID)
    comp, suff = _reference(w, ids, att, special, scores, F.DEFAULT_BINS)
    np.testing.assert_allclose(r.comprehensiveness, comp, atol=1e-5)
    np.testing.assert_allclose(r.sufficiency, suff, atol=1e-5)
    valid = np.asarray(r.valid)
    assert float(r.mean_comprehensiveness) == pytest.approx(comp[valid].mean(), abs=1e-5)
    assert float(r.mean_sufficiency) == pytest.approx(suff[valid].mean(), abs=1e-5)


def test_explicit_target_and_class_choice():
    w = _weights(2)
    ids, att, special, scores = _batch(seed=4)
    target = np.asarray([0, 1, 0, 1, 0, 1])
    r = aopc(Partial(bow_proba, w), ids, scores, attention_mask=att,
                       special_tokens_mask=special, replacement_id=MASK_ID, target=target,
                       bins=(0.2, 0.5))
    comp, suff = _reference(w, ids, att, special, scores, (0.2, 0.5), target=target)
    assert r.target.tolist() == target.tolist()
    np.testing.assert_allclose(r.comprehensiveness, comp, atol=1e-5)
    np.testing.assert_allclose(r.sufficiency, suff, atol=1e-5)


def test_special_and_padding_tokens_are_never_touched():
    seen = []

    def spy(input_ids, attention_mask, token_type_ids):
        jax.debug.callback(lambda x: seen.append(np.asarray(x)), input_ids)
        return bow_proba(_weights(), input_ids, attention_mask, token_type_ids)

    ids, att, special, scores = _batch(seed=5)
    scores = np.where(special, 1e6, scores).astype(np.float32)  # tempt the ranking
    aopc(spy, ids, scores, attention_mask=att, special_tokens_mask=special,
                   replacement_id=MASK_ID)
    (variants,) = seen
    variants = np.asarray(variants).reshape(-1, *ids.shape)  # (1 + 2K, B, T)
    assert variants.shape[0] == 1 + 2 * len(F.DEFAULT_BINS)
    kept = variants[:, special]  # (1 + 2K, num_special)
    np.testing.assert_array_equal(kept, np.broadcast_to(ids[special], kept.shape))
    np.testing.assert_array_equal(variants[0], ids)  # the full input comes first


def test_no_maskable_tokens_is_excluded():
    w = _weights()
    ids = jnp.asarray([[3, 4, 5], [3, 4, 5]])
    special = jnp.asarray([[True, True, True], [True, False, True]])
    r = aopc(Partial(bow_proba, w), ids, jnp.zeros((2, 3)),
                       attention_mask=jnp.ones((2, 3)), special_tokens_mask=special,
                       replacement_id=MASK_ID)
    assert r.valid.tolist() == [False, True]
    assert r.comprehensiveness[0] == 0.0 and r.sufficiency[0] == 0.0
    assert r.num_selected[:, 0].tolist() == [0] * 5
    # Single maskable token: every bin removes it; sufficiency keeps it (no change).
    assert r.num_selected[:, 1].tolist() == [1] * 5
    assert float(r.sufficiency[1]) == pytest.approx(0.0, abs=1e-7)
    assert np.isfinite(float(r.mean_comprehensiveness))


def test_variants_per_call_chunks_give_same_result():
    w = _weights(3)
    ids, att, special, scores = _batch(seed=6)
    calls = []

    def counted(input_ids, attention_mask, token_type_ids):
        calls.append(input_ids.shape)
        return bow_proba(w, input_ids, attention_mask, token_type_ids)

    kwargs = dict(attention_mask=att, special_tokens_mask=special, replacement_id=MASK_ID)
    whole = aopc(counted, ids, scores, **kwargs)
    chunked = aopc(counted, ids, scores, variants_per_call=4, **kwargs)
    np.testing.assert_allclose(whole.comprehensiveness, chunked.comprehensiveness, atol=1e-6)
    np.testing.assert_allclose(whole.sufficiency, chunked.sufficiency, atol=1e-6)
    assert calls[0] == (11 * 6, 9) and calls[1] == (4 * 6, 9)  # 11 variants; 3 calls of 4


def test_length_sorted_batches_equal_one_call_and_skip_padding():
    w = _weights(5)
    ids, att, special, scores = _batch(seed=9, batch=13, seq=40)
    widths = []

    def recorded(input_ids, attention_mask, token_type_ids):
        widths.append(input_ids.shape)
        return bow_proba(w, input_ids, attention_mask, token_type_ids)

    kwargs = dict(attention_mask=att, special_tokens_mask=special, replacement_id=MASK_ID)
    references = []
    for target in (None, np.arange(13) % 2):  # predicted and given classes
        references.append(aopc(Partial(bow_proba, w), ids, scores, target=target, **kwargs))
        batched = F.batched_comprehensiveness_sufficiency(
            recorded, ids, scores, target=target, batch_size=4, length_multiple=8, **kwargs)
        for field in F.FaithfulnessResult._fields:
            np.testing.assert_allclose(np.asarray(getattr(batched, field)),
                                       np.asarray(getattr(references[-1], field)), atol=1e-6,
                                       err_msg=field)
    assert not np.allclose(references[0].comprehensiveness, references[1].comprehensiveness)
    rows = {shape[0] for shape in widths}
    assert rows == {11 * 4}  # every call has batch_size rows (the last one filled up)
    lengths = att.sum(1)
    for shape in widths:
        assert shape[1] % 8 == 0 or shape[1] == 40
    assert min(shape[1] for shape in widths) <= 8 * math.ceil(np.sort(lengths)[3] / 8) < 40


def test_mask_attention_removes_tokens_whatever_the_replacement():
    w = _weights(4).at[1].set(5.0)  # a replacement id with a large weight
    ids, att, special, scores = _batch(seed=7)
    ids = np.where(ids == 1, 2, ids).astype(np.int32)
    ref = aopc(Partial(bow_proba, w), ids, scores, attention_mask=att,
                         special_tokens_mask=special, replacement_id=MASK_ID)
    masked = aopc(Partial(bow_proba, w), ids, scores, attention_mask=att,
                            special_tokens_mask=special, replacement_id=1, mask_attention=True)
    unmasked = aopc(Partial(bow_proba, w), ids, scores, attention_mask=att,
                              special_tokens_mask=special, replacement_id=1)
    np.testing.assert_allclose(masked.comprehensiveness, ref.comprehensiveness, atol=1e-6)
    np.testing.assert_allclose(masked.sufficiency, ref.sufficiency, atol=1e-6)
    assert not np.allclose(unmasked.comprehensiveness, ref.comprehensiveness)


def test_partial_params_do_not_retrace_and_outer_jit_works():
    traces = []

    def proba(weights, input_ids, attention_mask, token_type_ids):
        traces.append(1)
        return bow_proba(weights, input_ids, attention_mask, token_type_ids)

    ids, att, special, scores = _batch(seed=8)
    kwargs = dict(attention_mask=att, special_tokens_mask=special, replacement_id=MASK_ID)
    a = aopc(Partial(proba, _weights(0)), ids, scores, **kwargs)
    b = aopc(Partial(proba, _weights(1)), ids, scores, **kwargs)
    assert len(traces) == 1
    assert not np.allclose(a.comprehensiveness, b.comprehensiveness)

    @jax.jit
    def outer(weights, scores):
        return aopc(lambda i, m, t: bow_proba(weights, i, m, t), ids, scores,
                              **kwargs).comprehensiveness

    np.testing.assert_allclose(outer(_weights(1), scores), b.comprehensiveness, atol=1e-6)


def test_errors():
    ids, att, special, scores = _batch()
    kwargs = dict(attention_mask=att, special_tokens_mask=special, replacement_id=MASK_ID)
    good = Partial(bow_proba, _weights())
    with pytest.raises(TypeError, match="callable"):
        aopc("model", ids, scores, **kwargs)
    with pytest.raises(TypeError, match="integer token ids"):
        aopc(good, ids.astype(np.float32), scores, **kwargs)
    with pytest.raises(ValueError, match="scores has shape"):
        aopc(good, ids, scores[:, :3], **kwargs)
    with pytest.raises(ValueError, match="variants_per_call"):
        aopc(good, ids, scores, variants_per_call=0, **kwargs)
    with pytest.raises(ValueError, match="target must have shape"):
        aopc(good, ids, scores, target=np.zeros(2, np.int32), **kwargs)
    with pytest.raises(ValueError, match="bins"):
        aopc(good, ids, scores, bins=(2.0,), **kwargs)
    with pytest.raises(ValueError, match="predict_proba must return"):
        aopc(lambda i, m, t: jnp.zeros(i.shape[0]), ids, scores, **kwargs)


def test_docstring_examples():
    import doctest

    import jax
    import jax.numpy as jnp

    result = doctest.testmod(F, extraglobs={"jax": jax, "jnp": jnp})
    assert result.attempted > 0 and result.failed == 0
