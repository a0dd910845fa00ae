"""ROAR / Recursive ROAR runs: retrain a model per (explainer, seed, ratio), cached on disk.

The procedure of Madsen et al. (2022, §3, design §6), top to bottom:

1. per seed, the 0% model (unmasked data) and the 100% model (every maskable token masked)
   are trained once and shared by all explainers, ROAR and Recursive ROAR alike;
2. the random baseline ranks tokens by seeded uniform scores (one draw per seed), so its
   masks are nested, and is shared by all explainers;
3. ROAR ranks tokens by the importance the 0% model gives to the *gold* label; Recursive
   ROAR ranks them, at ratio r_i, by the importance from the model retrained at r_{i-1}
   on the data masked at r_{i-1}, already-masked tokens first (they stay masked);
4. at every ratio a fresh model starts from the seed's initial checkpoint and is trained
   with :func:`smat.training.teacher.train_teacher` (early stopping on the *masked*
   validation split), then scored on the masked test split.

Every cell (data set, model, explainer, seed, ratio, recursive, settings hash) is one
folder whose ``result.json`` is written atomically last; the masks, and the importance a
later cell needs, are saved beside it. A killed run resumes: finished cells are read
back, the unfinished one resumes from its training checkpoint (with ``loop.parallel_seeds`` the
seeds of a cell train together in one vmapped program, resumable as well).

    smat roar --recursive --explainers attention gradient input_x_gradient \\
        --ratios 0:100:20 --seeds 3 --preset small --output-dir runs/roar
"""

from __future__ import annotations

import dataclasses
import shutil
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import jax
import numpy as np
from flax import nnx

import baselines
from smat import registry
from smat.data import Encoded, take, train_validation_test_split
from smat.data.protocol import DataConfig, load_examples
from smat.evaluation.roar import (
    check_ratios,
    mask_input_ids,
    maskable_tokens,
    parse_ratios,
    plot_roar,
    roar_faithfulness,
    roar_mask,
    summarize_faithfulness,
)
from smat.jobs.explain import explain_encoded
from smat.jobs.shares import join_shares
from smat.jobs.teacher_run import start_model
from smat.json_files import read_json
from smat.models import SequenceClassifier, functional
from smat.models.source import ModelSource
from smat.parallel import JOIN_TIMEOUT
from smat.store import checkpoint
from smat.store.run_log import (
    cached_arrays,
    read_arrays,
    settings_hash,
    write_arrays_atomic,
    write_json_atomic,
)
from smat.training.loop import LoopConfig, with_loop
from smat.training.teacher import (
    TeacherTrainConfig,
    evaluate,
    train_teacher,
)

# Every registry explainer but "random" (the baseline every run shares), by name or alias;
# Madsen et al. call all-layer attention "attention".
EXPLAINERS = tuple(sorted({*registry.ALIASES, *registry.STATIC} - {"random"}))
"""Importance measures ROAR can evaluate (the random baseline is always included)."""

SHARED = ("unmasked", "all-masked", "random")  # cell slots shared by every explainer


