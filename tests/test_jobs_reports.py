"""Tests for the faithfulness, agreement and plausibility reports (smat.jobs.faithfulness,
smat.jobs.agreement, smat.jobs.plausibility) and their commands (faithfulness, agreement,
plausibility) on the tiny teacher of conftest.py."""

import dataclasses
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.tree_util import Partial

from smat.cli import main
from smat.data import Encoded, load_eraser, take
from smat.evaluation import agreement_matrix, comprehensiveness_sufficiency, holm_bonferroni
from smat.jobs.agreement import agreement_report, agreement_table
from smat.jobs.explain import ExplainConfig, explain_data
from smat.jobs.faithfulness import _predict_proba, faithfulness_report
from smat.jobs.inputs import held_out_split, load_groups, sample_per_group
from smat.jobs.plausibility import head_plausibility, plausibility_report
from smat.models import functional
from smat.store.model_store import load

RANDOM = ExplainConfig(explainers=("random",))


@pytest.fixture(scope="module")
def trained(tiny_teacher):
    return load(tiny_teacher / "model")


def test_held_out_split_is_the_teacher_test_split(trained, tiny_teacher):
    test = held_out_split(trained)
    assert len(test.labels) == json.loads((tiny_teacher / "result.json").read_text())[
        "sizes"]["test"] == 40
    assert len(held_out_split(trained, num_examples=7).labels) == 7
    with pytest.raises(ValueError, match="num_examples must be >= 1"):
        held_out_split(trained, num_examples=0)


def test_faithfulness_report_equals_one_unbatched_metric_call(trained):
    data = held_out_split(trained, num_examples=20)
    explain = ExplainConfig(explainers=("gradient", "random"), batch_size=7)
    report = faithfulness_report(trained, data, explain)
    explained = explain_data(trained, data, dataclasses.replace(explain, batch_size=16))
    graphdef, params = functional.split(trained.model)
    for name in ("gradient", "random"):
        whole = comprehensiveness_sufficiency(
            Partial(_predict_proba(graphdef), params), data.input_ids, explained.scores[name],
            attention_mask=data.attention_mask, special_tokens_mask=data.special_tokens_mask,
            token_type_ids=data.token_type_ids, replacement_id=trained.tokenizer.mask_token_id)
        row = report["explainers"][name]
        assert row["num_valid"] + row["num_excluded"] == 20
        np.testing.assert_allclose(row["comprehensiveness"]["mean"],
                                   whole.mean_comprehensiveness, atol=1e-6)
        np.testing.assert_allclose(row["sufficiency"]["mean"], whole.mean_sufficiency,
                                   atol=1e-6)
        assert row["sufficiency"]["low"] <= row["sufficiency"]["mean"] <= row[
            "sufficiency"]["high"]


def test_faithfulness_rejects_bad_input(trained):
    data = held_out_split(trained, num_examples=4)
    with pytest.raises(ValueError, match="replacement must be 'mask' or 'pad'"):
        faithfulness_report(trained, data, RANDOM, replacement="unk")
    regression = trained._replace(info={**trained.info, "task": "regression"})
    with pytest.raises(ValueError, match="track a class probability"):
        faithfulness_report(regression, data, RANDOM)


def test_agreement_over_identical_seeds_equals_one_seed(trained):
    data = held_out_split(trained, num_examples=24)
    explain = ExplainConfig(explainers=("gradient", "input_x_gradient", "attention_all"))
    report = agreement_report([trained, trained], data, explain, metrics=["spearman", "pearson"])
    explained = explain_data(trained, data, explain)
    one = agreement_matrix(explained.scores, explained.show, metric="spearman")
    np.testing.assert_allclose(report["metrics"]["spearman"]["matrix"], one.values, atol=1e-4)
    assert report["num_models"] == 2 and len(report["tests"]) == 3
    raw = [t["p_value"] for t in report["tests"]]
    rejected, adjusted = holm_bonferroni(raw)
    assert [t["p_holm"] for t in report["tests"]] == pytest.approx(adjusted.tolist())
    assert [t["significant"] for t in report["tests"]] == rejected.tolist()
    assert all(0.0 <= v <= 1.0 for v in report["top_k_overlap"].values())
    with pytest.raises(ValueError, match="two or more"):
        agreement_report([trained], data, ExplainConfig(explainers=("gradient",)))
    with pytest.raises(ValueError, match="unknown agreement metrics"):
        agreement_report([trained], data, explain, metrics=["cosine"])


