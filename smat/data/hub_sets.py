"""The public data sets the paper experiments read, from the Hugging Face Hub into the
folder layout ``--data-dir`` takes, once.

Each named set (:data:`HUB_SETS`) is loaded with `datasets` from its Hub ids, converted to
the files the experiments read (the layout ``docs/datasets.md`` gives for a hand-made
``--data-dir``) and written under a cache folder (``$SMAT_DATA_CACHE``, default
``~/.cache/smat/data``); a folder whose conversion finished (a ``.complete`` marker, written
last) is reused without touching the network. A machine without the Hub reads a *mirror*:
a folder holding each Hub id saved with ``DatasetDict.save_to_disk`` under its id with
``/`` as ``__`` (``stanfordnlp__sst2``; an id read with a config adds ``__<config>``:
``wmt__wmt20_mlqe_task1__en-de``), made on a machine that has the Hub; the conversion is
the same.
"""

from __future__ import annotations

import gzip
import html
import json
import math
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from smat.data.mlqe import HUB_NOTES, SPLITS

# What a writer is given to read the Hub: load(hub_id, config=None) -> DatasetDict.
HubLoader = Callable[..., Any]
# A Hub id, or (id, config) for a data set with several configs.
HubId = str | tuple[str, str]

CACHE_ENV = "SMAT_DATA_CACHE"
MIRROR_ENV = "SMAT_HUB_MIRROR"


def cache_root() -> Path:
    """Where converted data sets are kept: ``$SMAT_DATA_CACHE`` or ``~/.cache/smat/data``."""
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "smat" / "data")


def mirror_name(hub_id: str, config: str | None = None) -> str:
    """The folder of `hub_id` (read with `config`, when given) in a mirror: the id with ``/``
    as ``__``, then ``__<config>`` (``stanfordnlp__sst2``, ``wmt__wmt20_mlqe_task1__en-de``)."""
    name = hub_id.replace("/", "__")
    return name if config is None else f"{name}__{config}"


def load_hub(hub_id: str, config: str | None = None, *,
             mirror: str | Path | None = None) -> Any:
    """The `datasets.DatasetDict` of `hub_id` (its `config`, for a data set with several):
    from `mirror` (its ``save_to_disk`` copy, :func:`mirror_name`) when given, else from the
    Hub.

    Raises:
      FileNotFoundError: the mirror lacks the id's folder.
    """
    import datasets

    if mirror is None:
        return datasets.load_dataset(hub_id, config)
    folder = Path(mirror) / mirror_name(hub_id, config)
    if not folder.is_dir():
        call = repr(hub_id) if config is None else f"{hub_id!r}, {config!r}"
        raise FileNotFoundError(f"Hub mirror {mirror} has no {folder.name}/ (save "
                                f"datasets.load_dataset({call}) there with save_to_disk)")
    return datasets.load_from_disk(str(folder))


def _write_tsv(path: Path, rows: Sequence[tuple[str, int]]) -> None:
    """GLUE's tsv as GLUE writes it: a header, then each sentence and its label, unquoted
    (smat reads tsv with no quoting); a tab or line break inside a sentence becomes a space."""
    with path.open("w", encoding="utf-8") as stream:
        stream.write("sentence\tlabel\n")
        for sentence, label in rows:
            flat = sentence.replace("\t", " ").replace("\r", " ").replace("\n", " ")
            stream.write(f"{flat}\t{int(label)}\n")


def write_sst2(folder: Path, load: HubLoader) -> None:
    """GLUE SST-2 (``stanfordnlp/sst2``: train, validation) and its test sentences with the
    SST labels (``SetFit/sst2``'s test split; GLUE's own test labels are hidden, -1) as
    ``train.tsv``, ``dev.tsv`` and ``test-labeled.tsv``."""
    glue, labelled = load("stanfordnlp/sst2"), load("SetFit/sst2")
    _write_tsv(folder / "train.tsv", list(zip(glue["train"]["sentence"],
                                              glue["train"]["label"], strict=True)))
    _write_tsv(folder / "dev.tsv", list(zip(glue["validation"]["sentence"],
                                            glue["validation"]["label"], strict=True)))
    _write_tsv(folder / "test-labeled.tsv", list(zip(labelled["test"]["text"],
                                                     labelled["test"]["label"], strict=True)))


def write_imdb(folder: Path, load: HubLoader) -> None:
    """IMDB's test split (``stanfordnlp/imdb``) as ``test.jsonl.gz``: text, label (0
    negative, 1 positive)."""
    test = load("stanfordnlp/imdb")["test"]
    with gzip.open(folder / "test.jsonl.gz", "wt", encoding="utf-8") as stream:
        for text, label in zip(test["text"], test["label"], strict=True):
            stream.write(json.dumps({"text": text, "label": int(label)}) + "\n")


