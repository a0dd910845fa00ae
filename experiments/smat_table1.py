"""Table 1 and Figure 5 of the SMaT paper: simulability across student sizes, 7 settings.

Fernandes et al, "Learning to Scaffold: Optimizing Model Explanations for Teaching", 2022,
**Table 1** (IMDB, ELECTRA-small): students trained on 500 / 1,000 / 2,000 examples with no
explainer, Gradient L2, Gradient x Input, Integrated Gradients, static attention (all
layers, last layer) and SMaT; 5 seeds; ``median [q25:q75]`` of test simulability, ``*``
where the IQR lies above the no-explainer baseline's (the paper underlines). **Figure 5**:
the learned head coefficients of the median SMaT student, as a layer x head heatmap.

Variants (``table1_variants.get_config``):

- ``paper`` (for a GPU): the paper's design on IMDB. The teacher trains on half of
  ``--data-dir``'s IMDB test split (10% of that half for its early stopping; the train
  split is not used), the student pool, validation (1,250) and test
  (2,500) are carved from the other half; max length 256, the authors' student settings
  (design §5: SGD 5e-3, patience 10, batch 32, meta update every step) and IG with 10 steps
  as in the paper's appendix. The encoder is all-MiniLM-L6-v2 (6 x 12 heads), not
  ELECTRA-small (12 x 4), which is not available offline.
- ``gpu`` (one H100/H200, about 15 minutes): the paper variant's data
  and students cut to the headline cell (n=500; none, static attention, SMaT; 5 seeds
  vmapped), a teacher of one epoch (batch 32), and every batch padded to max_len 256 so
  each program compiles once (docs/benchmarks.md has the command and what travels).
- ``cpu`` (2 CPU cores, under an hour with a teacher already trained): the offline
  movie-snippets corpus (10,568 sentences, max length 64), the README's teacher, student
  sizes 64 / 128 (an eighth of the paper's two smaller ones), 3 seeds trained as one vmapped
  program, batch 16, at most 4 epochs with patience 2, SGD 0.05 (the reference 5e-3
  barely moves a student in 4 epochs), the meta update every step as in the paper, IG
  with 10 steps. One student step of 3 seeds takes about 3.5 s here (1.2 s per seed),
  so the paper's sizes and epoch counts would take days on this machine.
- ``sst2`` (2 CPU cores, the reference's time scale; hours per cell): GLUE SST-2 from
  ``--data-dir`` (``data/sst2_glue``) in the paper's two-split layout: a MiniLM
  teacher fine-tuned on half of the 67,349 training phrases (10% of that half for its early
  stopping; AdamW 5e-5, warmup 500, batch 32, 3 epochs, patience 5), the students' pool,
  validation (500) and test (1,000) carved from the 2,693 full sentences of ``dev.tsv`` and
  ``test-labeled.tsv``; max length 64; students of 500 and 1,000 sentences with the
  reference's optimizer and stopping (SGD 5e-3, batch 32, patience 10, up to 100 epochs,
  the meta update every step, outer Adam 5e-4), one shared initialisation, 5 seeds
  vmapped; settings none / attention_all / smat by default (``--explainers`` adds others).
- ``smoke``: the cpu layout shrunk to 2 sizes, 2 seeds and 1 epoch, for the tests.

Commands (resumable: a killed run restarts at the first unfinished student):

    python experiments/smat_table1.py --variant cpu --output-dir runs/smat_table1_cpu
    python experiments/smat_table1.py --variant paper --data-dir data/imdb_maas \\
        --output-dir runs/smat_table1_paper
    python experiments/smat_table1.py --variant sst2 --data-dir data/sst2_glue \\
        --output-dir runs/smat_table1_sst2
    python experiments/smat_table1.py --variant smoke --output-dir runs/smat_table1_smoke

The leakage control of a cell: its SMaT students trained on the teacher's
explanations of each row's tokens in a shuffled order, from the same teacher:

    python experiments/smat_table1.py --variant sst2 --data-dir data/sst2_glue \\
        --teacher runs/smat_table1_sst2/teacher --explainers smat --sizes 500 \\
        --explanation-source shuffled_text --output-dir runs/smat_table1_sst2_control

``--teacher DIR`` reuses a finished `smat train-teacher` run instead of training one under
``OUTPUT_DIR/teacher`` (as it is: one trained on other data than the variant's warns, naming
each difference, and the run records the teacher's data); ``--explainers``, ``--sizes`` and
``--seeds`` change the grid (Table 2 needs only the SMaT students of the middle size), and
``--explainers`` may name SMaT's ablation arms (:mod:`smat.jobs.ablations`). Writes
``config.json``, ``table.md`` (measured and paper tables), ``results.json`` (every student
record), ``simulability.png`` and ``head_weights.png`` (Figure 5) into the output folder.

Over several processes or hosts sharing the output folder, ``--share I/N`` splits the
work: share 0 trains the teacher (the others wait, ``--join-timeout``), each share trains
every N-th cell of the grid, and share 0 joins them and writes the report; a share that
stopped resumes with the same command. On host (or process) 0 and 1 of two::

    python experiments/smat_table1.py --variant sst2 --share 0/2
    python experiments/smat_table1.py --variant sst2 --share 1/2

Measured runtime (2 CPU cores, nothing else running unless stated): see
docs/reproduce/smat.md.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from table1_variants import DATA_DIR_HELP, HUB_DATA, VARIANTS, get_config

from smat.cli.experiment import (
    check_data_files,
    command_runtime,
    data_dir_or_hub,
    finished_share,
    grid_options,
    parse_variant_args,
    variant_parser,
)
from smat.jobs.experiment import ExperimentConfig, run_experiment
from smat.parallel import JOIN_TIMEOUT
from smat.training.loop import with_loop
from smat.training.student import EXPLANATION_SOURCES


def run(config: ExperimentConfig, *, variant: str, output_dir: str | Path,
        data_dir: str | None = None, teacher_dir: str | Path | None = None,
        explanation_source: str | None = None, teacher_seed: int | None = None,
        progress: bool = True, teacher_only: bool = False,
        smat_cells: Sequence[str | Path] = (), share: tuple[int, int] = (0, 1),
        join_timeout: float = JOIN_TIMEOUT) -> dict[str, Any]:
    """Run the variant's `config` (with the teacher's explanations of shuffled text, the
    leakage control, when `explanation_source` says so; `teacher_seed` replaces the
    teacher's seed: the replication's teachers differ only in it). See
    :func:`smat.jobs.experiment.run_experiment` for the rest.

    Raises:
      FileNotFoundError: `data_dir` lacks a file the variant reads (before any work).
    """
    if explanation_source is not None:
        config = dataclasses.replace(config, student=dataclasses.replace(
            config.student, explanation_source=explanation_source))
    if teacher_seed is not None:
        config = dataclasses.replace(config, teacher=with_loop(config.teacher,
                                                               seed=teacher_seed))
    if data_dir is not None:
        check_data_files(config.data, data_dir)
    return run_experiment(config, variant=variant, output_dir=output_dir,
                          teacher_dir=teacher_dir, progress=progress,
                          teacher_only=teacher_only, smat_cells=smat_cells, share=share,
                          join_timeout=join_timeout)


def main(argv: Sequence[str] | None = None) -> None:
    parser = variant_parser(__doc__, name="smat_table1", variants=VARIANTS,
                            data_dir_help=DATA_DIR_HELP, reuses_teacher=True, grid=True)
    parser.add_argument("--smat-cells", nargs="+", default=(),
                        help="result files holding the SMaT students of the same teacher and "
                             "seeds, which smat_frozen and random_heads read")
    parser.add_argument("--explanation-source", default=None, choices=EXPLANATION_SOURCES,
                        help="shuffled_text: the leakage control, every teacher explanation "
                             "computed on its row's tokens in a shuffled order (default text)")
    parser.add_argument("--teacher-only", action="store_true",
                        help="train (or reuse) the teacher and stop, printing its test "
                             "accuracy and weights fingerprint (scripts/evidence_queue.py asks "
                             "it which teacher's students are already committed)")
    parser.add_argument("--teacher-seed", type=int, default=None,
                        help="the teacher's seed (its head, batch order and dropout; default "
                             "the variant's, 0): teachers of one data set that differ only in it")
    args = parse_variant_args(parser, argv)
    output_dir = args.output_dir
    with command_runtime(parser, driver=__file__):
        data_dir = data_dir_or_hub(args.data_dir, HUB_DATA.get(args.variant))
        options = grid_options(args)
        config = options.pop("grid")(get_config(args.variant, data_dir=data_dir))
        summary = run(config, variant=args.variant, output_dir=output_dir,
                      data_dir=data_dir, teacher_dir=args.teacher,
                      explanation_source=args.explanation_source,
                      teacher_seed=args.teacher_seed, progress=not args.no_progress,
                      teacher_only=args.teacher_only, smat_cells=args.smat_cells, **options)
    if finished_share(summary):
        return
    if args.teacher_only:
        print(f"teacher {summary['teacher_dir']}: test accuracy "
              f"{100 * summary['teacher_test']['accuracy']:.2f}%, weights "
              f"{summary['teacher_params']}")
        return
    print((Path(output_dir) / "table.md").read_text())
    if "figure5_seed" in summary:
        print(f"Figure 5: seed {summary['figure5_seed']}, {summary['figure5_nonzero_heads']} "
              f"non-zero heads, largest {summary['figure5_max_weight']:.3f}")
    print(f"{summary['seconds_this_call']} s")


if __name__ == "__main__":
    main()
