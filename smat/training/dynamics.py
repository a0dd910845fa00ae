"""Training dynamics for data cartography: at every epoch's end, each training instance's
gold-class probability and whether it was classified correctly (Swayamdipta et al., 2020;
Jukić et al., 2022, §5). Statistics and groups: :mod:`smat.evaluation.cartography`.

One file per epoch, ``training_dynamics/epoch{e:03d}.npz`` in the seed's checkpoint folder,
written atomically: a resumed run that replays an epoch's end rewrites the same values.
"""

from __future__ import annotations

from pathlib import Path

import jax
import numpy as np
from flax import nnx

from smat.data import Encoded
from smat.models.inference import predict_logits
from smat.store.run_log import read_arrays, write_arrays_atomic

FOLDER = "training_dynamics"


def record_epoch(graphdef: nnx.GraphDef, params: nnx.State, train: Encoded, folder: str | Path,
                 *, epoch: int, mesh: jax.sharding.Mesh | None = None) -> Path:
    """Score every row of `train` in eval mode (one batched pass) and save its gold-class
    probability and correctness for `epoch`. Returns the file written."""
    logits = predict_logits(graphdef, params, train, mesh=mesh).astype(np.float64)
    labels = np.asarray(train.labels).astype(np.int64)
    shifted = logits - logits.max(axis=-1, keepdims=True)
    probability = np.exp(shifted) / np.exp(shifted).sum(axis=-1, keepdims=True)
    path = Path(folder) / FOLDER / f"epoch{epoch:03d}.npz"
    write_arrays_atomic(path, gold_probability=probability[np.arange(len(labels)), labels],
                        correct=np.argmax(logits, axis=-1) == labels)
    return path


def load(folder: str | Path) -> tuple[np.ndarray, np.ndarray]:
    """The recorded dynamics of one run: gold-class probability and correctness, (E, N).

    Raises:
      FileNotFoundError: no epoch was recorded in `folder`.
      ValueError: the recorded epochs are not 0, 1, ..., E-1 or differ in size.
    """
    files = sorted((Path(folder) / FOLDER).glob("epoch*.npz"))
    if not files:
        raise FileNotFoundError(f"no training dynamics under {Path(folder) / FOLDER}; train "
                                "the teacher with --training-dynamics")
    epochs = [int(f.stem.removeprefix("epoch")) for f in files]
    if epochs != list(range(len(files))):
        raise ValueError(f"training dynamics in {folder} cover epochs {epochs}; expected "
                         f"0..{len(files) - 1} without gaps")
    stored = [read_arrays(f) for f in files]
    sizes = {len(s["correct"]) for s in stored}
    if len(sizes) != 1:
        raise ValueError(f"training dynamics in {folder} differ in size between epochs: "
                         f"{sorted(sizes)}")
    return (np.stack([s["gold_probability"] for s in stored]),
            np.stack([s["correct"] for s in stored]))
