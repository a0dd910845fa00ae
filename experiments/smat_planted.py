"""Does SMaT find a planted mechanism? A synthetic task with a known answer.

Fernandes et al, "Learning to Scaffold: Optimizing Model Explanations for Teaching", 2022,
§3 (Eqs. 3-9) claims that the outer step learns teacher-explainer head coefficients that
make the explanation teach better. Here the answer is planted, so the claim can be checked
directly:

- **Task.** Sequences ``[CLS] body [SEP]`` of a small vocabulary. Exactly one body token
  is a *key* token, drawn from one of two sets of key tokens; its set decides the label.
  Another body token is a *decoy* (a third set, independent of the label); the rest are
  filler. The teacher is the rule itself (its logits are +-2), so simulability is accuracy.
- **Teacher explainer rows.** The teacher has one layer of 8 heads whose query-pooled
  attention logits are synthetic: the heads in ``HEAD_TARGETS`` marked ``key`` (the
  informative heads) put a logit of ``signal`` on the key token, the others on the decoy,
  on [CLS] or on [SEP]; every logit gets Gaussian noise. The uniform mean of the heads puts
  *less* weight on the key than on the decoy.
- **Student.** A small from-scratch BERT (:class:`smat.models.SequenceClassifier`, 2
  layers x 4 heads, width 32), every seed from the same initialisation of its data seed
  (encoder kernels drawn with std 1/sqrt(fan-in), the task head small so it starts near
  50/50), trained by smat's own jitted :data:`smat.training.scaffold.scaffold_seed_step`
  on cached teacher outputs (SGD 0.1, beta 5, one meta step per inner step as in the
  paper), 300 steps on 256 examples. Labels alone teach it little in that time (about 60%),
  the oracle explanation everything (100%).
- **Arms.** ``none`` (beta = 0); ``static_mean`` (the uniform head coefficients, frozen);
  ``static_oracle`` (only the informative heads, frozen); SMaT with the sparsemax and the
  softmax normalizer at each outer learning rate.
- **Reported.** Per arm over seeds x data seeds: test simulability (agreement with the
  teacher on held-out data) of the final student and of the best-validation one, median
  [IQR]; the informative heads' total coefficient lambda at the end; and the **direction
  diagnostic** (:func:`smat.training.meta_direction.meta_direction`): the mean
  meta-gradient of Eq. 9 at uniform coefficients over many (train, validation) batch pairs,
  with its z-score per head, for the students of the probe arms (none, static_mean,
  static_oracle) after each probe step, under the SMaT step's own settings and under
  variants (beta, the pilot's step size, no gradient clipping, a uniform student explainer).

Variants (``get_config``): ``cpu`` (2 data seeds x 5 seeds, 300 steps, outer rates 5e-4,
5e-3 and 5e-2, probes after steps 0, 10, 25, 50, 100, 200 and 300); ``cpu_fan_in`` (the
same with the task head drawn like the encoder's kernels, so the student starts confidently
random; probes after 0, 10, 50, 100 and 200); ``smoke`` (the tests: one data seed, 2 seeds,
a 1-layer student, 6 steps, one outer rate and normalizer).

    python experiments/smat_planted.py --variant cpu --output-dir runs/smat_planted_cpu
    python experiments/smat_planted.py --variant cpu_fan_in \
        --output-dir runs/smat_planted_cpu_fan_in
    python experiments/smat_planted.py --variant smoke --output-dir runs/smat_planted_smoke

Resumable: every finished (arm, data seed) cell and every probe is a JSON file under
``OUTPUT_DIR/cells`` and is reused by a rerun. Writes ``config.json``, ``results.json`` and
``table.md``. Results: ``docs/results/smat_planted_cpu.md``.

Measured runtime (2 CPU cores shared with another experiment): ``cpu`` 1,276 s wall (21
min: the training of the 18 cells about 7 min, the 6 probe cells about 14 min);
``cpu_fan_in`` 704 s; ``smoke`` about 45 s, nearly all of it compilation.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import time
import zlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from smat import explainers
from smat.cli.experiment import command_runtime
from smat.evaluation.statistics import format_median_iqr
from smat.json_files import read_json
from smat.models import SequenceClassifier, TextConfig, functional
from smat.parallel import commit
from smat.store.run_log import write_json_atomic
from smat.training import scaffold
from smat.training.loop import seed_slice, stack_seeds
from smat.training.meta_direction import meta_direction
from smat.training.student import AttentionExplainerFn

VARIANTS = ("cpu", "cpu_fan_in", "smoke")
KERNEL_INITS = ("fan_in", "fan_in_encoder", "bert")
LAMBDA_EVERY = 5  # steps between the recorded head coefficients of the SMaT arms
PAD, CLS, SEP = 0, 1, 2
TARGETS = ("key", "decoy", "cls", "sep")
# What each of the teacher's 8 heads points at; the "key" heads are the informative ones.
HEAD_TARGETS = ("decoy", "cls", "key", "decoy", "sep", "key", "decoy", "cls")
# The direction diagnostic's settings: the SMaT step's own (per normalizer), then the
# issue's suspects one at a time: beta, the pilot's step size, the inner gradient clip, and
# the student's learned explainer (replaced by a uniform one).
PROBE_VARIANTS = ("sparsemax", "softmax", "sparsemax_beta1", "sparsemax_beta25",
                  "sparsemax_pilot_lr_x10", "sparsemax_no_clip",
                  "sparsemax_uniform_student_explainer")


@dataclasses.dataclass(frozen=True, kw_only=True)
class PlantedConfig:
    """One variant of the planted-mechanism experiment.

    Attributes:
      data_seeds: each draws its own data set and the students' shared initialisation.
      seeds: per data seed, the student seeds (batch order, dropout, validation draws).
      num_train, num_valid, num_test: examples of the student's splits.
      seq_len: T, tokens per sequence including [CLS] and [SEP].
      num_key: key tokens per label (2 * num_key key tokens in all).
      num_decoy: decoy tokens; num_filler: filler tokens.
      signal: the pooled attention logit a teacher head puts on its target token.
      noise: standard deviation of the Gaussian noise on every teacher logit.
      head_targets: per teacher head, one of "key", "decoy", "cls", "sep".
      hidden_size, num_layers, num_heads, intermediate_size, dropout: the student.
      pooling: the student's pooling before its classification head.
      kernel_init: "fan_in_encoder" (the encoder's dense kernels drawn with std
        1 / sqrt(fan-in), the task head left at smat.models' 0.02, so the student starts
        near 50/50 like the paper's pretrained students with a fresh head), "fan_in" (the
        task head too: a confidently random start) or "bert" (0.02 everywhere); see
        :func:`student`.
      batch_size: train and validation (outer step) batch.
      steps: student steps (each one a meta step for SMaT).
      eval_every: steps between the evaluations of validation and test simulability.
      inner_learning_rate: the student's SGD rate (a from-scratch student needs more than
        the reference 5e-3 to learn anything in a few hundred steps).
      beta: explanation-loss weight of every explained arm (the paper's 5 for attention).
      outer_learning_rates: Adam rates of the SMaT arms.
      normalizers: NORMALIZE of the SMaT arms (teacher and student explainers alike).
      probe_arms: the arms whose students the direction diagnostic probes.
      probe_steps: the student steps after which they are probed (0 = at initialisation).
      probe_pairs: (train, validation) batch pairs per probe.
      probe_variants: which of :data:`PROBE_VARIANTS` to probe.
    """

    data_seeds: tuple[int, ...] = (0, 1)
    seeds: tuple[int, ...] = (0, 1, 2, 3, 4)
    num_train: int = 256
    num_valid: int = 256
    num_test: int = 1024
    seq_len: int = 16
    num_key: int = 16
    num_decoy: int = 16
    num_filler: int = 77
    signal: float = 4.0
    noise: float = 0.5
    head_targets: tuple[str, ...] = HEAD_TARGETS
    hidden_size: int = 32
    num_layers: int = 2
    num_heads: int = 4
    intermediate_size: int = 64
    dropout: float = 0.1
    pooling: str = "scalar_mix"
    kernel_init: str = "fan_in_encoder"
    batch_size: int = 32
    steps: int = 300
    eval_every: int = 25
    inner_learning_rate: float = 0.1
    beta: float = 5.0
    outer_learning_rates: tuple[float, ...] = (5e-4, 5e-3, 5e-2)
    normalizers: tuple[str, ...] = ("sparsemax", "softmax")
    probe_arms: tuple[str, ...] = ("none", "static_mean", "static_oracle")
    probe_steps: tuple[int, ...] = (0, 10, 25, 50, 100, 200, 300)
    probe_pairs: int = 64
    probe_variants: tuple[str, ...] = PROBE_VARIANTS

    def __post_init__(self) -> None:
        unknown = sorted(set(self.head_targets) - set(TARGETS))
        if unknown or "key" not in self.head_targets:
            raise ValueError(f"PlantedConfig.head_targets={self.head_targets!r}: each one of "
                             f"{TARGETS}, at least one 'key'.")
        if max(self.probe_steps) > self.steps:
            raise ValueError(f"PlantedConfig.probe_steps={self.probe_steps!r} go beyond "
                             f"steps={self.steps}.")
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
    def vocab_size(self) -> int:
        return 3 + 2 * self.num_key + self.num_decoy + self.num_filler

    @property
    def informative_heads(self) -> tuple[int, ...]:
        return tuple(h for h, target in enumerate(self.head_targets) if target == "key")

    @property
    def arms(self) -> tuple[str, ...]:
        return ("none", "static_mean", "static_oracle", *(
            smat_arm(normalizer, rate) for normalizer in self.normalizers
            for rate in self.outer_learning_rates))


def smat_arm(normalizer: str, rate: float) -> str:
    return f"smat_{normalizer}_{rate:.0e}"


def get_config(variant: str) -> PlantedConfig:
    """The settings of one variant (one of :data:`VARIANTS`).

    Raises:
      ValueError: an unknown variant.
    """
    if variant == "cpu":
        return PlantedConfig()
    if variant == "cpu_fan_in":
        # The task head drawn like the encoder's kernels: a student that starts confidently
        # random (validation loss about 1.4 instead of ln 2).
        return PlantedConfig(kernel_init="fan_in", probe_steps=(0, 10, 50, 100, 200))
    if variant == "smoke":
        return PlantedConfig(data_seeds=(0,), seeds=(0, 1), num_train=64, num_valid=64,
                             num_test=128, steps=6, eval_every=3, outer_learning_rates=(5e-2,),
                             normalizers=("sparsemax",), probe_arms=("static_mean",),
                             probe_steps=(0, 3), probe_pairs=4, probe_variants=("sparsemax",),
                             num_layers=1)
    raise ValueError(f"unknown variant {variant!r}; choose from {list(VARIANTS)}")


# ------------------------------------------------------------------------------- the task


class Rows(NamedTuple):
    """One split with the teacher's cached outputs, one row per example."""

    input_ids: np.ndarray  # (N, T) int32
    attention_mask: np.ndarray  # (N, T) int32
    token_type_ids: np.ndarray  # (N, T) int32
    teacher_logits: np.ndarray  # (N, 2) float32
    teacher_features: np.ndarray  # (N, 1, H, T) float32: pooled attention logits
    key_position: np.ndarray  # (N,) int: where the deciding token is


def make_rows(config: PlantedConfig, num: int, rng: np.random.Generator) -> Rows:
    """``num`` examples of the planted task (see the module docstring)."""
    t, body = config.seq_len, config.seq_len - 2
    key_start, decoy_start = 3, 3 + 2 * config.num_key
    filler_start = decoy_start + config.num_decoy
    labels = rng.integers(0, 2, size=num)
    ids = rng.integers(filler_start, config.vocab_size, size=(num, t))
    ids[:, 0], ids[:, -1] = CLS, SEP
    positions = np.stack([rng.choice(body, size=2, replace=False) for _ in range(num)]) + 1
    key_pos, decoy_pos = positions[:, 0], positions[:, 1]
    rows = np.arange(num)
    ids[rows, key_pos] = key_start + labels * config.num_key + rng.integers(0, config.num_key,
                                                                            size=num)
    ids[rows, decoy_pos] = decoy_start + rng.integers(0, config.num_decoy, size=num)
    where = {"key": key_pos, "decoy": decoy_pos, "cls": np.zeros(num, int),
             "sep": np.full(num, t - 1)}
    heads = len(config.head_targets)
    features = config.noise * rng.standard_normal((num, 1, heads, t))
    for h, target in enumerate(config.head_targets):
        features[rows, 0, h, where[target]] += config.signal
    logits = np.where(labels[:, None] == 1, [[-2.0, 2.0]], [[2.0, -2.0]])
    return Rows(ids.astype(np.int32), np.ones((num, t), np.int32), np.zeros((num, t), np.int32),
                logits.astype(np.float32), features.astype(np.float32), key_pos)


class Data(NamedTuple):
    train: Rows
    valid: Rows
    test: Rows


def make_data(config: PlantedConfig, data_seed: int) -> Data:
    rng = np.random.default_rng([data_seed, 33])
    return Data(*(make_rows(config, num, rng)
                  for num in (config.num_train, config.num_valid, config.num_test)))


def static_coefficients(config: PlantedConfig, which: str) -> np.ndarray:
    """lambda of a frozen teacher explainer: uniform ("static_mean") or uniform over the
    informative heads ("static_oracle")."""
    heads = len(config.head_targets)
    if which == "static_mean":
        return np.full(heads, 1.0 / heads, np.float32)
    lam = np.zeros(heads, np.float32)
    lam[list(config.informative_heads)] = 1.0 / len(config.informative_heads)
    return lam


def teacher_explainer_config(config: PlantedConfig, normalizer: str
                             ) -> explainers.AttentionExplainerConfig:
    return explainers.AttentionExplainerConfig(num_layers=1, num_heads=len(config.head_targets),
                                               normalizer=normalizer)


def static_scores(config: PlantedConfig, rows: Rows, which: str) -> np.ndarray:
    """(N, T) scores of a frozen teacher explainer (Eq. 11 with fixed coefficients)."""
    identity = teacher_explainer_config(config, "identity")
    params = explainers.AttentionExplainerParams(phi=jnp.asarray(static_coefficients(config,
                                                                                     which)))
    pooled = jnp.swapaxes(jnp.asarray(rows.teacher_features), 0, 1)  # (1, N, H, T)
    return np.asarray(explainers.apply(params, pooled, rows.attention_mask,
                                       config=identity).scores)


# ---------------------------------------------------------------------------- the student


def student_model(config: PlantedConfig, data_seed: int) -> SequenceClassifier:
    text = TextConfig(vocab_size=config.vocab_size, hidden_size=config.hidden_size,
                      num_layers=config.num_layers, num_heads=config.num_heads,
                      intermediate_size=config.intermediate_size,
                      max_position_embeddings=config.seq_len, hidden_dropout=config.dropout,
                      attention_dropout=config.dropout)
    return SequenceClassifier(text, num_labels=2, pooling=config.pooling,
                              rngs=nnx.Rngs(data_seed))


@functools.cache
def student(config: PlantedConfig, data_seed: int) -> tuple[nnx.GraphDef, nnx.State]:
    """(graphdef, params) of the data seed's student (cached: copy before donating).

    With ``kernel_init="fan_in"`` every dense kernel is redrawn with standard deviation
    1 / sqrt(fan-in); with "fan_in_encoder" every one but the task head's.

    BERT's 0.02 suits a large model trained by Adam; with it this small student under plain
    SGD barely moves in a few hundred steps (its attention logits and value paths start
    near 0 and their gradients are products of 0.02-sized factors).
    """
    graphdef, params = functional.split(student_model(config, data_seed))
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
        noise = rng.standard_normal(leaf.shape) / np.sqrt(fan_in)
        return jnp.asarray(noise, leaf.dtype)

    return graphdef, jax.tree_util.tree_map_with_path(redraw, params)


class Arm(NamedTuple):
    """What one arm trains with."""

    step_config: scaffold.ScaffoldConfig
    functions: scaffold.ScaffoldFunctions
    teacher_cfg: explainers.AttentionExplainerConfig | None  # learned (SMaT) only
    student_cfg: explainers.AttentionExplainerConfig | None  # None when beta = 0
    static: str | None  # "static_mean" / "static_oracle"


def parse_arm(config: PlantedConfig, arm: str, graphdef) -> Arm:
    """The step settings and functions of an arm name (see :attr:`PlantedConfig.arms`)."""
    if arm not in config.arms:
        raise ValueError(f"unknown arm {arm!r}; choose from {list(config.arms)}")
    if arm == "none":
        return Arm(scaffold.ScaffoldConfig(beta=0.0,
                                           inner_learning_rate=config.inner_learning_rate),
                   scaffold.ScaffoldFunctions(student_forward=scaffold.ClassifierForward(graphdef)),
                   None, None, None)
    if arm.startswith("static_"):
        learned = _explained_arm(config, "sparsemax", 5e-4, graphdef)
        functions = dataclasses.replace(learned.functions, teacher_explainer=None)
        return learned._replace(functions=functions, teacher_cfg=None, static=arm)
    _, normalizer, rate = arm.split("_")
    return _explained_arm(config, normalizer, float(rate), graphdef)


def _explained_arm(config: PlantedConfig, normalizer: str, rate: float, graphdef) -> Arm:
    """A SMaT arm: the teacher and student explainers combine heads with `normalizer`."""
    student_cfg = explainers.AttentionExplainerConfig(
        num_layers=config.num_layers, num_heads=config.num_heads, normalizer=normalizer)
    teacher_cfg = teacher_explainer_config(config, normalizer)
    step_config = scaffold.ScaffoldConfig(beta=config.beta,
                                          inner_learning_rate=config.inner_learning_rate,
                                          outer_learning_rate=rate)
    functions = scaffold.ScaffoldFunctions(
        student_forward=scaffold.ClassifierForward(graphdef),
        student_explainer=AttentionExplainerFn(student_cfg),
        teacher_explainer=AttentionExplainerFn(teacher_cfg, example_first=True))
    return Arm(step_config, functions, teacher_cfg, student_cfg, None)


def smat_setup(config: PlantedConfig, normalizer: str, graphdef, **overrides: Any
               ) -> tuple[scaffold.ScaffoldConfig, scaffold.ScaffoldFunctions,
                          explainers.AttentionExplainerConfig,
                          explainers.AttentionExplainerConfig]:
    """The SMaT step of a normalizer (the outer rate does not enter the meta-gradient), with
    ScaffoldConfig fields overridden (the diagnostic's variants)."""
    arm = _explained_arm(config, normalizer, config.outer_learning_rates[0], graphdef)
    return (dataclasses.replace(arm.step_config, **overrides), arm.functions, arm.teacher_cfg,
            arm.student_cfg)


def _batch(rows: Rows, index: np.ndarray, scores: np.ndarray | None) -> dict[str, np.ndarray]:
    batch = {"input_ids": rows.input_ids[index], "attention_mask": rows.attention_mask[index],
             "token_type_ids": rows.token_type_ids[index],
             "teacher_logits": rows.teacher_logits[index],
             "teacher_features": rows.teacher_features[index]}
    if scores is not None:
        batch["teacher_scores"] = scores[index]
    return batch


def _stack(batches: Sequence[Mapping[str, np.ndarray]]) -> dict[str, np.ndarray]:
    return {key: np.stack([b[key] for b in batches]) for key in batches[0]}


def _order(num: int, batch_size: int, seed: int, data_seed: int, epoch: int) -> np.ndarray:
    perm = np.random.default_rng([data_seed, seed, epoch, 1]).permutation(num)
    return perm[: (num // batch_size) * batch_size].reshape(-1, batch_size)


def _train_index(config: PlantedConfig, seed: int, data_seed: int, step: int) -> np.ndarray:
    per_epoch = config.num_train // config.batch_size
    epoch, within = divmod(step, per_epoch)
    return _order(config.num_train, config.batch_size, seed, data_seed, epoch)[within]


def _valid_index(config: PlantedConfig, seed: int, data_seed: int, step: int) -> np.ndarray:
    return np.random.default_rng([data_seed, seed, step, 2]).choice(
        config.num_valid, size=config.batch_size, replace=False)


def _predict(graphdef, params, input_ids, attention_mask):
    return functional.apply(graphdef, params, input_ids, attention_mask=attention_mask).logits


_predict_seeds = jax.jit(jax.vmap(_predict, in_axes=(None, 0, None, None)),
                         static_argnums=(0,))


def simulability(graphdef, params, rows: Rows) -> np.ndarray:
    """(S,) agreement of each seed's student with the teacher on `rows`."""
    logits = _predict_seeds(graphdef, params, rows.input_ids, rows.attention_mask)  # (S, N, 2)
    student = np.argmax(np.asarray(logits), axis=-1)
    return (student == np.argmax(rows.teacher_logits, axis=-1)[None]).mean(axis=1)


def head_lambda(teacher_cfg, phi) -> np.ndarray:
    """(S, n) the normalized head coefficients lambda of stacked phi (S, n)."""
    return np.asarray(explainers.get_normalizer(teacher_cfg.normalizer)(jnp.asarray(phi)))


def informative_weight(config: PlantedConfig, teacher_cfg, phi) -> np.ndarray:
    """(S,) the informative heads' total coefficient lambda of stacked phi (S, n)."""
    return head_lambda(teacher_cfg, phi)[:, list(config.informative_heads)].sum(axis=-1)


# ------------------------------------------------------------------------ train one cell


def train_cell(config: PlantedConfig, arm_name: str, data: Data, data_seed: int,
               probe: bool = False) -> tuple[dict[str, Any], dict[int, Any]]:
    """Train every seed of one (arm, data seed) cell as one vmapped program.

    Returns:
      ``(record, probes)``: the cell's record, and (when `probe`) the stacked student states
      after each probe step.
    """
    graphdef, params = student(config, data_seed)
    arm = parse_arm(config, arm_name, graphdef)
    scores = None if arm.static is None else static_scores(config, data.train, arm.static)
    learned = arm.teacher_cfg is not None
    seeds = config.seeds

    def initial(seed):
        return scaffold.init_state(
            arm.step_config, student_params=jax.tree.map(jnp.copy, params),
            student_explainer_params=None if arm.student_cfg is None
            else explainers.init(None, arm.student_cfg),
            teacher_explainer_params=explainers.init(None, arm.teacher_cfg) if learned
            else None, rng=jax.random.PRNGKey(1000 * data_seed + seed))

    states = commit(stack_seeds([initial(seed) for seed in seeds]))  # one step compile
    evaluations, probes, step_metrics, lambda_trace = [], {}, [], []
    start = time.perf_counter()
    for step in range(config.steps + 1):
        if probe and step in config.probe_steps:
            probes[step] = jax.tree.map(jnp.copy, states)
        if step % config.eval_every == 0 or step == config.steps:
            entry = {"step": step,
                     "valid": simulability(graphdef, states.student_params, data.valid).tolist(),
                     "test": simulability(graphdef, states.student_params, data.test).tolist()}
            if learned:
                entry["informative_weight"] = informative_weight(
                    config, arm.teacher_cfg, states.teacher_explainer_params.phi).tolist()
            evaluations.append(entry)
        if learned and step % LAMBDA_EVERY == 0:
            lambda_trace.append({"step": step, "lambda": head_lambda(
                arm.teacher_cfg, states.teacher_explainer_params.phi).round(4).tolist()})
        if step == config.steps:
            break
        train = _stack([_batch(data.train, _train_index(config, s, data_seed, step), scores)
                        for s in seeds])
        valid = _stack([_batch(data.valid, _valid_index(config, s, data_seed, step), None)
                        for s in seeds]) if learned else None
        states, metrics = scaffold.scaffold_seed_step(states, train, valid,
                                                      config=arm.step_config,
                                                      functions=arm.functions)
        if step % config.eval_every == 0:
            step_metrics.append({name: np.asarray(value).tolist()
                                 for name, value in metrics.items()})
    seconds = time.perf_counter() - start
    valid_acc = np.array([e["valid"] for e in evaluations])  # (E, S)
    test_acc = np.array([e["test"] for e in evaluations])  # (E, S)
    best = np.argmax(valid_acc, axis=0)  # first best evaluation per seed
    record = {
        "arm": arm_name, "data_seed": data_seed, "seeds": list(seeds),
        "final_test": test_acc[-1].tolist(),
        "best_valid_test": test_acc[best, np.arange(len(seeds))].tolist(),
        "best_step": [evaluations[i]["step"] for i in best],
        "evaluations": evaluations, "metrics_at_evaluations": step_metrics,
        "seconds": round(seconds, 1)}
    if learned:
        phi = np.asarray(states.teacher_explainer_params.phi)
        record["final_phi"] = phi.tolist()
        record["final_lambda"] = head_lambda(arm.teacher_cfg, phi).tolist()
        record["lambda_trace"] = lambda_trace
        record["informative_weight"] = informative_weight(config, arm.teacher_cfg, phi).tolist()
    return record, probes


# ---------------------------------------------------------------- the direction diagnostic


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


def probe_batches(config: PlantedConfig, data: Data, *, data_seed: int, seed: int, step: int
                  ) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """(P, B, ...) train and validation batches of one probe (fixed per seed and step)."""
    rng = np.random.default_rng([data_seed, seed, step, 3])
    trains = [_batch(data.train, rng.choice(config.num_train, config.batch_size, replace=False),
                     None) for _ in range(config.probe_pairs)]
    valids = [_batch(data.valid, rng.choice(config.num_valid, config.batch_size, replace=False),
                     None) for _ in range(config.probe_pairs)]
    return _stack(trains), _stack(valids)


def probe_cell(config: PlantedConfig, arm_name: str, data: Data, data_seed: int,
               states_at: Mapping[int, scaffold.ScaffoldState]) -> dict[str, Any]:
    """The direction diagnostic for every seed of a cell at every probe step and variant."""
    graphdef = student(config, data_seed)[0]
    out: dict[str, Any] = {"arm": arm_name, "data_seed": data_seed, "probes": []}
    variants = probe_variants(config, arm_name)
    for step, states in sorted(states_at.items()):
        for i, seed in enumerate(config.seeds):
            state = seed_slice(states, i)
            trains, valids = probe_batches(config, data, data_seed=data_seed, seed=seed,
                                           step=step)
            for name, (normalizer, overrides, student_expl) in variants.items():
                step_config, functions, teacher_cfg, student_cfg = smat_setup(
                    config, normalizer, graphdef, **overrides)
                phi_s = state.student_explainer_params
                if phi_s is None or student_expl == "uniform" or arm_name.startswith(
                        "static_") and normalizer != "sparsemax":
                    phi_s = explainers.init(None, student_cfg)
                result = meta_direction(explainers.init(None, teacher_cfg),
                                        state.student_params, phi_s, trains, valids,
                                        config=step_config, functions=functions)
                out["probes"].append({
                    "step": step, "seed": seed, "variant": name,
                    "mean": np.asarray(result.mean.phi).tolist(),
                    "standard_error": np.asarray(result.standard_error.phi).tolist(),
                    "z": np.asarray(result.z_score.phi).tolist(),
                    "outer_loss": float(np.mean(result.outer_loss))})
    return out


# ---------------------------------------------------------------------------- reporting


def _fmt(values: Sequence[float], *, scale: float = 100.0, digits: int = 1) -> str:
    return format_median_iqr(values, scale=scale, digits=digits)


def arm_table(config: PlantedConfig, records: Sequence[Mapping[str, Any]]) -> tuple[str, list]:
    """Markdown table and rows: per arm, simulability and the informative coefficient."""
    rows = []
    for arm in config.arms:
        cell = [r for r in records if r["arm"] == arm]
        if not cell:
            continue
        final = [v for r in cell for v in r["final_test"]]
        best = [v for r in cell for v in r["best_valid_test"]]
        if "informative_weight" in cell[0]:
            weight = [v for r in cell for v in r["informative_weight"]]
        else:
            lam = static_coefficients(config, arm) if arm.startswith("static_") else None
            weight = [] if lam is None else [float(lam[list(config.informative_heads)].sum())]
        rows.append({
            "arm": arm, "students": len(final),
            "final_test": _fmt(final), "best_valid_test": _fmt(best),
            "final_test_median": float(np.median(final)),
            "informative_weight": _fmt(weight, scale=1.0, digits=3) if weight else "–",
            "concentrated": (sum(w > 0.5 for w in weight) if "informative_weight" in cell[0]
                             else None),
            "per_data_seed": {str(r["data_seed"]): _fmt(r["final_test"]) for r in cell}})
    lines = ["| arm | students | test simulability, final | test simulability, best valid | "
             f"informative heads' lambda (uniform {len(config.informative_heads)}/"
             f"{len(config.head_targets)}) | lambda > 0.5 |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        concentrated = ("–" if r["concentrated"] is None
                        else f"{r['concentrated']}/{r['students']}")
        lines.append(f"| {r['arm']} | {r['students']} | {r['final_test']} | "
                     f"{r['best_valid_test']} | {r['informative_weight']} | {concentrated} |")
    return "\n".join(lines), rows


def direction_summary(config: PlantedConfig, probes: Sequence[Mapping[str, Any]]
                      ) -> list[dict[str, Any]]:
    """Per (probe arm, variant, step): the informative and other heads' z-scores, sign
    flipped so that positive means "the outer step raises this head", averaged over seeds
    (per head and per head target); the share of seeds whose top head is informative; the
    per-step signal-to-noise ratio z / sqrt(P) of the informative heads."""
    targets = np.array(config.head_targets)
    informative = list(config.informative_heads)
    others = [h for h in range(len(config.head_targets)) if h not in informative]
    groups: dict[tuple[str, str, int], list[Mapping[str, Any]]] = {}
    for cell in probes:
        for p in cell["probes"]:
            groups.setdefault((cell["arm"], p["variant"], p["step"]), []).append(p)
    rows = []
    for (arm, variant, step), entries in sorted(groups.items(), key=lambda kv: (
            config.probe_arms.index(kv[0][0]), kv[0][1], kv[0][2])):
        z = -np.array([e["z"] for e in entries])  # (seeds, H), raise-positive
        mean = -np.array([e["mean"] for e in entries])
        rows.append({
            "arm": arm, "variant": variant, "step": step, "seeds": len(entries),
            "z_informative_mean": float(z[:, informative].mean()),
            "z_informative_per_head": z[:, informative].mean(0).round(2).tolist(),
            "z_others_mean": float(z[:, others].mean()),
            "z_others_max_abs": float(np.abs(z[:, others].mean(0)).max()),
            "z_per_head": z.mean(0).round(2).tolist(),
            "z_by_target": {t: round(float(z[:, targets == t].mean()), 2) for t in TARGETS
                            if (targets == t).any()},
            "informative_highest": float(np.mean(np.isin(np.argmax(z, axis=1), informative))),
            "snr_informative": float(z[:, informative].mean() / np.sqrt(config.probe_pairs)),
            "mean_gradient_informative": float(mean[:, informative].mean()),
            "mean_abs_gradient": float(np.abs(mean).mean()),
            "outer_loss": float(np.mean([e["outer_loss"] for e in entries]))})
    return rows


def direction_by_target_table(rows: Sequence[Mapping[str, Any]]) -> str:
    """One row per (probed student, variant); per probe step the mean z of the key / decoy /
    cls / sep heads (positive: the outer step raises them)."""
    steps = sorted({r["step"] for r in rows})
    cells: dict[tuple[str, str], dict[int, str]] = {}
    for r in rows:
        cells.setdefault((r["arm"], r["variant"]), {})[r["step"]] = " / ".join(
            f"{r['z_by_target'][t]:+.1f}" for t in TARGETS if t in r["z_by_target"])
    lines = ["| probed student | variant | " + " | ".join(f"step {s}" for s in steps) + " |",
             "|---|---|" + "---|" * len(steps)]
    lines += [f"| {arm} | {variant} | " + " | ".join(by_step.get(s, "–") for s in steps) + " |"
              for (arm, variant), by_step in cells.items()]
    return "\n".join(lines)


def direction_table(rows: Sequence[Mapping[str, Any]]) -> str:
    lines = ["| probed student | variant | after step | z informative (per head) | "
             "z others mean / max abs | seeds where an informative head has the top z | "
             "per-step SNR | outer loss |", "|---|---|---|---|---|---|---|---|"]
    lines += [f"| {r['arm']} | {r['variant']} | {r['step']} | {r['z_informative_mean']:+.2f} "
              f"({', '.join(f'{v:+.2f}' for v in r['z_informative_per_head'])}) | "
              f"{r['z_others_mean']:+.2f} / {r['z_others_max_abs']:.2f} | "
              f"{r['informative_highest']:.0%} | {r['snr_informative']:+.3f} | "
              f"{r['outer_loss']:.3f} |" for r in rows]
    return "\n".join(lines)


def smat_dynamics(config: PlantedConfig, records: Sequence[Mapping[str, Any]]
                  ) -> list[dict[str, Any]]:
    """Per SMaT arm: where the head coefficients went (lambda mass per head target at the
    end), the informative heads' lambda over the steps, how many students lost every
    informative head (lambda = 0) and when, and the simulability of the students whose
    informative heads ended above and below 0.5."""
    targets = np.array(config.head_targets)
    informative = list(config.informative_heads)
    rows = []
    for arm in config.arms:
        cell = [r for r in records if r["arm"] == arm and "lambda_trace" in r]
        if not cell:
            continue
        final = np.concatenate([np.asarray(r["final_lambda"]) for r in cell])  # (students, H)
        steps = [entry["step"] for entry in cell[0]["lambda_trace"]]
        trace = np.concatenate([np.stack([np.asarray(e["lambda"]) for e in r["lambda_trace"]],
                                         axis=1) for r in cell])  # (students, steps, H)
        weight = trace[:, :, informative].sum(-1)  # (students, steps)
        dead = weight <= 0
        died = [steps[int(np.argmax(row))] for row in dead if row.any()]
        tests = np.concatenate([r["final_test"] for r in cell])
        high = weight[:, -1] > 0.5
        shown = [step for step in (0, 10, 25, 50, 100, 200, config.steps) if step in steps]
        rows.append({
            "arm": arm, "students": len(tests),
            "final_mass": {t: float(final[:, targets == t].sum(-1).mean()) for t in TARGETS},
            "informative_weight_median": {str(step): float(np.median(
                weight[:, steps.index(step)])) for step in shown},
            "lost_informative": len(died),
            "lost_informative_step_median": float(np.median(died)) if died else None,
            "lost_informative_at_end": int(dead[:, -1].sum()),
            "test_informative_above_half": (_fmt(tests[high]) if high.any() else "–"),
            "test_informative_below_half": (_fmt(tests[~high]) if (~high).any() else "–"),
            "above_half": int(high.sum())})
    return rows


def dynamics_table(rows: Sequence[Mapping[str, Any]]) -> str:
    if not rows:
        return ""
    steps = list(rows[0]["informative_weight_median"])
    lines = ["| arm | final lambda mass key / decoy / cls / sep | informative lambda (median) "
             f"at steps {', '.join(steps)} | lost every informative head (median step; at end) "
             "| test simulability, informative lambda > 0.5 (n) / <= 0.5 |",
             "|---|---|---|---|---|"]
    for r in rows:
        mass = " / ".join(f"{r['final_mass'][t]:.2f}" for t in TARGETS)
        weights = ", ".join(f"{v:.2f}" for v in r["informative_weight_median"].values())
        when = r["lost_informative_step_median"]
        lost = (f"{r['lost_informative']}/{r['students']} "
                f"({'–' if when is None else int(when)}; {r['lost_informative_at_end']})")
        lines.append(f"| {r['arm']} | {mass} | {weights} | {lost} | "
                     f"{r['test_informative_above_half']} ({r['above_half']}) / "
                     f"{r['test_informative_below_half']} |")
    return "\n".join(lines)


# --------------------------------------------------------------------------------- run


def run(variant: str, *, output_dir: str | Path, arms: Sequence[str] | None = None,
        progress: bool = True) -> dict[str, Any]:
    """Train every (arm, data seed) cell not yet on disk, probe the probe arms, write the
    tables. Returns the summary written to ``results.json``.

    Raises:
      ValueError: an unknown variant or arm.
    """
    config = get_config(variant)
    arms = list(config.arms if arms is None else arms)
    for arm in arms:
        if arm not in config.arms:
            raise ValueError(f"unknown arm {arm!r}; choose from {list(config.arms)}")
    output_dir = Path(output_dir)
    write_json_atomic(output_dir / "config.json", {"variant": variant,
                                                   **dataclasses.asdict(config)})
    start = time.perf_counter()
    records, probes = [], []
    for data_seed in config.data_seeds:
        data = make_data(config, data_seed)
        for arm in arms:
            cell_path = output_dir / "cells" / arm / f"data{data_seed}.json"
            probe_path = output_dir / "cells" / arm / f"data{data_seed}_direction.json"
            wants_probe = arm in config.probe_arms
            if cell_path.is_file() and (not wants_probe or probe_path.is_file()):
                records.append(read_json(cell_path))
                if wants_probe:
                    probes.append(read_json(probe_path))
                continue
            tic = time.perf_counter()
            record, states_at = train_cell(config, arm, data, data_seed, probe=wants_probe)
            write_json_atomic(cell_path, record)
            records.append(record)
            if wants_probe:
                probe_tic = time.perf_counter()
                probe = probe_cell(config, arm, data, data_seed, states_at)
                probe["seconds"] = round(time.perf_counter() - probe_tic, 1)
                write_json_atomic(probe_path, probe)
                probes.append(probe)
            if progress:
                print(f"[{time.perf_counter() - start:7.0f} s] {arm} data{data_seed}: final "
                      f"test {_fmt(record['final_test'])} ({time.perf_counter() - tic:.0f} s)",
                      flush=True)
    table, arm_rows = arm_table(config, records)
    directions = direction_summary(config, probes)
    dynamics = smat_dynamics(config, records)
    own = [r for r in directions if r["variant"] in ("sparsemax", "softmax")]
    suspects = [r for r in directions if r["variant"] not in ("sparsemax", "softmax")]
    seconds = sum(r["seconds"] for r in records) + sum(p.get("seconds", 0) for p in probes)
    text = (f"Planted mechanism ({variant}): informative heads {config.informative_heads} of "
            f"{len(config.head_targets)} ({', '.join(config.head_targets)}).\n\n{table}\n\n"
            f"SMaT's head coefficients:\n\n{dynamics_table(dynamics)}\n\n"
            f"Direction diagnostic by head target (mean z of the key / decoy / cls / sep "
            f"heads; positive = the outer step raises them):\n\n"
            f"{direction_by_target_table(directions)}\n\n"
            f"Direction diagnostic (z = mean / standard error of the meta-gradient over "
            f"{config.probe_pairs} batch pairs at uniform coefficients, sign flipped: positive = "
            f"the outer step raises the head; averaged over seeds), the SMaT step's own "
            f"settings:\n\n{direction_table(own)}\n\nThe same with one setting changed "
            f"(sparsemax):\n\n{direction_table(suspects)}\n\nCompute: {seconds:.0f} s "
            f"(training and probes of every cell, summed; this call "
            f"{time.perf_counter() - start:.0f} s).\n")
    (output_dir / "table.md").write_text(text)
    summary = {"variant": variant, "config": dataclasses.asdict(config), "arms": arm_rows,
               "directions": directions, "smat_dynamics": dynamics,
               # per-step traces stay in the cell files
               "records": [{key: value for key, value in record.items() if key not in (
                   "evaluations", "metrics_at_evaluations", "lambda_trace")}
                   for record in records],
               "compute_seconds": round(seconds, 1),
               "seconds_this_call": round(time.perf_counter() - start, 1)}
    write_json_atomic(output_dir / "results.json", summary)
    return summary


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variant", choices=VARIANTS, default="cpu")
    parser.add_argument("--smoke", action="store_true", help="the same as --variant smoke")
    parser.add_argument("--output-dir", default=None,
                        help="results folder (default runs/smat_planted_<variant>)")
    parser.add_argument("--arms", nargs="+", default=None, help="train only these arms")
    args = parser.parse_args(argv)
    variant = "smoke" if args.smoke else args.variant
    output_dir = args.output_dir or f"runs/smat_planted_{variant}"
    with command_runtime(parser, driver=__file__):
        run(variant, output_dir=output_dir, arms=args.arms)
    print((Path(output_dir) / "table.md").read_text())


if __name__ == "__main__":
    main()
