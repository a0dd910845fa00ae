"""smat: JAX-native learned explainers (SMaT), Captum-equivalent baselines and evaluation.

Floors, each importing only from those before it (docs/architecture.md): ``smat.data``
(data sets, tokenization, splits), ``smat.models`` (Flax NNX encoders, Hugging Face
checkpoints, the batched inference loop), ``smat.explainers`` (saliency protocol, learned
attention explainer), ``smat.store`` (checkpoints, saved models and explainers, run logs,
rendering), ``smat.registry`` (every explainer by name), ``smat.training`` (the resumable
loop, teacher, student, the SMaT step), ``smat.evaluation`` (pure metrics), ``smat.jobs``
(resumable on-disk runs) and ``smat.cli``.
"""

from smat.store.explainer_store import LoadedExplainer as LoadedExplainer
from smat.store.explainer_store import load_explainer as load_explainer
from smat.store.explainer_store import save_explainer as save_explainer

__version__ = "0.1.0"

__all__ = ["LoadedExplainer", "__version__", "load_explainer", "save_explainer"]
