"""Cost of the full SMaT step (Eqs. 6-9) relative to a plain student step, same process.

Both sides run ``smat.training.scaffold.scaffold_step`` on the same student (a randomly initialised
``SequenceClassifier`` with the all-MiniLM-L6-v2 shapes: 6 layers x 12 heads, D = 384; the
weights do not change the cost) and the same batch of random token ids:

- plain: beta = 0 and no teacher explainer, so the step is one forward + backward + SGD
  update of the student (the no-explainer baseline student of the paper).
- smat: beta = 5 with the learned attention explainer on both sides: the inner step on
  (theta, phiS), the pilot step of Eq. 8 and the outer Adam step on phiT through the
  second-order gradient of Eq. 9, every step (meta_interval = 1), with a validation batch of
  the same shape, and the default nested reverse-mode hypergradient. The forward-over-reverse
  hypergradient (``ScaffoldConfig(hypergradient="forward_over_reverse")``) is timed too.

Teacher outputs (logits, pooled attention logits) are cached in the batches for both, as
``smat.training.student`` does; another timing runs the teacher forward inside the SMaT step instead
(``ScaffoldFunctions.teacher_forward``), which measures the caching choice. Compile time is
excluded (one warm-up step per side); the variants are timed in interleaved rounds (best
round per variant) so that load changes on a shared machine hit all of them alike. Prints
``RESULT meta_step <smat / plain time ratio>`` as its last line and writes
benchmarks/results/meta_step.json.

Run: ``.venv/bin/python benchmarks/meta_step.py [--model minilm --batch-size 32 --seq-len 64]``
(a few minutes on 2 CPU cores, mostly compilation; ``--model tiny`` for a smoke run).
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import jax
import numpy as np
from flax import nnx

from smat import explainers
from smat.models import SequenceClassifier, TextConfig, functional
from smat.store.run_log import write_json_atomic
from smat.training.scaffold import (
    ClassifierForward,
    ClassifierTeacher,
    ScaffoldConfig,
    ScaffoldFunctions,
    init_state,
    scaffold_step,
)


def build(name: str, seq_len: int):
    if name == "tiny":
        config = TextConfig.tiny(max_position_embeddings=max(64, seq_len))
    elif name == "minilm":
        config = TextConfig.all_minilm_l6_v2()
    else:
        raise ValueError(f"Unknown --model {name!r}; choose 'tiny' or 'minilm'.")
    student = SequenceClassifier(config, num_labels=2, rngs=nnx.Rngs(0))
    teacher = SequenceClassifier(config, num_labels=2, rngs=nnx.Rngs(1))
    return config, functional.split(student), functional.split(teacher)


def make_batch(rng, teacher, *, batch_size, seq_len, vocab):
    graphdef, params = teacher
    lengths = rng.integers(seq_len // 4, seq_len + 1, batch_size)
    mask = (np.arange(seq_len)[None] < lengths[:, None]).astype(np.int32)
    ids = np.where(mask == 1, rng.integers(5, vocab, (batch_size, seq_len)), 0).astype(np.int32)
    batch = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
    out = jax.jit(ClassifierTeacher(graphdef))(params, batch)  # cached teacher outputs
    return batch, {**batch, "teacher_logits": out.logits, "teacher_features": out.features}


class Timed:
    """One variant of the step: compiled by a warm-up call, then timed in rounds."""

    def __init__(self, state, args, **kwargs):
        self.args, self.kwargs = args, kwargs
        self.state, self.metrics = scaffold_step(state, *args, **kwargs)  # compiles
        jax.block_until_ready(self.metrics)
        self.best = float("inf")

    def round(self, steps: int) -> None:
        t0 = time.perf_counter()
        for _ in range(steps):
            self.state, self.metrics = scaffold_step(self.state, *self.args, **self.kwargs)
        jax.block_until_ready((self.state, self.metrics))
        self.best = min(self.best, (time.perf_counter() - t0) / steps)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="minilm", choices=["tiny", "minilm"])
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--seq-len", type=int, default=64)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--skip-in-step-teacher", action="store_true",
                        help="skip the timing with the teacher forward inside the step")
    parser.add_argument("--skip-forward-over-reverse", action="store_true",
                        help="skip the timing of the forward-over-reverse hypergradient")
    parser.add_argument("--output", type=Path,
                        default=Path(__file__).parent / "results" / "meta_step.json")
    args = parser.parse_args()

    config, (graphdef, theta), teacher = build(args.model, args.seq_len)
    rng = np.random.default_rng(0)
    shape = dict(batch_size=args.batch_size, seq_len=args.seq_len, vocab=config.vocab_size)
    raw_train, train = make_batch(rng, teacher, **shape)
    raw_valid, valid = make_batch(rng, teacher, **shape)
    explainer = explainers.AttentionExplainer(
        explainers.AttentionExplainerConfig(num_layers=config.num_layers,
                                            num_heads=config.num_heads))
    forward = ClassifierForward(graphdef)

    def fresh_state(step_config):
        return init_state(step_config, student_params=jax.tree.map(np.array, theta),
                          student_explainer_params=explainer.init(None),
                          teacher_explainer_params=explainer.init(None), rng=jax.random.key(0))

    plain_config = ScaffoldConfig(beta=0.0)
    smat_config = ScaffoldConfig(beta=5.0)
    smat_functions = ScaffoldFunctions(student_forward=forward, student_explainer=explainer.apply,
                                       teacher_explainer=explainer.apply)
    variants = {
        "plain": Timed(fresh_state(plain_config)._replace(teacher_explainer_params=None,
                                                          outer_opt_state=None),
                       (train, None), config=plain_config,
                       functions=ScaffoldFunctions(student_forward=forward)),
        "smat": Timed(fresh_state(smat_config), (train, valid), config=smat_config,
                      functions=smat_functions),
    }
    if not args.skip_forward_over_reverse:
        forward_config = ScaffoldConfig(beta=5.0, hypergradient="forward_over_reverse")
        variants["forward_over_reverse"] = Timed(fresh_state(forward_config), (train, valid),
                                                 config=forward_config, functions=smat_functions)
    if not args.skip_in_step_teacher:
        in_step = ScaffoldFunctions(student_forward=forward, student_explainer=explainer.apply,
                                    teacher_explainer=explainer.apply,
                                    teacher_forward=ClassifierTeacher(teacher[0]))
        variants["in_step_teacher"] = Timed(fresh_state(smat_config),
                                            (raw_train, raw_valid, teacher[1]),
                                            config=smat_config, functions=in_step)
    # Rounds interleave the variants so that a change of machine load hits all of them.
    for _ in range(args.repeats):
        for variant in variants.values():
            variant.round(args.steps)
    metrics = jax.device_get(variants["smat"].metrics)
    if metrics["meta_update"] != 1.0 or not np.isfinite(metrics["outer_loss"]):
        raise RuntimeError(f"The SMaT step did not run its outer update: {metrics}")
    t_plain, t_smat = variants["plain"].best, variants["smat"].best
    t_forward = getattr(variants.get("forward_over_reverse"), "best", None)
    t_in_step = getattr(variants.get("in_step_teacher"), "best", None)

    ratio = t_smat / t_plain
    result = {
        "benchmark": "meta_step",
        "metric": "seconds per step ratio (full SMaT step / plain student step)",
        "ratio": ratio,
        "plain_seconds_per_step": t_plain,
        "smat_seconds_per_step": t_smat,
        "plain_steps_per_s": 1.0 / t_plain,
        "smat_steps_per_s": 1.0 / t_smat,
        "smat_forward_over_reverse_seconds_per_step": t_forward,
        "ratio_forward_over_reverse": None if t_forward is None else t_forward / t_plain,
        "smat_in_step_teacher_seconds_per_step": t_in_step,
        "in_step_teacher_over_cached": None if t_in_step is None else t_in_step / t_smat,
        "model": args.model,
        "batch_size": args.batch_size,
        "seq_len": args.seq_len,
        "device": str(jax.devices()[0]),
        "platform": platform.platform(),
        "jax": jax.__version__,
    }
    write_json_atomic(args.output, result)
    print(json.dumps(result, indent=2))
    print(f"RESULT meta_step {ratio:.2f}")


if __name__ == "__main__":
    main()