def test_plausibility_scores_words_and_counts_what_truncation_cuts(trained, eraser_dir):
    rationales = load_eraser(eraser_dir, split="test")
    report = plausibility_report(trained, rationales,
                                 ExplainConfig(explainers=("gradient", "random")))
    assert report["rationale_words"] == 4 and report["rationale_words_cut"] == 0
    assert report["top_k"] == 2  # mean rationale length: (1 + 3) / 2
    for row in report["explainers"].values():
        for metric in ("roc_auc", "average_precision", "token_f1", "iou_f1"):
            assert 0.0 <= row[metric] <= 1.0
    # 8 tokens: [CLS] + 6 words + [SEP]; word 6 of the second rationale (words 4-6) is cut.
    with pytest.warns(UserWarning) as caught:
        short = plausibility_report(trained, rationales, RANDOM, max_len=8, top_k=1)
    messages = [str(w.message) for w in caught]
    assert any("2 of 2 texts are longer than max_len=8" in m for m in messages)
    assert any("1 of 4 rationale words lie beyond max_len=8" in m for m in messages)
    assert short["rationale_words_cut"] == 1 and short["top_k"] == 1


def test_commands_write_json_and_markdown(tiny_teacher, eraser_dir, tmp_path, capsys,
                                         monkeypatch):
    from smat.jobs import explain

    multiples = []  # --length-multiple as it reaches the batched explainers

    def recording(*args, length_multiple, **kwargs):
        multiples.append(length_multiple)
        return run_explainers(*args, length_multiple=length_multiple, **kwargs)

    run_explainers = explain.explain_encoded
    monkeypatch.setattr(explain, "explain_encoded", recording)
    model = str(tiny_teacher / "model")
    assert main(["faithfulness", "--model", model, "--explainers", "gradient", "random",
                 "--num-examples", "8", "--bins", "0.1", "0.5", "--length-multiple", "4",
                 "--output-dir", str(tmp_path / "f")]) == 0
    assert multiples == [4]
    faith = json.loads((tmp_path / "f" / "faithfulness.json").read_text())
    assert faith["bins"] == [0.1, 0.5] and faith["num_examples"] == 8
    assert "| gradient |" in (tmp_path / "f" / "faithfulness.md").read_text()
    assert main(["agreement", "--model", model, "--explainers", "gradient", "attention_all",
                 "--num-examples", "8", "--metrics", "pearson", "--output-dir",
                 str(tmp_path / "a")]) == 0
    assert (tmp_path / "a" / "agreement_pearson.png").stat().st_size > 0
    assert multiples == [4, 16]  # the default
    assert main(["plausibility", "--model", model, "--data-dir", str(eraser_dir),
                 "--explainers", "attention_all", "--output-dir", str(tmp_path / "p")]) == 0
    assert "| attention_all |" in capsys.readouterr().out
    assert main(["plausibility", "--model", model, "--data-dir", str(tmp_path / "none"),
                 "--explainers", "random"]) == 2
    assert "test.jsonl" in capsys.readouterr().err


