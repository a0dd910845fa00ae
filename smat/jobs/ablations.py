"""What SMaT's gain is made of: student settings that give part of SMaT away.

Each arm is a student setting with its own folder beside the grid's cells:

- ``smat_frozen``: static attention over the heads SMaT learned (the SMaT student of the
  same teacher and seed: its final coefficients, frozen from step 0);
- ``random_heads``: the same coefficients put on random heads (a draw per seed);
- ``layer<k>``: static attention over layer k's heads, uniformly;
- ``smat_pool_outer``: SMaT whose outer loss reads a held-out part of its own pool instead
  of the validation rows no other student sees;
- ``smat_softmax`` / ``smat_entmax15``: SMaT with another normalizer (the paper's Table 7).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from smat.jobs.grid import cell_dir
from smat.jobs.student_run import run_student
from smat.json_files import read_json
from smat.store.model_store import saved_params_fingerprint
from smat.training.student import StudentTrainConfig

ARMS_FROM_SMAT = ("smat_frozen", "random_heads")
FIXED_ARMS = (*ARMS_FROM_SMAT, "smat_pool_outer", "smat_softmax", "smat_entmax15")


def is_arm(name: str) -> bool:
    """Whether `name` is an ablation arm (one of :data:`FIXED_ARMS` or ``layer<k>``)."""
    return name in FIXED_ARMS or re.fullmatch(r"layer\d+", name) is not None


def arms_of(num_layers: int) -> tuple[str, ...]:
    """Every arm of a teacher with `num_layers` layers, in the order they are listed."""
    return (*ARMS_FROM_SMAT, *(f"layer{k}" for k in range(num_layers)), *FIXED_ARMS[2:])


def arm_config(arm: str, student: StudentTrainConfig, *, seed: int, heads: tuple[int, int],
               smat_weights: np.ndarray | None) -> StudentTrainConfig:
    """The student config of `arm` for `seed`, for a teacher of `heads` (layers, heads per
    layer); `smat_weights` is the (L, H) head coefficients of the SMaT student of the same
    teacher and seed (for :data:`ARMS_FROM_SMAT`).

    Raises:
      ValueError: `arm` names a layer the teacher does not have.
    """
    if arm == "smat_pool_outer":
        return dataclasses.replace(student, explainer="smat", outer_rows="pool")
    if arm in ("smat_softmax", "smat_entmax15"):
        return dataclasses.replace(student, explainer="smat",
                                   normalizer=arm.removeprefix("smat_"))
    if arm.startswith("layer"):
        layer = int(arm.removeprefix("layer"))
        if layer >= heads[0]:
            raise ValueError(f"arm {arm}: the teacher has {heads[0]} layers (layer0 to "
                             f"layer{heads[0] - 1})")
        weights = np.zeros(heads)
        weights[layer] = 1.0 / heads[1]
    elif arm == "smat_frozen":
        weights = smat_weights
    else:  # random_heads: SMaT's coefficients on a random set of heads of the same size
        flat = smat_weights.ravel()
        weights = flat[np.random.default_rng([seed, 1]).permutation(flat.size)]
    weights = np.asarray(weights, np.float64).ravel()
    return dataclasses.replace(student, explainer="attention_heads",
                               head_weights=tuple(float(w) for w in weights / weights.sum()))


def smat_head_weights(paths: Sequence[str | Path], *, teacher_params: str, size: int,
                      seed: int) -> np.ndarray:
    """The (L, H) coefficients of the SMaT student of `seed` at `size` in result files of
    earlier runs (``results.json`` or committed cells), learned from the teacher whose
    weights fingerprint is `teacher_params`.

    Raises:
      ValueError: no such student in the files.
    """
    for path in paths:
        for record in read_json(path)["records"]:
            if (record["explainer"] == "smat" and record["seed"] == seed
                    and record["num_examples"] == size
                    and record["teacher_params"] == teacher_params):
                return np.asarray(record["head_weights"])
    raise ValueError(f"--smat-cells {' '.join(map(str, paths))} hold no SMaT student of seed "
                     f"{seed} at n={size} from teacher {teacher_params}: train it first")


def run_arms(teacher_dir: Path, arms: Sequence[str], *, sizes: Sequence[int],
             seeds: Sequence[int], student: StudentTrainConfig, output_dir: Path,
             smat_cells: Sequence[str | Path], progress: bool) -> list[dict[str, Any]]:
    """Train the students of the ablation `arms` (one folder per arm, size and seed, like
    the grid's); each record's ``explainer`` is its arm, ``setting`` the student setting
    it trained with."""
    if not arms:
        return []
    teacher_params = saved_params_fingerprint(teacher_dir / "model")
    encoder = read_json(teacher_dir / "model" / "model.json")["encoder_config"]
    heads = (encoder["num_layers"], encoder["num_heads"])
    records = []
    for size in sizes:
        for arm in arms:
            for seed in seeds:
                smat_weights = (smat_head_weights(smat_cells, teacher_params=teacher_params,
                                                  size=size, seed=seed)
                                if arm in ARMS_FROM_SMAT else None)
                config = arm_config(arm, student, seed=seed, heads=heads,
                                    smat_weights=smat_weights)
                (record,) = run_student(teacher_dir, config=config, seeds=[seed],
                                        num_examples=size, progress=progress,
                                        output_dir=[cell_dir(output_dir, num_examples=size,
                                                             explainer=arm, seed=seed)])
                records.append({**record, "explainer": arm, "setting": config.explainer})
    return records
