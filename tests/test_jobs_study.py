"""Tests for smat.jobs.study and `smat study score`."""

import json
from collections import Counter

import pytest
from scipy import stats

from smat.cli import main
from smat.jobs.study import read_answers, score_voted_file
from tests.test_evaluation_human_study import _study


def _write(folder, tasks, answers, *, answer_column="answer"):
    (folder / "tasks.jsonl").write_text("".join(json.dumps(t) + "\n" for t in tasks))
    lines = [f"worker,task_id,{answer_column},seconds"] + [
        f"{a['worker']},{a['task_id']},{a['answer']},3" for a in answers]
    (folder / "answers.csv").write_text("\n".join(lines) + "\n")


def test_study_score_command(tmp_path, capsys):
    tasks, answers = _study()
    _write(tmp_path, tasks, answers)
    with pytest.warns(UserWarning, match=r"ignoring columns \['seconds'\]"):
        assert main(["study", "score", "--tasks", str(tmp_path / "tasks.jsonl"), "--answers",
                     str(tmp_path / "answers.csv"), "--output-dir", str(tmp_path / "out")]) == 0
    report = json.loads((tmp_path / "out" / "study.json").read_text())
    assert report["score"]["ig"] == pytest.approx(2.5 / 6 + 2.5 / 4)
    out = capsys.readouterr().out
    assert "| ig | 100 | 100 | 104.2 |" in out and "| random | 1 | 1 |" in out


def test_missing_columns_and_bad_answers_are_reported(tmp_path, capsys):
    tasks, answers = _study()
    _write(tmp_path, tasks, answers, answer_column="label")
    with pytest.raises(ValueError, match=r"no column\(s\) \['answer'\]; its columns are"):
        read_answers(tmp_path / "answers.csv")
    with pytest.warns(UserWarning, match="seconds"):
        assert len(read_answers(tmp_path / "answers.csv", answer="label")) == len(answers)
    _write(tmp_path, tasks, answers + [{"worker": "x", "task_id": "zz", "answer": "pos"}])
    args = ["study", "score", "--tasks", str(tmp_path / "tasks.jsonl"), "--answers",
            str(tmp_path / "answers.csv"), "--output-dir", str(tmp_path / "out")]
    with pytest.warns(UserWarning):
        assert main(args) == 2
    assert "1 answers for unknown task ids" in capsys.readouterr().err
    with pytest.warns(UserWarning) as caught:
        assert main([*args, "--lenient"]) == 0
    assert any("dropped 1 answers for unknown task ids" in str(w.message) for w in caught)


def test_build_read_and_score_a_study_on_the_tiny_teacher(tiny_teacher, tmp_path, capsys):
    from smat.evaluation.study_tasks import HIDDEN
    from smat.jobs.study import held_out_texts
    from smat.store.model_store import load

    model = str(tiny_teacher / "model")
    out = tmp_path / "study"
    assert main(["study", "build", "--model", model, "--explainers", "gradient", "random",
                 "attention_all", "--num-samples", "6", "--ks", "1", "2",
                 "--annotators-per-task", "3", "--tasks-per-annotator", "4",
                 "--output-dir", str(out)]) == 0
    tasks = [json.loads(line) for line in (out / "tasks.jsonl").read_text().splitlines()]
    assert len(tasks) == 6 * 3 * 2
    texts = held_out_texts(load(model)).texts
    for t in tasks:
        original, shown = texts[t["sample"]].split(), t["text"].split()
        assert len(shown) == len(original)  # positions kept
        visible = [w for w in shown if w != HIDDEN]
        assert len(visible) == min(t["k"], len(original))
        assert all(s in (o, HIDDEN) for s, o in zip(shown, original, strict=True))
    golds = {t["sample"]: t["gold"] for t in tasks}
    assert sorted(Counter(golds.values()).values()) == [3, 3]  # class-balanced
    packages = (out / "packages.csv").read_text().splitlines()[1:]
    assert len(packages) == 36 * 3
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["num_annotators"] == 27 and len(manifest["samples"]) == 6
    # the same seed gives the same study
    assert main(["study", "build", "--model", model, "--explainers", "gradient", "random",
                 "attention_all", "--num-samples", "6", "--ks", "1", "2",
                 "--annotators-per-task", "3", "--tasks-per-annotator", "4",
                 "--output-dir", str(tmp_path / "again")]) == 0
    assert (tmp_path / "again" / "tasks.jsonl").read_text() == (out / "tasks.jsonl").read_text()
    assert main(["study", "read", "--model", model, "--tasks", str(out / "tasks.jsonl"),
                 "--name", "answers", "--output-dir", str(out)]) == 0
    assert main(["study", "score", "--tasks", str(out / "tasks.jsonl"), "--answers",
                 str(out / "answers.jsonl"), "--output-dir", str(out)]) == 0
    report = json.loads((out / "study.json").read_text())
    assert report["methods"] == ["gradient", "random", "attention_all"]
    assert report["ks"] == [1, 2] and "| gradient |" in capsys.readouterr().out
    (tmp_path / "first.json").write_text(json.dumps(
        {"score": {"gradient": 3.0, "random": 1.0, "attention_all": 2.0}}))
    assert main(["study", "score", "--tasks", str(out / "tasks.jsonl"), "--answers",
                 str(out / "answers.jsonl"), "--compare", str(tmp_path / "first.json"),
                 "--output-dir", str(out)]) == 0
    compared = json.loads((out / "study.json").read_text())["spearman_with_compared"]
    measured = [report["score"][m] for m in ("gradient", "random", "attention_all")]
    assert compared == pytest.approx(stats.spearmanr(measured, [3.0, 1.0, 2.0]).statistic)
    with pytest.raises(SystemExit):  # a study's rows are --num-samples
        main(["study", "build", "--model", model, "--explainers", "gradient",
              "--num-examples", "5"])
    assert "unrecognized arguments: --num-examples 5" in capsys.readouterr().err


