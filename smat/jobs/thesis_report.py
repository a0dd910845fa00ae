"""What the Oxford thesis's evaluations report: its findings, a verdict on each, the tables.

:func:`verdicts` decides each finding of the thesis on one model's
:func:`smat.jobs.thesis.evaluate_model` result, with its criterion and the numbers it was
decided on; :func:`tables` writes every measured table beside the finding it tests. Both
read only the JSON-able results, so a committed ``results.json`` regenerates its tables.
"""

from __future__ import annotations

from typing import Any

from smat.jobs.attacks import attack_table
from smat.jobs.sanity import sanity_table
from smat.jobs.thesis import ATTACKED, ENSEMBLES, EXPLAINERS, METHODS, OBJECTIVES, RANDOM, TOP3
from smat.markdown import markdown_table

THESIS = {
    "ground_truth": "T5 at four sizes, 500 sentences (Fig. 4.1): IG, Lime and KernelSHAP rank "
                    "the label word first almost always (overlap about 1.0, mean rank about "
                    "0.1); Gradients and Gradients*Input only slightly above random; the "
                    "attention methods vary with the size.",
    "faithfulness": "Fig. 4.2: IG, Lime and KernelSHAP best, comprehensiveness about 0.5 and "
                    "sufficiency about 0.1; the same ordering as the ground truth.",
    "sanity": "Fig. 4.6 (50 sentences): the gradient methods' rank correlation drops nearly "
              "to 0 once any block is randomized; Average Attention declines gradually; "
              "Attention Rollout stays high while only deep blocks of larger models change.",
    "ensembles": "Figs. 4.8-4.9: both ensembles as good as the best single methods on the "
                 "ground truth, slightly worse on comprehensiveness / sufficiency: no gain.",
    "attacks": "Figs. 4.10-4.11 (16 sentences): about 40% of the top-k changes; IG slightly "
               "more robust (lower RankChange) than Gradients and Gradients*Input; the "
               "constrained objective keeps ProbChange at 0, the unconstrained one moves it "
               "for Gradients and Gradients*Input.",
}
"""The thesis's findings per evaluation (figures only; numbers read off its text)."""


def _gt(result: dict[str, Any], name: str, key: str = "overlap") -> dict[str, float]:
    return result["ground_truth"]["explainers"][name][key]


def _aopc(result: dict[str, Any], name: str, key: str) -> dict[str, float]:
    return result["faithfulness"]["explainers"][name][key]


def verdicts(result: dict[str, Any]) -> list[dict[str, Any]]:
    """Does each of the thesis's findings hold for one model? Each with its criterion and the
    numbers it was decided on."""
    out = []

    def add(claim: str, criterion: str, holds: bool, evidence: str) -> None:
        out.append({"claim": claim, "criterion": criterion, "holds": bool(holds),
                    "evidence": evidence})

    weak = ("gradient", "input_x_gradient")
    gt = {n: _gt(result, n)["mean"] for n in EXPLAINERS}
    add("IG, Lime and KernelSHAP find the label word more often than Gradients and "
        "Gradients*Input", "lowest GT overlap of the three > highest of the two",
        min(gt[n] for n in TOP3) > max(gt[n] for n in weak),
        ", ".join(f"{n} {gt[n]:.2f}" for n in (*TOP3, *weak, RANDOM)))
    comp = {n: _aopc(result, n, "comprehensiveness")["mean"] for n in EXPLAINERS}
    suff = {n: _aopc(result, n, "sufficiency")["mean"] for n in EXPLAINERS}
    add("the same three are the most faithful by AOPC",
        "each of the three: higher comprehensiveness and lower sufficiency than both "
        "gradient methods",
        min(comp[n] for n in TOP3) > max(comp[n] for n in weak)
        and max(suff[n] for n in TOP3) < min(suff[n] for n in weak),
        "comp " + ", ".join(f"{n} {comp[n]:.2f}" for n in (*TOP3, *weak)) + "; suff "
        + ", ".join(f"{n} {suff[n]:.2f}" for n in (*TOP3, *weak)))
    if "cascading" in result["sanity"]:
        curves = result["sanity"]["cascading"]["explainers"]
        step = min(2, len(result["sanity"]["cascading"]["steps"]) - 1)
        rho = {n: curves[n]["spearman"][step]["mean"] for n in ATTACKED}
        add("the gradient methods' rank correlation collapses once blocks are randomized",
            f"Spearman rho < 0.2 for each after {step} randomized block(s)",
            all(v < 0.2 for v in rho.values()),
            ", ".join(f"{n} {v:.2f}" for n, v in rho.items()))
    singles = list(METHODS.values())
    for key, better in (("overlap", max), ("comprehensiveness", max), ("sufficiency", min)):
        values = {n: (_gt(result, n) if key == "overlap" else _aopc(result, n, key))
                  for n in (*singles, *ENSEMBLES.values())}
        best = better(singles, key=lambda n: values[n]["mean"])
        bound = values[best]["high"] if better is max else values[best]["low"]
        beats = [e for e in ENSEMBLES.values()
                 if (values[e]["mean"] > bound if better is max else values[e]["mean"] < bound)]
        add(f"no ensemble beats the best single method ({key})",
            "no ensemble mean beyond the best single method's 95% CI",
            not beats, f"best {best} {values[best]['mean']:.3f} [{values[best]['low']:.3f}, "
            f"{values[best]['high']:.3f}]; " + ", ".join(
                f"{label} {values[e]['mean']:.3f}" for label, e in ENSEMBLES.items()))
    for epsilon, reports in result["attacks"].items():
        attacks = {o: reports[o]["explainers"] for o in OBJECTIVES}
        prob = {(o, n): attacks[o][n]["prob_change"]["mean"] for o in OBJECTIVES
                for n in ATTACKED}
        add(f"the constrained attack keeps ProbChange near 0 (epsilon {epsilon})",
            "constrained ProbChange < 0.05 and at most the unconstrained one, every method",
            all(prob["constrained", n] < 0.05 and prob["constrained", n]
                <= prob["unconstrained", n] for n in ATTACKED),
            ", ".join(f"{n} {prob['constrained', n]:.3f} vs {prob['unconstrained', n]:.3f}"
                      for n in ATTACKED))
        rank = {n: attacks["unconstrained"][n]["rank_change"]["mean"] for n in ATTACKED}
        add(f"IG is more robust than Gradients and Gradients*Input (epsilon {epsilon})",
            "unconstrained RankChange of IG below both",
            rank["integrated_gradients"] < min(rank["gradient"], rank["input_x_gradient"]),
            ", ".join(f"{n} {v:.2f}" for n, v in rank.items()))
    return out


