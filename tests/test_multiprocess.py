"""Two real JAX processes on localhost (gloo collectives over a coordinator on a free port),
each with 2 CPU devices, forming one 4-device mesh: a teacher trained data-parallel over it,
each process tokenizing only its data shard of the training rows, equals the one-process
run over 4 devices holding every shard; killed after its first checkpoint it resumes as
two processes and, from a copy of its folder, as one. `smat explain` over the two
processes, each tokenizing its own block of the texts, writes the one-process
explanations, and `smat faithfulness` the one-process report; started with the variables
Slurm's `srun` or Open MPI's `mpirun` set, `--distributed` joins the processes by itself.

The processes are `smat` commands as a user would start them on two hosts
(``--coordinator``, ``--num-processes``, ``--process-id``); ``--devices 4`` exists only in
the joined mesh (each process alone has 2 devices), so a run whose processes did not join
fails instead of passing as two independent runs.
"""

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import jax
import numpy as np
import pytest

from tests.conftest import USE_COMPILE_CACHE

pytestmark = pytest.mark.multidevice

TIMEOUT = 300  # seconds a process may take; both are killed past it
TOLERANCE = 1e-5  # largest parameter or score difference between process counts


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


SMAT = str(Path(sys.executable).parent / "smat")
DEVICE_COUNT = "--xla_force_host_platform_device_count"


def _xla_flags(devices: int) -> str:
    """The suite's XLA flags (its fast-compile ones: tests/conftest.py) with `devices` CPU
    devices instead of the suite's count."""
    kept = [flag for flag in os.environ.get("XLA_FLAGS", "").split()
            if not flag.startswith(DEVICE_COUNT)]
    return " ".join([*kept, f"{DEVICE_COUNT}={devices}"])


def _run_processes(commands: list[list[str]], devices: int, tmp_path: Path, *,
                   until: Callable[[], bool] | None = None,
                   name: str = "process",
                   environments: list[dict[str, str]] | None = None) -> list[str]:
    """Start every command at once, each with `devices` CPU devices (and its entry of
    `environments` added to the environment); their outputs. Any that fails or outlives
    TIMEOUT ends all of them and the test. With `until`, every process is killed (SIGKILL,
    as when a host is lost) as soon as it holds, which must be before any of them ends."""
    env = {**os.environ, "XLA_FLAGS": _xla_flags(devices)}
    logs = [tmp_path / f"{name}{i}.log" for i in range(len(commands))]
    files = [log.open("w") for log in logs]
    processes = [subprocess.Popen(command, env={**env, **extra}, stdout=file,
                                  stderr=subprocess.STDOUT)
                 for command, file, extra in zip(commands, files, environments or
                                                 [{}] * len(commands), strict=True)]
    held = False
    try:
        if until is None:
            codes = [p.wait(timeout=TIMEOUT) for p in processes]
        else:
            deadline = time.monotonic() + TIMEOUT
            while not (held := until()):
                if time.monotonic() > deadline or any(p.poll() is not None
                                                      for p in processes):
                    break
                time.sleep(0.02)
    finally:
        for p, file in zip(processes, files, strict=True):
            p.kill()
            p.wait()
            file.close()
    outputs = [log.read_text(errors="replace") for log in logs]
    if until is not None:
        assert held, "the processes ended or timed out first:\n" + "\n".join(
            output[-3000:] for output in outputs)
        return outputs
    for code, output in zip(codes, outputs, strict=True):
        assert code == 0, output[-3000:]
    return outputs


def _joined(common: list[str], tmp_path: Path, *, name: str = "process",
            until: Callable[[], bool] | None = None) -> list[str]:
    """`common` as two processes of 2 CPU devices each, joined at a fresh coordinator."""
    port = _free_port()
    return _run_processes([[SMAT, *common, "--coordinator", f"localhost:{port}",
                            "--num-processes", "2", "--process-id", str(i)] for i in (0, 1)],
                          devices=2, tmp_path=tmp_path, until=until, name=name)