def test_every_evaluation_command_scores_a_users_texts_file(tiny_teacher, trained, tmp_path,
                                                           capsys):
    """faithfulness, agreement, sanity and attack read --texts instead of the held-out split
    (40 rows), and faithfulness's numbers are those of the same texts scored directly."""
    from smat.store.model_store import encode_texts

    texts = ["a great and moving film", "dull , slow and awful", "truly wonderful acting"]
    path = tmp_path / "texts.txt"
    path.write_text("\n".join(texts) + "\n")
    model = str(tiny_teacher / "model")
    common = ["--model", model, "--texts", str(path)]
    assert main(["faithfulness", *common, "--explainers", "gradient", "--bins", "0.5",
                 "--output-dir", str(tmp_path / "f")]) == 0
    faith = json.loads((tmp_path / "f" / "faithfulness.json").read_text())
    assert faith["num_examples"] == 3
    direct = faithfulness_report(trained, encode_texts(trained, texts, job="test"),
                                 ExplainConfig(explainers=("gradient",)), bins=(0.5,))
    for measure in ("comprehensiveness", "sufficiency"):
        assert faith["explainers"]["gradient"][measure] == pytest.approx(
            direct["explainers"]["gradient"][measure], rel=1e-6)
    assert main(["agreement", *common, "--num-examples", "2", "--explainers", "gradient",
                 "attention_all", "--metrics", "pearson", "--output-dir",
                 str(tmp_path / "a")]) == 0
    assert json.loads((tmp_path / "a" / "agreement.json").read_text())["num_examples"] == 2
    assert main(["sanity", *common, "--mode", "independent", "--blocks", "1",
                 "--explainers", "gradient", "--output-dir", str(tmp_path / "s")]) == 0
    assert json.loads((tmp_path / "s" / "sanity.json").read_text())["num_examples"] == 3
    assert main(["attack", *common, "--explainers", "gradient", "--steps", "2",
                 "--output-dir", str(tmp_path / "t")]) == 0
    assert json.loads((tmp_path / "t" / "attack_unconstrained.json").read_text()
                      )["num_examples"] == 3
    capsys.readouterr()
    groups = tmp_path / "groups.json"
    groups.write_text(json.dumps({"split": "test", "group": ["easy"] * 40}))
    assert main(["agreement", *common, "--groups", str(groups), "--explainers", "gradient",
                 "attention_all"]) == 2
    assert "--texts and --groups exclude each other" in capsys.readouterr().err
    path.write_text("\n\n")
    assert main(["faithfulness", *common, "--explainers", "gradient"]) == 2
    assert "holds no text" in capsys.readouterr().err


def test_explanations_computed_elsewhere_are_scored_like_smats_own(tiny_teacher, tmp_path,
                                                                    capsys):
    """`smat explain`'s explanations.json, read back as a file of outside explanations,
    gives faithfulness and agreement equal to computing the same explainers in smat."""
    texts = ["a great and moving film", "dull , slow and awful", "truly wonderful acting"]
    path = tmp_path / "texts.txt"
    path.write_text("\n".join(texts) + "\n")
    model = str(tiny_teacher / "model")
    assert main(["explain", "--model", model, "--explainers", "gradient", "attention_all",
                 "--output-dir", str(tmp_path / "e"), str(path)]) == 0
    outside = tmp_path / "outside.jsonl"  # renamed, as another tool's output would be
    records = json.loads((tmp_path / "e" / "explanations.json").read_text())
    outside.write_text("".join(json.dumps({"text": r["text"], "scores": {
        f"my_{name}": values for name, values in r["scores"].items()}}) + "\n"
        for r in records))
    runs = {"own": ["--texts", str(path), "--explainers", "gradient", "attention_all"],
            "file": ["--explainers", str(outside)]}
    reports = {}
    for kind, args in runs.items():
        for command in ("faithfulness", "agreement"):
            assert main([command, "--model", model, *args, "--bins", "0.2", "0.5",
                         "--output-dir", str(tmp_path / kind / command)]
                        if command == "faithfulness" else
                        [command, "--model", model, *args, "--metrics", "pearson",
                         "--output-dir", str(tmp_path / kind / command)]) == 0
            reports[kind, command] = json.loads(
                (tmp_path / kind / command / f"{command}.json").read_text())
    for name in ("gradient", "attention_all"):
        own, file = (reports[k, "faithfulness"]["explainers"][n]
                     for k, n in (("own", name), ("file", f"my_{name}")))
        for measure in ("comprehensiveness", "sufficiency"):
            assert file[measure]["mean"] == pytest.approx(own[measure]["mean"], abs=1e-6)
    pearson = {k: reports[k, "agreement"]["metrics"]["pearson"]["matrix"][0][1]
               for k in ("own", "file")}
    assert pearson["file"] == pytest.approx(pearson["own"], abs=1e-4)
    capsys.readouterr()
    # smat's own explainers run beside a file's, on its texts; a repeated name is an error
    assert main(["agreement", "--model", model, "--explainers", str(outside), "random",
                 "--output-dir", str(tmp_path / "mixed")]) == 0
    assert main(["faithfulness", "--model", model, "--explainers", str(outside),
                 "--texts", str(path)]) == 2
    assert "leave out --texts" in capsys.readouterr().err
    assert main(["sanity", "--model", model, "--explainers", str(outside)]) == 2
    assert "not static explainers" in capsys.readouterr().err
    records[1]["scores"]["gradient"] = records[1]["scores"]["gradient"][1:]
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps(records))
    assert main(["faithfulness", "--model", model, "--explainers", str(broken)]) == 2
    assert f"{broken}, record 2: 'gradient' has" in capsys.readouterr().err


