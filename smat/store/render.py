"""Views for people: HTML pages colouring tokens by saliency or laying patch saliency over
images, PNG grids of patch saliency over images, and head-weight heatmaps.

As in Figure 3 of the SMaT paper, each row of the page is one explainer's view of the same
example. Word pieces are merged into words (their scores summed, as the word-level metrics
do; ``word_pieces=True`` shows the pieces). How a row is coloured follows what its scores
are (:data:`KINDS`): an attribution (signed evidence) on a diverging scale around zero, red
for and blue against; a magnitude on a sequential scale from zero; attention as the
distribution it stands for, the softmax of the pooled logits over the words shown (Eq. 11),
on the same sequential scale, so that where the mass sits is what a reader sees. The shade is
the value over the row's largest absolute value, so the strongest word of each row is fully
coloured and zero is white; the legend says which scale each explainer is drawn on, and
hovering over a word shows the value drawn. Special tokens ([CLS], [SEP], padding) are left
out.
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
_SEQUENTIAL = {"magnitude": (204, 102, 0), "attention": (118, 42, 131)}  # orange, purple
_SEQUENTIAL_MAPS = {"magnitude": "Oranges", "attention": "Purples"}  # the PNG's

KINDS = {
    "attribution": "signed attribution, diverging around zero: red for, blue against the "
                   "prediction",
    "magnitude": "importance, sequential from zero (orange)",
    "attention": "attention distribution: each word's (or patch's) share of the attention "
                 "mass, the softmax of the pooled attention logits over the row, sequential "
                 "from zero (purple)",
}
"""The kinds of scores a page draws and how (``smat.registry.SCORE_KINDS``)."""


def inferred_kind(scores: np.ndarray) -> str:
    """The kind of scores whose kind nobody declared (a file computed elsewhere): an
    attribution when any is negative, else a magnitude."""
    return "attribution" if (np.asarray(scores) < 0).any() else "magnitude"


def drawn_values(values: np.ndarray, kind: str) -> np.ndarray:
    """What a row of `kind` is drawn as: attention logits become their softmax over the
    row (the distribution of Eq. 11), every other kind is drawn as it is."""
    values = np.asarray(values, np.float64)
    if kind != "attention" or not values.size:
        return values
    weights = np.exp(values - values.max())
    return weights / weights.sum()


def _shaded(values: np.ndarray, kind: str, opacity: float = 1.0) -> list[str]:
    """Each value's hover title and background, shaded by the value over the row's
    largest absolute value (`opacity` at the largest): red above zero and blue below for
    an attribution, orange from zero for a magnitude, purple from zero for an attention
    distribution."""
    scale = max(float(np.abs(values).max(initial=0.0)), 1e-12)

    def colour(value: float) -> tuple[int, int, int]:
        if kind != "attribution":
            return _SEQUENTIAL[kind]
        return _POSITIVE if value >= 0 else _NEGATIVE

    return [f"title='{value:.4g}' style='background: rgba("
            f"{', '.join(map(str, colour(value)))}, "
            f"{opacity * abs(value) / scale:.3f})'" for value in values]


def _kinds_legend(kinds: Mapping[str, str]) -> str:
    """One line per kind of scores on the page, naming its explainers and its scale."""
    lines = []
    for kind, description in KINDS.items():
        names = [html.escape(name) for name, k in kinds.items() if k == kind]
        if not names:
            continue
        swatches = (_swatch(_POSITIVE, 0.8, "for") + " " + _swatch(_NEGATIVE, 0.8, "against")
                    if kind == "attribution" else _swatch(_SEQUENTIAL[kind], 0.8, "high"))
        lines.append(f"<div>{swatches} <b>{', '.join(names)}</b>: {description}.</div>")
    return "".join(lines)


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
    kinds: Mapping[str, str] | None = None,
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
      kinds: explainer name -> its kind of scores (:data:`KINDS`); an explainer left out
        is inferred from its scores (:func:`inferred_kind`).

    Returns:
      The written path.

    Raises:
      ValueError: score arrays whose shape is not (B, T), no explainer given, or an
        unknown kind.
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
    kinds = _resolved_kinds(explanations, kinds, lambda scores: np.asarray(scores)[show])
    legend = ("Each row is one explainer; a word's shade is its value divided by the row's "
              "largest absolute value, white is zero (hover for the value drawn). "
              + ("Word pieces are shown as the tokenizer cut them."
                 if word_pieces else "Word pieces are merged into words, their values summed.")
              + _kinds_legend(kinds))
    parts = []
    for b, example_tokens in enumerate(tokens):
        parts.append("<div class='example'>")
        if titles is not None:
            parts.append(f"<div class='meta'>{html.escape(titles[b])}</div>")
        parts.append("<table>")
        for name, scores in explanations.items():
            row = np.array(scores[b], np.float64)  # a copy: drawn values replace scores
            row[show[b]] = drawn_values(row[show[b]], kinds[name])
            if word_pieces:
                words = [example_tokens[t] for t in range(len(example_tokens)) if show[b, t]]
                values = row[show[b]]
            else:
                words, values = merge_word_pieces(example_tokens, row, show[b])
            cells = "".join(f"<span class='tok' {style}>{html.escape(word)}</span>"
                            for word, style in zip(words, _shaded(values, kinds[name]),
                                                   strict=True))
            parts.append(f"<tr><td class='name'>{html.escape(name)}</td><td>{cells}</td></tr>")
        parts.append("</table></div>")
    return _write_page(path, heading, legend, parts)


def _resolved_kinds(explanations: Mapping[str, np.ndarray], kinds: Mapping[str, str] | None,
                    shown) -> dict[str, str]:
    """Every explainer's kind: the declared one, else inferred from its `shown` scores.

    Raises:
      ValueError: a declared kind that is not one of :data:`KINDS`.
    """
    kinds = dict(kinds or {})
    unknown = {name: kind for name, kind in kinds.items() if kind not in KINDS}
    if unknown:
        raise ValueError(f"unknown kinds of scores {unknown}; choose from {list(KINDS)}")
    return {name: kinds.get(name) or inferred_kind(shown(scores))
            for name, scores in explanations.items()}


def _write_page(path: str | Path, heading: str, legend: str, body: Sequence[str]) -> Path:
    """One self-contained HTML page: heading, legend, then the examples' markup."""
    page = (f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(heading)}"
            f"</title><style>{_STYLE}</style></head><body><h1>{html.escape(heading)}</h1>"
            f"<div class='legend'>{legend}</div>{''.join(body)}</body></html>")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(page, encoding="utf-8")
    return path


