"""Static explainers: Captum-equivalent gradient and perturbation methods and attention
baselines in JAX.

Pure cores (:func:`saliency`, :func:`input_x_gradient`, :func:`integrated_gradients`,
:func:`noise_tunnel`, :func:`gradient_shap`, :func:`deeplift`, :func:`deeplift_shap`,
:func:`feature_ablation`, :func:`occlusion`, :func:`lime`, :func:`kernel_shap`) work on any
``f(x (B, T, E), mask (B, T)) -> (B, C)``; a Captum-like class of the same name binds
Captum's arguments to each (:class:`Saliency`, :class:`InputXGradient`,
:class:`IntegratedGradients`, :class:`DeepLift`, :class:`DeepLiftShap`,
:class:`GradientShap`, :class:`FeatureAblation`, :class:`Occlusion`, :class:`Lime`,
:class:`KernelShap`, :class:`NoiseTunnel`; :mod:`baselines.captum_like`), so Captum code
ports by changing its imports.
:mod:`baselines.model_adapters` builds ``f`` for smat models. The result type of every
explainer is :class:`smat.explainers.Saliency` (not re-exported here: ``baselines.Saliency``
is Captum's method name).
"""

from baselines._common import Attribution as Attribution
from baselines.attention import all_layers_attention as all_layers_attention
from baselines.attention import attention_rollout as attention_rollout
from baselines.attention import last_layer_attention as last_layer_attention
from baselines.attention import mean_attention as mean_attention
from baselines.attention import random_saliency as random_saliency
from baselines.captum_like import DeepLift as DeepLift
from baselines.captum_like import DeepLiftShap as DeepLiftShap
from baselines.captum_like import FeatureAblation as FeatureAblation
from baselines.captum_like import GradientShap as GradientShap
from baselines.captum_like import InputXGradient as InputXGradient
from baselines.captum_like import IntegratedGradients as IntegratedGradients
from baselines.captum_like import KernelShap as KernelShap
from baselines.captum_like import Lime as Lime
from baselines.captum_like import NoiseTunnel as NoiseTunnel
from baselines.captum_like import Occlusion as Occlusion
from baselines.captum_like import Saliency as Saliency
from baselines.captum_like import SkLearnLinearRegression as SkLearnLinearRegression
from baselines.deeplift import deeplift as deeplift
from baselines.deeplift import deeplift_shap as deeplift_shap
from baselines.deeplift import rescale as rescale
from baselines.gradient_shap import gradient_shap as gradient_shap
from baselines.gradients import METHODS as METHODS
from baselines.gradients import input_x_gradient as input_x_gradient
from baselines.gradients import integrated_gradients as integrated_gradients
from baselines.gradients import quadrature as quadrature
from baselines.gradients import saliency as saliency
from baselines.model_adapters import POINTS as POINTS
from baselines.model_adapters import AttributionInputs as AttributionInputs
from baselines.model_adapters import attribution_inputs as attribution_inputs
from baselines.model_adapters import patch_attention_inputs as patch_attention_inputs
from baselines.model_adapters import (
    patch_attribution_inputs as patch_attribution_inputs,
)
from baselines.model_adapters import token_baseline as token_baseline
from baselines.noise_tunnel import NT_TYPES as NT_TYPES
from baselines.noise_tunnel import noise_tunnel as noise_tunnel
from baselines.perturbation import feature_ablation as feature_ablation
from baselines.perturbation import occlusion as occlusion
from baselines.surrogate import kernel_shap as kernel_shap
from baselines.surrogate import kernel_shap_coalitions as kernel_shap_coalitions
from baselines.surrogate import lime as lime
from baselines.surrogate import lime_coalitions as lime_coalitions

__all__ = [
    "METHODS",
    "NT_TYPES",
    "POINTS",
    "Attribution",
    "AttributionInputs",
    "DeepLift",
    "DeepLiftShap",
    "FeatureAblation",
    "GradientShap",
    "InputXGradient",
    "IntegratedGradients",
    "KernelShap",
    "Lime",
    "NoiseTunnel",
    "Occlusion",
    "Saliency",
    "SkLearnLinearRegression",
    "all_layers_attention",
    "attention_rollout",
    "attribution_inputs",
    "deeplift",
    "deeplift_shap",
    "feature_ablation",
    "gradient_shap",
    "input_x_gradient",
    "integrated_gradients",
    "kernel_shap",
    "kernel_shap_coalitions",
    "last_layer_attention",
    "lime",
    "lime_coalitions",
    "mean_attention",
    "noise_tunnel",
    "occlusion",
    "patch_attention_inputs",
    "patch_attribution_inputs",
    "quadrature",
    "random_saliency",
    "rescale",
    "saliency",
    "token_baseline",
]
