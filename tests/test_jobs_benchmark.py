"""Tests for smat.jobs.benchmark and `smat benchmark`: each column equals its own
command's number on the same rows, the best marks follow each measure's direction, and
explanations computed elsewhere enter as a built-in explainer does."""

import csv
import io
import json

import numpy as np
import pytest

from smat.cli import main
from smat.jobs.agreement import agreement_report
from smat.jobs.benchmark import (
    MEASURES,
    BenchmarkConfig,
    benchmark_csv,
    benchmark_html,
    benchmark_report,
    best_per_measure,
)
from smat.jobs.explain import ExplainConfig
from smat.jobs.faithfulness import faithfulness_report
from smat.jobs.inputs import held_out_split
from smat.jobs.leakage import LeakageConfig, leakage_report
from smat.jobs.sanity import SanityConfig, sanity_report
from smat.store.model_store import load

EXPLAINERS = ("gradient", "attention_all", "random")


@pytest.fixture(scope="module")
def trained(tiny_teacher):
    return load(tiny_teacher / "model")


@pytest.fixture(scope="module")
def report(trained):
    data = held_out_split(trained, num_examples=20)
    config = BenchmarkConfig(explain=ExplainConfig(explainers=EXPLAINERS, batch_size=8),
                             leakage_folds=4)
    return data, benchmark_report(trained, data, config)


def test_every_column_equals_its_own_commands_number(trained, report):
    data, result = report
    explain = ExplainConfig(explainers=EXPLAINERS, batch_size=8)
    faithfulness = faithfulness_report(trained, data, explain)["explainers"]
    leakage = leakage_report(trained, data, LeakageConfig(folds=4, explain=explain))
    sanity = sanity_report(trained, data, SanityConfig(
        mode="cascading", explain=ExplainConfig(explainers=("gradient",), batch_size=8)))
    agreement = agreement_report([trained], data, explain, metrics=("spearman",))
    for name in EXPLAINERS:
        row = result["explainers"][name]
        for measure in ("comprehensiveness", "sufficiency"):
            for part in ("mean", "low", "high"):
                assert row[measure][part] == pytest.approx(faithfulness[name][measure][part],
                                                           abs=1e-6)
        assert row["leakage"]["mean"] == pytest.approx(
            leakage["explainers"][name]["accuracy"])
        assert row["seconds"]["run"] > 0 and row["seconds"]["compile"] >= 0
    # the benchmark reuses its own explanations of the trained model: the same numbers
    assert result["explainers"]["gradient"]["randomization_similarity"]["mean"] == (
        pytest.approx(sanity["explainers"]["gradient"]["spearman_abs"][-1]["mean"], abs=1e-5))
    names = agreement["metrics"]["spearman"]["names"]
    matrix = np.asarray(agreement["metrics"]["spearman"]["matrix"])
    for i, name in enumerate(names):
        others = [matrix[i][j] for j in range(len(names)) if j != i]
        assert result["explainers"][name]["agreement"]["mean"] == pytest.approx(
            np.mean(others), abs=1e-4)  # the report rounds to 4 places


def test_best_marks_follow_each_measures_direction(report):
    _, result = report
    best = best_per_measure(result)
    for measure, names in best.items():
        values = {n: r[measure]["mean"] for n, r in result["explainers"].items()
                  if r[measure] is not None}
        direction = MEASURES[measure].direction
        key = {"higher": lambda v: -v, "lower": lambda v: v, "zero": abs}[direction]
        assert set(names) == {n for n, v in values.items()
                              if key(v) == min(map(key, values.values()))}
    assert "agreement" not in best  # no better direction, no mark
    # flipping a direction flips the mark (a check that can fail)
    flipped = json.loads(json.dumps(result))
    flipped["measures"]["sufficiency"]["direction"] = "higher"
    values = {n: r["sufficiency"]["mean"] for n, r in result["explainers"].items()}
    assert len(set(values.values())) > 1
    assert best_per_measure(flipped)["sufficiency"] != best["sufficiency"]


def test_report_formats_carry_every_explainer_and_measure(report):
    _, result = report
    rows = list(csv.DictReader(io.StringIO(benchmark_csv(result))))
    assert [r["explainer"] for r in rows] == list(EXPLAINERS)
    assert float(rows[0]["comprehensiveness_mean"]) == pytest.approx(
        result["explainers"]["gradient"]["comprehensiveness"]["mean"])
    # read back from its JSON (sorted keys), the report keeps its order
    assert benchmark_csv(json.loads(json.dumps(result, sort_keys=True))) == benchmark_csv(result)
    page = benchmark_html(result)
    assert page.count("<tr>") == len(EXPLAINERS) + 1
    assert "lower is better" in page and "higher is better" in page
    assert "closer to zero is better" in page


def test_unknown_measures_are_refused_by_name():
    with pytest.raises(ValueError, match="--measures: unknown \\['speed'\\]"):
        BenchmarkConfig(measures=("speed",), explain=ExplainConfig(explainers=("gradient",)))