@dataclasses.dataclass(frozen=True, kw_only=True)
class RoarConfig:
    """What a ROAR run evaluates (the model and data come from a preset and a DataConfig).

    Attributes:
      explainers: importance measures to evaluate (the random baseline always runs).
      ratios: masking ratios, strictly increasing fractions from 0.0 to 1.0 (on the command
        line in percent: start:stop:step, inclusive, or a comma list).
      seeds: one model initialisation / data order / random baseline per seed.
      recursive: Recursive ROAR (importance recomputed at each ratio) instead of ROAR.
      num_examples: examples drawn (seeded by the data's split seed) before splitting;
        None keeps all.
      validation_fraction: share of the examples in the validation split.
      test_fraction: share of the examples in the test split.
      ig_steps: integrated-gradients steps (Madsen et al.: 50, Riemann right sums, b = 0).
      explain_batch_size: rows per importance computation.
      metric: the performance of Eq. 3 ("accuracy", "macro_f1" — Madsen et al.'s choice
        for sentiment — or "pearson" for regression).
      min_denominator: Eq. 3 is undefined below this denominator.

    The seeds' models of each cell train in one vmapped program when the teacher config's
    ``loop.parallel_seeds`` is set (same results; faster where a device has room for
    several small models, not on 2 CPU cores).
    """

    explainers: tuple[str, ...] = dataclasses.field(
        default=("attention", "gradient", "input_x_gradient"), metadata={"choices": EXPLAINERS})
    ratios: tuple[float, ...] = dataclasses.field(
        default=(0.0, 0.2, 0.4, 0.6, 0.8, 1.0),
        metadata={"parse": parse_ratios, "shown": "0:100:20"})
    seeds: tuple[int, ...] = (0, 1, 2)
    recursive: bool = False
    num_examples: int | None = None
    validation_fraction: float = 0.1
    test_fraction: float = 0.2
    ig_steps: int = 20
    explain_batch_size: int = 64
    metric: str = dataclasses.field(default="macro_f1",
                                    metadata={"choices": ("accuracy", "macro_f1", "pearson")})
    min_denominator: float = 1e-3

    def __post_init__(self) -> None:
        bad = [e for e in self.explainers if e not in EXPLAINERS]
        if bad or not self.explainers or len(set(self.explainers)) != len(self.explainers):
            raise ValueError(f"RoarConfig.explainers must be distinct names from {EXPLAINERS} "
                             f"(the random baseline is always run); got {self.explainers}")
        object.__setattr__(self, "ratios", check_ratios(self.ratios))
        if not self.seeds or len(set(self.seeds)) != len(self.seeds) or min(self.seeds) < 0:
            raise ValueError(f"RoarConfig.seeds must be distinct ints >= 0; got {self.seeds}")
        if self.num_examples is not None and self.num_examples < 3:
            raise ValueError(f"RoarConfig.num_examples must be None or >= 3; got "
                             f"{self.num_examples}")
        for name in ("ig_steps", "explain_batch_size"):
            if getattr(self, name) < 1:
                raise ValueError(f"RoarConfig.{name} must be >= 1; got {getattr(self, name)}")
        if self.metric not in ("accuracy", "macro_f1", "pearson"):
            raise ValueError(f"RoarConfig.metric must be 'accuracy', 'macro_f1' or 'pearson'; "
                             f"got {self.metric!r}")


class ModelPreset(NamedTuple):
    """A model recipe: the pretrained start (encoder, how many of its layers, pooling) and
    how it trains."""

    model: ModelSource
    train: TeacherTrainConfig
    description: str


PRESETS: dict[str, ModelPreset] = {
    # MiniLM's embeddings and first 2 layers (of 6), mean pooling: all-MiniLM-L6-v2 is a
    # mean-pooled sentence encoder, so its lower layers give usable features at once; a
    # pretrained start converges in ~2 epochs where a random init needs far more data.
    # About 3x cheaper per step than the full encoder, for 2-core CPU runs.
    "small": ModelPreset(ModelSource(pooling="mean", num_layers=2), TeacherTrainConfig(
        learning_rate=1e-4, warmup_steps=20, schedule="linear_decay",
        loop=LoopConfig(batch_size=32, max_epochs=2, patience=2, evals_per_epoch=2)),
        "all-MiniLM-L6-v2, first 2 layers, mean pooling"),
    "minilm": ModelPreset(ModelSource(pooling="scalar_mix"), TeacherTrainConfig(
        learning_rate=5e-5, warmup_steps=100, schedule="linear_decay",
        loop=LoopConfig(batch_size=32, max_epochs=3, patience=3, evals_per_epoch=2)),
        "all-MiniLM-L6-v2 (6 layers), scalar mix"),
}
"""Model presets of ``smat roar --preset``."""


# ------------------------------------------------------------------ importance


def explain(graphdef: nnx.GraphDef, params: nnx.State, data: Encoded, *, explainer: str,
            task: str, ig_steps: int = 20, batch_size: int = 64) -> np.ndarray:
    """Importance ``(N, T)`` float32 of every token of `data` for its GOLD label.

    Madsen et al. (2022) explain the gold label; for regression the single output is
    explained. Gradient = L2 norm of the gradient, Input x Gradient = the one-hot entry = the
    sum over the embedding, IG with b = 0 and right Riemann sums (their Eq. 2). Computed by
    :func:`smat.jobs.explain.explain_encoded`, the one way smat explains a data set: batches
    cut to their longest row (rounded up to 16) like training, seeded explainers seeded by
    the rows' indices.

    Args:
      graphdef / params: the model (``smat.models.functional.split``).
      data: tokenized rows (labels used as targets).
      explainer: one of :data:`EXPLAINERS`.
      task: "classification" or "regression".
      ig_steps: integrated-gradients steps.
      batch_size: rows per call.

    Returns:
      ``(N, T)`` float32 scores (0 at cut padding columns).

    Raises:
      ValueError: an unknown explainer.
    """
    if explainer not in EXPLAINERS:
        raise ValueError(f"unknown explainer {explainer!r}; choose from {EXPLAINERS}")
    name = registry.canonical(explainer)
    scores, _, _ = explain_encoded(graphdef, params, data, [name], task=task,
                                   ig_steps=ig_steps, batch_size=batch_size, length_multiple=16,
                                   target="gold", ig_method="riemann_right")
    return scores[name]