def test_explanation_file_errors_name_the_record_and_explainer(tmp_path):
    from smat.store.explanation_file import read_explanations, read_records

    data = encode_rows = np.zeros((1, 6), np.int32)
    del encode_rows
    shown = np.array([[False, True, True, True, False, False]])
    tokens = [["[CLS]", "a", "good", "film", "[SEP]", "[PAD]"]]
    encoded = Encoded(data, (data == 0).astype(np.int32), data, ~shown, np.zeros(1, np.int32))
    path = tmp_path / "scores.jsonl"

    def read(*records):
        path.write_text("".join(json.dumps(r) + "\n" for r in records))
        return read_explanations(path, encoded, tokens, shown=shown)

    given = read({"text": "a good film", "tokens": ["a", "good", "film"],
                  "scores": {"m": [0.5, -1, 2.0]}})
    np.testing.assert_array_equal(given.scores["m"], [[0, 0.5, -1, 2, 0, 0]])
    with pytest.raises(ValueError, match=r"line 1: 'm' has 2 scores for the 3 tokens"):
        read({"text": "a good film", "scores": {"m": [1, 2]}})
    with pytest.raises(ValueError, match=r"line 1: its tokens .* another tokenizer"):
        read({"text": "a good film", "tokens": ["a", "go", "od"], "scores": {"m": [1, 2, 3]}})
    with pytest.raises(ValueError, match="line 1: 'm' holds a score that is not a finite"):
        path.write_text('{"text": "a good film", "scores": {"m": [1, NaN, 3]}}\n')
        read_explanations(path, encoded, tokens, shown=shown)
    with pytest.raises(ValueError, match=r"line 2: explainers \['n'\] differ"):
        read({"text": "x", "scores": {"m": [1, 2, 3]}}, {"text": "y", "scores": {"n": [1]}})
    with pytest.raises(ValueError, match="line 1: a record needs \"text\""):
        read({"scores": {"m": [1, 2, 3]}})
    path.write_text("[1, 2")
    with pytest.raises(ValueError, match="is not a JSON array or JSON lines"):
        read_records(path)


def test_head_plausibility_layer_oracle_equals_the_layer_mean_explainer(trained, eraser_dir):
    rationales = load_eraser(eraser_dir, split="test")
    oracle = head_plausibility(trained, rationales)
    report = plausibility_report(trained, rationales,
                                 ExplainConfig(explainers=("attention_last",)))
    encoder = trained.model.encoder.config
    heads = np.asarray(oracle["head_auc"])
    assert heads.shape == (encoder.num_layers, encoder.num_heads)
    # the last layer's head mean is the static last-layer explainer
    assert oracle["layer_auc"][-1] == pytest.approx(
        report["explainers"]["attention_last"]["roc_auc"], abs=1e-6)
    assert oracle["best_head_auc"] == heads.max() == heads[tuple(oracle["best_head"])]
    assert oracle["best_layer_auc"] == max(oracle["layer_auc"])


def test_agreement_by_group_equals_agreement_on_each_group_alone(trained):
    data = held_out_split(trained, num_examples=24)
    explain = ExplainConfig(explainers=("gradient", "attention_all"))
    groups = np.array(["hard", "easy", "x"] * 8)
    report = agreement_report([trained], data, explain, metrics=["pearson"], groups=groups)
    assert list(report["groups"]) == ["easy", "hard", "x"]  # cartography order, then others
    for label, part in report["groups"].items():
        alone = agreement_report([trained], take(data, np.flatnonzero(groups == label)), explain,
                                 metrics=["pearson"])
        assert part["num_examples"] == 8
        assert part["metrics"]["pearson"]["matrix"] == alone["metrics"]["pearson"]["matrix"]
        assert part["tests"] == alone["tests"]
    table = agreement_table(report)
    assert "| easy | 8 |" in table and "Mean over pairs by group" in table
    with pytest.raises(ValueError, match="groups has 3 labels for 24 rows"):
        agreement_report([trained], data, explain, groups=groups[:3])


