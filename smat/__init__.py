"""smat: JAX-native learned explainers (SMaT), Captum-equivalent baselines and evaluation.

Subpackages: ``smat.models`` (Flax NNX encoders + Hugging Face checkpoints), ``smat.data``
(data sets, tokenization, splits), ``smat.explainers`` (saliency protocol, learned attention
explainer), ``smat.scaffold`` (the SMaT step), ``smat.train`` / ``smat.student`` (training
loops) and ``smat.evaluation`` (simulability, agreement, faithfulness, plausibility).
"""

from smat.explainer_store import LoadedExplainer as LoadedExplainer
from smat.explainer_store import load_explainer as load_explainer
from smat.explainer_store import save_explainer as save_explainer

__version__ = "0.1.0"

__all__ = ["LoadedExplainer", "__version__", "load_explainer", "save_explainer"]
