"""What a simulability experiment reports: the paired tests over seeds, the tables around
the simulability table, Figure 5 and the SMaT students' diagnostics; and joining cells that
separate calls trained from one teacher.

Every function reads student records (``result.json`` of :func:`smat.jobs.student_run.
run_student`, or the ``records`` of an experiment's ``results.json``), so a table
regenerates from committed result files alone.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from smat.evaluation.simulability import paired_seed_comparison, simulability_table
from smat.evaluation.statistics import bootstrap_over_rows
from smat.jobs.ablations import is_arm
from smat.jobs.grid import cell_dir
from smat.markdown import markdown_table
from smat.store.render import plot_head_weights

# The comparisons a SMaT claim rests on, each tested over seeds (candidate, baseline).
COMPARISONS = (("smat", "attention_all"), ("smat", "none"), ("attention_all", "none"))


def median_record(records: Sequence[Mapping[str, Any]], *, explainer: str,
                  num_examples: int, metric: str = "accuracy") -> Mapping[str, Any]:
    """The record of the median seed of one cell by test `metric` (the lower middle for an
    even count).

    Raises:
      ValueError: the records hold no such cell.
    """
    cell = sorted((r for r in records
                   if r["explainer"] == explainer and r["num_examples"] == num_examples),
                  key=lambda r: (r["test"][metric], r["seed"]))
    if not cell:
        raise ValueError(f"no {explainer!r} students at n={num_examples}")
    return cell[(len(cell) - 1) // 2]


def plot_figure5(records: Sequence[Mapping[str, Any]], path: Path, *, task: str = "",
                 metric: str = "accuracy") -> dict[str, Any]:
    """Figure 5 of the SMaT paper: the head coefficients of the SMaT student with the median
    test `metric` at the middle size with SMaT students, drawn into `path` (its title names
    the `task` when given); returns its seed, non-zero heads and largest coefficient ({}
    and no figure without SMaT students)."""
    sizes = sorted({r["num_examples"] for r in records if r["explainer"] == "smat"})
    if not sizes:
        return {}
    num_examples = sizes[len(sizes) // 2]
    figure_seed = median_record(records, explainer="smat", num_examples=num_examples,
                                metric=metric)
    weights = np.asarray(figure_seed["head_weights"])
    where = f"{task}, " if task else ""
    plot_head_weights(weights, path, title=f"SMaT head coefficients ({where}n={num_examples}, "
                                           f"median seed {figure_seed['seed']})")
    return {"figure5_seed": figure_seed["seed"],
            "figure5_nonzero_heads": int((weights > 0).sum()),
            "figure5_max_weight": float(weights.max())}


def smat_diagnostics(records: Sequence[Mapping[str, Any]], students_dir: Path,
                     *, outer_clip_norm: float, metric: str = "accuracy"
                     ) -> list[dict[str, Any]]:
    """Per SMaT student: did its head coefficients move, was the outer gradient alive
    (neither vanishing nor always clipped), and did it stop before the end?

    Reads each student's record and its metrics log under `students_dir` (one line per
    evaluation, each the mean over the steps since the previous one).
    """
    rows = []
    for record in records:
        if record.get("setting", record["explainer"]) != "smat":
            continue
        folder = cell_dir(students_dir, num_examples=record["num_examples"],
                          explainer=record["explainer"], seed=record["seed"])
        log = [json.loads(line) for line in
               (folder / "checkpoints" / "metrics.jsonl").read_text().splitlines()]
        weights = np.asarray(record["head_weights"])
        outer = np.array([entry["outer_grad_norm"] for entry in log])
        rows.append({
            "explainer": record["explainer"],
            "num_examples": record["num_examples"], "seed": record["seed"],
            f"test_{metric}": record["test"][metric],
            "steps": record["steps"], "best_step": record["best_step"],
            "head_l1_from_uniform": float(np.abs(weights - 1.0 / weights.size).sum()),
            "nonzero_heads": int((weights > 0).sum()), "num_heads": int(weights.size),
            "max_head_weight": float(weights.max()),
            "outer_grad_norm_mean": float(outer.mean()),
            "outer_grad_norm_max": float(outer.max()),
            "evaluations_with_mean_outer_norm_above_clip": int((outer > outer_clip_norm).sum()),
            "kl_first": log[0]["kl"], "kl_last": log[-1]["kl"],
            "sim_loss_first": log[0]["sim_loss"], "sim_loss_last": log[-1]["sim_loss"]})
    return rows


def diagnostics_table(rows: Sequence[Mapping[str, Any]], *, metric: str = "accuracy") -> str:
    """Markdown table of :func:`smat_diagnostics` (a sentence when there is no SMaT student)."""
    if not rows:
        return "No SMaT students in these records."
    shown = ((lambda v: f"{100 * v:.1f}") if metric == "accuracy" else (lambda v: f"{v:.4f}"))
    return markdown_table(
        ["n", "seed", "test acc" if metric == "accuracy" else f"test {metric}",
         "steps (best)", "non-zero heads", "max lambda", "L1 from uniform",
         "outer grad norm mean / max", "KL first -> last"],
        [[r["num_examples"], r["seed"], shown(r[f"test_{metric}"]),
          f"{r['steps']} ({r['best_step']})", f"{r['nonzero_heads']}/{r['num_heads']}",
          f"{r['max_head_weight']:.3f}", f"{r['head_l1_from_uniform']:.3f}",
          f"{r['outer_grad_norm_mean']:.3g} / {r['outer_grad_norm_max']:.3g}",
          f"{r['kl_first']:.3f} -> {r['kl_last']:.3f}"] for r in rows])


def paired_comparisons(records: Sequence[Mapping[str, Any]], *,
                       comparisons: Sequence[tuple[str, str]] = COMPARISONS,
                       metric: str = "accuracy") -> list[dict[str, Any]]:
    """Each (candidate, baseline) of `comparisons` whose two settings both have students,
    tested over seeds (one-sided Wilcoxon signed-rank, one trained student per seed), per
    size where both ran."""
    present = {record["explainer"] for record in records}
    return [{"candidate": candidate, "baseline": baseline, **row}
            for candidate, baseline in comparisons if {candidate, baseline} <= present
            for row in paired_seed_comparison(records, candidate=candidate,
                                              baseline=baseline, metric=metric)]


def comparisons_table(rows: Sequence[Mapping[str, Any]]) -> str:
    """Markdown table of :func:`paired_comparisons` (a sentence when there is none, as for a
    call that trained one setting, which ``experiments/smat_table1_cells.py`` pairs
    with the others)."""
    if not rows:
        return "No compared pair of settings has students in these records."
    return markdown_table(
        ["candidate vs baseline", "n", "models", "median difference (points)", "wins",
         "p (one-sided)"],
        [[f"{r['candidate']} vs {r['baseline']}", r["num_examples"], r["num_models"],
          f"{100 * r['median_difference']:+.2f}", f"{r['wins']}/{r['num_models']}",
          f"{r['p_value']:.3f}"] for r in rows])


def per_student_table(records: Sequence[Mapping[str, Any]], field: str = "steps") -> str:
    """Markdown table of what each cell's students took (median [min:max]) of a record's
    `field`, rounded to whole numbers: the training steps, or ``train_seconds``."""
    cells: dict[tuple[str, int], list[int]] = {}
    for record in records:
        cells.setdefault((record["explainer"], record["num_examples"]), []).append(
            round(record[field]))
    sizes = sorted({size for _, size in cells})

    def cell(values: list[int] | None) -> str:
        return "–" if values is None else (f"{int(np.median(values))} [{min(values)}:"
                                           f"{max(values)}]")

    return markdown_table(["explainer", *(f"n={size}" for size in sizes)],
                          [[explainer, *(cell(cells.get((explainer, size))) for size in sizes)]
                           for explainer in dict.fromkeys(name for name, _ in cells)])


def seed_pairs_table(records: Sequence[Mapping[str, Any]], *,
                     settings: Sequence[str] = ("none", "attention_all", "smat"),
                     candidate: str = "smat", baseline: str = "attention_all",
                     metric: str = "accuracy") -> str:
    """Markdown table of one size's students, one row per (teacher weights, seed): each
    setting's test `metric` (%) with the steps its student took (``–``: not trained), and
    `candidate` minus `baseline` in points where both are. Teachers come in the order the
    records first name them, seeds in order; a claim pairs students within one row only,
    since a retrained teacher moves its students as much as the settings do."""
    cells = {(r["teacher_params"], r["seed"], r["explainer"]): r for r in records}
    rows = []
    for teacher in dict.fromkeys(r["teacher_params"] for r in records):
        for seed in sorted({r["seed"] for r in records if r["teacher_params"] == teacher}):
            found = [cells.get((teacher, seed, name)) for name in settings]
            shown = ["–" if r is None else f"{100 * r['test'][metric]:.2f} ({r['steps']:,})"
                     for r in found]
            pair = [cells.get((teacher, seed, name)) for name in (candidate, baseline)]
            gap = (None if None in pair else
                   round(100 * (pair[0]["test"][metric] - pair[1]["test"][metric]), 1))
            rows.append([teacher, seed, *shown,
                         "" if gap is None else "0.0" if gap == 0 else f"{gap:+.1f}"])
    return markdown_table(["teacher weights", "seed", *settings,
                           f"{candidate} - {baseline}"], rows)


def seed_pair_wins(records: Sequence[Mapping[str, Any]], *,
                   comparisons: Sequence[tuple[str, str]] = COMPARISONS,
                   metric: str = "accuracy") -> str:
    """Markdown table beside :func:`seed_pairs_table`: per teacher weights and compared pair
    of settings, the seed pairs the candidate wins, the median difference and the one-sided
    Wilcoxon p over the seeds both settings have (one size's records)."""
    rows = []
    for teacher in dict.fromkeys(r["teacher_params"] for r in records):
        own = [r for r in records if r["teacher_params"] == teacher]
        for candidate, baseline in comparisons:
            seeds = ({r["seed"] for r in own if r["explainer"] == candidate}
                     & {r["seed"] for r in own if r["explainer"] == baseline})
            paired = [r for r in own if r["seed"] in seeds]
            rows += [[teacher, f"{candidate} vs {baseline}",
                      f"{row['wins']} of {row['num_models']}",
                      f"{100 * row['median_difference']:+.1f}", f"{row['p_value']:.3f}"]
                     for row in paired_seed_comparison(paired, candidate=candidate,
                                                       baseline=baseline, metric=metric)]
    return markdown_table(["teacher weights", "candidate vs baseline", "seed pairs won",
                           "median difference (points)", "p (one-sided)"], rows)


def coefficient_movement(records: Sequence[Mapping[str, Any]]) -> str:
    """Markdown table of how far the SMaT students' head coefficients moved, per size:
    the L1 distance from the uniform start, the heads left non-zero and the largest
    coefficient, each ``median [min:max]`` over the students (from their records'
    ``head_weights``)."""
    sizes = sorted({r["num_examples"] for r in records if r["explainer"] == "smat"})

    def spread(values: list[float], form: str) -> str:
        return (f"{format(float(np.median(values)), form)} [{format(min(values), form)}:"
                f"{format(max(values), form)}]")

    rows = []
    for size in sizes:
        weights = [np.asarray(r["head_weights"], float).ravel() for r in records
                   if r["explainer"] == "smat" and r["num_examples"] == size]
        rows.append([f"n={size}", len(weights),
                     spread([float(np.abs(w - 1 / w.size).sum()) for w in weights], ".3f"),
                     spread([int((w > 0).sum()) for w in weights], "g") + f" of {weights[0].size}",
                     spread([float(w.max()) for w in weights], ".3f")])
    return markdown_table(["size", "students", "L1 from uniform", "non-zero heads",
                           "largest coefficient"], rows)


def best_layer_records(records: Sequence[Mapping[str, Any]], *,
                       metric: str = "accuracy") -> list[dict[str, Any]]:
    """Per seed and size, the ``layer<k>`` student with the best validation `metric`,
    renamed ``best_layer`` (``chosen_layer`` says which): static attention of the layer a
    user would pick on validation, without looking at the test rows."""
    best: dict[tuple[int, int], Mapping[str, Any]] = {}
    for record in records:
        if not (record["explainer"].startswith("layer")
                and record["explainer"].removeprefix("layer").isdigit()):
            continue
        key = (record["num_examples"], record["seed"])
        if key not in best or (record["validation"][metric]
                               > best[key]["validation"][metric]):
            best[key] = record
    return [{**record, "explainer": "best_layer",
             "chosen_layer": int(record["explainer"].removeprefix("layer"))}
            for _, record in sorted(best.items())]


def ablation_table(records: Sequence[Mapping[str, Any]], *, metric: str = "accuracy",
                   reference: str = "smat", static: str = "attention_all") -> str:
    """Markdown table of one size's ablation arms against SMaT, one row per setting with
    students: their test `metric` (%, median [min:max]), the seed pairs SMaT (`reference`)
    wins against it, and the share of SMaT's gain over static attention (`static`) that
    the setting keeps, ``(setting - static) / (smat - static)``, median over the seeds
    where SMaT's gain is not zero. ``best_layer`` (:func:`best_layer_records`) is added
    when layer arms are present."""
    records = [*records, *best_layer_records(records, metric=metric)]
    scores: dict[str, dict[int, float]] = {}
    for record in records:
        scores.setdefault(record["explainer"], {})[record["seed"]] = (
            100 * record["test"][metric])
    ours, theirs = scores.get(reference, {}), scores.get(static, {})
    rows = []
    for name, by_seed in scores.items():
        values = list(by_seed.values())
        paired = [seed for seed in by_seed if seed in ours]
        kept = [(by_seed[s] - theirs[s]) / (ours[s] - theirs[s]) for s in paired
                if s in theirs and ours[s] != theirs[s]]
        rows.append([name, len(values),
                     f"{np.median(values):.2f} [{min(values):.2f}:{max(values):.2f}]",
                     "" if name == reference or not paired else
                     f"{sum(ours[s] > by_seed[s] for s in paired)} of {len(paired)}",
                     f"{np.median(kept):.2f}" if kept and name != reference else ""])
    return markdown_table(["setting", "students", f"test {metric} (%)",
                           f"seed pairs {reference} wins", f"share of {reference}'s gain "
                           f"over {static} kept"], rows)


def paper_table(cells: Mapping[str, Sequence[str]], sizes: Sequence[int]) -> str:
    """A paper's simulability table in the layout of :func:`simulability_table`: one row of
    cells per explainer, one column per size."""
    return markdown_table(["explainer", *(f"n={size}" for size in sizes)],
                          [[name, *row] for name, row in cells.items()])


def check_one_teacher(runs: Mapping[str, Mapping[str, Any]]) -> None:
    """Refuse runs (by file name) whose students learned from different teachers: the
    teachers' test scores differ, or the students' records name different teacher weights
    (``teacher_params``; records written before it was kept name none).

    Raises:
      ValueError: naming each file's teacher test accuracy and weights.
    """
    def weights(run: Mapping[str, Any]) -> set[str]:
        return {record["teacher_params"] for record in run["records"]
                if record.get("teacher_params")}

    scores = {repr(run.get("teacher_test")) for run in runs.values()}
    if len(scores) > 1 or len(set().union(*map(weights, runs.values()))) > 1:
        listed = "; ".join(
            f"{name}: test accuracy {run.get('teacher_test', {}).get('accuracy')}, weights "
            f"{', '.join(sorted(weights(run))) or 'not recorded'}" for name, run in runs.items())
        raise ValueError(f"the runs were trained from different teachers ({listed}); pair "
                         "only the cells of one teacher")


def joined_records(runs: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Every student of `runs` (by file name), once.

    Raises:
      ValueError: a student (setting, size, seed) in two files, or twice in one.
    """
    seen: dict[tuple[str, int, int], str] = {}
    records = []
    for name, run in runs.items():
        for record in run["records"]:
            key = (record["explainer"], record["num_examples"], record["seed"])
            if key in seen:
                raise ValueError(f"the {key[0]} student of n={key[1]}, seed {key[2]} is in "
                                 f"{seen[key]} and in {name}: list each cell once")
            seen[key] = name
            records.append(record)
    return records


def seeds_per_setting(records: Sequence[Mapping[str, Any]]) -> str:
    """One line per size naming each setting's seeds: the table's medians do not say that a
    setting still being trained (a cell a call) has fewer students than the others."""
    seeds: dict[int, dict[str, list[int]]] = {}
    for record in records:
        seeds.setdefault(record["num_examples"], {}).setdefault(
            record["explainer"], []).append(record["seed"])
    return "\n".join(
        f"Seeds at n={size}: " + "; ".join(f"{explainer} {', '.join(map(str, sorted(found)))}"
                                         for explainer, found in sorted(by_setting.items())) + "."
        for size, by_setting in sorted(seeds.items()))


def test_row_intervals(records: Sequence[Mapping[str, Any]],
                       comparisons: Sequence[tuple[str, str]] = COMPARISONS
                       ) -> list[dict[str, Any]]:
    """Per size, the 95% interval of each setting's mean simulability over resamples of the
    test sentences, and of each comparison's difference
    (:func:`smat.evaluation.statistics.bootstrap_over_rows`), for the settings whose
    students all record their agreement on each test row (``test_agreement``)."""
    rows = []
    for size in sorted({record["num_examples"] for record in records}):
        settings: dict[str, list[Mapping[str, Any]]] = {}
        for record in records:
            if record["num_examples"] == size:
                settings.setdefault(record["explainer"], []).append(record)
        agreement = {name: np.array([[c == "1" for c in r["test_agreement"]] for r in group])
                     for name, group in settings.items()
                     if all("test_agreement" in r for r in group)}
        if not agreement:
            continue
        pairs = [(a, b) for a, b in comparisons if {a, b} <= set(agreement)]
        intervals = bootstrap_over_rows(agreement, pairs=pairs)
        rows += [{"num_examples": size, "of": name, **interval}
                 for name, interval in intervals.items()]
    return rows


def intervals_table(rows: Sequence[Mapping[str, Any]]) -> str:
    """Markdown table of :func:`test_row_intervals` (points)."""
    return markdown_table(["n", "setting or difference", "mean", "95% interval"], [
        [r["num_examples"], r["of"], f"{100 * r['mean']:.2f}",
         f"[{100 * r['low']:.2f}, {100 * r['high']:.2f}]"] for r in rows])


def cells_report(records: Sequence[Mapping[str, Any]],
                 comparisons: Sequence[tuple[str, str]] = COMPARISONS
                 ) -> tuple[str, list[dict[str, Any]], str]:
    """(the simulability table, the paired tests of `comparisons` whose two settings both
    have students, and the three as markdown with the steps and training times)."""
    paired = paired_comparisons(records, comparisons=comparisons)
    table = simulability_table(records)
    hours = sum(record["train_seconds"] for record in records) / 3600
    text = (f"Test simulability, median [q25:q75] over seeds (`*`: IQR above no explainer's):"
            f"\n\n{table}\n\n"
            f"{seeds_per_setting(records)}\n\nPaired over "
            f"seeds (one-sided Wilcoxon signed-rank, one trained student per seed):\n\n"
            f"{comparisons_table(paired)}\n\nTraining steps per student (median "
            f"[min:max]):\n\n{per_student_table(records)}\n\nTraining time per student, "
            f"seconds (median [min:max]; {hours:.1f} h for all {len(records)}, each on "
            f"the machine that trained it):\n\n{per_student_table(records, 'train_seconds')}\n")
    intervals = test_row_intervals(records, comparisons)
    if intervals:
        text += ("\nOver the test sentences (500 resamples of half of them, the same for "
                 "every setting; a setting's score is its students' mean simulability):\n\n"
                 f"{intervals_table(intervals)}\n")
    settings = {r["explainer"] for r in records}
    if "smat" in settings and any(is_arm(name) for name in settings):
        for size in sorted({r["num_examples"] for r in records}):
            text += (f"\nWhat part of SMaT's gain each setting keeps, n={size}:\n\n"
                     + ablation_table([r for r in records if r["num_examples"] == size])
                     + "\n")
    return table, paired, text