def test_groups_files_and_samples(tmp_path):
    (tmp_path / "g.json").write_text(json.dumps({"split": "test", "group": ["a", "b", "a"]}))
    split, labels = load_groups(tmp_path / "g.json")
    assert split == "test" and labels.tolist() == ["a", "b", "a"]
    (tmp_path / "bad.json").write_text(json.dumps({"split": "dev", "group": []}))
    with pytest.raises(ValueError, match="names split 'dev'"):
        load_groups(tmp_path / "bad.json")
    (tmp_path / "nogroup.json").write_text(json.dumps({"split": "test"}))
    with pytest.raises(ValueError, match="no 'group' list"):
        load_groups(tmp_path / "nogroup.json")
    with pytest.raises(FileNotFoundError, match="cartography.json"):
        load_groups(tmp_path)
    labels = np.array(["easy"] * 10 + ["hard"] * 3)
    rows = sample_per_group(labels, 4, seed=0)
    assert (np.sort(rows) == rows).all() and len(set(rows.tolist())) == 7
    assert (labels[rows] == "easy").sum() == 4 and (labels[rows] == "hard").sum() == 3
    assert sample_per_group(labels, 4, seed=0).tolist() == rows.tolist()
    assert sample_per_group(labels, None).tolist() == list(range(13))
    with pytest.raises(ValueError, match="per_group must be >= 1, got 0"):
        sample_per_group(labels, 0)


def test_agreement_command_by_cartography_group(tiny_teacher_args, tmp_path, capsys):
    """train-teacher --training-dynamics writes the data map; agreement --groups reads it
    and reports every group on the teacher's training rows."""
    run = tmp_path / "teacher"
    assert main(["train-teacher", *tiny_teacher_args, "--training-dynamics",
                 "--output-dir", str(run)]) == 0
    carto = json.loads((run / "cartography.json").read_text())
    assert carto["split"] == "teacher_train" and carto["num_epochs"] == 2
    assert len(carto["group"]) == json.loads((run / "result.json").read_text())[
        "sizes"]["teacher_train"]
    assert sum(carto["counts"].values()) == len(carto["group"])
    assert (run / "data_map.png").stat().st_size > 0
    assert main(["agreement", "--model", str(run / "model"), "--explainers", "gradient",
                 "attention_all", "--metrics", "pearson", "--groups", str(run),
                 "--per-group", "5", "--output-dir", str(tmp_path / "a")]) == 0
    report = json.loads((tmp_path / "a" / "agreement.json").read_text())
    present = [g for g, n in carto["counts"].items() if n]
    assert sorted(report["groups"]) == sorted(present)
    assert all(part["num_examples"] == min(5, carto["counts"][g])
               for g, part in report["groups"].items())
    assert main(["agreement", "--model", str(run / "model"), "--explainers", "gradient",
                 "random", "--per-group", "5"]) == 2
    assert "--per-group samples the rows of each group; it needs groups" in (
        capsys.readouterr().err)


def test_bfloat16_explanations_and_faithfulness_stay_close_to_float32(tiny_teacher, trained):
    """--precision bfloat16 computes in bfloat16 (matmul operands) and reports float32."""
    low = load(tiny_teacher / "model", precision="bfloat16")
    leaves = jax.tree.leaves(functional.split(low.model)[1])
    assert {leaf.dtype for leaf in leaves} == {jnp.dtype(jnp.bfloat16)}
    data = held_out_split(trained, num_examples=16)
    explain = ExplainConfig(explainers=("integrated_gradients",), ig_steps=8)
    full = explain_data(trained, data, explain)
    half = explain_data(low, data, dataclasses.replace(explain, precision="bfloat16"))
    a, b = full.scores["integrated_gradients"], half.scores["integrated_gradients"]
    assert b.dtype == np.float32 and not np.array_equal(a, b)
    relative = np.abs(a - b).max() / np.abs(a).max()
    assert relative < 0.1, relative  # bfloat16 keeps 8 significant bits
    reports = [faithfulness_report(m, data, ExplainConfig(explainers=("gradient",),
                                                          batch_size=8, precision=precision))
               for m, precision in ((trained, "float32"), (low, "bfloat16"))]
    comp = [r["explainers"]["gradient"]["comprehensiveness"]["mean"] for r in reports]
    assert abs(comp[0] - comp[1]) < 0.05, comp
    with pytest.raises(ValueError, match="precision must be one of"):
        load(tiny_teacher / "model", precision="float16")
    with pytest.raises(ValueError, match="the model is in bfloat16 but ExplainConfig.precision "
                                         "is 'float32': load it with"):
        explain_data(low, data, explain)