def _span(words: list[str], evidence: str, *, start: int = 0) -> tuple[int, int] | None:
    """The first [start, end) of `evidence`'s words in `words` at or after `start`."""
    target = evidence.split()
    for begin in range(start, len(words) - len(target) + 1):
        if words[begin:begin + len(target)] == target:
            return begin, begin + len(target)
    return None


def write_eraser_movies(folder: Path, load: HubLoader) -> None:
    """ERASER's movie reviews with their rationales (``eraser-benchmark/movie_rationales``:
    review, label NEG / POS, evidences as strings) in ERASER's own layout: ``docs/<id>`` and
    ``{train,val,test}.jsonl`` whose evidence spans are the evidence strings located in the
    review's words.

    Raises:
      ValueError: an evidence string that is not in its review (naming both).
    """
    data = load("eraser-benchmark/movie_rationales")
    (folder / "docs").mkdir(exist_ok=True)
    for split, name in (("train", "train"), ("validation", "val"), ("test", "test")):
        names = data[split].features["label"].names
        with (folder / f"{name}.jsonl").open("w", encoding="utf-8") as stream:
            for index, row in enumerate(data[split]):
                docid = f"{name}_{index:04d}"
                words = row["review"].split()
                evidences = []
                for evidence in row["evidences"]:
                    found = _span(words, evidence)
                    if found is None:
                        raise ValueError(f"movie_rationales {split} row {index}: evidence "
                                         f"{evidence[:60]!r} is not in its review")
                    evidences.append([{"docid": docid, "start_token": found[0],
                                       "end_token": found[1], "text": " ".join(
                                           words[found[0]:found[1]])}])
                (folder / "docs" / docid).write_text(" ".join(words) + "\n", encoding="utf-8")
                stream.write(json.dumps({"annotation_id": docid, "docids": [docid],
                                         "classification": names[row["label"]],
                                         "evidences": evidences, "query": ""}) + "\n")


MLQE_PAIR = "en-de"  # the one pair both WMT20 QE tasks on the Hub hold
MLQE_TASK1 = "wmt/wmt20_mlqe_task1"  # sentence level: DA scores over raw text
MLQE_TASK2 = "wmt/wmt20_mlqe_task2"  # word level: OK/BAD tags over tokenized text
# The two tasks are separate Hub data sets; their rows count as one MLQE-PE row each only
# when at least this share of a split's sources agree row by row (a few may differ where
# undoing the tokenization is not exact).
MLQE_MIN_AGREEMENT = 0.95
# The Hub's loading scripts put -10,000 where a blind split has no score; z-normalized DA
# scores stay within a few units of 0 and raw ones within 0-100.
_NO_SCORE_BELOW = -1000.0
_DA_COLUMNS = ("index", "original", "translation", "scores", "mean", "z_scores", "z_mean",
               "model_scores")


def _comparable(text: str) -> str:
    """`text` as far as raw and Moses-tokenized sentences can be compared: Moses' escapes
    (``&quot;``, ``&apos;``, ``&amp;``, ``&#124;``, ...) read back, its split hyphens
    (``@-@``) joined, and no whitespace at all (where tokens were split apart)."""
    return "".join(html.unescape(text.replace("@-@", "-")).split())


def _flat(text: str) -> str:
    """`text` on one line without tabs: each file is line-aligned and the tsv unquoted."""
    return text.replace("\t", " ").replace("\r", " ").replace("\n", " ")


def _number(value: float) -> str:
    """A float32 score as its shortest decimal (the Hub stores float32)."""
    return str(np.float32(value))


def _scores(values: Sequence[float]) -> str:
    """A list of scores as the release writes it: ``[a, b, c]``."""
    return "[" + ", ".join(_number(v) for v in values) + "]"


def _no_score(value: float | None) -> bool:
    return value is None or not math.isfinite(value) or value <= _NO_SCORE_BELOW


def _missing(split: str, task1: Any, task2: Any) -> tuple[str | None, str | None]:
    """Why the Hub's `split` has no DA scores, and why it has no word tags (a blind test
    set), each None when every row has them.

    Raises:
      ValueError: some rows have them and others not (naming the first without).
    """
    reasons = []
    for hub_id, what, missing in (
            (MLQE_TASK1, "DA scores", [_no_score(v) for v in task1["z_mean"]]),
            (MLQE_TASK2, "word tags", [len(tags) == 0 for tags in task2["mt_tags"]])):
        if any(missing) and not all(missing):
            raise ValueError(f"MLQE-PE {split}: {hub_id} row {missing.index(True)} has no "
                             f"{what}, other rows do")
        reasons.append(f"{hub_id} has no {what} for it" if all(missing) else None)
    return reasons[0], reasons[1]