def _params(folder: Path) -> list[np.ndarray]:
    from smat.models import functional
    from smat.store.model_store import load

    return [np.asarray(leaf) for leaf in
            jax.tree.leaves(functional.split(load(folder / "model").model)[1])]


def _largest_difference(a: list[np.ndarray], b: list[np.ndarray]) -> float:
    return max(float(np.max(np.abs(x - y))) for x, y in zip(a, b, strict=True))


def _metric_steps(folder: Path) -> list[int]:
    lines = (folder / "checkpoints" / "metrics.jsonl").read_text().splitlines()
    return [json.loads(line)["step"] for line in lines]


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> list[str]:
    """The module's processes share one persistent compilation cache (a rerun, a resume or
    the other process count loads the programs instead of compiling them), where XLA loads
    cached programs cleanly."""
    if not USE_COMPILE_CACHE:
        return ["--no-compile-cache"]
    return ["--compile-cache", str(tmp_path_factory.mktemp("xla-cache"))]


@pytest.fixture(scope="module")
def teacher_flags(tiny_teacher_args, cache) -> list[str]:
    """`smat train-teacher` over 4 devices for one epoch of 11 steps, evaluated (and
    checkpointed) at steps 5, 10 and 11, its training rows dealt to 2 data shards (add
    --output-dir)."""
    args = [a for a in tiny_teacher_args if a != "--no-progress"]
    return ["train-teacher", *args, "--no-progress", *cache, "--max-epochs", "1",
            "--evals-per-epoch", "2", "--devices", "4", "--data-shards", "2"]


@pytest.fixture(scope="module")
def model(tiny_checkpoint, tmp_path_factory) -> Path:
    """The tiny BERT under a fresh two-class head, saved as a trained-model folder: what the
    inference tests explain (its outputs depend on every input; training adds nothing)."""
    from smat.models import from_pretrained
    from smat.store import model_store

    classifier, tokenizer = from_pretrained(tiny_checkpoint, task="classification",
                                            num_labels=2)
    return model_store.save(tmp_path_factory.mktemp("untrained") / "model", classifier,
                            tokenizer, max_len=16, label_names=["neg", "pos"])


@pytest.fixture(scope="module")
def one_process_teacher(teacher_flags, tmp_path_factory) -> Path:
    """The reference: the teacher trained by one process over 4 CPU devices, holding both
    data shards."""
    folder = tmp_path_factory.mktemp("one-process")
    _run_processes([[SMAT, *teacher_flags, "--output-dir", str(folder / "run")]],
                   devices=4, tmp_path=folder)
    return folder / "run"


def test_two_processes_train_their_data_shards_and_resume_in_two_processes_and_in_one(
        teacher_flags, one_process_teacher, tmp_path):
    """Each process tokenizes and holds only its data shard of the training rows (its log
    says which) and each global batch is assembled from the two processes' rows. The
    teacher trained over two processes (steps 1-5, killed with both processes once the
    first evaluation's checkpoint is in place, then resumed by the same command as two
    processes for steps 6-11) ends where one process of 4 devices holding both shards ends;
    a copy of the killed folder resumed as that one process ends there too (largest
    parameter difference 1.2e-7 for both). Checked once by hand: with the shards dealt the wrong way
    round (process 0 holding shard 1, so each process's devices train on the other's rows)
    the log check fails, and without it the largest parameter difference is 6.4e-3."""
    killed = tmp_path / "killed"
    last = killed / "checkpoints" / "last"
    said = _joined([*teacher_flags, "--output-dir", str(killed)], tmp_path, name="killed",
                   until=last.is_dir)
    held = []
    for i, output in enumerate(said):
        line = next(line for line in output.splitlines()
                    if line.startswith(f"teacher: process {i} holds data shards [{i}] of 2: "))
        count, _, total = line.split(": ")[-1].removesuffix(" training rows").split()
        held.append(int(count))
    assert sum(held) == int(total) and min(held) > 0
    assert _metric_steps(killed) == [5]
    assert not (killed / "result.json").exists()
    copy = tmp_path / "copy"
    shutil.copytree(killed, copy)

    said = _joined([*teacher_flags, "--output-dir", str(killed)], tmp_path, name="resumed")
    assert f"teacher: resuming from {last} at step 5 of 11" in said[0], said[0][-3000:]
    said = _run_processes([[SMAT, *teacher_flags, "--output-dir", str(copy)]], devices=4,
                          tmp_path=tmp_path, name="one")
    assert (f"teacher: resuming from {copy / 'checkpoints' / 'last'} at step 5 of 11"
            in said[0]), said[0][-3000:]

    reference = _params(one_process_teacher)
    for folder in (killed, copy):
        assert _largest_difference(_params(folder), reference) < TOLERANCE, folder
        # the metrics log (process 0's alone) goes on from the checkpoint: no evaluation
        # twice, none missing
        assert _metric_steps(folder) == _metric_steps(one_process_teacher) == [5, 10, 11]
        # the finished run kept no resumable state, removed once by process 0
        assert not (folder / "checkpoints" / "last").exists()


