"""The Oxford thesis's evaluations of seven attribution methods on the augmented-SST task.

"Interpretability of Large Language Models" (Oxford MSc thesis, 2022), its scaling results on
the augmented SST ground-truth task (§3.1, §4.1), as tables for two model sizes:

- (a) **ground truth and AOPC** (Figs. 4.1-4.2): Ground Truth Overlap and Mean Rank
  percentage of the added label word (§2.2.3.1), ERASER comprehensiveness / sufficiency
  (§2.2.3.2), for the seven methods and the random baseline;
- (b) **cascading randomization** (Fig. 4.6; independent too in the paper variant, Fig. 4.7):
  Spearman rho between the trained model's explanation and the one after re-initialising
  the last i transformer blocks (attention + MLP), for the five methods that read the
  parameters (§3.3, not Lime / KernelSHAP);
- (c) **ensembles** (Figs. 4.8-4.9, §3.4): "Ensemble (All Methods)" (the seven) and
  "Ensemble (Top 3)" (IG, Lime, KernelSHAP) against the best single method;
- (d) **attacks on explanations** (Figs. 4.10-4.11, §2.3, §3.5): RankChange, TopkSumChange
  and ProbChange of the top-k attack, unconstrained (keep the class) and constrained
  (alpha D - beta (p(x) - p(x + delta))^2), for the three gradient methods.

The task: SST-2 (GLUE) training phrases with randomized labels and "negative" / "positive"
appended to name the new label (``smat.evaluation.add_label_words``), so the label word is
the only predictive feature; the explained rows are GLUE SST-2 dev sentences augmented the
same way (the thesis explains 500; the dev set has 872). The ground truth is the label
word's token. Models: the offline all-MiniLM-L6-v2 (6 layers, scalar mix) and ``smat roar``'s
``small`` preset (its embeddings and first 2 layers, mean pooling; a checkpoint folder with
only those layers is written under the output folder), in place of the thesis's four T5
encoders (not available offline). Everything else is smat's: ``run_teacher`` trains and
saves both, ``smat.jobs.label_word_task`` builds the task, ``smat.jobs.thesis`` evaluates
(``smat.jobs.faithfulness.faithfulness_of_scores``, ``smat.jobs.sanity.sanity_report``,
``smat.jobs.attacks.attack_report``, ``smat.registry.ensemble_scores``) and
``smat.jobs.thesis_report`` judges and tabulates.

The thesis's methods as smat registry names (gradients explain the predicted class):

=====================  ======================  ==========================================
thesis                 smat                    difference
=====================  ======================  ==========================================
Gradients              gradient                L2 norm of the embedding gradient
Gradients*Input        input_x_gradient        summed over the embedding
Integrated Gradients   integrated_gradients    zero baseline, Gauss-Legendre nodes
LIME                   lime                    200 coalitions (registry), linear surrogate
KernelSHAP             kernel_shap             200 coalitions (registry)
Average Attention      attention_all           mean of query-pooled attention *logits*
                                               over heads and layers (thesis:
                                               probabilities)
Attention Rollout      attention_rollout       the [CLS] row of the rollout (thesis: the
                                               mean over query rows)
random                 random                  seeded uniform scores (thesis: a random
                                               permutation; the same ranking law)
=====================  ======================  ==========================================

Ensembles (both of the registry's normalizations) and how the explanations are batched:
see ``smat.jobs.thesis``.

Variants (``get_config``):

- ``paper`` (for a GPU): 60,000 training phrases (90% train, 10% early stopping) and 1,000
  held-out phrases, the thesis's recipe for both sizes (10 epochs, batch 16, lr 5e-5, 6%
  warmup then linear decay, patience 5), max length 128, 500 / 50 / 16 rows for the
  evaluations / randomization / attacks (the thesis's counts), IG with 50 steps, attacks with
  the thesis's settings (500 steps, lr 0.1 halved every 200, epsilon 2, k = 15% of the
  tokens, alpha = beta = 1; again with epsilon 0.05, see ``_EVALUATIONS``) and IG with 50 steps
  inside them, cascading and independent randomization.
- ``cpu`` (2 CPU cores, within an hour): 2,000 training phrases (1,800 / 200) and 200
  held-out, max length 64; MiniLM trained 2 epochs (batch 16, lr 1e-4, 6% warmup, linear
  decay), the small model with the ``small`` preset's recipe; 50 / 20 / 8 rows for the
  evaluations / cascading randomization / attacks, IG with 20 steps; attacks of 50 steps
  (so the learning rate is never halved) with 5 IG steps inside, at epsilon 2 and 0.05.
  Measured on the two cores (the other explainers cost little next to them): Lime and
  KernelSHAP about 5 s per sentence each on MiniLM, one attack step of IG about ten times one
  of Gradients.
- ``smoke``: a tiny model (the tests' 2-layer BERT and its first layer), 160 training rows,
  12 / 6 / 4 rows, 10 attack steps, both randomization modes.

Commands (``--data-dir`` holds GLUE SST-2's ``train.tsv`` and ``dev.tsv``; resumable: each
finished stage is a JSON file under the output folder and is read back on a rerun):

    python experiments/thesis_evaluations.py --variant cpu --data-dir data/sst2_glue
    python experiments/thesis_evaluations.py --variant paper --data-dir data/sst2_glue
    python experiments/thesis_evaluations.py --variant smoke --data-dir DIR --model TINY_CKPT

Writes ``config.json``, ``table.md`` (every table beside the thesis's finding, and a verdict
per finding with its criterion) and ``results.json`` into the output folder (default
``runs/thesis_<variant>``); the cpu variant also copies the results to
``docs/results/thesis_cpu.json`` and the cascading plots to
``docs/results/thesis_cpu_cascading_<model>.png``.

Measured runtime of the cpu variant: see docs/reproduce/thesis.md.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import shutil
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from smat.cli.experiment import command_runtime, data_dir_or_hub
from smat.jobs.label_word_task import AugmentedData, augmented_data
from smat.jobs.roar import PRESETS
from smat.jobs.teacher_run import run_teacher
from smat.jobs.thesis import ENSEMBLES, METHODS, ThesisConfig, evaluate_model
from smat.jobs.thesis_report import THESIS, tables, verdicts
from smat.models import ModelSource, minilm_path
from smat.store import model_store
from smat.store.run_log import write_json_atomic
from smat.training.loop import LoopConfig
from smat.training.teacher import TeacherTrainConfig

THESIS_EPSILON = 2.0  # §3.5
MODELS = ("minilm", "small")

# Evaluated / randomized / attacked sentences, and how they run. A randomization batch's
# memory is that of steps x rows x IG steps sequences (16 rows took 18 GB on the cpu variant).
# Attacks run at the thesis's epsilon 2 and at 0.05, about one standard deviation of MiniLM's
# word-embedding coordinates (0.056; the thesis's 2 is 36 of them).
_EVALUATIONS = {
    "paper": ThesisConfig(eval_rows=500, sanity_rows=50, attack_rows=16, max_len=128,
                          ig_steps=50, attack_steps=500, attack_ig_steps=50,
                          attack_epsilons=(THESIS_EPSILON, 0.05),
                          sanity_modes=("cascading", "independent"), batch_size=16,
                          sanity_batch_size=4, attack_batch_size=8),
    "cpu": ThesisConfig(eval_rows=50, sanity_rows=20, attack_rows=8, max_len=64, ig_steps=20,
                        attack_steps=50, attack_ig_steps=5,
                        attack_epsilons=(THESIS_EPSILON, 0.05), sanity_modes=("cascading",),
                        batch_size=16, sanity_batch_size=2, attack_batch_size=8),
    "smoke": ThesisConfig(eval_rows=12, sanity_rows=6, attack_rows=4, max_len=32, ig_steps=4,
                          attack_steps=10, attack_ig_steps=2,
                          attack_epsilons=(THESIS_EPSILON, 0.5),
                          sanity_modes=("cascading", "independent"), batch_size=8,
                          sanity_batch_size=4, attack_batch_size=4),
}
# Training and held-out phrases, and the small model's blocks (the small preset's 2).
_SMALL = PRESETS["small"].model.num_layers
_ROWS = {"paper": dict(train_rows=60_000, held_out_rows=1_000, small_layers=_SMALL),
         "cpu": dict(train_rows=2_000, held_out_rows=200, small_layers=_SMALL),
         "smoke": dict(train_rows=160, held_out_rows=24, small_layers=1)}


@dataclasses.dataclass(frozen=True, kw_only=True)
class ThesisVariant:
    """One variant: the data files, the two models' training and the evaluations' sizes.

    Attributes:
      variant: its name (a key of ``_EVALUATIONS``).
      files: GLUE SST-2's ``train.tsv`` and ``dev.tsv`` under the names "train" and "dev".
      teachers: per model of :data:`MODELS`, its training recipe and pooling.
      train_rows: augmented training phrases (90% train, 10% early stopping).
      held_out_rows: augmented held-out phrases (the teachers' test accuracy).
      small_layers: the small model's blocks (the first of the pretrained encoder's).
      evaluation: how each trained model is evaluated.
    """

    variant: str
    files: Mapping[str, Path]
    teachers: Mapping[str, tuple[TeacherTrainConfig, str]]
    train_rows: int
    held_out_rows: int
    small_layers: int
    evaluation: ThesisConfig

    def sizes(self) -> dict[str, Any]:
        """The variant's numbers, as ``results.json`` records them under ``config``."""
        return {"train_rows": self.train_rows, "held_out_rows": self.held_out_rows,
                "small_layers": self.small_layers, **dataclasses.asdict(self.evaluation)}