def _check_aligned(split: str, task1: Any, task2: Any, source: str) -> float:
    """The share of rows whose `source` sentences agree in both tasks (raw and tokenized:
    :func:`_comparable`).

    Raises:
      ValueError: the row counts differ, or fewer than :data:`MLQE_MIN_AGREEMENT` of the
        rows agree (naming the first that does not, with both texts).
    """
    raw = [pair[source] for pair in task1["translation"]]
    tokenized = [pair[source] for pair in task2["translation"]]
    if len(raw) != len(tokenized):
        raise ValueError(f"MLQE-PE {split}: {MLQE_TASK1} has {len(raw)} rows but "
                         f"{MLQE_TASK2} has {len(tokenized)}")
    agree = [_comparable(a) == _comparable(b) for a, b in zip(raw, tokenized, strict=True)]
    share = sum(agree) / max(len(agree), 1)
    if share < MLQE_MIN_AGREEMENT:
        first = agree.index(False)
        raise ValueError(f"MLQE-PE {split}: only {share:.1%} of the rows of {MLQE_TASK1} and "
                         f"{MLQE_TASK2} hold the same source sentence ({MLQE_MIN_AGREEMENT:.0%} "
                         f"needed; the two are not in the same row order); first that differs, "
                         f"row {first}: {raw[first][:60]!r} vs {tokenized[first][:60]!r}")
    return share


def _tag_names(task2: Any, column: str) -> list[str]:
    """The OK/BAD name of each class of a tag column (a sequence of ClassLabel).

    Raises:
      ValueError: a class that is neither OK nor BAD.
    """
    names = list(task2.features[column].feature.names)
    if not set(names) <= {"OK", "BAD"}:
        raise ValueError(f"{MLQE_TASK2} {column} has classes {names}; expected OK and BAD")
    return names


def _write_mlqe_split(folder: Path, split: str, task1: Any, task2: Any, *,
                      tags: bool) -> None:
    """One split in MLQE-PE's layout (:mod:`smat.data.mlqe`): the DA tsv from task 1, the
    tokenized sources and translations from task 2, and its tags unless `tags` is False.

    Raises:
      ValueError: a row whose tags do not match its words (2N+1 MT tags for N words, gaps
        included; one source tag per source word).
    """
    source, target = MLQE_PAIR.split("-")
    name, prefix = SPLITS[split]
    da = folder / "direct-assessments" / MLQE_PAIR / name
    pe = folder / "post-editing" / MLQE_PAIR / name
    da.mkdir(parents=True, exist_ok=True)
    pe.mkdir(parents=True, exist_ok=True)
    with (da / f"{prefix}.{MLQE_PAIR.replace('-', '')}.df.short.tsv").open(
            "w", encoding="utf-8") as stream:
        stream.write("\t".join(_DA_COLUMNS) + "\n")
        for row in task1.select_columns(["segid", "translation", "scores", "mean", "z_scores",
                                         "z_mean", "model_score"]):
            stream.write("\t".join((
                str(row["segid"]), _flat(row["translation"][source]),
                _flat(row["translation"][target]), _scores(row["scores"]),
                _number(row["mean"]), _scores(row["z_scores"]), _number(row["z_mean"]),
                _number(row["model_score"]))) + "\n")
    mt_names, src_names = _tag_names(task2, "mt_tags"), _tag_names(task2, "src_tags")
    lines: dict[str, list[str]] = {"src": [], "mt": [], "tags": [], "source_tags": []}
    for index, row in enumerate(task2.select_columns(["translation", "src_tags", "mt_tags"])):
        src, mt = _flat(row["translation"][source]), _flat(row["translation"][target])
        lines["src"].append(src)
        lines["mt"].append(mt)
        if not tags:
            continue
        words, src_words = len(mt.split()), len(src.split())
        # the gap tags stay (gap, word, gap, ... gap), as in the release's .tags
        if len(row["mt_tags"]) != 2 * words + 1:
            raise ValueError(f"{MLQE_TASK2} {split} row {index}: {len(row['mt_tags'])} MT tags "
                             f"for {words} MT words; expected 2*{words}+1 (gaps and words)")
        if len(row["src_tags"]) != src_words:
            raise ValueError(f"{MLQE_TASK2} {split} row {index}: {len(row['src_tags'])} source "
                             f"tags for {src_words} source words")
        lines["tags"].append(" ".join(mt_names[tag] for tag in row["mt_tags"]))
        lines["source_tags"].append(" ".join(src_names[tag] for tag in row["src_tags"]))
    for ext in ("src", "mt", "tags", "source_tags") if tags else ("src", "mt"):
        (pe / f"{prefix}.{ext}").write_text("".join(f"{line}\n" for line in lines[ext]),
                                            encoding="utf-8")