def test_held_out_rows_are_cached_in_the_model_folder_and_keyed_by_the_data(
        tiny_teacher, tmp_path, monkeypatch):
    """The first evaluation caches the rows; the next reads them without loading the data
    set (checked by making a load fail); an edited data file misses the cache and is
    refused as before."""
    import shutil

    from smat.store import run_record

    teacher = tmp_path / "teacher"
    shutil.copytree(tiny_teacher, teacher)
    for earlier in (teacher / "model").glob("held_out_*.npz"):  # other tests' evaluations
        earlier.unlink()
    model = load(teacher / "model")
    first = held_out_split(model, folder=teacher)
    cached = list((teacher / "model").glob("held_out_test_*.npz"))
    assert len(cached) == 1
    for got, want in zip(first, held_out_split(model), strict=True):
        np.testing.assert_array_equal(got, want)

    def no_loading(*args, **kwargs):
        raise AssertionError("the data set was loaded again")

    with monkeypatch.context() as patched:
        patched.setattr(run_record, "load_run", no_loading)
        again = held_out_split(model, num_examples=5, folder=teacher / "model")
    np.testing.assert_array_equal(again.input_ids, first.input_ids[:5])
    # a moved model folder keeps its cache
    shutil.copytree(teacher, tmp_path / "moved")
    with monkeypatch.context() as patched:
        patched.setattr(run_record, "load_run", no_loading)
        held_out_split(load(tmp_path / "moved" / "model"), folder=tmp_path / "moved")
    # the teacher-train rows are a cache of their own
    assert len(held_out_split(model, split="teacher_train", folder=teacher).labels) > 40
    # an edited data file (another content fingerprint) is not read from the cache
    monkeypatch.setattr(run_record, "data_fingerprint", lambda data: {"source": "0" * 16})
    with pytest.raises(ValueError, match="changed since it was trained"):
        held_out_split(model, folder=teacher)


def test_test_row_intervals_cover_settings_that_record_their_rows():
    from smat.jobs.simulability_report import cells_report, test_row_intervals

    def record(explainer, seed, agreed):
        return {"explainer": explainer, "seed": seed, "num_examples": 8,
                "test": {"accuracy": agreed.count("1") / len(agreed)}, "steps": 3,
                "train_seconds": 1.0, "test_agreement": agreed}

    records = [record("smat", 0, "1111111011" * 4), record("smat", 1, "1111110111" * 4),
               record("none", 0, "1111000010" * 4), record("none", 1, "1110000101" * 4),
               record("attention_all", 0, "1" * 40), record("attention_all", 1, "1" * 40)]
    del records[-1]["test_agreement"]  # an older record: no rows, no interval
    rows = test_row_intervals(records)
    assert [r["of"] for r in rows] == ["smat", "none", "smat - none"]
    assert rows[0]["mean"] == pytest.approx(0.9) and rows[1]["mean"] == pytest.approx(0.5)
    assert 0 < rows[2]["low"] < 0.4 < rows[2]["high"]
    assert "| 8 | smat - none | 40.00 |" in cells_report(records)[2]


def test_seed_pairs_tables_pair_students_within_one_teacher_only():
    """One row per (teacher, seed) with each setting's score and steps, '–' where a student
    is missing; the wins count only the seeds both settings have at that teacher."""
    from smat.jobs.simulability_report import seed_pair_wins, seed_pairs_table

    def record(teacher, explainer, seed, accuracy, steps):
        return {"teacher_params": teacher, "explainer": explainer, "seed": seed,
                "num_examples": 500, "test": {"accuracy": accuracy}, "steps": steps}

    records = [record("bbbb", "none", 0, 0.85, 900), record("bbbb", "attention_all", 0, 0.86, 1200),
               record("bbbb", "smat", 0, 0.89, 765), record("bbbb", "none", 1, 0.84, 800),
               record("bbbb", "attention_all", 1, 0.87, 700),
               record("aaaa", "attention_all", 0, 0.90, 10), record("aaaa", "smat", 0, 0.90, 12)]
    table = seed_pairs_table(records).splitlines()
    assert table[2] == "| bbbb | 0 | 85.00 (900) | 86.00 (1,200) | 89.00 (765) | +3.0 |"
    assert table[3] == "| bbbb | 1 | 84.00 (800) | 87.00 (700) | – |  |"
    assert table[4] == "| aaaa | 0 | – | 90.00 (10) | 90.00 (12) | 0.0 |"  # a tie, unsigned
    wins = seed_pair_wins(records).splitlines()
    assert wins[2] == "| bbbb | smat vs attention_all | 1 of 1 | +3.0 | 0.500 |"
    assert wins[4] == "| bbbb | attention_all vs none | 2 of 2 | +2.0 | 0.250 |"
    assert wins[5] == "| aaaa | smat vs attention_all | 0 of 1 | +0.0 | 1.000 |"


