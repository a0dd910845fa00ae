"""Load MLQE-PE (Fomicheva et al., 2020) sentence-level QE data with word-level OK/BAD tags.

Folder layout (the v2.0.0 release, one folder per language pair and split):

    direct-assessments/<lp>/<split>/<prefix>.<lp without dash>.df.short.tsv
        TAB-separated with header: index, original, translation, scores, mean, z_scores,
        z_mean, model_scores
    post-editing/<lp>/<split>/<prefix>.{src,mt,tags,source_tags}
        tokenized, line-aligned with the DA rows; `.tags` interleaves gap and word tags
        (gap_0 word_1 gap_1 ... word_n gap_n), `.source_tags` has one tag per source word

with <split>/<prefix> = train/train, dev/dev, test/test20. The regression target is the DA
score: `z_mean` (the per-annotator z-normalized mean, the standard sentence-level QE target
and the default) or `mean` (raw 0-100 mean). A folder converted from the Hugging Face Hub
(:mod:`smat.data.hub_sets`) also holds `hub_notes.json`, which names the pairs and splits
the Hub copy has no labels for.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from smat.data.dataset import RationaleDataset, TextDataset, encode_labels

# split name -> (folder, file prefix)
SPLITS = {"train": ("train", "train"), "dev": ("dev", "dev"), "validation": ("dev", "dev"),
          "test": ("test", "test20"), "test20": ("test", "test20")}
SCORES = ("z_mean", "mean")
TEXTS = ("tokenized", "raw")
_TAGS = {"OK": False, "BAD": True}
# In a folder converted from the Hub: {"language_pairs": [...], "left_out": {pair: {split
# folder: why}}, "untagged": {pair: {split folder: why}}}, so a split the Hub has no labels
# (or no word tags) for is refused as such, not as a missing file.
HUB_NOTES = "hub_notes.json"


def _read_lines(path: Path) -> list[str]:
    if not path.is_file():
        raise FileNotFoundError(f"MLQE-PE file {str(path)!r} does not exist")
    text = path.read_text(encoding="utf-8")
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line.rstrip("\r") for line in lines]


def _tags(line: str, *, path: Path, line_no: int) -> np.ndarray:
    try:
        return np.asarray([_TAGS[t] for t in line.split()], dtype=bool)
    except KeyError as exc:
        raise ValueError(f"{path}:{line_no} has tag {exc.args[0]!r}; expected OK or BAD") from None


def _read_da(path: Path, score: str) -> tuple[list[str], list[str], list[float]]:
    if not path.is_file():
        raise FileNotFoundError(f"MLQE-PE direct-assessment file {str(path)!r} does not exist")
    with path.open(encoding="utf-8", newline="") as f:
        reader = csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE)
        for column in ("original", "translation", score):
            if column not in (reader.fieldnames or ()):
                raise ValueError(f"column {column!r} not found in {path}; available columns: "
                                 f"{reader.fieldnames}")
        rows = list(reader)
    if not rows:
        raise ValueError(f"MLQE-PE file {str(path)!r} is empty (0 rows)")
    return ([r["original"] for r in rows], [r["translation"] for r in rows],
            [r[score] for r in rows])


def _hub_refusal(data_dir: Path, lp: str, split: str, *, missing: str = "left_out"
                 ) -> str | None:
    """Why a folder converted from the Hub lacks `lp`'s `split` (`missing` "left_out") or
    its word tags ("untagged"), in one line naming the GitHub release to use instead; None
    for any other folder or split."""
    notes_path = data_dir / HUB_NOTES
    if not notes_path.is_file():
        return None
    notes = json.loads(notes_path.read_text(encoding="utf-8"))
    pairs = notes.get("language_pairs", [])
    if lp not in pairs:
        why = f"holds {', '.join(pairs)} only"
    else:
        reason = notes.get(missing, {}).get(lp, {}).get(SPLITS[split][0])
        if reason is None:
            return None
        what = "labels/tags" if missing == "left_out" else "word tags"
        why = f"has no {what} for this split ({reason})"
    return (f"MLQE-PE {lp} {split}: the Hugging Face Hub copy in {data_dir} {why}; pass "
            f"--data-dir with the GitHub release (sheffieldnlp/mlqe-pe, docs/datasets.md)")


def _load_pair(data_dir: Path, lp: str, split: str, score: str, word_tags: bool,
               texts: str) -> tuple[list[str], list[str], list, list, list, list[str]]:
    folder, prefix = SPLITS[split]
    da_path = (data_dir / "direct-assessments" / lp / folder
               / f"{prefix}.{lp.replace('-', '')}.df.short.tsv")
    if not da_path.is_file() and (refusal := _hub_refusal(data_dir, lp, split)) is not None:
        raise FileNotFoundError(refusal)
    src, mt, targets = _read_da(da_path, score)
    ids = [f"{lp}/{prefix}/{i}" for i in range(len(src))]
    if texts == "raw":
        return src, mt, [float(t) for t in targets], [], [], ids
    pe = data_dir / "post-editing" / lp / folder
    files = {ext: pe / f"{prefix}.{ext}"
             for ext in ("src", "mt", *(("tags", "source_tags") if word_tags else ()))}
    if word_tags and not files["tags"].is_file() and (refusal := _hub_refusal(
            data_dir, lp, split, missing="untagged")) is not None:
        raise FileNotFoundError(refusal)
    lines = {ext: _read_lines(p) for ext, p in files.items()}
    for ext, content in lines.items():
        if len(content) != len(src):
            raise ValueError(f"{files[ext]} has {len(content)} lines but {da_path} has "
                             f"{len(src)} rows; the files must be line-aligned")
    if not word_tags:
        return lines["src"], lines["mt"], [float(t) for t in targets], [], [], ids
    src_masks, mt_masks = [], []
    for i in range(len(src)):
        mt_words, src_words = lines["mt"][i].split(), lines["src"][i].split()
        tags = _tags(lines["tags"][i], path=files["tags"], line_no=i + 1)
        if tags.shape[0] == 2 * len(mt_words) + 1:
            tags = tags[1::2]  # drop the gap tags: word tags sit at the odd positions
        if tags.shape[0] != len(mt_words):
            raise ValueError(f"{files['tags']}:{i + 1} has {tags.shape[0]} tags for "
                             f"{len(mt_words)} MT words; expected 2*{len(mt_words)}+1 "
                             f"(gaps + words) or {len(mt_words)}")
        src_tags = _tags(lines["source_tags"][i], path=files["source_tags"], line_no=i + 1)
        if src_tags.shape[0] != len(src_words):
            raise ValueError(f"{files['source_tags']}:{i + 1} has {src_tags.shape[0]} tags for "
                             f"{len(src_words)} source words")
        mt_masks.append(tags)
        src_masks.append(src_tags)
    return (lines["src"], lines["mt"], [float(t) for t in targets], src_masks, mt_masks, ids)


def load_mlqe(
    data_dir: str | Path,
    *,
    language_pairs: str | Sequence[str] = "en-de",
    split: str = "train",
    score: str = "z_mean",
    word_tags: bool = True,
    texts: str | None = None,
) -> RationaleDataset:
    """Load MLQE-PE as a text-pair regression data set with word-level BAD tags.

    The texts are the tokenized post-editing `.src` / `.mt` lines (the words the tags refer
    to; `texts="tokenized"`, the default with `word_tags`) or the raw DA `original` /
    `translation` texts (`texts="raw"`, the default without), and the DA score of the same
    line is the target. With `word_tags=True`, `word_masks` marks BAD source words and
    `pair_word_masks` BAD MT words (gap tags are dropped); without, no masks are returned
    (and no tag files read). Several language pairs are concatenated in the given order
    (the SMaT paper trains one model on all pairs).

    Args:
      data_dir: the MLQE-PE root (holding `direct-assessments/` and `post-editing/`).
      language_pairs: one pair such as "en-de" or a sequence of pairs.
      split: "train", "dev" (or "validation") or "test" (or "test20").
      score: regression target column, "z_mean" (default) or "mean".
      word_tags: load the word tags (with the tokenized texts they refer to).
      texts: "tokenized" or "raw" (default: tokenized with word tags, raw without).

    Returns:
      A regression `RationaleDataset` (texts = source, text_pairs = MT), ids
      "<pair>/<prefix>/<line>".

    Raises:
      FileNotFoundError: a file of the layout is missing, or (in a folder converted from the
        Hub) a pair or split the Hub has no labels for.
      ValueError: unknown split / score / texts, word tags with raw texts, a missing column,
        an empty file, non-aligned files, or tags that do not match the words.
    """
    if split not in SPLITS:
        raise ValueError(f"unknown MLQE-PE split {split!r}; expected one of {sorted(SPLITS)}")
    if score not in SCORES:
        raise ValueError(f"unknown MLQE-PE score {score!r}; expected one of {SCORES}")
    texts = texts or ("tokenized" if word_tags else "raw")
    if texts not in TEXTS:
        raise ValueError(f"unknown MLQE-PE texts {texts!r}; expected one of {TEXTS}")
    if word_tags and texts == "raw":
        raise ValueError("MLQE-PE word tags refer to the tokenized texts: texts='raw' "
                         "needs word_tags=False")
    pairs = [language_pairs] if isinstance(language_pairs, str) else list(language_pairs)
    if not pairs:
        raise ValueError("language_pairs is empty")
    src, mt, targets, src_masks, mt_masks, ids = [], [], [], [], [], []
    for lp in pairs:
        parts = _load_pair(Path(data_dir), lp, split, score, word_tags, texts)
        for acc, part in zip((src, mt, targets, src_masks, mt_masks, ids), parts, strict=True):
            acc.extend(part)
    labels, _ = encode_labels(targets, task="regression", column=score)
    data = TextDataset(texts=tuple(src), labels=labels, task="regression", text_pairs=tuple(mt),
                       source=f"MLQE-PE {data_dir} {'+'.join(pairs)} {split} ({score})")
    return RationaleDataset(data=data, word_masks=tuple(src_masks) if word_tags else None,
                            pair_word_masks=tuple(mt_masks) if word_tags else None,
                            ids=tuple(ids))
