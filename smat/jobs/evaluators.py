"""Every evaluation of one trained model by name: its settings, what it computes over the
model's rows and the table it prints. ``smat <name>`` is generated from each entry
(:mod:`smat.cli.commands`), as the explainers' names come from :mod:`smat.registry`.

A new evaluation is a module in ``smat/jobs/`` with its settings dataclass (an ``explain``
field: :class:`~smat.jobs.explain.ExplainConfig`), a report function and a table function,
plus one :class:`Evaluator` entry here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from smat.data import Encoded
from smat.jobs.attacks import AttackConfig, attack_report, attack_table
from smat.jobs.faithfulness import FaithfulnessConfig, faithfulness_report, faithfulness_table
from smat.jobs.leakage import LeakageConfig, leakage_report, leakage_table
from smat.jobs.sanity import SanityConfig, sanity_report, sanity_table
from smat.parallel import is_primary
from smat.store import model_store
from smat.store.run_log import write_json_atomic

Report = dict[str, Any]


@dataclasses.dataclass(frozen=True)
class Evaluator:
    """One evaluation of a trained model over rows (its held-out split or a user's texts).

    Attributes:
      name: the command's name and its settings' flag group (``--faithfulness.bins`` is
        spelled ``--bins``).
      help: one line for ``smat --help``.
      settings: the settings dataclass; its docstring's Attributes are the flags' help.
      run: ``(model, rows, settings, output_dir) -> report`` (a JSON-able dict).
      table: ``report -> Markdown``, printed and written beside the JSON.
      report_name: ``settings -> NAME`` of NAME.json / NAME.md (default: `name`).
      explanation_files: explanations computed elsewhere may be named among the explainers
        (their file brings the texts scored).
    """

    name: str
    help: str
    settings: type
    run: Callable[[model_store.TrainedModel, Encoded, Any, Path], Report]
    table: Callable[[Report], str]
    report_name: Callable[[Any], str] | None = None
    explanation_files: bool = False

    def file_name(self, settings: Any) -> str:
        return self.name if self.report_name is None else self.report_name(settings)


def write_report(output_dir: str | Path, name: str, report: Mapping[str, Any],
                 table: str) -> None:
    """An evaluation's ending: ``NAME.json`` and ``NAME.md`` in `output_dir`, the table
    printed; by process 0 alone in a multi-process run (every process holds the whole
    report)."""
    if not is_primary():
        return
    write_json_atomic(Path(output_dir) / f"{name}.json", report)
    (Path(output_dir) / f"{name}.md").write_text(table + "\n")
    print(table)


EVALUATORS: dict[str, Evaluator] = {evaluator.name: evaluator for evaluator in (
    Evaluator("faithfulness", "comprehensiveness / sufficiency of explainers (ERASER AOPC)",
              FaithfulnessConfig,
              lambda model, rows, settings, output_dir: faithfulness_report(
                  model, rows, settings.explain, bins=settings.bins,
                  replacement=settings.replacement),
              faithfulness_table, explanation_files=True),
    Evaluator("sanity", "model-randomization sanity checks of explainers (cascading / "
                        "independent block re-initialisation)",
              SanityConfig,
              lambda model, rows, settings, output_dir: sanity_report(
                  model, rows, settings,
                  plot_path=Path(output_dir) / f"sanity_{settings.mode}.png"),
              sanity_table),
    Evaluator("attack", "adversarial attacks on explanations (top-k attack, unconstrained "
                        "or the thesis's constrained objective)",
              AttackConfig,
              lambda model, rows, settings, output_dir: attack_report(model, rows, settings),
              attack_table, report_name=lambda settings: f"attack_{settings.objective}"),
    Evaluator("leakage", "can the predicted class be read from explanations alone? (a probe "
                         "on positions and mass, without the text)",
              LeakageConfig,
              lambda model, rows, settings, output_dir: leakage_report(model, rows, settings),
              leakage_table),
)}
