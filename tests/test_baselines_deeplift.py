"""Tests for baselines.deeplift: the rescale rule by hand on a ReLU network, summation to
delta, Captum 0.9 parity on the mirrored tanh model (Captum hooks its nn.Tanh modules, smat
wraps tanh in `baselines.rescale`), the facades, DeepLiftShap as a mean, and bad settings.
Parity on the real MiniLM encoder is in test_baselines_captum_parity.py."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import baselines
from tests.test_baselines_captum_parity import TOL, B, C, E, T, rel_err

HID, R = 6, 3
LENGTHS = np.array([7, 6, 4, 3, 1])


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    w = {"w1": rng.normal(size=(E, HID)).astype(np.float32),
         "b1": rng.normal(size=(HID,)).astype(np.float32) * 0.5,
         "w2": rng.normal(size=(HID, C)).astype(np.float32)}
    x = rng.normal(size=(B, T, E)).astype(np.float32)
    mask = np.arange(T)[None, :] < LENGTHS[:, None]
    references = rng.normal(size=(R, T, E)).astype(np.float32) * 0.3
    return w, x, mask, references


def relu_net(w, nonlinearity):
    def f(x, mask):
        h = nonlinearity(x @ w["w1"] + w["b1"][None, None])  # (N, T, HID)
        pooled = (h * mask[..., None].astype(h.dtype)).sum(1)  # (N, HID)
        return pooled @ w["w2"]  # (N, C)
    return f


def test_relu_network_gets_the_rescale_multipliers_by_hand(data):
    w, x, mask, references = data
    f = relu_net(w, baselines.rescale(jax.nn.relu))
    reference, target = references[0], np.arange(B) % C
    ours = baselines.deeplift(f, x, mask, baselines=reference, target=target,
                              return_convergence_delta=True)
    z, z0 = x @ w["w1"] + w["b1"], reference @ w["w1"] + w["b1"]  # (B, T, HID), (T, HID)
    dz = z - z0
    same = np.abs(dz) < 1e-10
    m = np.where(same, (z > 0).astype(np.float32),
                 (np.maximum(z, 0) - np.maximum(z0, 0)) / np.where(same, 1, dz))
    # d out_c / d h_tj = mask_t * w2[j, c]; chain through the secant slopes and W1
    upstream = mask[..., None] * w["w2"].T[target][:, None, :] * m  # (B, T, HID)
    expected = (x - reference) * np.einsum("btj,ej->bte", upstream, w["w1"])
    np.testing.assert_allclose(ours.attributions, expected, rtol=1e-5, atol=1e-5)
    # only linear maps and rescaled units: the attributions sum to f(x) - f(x') exactly
    assert np.max(np.abs(ours.delta)) < 1e-4
    # the plain gradient (no rule) is not the same and does not sum to the difference
    plain = baselines.deeplift(relu_net(w, jax.nn.relu), x, mask, baselines=reference,
                               target=target, return_convergence_delta=True)
    assert np.max(np.abs(plain.delta)) > 1e-2


def test_without_the_rule_deeplift_is_difference_times_gradient(data):
    w, x, mask, references = data
    f = relu_net(w, jnp.tanh)
    ours = baselines.deeplift(f, x, mask, baselines=references[1])
    gradient = baselines.saliency(f, x, mask, abs=False).attributions
    np.testing.assert_allclose(ours.attributions, (x - references[1]) * gradient, rtol=1e-5,
                               atol=1e-6)
    zero = baselines.deeplift(f, x, mask)
    np.testing.assert_allclose(zero.attributions,
                               baselines.input_x_gradient(f, x, mask).attributions,
                               rtol=1e-5, atol=1e-6)


def test_deeplift_shap_is_the_mean_over_references(data):
    w, x, mask, references = data
    f = relu_net(w, baselines.rescale(jnp.tanh))
    shap = baselines.deeplift_shap(f, x, mask, baselines=references, target=1,
                                   return_convergence_delta=True)
    each = [baselines.deeplift(f, x, mask, baselines=r, target=1,
                               return_convergence_delta=True) for r in references]
    # float32 sums in another order (the suite compiles without LLVM's passes): 1e-5
    np.testing.assert_allclose(shap.attributions,
                               np.mean([e.attributions for e in each], 0), rtol=1e-5,
                               atol=1e-5)
    np.testing.assert_allclose(shap.delta, np.mean([e.delta for e in each], 0), atol=1e-5)
    np.testing.assert_allclose(shap.saliency.scores,
                               np.where(mask, np.asarray(shap.attributions).sum(-1), 0),
                               atol=1e-5)


def _torch_tanh_model(w):
    torch = pytest.importorskip("torch")

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.hidden = torch.nn.Linear(E, HID)
            self.act = torch.nn.Tanh()  # a module: Captum applies the rescale rule here
            self.out = torch.nn.Linear(HID, C, bias=False)
            with torch.no_grad():
                self.hidden.weight.copy_(torch.from_numpy(w["w1"].T.copy()))
                self.hidden.bias.copy_(torch.from_numpy(w["b1"]))
                self.out.weight.copy_(torch.from_numpy(w["w2"].T.copy()))

        def forward(self, x, mask):
            h = self.act(self.hidden(x))
            return self.out((h * mask.unsqueeze(-1).to(h.dtype)).sum(1))

    return Model().eval()


CAPTUM_HOOK_WARNING = "ignore:Setting forward, backward hooks:UserWarning"


@pytest.mark.parity
@pytest.mark.filterwarnings(CAPTUM_HOOK_WARNING)
def test_matches_captum_deeplift_and_deeplift_shap(data):
    captum_attr = pytest.importorskip("captum.attr")
    torch = pytest.importorskip("torch")
    w, x, mask, references = data
    model = _torch_tanh_model(w)
    f = relu_net(w, baselines.rescale(jnp.tanh))
    target = np.arange(B) % C
    tx, tmask, ttarget = (torch.from_numpy(a) for a in (x, mask, target))
    for reference in (None, references[0]):
        theirs, their_delta = captum_attr.DeepLift(model).attribute(
            tx.clone().requires_grad_(), baselines=None if reference is None
            else torch.from_numpy(np.broadcast_to(reference, x.shape).copy()),
            target=ttarget, additional_forward_args=(tmask,), return_convergence_delta=True)
        ours = baselines.DeepLift(f).attribute(x, baselines=reference, target=target,
                                               additional_forward_args=(mask,),
                                               return_convergence_delta=True)
        assert rel_err(ours[0], theirs.detach().numpy()) <= TOL
        np.testing.assert_allclose(ours[1], their_delta.detach().numpy(), atol=1e-4)
    theirs, their_delta = captum_attr.DeepLiftShap(model).attribute(
        tx.clone().requires_grad_(), baselines=torch.from_numpy(references), target=ttarget,
        additional_forward_args=(tmask,), return_convergence_delta=True)
    ours, delta = baselines.DeepLiftShap(f).attribute(
        x, baselines=references, target=target, additional_forward_args=(mask,),
        return_convergence_delta=True)
    assert rel_err(ours, theirs.detach().numpy()) <= TOL
    # Captum returns one delta per (example, reference) pair, example-major
    np.testing.assert_allclose(delta, their_delta.detach().numpy().reshape(B, R).mean(1),
                               atol=1e-4)


def test_facades_do_not_retrace(data):
    w, x, mask, references = data
    traces = []

    def f(x, mask):
        traces.append(x.shape)
        return relu_net(w, baselines.rescale(jnp.tanh))(x, mask)

    explainer = baselines.DeepLiftShap(f)
    first = explainer.attribute(x, references, target=0, additional_forward_args=(mask,))
    count = len(traces)
    second = explainer.attribute(x + 1, references, target=0, additional_forward_args=(mask,))
    assert len(traces) == count and not np.allclose(first, second)


def test_bad_settings_are_named(data):
    w, x, mask, references = data
    f = relu_net(w, baselines.rescale(jnp.tanh))
    with pytest.raises(ValueError, match=r"R >= 2 references .* got R = 1"):
        baselines.deeplift_shap(f, x, mask, baselines=references[:1])
    with pytest.raises(ValueError, match=r"baselines must be \(R, 7, 8\) references; got "
                                         r"shape \(3, 7, 2\)"):
        baselines.deeplift_shap(f, x, mask, baselines=references[..., :2])
    with pytest.raises(ValueError, match=r"baseline of shape \(3,\) does not broadcast"):
        baselines.deeplift(f, x, mask, baselines=np.zeros(3, np.float32))
    with pytest.raises(ValueError, match="odd leading axis 3"):
        jax.grad(lambda z: baselines.rescale(jnp.tanh)(z).sum())(jnp.ones((3, 2)))
    with pytest.raises(ValueError, match="Unknown reduction 'max'"):
        baselines.deeplift(f, x, mask, reduction="max")
