"""Does SMaT find a planted mechanism? Students of the planted task, trained by smat's own
student trainer, and the direction diagnostic of SMaT's outer step.

The task (:mod:`smat.evaluation.planted_task`) plants the answer: only some teacher heads
point at the token that decides the label. Every arm trains its students with
:func:`smat.training.student.train_student` (the trainer of the SST-2 experiments), so what
is tested here is the production SMaT step and loop:

- ``none`` (beta = 0); ``static_mean`` / ``static_oracle``: the ``attention_heads`` setting
  with the uniform coefficients or only the informative heads, frozen; ``smat_<normalizer>_
  <rate>``: the learned explainer (Eq. 11) at each outer Adam rate.
- **Direction diagnostic** (:func:`smat.training.meta_direction.meta_direction`): the mean
  meta-gradient of Eq. 9 at uniform coefficients over many (train, validation) batch pairs,
  with its z-score per head, for the students of the probe arms after some epochs, under
  the SMaT step's own settings and under variants (beta, the pilot's step size, no
  gradient clipping, a uniform student explainer).

Each (arm, data seed) cell trains its seeds as one vmapped program and is written to
``cells/<arm>/data<seed>.json`` (probes beside it), so a rerun reuses every finished cell.
"""

from __future__ import annotations

import dataclasses
import functools
import shutil
import time
import zlib
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from smat import explainers
from smat.data import Encoded
from smat.evaluation.planted_task import (
    CLS,
    SEP,
    STATIC_ARMS,
    PlantedRows,
    PlantedTask,
    planted_rows,
    static_coefficients,
)
from smat.json_files import read_json
from smat.models import SequenceClassifier, TextConfig, functional
from smat.models.inference import predict_logits
from smat.registry import FIXED_HEADS
from smat.store.run_log import write_json_atomic
from smat.training import scaffold
from smat.training.loop import LoopConfig
from smat.training.meta_direction import meta_direction
from smat.training.student import (
    AttentionExplainerFn,
    StudentRows,
    StudentTrainConfig,
    as_batch,
    explainer_configs,
    train_student,
)

KERNEL_INITS = ("fan_in", "fan_in_encoder", "bert")
# The direction diagnostic's settings: the SMaT step's own (per normalizer), then one
# suspect at a time: beta, the pilot's step size, the inner gradient clip, and the
# student's learned explainer (replaced by a uniform one).
PROBE_VARIANTS = ("sparsemax", "softmax", "sparsemax_beta1", "sparsemax_beta25",
                  "sparsemax_pilot_lr_x10", "sparsemax_no_clip",
                  "sparsemax_uniform_student_explainer")


