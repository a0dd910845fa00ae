"""Load an ERASER data set (DeYoung et al., ACL 2020): `{split}.jsonl` + `docs/` folder.

Format: each line of `{split}.jsonl` is `{annotation_id, classification, evidences, query,
...}`; `evidences` is a list of groups of spans `{docid, start_token, end_token, text, ...}`
whose token offsets index the doc's whitespace tokens after flattening all its lines (end
exclusive). `docs/<docid>` holds the tokenized document, one sentence per line. Used for the
"movies" rationales of Zaidan et al. (2007) and for MultiRC / FEVER (whose query becomes the
second text of a pair with `query_as_pair=True`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from smat.data.dataset import RationaleDataset, TextDataset, encode_labels
from smat.data.rationales import spans_to_word_mask

SPLITS = {"train": "train", "val": "val", "validation": "val", "dev": "val", "test": "test"}


def _read_annotations(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        raise FileNotFoundError(f"ERASER annotation file {str(path)!r} does not exist")
    records = []
    with path.open(encoding="utf-8") as f:
        for line_no, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}:{line_no} is not valid JSON: {exc}") from exc
            for key in ("annotation_id", "classification", "evidences"):
                if key not in record:
                    raise ValueError(f"{path}:{line_no} lacks the key {key!r}; found "
                                     f"{sorted(record)}")
            records.append(record)
    if not records:
        raise ValueError(f"ERASER split file {str(path)!r} is empty (0 annotations)")
    return records


def _docid(record: dict[str, Any], docs_dir: Path) -> str:
    """The document an annotation is about: annotation_id when it names a doc, else docids."""
    annotation_id = record["annotation_id"]
    if (docs_dir / annotation_id).is_file():
        return annotation_id
    docids = record.get("docids") or [e["docid"] for g in record["evidences"] for e in g]
    if docids:
        return docids[0]
    return annotation_id.split(":")[0]


def load_eraser(
    data_dir: str | Path,
    *,
    split: str = "train",
    label_names: Sequence[str] | None = None,
    query_as_pair: bool = False,
) -> RationaleDataset:
    """Load one ERASER split with human rationales as word masks over the document words.

    The text of each example is its document's whitespace tokens joined by single spaces, so
    word i of `text.split()` is ERASER token i and `word_masks[n]` is True on every token
    covered by any evidence span (the union over all evidence groups).

    Args:
      data_dir: folder holding `{split}.jsonl` and `docs/`.
      split: "train", "val" (or "validation" / "dev") or "test".
      label_names: the label vocabulary (default: the sorted distinct `classification`
        strings, e.g. ("NEG", "POS") for movies).
      query_as_pair: use the `query` field as the second text (MultiRC, FEVER).

    Returns:
      A `RationaleDataset` (classification) with `ids` = annotation ids.

    Raises:
      FileNotFoundError: the split file or a referenced document is missing.
      ValueError: unknown split, empty split file, an evidence span outside its document or
        in another document, or a span whose `text` disagrees with the document tokens.
    """
    if split not in SPLITS:
        raise ValueError(f"unknown ERASER split {split!r}; expected one of {sorted(SPLITS)}")
    data_dir = Path(data_dir)
    docs_dir = data_dir / "docs"
    path = data_dir / f"{SPLITS[split]}.jsonl"
    records = _read_annotations(path)
    texts, pairs, masks, ids = [], [], [], []
    for record in records:
        docid = _docid(record, docs_dir)
        doc_path = docs_dir / docid
        if not doc_path.is_file():
            raise FileNotFoundError(f"document {docid!r} of annotation "
                                    f"{record['annotation_id']!r} is missing from {docs_dir}")
        words = doc_path.read_text(encoding="utf-8").split()
        spans = []
        for group in record["evidences"]:
            for ev in group:
                if ev["docid"] != docid:
                    raise ValueError(f"annotation {record['annotation_id']!r} has evidence in "
                                     f"document {ev['docid']!r}, not in its document {docid!r}")
                start, end = ev["start_token"], ev["end_token"]
                if "text" in ev and " ".join(words[start:end]) != " ".join(ev["text"].split()):
                    raise ValueError(f"annotation {record['annotation_id']!r}: evidence tokens "
                                     f"[{start}, {end}) of {docid!r} read "
                                     f"{' '.join(words[start:end])!r}, not {ev['text']!r}")
                spans.append((start, end))
        masks.append(spans_to_word_mask(spans, num_words=len(words)))
        texts.append(" ".join(words))
        pairs.append(str(record.get("query") or ""))
        ids.append(record["annotation_id"])
    labels, names = encode_labels([r["classification"] for r in records], task="classification",
                                  label_names=label_names, column="classification")
    data = TextDataset(texts=tuple(texts), labels=labels, task="classification",
                       text_pairs=tuple(pairs) if query_as_pair else None, label_names=names,
                       source=f"ERASER {path}")
    return RationaleDataset(data=data, word_masks=tuple(masks), ids=tuple(ids))

