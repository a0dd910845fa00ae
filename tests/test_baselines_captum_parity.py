"""Parity of baselines' gradient explainers with Captum 0.9 (torch CPU).

1. A small token model mirrored exactly in torch and JAX: word embeddings ->
   2-layer tanh MLP per token -> masked mean pooling -> linear logits.
2. The real all-MiniLM-L6-v2 encoder: Hugging Face PyTorch ``BertModel`` plus a
   torch head that mirrors smat's ``pooling="mean"`` classification head, with the
   same fixed random head weights in smat (see ``test_real_model_parity``).

Tolerance: max |smat - captum| / max |captum| <= 1e-4 per attribution
tensor; convergence deltas: |delta_smat - delta_captum| <= 1e-4 * max |F(x) - F(x')|
(the delta itself is a float32 rounding-level quantity, so it is compared on the
scale of the integral it checks).
"""

from functools import partial

import numpy as np
import pytest

torch = pytest.importorskip("torch")
captum_attr = pytest.importorskip("captum.attr")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

import baselines  # noqa: E402
from baselines import METHODS, captum_like  # noqa: E402
from tests.helpers import OPTIMIZED_COMPILE  # noqa: E402

pytestmark = pytest.mark.parity

B, T, E, HID, C = 5, 7, 8, 16, 3
LENGTHS = np.array([7, 6, 4, 3, 1])
TOL = 1e-4


def rel_err(ours, theirs) -> float:
    ours, theirs = np.asarray(ours, np.float64), np.asarray(theirs, np.float64)
    return float(np.max(np.abs(ours - theirs)) / np.max(np.abs(theirs)))


@pytest.fixture(scope="module")
def weights():
    rng = np.random.default_rng(0)
    shapes = {"w1": (E, HID), "b1": (HID,), "w2": (HID, HID), "b2": (HID,),
              "wo": (HID, C), "bo": (C,)}
    return {k: (rng.normal(size=s) / np.sqrt(s[0])).astype(np.float32)
            for k, s in shapes.items()}


@pytest.fixture(scope="module")
def batch():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(B, T, E)).astype(np.float32)
    mask = np.arange(T)[None, :] < LENGTHS[:, None]
    pad = rng.normal(size=(E,)).astype(np.float32) * 0.1  # a PAD-embedding-like baseline
    return x, mask, pad


def torch_forward(w):
    tw = {k: torch.from_numpy(v) for k, v in w.items()}

    def forward(x, mask):
        h = torch.tanh(x @ tw["w1"] + tw["b1"])
        h = torch.tanh(h @ tw["w2"] + tw["b2"])
        m = mask.to(x.dtype).unsqueeze(-1)
        pooled = (h * m).sum(1) / m.sum(1)
        return pooled @ tw["wo"] + tw["bo"]

    return forward


def jax_forward(w):
    jw = {k: jnp.asarray(v) for k, v in w.items()}

    def forward(x, mask):
        h = jnp.tanh(x @ jw["w1"] + jw["b1"][None, None])
        h = jnp.tanh(h @ jw["w2"] + jw["b2"][None, None])
        m = mask.astype(x.dtype)[:, :, None]
        pooled = (h * m).sum(1) / m.sum(1)
        return pooled @ jw["wo"] + jw["bo"][None]

    return forward


@pytest.fixture(scope="module")
def models(weights):
    return torch_forward(weights), jax_forward(weights)


def targets(models, batch, which):
    x, mask, _ = batch
    if which == "given":
        return np.arange(B) % C
    logits = models[0](torch.from_numpy(x), torch.from_numpy(mask))
    return logits.argmax(-1).numpy()


def test_models_agree(models, batch):
    x, mask, _ = batch
    theirs = models[0](torch.from_numpy(x), torch.from_numpy(mask)).detach().numpy()
    ours = models[1](jnp.asarray(x), jnp.asarray(mask))
    assert rel_err(ours, theirs) < 1e-6