@dataclasses.dataclass(frozen=True, kw_only=True)
class PlantedConfig:
    """One variant of the planted-mechanism experiment.

    Attributes:
      task: the planted task (vocabulary, teacher heads, their signal and noise).
      data_seeds: each draws its own data set and the students' shared initialisation.
      seeds: per data seed, the student seeds (batch order, dropout, validation draws).
      num_train, num_valid, num_test: examples of the student's splits.
      hidden_size, num_layers, num_heads, intermediate_size, dropout: the student.
      pooling: the student's pooling before its classification head.
      kernel_init: "fan_in_encoder" (the encoder's dense kernels drawn with std
        1 / sqrt(fan-in), the task head left at smat.models' 0.02, so the student starts
        near 50/50 like the paper's pretrained students with a fresh head), "fan_in" (the
        task head too: a confidently random start) or "bert" (0.02 everywhere); see
        :func:`student_params`.
      batch_size: train and validation (outer step) batch.
      epochs: passes over the training rows (every step a meta step for SMaT); the students
        are evaluated after each and never stop early.
      inner_learning_rate: the student's SGD rate (a from-scratch student needs more than
        the reference 5e-3 to learn anything in a few hundred steps).
      beta: explanation-loss weight of every explained arm (the paper's 5 for attention).
      outer_learning_rates: Adam rates of the SMaT arms.
      normalizers: NORMALIZE of the SMaT arms (teacher and student explainers alike; the
        static arms' student explainer uses sparsemax).
      probe_arms: the arms whose students the direction diagnostic probes.
      probe_epochs: the epochs after which they are probed (0 = at initialisation).
      probe_pairs: (train, validation) batch pairs per probe.
      probe_variants: which of :data:`PROBE_VARIANTS` to probe.
    """

    task: PlantedTask = PlantedTask()
    data_seeds: tuple[int, ...] = (0, 1)
    seeds: tuple[int, ...] = (0, 1, 2, 3, 4)
    num_train: int = 256
    num_valid: int = 256
    num_test: int = 1024
    hidden_size: int = 32
    num_layers: int = 2
    num_heads: int = 4
    intermediate_size: int = 64
    dropout: float = 0.1
    pooling: str = "scalar_mix"
    kernel_init: str = "fan_in_encoder"
    batch_size: int = 32
    epochs: int = 40
    inner_learning_rate: float = 0.1
    beta: float = 5.0
    outer_learning_rates: tuple[float, ...] = (5e-4, 5e-3, 5e-2)
    normalizers: tuple[str, ...] = ("sparsemax", "softmax")
    probe_arms: tuple[str, ...] = ("none", *STATIC_ARMS)
    probe_epochs: tuple[int, ...] = (0, 1, 3, 6, 12, 25, 40)
    probe_pairs: int = 64
    probe_variants: tuple[str, ...] = PROBE_VARIANTS

    def __post_init__(self) -> None:
        if self.num_train < self.batch_size:
            raise ValueError(f"PlantedConfig.num_train={self.num_train} is less than one batch "
                             f"of {self.batch_size}.")
        if max(self.probe_epochs) > self.epochs:
            raise ValueError(f"PlantedConfig.probe_epochs={self.probe_epochs!r} go beyond "
                             f"epochs={self.epochs}.")
        if self.kernel_init not in KERNEL_INITS:
            raise ValueError(f"PlantedConfig.kernel_init={self.kernel_init!r}; expected one "
                             f"of {KERNEL_INITS}.")
        unknown = sorted(set(self.probe_variants) - set(PROBE_VARIANTS))
        if unknown:
            raise ValueError(f"PlantedConfig.probe_variants: unknown {unknown}; choose from "
                             f"{PROBE_VARIANTS}.")
        if self.probe_pairs < 2:
            raise ValueError(f"PlantedConfig.probe_pairs={self.probe_pairs}; expected >= 2.")

    @property
    def steps_per_epoch(self) -> int:
        return self.num_train // self.batch_size

    @property
    def steps(self) -> int:
        return self.epochs * self.steps_per_epoch

    @property
    def arms(self) -> tuple[str, ...]:
        return ("none", *STATIC_ARMS, *(smat_arm(normalizer, rate)
                                        for normalizer in self.normalizers
                                        for rate in self.outer_learning_rates))


def smat_arm(normalizer: str, rate: float) -> str:
    return f"smat_{normalizer}_{rate:.0e}"


class PlantedData:
    """The student's train, validation and test splits of one data seed."""

    def __init__(self, config: PlantedConfig, data_seed: int):
        rng = np.random.default_rng([data_seed, 33])
        self.train, self.valid, self.test = (
            student_rows(planted_rows(config.task, num, rng))
            for num in (config.num_train, config.num_valid, config.num_test))


def student_rows(rows: PlantedRows) -> StudentRows:
    """The task's rows as the student trainer's cached-teacher rows."""
    num, length = rows.input_ids.shape
    return StudentRows(
        input_ids=rows.input_ids, attention_mask=np.ones((num, length), np.int32),
        token_type_ids=np.zeros((num, length), np.int32),
        special_tokens_mask=np.isin(rows.input_ids, (CLS, SEP)), labels=rows.labels,
        teacher_logits=rows.teacher_logits, teacher_features=rows.teacher_features,
        teacher_scores=np.zeros((num, 0), np.float32))