def test_coefficient_movement_measures_the_smat_students_head_weights_per_size():
    from smat.jobs.simulability_report import coefficient_movement

    uniform, sparse = [0.25] * 4, [0.5, 0.5, 0.0, 0.0]
    records = [{"explainer": "smat", "num_examples": 8, "head_weights": weights}
               for weights in (uniform, sparse, sparse)]
    records.append({"explainer": "none", "num_examples": 8})  # no coefficients: left out
    lines = coefficient_movement(records).splitlines()
    assert lines[2] == "| n=8 | 3 | 1.000 [0.000:1.000] | 2 [2:4] of 4 | 0.500 [0.250:0.500] |"


def test_ablation_table_shows_what_part_of_smats_gain_each_arm_keeps():
    """Per setting: test scores over seeds, the seed pairs SMaT wins, and the share of its
    gain over static attention kept; the best layer is chosen per seed on validation."""
    from smat.jobs.simulability_report import ablation_table, best_layer_records

    def record(explainer, seed, test, validation=0.5):
        return {"explainer": explainer, "seed": seed, "num_examples": 500,
                "test": {"accuracy": test}, "validation": {"accuracy": validation}}

    records = [record("smat", 0, 0.90), record("smat", 1, 0.88),
               record("attention_all", 0, 0.86), record("attention_all", 1, 0.86),
               record("smat_frozen", 0, 0.89), record("smat_frozen", 1, 0.86),
               # layer 1 is better on validation for seed 0, layer 0 for seed 1; the test
               # scores would choose otherwise, and must not
               record("layer0", 0, 0.95, validation=0.6), record("layer1", 0, 0.80, 0.7),
               record("layer0", 1, 0.84, validation=0.8), record("layer1", 1, 0.99, 0.7)]
    chosen = best_layer_records(records)
    assert [(r["seed"], r["chosen_layer"], r["test"]["accuracy"]) for r in chosen] == [
        (0, 1, 0.80), (1, 0, 0.84)]
    lines = ablation_table(records).splitlines()
    rows = {line.split(" | ")[0].removeprefix("| "): line for line in lines[2:]}
    assert rows["smat"] == "| smat | 2 | 89.00 [88.00:90.00] |  |  |"
    # seed 0 keeps (89 - 86) / (90 - 86) = 0.75 of SMaT's gain, seed 1 0 / 2 = 0
    assert rows["smat_frozen"] == "| smat_frozen | 2 | 87.50 [86.00:89.00] | 2 of 2 | 0.38 |"
    # (80 - 86) / 4 = -1.5 and (84 - 86) / 2 = -1: below static attention
    assert rows["best_layer"] == "| best_layer | 2 | 82.00 [80.00:84.00] | 2 of 2 | -1.25 |"
    assert rows["attention_all"].endswith("| 2 of 2 | 0.00 |")


def test_joined_cells_report_the_ablation_table_when_arms_are_present():
    from smat.jobs.simulability_report import cells_report

    def record(explainer, seed, test):
        return {"explainer": explainer, "seed": seed, "num_examples": 500, "steps": 3,
                "train_seconds": 1.0, "test": {"accuracy": test},
                "validation": {"accuracy": test}}

    plain = [record(name, seed, 0.8 + 0.01 * seed + (0.05 if name == "smat" else 0))
             for name in ("none", "attention_all", "smat") for seed in (0, 1)]
    assert "What part of SMaT's gain" not in cells_report(plain)[2]
    text = cells_report([*plain, record("layer3", 0, 0.84), record("layer3", 1, 0.85)])[2]
    assert "What part of SMaT's gain each setting keeps, n=500" in text
    assert "| best_layer | 2 |" in text and "| layer3 | 2 |" in text