@pytest.mark.parametrize("which", ["given", "predicted"])
@pytest.mark.parametrize("use_abs", [True, False])
def test_saliency(models, batch, which, use_abs):
    x, mask, _ = batch
    target = targets(models, batch, which)
    theirs = captum_attr.Saliency(models[0]).attribute(
        torch.from_numpy(x).requires_grad_(), target=torch.from_numpy(target), abs=use_abs,
        additional_forward_args=(torch.from_numpy(mask),))
    ours = baselines.Saliency(models[1]).attribute(
        jnp.asarray(x), target=None if which == "predicted" else jnp.asarray(target),
        abs=use_abs, additional_forward_args=(jnp.asarray(mask),))
    assert rel_err(ours, theirs.numpy()) <= TOL
    core = baselines.saliency(models[1], x, mask, target=target, abs=use_abs)
    assert rel_err(core.attributions, theirs.numpy()) <= TOL


@pytest.mark.parametrize("which", ["given", "predicted"])
def test_input_x_gradient(models, batch, which):
    x, mask, _ = batch
    target = targets(models, batch, which)
    theirs = captum_attr.InputXGradient(models[0]).attribute(
        torch.from_numpy(x).requires_grad_(), target=torch.from_numpy(target),
        additional_forward_args=(torch.from_numpy(mask),))
    ours = baselines.InputXGradient(models[1]).attribute(
        jnp.asarray(x), target=None if which == "predicted" else jnp.asarray(target),
        additional_forward_args=(jnp.asarray(mask),))
    assert rel_err(ours, theirs.detach().numpy()) <= TOL


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("baseline_kind", ["zero", "pad"])
@pytest.mark.parametrize("which", ["given", "predicted"])
def test_integrated_gradients(models, batch, method, baseline_kind, which):
    x, mask, pad = batch
    target = targets(models, batch, which)
    tx, tmask = torch.from_numpy(x), torch.from_numpy(mask)
    t_baseline = None if baseline_kind == "zero" else torch.from_numpy(
        np.broadcast_to(pad, x.shape).copy())
    theirs, their_delta = captum_attr.IntegratedGradients(models[0]).attribute(
        tx, baselines=t_baseline, target=torch.from_numpy(target),
        additional_forward_args=(tmask,), n_steps=50, method=method,
        return_convergence_delta=True)
    ours, our_delta = baselines.IntegratedGradients(models[1]).attribute(
        jnp.asarray(x), baselines=None if baseline_kind == "zero" else jnp.asarray(pad),
        target=None if which == "predicted" else jnp.asarray(target),
        additional_forward_args=(jnp.asarray(mask),), n_steps=50, method=method,
        internal_batch_size=4 * B, return_convergence_delta=True)
    assert rel_err(ours, theirs.detach().numpy()) <= TOL
    start = np.zeros_like(x) if baseline_kind == "zero" else np.broadcast_to(pad, x.shape)
    f = models[1]
    gap = f(jnp.asarray(x), jnp.asarray(mask)) - f(jnp.asarray(start), jnp.asarray(mask))
    scale = float(jnp.max(jnp.abs(gap)))
    assert np.max(np.abs(np.asarray(our_delta) - their_delta.numpy())) <= TOL * scale


def test_integrated_gradients_local(models, batch):
    x, mask, _ = batch
    target = targets(models, batch, "given")
    theirs = captum_attr.IntegratedGradients(models[0], multiply_by_inputs=False).attribute(
        torch.from_numpy(x), target=torch.from_numpy(target),
        additional_forward_args=(torch.from_numpy(mask),), n_steps=20)
    ours = baselines.IntegratedGradients(models[1], multiply_by_inputs=False).attribute(
        jnp.asarray(x), target=jnp.asarray(target),
        additional_forward_args=(jnp.asarray(mask),), n_steps=20)
    assert rel_err(ours, theirs.detach().numpy()) <= TOL


def test_facade_does_not_retrace(models, batch):
    x, mask, _ = batch
    ig = baselines.IntegratedGradients(models[1])
    kwargs = {"additional_forward_args": (jnp.asarray(mask),), "n_steps": 10}
    ig.attribute(jnp.asarray(x), **kwargs)
    before = captum_like._run._cache_size()
    ig.attribute(jnp.asarray(x) + 1.0, **kwargs)
    assert captum_like._run._cache_size() == before