@functools.cache
def student_params(config: PlantedConfig, data_seed: int) -> tuple[nnx.GraphDef, nnx.State]:
    """(graphdef, params) of the data seed's student, shared by its seeds (cached: copy
    before donating).

    With ``kernel_init="fan_in"`` every dense kernel is redrawn with standard deviation
    1 / sqrt(fan-in); with "fan_in_encoder" every one but the task head's. BERT's 0.02 suits
    a large model trained by Adam; with it this small student under plain SGD barely moves
    in a few hundred steps (its attention logits and value paths start near 0 and their
    gradients are products of 0.02-sized factors).
    """
    text = TextConfig(vocab_size=config.task.vocab_size, hidden_size=config.hidden_size,
                      num_layers=config.num_layers, num_heads=config.num_heads,
                      intermediate_size=config.intermediate_size,
                      max_position_embeddings=config.task.seq_len,
                      hidden_dropout=config.dropout, attention_dropout=config.dropout)
    graphdef, params = functional.split(SequenceClassifier(
        text, num_labels=2, pooling=config.pooling, rngs=nnx.Rngs(data_seed)))
    if config.kernel_init == "bert":
        return graphdef, params

    def redraw(path, leaf):
        names = [str(entry.key) for entry in path if hasattr(entry, "key")]
        if not names or not names[-1].endswith("kernel") or (
                names[0] == "classifier" and config.kernel_init == "fan_in_encoder"):
            return leaf
        fan_in = (config.intermediate_size if names[-2:] == ["output", "kernel"]
                  else config.hidden_size)
        rng = np.random.default_rng([data_seed, zlib.crc32("/".join(names).encode())])
        return jnp.asarray(rng.standard_normal(leaf.shape) / np.sqrt(fan_in), leaf.dtype)

    return graphdef, jax.tree_util.tree_map_with_path(redraw, params)


def arm_settings(config: PlantedConfig, arm: str) -> StudentTrainConfig:
    """The student trainer's settings of an arm (see :attr:`PlantedConfig.arms`).

    Raises:
      ValueError: an unknown arm.
    """
    if arm not in config.arms:
        raise ValueError(f"unknown arm {arm!r}; choose from {list(config.arms)}")
    loop = LoopConfig(batch_size=config.batch_size, max_epochs=config.epochs,
                      patience=config.epochs, length_multiple=config.task.seq_len,
                      parallel_seeds=True)
    common = dict(inner_learning_rate=config.inner_learning_rate, loop=loop)
    if arm == "none":
        return StudentTrainConfig(explainer="none", **common)
    if arm in STATIC_ARMS:
        weights = static_coefficients(config.task, arm)
        return StudentTrainConfig(explainer=FIXED_HEADS, beta=config.beta,
                                  head_weights=tuple(map(float, weights)), **common)
    _, normalizer, rate = arm.split("_")
    return StudentTrainConfig(explainer="smat", beta=config.beta, normalizer=normalizer,
                              outer_learning_rate=float(rate), **common)


def explainer_pair(config: PlantedConfig, normalizer: str
                   ) -> tuple[explainers.AttentionExplainerConfig,
                              explainers.AttentionExplainerConfig]:
    """(teacher, student) explainer configs: the teacher's one synthetic layer of heads, the
    student's every head."""
    student = explainer_configs("smat", num_layers=config.num_layers,
                                num_heads=config.num_heads, normalizer=normalizer)[1]
    teacher = explainers.AttentionExplainerConfig(
        num_layers=1, num_heads=len(config.task.head_targets), normalizer=normalizer)
    return teacher, student


def head_lambda(normalizer: str, phi) -> np.ndarray:
    """The normalized head coefficients lambda of phi (..., n)."""
    return np.asarray(explainers.get_normalizer(normalizer)(jnp.asarray(phi)))


def _simulability(graphdef, params, rows: StudentRows) -> float:
    logits = predict_logits(graphdef, params, Encoded(*rows[:5]), batch_size=len(rows.labels),
                            length_multiple=rows.input_ids.shape[1])
    return float(np.mean(np.argmax(logits, -1) == np.argmax(rows.teacher_logits, -1)))


