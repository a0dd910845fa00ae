"""Explainers: the ``Saliency`` protocol and the learned SMaT attention explainer.

``init`` / ``apply`` are the attention explainer's pure functions (paper Eq. 11),
also reachable as ``smat.explainers.attention.init`` / ``.apply``.
"""

from smat.explainers import attention as attention
from smat.explainers import normalizers as normalizers
from smat.explainers.attention import AttentionExplainer as AttentionExplainer
from smat.explainers.attention import AttentionExplainerConfig as AttentionExplainerConfig
from smat.explainers.attention import AttentionExplainerParams as AttentionExplainerParams
from smat.explainers.attention import apply as apply
from smat.explainers.attention import head_weights as head_weights
from smat.explainers.attention import init as init
from smat.explainers.attention import pool_attention as pool_attention
from smat.explainers.base import REDUCTIONS as REDUCTIONS
from smat.explainers.base import AbstractLearnedExplainer as AbstractLearnedExplainer
from smat.explainers.base import Saliency as Saliency
from smat.explainers.base import reduce_tokens as reduce_tokens
from smat.explainers.base import to_distribution as to_distribution
from smat.explainers.normalizers import NORMALIZERS as NORMALIZERS
from smat.explainers.normalizers import entmax15 as entmax15
from smat.explainers.normalizers import get_normalizer as get_normalizer
from smat.explainers.normalizers import sparsemax as sparsemax

__all__ = [
    "NORMALIZERS",
    "REDUCTIONS",
    "AbstractLearnedExplainer",
    "AttentionExplainer",
    "AttentionExplainerConfig",
    "AttentionExplainerParams",
    "Saliency",
    "apply",
    "attention",
    "entmax15",
    "get_normalizer",
    "head_weights",
    "init",
    "normalizers",
    "pool_attention",
    "reduce_tokens",
    "sparsemax",
    "to_distribution",
]