def test_score_a_voted_table_and_filter_fast_workers(tmp_path, capsys):
    tasks, answers = _study()
    _write(tmp_path, tasks, answers)  # every answer took 3 s
    out = tmp_path / "out"
    assert main(["study", "score", "--tasks", str(tmp_path / "tasks.jsonl"), "--answers",
                 str(tmp_path / "answers.csv"), "--min-seconds", "5",
                 "--output-dir", str(out)]) == 2
    assert "dropped every worker" in capsys.readouterr().err  # 3 s < 5 s for everyone
    assert main(["study", "score", "--tasks", str(tmp_path / "tasks.jsonl"), "--answers",
                 str(tmp_path / "answers.csv"), "--min-seconds", "1",
                 "--output-dir", str(out)]) == 0
    report = json.loads((out / "study.json").read_text())
    assert report["dropped_workers"] == {} and -1 <= report["fleiss_kappa"] <= 1
    assert (out / "accuracy.png").stat().st_size > 0
    voted = tmp_path / "voted.tsv"
    rows = ["s\tm\tk\tok"] + [f"{t['sample']}\t{t['method']}\t{t['k']}\t"
                              f"{int(t['method'] == 'ig' or (t['sample'] == 0 and t['k'] == 5))}"
                              for t in tasks]
    voted.write_text("\n".join(rows) + "\n")
    assert main(["study", "score", "--voted", str(voted), "--voted-columns", "s", "m", "k",
                 "ok", "--output-dir", str(tmp_path / "v")]) == 0
    from_table = json.loads((tmp_path / "v" / "study.json").read_text())
    assert from_table["score"] == report["score"]
    assert main(["study", "score", "--voted", str(voted), "--answers", "x"]) == 2
    assert "either --answers" in capsys.readouterr().err


# ---------------------------------------------- majority votes as Lu et al. released them
# Their file is tab-separated with a .csv suffix; columns Text, Label, Saliency, Words and
# Correct; each sample is a block of rows that opens with its full-text row (Saliency
# "N/A", Words "All") and has no sample id. The reviews below are made up for the test.

LU_COLUMNS = ["Text", "Saliency", "Words", "Correct"]
LU_SAMPLES = [  # full text, label, {(method, k): correct}
    ("A warm, funny film; the cast is wonderful.", "positive",
     {("Integrated Gradients", 5): 1, ("Integrated Gradients", 10): 1,
      ("Random", 5): 0, ("Random", 10): 1}),
    ("Slow, muddled and far too long.", "negative",
     {("Integrated Gradients", 5): 1, ("Integrated Gradients", 10): 0,
      ("Random", 5): 0, ("Random", 10): 0}),
    ("I laughed, I cried, I would see it again.", "positive",
     {("Integrated Gradients", 5): 0, ("Integrated Gradients", 10): 1,
      ("Random", 5): 1, ("Random", 10): 1}),
]