def train_cell(config: PlantedConfig, arm: str, data: PlantedData, data_seed: int, *,
               folder: Path, probe: bool = False) -> tuple[dict[str, Any], dict[int, list]]:
    """Train every seed of one (arm, data seed) cell with the student trainer.

    Returns:
      ``(record, probes)``: the cell's record (per epoch: validation and test simulability
      of each seed, and SMaT's head coefficients), and (when `probe`) per probe step each
      seed's (student parameters, student explainer parameters).
    """
    settings = arm_settings(config, arm)
    graphdef, params = student_params(config, data_seed)
    learned = settings.explainer == "smat"
    informative = list(config.task.informative_heads)
    seeds = list(config.seeds)
    first = {"step": 0, "valid": [_simulability(graphdef, params, data.valid)] * len(seeds),
             "test": [_simulability(graphdef, params, data.test)] * len(seeds)}
    evaluations = {0: first}
    lambda_trace: dict[int, list] = {}
    student_cfg = explainer_pair(config, settings.normalizer)[1]
    phi_s = explainers.init(None, student_cfg) if settings.resolved_beta > 0 else None
    probes = {0: [(params, phi_s)] * len(seeds)} if probe else {}
    if learned:
        uniform = explainers.init(None, explainer_pair(config, settings.normalizer)[0]).phi
        lambda_trace[0] = [head_lambda(settings.normalizer, uniform).round(4).tolist()] * len(
            seeds)
        first["informative_weight"] = [float(sum(lambda_trace[0][0][h] for h in informative))
                                       ] * len(seeds)

    def record_epoch(i: int, epoch: int, state: scaffold.ScaffoldState) -> None:
        step = (epoch + 1) * config.steps_per_epoch
        entry = evaluations.setdefault(step, {"step": step, "valid": [None] * len(seeds),
                                              "test": [None] * len(seeds)})
        entry["valid"][i] = _simulability(graphdef, state.student_params, data.valid)
        entry["test"][i] = _simulability(graphdef, state.student_params, data.test)
        if learned:
            lam = head_lambda(settings.normalizer, state.teacher_explainer_params.phi)
            lambda_trace.setdefault(step, [None] * len(seeds))[i] = lam.round(4).tolist()
            entry.setdefault("informative_weight", [None] * len(seeds))[i] = float(
                lam[informative].sum())
        if probe and epoch + 1 in config.probe_epochs:
            probes.setdefault(step, [None] * len(seeds))[i] = (
                state.student_params, state.student_explainer_params)

    shutil.rmtree(folder, ignore_errors=True)  # a cell is reused whole or trained afresh
    start = time.perf_counter()
    results = train_student([nnx.merge(graphdef, params)] * len(seeds), data.train, data.valid,
                            data.test, task="classification", config=settings,
                            output_dir=folder, seeds=seeds, progress=False,
                            on_epoch_end=record_epoch)
    entries = [evaluations[step] for step in sorted(evaluations)]
    record = {"arm": arm, "data_seed": data_seed, "seeds": seeds,
              "final_test": entries[-1]["test"],
              "best_valid_test": [r.test["accuracy"] for r in results],
              "best_step": [r.best_step for r in results], "evaluations": entries,
              "seconds": round(time.perf_counter() - start, 1)}
    if learned:
        phi = np.stack([np.asarray(r.teacher_explainer_params.phi) for r in results])
        final = head_lambda(settings.normalizer, phi)
        record.update(final_phi=phi.tolist(), final_lambda=final.tolist(),
                      informative_weight=final[:, informative].sum(-1).tolist(),
                      lambda_trace=[{"step": step, "lambda": lambda_trace[step]}
                                    for step in sorted(lambda_trace)])
    return record, probes


def probe_variants(config: PlantedConfig, arm: str) -> dict[str, tuple[str, dict[str, Any], str]]:
    """name -> (normalizer, ScaffoldConfig overrides, student explainer) of the probes.

    The student explainer is the probed student's own ("own"; uniform for the none arm,
    which has none) or a fresh uniform one ("uniform")."""
    variants = {
        "sparsemax": ("sparsemax", {}, "own"),
        "softmax": ("softmax", {}, "own"),
        "sparsemax_beta1": ("sparsemax", {"beta": 1.0}, "own"),
        "sparsemax_beta25": ("sparsemax", {"beta": 25.0}, "own"),
        "sparsemax_pilot_lr_x10": ("sparsemax",
                                   {"inner_learning_rate": 10 * config.inner_learning_rate},
                                   "own"),
        "sparsemax_no_clip": ("sparsemax", {"inner_clip_norm": 1e6}, "own"),
        "sparsemax_uniform_student_explainer": ("sparsemax", {}, "uniform")}
    return {name: variants[name] for name in config.probe_variants
            if not (arm == "none" and name == "sparsemax_uniform_student_explainer")}


