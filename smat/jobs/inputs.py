"""What an evaluation reads, checked before any model is loaded: a texts file, a file of
explanations computed elsewhere (which brings its own texts), a trained model's held-out
rows (cached in its folder after the first evaluation), and a per-row grouping of them."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from smat.data import Encoded, RationaleDataset, load_eraser, take
from smat.evaluation.cartography import GROUPS as CARTOGRAPHY_GROUPS
from smat.jobs.explain import ExplainConfig
from smat.json_files import read_json
from smat.store import model_store
from smat.store.explanation_file import file_texts, is_explanation_file
from smat.store.run_record import HELD_OUT_SPLITS, held_out_rows


def read_texts(path: str | Path) -> list[str]:
    """The non-blank lines of `path`, one text each.

    Warns (UserWarning) when blank lines are skipped: outputs then follow the non-blank
    lines, not the file's line numbers (each output record carries its text).

    Raises:
      ValueError: a file that is not UTF-8 (naming the line) or holds no text.
    """
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as error:
        line = Path(path).read_bytes()[:error.start].count(b"\n") + 1
        raise ValueError(f"{path} is not UTF-8 text: line {line} holds the byte "
                         f"{error.object[error.start:error.start + 1]!r}; re-save it as "
                         "UTF-8") from None
    texts = [line for line in lines if line.strip()]
    if not texts:
        raise ValueError(f"{path} holds no text (it is empty or every line is blank)")
    if len(texts) < len(lines):
        warnings.warn(f"{path}: skipped {len(lines) - len(texts)} blank line(s); the outputs "
                      f"follow the {len(texts)} non-blank lines", stacklevel=2)
    return texts


def evaluation_texts(texts: str | None, explain: ExplainConfig, *,
                     groups: str | None = None) -> list[str] | None:
    """The texts an evaluation scores: the lines of `texts`, or the texts of a file of
    explanations computed elsewhere named among the explainers (its explanations are of
    those texts); None: the model's held-out split.

    Raises:
      ValueError: an explanations file together with `texts` or `groups`.
    """
    files = [str(e) for e in explain.explainers if is_explanation_file(e)]
    if files and (texts or groups):
        raise ValueError(f"{files[0]} explains its own texts, which are the rows evaluated: "
                         "leave out --texts and --groups")
    if files:
        return file_texts(files[0])
    return read_texts(texts) if texts else None


def evaluation_rows(trained: model_store.TrainedModel, texts: Sequence[str] | None,
                    num_examples: int | None, *, folder: str | Path | None) -> Encoded:
    """The rows an evaluation scores: `texts` (:func:`evaluation_texts`) tokenized by the
    model, or without them the model's held-out test split (cached in its `folder`); the
    first `num_examples` of either."""
    if texts is None:
        return held_out_split(trained, num_examples=num_examples, folder=folder)
    data = model_store.encode_texts(trained, texts, job="evaluate")
    if num_examples is not None and num_examples < len(data.labels):
        data = take(data, np.arange(num_examples))
    return data


def model_rows(model: str | Path, texts: str | None, explain: ExplainConfig, *,
               explanation_files: bool) -> tuple[model_store.TrainedModel, Any]:
    """(the model of folder `model`, the rows an evaluation of it scores): the texts are
    read before the model is loaded; with `explanation_files`, a file of explanations among
    the explainers brings its own (:func:`evaluation_texts`)."""
    chosen = (evaluation_texts(texts, explain) if explanation_files
              else read_texts(texts) if texts else None)
    trained = model_store.load(model, precision=explain.precision)
    return trained, evaluation_rows(trained, chosen, explain.num_examples, folder=model)


def held_out_split(trained: model_store.TrainedModel, *,
                   num_examples: int | None = None, split: str = "test",
                   folder: str | Path | None = None) -> Encoded:
    """The model's held-out test split (the SMaT protocol's student test part), or the rows
    it trained on (``split="teacher_train"``, where cartography groups live).

    The data settings saved with a ``smat train-teacher`` model say where its examples came
    from; the split is rebuilt from them, so the teacher never trained on the test rows.

    Args:
      trained: a model saved by ``smat train-teacher`` (``smat.store.model_store.load``).
      num_examples: keep the first N rows (default: all).
      split: "test" or "teacher_train".
      folder: the model's folder, where the rows are cached after the first call
        (:func:`smat.store.run_record.held_out_rows`).

    Raises:
      ValueError: the model has no saved data settings, num_examples < 1, or an unknown
        split.
    """
    if num_examples is not None and num_examples < 1:
        raise ValueError(f"num_examples must be >= 1, got {num_examples}")
    rows = held_out_rows(trained, split=split, folder=folder)
    if num_examples is not None and num_examples < len(rows.labels):
        rows = take(rows, np.arange(num_examples))
    return rows


def load_groups(path: str | Path) -> tuple[str, np.ndarray]:
    """``(split, labels)`` of a per-instance grouping: a JSON object with ``"group"`` (one
    label per row of the split) and ``"split"`` ("test" or "teacher_train"), such as the
    ``cartography.json`` of a teacher trained with ``--training-dynamics``; a run folder
    stands for its ``cartography.json``.

    Raises:
      FileNotFoundError: no such file (or the folder has no cartography.json).
      ValueError: the file lacks "group" or names an unknown split.
    """
    path = Path(path)
    if path.is_dir():
        path = path / "cartography.json"
    if not path.is_file():
        raise FileNotFoundError(f"no grouping file at {path}; train the teacher with "
                                "--training-dynamics, or write a JSON with 'split' and 'group'")
    payload = read_json(path)
    if "group" not in payload:
        raise ValueError(f"{path} has no 'group' list (one label per row)")
    split = payload.get("split", "test")
    if split not in HELD_OUT_SPLITS:
        raise ValueError(f"{path} names split {split!r}; choose from {HELD_OUT_SPLITS}")
    return split, np.asarray(payload["group"]).astype(str)


def sample_per_group(groups: Sequence[str] | np.ndarray, per_group: int | None, *,
                     seed: int = 0) -> np.ndarray:
    """Sorted row indices: every row, or at most `per_group` rows of each group drawn
    without replacement (seeded), the paper's "representative samples" of each group.

    Raises:
      ValueError: per_group < 1.
    """
    groups = np.asarray(groups).astype(str)
    if per_group is None:
        return np.arange(len(groups))
    if per_group < 1:
        raise ValueError(f"per_group must be >= 1, got {per_group}")
    rng = np.random.default_rng(seed)
    chosen = [rng.permutation(np.flatnonzero(groups == label))[:per_group]
              for label in ordered_groups(groups)]
    return np.sort(np.concatenate(chosen)) if chosen else np.arange(0)


def ordered_groups(groups: Sequence[str] | np.ndarray) -> list[str]:
    """The distinct labels of `groups`: the cartography groups in their order, then the
    others sorted."""
    present = set(np.asarray(groups).astype(str).tolist())
    return [g for g in CARTOGRAPHY_GROUPS if g in present] + sorted(
        present - set(CARTOGRAPHY_GROUPS))


def rationale_rows(data_dir: str | Path, *, split: str = "test",
                   num_examples: int | None = None) -> RationaleDataset:
    """The documents of an ERASER-format folder with their human rationales (their gold
    labels are not used: explanations explain the model's predictions); the first
    `num_examples`."""
    rationales = load_eraser(data_dir, split=split)
    if num_examples is not None:
        rationales = rationales.select(range(min(num_examples, len(rationales))))
    return rationales