def test_explain_over_two_processes_equals_one_process(model, cache, tmp_path):
    """`smat explain` of 14 texts over the joined 4-device mesh: each process tokenizes
    its block of 7 texts, each batch of 8 takes 4 rows of each block (the second batch of a
    block holds 3) and is cut to the longest of them; the explanations written are the
    one-process ones: every row once, in order."""
    words = ["a great film", "boring and slow", "truly awful acting , a waste of time",
             "wonderful and moving", "dull mess", "a joy to watch , great fun",
             "slow and boring story", "moving and wonderful story , truly great acting"]
    texts = [" , ".join(words[i % 8: i % 8 + 1 + i % 3]) for i in range(14)]
    (tmp_path / "texts.txt").write_text("\n".join(texts) + "\n")
    common = ["explain", "--model", str(model),
              str(tmp_path / "texts.txt"), "--explainers", "gradient",
              "integrated_gradients", "attention_rollout", "random", "--ig-steps", "4",
              "--batch-size", "8", "--no-progress", *cache, "--devices", "4"]
    logs = _joined([*common, "--output-dir", str(tmp_path / "two")], tmp_path)
    assert "explain: process 0 tokenizes texts 1-7 of 14" in logs[0], logs[0][-2000:]
    assert "explain: process 1 tokenizes texts 8-14 of 14" in logs[1], logs[1][-2000:]
    _run_processes([[SMAT, *common, "--output-dir", str(tmp_path / "one")]], devices=4,
                   tmp_path=tmp_path, name="one")
    two, one = (json.loads((tmp_path / name / "explanations.json").read_text())
                for name in ("two", "one"))
    assert [record["text"] for record in two] == [record["text"] for record in one] == texts
    for a, b in zip(two, one, strict=True):
        assert (a["tokens"], a["prediction"]) == (b["tokens"], b["prediction"])
        assert abs(a["probability"] - b["probability"]) < TOLERANCE
        assert a["scores"].keys() == b["scores"].keys()
        for name in a["scores"]:
            assert np.allclose(a["scores"][name], b["scores"][name], atol=TOLERANCE), name