def _probe_batches(config: PlantedConfig, data: PlantedData, *, data_seed: int, seed: int,
                   step: int) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """(P, B, ...) train and validation batches of one probe (fixed per seed and step)."""
    rng = np.random.default_rng([data_seed, seed, step, 3])

    def pairs(rows: StudentRows) -> dict[str, np.ndarray]:
        batches = [as_batch(StudentRows(*(field[rng.choice(len(rows.labels), config.batch_size,
                                                             replace=False)]
                                          for field in rows)))
                   for _ in range(config.probe_pairs)]
        return {key: np.stack([b[key] for b in batches]) for key in batches[0]}

    return pairs(data.train), pairs(data.valid)


def probe_cell(config: PlantedConfig, arm: str, data: PlantedData, data_seed: int,
               states_at: dict[int, list]) -> dict[str, Any]:
    """The direction diagnostic for every seed of a cell at every probe step and variant."""
    graphdef = student_params(config, data_seed)[0]
    out: dict[str, Any] = {"arm": arm, "data_seed": data_seed, "probes": []}
    for step, states in sorted(states_at.items()):
        for seed, (theta, own_phi_s) in zip(config.seeds, states, strict=True):
            trains, valids = _probe_batches(config, data, data_seed=data_seed, seed=seed,
                                            step=step)
            for name, (normalizer, overrides, student_explainer) in probe_variants(
                    config, arm).items():
                teacher_cfg, student_cfg = explainer_pair(config, normalizer)
                step_config = scaffold.ScaffoldConfig(**{
                    "beta": config.beta, "inner_learning_rate": config.inner_learning_rate,
                    **overrides})
                functions = scaffold.ScaffoldFunctions(
                    student_forward=scaffold.ClassifierForward(graphdef),
                    student_explainer=AttentionExplainerFn(student_cfg),
                    teacher_explainer=AttentionExplainerFn(teacher_cfg, example_first=True))
                phi_s = own_phi_s
                # the static arms' students learned sparsemax explainers
                if phi_s is None or student_explainer == "uniform" or (
                        arm in STATIC_ARMS and normalizer != "sparsemax"):
                    phi_s = explainers.init(None, student_cfg)
                result = meta_direction(explainers.init(None, teacher_cfg), theta, phi_s,
                                        trains, valids, config=step_config, functions=functions)
                out["probes"].append({
                    "step": step, "seed": seed, "variant": name,
                    "mean": np.asarray(result.mean.phi).tolist(),
                    "standard_error": np.asarray(result.standard_error.phi).tolist(),
                    "z": np.asarray(result.z_score.phi).tolist(),
                    "outer_loss": float(np.mean(result.outer_loss))})
    return out


def run_cells(config: PlantedConfig, output_dir: Path, arms: list[str], *,
              progress: bool = True) -> tuple[list[dict], list[dict]]:
    """Train every (arm, data seed) cell not yet on disk and probe the probe arms' students.

    Returns:
      (records, probes) of every cell, finished earlier or now.
    """
    start = time.perf_counter()
    records, probes = [], []
    for data_seed in config.data_seeds:
        data = PlantedData(config, data_seed)
        for arm in arms:
            cell_path = output_dir / "cells" / arm / f"data{data_seed}.json"
            probe_path = cell_path.with_name(f"data{data_seed}_direction.json")
            wants_probe = arm in config.probe_arms
            if cell_path.is_file() and (not wants_probe or probe_path.is_file()):
                records.append(read_json(cell_path))
                probes += [read_json(probe_path)] if wants_probe else []
                continue
            record, states_at = train_cell(config, arm, data, data_seed,
                                           folder=cell_path.with_suffix(""), probe=wants_probe)
            write_json_atomic(cell_path, record)
            records.append(record)
            if wants_probe:
                tic = time.perf_counter()
                probe = probe_cell(config, arm, data, data_seed, states_at)
                probe["seconds"] = round(time.perf_counter() - tic, 1)
                write_json_atomic(probe_path, probe)
                probes.append(probe)
            if progress:
                print(f"[{time.perf_counter() - start:7.0f} s] {arm} data{data_seed}: final "
                      f"test {np.median(record['final_test']):.3f} ({record['seconds']:.0f} s "
                      "training)", flush=True)
    return records, probes