def write_mlqe_pe(folder: Path, load: HubLoader) -> None:
    """MLQE-PE en-de from WMT20's two QE tasks on the Hub (``wmt/wmt20_mlqe_task1``: DA
    scores over the raw text; ``wmt/wmt20_mlqe_task2``: OK/BAD tags over the tokenized
    text), in the release's layout (:mod:`smat.data.mlqe`): train, validation as ``dev``,
    test as ``test``/``test20``.

    The two are separate data sets, so each split is checked to hold the same sentences in
    the same rows (:data:`MLQE_MIN_AGREEMENT`). A split without DA scores is not written; one
    with scores but without word tags (the Hub's test split: WMT20's blind word-level test
    set) is written without its tag files, so that sentence-level work (Table 5) can read
    it. :data:`smat.data.mlqe.HUB_NOTES` records both, so that
    :func:`smat.data.mlqe.load_mlqe` names why a split or its tags are missing.

    Raises:
      ValueError: the tasks' rows disagree, a split has scores or tags on some rows only,
        or a row's tags do not match its words.
    """
    task1, task2 = load(MLQE_TASK1, MLQE_PAIR), load(MLQE_TASK2, MLQE_PAIR)
    source = MLQE_PAIR.split("-")[0]
    left_out, untagged, agreement = {}, {}, {}
    for split in ("train", "validation", "test"):
        name = SPLITS[split][0]
        no_scores, no_tags = _missing(split, task1[split], task2[split])
        if no_scores is not None:
            left_out[name] = no_scores
            continue
        if no_tags is not None:
            untagged[name] = no_tags
        agreement[name] = _check_aligned(split, task1[split], task2[split], source)
        _write_mlqe_split(folder, split, task1[split], task2[split], tags=no_tags is None)
    (folder / HUB_NOTES).write_text(json.dumps({
        "hub_ids": [[MLQE_TASK1, MLQE_PAIR], [MLQE_TASK2, MLQE_PAIR]],
        "language_pairs": [MLQE_PAIR], "left_out": {MLQE_PAIR: left_out},
        "untagged": {MLQE_PAIR: untagged},
        "source_agreement": {MLQE_PAIR: agreement}}, indent=1) + "\n", encoding="utf-8")


# name -> (what it writes, the Hub ids it reads)
HUB_SETS: dict[str, tuple[Callable[[Path, HubLoader], None], tuple[HubId, ...]]] = {
    "sst2_glue": (write_sst2, ("stanfordnlp/sst2", "SetFit/sst2")),
    "imdb_maas": (write_imdb, ("stanfordnlp/imdb",)),
    "eraser_movies": (write_eraser_movies, ("eraser-benchmark/movie_rationales",)),
    "mlqe_pe": (write_mlqe_pe, ((MLQE_TASK1, MLQE_PAIR), (MLQE_TASK2, MLQE_PAIR))),
}


def hub_data_dir(name: str, *, cache: str | Path | None = None,
                 mirror: str | Path | None = None) -> Path:
    """The folder of data set `name` (one of :data:`HUB_SETS`), converted from the Hub on
    the first call and reused after.

    Args:
      cache: the cache root (default :func:`cache_root`).
      mirror: a folder of ``save_to_disk`` copies to read instead of the Hub (default
        ``$SMAT_HUB_MIRROR``, else the Hub).

    Raises:
      ValueError: an unknown name.
    """
    if name not in HUB_SETS:
        raise ValueError(f"no Hub data set {name!r}; choose from {sorted(HUB_SETS)}")
    folder = Path(cache or cache_root()) / name
    if (folder / ".complete").is_file():
        return folder
    write, _ = HUB_SETS[name]
    mirror = mirror or os.environ.get(MIRROR_ENV) or None
    folder.mkdir(parents=True, exist_ok=True)
    write(folder, lambda hub_id, config=None: load_hub(hub_id, config, mirror=mirror))
    (folder / ".complete").write_text("")
    return folder