def _png_data_uri(image: np.ndarray, *, alpha: bool = False) -> str:
    """An (H, W, 3) image in [0, 1] (with `alpha`, (H, W, 4)) as a base64 PNG ``data:`` URI
    (the page stays one file)."""
    from PIL import Image

    buffer = io.BytesIO()
    Image.fromarray((np.clip(image, 0, 1) * 255).round().astype(np.uint8),
                    mode="RGBA" if alpha else "RGB").save(buffer, "PNG")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def image_outline(image: np.ndarray, *, upsample: int = 4) -> np.ndarray:
    """An (H * upsample, W * upsample, 4) RGBA layer: black where the image's luminance
    crosses halfway between its darkest and brightest, clear elsewhere, so the shape of what
    is shown reads over any colour."""
    luminance = np.kron(np.asarray(image, np.float64).mean(-1), np.ones((upsample, upsample)))
    inside = luminance > (luminance.min() + luminance.max()) / 2
    edge = np.zeros_like(inside)
    edge[:-1] |= inside[:-1] != inside[1:]
    edge[:, :-1] |= inside[:, :-1] != inside[:, 1:]
    layer = np.zeros((*inside.shape, 4))
    layer[..., 3] = edge
    return layer


def render_image_html(path: str | Path, images: np.ndarray,
                      explanations: Mapping[str, np.ndarray], *,
                      titles: Sequence[str] | None = None,
                      heading: str = "smat explanations", size_px: int = 160,
                      kinds: Mapping[str, str] | None = None) -> Path:
    """Write one HTML page of image explanations: per image, the image and then each
    explainer's patch saliency laid over it, one translucent cell per patch (row-major, as
    a ViT numbers them) shaded as the text page shades words (attention as its distribution
    over the patches); hover a patch for the value drawn.

    Args:
      path: the .html file to write.
      images: (N, H, W, 3) in [0, 1].
      explanations: explainer name -> (N, patches) scores of a square patch grid.
      titles: one caption per image, optional.
      heading: page title.
      size_px: the width and height each image is shown at.
      kinds: explainer name -> its kind of scores (:data:`KINDS`; inferred when left out).

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
    kinds = _resolved_kinds(explanations, kinds, lambda scores: scores)
    legend = ("Each image is shown, then each explainer's patch values with the image's "
              "outline drawn over them; a patch's shade is its value divided by the image's "
              "largest absolute value, clear is zero (hover for the value drawn)."
              + _kinds_legend(kinds))
    box = (f"position: relative; display: inline-block; width: {size_px}px; "
           f"height: {size_px}px; margin: 0 0.8em 2em 0")
    parts = []
    for b, image in enumerate(images):
        uri = _png_data_uri(image)
        style = "width: 100%; height: 100%; image-rendering: pixelated"
        picture = f"<img src='{uri}' alt='image {b}' style='{style}'>"
        # over the cells, the image's outline, as the PNG grid draws it: the shades are the
        # values alone, and the image stays readable under any of them
        outline_style = "position: absolute; inset: 0; width: 100%; height: 100%; " \
                        "image-rendering: pixelated"
        outline = (f"<img src='{_png_data_uri(image_outline(image), alpha=True)}' "
                   f"alt='outline of image {b}' style='{outline_style}'>")
        cells = [f"<figure style='{box}'>{picture}<figcaption>input</figcaption></figure>"]
        for name, scores in explanations.items():
            row = drawn_values(scores[b], kinds[name])
            grid = int(round(np.sqrt(row.size)))
            patches = "".join(f"<div class='patch' {style}></div>"
                              for style in _shaded(row, kinds[name], opacity=0.75))
            overlay = (f"<div style='position: absolute; inset: 0; display: grid; "
                       f"grid-template-columns: repeat({grid}, 1fr)'>{patches}</div>")
            cells.append(f"<figure style='{box}'>{overlay}{outline}"
                         f"<figcaption>{html.escape(name)}</figcaption></figure>")
        title = f"<div class='meta'>{html.escape(titles[b])}</div>" if titles else ""
        parts.append(f"<div class='example'>{title}{''.join(cells)}</div>")
    return _write_page(path, heading, legend, parts)


def head_weights_scale(weights: np.ndarray) -> tuple[float, float]:
    """The colour scale's ends for head coefficients: symmetric around uniform u = 1/n,
    u plus or minus the larger of u and the largest distance from u."""
    weights = np.asarray(weights, np.float64)
    uniform = 1.0 / weights.size
    half_width = max(float(np.abs(weights - uniform).max()), uniform)
    return uniform - half_width, uniform + half_width


def plot_head_weights(weights: np.ndarray, path: str | Path, *,
                      title: str = "learned head coefficients") -> Path:
    """Heatmap of (layers, heads) explainer head weights lambda (paper Figure 5).

    The colours are centred on the uniform weight u = 1/(L*H) (white; the static all-layers
    explainer), red above and blue below, on a scale symmetric around it that spans at
    least u - u = 0 to 2u: coefficients that barely moved from uniform stay pale (noise is
    not drawn as structure), a sparse solution's large ones widen the scale; the title
    gives the largest distance from uniform and the colour bar marks uniform.

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
    spread = float(np.abs(weights - uniform).max())
    low, high = head_weights_scale(weights)
    norm = TwoSlopeNorm(vcenter=uniform, vmin=low, vmax=high)
    figure = Figure(figsize=(1.6 + 0.45 * weights.shape[1], 1.2 + 0.45 * weights.shape[0]))
    axes = figure.subplots()
    image = axes.imshow(weights, cmap="RdBu_r", norm=norm, aspect="auto")
    axes.set_xlabel("head")
    axes.set_ylabel("layer")
    axes.set_xticks(range(weights.shape[1]))
    axes.set_yticks(range(weights.shape[0]))
    axes.set_title(f"{title}\nlargest |lambda - 1/{weights.size}| = {spread:.3g} "
                   f"({spread / uniform:.2g} x uniform)", fontsize="medium")
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


