"""benchmarks/aopc_vs_ferret.py, smoke run: smat's AOPC equals ferret's where they agree.

ferret-xai is a benchmark-only dependency (installed with ``--no-deps``; see the benchmark's
docstring), so this test skips where it is missing. ``pytest.importorskip("ferret")`` would
skip even where it is installed: ``import ferret`` needs ferret's explainers' dependencies
(shap, lime, opencv, ...), which the benchmark does not install or use.
"""

import importlib.util
import json
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.mark.parity
def test_smoke_run_agrees_with_ferret(tmp_path, monkeypatch):
    if importlib.util.find_spec("ferret") is None:
        pytest.skip("ferret-xai is not installed (pip install --no-deps ferret-xai==0.4.2)")
    pytest.importorskip("torch")
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import aopc_vs_ferret

    output = tmp_path / "aopc_vs_ferret.json"
    summary = aopc_vs_ferret.run(smoke=True, num_sentences=8, smat_settings=["4x16", "2x4"],
                                 repeats=1, output=output)

    check = summary["cross_check"]
    # Same model in float32 on both sides: the full-input probabilities, and the AOPC of
    # every sentence whose perturbed inputs survive ferret's decode / re-tokenize round trip
    # (averaged over the distinct bins, as ferret does), agree to rounding.
    assert check["max_abs_diff_full_probability"] < 1e-5
    assert check["sentences_surviving_round_trip"] >= 1
    assert check["max_abs_diff_comprehensiveness_round_trip"] < 1e-5
    assert check["max_abs_diff_sufficiency_round_trip"] < 1e-5
    # Where ferret re-tokenizes differently, values may differ, but only slightly here.
    assert check["max_abs_diff_comprehensiveness_all"] < 0.05
    assert check["max_abs_diff_sufficiency_all"] < 0.05
    # batches of 4 cut to multiples of 16 tokens and of 2 cut to multiples of 4: same values
    assert check["max_abs_diff_between_smat_settings"] < 1e-5
    assert summary["ratio"] > 0 and summary["ratio_bound_at_matmul_peak"] > 0
    assert json.loads(output.read_text())["benchmark"] == "aopc_vs_ferret"