# ------------------------------------------------------------------ cells and cache


class Splits(NamedTuple):
    """The three splits a ROAR cell trains, early-stops and tests on."""

    train: Encoded
    validation: Encoded
    test: Encoded


class Cell(NamedTuple):
    """One cell to train: its folder (the cache key), masks, seed and follow-up.

    ``after(graphdef, params, masked_splits)`` runs once the model is trained and before
    ``result.json`` is written (keeping parameters, or the next Recursive ROAR importance).
    """

    folder: Path
    masks: Splits
    seed: int
    after: Callable[[nnx.GraphDef, nnx.State, Splits], None] | None = None


def _apply_masks(splits: Splits, masks: Splits, mask_token_id: int) -> Splits:
    return Splits(*(data._replace(input_ids=np.asarray(
        mask_input_ids(data.input_ids, mask, mask_token_id=mask_token_id)))
        for data, mask in zip(splits, masks, strict=True)))


class RoarRunner:
    """Runs (or reads back) the cells of one data set x model, under one cache folder.

    Args:
      make_model: seed -> the initial checkpoint (a fresh ``SequenceClassifier``).
      splits: train / validation / test rows.
      mask_token_id: the tokenizer's [MASK] id.
      config: what to evaluate.
      train: training hyperparameters (its seed is replaced by each ROAR seed).
      task: "classification" or "regression".
      cache_dir: the cache folder; cells live in
        ``<cache_dir>/<dataset>/<model>/<settings hash>/<slot>/<roar|recursive>/seed<s>/ratio<r>``.
      dataset / model: names in the cache key.
      progress: show training progress bars.
    """

    def __init__(self, *, make_model: Callable[[int], nnx.Module], splits: Splits,
                 mask_token_id: int, config: RoarConfig, train: TeacherTrainConfig, task: str,
                 cache_dir: str | Path, dataset: str, model: str, progress: bool = False):
        self.make_model, self.splits, self.config = make_model, splits, config
        self.train, self.task, self.progress = train, task, progress
        self.mask_token_id = int(mask_token_id)
        self.maskable = Splits(*(np.asarray(maskable_tokens(d.attention_mask,
                                                            d.special_tokens_mask))
                                 for d in splits))
        # The cache key: what changes a cell's result (not the seed, which names the cell's
        # folder, nor whether seeds run vmapped, which gives the same result).
        settings = {"train": dataclasses.asdict(with_loop(train, seed=0, parallel_seeds=False)),
                    "sizes": [int(len(d.labels)) for d in splits], "task": task,
                    "mask_token_id": self.mask_token_id, "max_len": int(splits.train.
                                                                         input_ids.shape[1]),
                    "validation_fraction": config.validation_fraction,
                    "test_fraction": config.test_fraction, "num_examples": config.num_examples}
        self.root = Path(cache_dir) / _safe(dataset) / _safe(model) / settings_hash(settings)
        write_json_atomic(self.root / "settings.json", settings)
        self._initial: dict[int, tuple[nnx.GraphDef, nnx.State]] = {}
        self.trained_cells = 0

    # -- paths ---------------------------------------------------------------------
    def _slot(self, explainer: str) -> str:
        return (f"{explainer}-n{self.config.ig_steps}" if explainer == "integrated_gradients"
                else explainer)

    def cell_dir(self, slot: str, seed: int, ratio: float, recursive: bool) -> Path:
        """Folder of one cell (its key is the path).

        A Recursive ROAR cell depends on every earlier ratio of the schedule, so its name
        also carries a hash of the ratios up to it.
        """
        name = f"ratio{100 * ratio:g}"
        if recursive:
            chain = [r for r in self.config.ratios if r <= ratio]
            name += f"-chain{settings_hash({'ratios': chain})[:6]}"
        return (self.root / slot / ("recursive" if recursive else "roar") / f"seed{seed}"
                / name)

    def seed_cells(self, seed: int) -> list[Path]:
        """The folders of every cell of one seed: the shared ones and each explainer's."""
        middle = self.config.ratios[1:-1]
        return [self.cell_dir("unmasked", seed, 0.0, False),
                self.cell_dir("all-masked", seed, 1.0, False),
                *(self.cell_dir("random", seed, ratio, False) for ratio in middle),
                *(self.cell_dir(self._slot(explainer), seed, ratio, self.config.recursive)
                  for explainer in self.config.explainers for ratio in middle)]

    # -- models --------------------------------------------------------------------
    def _initial_model(self, seed: int) -> tuple[nnx.GraphDef, nnx.State]:
        if seed not in self._initial:
            self._initial[seed] = functional.split(self.make_model(seed))
        return self._initial[seed]

    def _cells(self, jobs: list[Cell]) -> list[dict[str, Any]]:
        """Train a fresh model per cell on its masked data (or read finished cells back).

        With ``train.loop.parallel_seeds`` the unfinished cells (one per seed) train together
        in one vmapped program, otherwise one after another; either resumes mid-training.
        """
        todo = [job for job in jobs if not (job.folder / "result.json").is_file()]
        masked = {job.folder: _apply_masks(self.splits, job.masks, self.mask_token_id)
                  for job in todo}
        for job in todo:
            write_arrays_atomic(job.folder / "masks.npz",
                         **dict(zip(Splits._fields, job.masks, strict=True)))
        if todo:
            graphdef = self._initial_model(todo[0].seed)[0]
            seeds, folders = [job.seed for job in todo], [job.folder / "train" for job in todo]
            results = train_teacher(
                [nnx.merge(*self._initial_model(seed)) for seed in seeds],
                [masked[job.folder].train for job in todo],
                [masked[job.folder].validation for job in todo], task=self.task,
                config=self.train, seeds=seeds, output_dir=folders, progress=self.progress)
            for job, result in zip(todo, results, strict=True):
                self._finish(job, graphdef, result, masked[job.folder])
        return [read_json(job.folder / "result.json") for job in jobs]

    def _finish(self, job: Cell, graphdef: nnx.GraphDef, result: Any, masked: Splits) -> None:
        """Test a trained cell, run its follow-up, and write its ``result.json`` last."""
        self.trained_cells += 1
        test = evaluate(graphdef, result.params, masked.test, task=self.task,
                        length_multiple=self.train.loop.length_multiple)
        if job.after is not None:
            job.after(graphdef, result.params, masked)
        masked_fraction = float(sum(m.sum() for m in job.masks) / sum(m.sum() for m in
                                                                      self.maskable))
        record = {"test": test, "validation": result.best_validation,
                  "best_step": result.best_step, "steps": result.steps,
                  "train_seconds": round(result.seconds, 2), "masked_fraction": masked_fraction}
        write_json_atomic(job.folder / "result.json", record)
        shutil.rmtree(job.folder / "train", ignore_errors=True)  # optimizer state: GBs per run

    def _masks(self, folder: Path) -> Splits:
        return Splits(**read_arrays(folder / "masks.npz"))

    # -- the shared cells ----------------------------------------------------------
    def unmasked(self, seeds: Sequence[int]) -> list[dict[str, Any]]:
        """The 0% models, shared by every explainer; their parameters are kept for importance."""
        zeros = Splits(*(np.zeros_like(m) for m in self.maskable))

        def job(seed: int) -> Cell:
            folder = self.cell_dir("unmasked", seed, 0.0, False)

            def keep_params(graphdef, params, masked):
                checkpoint.save(folder / "params", params, metadata={}, overwrite=True)

            return Cell(folder, zeros, seed, keep_params)

        return self._cells([job(seed) for seed in seeds])

    def all_masked(self, seeds: Sequence[int]) -> list[dict[str, Any]]:
        """The 100% models (every maskable token masked), the lower bound, shared."""
        return self._cells([Cell(self.cell_dir("all-masked", seed, 1.0, False), self.maskable,
                                 seed) for seed in seeds])

    def random(self, seeds: Sequence[int], ratio: float) -> list[dict[str, Any]]:
        """Random baseline: seeded uniform scores, one draw per seed, so masks are nested."""
        def masks(seed: int) -> Splits:
            key = jax.random.fold_in(jax.random.key(seed), 0x0DA2)
            return Splits(*(np.asarray(roar_mask(
                baselines.random_saliency(jax.random.fold_in(key, i), m).scores, m,
                ratio=ratio)) for i, m in enumerate(self.maskable)))

        return self._cells([Cell(self.cell_dir("random", seed, ratio, False), masks(seed), seed)
                            for seed in seeds])

    def unmasked_importance(self, explainer: str, seed: int) -> Splits:
        """Importance from the 0% model on the unmasked data (cached beside its cell)."""
        folder = self.cell_dir("unmasked", seed, 0.0, False)
        path = folder / f"scores-{self._slot(explainer)}.npz"

        def compute() -> dict[str, np.ndarray]:
            self.unmasked([seed])
            graphdef, initial = self._initial_model(seed)
            params, _ = checkpoint.restore(folder / "params", target=initial)
            return self._explain_all(graphdef, params, self.splits, explainer)

        return Splits(**cached_arrays(path, compute))

    def _explain_all(self, graphdef, params, splits: Splits, explainer: str) -> dict:
        return {name: explain(graphdef, params, data, explainer=explainer, task=self.task,
                              ig_steps=self.config.ig_steps,
                              batch_size=self.config.explain_batch_size)
                for name, data in zip(Splits._fields, splits, strict=True)}

    # -- one explainer's curves ----------------------------------------------------------
    def explainer_curves(self, explainer: str,
                         seeds: Sequence[int]) -> list[list[dict[str, Any]]]:
        """Per seed, the cells of the ratios strictly between 0 and 1 for one explainer."""
        recursive = self.config.recursive
        scores = {seed: self.unmasked_importance(explainer, seed) for seed in seeds}
        previous = {seed: Splits(*(np.zeros_like(m) for m in self.maskable)) for seed in seeds}
        curves: list[list[dict[str, Any]]] = [[] for _ in seeds]
        for ratio in self.config.ratios[1:-1]:
            jobs = []
            for seed in seeds:
                folder = self.cell_dir(self._slot(explainer), seed, ratio, recursive)
                if (folder / "result.json").is_file():
                    masks = self._masks(folder)  # what the cell was trained on
                else:
                    masks = Splits(*(np.asarray(roar_mask(s, m, p if recursive else None,
                                                          ratio=ratio))
                                     for s, m, p in zip(scores[seed], self.maskable,
                                                        previous[seed], strict=True)))

                def next_scores(graphdef, params, masked, path=folder / "scores.npz"):
                    write_arrays_atomic(path, **self._explain_all(graphdef, params, masked,
                                                                  explainer))

                # Recursive ROAR needs the next importance, also after the last ratio: a
                # longer schedule reuses it.
                jobs.append(Cell(folder, masks, seed, next_scores if recursive else None))
            for curve, job, record in zip(curves, jobs, self._cells(jobs), strict=True):
                curve.append(record)
                if recursive:
                    scores[job.seed] = Splits(**read_arrays(job.folder / "scores.npz"))
                    previous[job.seed] = job.masks
        return curves