def _overlay(heat: np.ndarray, kind: str) -> np.ndarray:
    """An (S, S, 4) RGBA layer of a map normalised to [-1, 1] (:func:`patch_heatmap`):
    the colour of the value on the kind's scale, opacity growing with its size, so the
    image shows through where the value is near zero."""
    from matplotlib import colormaps

    if kind == "attribution":
        rgba = colormaps["RdBu_r"]((heat + 1) / 2)
    else:
        rgba = colormaps[_SEQUENTIAL_MAPS[kind]](0.35 + 0.65 * np.clip(heat, 0, 1))
    rgba[..., 3] = 0.85 * np.abs(heat)
    return rgba


def plot_patch_saliency(images: np.ndarray, scores: Mapping[str, np.ndarray],
                        path: str | Path, *, titles: Sequence[str] | None = None,
                        kinds: Mapping[str, str] | None = None) -> Path:
    """A PNG grid of image explanations: one row per image (the image, then each
    explainer's patch values with the image's outline drawn over them), coloured on the
    scale of the explainer's kind as the HTML page colours tokens (attention as its
    distribution over the patches), opaque where the value is large and clear where it is
    zero; a colour bar under each explainer's column says the scale.

    Args:
      images: ``(N, H, W, 3)`` in [0, 1], square.
      scores: explainer name -> ``(N, patches)`` patch scores (row-major patch order).
      path: the PNG file to write.
      titles: one line per image (e.g. its label and prediction).
      kinds: explainer name -> its kind of scores (:data:`KINDS`; inferred when left out).

    Raises:
      ValueError: images that are not (N, S, S, 3), or scores of another image count.
    """
    from matplotlib import colormaps
    from matplotlib.cm import ScalarMappable
    from matplotlib.colors import ListedColormap, Normalize
    from matplotlib.figure import Figure

    images = np.asarray(images, np.float64)
    if images.ndim != 4 or images.shape[-1] != 3 or images.shape[1] != images.shape[2]:
        raise ValueError(f"images must be (N, S, S, 3), got {images.shape}")
    for name, value in scores.items():
        if len(value) != len(images):
            raise ValueError(f"{name}: {len(value)} rows of scores for {len(images)} images")
    kinds = _resolved_kinds(scores, kinds, lambda value: value)
    columns = 1 + len(scores)
    figure = Figure(figsize=(2.0 * columns, 2.1 * len(images) + 0.9), layout="constrained")
    grid = figure.add_gridspec(len(images) + 1, columns,
                               height_ratios=[1.0] * len(images) + [0.12])
    for row, image in enumerate(images):
        axes = figure.add_subplot(grid[row, 0])
        axes.imshow(image)
        axes.set_title(titles[row] if titles else "input", fontsize="small")
        axes.set_axis_off()
        for column, (name, value) in enumerate(scores.items(), start=1):
            axes = figure.add_subplot(grid[row, column])
            heat = patch_heatmap(drawn_values(value[row], kinds[name]),
                                 image_size=images.shape[1])
            # the values on white, the image as its outline on top: its brightness is not
            # mixed into the colours, and it stays readable under any value
            axes.imshow(_overlay(heat, kinds[name]))
            luminance = image.mean(-1)
            axes.contour(luminance, levels=[(luminance.min() + luminance.max()) / 2],
                         colors="black", linewidths=0.8)
            axes.set_title(short_label(name), fontsize="small")
            axes.set_axis_off()
    for column, name in enumerate(scores, start=1):
        attribution = kinds[name] == "attribution"
        colours = (colormaps["RdBu_r"] if attribution
                   else ListedColormap(colormaps[_SEQUENTIAL_MAPS[kinds[name]]](
                       np.linspace(0.35, 1.0, 256))))
        bar = figure.colorbar(ScalarMappable(Normalize(-1 if attribution else 0, 1), colours),
                              cax=figure.add_subplot(grid[-1, column]),
                              orientation="horizontal")
        bar.set_label({"attribution": "attribution / max |.|",
                       "magnitude": "importance / max",
                       "attention": "attention share / max"}[kinds[name]], fontsize="x-small")
        bar.ax.tick_params(labelsize="x-small")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=100)
    return path