def _ci(cell: dict[str, float]) -> str:
    return f"{cell['mean']:.3f} [{cell['low']:.3f}, {cell['high']:.3f}]"


def evaluation_table(result: dict[str, Any]) -> str:
    """(a) and (c): ground truth and AOPC per method, random, and the ensembles."""
    names = {**{v: f"{k} (`{v}`)" for k, v in METHODS.items()}, RANDOM: "random",
             **{v: k for k, v in ENSEMBLES.items()}}
    return markdown_table(
        ["method", "GT overlap ↑", "mean rank (% of tokens) ↓", "comprehensiveness ↑",
         "sufficiency ↓"],
        [[label, _ci(_gt(result, name)), _ci(_gt(result, name, "mean_rank_fraction")),
          _ci(_aopc(result, name, "comprehensiveness")), _ci(_aopc(result, name, "sufficiency"))]
         for name, label in names.items()])


def tables(summary: dict[str, Any]) -> str:
    """The measured tables of every model of a summary (``results.json``: its ``config``
    and, per model, an :func:`~smat.jobs.thesis.evaluate_model` result with its
    ``teacher`` record, ``layers`` and ``verdicts``), the thesis's finding beside each, and
    the verdicts."""
    config = summary["config"]
    lines = [markdown_table(
        ["model", "layers", "held-out phrase accuracy", "dev-sentence accuracy",
         "train seconds"],
        [[name, result["layers"], f"{100 * result['teacher']['test']['accuracy']:.1f}%",
          f"{100 * result['eval_accuracy']:.1f}%", result["teacher"]["train_seconds"]]
         for name, result in summary["models"].items()])]
    for name, result in summary["models"].items():
        lines += ["", f"## {name} ({result['layers']} layers)", "",
                  f"(a, c) Ground truth and AOPC ({config['eval_rows']} dev sentences, "
                  f"{result['eval_tokens_mean']:.1f} tokens on average; 95% bootstrap CIs):",
                  "", evaluation_table(result), "", f"Thesis: {THESIS['ground_truth']} "
                  f"{THESIS['faithfulness']} {THESIS['ensembles']}"]
        for mode, report in result["sanity"].items():
            lines += ["", f"(b) {mode} randomization, Spearman rho with the trained model's "
                      f"explanation ({config['sanity_rows']} sentences):", "",
                      sanity_table(report, similarity="spearman")]
        lines += ["", f"Thesis: {THESIS['sanity']}"]
        for epsilon, reports in result["attacks"].items():
            for objective, report in reports.items():
                lines += ["", f"(d) {objective} attack, epsilon {epsilon} "
                          f"({config['attack_rows']} sentences, at most "
                          f"{config['attack_steps']} steps):", "", attack_table(report)]
        lines += ["", f"Thesis: {THESIS['attacks']}", "", "Verdicts:", ""]
        lines += [f"- {'holds' if v['holds'] else 'does not hold'}: {v['claim']} "
                  f"({v['criterion']}; {v['evidence']})" for v in result["verdicts"]]
    return "\n".join(lines)
