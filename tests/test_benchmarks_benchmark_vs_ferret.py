"""benchmarks/benchmark_vs_ferret.py, smoke run: after aligning definitions, smat's
explanations and measures equal ferret 0.4.2's on the same model, texts and scores.

ferret-xai, lime and shap are benchmark-only dependencies (ferret installed with
``--no-deps``; see the benchmark's docstring), so this test skips where one is missing.
``pytest.importorskip("ferret")`` would skip even where it is installed: ``import ferret``
needs dependencies of ferret that the benchmark does not install or use.
"""

import importlib.util
import json
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.mark.parity
def test_smoke_run_agrees_with_ferret(tmp_path, monkeypatch):
    missing = [name for name in ("ferret", "lime", "shap", "torch")
               if importlib.util.find_spec(name) is None]
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed (benchmark only: pip install "
                    "--no-deps ferret-xai==0.4.2; pip install -c constraints.txt lime==0.2.0.1 "
                    "shap==0.51.0)")
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import benchmark_vs_ferret

    output = tmp_path / "benchmark_vs_ferret.json"
    summary = benchmark_vs_ferret.run(smoke=True, num_sentences=8, repeats=1,
                                      budget=benchmark_vs_ferret.BUDGET, output=output)

    check, tolerance = summary["cross_check"], benchmark_vs_ferret.TOLERANCES
    assert check["tokens_match"]
    assert check["predictions_match"] == summary["sentences"] == 8
    # Gradient (L1 norm), input x gradient and IG from [CLS] [PAD] ... [SEP]: smat's cores
    # give ferret's scores, to float32 rounding.
    assert len(check["explanations"]) == 3
    for name, result in check["explanations"].items():
        assert result["max_abs_diff_l1_normalized"] < tolerance["explanation"], name
    # ferret's own scores of all five explainers, read by smat as explanations computed
    # elsewhere: the same AOPC where ferret's re-tokenization keeps the perturbed inputs,
    # close everywhere.
    assert len(check["aopc"]) == 5
    for name, result in check["aopc"].items():
        assert result["rows_surviving_round_trip"] >= 1, name
        assert result["max_abs_diff_comprehensiveness_round_trip"] < tolerance["aopc"], name
        assert result["max_abs_diff_sufficiency_round_trip"] < tolerance["aopc"], name
        assert result["max_abs_diff_all"] < tolerance["aopc_all"], name
    # token F1 and token IOU against the synthetic rationales: the same counts.
    for name, result in check["plausibility"].items():
        assert result["max_abs_diff_token_f1"] < tolerance["plausibility"], name
        assert result["max_abs_diff_token_iou"] < tolerance["plausibility"], name
    # the measures ferret's report does not have, and both timings
    assert {"randomization_similarity", "leakage", "agreement"} <= set(
        summary["measures_only_smat_reports"])
    assert summary["ratio"] > 0 and summary["ratio_including_compile"] > 0
    assert summary["smat_shared_measures_seconds (explaining and faithfulness phases)"] > 0
    assert json.loads(output.read_text())["benchmark"] == "benchmark_vs_ferret"
