"""Views for people: HTML pages colouring tokens by saliency or laying patch saliency over
images, PNG grids of patch saliency over images, and head-weight heatmaps.

As in Figure 3 of the SMaT paper, each row of the page is one explainer's view of the same
example. Word pieces are merged into words (their scores summed, as the word-level metrics
do; ``word_pieces=True`` shows the pieces). An explainer whose scores take both signs is
coloured on a diverging scale around zero (red above, blue below), one with non-negative
scores on a sequential red scale; either way the shade is the score divided by the row's
largest absolute score, so the strongest word of each row is fully coloured and zero is
white. Hovering over a word shows its raw score. Special tokens ([CLS], [SEP], padding) are
left out.
"""

from __future__ import annotations

import base64
import html
import io
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em; max-width: 70em; }
.example { margin-bottom: 1.6em; border-bottom: 1px solid #ddd; padding-bottom: 1em; }
.meta { color: #555; font-size: 0.9em; margin-bottom: 0.4em; }
.legend { color: #333; font-size: 0.9em; margin-bottom: 1.5em; }
table { border-collapse: collapse; }
td.name { font-weight: 600; padding-right: 1em; vertical-align: top; white-space: nowrap; }
span.tok { padding: 1px 2px; margin: 1px; border-radius: 3px; display: inline-block; }
figure { text-align: center; font-size: 0.85em; vertical-align: top; margin-bottom: 2em; }
figcaption { position: absolute; top: 100%; width: 100%; }
"""
_POSITIVE, _NEGATIVE = (220, 50, 32), (40, 90, 200)


def _shaded(values: np.ndarray, opacity: float = 1.0) -> list[str]:
    """Each score's hover title and background, shaded by the score over the row's
    largest absolute score (red above zero, blue below; `opacity` at the largest)."""
    scale = max(float(np.abs(values).max(initial=0.0)), 1e-12)
    return [f"title='{value:.4g}' style='background: rgba("
            f"{', '.join(map(str, _POSITIVE if value >= 0 else _NEGATIVE))}, "
            f"{opacity * abs(value) / scale:.3f})'" for value in values]


def _swatch(rgb: tuple[int, int, int], alpha: float, text: str) -> str:
    return (f"<span class='tok' style='background: rgba({rgb[0]}, {rgb[1]}, {rgb[2]}, "
            f"{alpha:.2f})'>{html.escape(text)}</span>")


def merge_word_pieces(tokens: Sequence[str], scores: np.ndarray,
                      show: np.ndarray) -> tuple[list[str], np.ndarray]:
    """The shown tokens joined into words, each word's score the sum of its pieces'.

    A piece continues the word before it when it starts with ``##`` (WordPiece) or, in a
    vocabulary that marks word starts (``▁`` SentencePiece, ``Ġ`` byte-level BPE), when it
    does not carry that mark.

    Args:
      tokens: the T token strings of one example.
      scores: (T,) scores.
      show: (T,) bool, the tokens to keep.

    Returns:
      ``(words, word_scores)``.
    """
    kept = [(tokens[t], float(scores[t])) for t in range(len(tokens)) if show[t]]
    marks_starts = any(token.startswith(("\u2581", "\u0120")) for token, _ in kept)
    words: list[str] = []
    sums: list[float] = []
    for token, score in kept:
        if token.startswith("##") and words:
            words[-1] += token[2:]
            sums[-1] += score
        elif marks_starts and not token.startswith(("\u2581", "\u0120")) and words:
            words[-1] += token
            sums[-1] += score
        else:
            words.append(token.lstrip("\u2581\u0120"))
            sums.append(score)
    return words, np.asarray(sums)


def render_html(
    path: str | Path,
    tokens: Sequence[Sequence[str]],
    explanations: Mapping[str, np.ndarray],
    *,
    show: np.ndarray,
    titles: Sequence[str] | None = None,
    heading: str = "smat explanations",
    word_pieces: bool = False,
) -> Path:
    """Write one HTML page comparing explainers word by word.

    Args:
      path: the .html file to write.
      tokens: for each of B examples, its T token strings (padding included).
      explanations: explainer name -> (B, T) saliency scores.
      show: (B, T) bool, the tokens to display (not special / padding).
      titles: one caption per example (e.g. text, label and prediction), optional.
      heading: page title.
      word_pieces: show the tokenizer's pieces instead of merging them into words.

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
    signed = {name: bool((np.asarray(scores)[show] < 0).any())
              for name, scores in explanations.items()}
    legend = ("Each row is one explainer; a word's shade is its score divided by the row's "
              "largest absolute score (hover for the raw score). " + _swatch(_POSITIVE, 0.8,
              "red") + " positive, " + _swatch(_NEGATIVE, 0.8, "blue") + " negative "
              "(explainers with signed scores: "
              + (", ".join(html.escape(n) for n, s in signed.items() if s) or "none")
              + "); white is zero. " + ("Word pieces are shown as the tokenizer cut them."
                                        if word_pieces else
                                        "Word pieces are merged into words, scores summed."))
    parts = []
    for b, example_tokens in enumerate(tokens):
        parts.append("<div class='example'>")
        if titles is not None:
            parts.append(f"<div class='meta'>{html.escape(titles[b])}</div>")
        parts.append("<table>")
        for name, scores in explanations.items():
            row = np.asarray(scores[b], np.float64)
            if word_pieces:
                words = [example_tokens[t] for t in range(len(example_tokens)) if show[b, t]]
                values = row[show[b]]
            else:
                words, values = merge_word_pieces(example_tokens, row, show[b])
            cells = "".join(f"<span class='tok' {style}>{html.escape(word)}</span>"
                            for word, style in zip(words, _shaded(values), strict=True))
            parts.append(f"<tr><td class='name'>{html.escape(name)}</td><td>{cells}</td></tr>")
        parts.append("</table></div>")
    return _write_page(path, heading, legend, parts)


def _write_page(path: str | Path, heading: str, legend: str, body: Sequence[str]) -> Path:
    """One self-contained HTML page: heading, legend, then the examples' markup."""
    page = (f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(heading)}"
            f"</title><style>{_STYLE}</style></head><body><h1>{html.escape(heading)}</h1>"
            f"<div class='legend'>{legend}</div>{''.join(body)}</body></html>")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(page, encoding="utf-8")
    return path


def _png_data_uri(image: np.ndarray) -> str:
    """An (H, W, 3) image in [0, 1] as a base64 PNG ``data:`` URI (the page stays one file)."""
    from PIL import Image

    buffer = io.BytesIO()
    Image.fromarray((np.clip(image, 0, 1) * 255).round().astype(np.uint8)).save(buffer, "PNG")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def render_image_html(path: str | Path, images: np.ndarray,
                      explanations: Mapping[str, np.ndarray], *,
                      titles: Sequence[str] | None = None,
                      heading: str = "smat explanations", size_px: int = 160) -> Path:
    """Write one HTML page of image explanations: per image, the image and then each
    explainer's patch saliency laid over it, one translucent cell per patch (row-major, as
    a ViT numbers them) shaded as the text page shades words; hover a patch for its score.

    Args:
      path: the .html file to write.
      images: (N, H, W, 3) in [0, 1].
      explanations: explainer name -> (N, patches) scores of a square patch grid.
      titles: one caption per image, optional.
      heading: page title.
      size_px: the width and height each image is shown at.

    Raises:
      ValueError: no explainer, images that are not (N, H, W, 3), or scores that are not
        (N, patches) of a square grid.
    """
    images = np.asarray(images, np.float64)
    if not explanations:
        raise ValueError("render_image_html needs at least one explainer's scores")
    if images.ndim != 4 or images.shape[-1] != 3:
        raise ValueError(f"images must be (N, H, W, 3), got {images.shape}")
    for name, scores in explanations.items():
        shape = np.shape(scores)
        grid = int(round(np.sqrt(shape[-1]))) if len(shape) == 2 else 0
        if len(shape) != 2 or shape[0] != len(images) or grid * grid != shape[1]:
            raise ValueError(f"scores of {name!r} have shape {shape}, expected "
                             f"({len(images)}, patches) of a square patch grid")
    legend = ("Each image is shown, then each explainer's patch scores over it; a patch's "
              "shade is its score divided by the image's largest absolute score (hover for "
              "the raw score): " + _swatch(_POSITIVE, 0.8, "red") + " positive, "
              + _swatch(_NEGATIVE, 0.8, "blue") + " negative, clear is zero.")
    box = (f"position: relative; display: inline-block; width: {size_px}px; "
           f"height: {size_px}px; margin: 0 0.8em 2em 0")
    parts = []
    for b, image in enumerate(images):
        uri = _png_data_uri(image)
        style = "width: 100%; height: 100%; image-rendering: pixelated"
        picture = f"<img src='{uri}' alt='image {b}' style='{style}'>"
        # under the overlays in grey, as the PNG grid shows them, so the shades read clearly
        grey = f"<img src='{uri}' alt='image {b}' style='{style}; filter: grayscale(1)'>"
        cells = [f"<figure style='{box}'>{picture}<figcaption>input</figcaption></figure>"]
        for name, scores in explanations.items():
            row = np.asarray(scores[b], np.float64)
            grid = int(round(np.sqrt(row.size)))
            patches = "".join(f"<div class='patch' {style}></div>"
                              for style in _shaded(row, opacity=0.75))
            overlay = (f"<div style='position: absolute; inset: 0; display: grid; "
                       f"grid-template-columns: repeat({grid}, 1fr)'>{patches}</div>")
            cells.append(f"<figure style='{box}'>{grey}{overlay}"
                         f"<figcaption>{html.escape(name)}</figcaption></figure>")
        title = f"<div class='meta'>{html.escape(titles[b])}</div>" if titles else ""
        parts.append(f"<div class='example'>{title}{''.join(cells)}</div>")
    return _write_page(path, heading, legend, parts)


def plot_head_weights(weights: np.ndarray, path: str | Path, *,
                      title: str = "learned head coefficients") -> Path:
    """Heatmap of (layers, heads) explainer head weights lambda (paper Figure 5).

    The colours are centred on the uniform weight 1/(L*H) (white; the static all-layers
    explainer), red above and blue below, and span the data's own range, so coefficients
    that moved little from uniform are still told apart; the colour bar marks uniform.

    Args:
      weights: (L, H) normalized head coefficients (e.g. ``LoadedExplainer.head_weights()``).
      path: the image file to write (PNG).
      title: figure title.

    Raises:
      ValueError: `weights` is not 2-D.
    """
    from matplotlib.colors import TwoSlopeNorm
    from matplotlib.figure import Figure

    weights = np.asarray(weights, np.float64)
    if weights.ndim != 2:
        raise ValueError(f"head weights must be (layers, heads), got shape {weights.shape}")
    uniform = 1.0 / weights.size
    spread = max(float(np.abs(weights - uniform).max()), 1e-6 * uniform)
    norm = TwoSlopeNorm(vcenter=uniform, vmin=min(float(weights.min()), uniform - 1e-9),
                        vmax=max(float(weights.max()), uniform + 1e-9))
    figure = Figure(figsize=(1.6 + 0.45 * weights.shape[1], 1.2 + 0.45 * weights.shape[0]))
    axes = figure.subplots()
    image = axes.imshow(weights, cmap="RdBu_r", norm=norm, aspect="auto")
    axes.set_xlabel("head")
    axes.set_ylabel("layer")
    axes.set_xticks(range(weights.shape[1]))
    axes.set_yticks(range(weights.shape[0]))
    axes.set_title(f"{title}\n(max |lambda - 1/{weights.size}| = {spread:.3g})",
                   fontsize="medium")
    bar = figure.colorbar(image, ax=axes)
    bar.ax.axhline(uniform, color="black", linewidth=1.5)
    bar.set_label(f"lambda (black line: uniform 1/{weights.size})")
    figure.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=120)
    return path


def patch_heatmap(scores: np.ndarray, *, image_size: int) -> np.ndarray:
    """One explainer's patch scores ``(patches,)`` of a square grid as an ``(image_size,
    image_size)`` map: each patch's score fills its block (patches in row-major order, as
    a ViT numbers them), divided by the largest absolute score (zero stays zero).

    Raises:
      ValueError: a patch count that is not a square, or an image size the grid does not
        divide.
    """
    scores = np.asarray(scores, np.float64)
    grid = int(round(np.sqrt(scores.size)))
    if grid * grid != scores.size or scores.ndim != 1:
        raise ValueError(f"patch scores must be one square grid's, got shape {scores.shape}")
    if image_size % grid:
        raise ValueError(f"image size {image_size} is not a multiple of the {grid} x {grid} "
                         "patch grid")
    block = image_size // grid
    scale = np.abs(scores).max()
    normalised = scores / scale if scale > 0 else scores
    return np.kron(normalised.reshape(grid, grid), np.ones((block, block)))


def short_label(name: str, width: int = 24) -> str:
    """`name` cut to `width` characters from its end (a learned explainer's folder path is
    named by its last parts), so a figure's column titles do not run into each other."""
    return name if len(name) <= width else "..." + name[-(width - 3):]


def plot_patch_saliency(images: np.ndarray, scores: Mapping[str, np.ndarray],
                        path: str | Path, *, titles: Sequence[str] | None = None) -> Path:
    """A PNG grid of image explanations: one row per image (the image, then each
    explainer's patch saliency over it), coloured as the HTML page colours tokens (red
    above zero, blue below, the shade the score over the row's largest absolute score).

    Args:
      images: ``(N, H, W, 3)`` in [0, 1], square.
      scores: explainer name -> ``(N, patches)`` patch scores (row-major patch order).
      path: the PNG file to write.
      titles: one line per image (e.g. its label and prediction).

    Raises:
      ValueError: images that are not (N, S, S, 3), or scores of another image count.
    """
    from matplotlib.figure import Figure

    images = np.asarray(images, np.float64)
    if images.ndim != 4 or images.shape[-1] != 3 or images.shape[1] != images.shape[2]:
        raise ValueError(f"images must be (N, S, S, 3), got {images.shape}")
    for name, value in scores.items():
        if len(value) != len(images):
            raise ValueError(f"{name}: {len(value)} rows of scores for {len(images)} images")
    columns = 1 + len(scores)
    figure = Figure(figsize=(2.0 * columns, 2.1 * len(images)))
    axes = np.asarray(figure.subplots(len(images), columns, squeeze=False))
    for row, image in enumerate(images):
        axes[row, 0].imshow(image)
        axes[row, 0].set_title(titles[row] if titles else "input", fontsize="small")
        for column, (name, value) in enumerate(scores.items(), start=1):
            heat = patch_heatmap(value[row], image_size=images.shape[1])
            axes[row, column].imshow(image.mean(-1), cmap="gray", vmin=0, vmax=1)
            axes[row, column].imshow(heat, cmap="RdBu_r", vmin=-1, vmax=1, alpha=0.6)
            axes[row, column].set_title(short_label(name), fontsize="small")
        for cell in axes[row]:
            cell.set_xticks([])
            cell.set_yticks([])
    figure.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=100)
    return path
