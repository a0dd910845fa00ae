"""smat: JAX-native learned explainers (SMaT), Captum-equivalent baselines and evaluation.

Subpackages: ``smat.models`` (Flax NNX encoders + Hugging Face checkpoints), ``smat.data``
(data sets, tokenization, splits), ``smat.explainers`` (saliency protocol, learned attention
explainer), ``smat.scaffold`` (the SMaT step), ``smat.train`` (training loops) and
``smat.evaluation`` (simulability, agreement, faithfulness, plausibility).
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
