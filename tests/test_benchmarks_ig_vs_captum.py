"""benchmarks/ig_vs_captum.py: the shared helpers the data-set benchmarks count work with."""

from pathlib import Path

import numpy as np

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def test_batch_shapes_are_the_length_sorted_batches_cut_to_their_multiple(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    from ig_vs_captum import batch_shapes, smat_setting

    lengths = np.array([5, 1, 3, 7, 2])
    mask = (np.arange(8)[None] < lengths[:, None]).astype(np.int32)
    # sorted 1, 2 | 3, 5 | 7 (+ a repeated row): cut to the longest rounded up to 4, at most 8
    assert batch_shapes(mask, smat_setting("2x4")) == [(2, 4), (2, 8), (2, 8)]
    assert batch_shapes(mask, smat_setting("8x1")) == [(8, 7)]