class RoarResult(NamedTuple):
    """Curves and Eq. 3 summaries of a ROAR run.

    Attributes:
      ratios: the masking ratios.
      metric: the performance measure.
      curves: explainer -> ``(seeds, ratios)`` test performance.
      baseline: ``(seeds, ratios)`` random-baseline performance (0% and 100% shared).
      faithfulness: explainer -> per-seed Eq. 3 values (None where undefined).
      summary: explainer -> ``FaithfulnessSummary._asdict()``.
    """

    ratios: tuple[float, ...]
    metric: str
    curves: dict[str, np.ndarray]
    baseline: np.ndarray
    faithfulness: dict[str, list[float | None]]
    summary: dict[str, dict[str, float]]


def run_cells(runner: RoarRunner, *, share: tuple[int, int] = (0, 1),
              join_timeout: float = JOIN_TIMEOUT) -> RoarResult | None:
    """Every cell of a run (shared ones first), then the curves and Eq. 3 per seed.

    With ``share=(i, n)`` this process trains only the cells of every n-th seed from the
    i-th (a seed's cells depend on each other, never on another seed's), so n processes on
    hosts that share the cache folder split the run without talking to each other. Share 0
    then waits (at most `join_timeout` seconds) for every other seed's cells and reads them
    back; the other shares return None.

    Args:
      runner: a :class:`RoarRunner`.
      share: (this process's share, number of shares).
      join_timeout: how long share 0 waits for the other shares' cells.

    Returns:
      :class:`RoarResult` (None for a share other than 0).

    Raises:
      TimeoutError: share 0 waited `join_timeout` seconds, naming the shares to rerun.
    """
    index, count = share
    seeds = runner.config.seeds
    if count > 1:
        mine = seeds[index::count]
        print(f"share {index}/{count}: training the cells of seeds "
              f"{', '.join(map(str, mine)) or '(none)'}", file=sys.stderr, flush=True)
        if mine:
            _curves(runner, mine)
        if index != 0:
            return None
        _join(runner, share=share, timeout=join_timeout)
    return _curves(runner, seeds)


