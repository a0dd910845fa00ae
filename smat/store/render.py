"""Views for people: HTML pages colouring tokens by saliency, and head-weight heatmaps.

As in Figure 3 of the SMaT paper: each row is one explainer's view of the same example,
each token shaded by its share of the explanation mass (scores passed through the masked
softmax of `smat.explainers.to_distribution`, then divided by the row maximum so the most
salient token is fully coloured). Special tokens ([CLS], [SEP], padding) are left out.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em; max-width: 70em; }
.example { margin-bottom: 1.6em; border-bottom: 1px solid #ddd; padding-bottom: 1em; }
.meta { color: #555; font-size: 0.9em; margin-bottom: 0.4em; }
table { border-collapse: collapse; }
td.name { font-weight: 600; padding-right: 1em; vertical-align: top; white-space: nowrap; }
span.tok { padding: 1px 2px; margin: 1px; border-radius: 3px; display: inline-block; }
"""


def _softmax_rows(scores: np.ndarray, mask: np.ndarray) -> np.ndarray:
    masked = np.where(mask, scores, -np.inf)
    shifted = np.exp(masked - masked.max(axis=-1, keepdims=True))
    shifted = np.where(mask, shifted, 0.0)
    return shifted / shifted.sum(axis=-1, keepdims=True)


def render_html(
    path: str | Path,
    tokens: Sequence[Sequence[str]],
    explanations: Mapping[str, np.ndarray],
    *,
    show: np.ndarray,
    titles: Sequence[str] | None = None,
    heading: str = "smat explanations",
) -> Path:
    """Write one HTML page comparing explainers token by token.

    Args:
      path: the .html file to write.
      tokens: for each of B examples, its T token strings (padding included).
      explanations: explainer name -> (B, T) saliency scores.
      show: (B, T) bool, the tokens to display and normalise over (not special / padding).
      titles: one caption per example (e.g. text, label and prediction), optional.
      heading: page title.

    Returns:
      The written path.

    Raises:
      ValueError: score arrays whose shape is not (B, T), or no explainer given.
    """
    show = np.asarray(show, bool)
    if not explanations:
        raise ValueError("render_html needs at least one explainer's scores")
    for name, scores in explanations.items():
        if np.shape(scores) != show.shape:
            raise ValueError(f"scores of {name!r} have shape {np.shape(scores)}, expected "
                             f"{show.shape} (examples, tokens)")
    if len(tokens) != show.shape[0]:
        raise ValueError(f"{len(tokens)} token lists for {show.shape[0]} examples")
    shares = {name: _softmax_rows(np.asarray(s, np.float64), show)
              for name, s in explanations.items()}
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(heading)}"
             f"</title><style>{_STYLE}</style></head><body><h1>{html.escape(heading)}</h1>"]
    for b, example_tokens in enumerate(tokens):
        parts.append("<div class='example'>")
        if titles is not None:
            parts.append(f"<div class='meta'>{html.escape(titles[b])}</div>")
        parts.append("<table>")
        for name, share in shares.items():
            row = share[b] / max(share[b].max(), 1e-12)
            cells = "".join(
                f"<span class='tok' title='{share[b, t]:.3f}' "
                f"style='background: rgba(220, 50, 32, {row[t]:.3f})'>"
                f"{html.escape(example_tokens[t])}</span>"
                for t in range(len(example_tokens)) if show[b, t])
            parts.append(f"<tr><td class='name'>{html.escape(name)}</td><td>{cells}</td></tr>")
        parts.append("</table></div>")
    parts.append("</body></html>")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(parts), encoding="utf-8")
    return path


def plot_head_weights(weights: np.ndarray, path: str | Path, *,
                      title: str = "learned head coefficients") -> Path:
    """Heatmap of (layers, heads) explainer head weights lambda (paper Figure 5).

    Args:
      weights: (L, H) normalized head coefficients (e.g. ``LoadedExplainer.head_weights()``).
      path: the image file to write (PNG).
      title: figure title.

    Raises:
      ValueError: `weights` is not 2-D.
    """
    from matplotlib.figure import Figure

    weights = np.asarray(weights)
    if weights.ndim != 2:
        raise ValueError(f"head weights must be (layers, heads), got shape {weights.shape}")
    figure = Figure(figsize=(1.0 + 0.45 * weights.shape[1], 1.0 + 0.45 * weights.shape[0]))
    axes = figure.subplots()
    image = axes.imshow(weights, cmap="Reds", vmin=0.0, aspect="auto")
    axes.set_xlabel("head")
    axes.set_ylabel("layer")
    axes.set_xticks(range(weights.shape[1]))
    axes.set_yticks(range(weights.shape[0]))
    axes.set_title(title)
    figure.colorbar(image, ax=axes)
    figure.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=120)
    return path
