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
saves both, the registry explains, ``smat.jobs.reports.faithfulness_of_scores``,
``smat.jobs.sanity.sanity_report``, ``smat.jobs.attacks.attack_report`` and
``smat.registry.ensemble_scores`` evaluate.

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

Ensembles normalize each member's scores to sum to 1 over the real tokens, then average
(§3.4). Signed scores cannot sum to 1 as they are, so both of the registry's normalizations
are reported: absolute values first (``ensemble:``, ranking by magnitude) and the row minimum
subtracted (``ensemble_shift:``, keeping each member's signed order). They are computed from
the members' stored scores with the function behind those registry names. Explanations run in
length-sorted batches each cut to its longest row, Lime / KernelSHAP / random too (their
per-row seeds are the rows' indices; ``smat explain`` runs those three on uncut rows).

Variants (``get_config``):

- ``paper`` (for a GPU): 60,000 training phrases (90% train, 10% early stopping) and 1,000
  held-out phrases, the thesis's recipe for both sizes (10 epochs, batch 16, lr 5e-5, 6%
  warmup then linear decay, patience 5), max length 128, 500 / 50 / 16 rows for the
  evaluations / randomization / attacks (the thesis's counts), IG with 50 steps, attacks with
  the thesis's settings (500 steps, lr 0.1 halved every 200, epsilon 2, k = 15% of the
  tokens, alpha = beta = 1; again with epsilon 0.05, see ``_SIZES``) and IG with 50 steps
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
import re
import shutil
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from smat import registry
from smat.cli.experiment import command_runtime, data_dir_or_hub
from smat.data import Encoded, TextDataset, char_spans_to_token_mask, load_dataset, take, tokenize
from smat.data.protocol import DataConfig
from smat.evaluation import add_label_words, ground_truth_overlap, mean_rank
from smat.evaluation.attacks import ATTACKABLE
from smat.evaluation.statistics import bootstrap_ci
from smat.jobs.attacks import AttackConfig, attack_report, attack_table
from smat.jobs.explain import ExplainConfig, explain_encoded
from smat.jobs.reports import faithfulness_of_scores
from smat.jobs.roar import PRESETS
from smat.jobs.sanity import SanityConfig, plot_sanity, sanity_report, sanity_table
from smat.jobs.teacher_run import run_teacher
from smat.json_files import read_json
from smat.models import ModelSource, functional, minilm_path
from smat.models.inference import predict_logits
from smat.store import model_store
from smat.store.run_log import cached_arrays, settings_hash, write_json_atomic
from smat.training.loop import LoopConfig
from smat.training.teacher import TeacherTrainConfig

METHODS = {"Gradients": "gradient", "Gradients*Input": "input_x_gradient",
           "Integrated Gradients": "integrated_gradients", "LIME": "lime",
           "KernelSHAP": "kernel_shap", "Average Attention": "attention_all",
           "Attention Rollout": "attention_rollout"}
"""The thesis's seven methods (§2.2.2) -> smat registry names."""
RANDOM = "random"
EXPLAINERS = (*METHODS.values(), RANDOM)
TOP3 = ("integrated_gradients", "lime", "kernel_shap")
ENSEMBLES = {f"Ensemble ({group}{', shift' if prefix == 'ensemble_shift' else ''})":
             f"{prefix}:" + "+".join(members)
             for prefix in registry.ENSEMBLES
             for group, members in (("All Methods", METHODS.values()), ("Top 3", TOP3))}
"""The thesis's two ensembles (§3.4) under both of the registry's normalizations: absolute
values (``ensemble:``) or the row minimum subtracted (``ensemble_shift:``)."""
SANITY_METHODS = ("gradient", "input_x_gradient", "integrated_gradients", "attention_all",
                  "attention_rollout")
"""§4: the layer randomizations exclude Lime and KernelSHAP (they never read parameters)."""
ATTACKED = tuple(ATTACKABLE)  # gradient, input_x_gradient, integrated_gradients
OBJECTIVES = ("unconstrained", "constrained")
THESIS_EPSILON = 2.0  # §3.5
LABEL_WORDS = ("negative", "positive")
MODELS = ("minilm", "small")

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

# Rows: training phrases, held-out phrases, evaluated / randomized / attacked sentences.
# The randomization explains every randomized copy of a batch in one vmapped call: its memory
# is that of steps x rows x IG steps sequences (a batch of 16 took 18 GB on the cpu variant).
# Attacks run at the thesis's epsilon 2 and at 0.05, about one standard deviation of MiniLM's
# word-embedding coordinates (0.056; the thesis's 2 is 36 of them).
_SIZES = {
    "paper": dict(train_rows=60_000, held_out_rows=1_000, eval_rows=500, sanity_rows=50,
                  attack_rows=16, max_len=128, ig_steps=50, attack_steps=500,
                  attack_ig_steps=50, attack_epsilons=(THESIS_EPSILON, 0.05),
                  sanity_modes=("cascading", "independent"), batch_size=16,
                  sanity_batch_size=4, attack_batch_size=8,
                  small_layers=PRESETS["small"].model.num_layers),
    "cpu": dict(train_rows=2_000, held_out_rows=200, eval_rows=50, sanity_rows=20,
                attack_rows=8, max_len=64, ig_steps=20, attack_steps=50, attack_ig_steps=5,
                attack_epsilons=(THESIS_EPSILON, 0.05), sanity_modes=("cascading",),
                batch_size=16, sanity_batch_size=2, attack_batch_size=8,
                small_layers=PRESETS["small"].model.num_layers),
    "smoke": dict(train_rows=160, held_out_rows=24, eval_rows=12, sanity_rows=6,
                  attack_rows=4, max_len=32, ig_steps=4, attack_steps=10, attack_ig_steps=2,
                  attack_epsilons=(THESIS_EPSILON, 0.5),
                  sanity_modes=("cascading", "independent"), batch_size=8,
                  sanity_batch_size=4, attack_batch_size=4, small_layers=1),
}


def _thesis_recipe(train_rows: int, *, epochs: int, learning_rate: float, patience: int,
                   evals_per_epoch: int = 1) -> TeacherTrainConfig:
    """§3.6.3: batch 16, linear warmup over 6% of the steps, then linear decay to 0."""
    steps = math.ceil(round(0.9 * train_rows) / 16) * epochs  # 10% early-stops the teacher
    return TeacherTrainConfig(learning_rate=learning_rate, warmup_steps=round(0.06 * steps),
                              schedule="linear_decay",
                              loop=LoopConfig(batch_size=16, max_epochs=epochs,
                                              patience=patience,
                                              evals_per_epoch=evals_per_epoch))


def get_config(variant: str, *, data_dir: str | Path) -> dict[str, Any]:
    """Sizes, teachers (training recipe and pooling per model) and data files of a variant.

    Raises:
      ValueError: an unknown variant.
      FileNotFoundError: `data_dir` lacks train.tsv or dev.tsv.
    """
    if variant not in _SIZES:
        raise ValueError(f"unknown variant {variant!r}; choose from {sorted(_SIZES)}")
    files = {name: Path(data_dir) / f"{name}.tsv" for name in ("train", "dev")}
    missing = [str(p) for p in files.values() if not p.is_file()]
    if missing:
        raise FileNotFoundError(f"missing {missing}; pass --data-dir data/sst2_glue "
                                "(GLUE SST-2 with train.tsv and dev.tsv)")
    sizes = dict(_SIZES[variant])
    if variant == "paper":
        thesis = _thesis_recipe(sizes["train_rows"], epochs=10, learning_rate=5e-5, patience=5)
        teachers = {"minilm": (thesis, "scalar_mix"), "small": (thesis, "mean")}
    elif variant == "cpu":
        teachers = {"minilm": (_thesis_recipe(sizes["train_rows"], epochs=2, learning_rate=1e-4,
                                              patience=2, evals_per_epoch=2), "scalar_mix"),
                    "small": (PRESETS["small"].train, PRESETS["small"].model.pooling)}
    else:
        tiny = TeacherTrainConfig(learning_rate=2e-3, warmup_steps=2, schedule="linear_decay",
                                  loop=LoopConfig(batch_size=16, max_epochs=2, patience=2))
        teachers = {"minilm": (tiny, "scalar_mix"), "small": (tiny, "mean")}
    return {"variant": variant, "files": files, "teachers": teachers, **sizes}


# ------------------------------------------------------------------ data and models


def _fitting(dataset: TextDataset, tokenizer: Any, max_len: int) -> np.ndarray:
    """Rows whose text with a label word appended fits in `max_len` tokens (never cut)."""
    longest = max(LABEL_WORDS, key=lambda w: len(tokenizer.tokenize(w)))
    lengths = [len(ids) for ids in tokenizer([f"{t.rstrip()} {longest}" for t in dataset.texts],
                                             add_special_tokens=True)["input_ids"]]
    return np.flatnonzero(np.asarray(lengths) <= max_len)


def _file_rows(config: dict[str, Any]) -> int:
    """Rows of the augmented file: the teacher's, the held-out ones, and one validation and
    one pool row of the student parts the SMaT protocol split always carves (unused here)."""
    return config["train_rows"] + config["held_out_rows"] + 2


def augmented_data(config: dict[str, Any], tokenizer: Any, folder: Path) -> dict[str, Any]:
    """The augmented training file (a seeded sample of train.tsv, labels randomized and
    named by an appended word; seed 0) and the evaluated rows (a seeded sample of dev.tsv,
    augmented with seed 1).

    Raises:
      ValueError: the files have too few rows that fit in max_len tokens.
    """
    read = {name: load_dataset(str(path), text_column="sentence", label_column="label")
            for name, path in config["files"].items()}
    fit = {name: _fitting(data, tokenizer, config["max_len"]) for name, data in read.items()}
    need = {"train": _file_rows(config),
            "dev": config["eval_rows"]}
    short = {n: (len(fit[n]), need[n]) for n in need if len(fit[n]) < need[n]}
    if short:
        raise ValueError(f"too few rows of at most {config['max_len']} tokens (have, need): "
                         f"{short}")
    rows = {n: np.sort(np.random.default_rng(i).permutation(fit[n])[:need[n]])
            for i, n in enumerate(("train", "dev"))}
    train = read["train"].select(rows["train"])
    task = add_label_words(train.texts, train.labels, seed=0, label_words=LABEL_WORDS)
    bad = [t for t in task.texts if "\t" in t or "\n" in t]
    if bad:
        raise ValueError(f"a text holds a tab or line break, which the TSV cannot keep: {bad[0]!r}")
    source = folder / "augmented_sst_train.tsv"
    source.parent.mkdir(parents=True, exist_ok=True)
    source.write_text("sentence\tlabel\n" + "".join(
        f"{text}\t{LABEL_WORDS[label]}\n" for text, label in zip(task.texts, task.labels,
                                                                 strict=True)))
    dev = read["dev"].select(rows["dev"])
    return {"source": source, "eval": add_label_words(dev.texts, dev.labels, seed=1,
                                                      label_words=LABEL_WORDS),
            "eval_rows": rows["dev"].tolist(), "fitting": {n: len(f) for n, f in fit.items()},
            "total": {n: len(d) for n, d in read.items()}}


def first_layers_checkpoint(source: str | Path, num_layers: int, folder: Path) -> Path:
    """A checkpoint folder with `source`'s embeddings and first `num_layers` blocks (the
    ``small`` preset of ``smat roar`` as a folder ``run_teacher`` can start from).

    Raises:
      ValueError: `source` has fewer blocks.
    """
    from safetensors.numpy import load_file, save_file

    source = Path(source)
    hf = read_json(source / "config.json")
    if num_layers > hf["num_hidden_layers"]:
        raise ValueError(f"{source} has {hf['num_hidden_layers']} layers, fewer than "
                         f"{num_layers}")
    if (folder / "model.safetensors").is_file():
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    for path in source.iterdir():
        if path.is_file() and path.suffix != ".safetensors" and path.name != "config.json":
            shutil.copy(path, folder / path.name)
    tensors = {}
    for file in sorted(source.glob("*.safetensors")):
        for key, value in load_file(str(file)).items():
            block = re.search(r"(?:^|\.)layer\.(\d+)\.", key)
            if block is None or int(block.group(1)) < num_layers:
                tensors[key] = value
    write_json_atomic(folder / "config.json", {**hf, "num_hidden_layers": num_layers})
    save_file(tensors, str(folder / "tmp.safetensors"))
    (folder / "tmp.safetensors").rename(folder / "model.safetensors")
    return folder


def train_teachers(config: dict[str, Any], data: dict[str, Any], output_dir: Path, *,
                   model_source: Path, progress: bool) -> dict[str, dict[str, Any]]:
    """Both model sizes trained (or reused) on the augmented phrases by ``run_teacher``."""
    total = _file_rows(config)
    data_config = DataConfig(source=str(data["source"]), text_column="sentence",
                             label_column="label", max_len=config["max_len"],
                             teacher_fraction=config["train_rows"] / total,
                             student_validation_size=1,
                             student_test_size=config["held_out_rows"])
    sources = {"minilm": model_source,
               "small": first_layers_checkpoint(model_source, config["small_layers"],
                                                output_dir / "checkpoints" / "small")}
    records = {}
    for name in MODELS:
        train, pooling = config["teachers"][name]
        (records[name],) = run_teacher(data=data_config, train=train,
                                       output_dir=output_dir / name,
                                       model=ModelSource(str(sources[name]), pooling),
                                       progress=progress)
    return records


# ------------------------------------------------------------------ evaluation


def _stage(folder: Path, name: str, settings: dict[str, Any],
           compute: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """A finished stage read back, or computed, timed and written atomically (the file name
    carries a hash of its settings, so changed settings never reuse a stale stage)."""
    path = folder / f"{name}-{settings_hash(settings)}.json"
    if path.is_file():
        return read_json(path)
    start = time.perf_counter()
    result = {**compute(), "settings": settings}
    result["seconds"] = round(time.perf_counter() - start, 1)
    write_json_atomic(path, result)
    return result


def explain_rows(trained: model_store.TrainedModel, data: Encoded, name: str, *,
                 ig_steps: int, batch_size: int) -> np.ndarray:
    """(N, T) scores of one registry explainer for the predicted class
    (:func:`smat.jobs.explain.explain_encoded`: length-sorted batches each cut to its
    longest row, batch-independent explainers on the uncut rows with their indices)."""
    graphdef, params = functional.split(trained.model)
    scores, _, _ = explain_encoded(graphdef, params, data, [name], task=trained.info["task"],
                                   ig_steps=ig_steps, batch_size=batch_size)
    return scores[name]


def _mean_ci(values: np.ndarray) -> dict[str, float]:
    low, high = bootstrap_ci(values) if values.size else (math.nan, math.nan)
    return {"mean": float(np.mean(values)) if values.size else math.nan, "low": low,
            "high": high}


def ground_truth_metrics(scores: dict[str, np.ndarray], gold: np.ndarray,
                         show: np.ndarray) -> dict[str, Any]:
    """Ground Truth Overlap and Mean Rank (count and percentage of the real tokens) per
    explainer, with bootstrap 95% CIs over rows (thesis §2.2.3.1)."""
    report = {}
    for name, values in scores.items():
        overlap = ground_truth_overlap(values, gold, show)
        rank = mean_rank(values, gold, show)
        valid = np.asarray(overlap.valid)
        report[name] = {"overlap": _mean_ci(np.asarray(overlap.values)[valid]),
                        "mean_rank": _mean_ci(np.asarray(rank.rank, np.float64)[valid]),
                        "mean_rank_fraction": _mean_ci(np.asarray(rank.fraction)[valid]),
                        "num_valid": int(valid.sum())}
    return report


def encode_task(trained: model_store.TrainedModel, task: Any, *,
                max_len: int) -> tuple[Encoded, np.ndarray, np.ndarray]:
    """The augmented rows tokenized for `trained`, the (N, T) ground-truth mask (the label
    word's tokens) and the (N, T) mask of real, non-special tokens that are ranked.

    Raises:
      ValueError: the model's classes are not the label words.
    """
    labels = tuple(trained.info["label_names"])
    if labels != LABEL_WORDS:
        raise ValueError(f"the model's labels are {labels}, not the label words {LABEL_WORDS}")
    data = tokenize(TextDataset(texts=task.texts, labels=task.labels, task="classification",
                                label_names=labels), trained.tokenizer, max_len=max_len)
    gold = char_spans_to_token_mask(task.texts, [[tuple(s)] for s in task.char_spans],
                                    trained.tokenizer, max_len=max_len)
    return data, gold, (data.attention_mask != 0) & ~data.special_tokens_mask


def evaluate_model(trained: model_store.TrainedModel, task: Any, config: dict[str, Any],
                   folder: Path) -> dict[str, Any]:
    """Every evaluation of one trained model, each stage resumable under `folder`."""
    max_len, ig_steps, batch = config["max_len"], config["ig_steps"], config["batch_size"]
    data, gold, show = encode_task(trained, task, max_len=max_len)
    rows = {"rows": config["eval_rows"], "max_len": max_len, "ig_steps": ig_steps}
    scores_dir = folder / f"scores-{settings_hash(rows)}"
    scores = {name: cached_arrays(scores_dir / f"{name}.npz", lambda name=name: {
        "scores": explain_rows(trained, data, name, ig_steps=ig_steps, batch_size=batch)})[
        "scores"] for name in EXPLAINERS}
    for name in ENSEMBLES.values():  # registry.spec(name) computes the same from the model
        prefix, _, members = name.partition(":")
        scores[name] = np.asarray(registry.ensemble_scores(
            [scores[m] for m in members.split("+")], data.attention_mask,
            normalization=registry.ENSEMBLES[prefix]), np.float32)
    graphdef, params = functional.split(trained.model)
    predictions = np.argmax(predict_logits(graphdef, params, data, batch_size=batch), axis=-1)
    ground_truth = _stage(folder, "ground_truth", rows,
                          lambda: {"explainers": ground_truth_metrics(scores, gold, show)})
    faithfulness = _stage(folder, "faithfulness", rows, lambda: faithfulness_of_scores(
        trained, data, scores, batch_size=batch))
    sanity = {}
    for mode in config["sanity_modes"]:
        explain = ExplainConfig(explainers=SANITY_METHODS, ig_steps=ig_steps,
                                batch_size=config["sanity_batch_size"])
        subset = take(data, np.arange(config["sanity_rows"]))
        sanity[mode] = _stage(
            folder, f"sanity_{mode}", {**rows, "sanity_rows": config["sanity_rows"]},
            lambda mode=mode, explain=explain, subset=subset: sanity_report(
                trained, subset, SanityConfig(mode=mode, explain=explain)))
        # the thesis's Spearman rho of the signed scores, as in the table
        plot_sanity(sanity[mode], folder / f"sanity_{mode}.png", similarity="spearman")
    # the first epsilon is the thesis's; a further one sized to the model's embeddings
    by_epsilon: dict[str, dict[str, Any]] = {}
    subset = take(data, np.arange(config["attack_rows"]))
    for epsilon in config["attack_epsilons"]:
        reports = by_epsilon[f"{epsilon:g}"] = {}
        for objective in OBJECTIVES:
            settings = {"rows": config["attack_rows"], "steps": config["attack_steps"],
                        "ig_steps": config["attack_ig_steps"], "max_len": max_len,
                        "epsilon": epsilon}
            attack = AttackConfig(objective=objective, epsilon=epsilon,
                                  steps=config["attack_steps"],
                                  explain=ExplainConfig(explainers=ATTACKED,
                                                        ig_steps=config["attack_ig_steps"],
                                                        batch_size=config["attack_batch_size"]))
            # the settings hash (epsilon included) tells the epsilons' files apart
            reports[objective] = _stage(folder, f"attack_{objective}", settings,
                                        lambda attack=attack: attack_report(
                                            trained, subset, attack))
    return {"eval_accuracy": float(np.mean(predictions == data.labels)),
            "eval_tokens_mean": float(show.sum(1).mean()),
            "ground_truth": ground_truth, "faithfulness": faithfulness, "sanity": sanity,
            "attacks": by_epsilon}


# ------------------------------------------------------------------ verdicts and tables


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
    """(a) and (c): ground truth and AOPC per method, random, and the two ensembles."""
    names = {**{v: f"{k} (`{v}`)" for k, v in METHODS.items()}, RANDOM: "random",
             **{v: k for k, v in ENSEMBLES.items()}}
    lines = ["| method | GT overlap ↑ | mean rank (% of tokens) ↓ | comprehensiveness ↑ | "
             "sufficiency ↓ |", "|---|---|---|---|---|"]
    for name, label in names.items():
        lines.append(f"| {label} | {_ci(_gt(result, name))} | "
                     f"{_ci(_gt(result, name, 'mean_rank_fraction'))} | "
                     f"{_ci(_aopc(result, name, 'comprehensiveness'))} | "
                     f"{_ci(_aopc(result, name, 'sufficiency'))} |")
    return "\n".join(lines)


def tables(summary: dict[str, Any]) -> str:
    """The measured tables, the thesis's finding beside each, and the verdicts."""
    config = summary["config"]
    lines = ["| model | layers | held-out phrase accuracy | dev-sentence accuracy | "
             "train seconds |", "|---|---|---|---|---|"]
    for name, result in summary["models"].items():
        teacher = result["teacher"]
        lines.append(f"| {name} | {result['layers']} | {100 * teacher['test']['accuracy']:.1f}%"
                     f" | {100 * result['eval_accuracy']:.1f}% | {teacher['train_seconds']} |")
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


def run(variant: str, *, data_dir: str | Path, output_dir: str | Path,
        model_source: str | Path | None = None, results_dir: str | Path | None = None,
        progress: bool = True) -> dict[str, Any]:
    """Train (or reuse) both models and run every evaluation (or read finished stages back);
    write ``table.md`` and ``results.json``, and with `results_dir` copy the results and the
    cascading plots there. `model_source`: the pretrained encoder (default: the offline
    MiniLM)."""
    config = get_config(variant, data_dir=data_dir)
    output_dir = Path(output_dir)
    model_source = Path(model_source) if model_source is not None else minilm_path()
    start = time.perf_counter()
    from transformers import AutoTokenizer

    data = augmented_data(config, AutoTokenizer.from_pretrained(str(model_source)),
                          output_dir / "data")
    write_json_atomic(output_dir / "config.json", {
        **{k: v for k, v in config.items() if k not in ("files", "teachers")},
        "files": {k: str(v) for k, v in config["files"].items()},
        "teachers": {k: {"train": dataclasses.asdict(t), "pooling": p}
                     for k, (t, p) in config["teachers"].items()},
        "model_source": str(model_source), "methods": METHODS, "ensembles": ENSEMBLES,
        "eval_rows_of_dev": data["eval_rows"], "rows_that_fit": data["fitting"],
        "rows_in_files": data["total"]})
    teachers = train_teachers(config, data, output_dir, model_source=model_source,
                              progress=progress)
    models = {}
    for name in MODELS:
        trained = model_store.load(output_dir / name / "model")
        result = evaluate_model(trained, data["eval"], config, output_dir / name / "evaluation")
        result.update(teacher=teachers[name], layers=trained.model.encoder.config.num_layers)
        result["verdicts"] = verdicts(result)
        models[name] = result
    summary = {"variant": variant, "config": {k: config[k] for k in _SIZES[variant]},
               "thesis": THESIS, "models": models,
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
    parser.add_argument("--variant", choices=sorted(_SIZES), default="cpu")
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
                      output_dir=output_dir,
                      model_source=args.model, results_dir=results_dir,
                      progress=not args.no_progress)
    print((Path(output_dir) / "table.md").read_text())
    print(f"{summary['seconds_this_call']} s")


if __name__ == "__main__":
    main()