def _join(runner: RoarRunner, *, share: tuple[int, int], timeout: float) -> None:
    """Wait until every seed's cells are finished (their result.json), at most `timeout`
    seconds (:func:`smat.jobs.shares.join_shares`)."""
    join_shares(runner.config.seeds, lambda seed: all(
        (folder / "result.json").is_file() for folder in runner.seed_cells(seed)),
        share=share, timeout=timeout,
        describe=lambda seeds: f"the ROAR cells of seeds {', '.join(map(str, seeds))}")


def _curves(runner: RoarRunner, seeds: Sequence[int]) -> RoarResult:
    """The cells of `seeds` (trained, or read back when finished), their curves and Eq. 3."""
    config = runner.config
    metric = config.metric
    middle = config.ratios[1:-1]
    curves = {e: [] for e in config.explainers}
    first = [r["test"][metric] for r in runner.unmasked(seeds)]
    last = [r["test"][metric] for r in runner.all_masked(seeds)]
    middle_scores = [[r["test"][metric] for r in runner.random(seeds, ratio)] for ratio in middle]
    baseline = [[f, *(m[i] for m in middle_scores), la]
                for i, (f, la) in enumerate(zip(first, last, strict=True))]
    for explainer in config.explainers:
        for i, cells in enumerate(runner.explainer_curves(explainer, seeds)):
            curves[explainer].append([first[i], *(c["test"][metric] for c in cells), last[i]])
    base = np.asarray(baseline, np.float64)
    result_curves = {e: np.asarray(v, np.float64) for e, v in curves.items()}
    faithfulness, summary = {}, {}
    for explainer, values in result_curves.items():
        eq3 = roar_faithfulness(values, base, config.ratios,
                                min_denominator=config.min_denominator)
        faithfulness[explainer] = [float(v) if d else None
                                   for v, d in zip(eq3.values, eq3.defined, strict=True)]
        summary[explainer] = summarize_faithfulness(eq3)._asdict()
    return RoarResult(config.ratios, metric, result_curves, base, faithfulness, summary)


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name).strip("_") or "_"