def _thesis_recipe(train_rows: int, *, epochs: int, learning_rate: float, patience: int,
                   evals_per_epoch: int = 1) -> TeacherTrainConfig:
    """§3.6.3: batch 16, linear warmup over 6% of the steps, then linear decay to 0."""
    steps = math.ceil(round(0.9 * train_rows) / 16) * epochs  # 10% early-stops the teacher
    return TeacherTrainConfig(learning_rate=learning_rate, warmup_steps=round(0.06 * steps),
                              schedule="linear_decay",
                              loop=LoopConfig(batch_size=16, max_epochs=epochs,
                                              patience=patience,
                                              evals_per_epoch=evals_per_epoch))


def get_config(variant: str, *, data_dir: str | Path) -> ThesisVariant:
    """Sizes, teachers (training recipe and pooling per model) and data files of a variant.

    Raises:
      ValueError: an unknown variant.
      FileNotFoundError: `data_dir` lacks train.tsv or dev.tsv.
    """
    if variant not in _EVALUATIONS:
        raise ValueError(f"unknown variant {variant!r}; choose from {sorted(_EVALUATIONS)}")
    files = {name: Path(data_dir) / f"{name}.tsv" for name in ("train", "dev")}
    missing = [str(p) for p in files.values() if not p.is_file()]
    if missing:
        raise FileNotFoundError(f"missing {missing}; pass --data-dir data/sst2_glue "
                                "(GLUE SST-2 with train.tsv and dev.tsv)")
    rows = _ROWS[variant]
    if variant == "paper":
        thesis = _thesis_recipe(rows["train_rows"], epochs=10, learning_rate=5e-5, patience=5)
        teachers = {"minilm": (thesis, "scalar_mix"), "small": (thesis, "mean")}
    elif variant == "cpu":
        teachers = {"minilm": (_thesis_recipe(rows["train_rows"], epochs=2, learning_rate=1e-4,
                                              patience=2, evals_per_epoch=2), "scalar_mix"),
                    "small": (PRESETS["small"].train, PRESETS["small"].model.pooling)}
    else:
        tiny = TeacherTrainConfig(learning_rate=2e-3, warmup_steps=2, schedule="linear_decay",
                                  loop=LoopConfig(batch_size=16, max_epochs=2, patience=2))
        teachers = {"minilm": (tiny, "scalar_mix"), "small": (tiny, "mean")}
    return ThesisVariant(variant=variant, files=files, teachers=teachers, **rows,
                         evaluation=_EVALUATIONS[variant])