def test_explanations_computed_elsewhere_enter_as_a_built_in_explainer(tiny_teacher,
                                                                       tmp_path, capsys):
    """A file of gradient explanations made by `smat explain` and renamed (as another
    tool's output would be) gets the gradient's numbers; measures that recompute an
    explainer do not apply to it."""
    texts = ["a great and moving film", "dull , slow and awful", "truly wonderful acting"]
    path = tmp_path / "texts.txt"
    path.write_text("\n".join(texts) + "\n")
    model = str(tiny_teacher / "model")
    assert main(["explain", "--model", model, "--explainers", "gradient",
                 "--output-dir", str(tmp_path / "e"), str(path)]) == 0
    outside = tmp_path / "mine.jsonl"
    outside.write_text("".join(json.dumps({"text": r["text"], "scores": {
        "mine": r["scores"]["gradient"]}}) + "\n"
        for r in json.loads((tmp_path / "e" / "explanations.json").read_text())))
    assert main(["benchmark", "--model", model, "--explainers", "gradient", str(outside),
                 "--measures", "comprehensiveness", "randomization_similarity", "agreement",
                 "--output-dir", str(tmp_path / "bench"), "--no-progress"]) == 0
    result = json.loads((tmp_path / "bench" / "benchmark.json").read_text())
    own, mine = result["explainers"]["gradient"], result["explainers"]["mine"]
    assert result["num_examples"] == 3
    assert result["settings"]["measures"] == ["comprehensiveness",
                                              "randomization_similarity", "agreement"]
    assert result["explainer_order"] == ["gradient", "mine"]
    assert mine["comprehensiveness"]["mean"] == pytest.approx(
        own["comprehensiveness"]["mean"], abs=1e-6)
    assert mine["agreement"]["mean"] == pytest.approx(1.0, abs=1e-4)
    assert own["randomization_similarity"] is not None
    assert mine["randomization_similarity"] is None
    for suffix in ("md", "csv", "html", "png"):
        assert (tmp_path / "bench" / f"benchmark.{suffix}").stat().st_size > 0
    out = capsys.readouterr().out
    assert "| mine |" in out and "n/a" in out


def test_without_explainers_the_benchmark_runs_its_default_set():
    """`smat benchmark --model M` alone is a report: the default explainers on 64 rows;
    a flag changes only what it names."""
    import dataclasses

    from smat.cli import parse_command
    from smat.jobs.benchmark import DEFAULT_EXPLAIN

    _, config = parse_command(["benchmark", "--model", "m"])
    assert config.benchmark.explain == DEFAULT_EXPLAIN
    assert DEFAULT_EXPLAIN.num_examples == 64 and "random" in DEFAULT_EXPLAIN.explainers
    _, config = parse_command(["benchmark", "--model", "m", "--explainers", "gradient"])
    assert config.benchmark.explain == dataclasses.replace(DEFAULT_EXPLAIN,
                                                           explainers=("gradient",))


def test_rationales_add_plausibility_columns_equal_to_the_command(tiny_teacher, eraser_dir,
                                                                  tmp_path, capsys):
    """With --rationales the documents are the rows and the plausibility columns equal
    `smat plausibility`'s numbers; without them those columns do not run, and asking for
    them alone is refused by name."""
    model = str(tiny_teacher / "model")
    assert main(["plausibility", "--model", model, "--data-dir", str(eraser_dir),
                 "--explainers", "gradient", "attention_all",
                 "--output-dir", str(tmp_path / "p")]) == 0
    own = json.loads((tmp_path / "p" / "plausibility.json").read_text())["explainers"]
    assert main(["benchmark", "--model", model, "--rationales", str(eraser_dir),
                 "--explainers", "gradient", "attention_all", "--leakage-folds", "2",
                 "--output-dir", str(tmp_path / "b")]) == 0
    result = json.loads((tmp_path / "b" / "benchmark.json").read_text())
    assert result["num_examples"] == 2
    for name in ("gradient", "attention_all"):
        row = result["explainers"][name]
        assert row["plausibility_auc"]["mean"] == pytest.approx(own[name]["roc_auc"])
        assert row["plausibility_ap"]["mean"] == pytest.approx(own[name]["average_precision"])
    # progress names every (explainer, measure) as it is computed
    err = capsys.readouterr().err
    assert "benchmark:   gradient: plausibility_auc" in err
    assert "benchmark:   attention_all: comprehensiveness" in err

    data = held_out_split(load(model), num_examples=6)
    default = benchmark_report(load(model), data, BenchmarkConfig(
        explain=ExplainConfig(explainers=("gradient",)), leakage_folds=2))
    assert not {"plausibility_auc", "plausibility_ap"} & set(default["measures"])
    with pytest.raises(ValueError, match="--measures plausibility_auc .* --rationales"):
        BenchmarkConfig(measures=("plausibility_auc",),
                        explain=ExplainConfig(explainers=("gradient",)))
    assert main(["benchmark", "--model", model, "--rationales", str(eraser_dir), "--texts",
                 str(eraser_dir / "test.jsonl"), "--output-dir", str(tmp_path / "c")]) == 2
    assert "leave out --texts" in capsys.readouterr().err