def _masked_token_id(tokenizer: Any) -> int:
    if tokenizer is None or tokenizer.mask_token_id is None:
        raise ValueError("ROAR masks with the tokenizer's [MASK] token, but the tokenizer has "
                         "none; use a BERT/RoBERTa-style checkpoint")
    return int(tokenizer.mask_token_id)


def run_roar(*, data: DataConfig, roar: RoarConfig, preset: str = "small",
             train: TeacherTrainConfig | None = None, model: ModelSource | None = None,
             output_dir: str | Path, progress: bool = True, share: tuple[int, int] = (0, 1),
             join_timeout: float = JOIN_TIMEOUT) -> dict[str, Any]:
    """The ``smat roar`` job: load and split the data, run every cell, write the report.

    Writes under `output_dir`: ``config.json``, the cell cache ``cache/``, ``roar.json``
    (curves, per-seed Eq. 3, mean and 95% CI) and ``roar.png`` (the plot). With `share`
    the seeds are split over processes that share `output_dir` (:func:`run_cells`); only
    share 0 writes the report.

    Args:
      data: source, task, max_len and split seed (the student-protocol fields are unused).
      roar: what to evaluate.
      preset: a key of :data:`PRESETS` (model and default training settings).
      train: training settings (default: the preset's).
      model: the pretrained start of every model (default: the preset's).
      output_dir: run folder; rerunning with it resumes.
      progress: progress bars and one line per finished seed.
      share: (this process's share of the seeds, number of shares).
      join_timeout: how long share 0 waits for the other shares' cells.

    Returns:
      The report written to ``roar.json``; a share other than 0 returns ``{"share": "I/N",
      "seeds": [...], "cells_trained": K}`` and writes no report.
    """
    from smat.data import tokenize

    if preset not in PRESETS:
        raise ValueError(f"unknown preset {preset!r}; choose one of {sorted(PRESETS)}")
    train = train if train is not None else PRESETS[preset].train
    model = model if model is not None else PRESETS[preset].model
    output_dir = Path(output_dir)
    write_json_atomic(output_dir / "config.json", {
        "data": data.settings(), "roar": dataclasses.asdict(roar), "preset": preset,
        "train": dataclasses.asdict(train), "model": model.settings()})
    dataset = load_examples(data)
    num_labels = dataset.num_labels if data.task == "classification" else 1

    def make_model(seed: int) -> SequenceClassifier:
        return start_model(model, task=data.task, num_labels=num_labels, seed=seed)[0]

    _, tokenizer = start_model(model, task=data.task, num_labels=num_labels, seed=0)
    encoded = tokenize(dataset, tokenizer, max_len=data.max_len)
    rows = np.arange(len(encoded.labels))
    if roar.num_examples is not None and roar.num_examples < rows.size:
        rows = np.sort(np.random.default_rng(data.split_seed).permutation(rows.size)
                       [:roar.num_examples])
    encoded = take(encoded, rows)
    parts = train_validation_test_split(len(rows), seed=data.split_seed,
                                        validation_fraction=roar.validation_fraction,
                                        test_fraction=roar.test_fraction)
    splits = Splits(take(encoded, parts.train), take(encoded, parts.validation),
                    take(encoded, parts.test))
    runner = RoarRunner(make_model=make_model, splits=splits,
                        mask_token_id=_masked_token_id(tokenizer), config=roar, train=train,
                        task=data.task, cache_dir=output_dir / "cache",
                        dataset=f"{data.source}-{data.task}", model=f"{preset}-{model.name}",
                        progress=progress)
    result = run_cells(runner, share=share, join_timeout=join_timeout)
    if result is None:
        return {"share": f"{share[0]}/{share[1]}", "seeds": list(roar.seeds[share[0]::share[1]]),
                "cells_trained": runner.trained_cells}
    mode = "Recursive ROAR" if roar.recursive else "ROAR"
    plot_roar(result.curves, result.baseline, result.ratios, metric=result.metric,
              title=f"{mode}: {data.source}, {preset} preset, {len(roar.seeds)} seeds",
              path=output_dir / "roar.png")
    report = {"mode": mode, "ratios": list(result.ratios), "metric": result.metric,
              "seeds": list(roar.seeds),
              "curves": {e: v.tolist() for e, v in result.curves.items()},
              "random": result.baseline.tolist(), "faithfulness": result.faithfulness,
              "summary": result.summary, "cells_trained": runner.trained_cells,
              "sizes": {k: int(len(d.labels)) for k, d in splits._asdict().items()}}
    write_json_atomic(output_dir / "roar.json", report)
    return report


def roar_markdown_table(report: dict[str, Any]) -> str:
    """Markdown table of a ``roar.json`` report: curve means per ratio and Eq. 3 [95% CI]."""
    ratios = report["ratios"]
    header = ("| explainer | " + " | ".join(f"{100 * r:g}%" for r in ratios)
              + " | faithfulness (Eq. 3) [95% CI] |")
    lines = [header, "|" + "---|" * (len(ratios) + 2)]
    rows = [("random", report["random"], None), *((e, v, report["summary"][e])
                                                   for e, v in report["curves"].items())]
    for name, values, summary in rows:
        means = np.mean(np.asarray(values), axis=0)
        eq3 = "—" if summary is None else (
            "undefined" if summary["num_defined"] == 0 else
            f"{100 * summary['mean']:.1f} [{100 * summary['low']:.1f}, "
            f"{100 * summary['high']:.1f}]" + (f" ({summary['num_undefined']} undefined)"
                                               if summary["num_undefined"] else ""))
        lines.append(f"| {name} | " + " | ".join(f"{100 * m:.1f}" for m in means)
                     + f" | {eq3} |")
    return "\n".join(lines)