# ---------------------------------------------------------------- the real MiniLM encoder
# The parity target is Hugging Face ``BertForSequenceClassification``; its head is the BERT
# pooler (dense + tanh on [CLS]) + linear, which smat's heads do not have (and the
# all-MiniLM-L6-v2 checkpoint's pooler is unused by smat). We therefore wrap HF
# ``BertModel`` (same encoder code) with a torch head mirroring smat's ``pooling="mean"``
# head (masked token mean + linear), with smat's fixed random head weights (seed 0).

SENTENCES = [
    "A gripping, beautifully shot film.",
    "Dull.",
    "The plot meanders and the acting is wooden, but the score is lovely.",
    "I would watch it again tomorrow.",
    "Not my cup of tea at all, sadly.",
    "An instant classic of the genre that rewards repeated viewing with new details.",
    "Terrible pacing.",
    "Surprisingly moving for a film about a talking dog and his stubborn owner.",
    "Fine.",
]
NUM_LABELS = 3


class RealModel:
    """smat and torch views of the same MiniLM classifier on one padded batch."""

    def __init__(self):
        from transformers import BertModel

        from smat.models import from_pretrained, functional, minilm_path

        model, tokenizer = from_pretrained(minilm_path(), task="classification",
                                           num_labels=NUM_LABELS, pooling="mean", seed=0)
        graphdef, params = functional.split(model)
        enc = tokenizer(SENTENCES, padding=True, return_tensors="np")
        self.ids = np.array(enc["input_ids"])
        self.mask_np = np.array(enc["attention_mask"])
        self.f, self.x, self.mask = baselines.attribution_inputs(
            graphdef, params, input_ids=self.ids, attention_mask=self.mask_np)
        self.pad = baselines.token_baseline(
            graphdef, params, input_ids=self.ids, attention_mask=self.mask_np,
            token_id=tokenizer.pad_token_id)
        self.hf = BertModel.from_pretrained(minilm_path(), add_pooling_layer=False).eval()
        kernel = np.array(model.classifier.kernel[...])  # (D, C)
        self.head = torch.nn.Linear(*kernel.shape)
        with torch.no_grad():
            self.head.weight.copy_(torch.from_numpy(kernel.T.copy()))
            self.head.bias.copy_(torch.from_numpy(np.array(model.classifier.bias[...])))
        self.tx = self.hf.embeddings.word_embeddings(torch.from_numpy(self.ids)).detach()
        self.tmask = torch.from_numpy(self.mask_np)
        # Saliency (abs on / off) and Input x Gradient share one compiled computation.
        self.gradient_methods = jax.jit(lambda x, mask, target: (
            baselines.saliency(self.f, x, mask, target=target).attributions,
            baselines.saliency(self.f, x, mask, target=target, abs=False).attributions,
            baselines.input_x_gradient(self.f, x, mask, target=target).attributions,
        ))

    def torch_forward(self, x, mask):
        hidden = self.hf(inputs_embeds=x, attention_mask=mask).last_hidden_state
        m = mask.to(hidden.dtype).unsqueeze(-1)
        return self.head((hidden * m).sum(1) / m.sum(1).clamp(min=1))

    def targets(self, which):
        if which == "given":
            return np.arange(len(SENTENCES)) % NUM_LABELS
        return np.array(jnp.argmax(self.f(self.x, self.mask), -1))


@pytest.fixture(scope="module")
def real():
    return RealModel()


def test_real_model_inputs_and_logits_agree(real):
    assert real.mask_np.shape[0] >= 8 and len(set(real.mask_np.sum(1))) >= 6
    np.testing.assert_array_equal(np.asarray(real.x), real.tx.numpy())
    with torch.no_grad():
        theirs = real.torch_forward(real.tx, real.tmask).numpy()
    assert rel_err(real.f(real.x, real.mask), theirs) < 1e-5