def _lu_votes(path, samples=LU_SAMPLES, *, bad=None):
    """Write `samples` in Lu et al.'s layout; `bad` = (sample, method, k, column, value)
    puts one unreadable cell in."""
    lines = ["Text\tLabel\tSaliency\tWords\tCorrect"]
    for i, (text, label, cells) in enumerate(samples):
        lines.append(f"{text}\t{label}\tN/A\tAll\t1")
        for (method, k), correct in cells.items():
            shown = " ".join(w if n < k else "." for n, w in enumerate(text.split()))
            row = {"Text": shown, "Label": label, "Saliency": method, "Words": str(k),
                   "Correct": str(correct)}
            if bad is not None and bad[:3] == (i, method, k):
                row[bad[3]] = bad[4]
            lines.append("\t".join(row.values()))
    path.write_text("\n".join(lines) + "\n")
    return path


def _lu_expected():
    from smat.evaluation.human_study import score_recognized

    return score_recognized([{"sample": i, "method": m, "k": k, "correct": c}
                             for i, (_, _, cells) in enumerate(LU_SAMPLES)
                             for (m, k), c in cells.items()])


def test_score_lu_et_al_released_votes_as_they_are(tmp_path):
    """A .csv suffix on tab-separated data: once the table was read with commas
    and its columns reported as one tab-joined name; as .tsv the full-text rows failed with
    "invalid literal for int() with base 10: 'All'". Both files now score as the votes."""
    expected = _lu_expected()
    assert expected["num_samples"] == 3 and expected["score"]["Random"] != expected["score"][
        "Integrated Gradients"]
    for suffix in (".csv", ".tsv"):
        for rule in ("block", "text"):
            votes = _lu_votes(tmp_path / f"votes{suffix}")
            out = tmp_path / f"out{suffix}{rule}"
            assert main(["study", "score", "--voted", str(votes), "--voted-columns",
                         *LU_COLUMNS, "--sample-from", rule, "--output-dir", str(out)]) == 0
            report = json.loads((out / "study.json").read_text())
            assert report == expected, (suffix, rule)
    # The override wins over sniffing: read with commas the header is one column name.
    with pytest.raises(ValueError, match=r"its columns are \['Text\\tLabel"):
        score_voted_file(tmp_path / "votes.tsv", columns=LU_COLUMNS, sample_from="block",
                         delimiter=",")
    assert score_voted_file(tmp_path / "votes.csv", columns=LU_COLUMNS, sample_from="block",
                            delimiter="tab") == expected
    # "text" merges two blocks of one text into one sample; "block" keeps them apart.
    twice = _lu_votes(tmp_path / "twice.csv", LU_SAMPLES + LU_SAMPLES[:1])
    assert score_voted_file(twice, columns=LU_COLUMNS, sample_from="block")[
        "num_samples"] == 4
    with pytest.raises(ValueError, match="4 repeated"):
        score_voted_file(twice, columns=LU_COLUMNS, sample_from="text")


def test_unreadable_vote_cells_name_the_file_row_and_column(tmp_path, capsys):
    """Row numbers are the file's lines (header = row 1): block 0 takes rows 2-6, block 1
    opens on row 7, so its ("Random", 5) row is row 10."""
    votes = _lu_votes(tmp_path / "votes.tsv", bad=(1, "Random", 5, "Words", "ten"))
    args = ["study", "score", "--voted", str(votes), "--voted-columns", *LU_COLUMNS,
            "--sample-from", "block", "--output-dir", str(tmp_path / "out")]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err == (f"smat study score: error: {votes}, row 10, column 'Words': 'ten' is not a "
                   "whole number of words (k) nor 'All' (a full-text row)\n")
    votes = _lu_votes(tmp_path / "votes.tsv", bad=(0, "Integrated Gradients", 10, "Correct",
                                                   "yes"))
    assert main(args) == 2
    assert capsys.readouterr().err == (f"smat study score: error: {votes}, row 4, column "
                                       "'Correct': 'yes' is not 0 or 1\n")
    headless = tmp_path / "headless.tsv"
    lines = _lu_votes(tmp_path / "votes.tsv").read_text().splitlines()
    headless.write_text("\n".join(lines[:1] + lines[2:]) + "\n")  # no first full-text row
    with pytest.raises(ValueError, match=r"headless.tsv, row 2: a scored row before the "
                                         r"first full-text row \('Words' = 'All'\)"):
        score_voted_file(headless, columns=LU_COLUMNS, sample_from="block")
    with pytest.raises(ValueError, match="a delimiter is one character or 'tab'"):
        score_voted_file(votes, columns=LU_COLUMNS, sample_from="block", delimiter="||")
    from smat.evaluation.human_study import score_recognized

    with pytest.raises(ValueError, match=r"row 0 \(from 0\): k 'All' is not a whole number"):
        score_recognized([{"sample": 0, "method": "m", "k": "All", "correct": 1}])
