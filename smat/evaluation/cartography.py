"""Data cartography: per-instance training dynamics and the easy / ambiguous / hard groups.

Swayamdipta et al. (2020), as used by Jukić et al. (2022, §5) to ask on which instances
saliency methods agree. From the gold-class probability p_e and the correctness of every
training instance at the end of every epoch e = 1..E:

- confidence: the mean of p_e over epochs;
- variability: their standard deviation (population, as in Swayamdipta et al.);
- closeness: c = confidence * (1 - confidence) (Chang et al., 2017), high near the boundary;
- correctness: the number of epochs at whose end the instance was classified correctly.

Groups from correctness alone (Jukić et al., footnote 2, for E = 5): *easy* when correct at
every epoch, *hard* when never correct, *ambiguous* when correct 2 or 3 times out of 5.
For other epoch counts the ambiguous band is generalized as the counts c with
``|c - E/2| <= max(E/10, 1/2)`` (E = 5 gives {2, 3}; E = 4 gives {2}; E = 10 gives {4, 5, 6});
every other instance is *other*. At least 2 epochs are needed to tell the groups apart.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

import numpy as np
from numpy.typing import ArrayLike

GROUPS = ("easy", "ambiguous", "hard", "other")


class Cartography(NamedTuple):
    """Training-dynamics statistics of N instances over E epochs (all shape (N,))."""

    confidence: np.ndarray
    variability: np.ndarray
    closeness: np.ndarray
    correctness: np.ndarray  # int: epochs at whose end the instance was correct
    group: np.ndarray  # str: one of GROUPS
    num_epochs: int


def ambiguous_counts(num_epochs: int) -> list[int]:
    """The correctness counts of the ambiguous band for `num_epochs` epochs (module doc)."""
    if num_epochs < 2:
        raise ValueError(f"cartography groups need at least 2 epochs of training dynamics, "
                         f"got {num_epochs}")
    half_width = max(num_epochs / 10, 0.5)
    return [c for c in range(1, num_epochs)
            if abs(c - num_epochs / 2) <= half_width + 1e-9]


def cartography(gold_probability: ArrayLike, correct: ArrayLike) -> Cartography:
    """Statistics and groups from per-epoch dynamics.

    Args:
      gold_probability: (E, N) probability of the gold class at the end of each epoch.
      correct: (E, N) whether the prediction was the gold class then.

    Raises:
      ValueError: shapes that differ or are not (E, N), probabilities outside [0, 1], or
        fewer than 2 epochs.
    """
    p = np.asarray(gold_probability, np.float64)
    ok = np.asarray(correct).astype(bool)
    if p.ndim != 2 or p.shape != ok.shape:
        raise ValueError(f"gold_probability and correct must both be (epochs, instances); got "
                         f"{p.shape} and {ok.shape}")
    if p.size and (p.min() < 0 or p.max() > 1):
        raise ValueError(f"gold_probability must lie in [0, 1]; got values in "
                         f"[{p.min():.4g}, {p.max():.4g}]")
    num_epochs = p.shape[0]
    band = ambiguous_counts(num_epochs)
    confidence = p.mean(axis=0)
    correctness = ok.sum(axis=0)
    group = np.full(p.shape[1], "other", dtype=object)
    group[np.isin(correctness, band)] = "ambiguous"
    group[correctness == num_epochs] = "easy"
    group[correctness == 0] = "hard"
    return Cartography(confidence=confidence, variability=p.std(axis=0),
                       closeness=confidence * (1 - confidence), correctness=correctness,
                       group=group.astype(str), num_epochs=num_epochs)


def group_counts(groups: Sequence[str] | np.ndarray) -> dict[str, int]:
    """How many instances each group holds (every group of :data:`GROUPS`, zeros kept)."""
    groups = np.asarray(groups)
    return {name: int(np.sum(groups == name)) for name in GROUPS}


def plot_data_map(stats: Cartography, path: str | Path, *, title: str = "data map"):
    """Variability (x) against confidence (y), one point per instance coloured by its
    correctness count (Swayamdipta et al.'s data map; Jukić et al. Figure 2a). Saved to
    `path`; returns the ``matplotlib.figure.Figure`` (no pyplot state)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(5, 4.5))
    ax = fig.add_subplot()
    points = ax.scatter(stats.variability, stats.confidence, c=stats.correctness, s=6,
                        cmap="viridis", vmin=0, vmax=stats.num_epochs, alpha=0.7)
    fig.colorbar(points, ax=ax, label=f"correct (of {stats.num_epochs} epochs)")
    ax.set_xlabel("variability")
    ax.set_ylabel("confidence")
    ax.set_title(title)
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    return fig