@pytest.mark.parametrize("which", ["given", "predicted"])
def test_real_saliency_and_input_x_gradient(real, which):
    target = real.targets(which)
    ours = real.gradient_methods(real.x, real.mask, jnp.asarray(target))
    for use_abs, our_attr in zip((True, False), ours[:2], strict=True):
        theirs = captum_attr.Saliency(real.torch_forward).attribute(
            real.tx.clone().requires_grad_(), target=torch.from_numpy(target), abs=use_abs,
            additional_forward_args=(real.tmask,))
        assert rel_err(our_attr, theirs.numpy()) <= TOL, use_abs
    theirs = captum_attr.InputXGradient(real.torch_forward).attribute(
        real.tx.clone().requires_grad_(), target=torch.from_numpy(target),
        additional_forward_args=(real.tmask,))
    assert rel_err(ours[2], theirs.detach().numpy()) <= TOL


def _ig_cases():
    fast = ("gausslegendre", "pad", "predicted")
    for method in METHODS:
        for baseline_kind in ("zero", "pad"):
            for which in ("given", "predicted"):
                case = (method, baseline_kind, which)
                marks = () if case == fast else (pytest.mark.slow,)
                yield pytest.param(*case, marks=marks, id="-".join(case))


@pytest.mark.parametrize(("method", "baseline_kind", "which"), list(_ig_cases()))
def test_real_integrated_gradients(real, method, baseline_kind, which):
    target = real.targets(which)
    base = jnp.zeros_like(real.x) if baseline_kind == "zero" else real.pad
    theirs, their_delta = captum_attr.IntegratedGradients(real.torch_forward).attribute(
        real.tx, baselines=torch.from_numpy(np.array(base)), target=torch.from_numpy(target),
        additional_forward_args=(real.tmask,), n_steps=50, method=method,
        return_convergence_delta=True)
    ours = jax.jit(partial(baselines.integrated_gradients, real.f, n_steps=50, method=method,
                           return_convergence_delta=True), compiler_options=OPTIMIZED_COMPILE)(
        real.x, real.mask, baseline=base, target=None if which == "predicted" else target)
    assert rel_err(ours.attributions, theirs.detach().numpy()) <= TOL
    gap = real.f(real.x, real.mask) - real.f(base, real.mask)
    scale = float(jnp.max(jnp.abs(gap)))
    assert np.max(np.abs(np.asarray(ours.delta) - their_delta.numpy())) <= TOL * scale


@pytest.mark.parametrize(
    "baseline_kind", [pytest.param("zero", marks=pytest.mark.slow), "pad"])
def test_real_ig_completeness(real, baseline_kind):
    base = jnp.zeros_like(real.x) if baseline_kind == "zero" else real.pad
    ours = jax.jit(partial(baselines.integrated_gradients, real.f, n_steps=128,
                           return_convergence_delta=True),
                   compiler_options=OPTIMIZED_COMPILE)(real.x, real.mask, baseline=base)
    target = real.targets("predicted")
    gap = (real.f(real.x, real.mask) - real.f(base, real.mask))[np.arange(len(target)), target]
    rel = np.abs(np.asarray(ours.delta)) / np.abs(np.asarray(gap))
    assert float(rel.max()) <= 1e-3, rel


class _TorchClassifier(torch.nn.Module):
    """The real model as one torch module: Captum's DeepLift hooks a module's children."""

    def __init__(self, real):
        super().__init__()
        self.hf, self.head = real.hf, real.head

    def forward(self, x, mask):
        hidden = self.hf(inputs_embeds=x, attention_mask=mask).last_hidden_state
        m = mask.to(hidden.dtype).unsqueeze(-1)
        return self.head((hidden * m).sum(1) / m.sum(1).clamp(min=1))


