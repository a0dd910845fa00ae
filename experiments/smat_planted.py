"""Does SMaT find a planted mechanism? A synthetic task with a known answer.

Fernandes et al, "Learning to Scaffold: Optimizing Model Explanations for Teaching", 2022,
§3 (Eqs. 3-9) claims that the outer step learns teacher-explainer head coefficients that
make the explanation teach better. Here the answer is planted, so the claim can be checked
directly (:mod:`smat.evaluation.planted_task`, :mod:`smat.jobs.planted`):

- **Task.** Sequences ``[CLS] body [SEP]`` of a small vocabulary. Exactly one body token
  is a *key* token, drawn from one of two sets of key tokens; its set decides the label.
  Another body token is a *decoy* (independent of the label); the rest is filler. The
  teacher is the rule itself (its logits are +-2), so simulability is accuracy.
- **Teacher explainer rows.** One layer of 8 heads whose query-pooled attention logits are
  synthetic: the informative heads put a logit of ``signal`` on the key token, the others
  on the decoy, on [CLS] or on [SEP]; every logit gets Gaussian noise. The uniform mean of
  the heads puts *less* weight on the key than on the decoy.
- **Student.** A small from-scratch BERT (2 layers x 4 heads, width 32), every seed from
  the same initialisation of its data seed, trained by smat's student trainer
  (:func:`smat.training.student.train_student`: the SMaT step, one meta step per inner
  step, SGD 0.1, beta 5) on 256 examples for 40 epochs (320 steps), evaluated after each
  epoch. Labels alone teach it little in that time, the oracle explanation everything.
- **Arms.** ``none`` (beta = 0); ``static_mean`` (the uniform head coefficients, frozen);
  ``static_oracle`` (only the informative heads, frozen); SMaT with the sparsemax and the
  softmax normalizer at each outer learning rate.
- **Reported.** Per arm over seeds x data seeds: test simulability (agreement with the
  teacher on held-out data) of the final student and of the best-validation one, median
  [IQR]; the informative heads' total coefficient lambda at the end; and the direction
  diagnostic (the mean meta-gradient of Eq. 9 at uniform coefficients over many batch
  pairs, with its z-score per head) for the students of the probe arms after some epochs,
  under the SMaT step's own settings and under variants (beta, the pilot's step size, no
  gradient clipping, a uniform student explainer).

Variants (:func:`get_config`): ``cpu`` (2 data seeds x 5 seeds, outer rates 5e-4, 5e-3 and
5e-2, probes after epochs 0, 1, 3, 6, 12, 25 and 40); ``cpu_fan_in`` (the same with the task
head drawn like the encoder's kernels, so the student starts confidently random; probes
after epochs 0, 1, 6, 12 and 25); ``smoke`` (the tests: one data seed, 2 seeds, a 1-layer
student, 3 epochs, one outer rate and normalizer, two probe variants).

    python experiments/smat_planted.py --variant cpu --output-dir runs/smat_planted_cpu
    python experiments/smat_planted.py --variant cpu_fan_in \
        --output-dir runs/smat_planted_cpu_fan_in

Resumable: every finished (arm, data seed) cell and every probe is a JSON file under
``OUTPUT_DIR/cells`` and is reused by a rerun. Writes ``config.json``, ``results.json`` and
``table.md``. Results: ``docs/results/smat_planted_cpu.md``.
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from smat.cli.experiment import command_runtime
from smat.jobs.planted import PlantedConfig, run_cells
from smat.jobs.planted_report import planted_report
from smat.store.run_log import write_json_atomic

VARIANTS = ("cpu", "cpu_fan_in", "smoke")


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
        return PlantedConfig(kernel_init="fan_in", probe_epochs=(0, 1, 6, 12, 25))
    if variant == "smoke":
        return PlantedConfig(data_seeds=(0,), seeds=(0, 1), num_train=64, num_valid=64,
                             num_test=128, epochs=3, outer_learning_rates=(5e-2,),
                             normalizers=("sparsemax",), probe_arms=("static_mean",),
                             probe_epochs=(0, 1), probe_pairs=4,
                             probe_variants=("sparsemax", "sparsemax_beta1"),
                             num_layers=1)
    raise ValueError(f"unknown variant {variant!r}; choose from {list(VARIANTS)}")


def run(variant: str, *, output_dir: str | Path, arms: Sequence[str] | None = None,
        progress: bool = True) -> dict[str, Any]:
    """Train every (arm, data seed) cell not yet on disk, probe the probe arms, write the
    tables. Returns the summary written to ``results.json``.

    Raises:
      ValueError: an unknown variant or arm.
    """
    config = get_config(variant)
    arms = list(config.arms if arms is None else arms)
    unknown = [arm for arm in arms if arm not in config.arms]
    if unknown:
        raise ValueError(f"unknown arms {unknown}; choose from {list(config.arms)}")
    output_dir = Path(output_dir)
    write_json_atomic(output_dir / "config.json", {"variant": variant,
                                                   **dataclasses.asdict(config)})
    start = time.perf_counter()
    records, probes = run_cells(config, output_dir, arms, progress=progress)
    text, summary = planted_report(variant, config, records, probes)
    (output_dir / "table.md").write_text(text)
    summary = {"variant": variant, "config": dataclasses.asdict(config), **summary,
               "seconds_this_call": round(time.perf_counter() - start, 1)}
    write_json_atomic(output_dir / "results.json", summary)
    return summary


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variant", choices=VARIANTS, default="cpu")
    parser.add_argument("--output-dir", default=None,
                        help="results folder (default runs/smat_planted_<variant>)")
    parser.add_argument("--arms", nargs="+", default=None, help="train only these arms")
    args = parser.parse_args(argv)
    output_dir = args.output_dir or f"runs/smat_planted_{args.variant}"
    with command_runtime(parser, driver=__file__):
        run(args.variant, output_dir=output_dir, arms=args.arms)
    print((Path(output_dir) / "table.md").read_text())


if __name__ == "__main__":
    main()
