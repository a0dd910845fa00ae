"""Evaluation of saliency explainers: agreement, faithfulness, plausibility, statistics.

Metrics are pure, batched, jitted JAX functions over ``(batch, seq)`` arrays;
instances where a metric is undefined are excluded through a validity mask and
counted, never turned into NaN. Summary statistics and significance tests run on
the host (``statistics``). See design §6 for the definitions.
"""

from smat.evaluation._common import PerInstance as PerInstance
from smat.evaluation.agreement import AGREEMENT_METRICS as AGREEMENT_METRICS
from smat.evaluation.agreement import MIN_TOKENS as MIN_TOKENS
from smat.evaluation.agreement import AgreementMatrix as AgreementMatrix
from smat.evaluation.agreement import SeedAggregate as SeedAggregate
from smat.evaluation.agreement import Validity as Validity
from smat.evaluation.agreement import aggregate_over_seeds as aggregate_over_seeds
from smat.evaluation.agreement import agreement_matrix as agreement_matrix
from smat.evaluation.agreement import correlation_validity as correlation_validity
from smat.evaluation.agreement import kendall_tau_b as kendall_tau_b
from smat.evaluation.agreement import pearson_r as pearson_r
from smat.evaluation.agreement import plot_agreement_matrix as plot_agreement_matrix
from smat.evaluation.agreement import spearman_rho as spearman_rho
from smat.evaluation.agreement import top_k_overlap as top_k_overlap
from smat.evaluation.cartography import GROUPS as GROUPS
from smat.evaluation.cartography import Cartography as Cartography
from smat.evaluation.cartography import cartography as cartography
from smat.evaluation.cartography import group_counts as group_counts
from smat.evaluation.cartography import plot_data_map as plot_data_map
from smat.evaluation.faithfulness import DEFAULT_BINS as DEFAULT_BINS
from smat.evaluation.faithfulness import FaithfulnessResult as FaithfulnessResult
from smat.evaluation.faithfulness import (
    batched_comprehensiveness_sufficiency as batched_comprehensiveness_sufficiency,
)
from smat.evaluation.faithfulness import (
    comprehensiveness_sufficiency as comprehensiveness_sufficiency,
)
from smat.evaluation.faithfulness import num_tokens_per_bin as num_tokens_per_bin
from smat.evaluation.plausibility import F1Result as F1Result
from smat.evaluation.plausibility import MeanRankResult as MeanRankResult
from smat.evaluation.plausibility import average_precision as average_precision
from smat.evaluation.plausibility import ground_truth_metrics as ground_truth_metrics
from smat.evaluation.plausibility import ground_truth_overlap as ground_truth_overlap
from smat.evaluation.plausibility import iou_f1 as iou_f1
from smat.evaluation.plausibility import mean_rank as mean_rank
from smat.evaluation.plausibility import roc_auc as roc_auc
from smat.evaluation.plausibility import token_f1 as token_f1
from smat.evaluation.plausibility import word_level_scores as word_level_scores
from smat.evaluation.roar import FaithfulnessSummary as FaithfulnessSummary
from smat.evaluation.roar import RoarFaithfulness as RoarFaithfulness
from smat.evaluation.roar import mask_input_ids as mask_input_ids
from smat.evaluation.roar import maskable_tokens as maskable_tokens
from smat.evaluation.roar import num_to_mask as num_to_mask
from smat.evaluation.roar import plot_roar as plot_roar
from smat.evaluation.roar import roar_faithfulness as roar_faithfulness
from smat.evaluation.roar import roar_mask as roar_mask
from smat.evaluation.roar import summarize_faithfulness as summarize_faithfulness
from smat.evaluation.roar_synthetic import make_synthetic_problem as make_synthetic_problem
from smat.evaluation.roar_synthetic import roar_curve as roar_curve
from smat.evaluation.statistics import MedianIQR as MedianIQR
from smat.evaluation.statistics import WilcoxonResult as WilcoxonResult
from smat.evaluation.statistics import bootstrap_ci as bootstrap_ci
from smat.evaluation.statistics import format_median_iqr as format_median_iqr
from smat.evaluation.statistics import holm_bonferroni as holm_bonferroni
from smat.evaluation.statistics import iqr_above_baseline as iqr_above_baseline
from smat.evaluation.statistics import mean_with_ci as mean_with_ci
from smat.evaluation.statistics import median_iqr as median_iqr
from smat.evaluation.statistics import t_test_greater as t_test_greater
from smat.evaluation.statistics import wilcoxon_greater as wilcoxon_greater
from smat.evaluation.synthetic import SyntheticTask as SyntheticTask
from smat.evaluation.synthetic import add_label_words as add_label_words

__all__ = [
    "AGREEMENT_METRICS",
    "DEFAULT_BINS",
    "MIN_TOKENS",
    "AgreementMatrix",
    "F1Result",
    "FaithfulnessResult",
    "FaithfulnessSummary",
    "MeanRankResult",
    "MedianIQR",
    "PerInstance",
    "RoarFaithfulness",
    "SeedAggregate",
    "SyntheticTask",
    "Validity",
    "WilcoxonResult",
    "add_label_words",
    "aggregate_over_seeds",
    "agreement_matrix",
    "average_precision",
    "batched_comprehensiveness_sufficiency",
    "bootstrap_ci",
    "comprehensiveness_sufficiency",
    "correlation_validity",
    "format_median_iqr",
    "ground_truth_metrics",
    "ground_truth_overlap",
    "holm_bonferroni",
    "iou_f1",
    "iqr_above_baseline",
    "kendall_tau_b",
    "make_synthetic_problem",
    "mask_input_ids",
    "maskable_tokens",
    "mean_rank",
    "mean_with_ci",
    "median_iqr",
    "t_test_greater",
    "num_to_mask",
    "num_tokens_per_bin",
    "pearson_r",
    "plot_agreement_matrix",
    "plot_roar",
    "roar_curve",
    "roar_faithfulness",
    "roar_mask",
    "roc_auc",
    "spearman_rho",
    "summarize_faithfulness",
    "token_f1",
    "top_k_overlap",
    "wilcoxon_greater",
    "word_level_scores",
]