@pytest.mark.filterwarnings("ignore:Setting forward, backward hooks:UserWarning")
def test_real_deeplift_and_deeplift_shap(real):
    """BERT has no module of Captum's nonlinear list on this path (GELU is HF's own module,
    softmax is functional), so neither side applies the rescale rule anywhere."""
    target = real.targets("given")
    model = _TorchClassifier(real)
    pad = np.array(real.pad)
    theirs, their_delta = captum_attr.DeepLift(model).attribute(
        real.tx.clone().requires_grad_(), baselines=torch.from_numpy(pad),
        target=torch.from_numpy(target), additional_forward_args=(real.tmask,),
        return_convergence_delta=True)
    ours = jax.jit(partial(baselines.deeplift, real.f, return_convergence_delta=True))(
        real.x, real.mask, baselines=pad, target=target)
    assert rel_err(ours.attributions, theirs.detach().numpy()) <= TOL
    scale = float(jnp.max(jnp.abs(real.f(real.x, real.mask) - real.f(pad, real.mask))))
    assert np.max(np.abs(np.asarray(ours.delta) - their_delta.numpy())) <= TOL * scale

    rng = np.random.default_rng(3)
    references = np.stack([np.zeros_like(pad[0]), pad[0],
                           0.05 * rng.normal(size=pad[0].shape).astype(np.float32)])
    theirs = captum_attr.DeepLiftShap(model).attribute(
        real.tx.clone().requires_grad_(), baselines=torch.from_numpy(references),
        target=torch.from_numpy(target), additional_forward_args=(real.tmask,))
    ours = jax.jit(partial(baselines.deeplift_shap, real.f))(
        real.x, real.mask, baselines=references, target=target)
    assert rel_err(ours.attributions, theirs.detach().numpy()) <= TOL


@pytest.mark.slow  # the mirrored small model covers both in the default suite
def test_real_feature_ablation_and_occlusion(real):
    target = real.targets("given")
    steps = real.x.shape[1]
    feature_mask = torch.arange(steps)[None, :, None].expand(1, steps, real.x.shape[2])
    theirs = captum_attr.FeatureAblation(real.torch_forward).attribute(
        real.tx, target=torch.from_numpy(target), feature_mask=feature_mask,
        additional_forward_args=(real.tmask,), perturbations_per_eval=4)
    ours = baselines.feature_ablation(real.f, real.x, real.mask, target=target, chunk_size=4)
    assert rel_err(ours.attributions, theirs.numpy()) <= TOL
    theirs = captum_attr.Occlusion(real.torch_forward).attribute(
        real.tx, sliding_window_shapes=(3, real.x.shape[2]), strides=(1, real.x.shape[2]),
        target=torch.from_numpy(target), additional_forward_args=(real.tmask,))
    ours = baselines.occlusion(real.f, real.x, real.mask, window=3, stride=1, target=target)
    assert rel_err(ours.attributions, theirs.numpy()) <= TOL


@pytest.mark.slow  # the mirrored small model covers it in the default suite
def test_real_gradient_shap_given_captums_draws(real):
    """stdevs = 0 and Captum's own numpy draws of baselines and alphas (example-major)."""
    target = real.targets("given")
    samples, pad = 4, np.array(real.pad)
    distribution = np.stack([np.zeros_like(pad[0]), pad[0]])
    state = np.random.get_state()  # noqa: NPY002
    try:
        np.random.seed(11)  # noqa: NPY002
        theirs = captum_attr.GradientShap(real.torch_forward).attribute(
            real.tx.clone().requires_grad_(), baselines=torch.from_numpy(distribution),
            n_samples=samples, stdevs=0.0, target=torch.from_numpy(target),
            additional_forward_args=(real.tmask,))
        np.random.seed(11)  # noqa: NPY002
        batch = len(target)
        indices = np.random.choice(2, samples * batch).reshape(batch, samples).T  # noqa: NPY002
        alphas = np.random.uniform(0.0, 1.0, batch * samples).astype(  # noqa: NPY002
            np.float32).reshape(batch, samples).T
    finally:
        np.random.set_state(state)  # noqa: NPY002
    ours = baselines.gradient_shap(real.f, real.x, real.mask, baselines=distribution,
                                   n_samples=samples, target=target,
                                   draws=(indices, alphas,
                                          np.zeros((samples, *real.x.shape), np.float32)))
    assert rel_err(ours.attributions, theirs.detach().numpy()) <= TOL