def train_teachers(config: ThesisVariant, data: AugmentedData, output_dir: Path, *,
                   model_source: Path, progress: bool) -> dict[str, dict[str, Any]]:
    """Both model sizes trained (or reused) on the augmented phrases by ``run_teacher``."""
    sources = {"minilm": model_source,
               "small": model_store.first_layers_checkpoint(
                   model_source, config.small_layers, output_dir / "checkpoints" / "small")}
    records = {}
    for name in MODELS:
        train, pooling = config.teachers[name]
        (records[name],) = run_teacher(data=data.data_config, train=train,
                                       output_dir=output_dir / name,
                                       model=ModelSource(str(sources[name]), pooling),
                                       progress=progress)
    return records


def run(variant: str, *, data_dir: str | Path, output_dir: str | Path,
        model_source: str | Path | None = None, results_dir: str | Path | None = None,
        progress: bool = True) -> dict[str, Any]:
    """Train (or reuse) both models and run every evaluation (or read finished stages back);
    write ``table.md`` and ``results.json``, and with `results_dir` copy the results and the
    cascading plots there. `model_source`: the pretrained encoder (default: the offline
    MiniLM)."""
    config = get_config(variant, data_dir=data_dir)
    evaluation = config.evaluation
    output_dir = Path(output_dir)
    model_source = Path(model_source) if model_source is not None else minilm_path()
    start = time.perf_counter()
    from transformers import AutoTokenizer

    data = augmented_data(config.files, AutoTokenizer.from_pretrained(str(model_source)),
                          output_dir / "data", train_rows=config.train_rows,
                          held_out_rows=config.held_out_rows,
                          eval_rows=evaluation.eval_rows, max_len=evaluation.max_len)
    write_json_atomic(output_dir / "config.json", {
        "variant": variant, **config.sizes(),
        "files": {k: str(v) for k, v in config.files.items()},
        "teachers": {k: {"train": dataclasses.asdict(t), "pooling": p}
                     for k, (t, p) in config.teachers.items()},
        "model_source": str(model_source), "methods": METHODS, "ensembles": ENSEMBLES,
        "eval_rows_of_dev": data.eval_rows, "rows_that_fit": data.fitting,
        "rows_in_files": data.total})
    teachers = train_teachers(config, data, output_dir, model_source=model_source,
                              progress=progress)
    models = {}
    for name in MODELS:
        trained = model_store.load(output_dir / name / "model")
        result = evaluate_model(trained, data.eval, evaluation, output_dir / name / "evaluation")
        result.update(teacher=teachers[name], layers=trained.model.encoder.config.num_layers)
        result["verdicts"] = verdicts(result)
        models[name] = result
    summary = {"variant": variant, "config": config.sizes(), "thesis": THESIS, "models": models,
               "seconds_this_call": round(time.perf_counter() - start, 1)}
    write_json_atomic(output_dir / "results.json", summary)
    (output_dir / "table.md").write_text(tables(summary) + "\n")
    if results_dir is not None:
        results_dir = Path(results_dir)
        write_json_atomic(results_dir / f"thesis_{variant}.json", summary)
        for name in MODELS:
            plot = output_dir / name / "evaluation" / "sanity_cascading.png"
            if plot.is_file():
                shutil.copy(plot, results_dir / f"thesis_{variant}_cascading_{name}.png")
    return summary


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variant", choices=sorted(_EVALUATIONS), default="cpu")
    parser.add_argument("--data-dir", default=None,
                        help="GLUE SST-2 folder with train.tsv and dev.tsv (default: from the "
                             "Hugging Face Hub, converted once into the data cache)")
    parser.add_argument("--output-dir", default=None, help="default runs/thesis_<variant>")
    parser.add_argument("--model", default=None,
                        help="pretrained encoder folder (default: the offline MiniLM)")
    parser.add_argument("--no-progress", action="store_true", help="hide progress bars")
    args = parser.parse_args(argv)
    output_dir = args.output_dir or f"runs/thesis_{args.variant}"
    results_dir = (Path(__file__).resolve().parents[1] / "docs" / "results"
                   if args.variant == "cpu" else None)
    with command_runtime(parser, driver=__file__):
        summary = run(args.variant, data_dir=data_dir_or_hub(args.data_dir, "sst2_glue"),
                      output_dir=output_dir, model_source=args.model, results_dir=results_dir,
                      progress=not args.no_progress)
    print((Path(output_dir) / "table.md").read_text())
    print(f"{summary['seconds_this_call']} s")


if __name__ == "__main__":
    main()