def test_an_evaluation_over_two_processes_equals_one_process(model, cache, tmp_path):
    """`smat faithfulness` (explanations, then every perturbed input) over the joined mesh
    gives the one-process report; process 0 alone writes and prints it."""
    texts = ["a great film , truly moving", "boring and slow", "a dull mess of a story",
             "wonderful acting and a joy to watch", "awful , a waste of time", "great fun",
             "slow , dull and boring", "moving and wonderful , great acting", "a joy"]
    (tmp_path / "texts.txt").write_text("\n".join(texts) + "\n")
    common = ["faithfulness", "--model", str(model), "--texts",
              str(tmp_path / "texts.txt"), "--explainers", "gradient", "attention_all",
              "--batch-size", "4", "--no-progress", *cache, "--devices", "4"]
    logs = _joined([*common, "--output-dir", str(tmp_path / "two")], tmp_path)
    assert "| gradient |" in logs[0] and "| gradient |" not in logs[1]
    _run_processes([[SMAT, *common, "--output-dir", str(tmp_path / "one")]], devices=4,
                   tmp_path=tmp_path, name="one")
    two, one = (json.loads((tmp_path / name / "faithfulness.json").read_text())
                for name in ("two", "one"))

    def numbers(tree):
        if isinstance(tree, dict):
            return [v for key in sorted(tree) for v in numbers(tree[key])]
        if isinstance(tree, list):
            return [v for item in tree for v in numbers(item)]
        return [tree] if isinstance(tree, float) else []

    assert numbers(two) and len(numbers(two)) == len(numbers(one))
    np.testing.assert_allclose(numbers(two), numbers(one), atol=TOLERANCE)


def _launcher_environments(launcher: str) -> list[dict[str, str]]:
    """What `srun` (Slurm) or `mpirun` (Open MPI) sets for two tasks on this machine, the
    variables JAX's cluster detection reads; the job id makes JAX pick a free port."""
    with socket.socket() as s:  # JAX takes the port 61440 + job id % 4096
        for port in range(61440 + os.getpid() % 4000, 65536):
            try:
                s.bind(("localhost", port))
                break
            except OSError:
                continue
    job = port - 61440
    if launcher == "slurm":
        return [{"SLURM_JOB_ID": str(job), "SLURM_STEP_NODELIST": "localhost",
                 "SLURM_NTASKS": "2", "SLURM_PROCID": str(i), "SLURM_LOCALID": str(i),
                 "SLURM_STEP_NUM_NODES": "1"} for i in (0, 1)]
    return [{"OMPI_MCA_orte_hnp_uri": f"{job * 4096}.0;tcp://127.0.0.1:1024",
             "OMPI_COMM_WORLD_SIZE": "2", "OMPI_COMM_WORLD_RANK": str(i),
             "OMPI_COMM_WORLD_LOCAL_RANK": str(i)} for i in (0, 1)]


@pytest.mark.parametrize("launcher", ["slurm", "open_mpi"])
def test_the_same_command_under_a_launcher_joins_by_itself(model, cache, tmp_path,
                                                            launcher):
    """`--distributed` with the environment `srun` / `mpirun` gives two tasks: JAX finds
    the coordinator, the count and each process's id itself, and the two form the 4-device
    mesh (`--devices 4`, which neither has alone), each explaining its block of the texts."""
    texts = ["a great film", "boring and slow", "a joy to watch", "dull mess"]
    (tmp_path / "texts.txt").write_text("\n".join(texts) + "\n")
    command = [SMAT, "explain", "--model", str(model),
               str(tmp_path / "texts.txt"), "--explainers", "attention_all", "--batch-size",
               "4", "--no-progress", *cache, "--devices", "4", "--distributed",
               "--output-dir", str(tmp_path / "run")]
    said = _run_processes([command] * 2, devices=2, tmp_path=tmp_path,
                          environments=_launcher_environments(launcher))
    assert "smat: joining the processes at the detected cluster" in said[0]
    assert "explain: process 1 tokenizes texts 3-4 of 4" in said[1], said[1][-2000:]
    written = json.loads((tmp_path / "run" / "explanations.json").read_text())
    assert [record["text"] for record in written] == texts


def test_two_processes_that_do_not_join_cannot_claim_the_joined_mesh(tiny_teacher_args,
                                                                     tmp_path):
    """The check the tests above rest on: without the coordinator a process has its own 2
    devices, and `--devices 4` is refused."""
    env = {**os.environ, "XLA_FLAGS": _xla_flags(2)}
    result = subprocess.run([SMAT, "train-teacher",
                             *tiny_teacher_args, "--devices", "4", "--output-dir",
                             str(tmp_path / "alone")], env=env, capture_output=True,
                            text=True, timeout=TIMEOUT)
    assert result.returncode != 0
    assert "devices" in result.stderr
