"""The planted-mechanism experiment's report: simulability per arm, where SMaT's head
coefficients went, and the direction diagnostic's z-scores (:mod:`smat.jobs.planted`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from smat.evaluation.planted_task import STATIC_ARMS, TARGETS, static_coefficients
from smat.evaluation.statistics import format_median_iqr
from smat.jobs.planted import PlantedConfig
from smat.markdown import markdown_table

OWN_VARIANTS = ("sparsemax", "softmax")  # the SMaT step's own settings


def _fmt(values: Sequence[float], *, scale: float = 100.0, digits: int = 1) -> str:
    return format_median_iqr(values, scale=scale, digits=digits)


def arm_rows(config: PlantedConfig, records: Sequence[Mapping[str, Any]]) -> list[dict]:
    """Per arm over its students: final and best-validation test simulability, and the
    informative heads' total coefficient lambda (how many students put more than half on
    them)."""
    informative = list(config.task.informative_heads)
    rows = []
    for arm in config.arms:
        cell = [r for r in records if r["arm"] == arm]
        if not cell:
            continue
        final = [v for r in cell for v in r["final_test"]]
        learned = "informative_weight" in cell[0]
        if learned:
            weight = [v for r in cell for v in r["informative_weight"]]
        elif arm in STATIC_ARMS:
            weight = [float(static_coefficients(config.task, arm)[informative].sum())]
        else:
            weight = []
        rows.append({
            "arm": arm, "students": len(final), "final_test": _fmt(final),
            "best_valid_test": _fmt([v for r in cell for v in r["best_valid_test"]]),
            "final_test_median": float(np.median(final)),
            "informative_weight": _fmt(weight, scale=1.0, digits=3) if weight else "–",
            "concentrated": sum(w > 0.5 for w in weight) if learned else None,
            "per_data_seed": {str(r["data_seed"]): _fmt(r["final_test"]) for r in cell}})
    return rows


def arm_table(config: PlantedConfig, rows: Sequence[Mapping[str, Any]]) -> str:
    heads = config.task.head_targets
    return markdown_table(
        ["arm", "students", "test simulability, final", "test simulability, best valid",
         f"informative heads' lambda (uniform {len(config.task.informative_heads)}/"
         f"{len(heads)})", "lambda > 0.5"],
        [[r["arm"], r["students"], r["final_test"], r["best_valid_test"],
          r["informative_weight"],
          "–" if r["concentrated"] is None else f"{r['concentrated']}/{r['students']}"]
         for r in rows])


def direction_summary(config: PlantedConfig, probes: Sequence[Mapping[str, Any]]
                      ) -> list[dict[str, Any]]:
    """Per (probe arm, variant, step): the informative and other heads' z-scores, sign
    flipped so that positive means "the outer step raises this head", averaged over seeds
    (per head and per head target); the share of seeds whose top head is informative; the
    per-step signal-to-noise ratio z / sqrt(P) of the informative heads."""
    targets = np.array(config.task.head_targets)
    informative = list(config.task.informative_heads)
    others = [h for h in range(len(targets)) if h not in informative]
    groups: dict[tuple[str, str, int], list[Mapping[str, Any]]] = {}
    for cell in probes:
        for p in cell["probes"]:
            groups.setdefault((cell["arm"], p["variant"], p["step"]), []).append(p)
    rows = []
    for (arm, variant, step), entries in sorted(groups.items(), key=lambda kv: (
            config.probe_arms.index(kv[0][0]), kv[0][1], kv[0][2])):
        z = -np.array([e["z"] for e in entries])  # (seeds, H), raise-positive
        mean = -np.array([e["mean"] for e in entries])
        rows.append({
            "arm": arm, "variant": variant, "step": step, "seeds": len(entries),
            "z_informative_mean": float(z[:, informative].mean()),
            "z_informative_per_head": z[:, informative].mean(0).round(2).tolist(),
            "z_others_mean": float(z[:, others].mean()),
            "z_others_max_abs": float(np.abs(z[:, others].mean(0)).max()),
            "z_per_head": z.mean(0).round(2).tolist(),
            "z_by_target": {t: round(float(z[:, targets == t].mean()), 2) for t in TARGETS
                            if (targets == t).any()},
            "informative_highest": float(np.mean(np.isin(np.argmax(z, axis=1), informative))),
            "snr_informative": float(z[:, informative].mean() / np.sqrt(config.probe_pairs)),
            "mean_gradient_informative": float(mean[:, informative].mean()),
            "mean_abs_gradient": float(np.abs(mean).mean()),
            "outer_loss": float(np.mean([e["outer_loss"] for e in entries]))})
    return rows


def direction_by_target_table(rows: Sequence[Mapping[str, Any]]) -> str:
    """One row per (probed student, variant); per probe step the mean z of the key / decoy /
    cls / sep heads (positive: the outer step raises them)."""
    steps = sorted({r["step"] for r in rows})
    cells: dict[tuple[str, str], dict[int, str]] = {}
    for r in rows:
        cells.setdefault((r["arm"], r["variant"]), {})[r["step"]] = " / ".join(
            f"{r['z_by_target'][t]:+.1f}" for t in TARGETS if t in r["z_by_target"])
    return markdown_table(["probed student", "variant", *(f"step {s}" for s in steps)],
                          [[arm, variant, *(by_step.get(s, "–") for s in steps)]
                           for (arm, variant), by_step in cells.items()])


def direction_table(rows: Sequence[Mapping[str, Any]]) -> str:
    return markdown_table(
        ["probed student", "variant", "after step", "z informative (per head)",
         "z others mean / max abs", "seeds where an informative head has the top z",
         "per-step SNR", "outer loss"],
        [[r["arm"], r["variant"], r["step"],
          f"{r['z_informative_mean']:+.2f} "
          f"({', '.join(f'{v:+.2f}' for v in r['z_informative_per_head'])})",
          f"{r['z_others_mean']:+.2f} / {r['z_others_max_abs']:.2f}",
          f"{r['informative_highest']:.0%}", f"{r['snr_informative']:+.3f}",
          f"{r['outer_loss']:.3f}"] for r in rows])


def smat_dynamics(config: PlantedConfig, records: Sequence[Mapping[str, Any]]
                  ) -> list[dict[str, Any]]:
    """Per SMaT arm: where the head coefficients went (lambda mass per head target at the
    end), the informative heads' lambda over the probe steps, how many students lost every
    informative head (lambda = 0) and when, and the simulability of the students whose
    informative heads ended above and below 0.5."""
    targets = np.array(config.task.head_targets)
    informative = list(config.task.informative_heads)
    rows = []
    for arm in config.arms:
        cell = [r for r in records if r["arm"] == arm and "lambda_trace" in r]
        if not cell:
            continue
        final = np.concatenate([np.asarray(r["final_lambda"]) for r in cell])  # (students, H)
        steps = [entry["step"] for entry in cell[0]["lambda_trace"]]
        trace = np.concatenate([np.stack([np.asarray(e["lambda"]) for e in r["lambda_trace"]],
                                         axis=1) for r in cell])  # (students, steps, H)
        weight = trace[:, :, informative].sum(-1)  # (students, steps)
        dead = weight <= 0
        died = [steps[int(np.argmax(row))] for row in dead if row.any()]
        tests = np.concatenate([r["final_test"] for r in cell])
        high = weight[:, -1] > 0.5
        shown = [epoch * config.steps_per_epoch for epoch in config.probe_epochs]
        rows.append({
            "arm": arm, "students": len(tests),
            "final_mass": {t: float(final[:, targets == t].sum(-1).mean()) for t in TARGETS},
            "informative_weight_median": {str(step): float(np.median(
                weight[:, steps.index(step)])) for step in shown if step in steps},
            "lost_informative": len(died),
            "lost_informative_step_median": float(np.median(died)) if died else None,
            "lost_informative_at_end": int(dead[:, -1].sum()),
            "test_informative_above_half": _fmt(tests[high]) if high.any() else "–",
            "test_informative_below_half": _fmt(tests[~high]) if (~high).any() else "–",
            "above_half": int(high.sum())})
    return rows


def dynamics_table(rows: Sequence[Mapping[str, Any]]) -> str:
    if not rows:
        return ""
    # numeric order: a JSON file sorts these step keys as strings
    steps = sorted(rows[0]["informative_weight_median"], key=int)
    table = []
    for r in rows:
        when = r["lost_informative_step_median"]
        table.append([
            r["arm"], " / ".join(f"{r['final_mass'][t]:.2f}" for t in TARGETS),
            ", ".join(f"{r['informative_weight_median'][step]:.2f}" for step in steps),
            f"{r['lost_informative']}/{r['students']} "
            f"({'–' if when is None else int(when)}; {r['lost_informative_at_end']})",
            f"{r['test_informative_above_half']} ({r['above_half']}) / "
            f"{r['test_informative_below_half']}"])
    return markdown_table(
        ["arm", "final lambda mass key / decoy / cls / sep",
         f"informative lambda (median) at steps {', '.join(steps)}",
         "lost every informative head (median step; at end)",
         "test simulability, informative lambda > 0.5 (n) / <= 0.5"], table)


def planted_report(variant: str, config: PlantedConfig, records: Sequence[Mapping[str, Any]],
                   probes: Sequence[Mapping[str, Any]]) -> tuple[str, dict[str, Any]]:
    """(Markdown text, summary) of finished cells: the arms' table, SMaT's dynamics and
    the direction diagnostic (its own settings, then one suspect setting at a time)."""
    arms = arm_rows(config, records)
    directions = direction_summary(config, probes)
    dynamics = smat_dynamics(config, records)
    own = [r for r in directions if r["variant"] in OWN_VARIANTS]
    suspects = [r for r in directions if r["variant"] not in OWN_VARIANTS]
    seconds = sum(r["seconds"] for r in records) + sum(p.get("seconds", 0) for p in probes)
    task = config.task
    text = (f"Planted mechanism ({variant}): informative heads {task.informative_heads} of "
            f"{len(task.head_targets)} ({', '.join(task.head_targets)}).\n\n"
            f"{arm_table(config, arms)}\n\n"
            f"SMaT's head coefficients:\n\n{dynamics_table(dynamics)}\n\n"
            f"Direction diagnostic by head target (mean z of the key / decoy / cls / sep "
            f"heads; positive = the outer step raises them):\n\n"
            f"{direction_by_target_table(directions)}\n\n"
            f"Direction diagnostic (z = mean / standard error of the meta-gradient over "
            f"{config.probe_pairs} batch pairs at uniform coefficients, sign flipped: positive "
            f"= the outer step raises the head; averaged over seeds), the SMaT step's own "
            f"settings:\n\n{direction_table(own)}\n\nThe same with one setting changed "
            f"(sparsemax):\n\n{direction_table(suspects)}\n\nCompute: {seconds:.0f} s "
            f"(training and probes of every cell, summed).\n")
    summary = {"arms": arms, "directions": directions, "smat_dynamics": dynamics,
               # per-epoch traces stay in the cell files
               "records": [{key: value for key, value in record.items() if key not in (
                   "evaluations", "lambda_trace")} for record in records],
               "compute_seconds": round(seconds, 1)}
    return text, summary
