"""Shared pytest configuration: strict JAX numerics for every test (STYLE 10), a private
home folder, a guard against tests that leak JAX's global configuration, and the tiny
checkpoint / CSV data / trained teacher used by the command-line tests."""

import atexit
import json
import os
import shutil
import tempfile
from pathlib import Path

# Tests never write to the user's home: every cache that defaults to ~ goes to a private
# folder of this session (set before anything reads HOME). The user's own values are kept
# for the one subprocess that needs them (fixture user_home_environment); pytest-xdist's
# workers start with the main process's private HOME, so the user's values travel in a
# variable of their own. Each process removes its private folder when it ends.
_USER_HOME_VARIABLE = "SMAT_TESTS_USER_HOME_ENVIRONMENT"
os.environ.setdefault(_USER_HOME_VARIABLE, json.dumps(
    {name: os.environ.get(name) for name in ("HOME", "XDG_CACHE_HOME")}))
_USER_HOME_ENVIRONMENT = json.loads(os.environ[_USER_HOME_VARIABLE])
_HOME = tempfile.mkdtemp(prefix="smat-tests-home-")
atexit.register(shutil.rmtree, _HOME, ignore_errors=True)
os.environ.update(HOME=_HOME, XDG_CACHE_HOME=os.path.join(_HOME, ".cache"),
                  HF_HOME=os.path.join(_HOME, ".cache", "huggingface"))
# In-process command-line calls compile afresh unless a test passes --compile-cache.
os.environ["SMAT_COMPILE_CACHE"] = "off"
os.environ.pop("JAX_COMPILATION_CACHE_DIR", None)
# The suite compiles thousands of small programs and runs each briefly, and LLVM's
# optimisation passes are most of XLA:CPU's compile time: tests compile without them and
# with XLA:CPU's older fusion code generator, which compiles unoptimised code in half the
# time of the default one (a teacher step: 4.3 s against 8.8 s; with optimisation on it is
# the slower of the two). The same HLO, so the same semantics; machine code that runs
# slower. Subprocesses inherit it. SMAT_TEST_OPTIMIZED=1 compiles with XLA's defaults, as
# users' programs are.
_FAST_COMPILE = ("--xla_backend_optimization_level=0", "--xla_llvm_disable_expensive_passes=true",
                 "--xla_cpu_use_fusion_emitters=false")
if os.environ.get("SMAT_TEST_OPTIMIZED") != "1":
    _given = os.environ.get("XLA_FLAGS", "").split()  # xdist workers inherit the controller's
    os.environ["XLA_FLAGS"] = " ".join([*_given, *(f for f in _FAST_COMPILE if f not in _given)])

import jax  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from smat.compile_cache import loads_cleanly  # noqa: E402

jax.config.update("jax_numpy_rank_promotion", "raise")
jax.config.update("jax_default_matmul_precision", "highest")

# One persistent compilation cache per test run, shared by its xdist workers (they inherit
# the controller's environment) and removed by the controller at exit: a program one
# worker compiled, or one compiled before a module's programs were freed, is loaded instead
# of compiled again. Programs that compile in under a quarter of a second are
# not written (most of the suite's thousands of eager operations): loading is not cheaper.
# Where XLA refuses its own cached programs (jax-ml/jax#38445) the suite compiles without.
MIN_CACHED_COMPILE_SECONDS = 0.25
if "SMAT_TEST_COMPILE_CACHE" not in os.environ:
    os.environ["SMAT_TEST_COMPILE_CACHE"] = tempfile.mkdtemp(prefix="smat-tests-xla-cache-")
    atexit.register(shutil.rmtree, os.environ["SMAT_TEST_COMPILE_CACHE"], ignore_errors=True)
TEST_COMPILE_CACHE = Path(os.environ["SMAT_TEST_COMPILE_CACHE"])
USE_COMPILE_CACHE = (os.environ.get("SMAT_TEST_NO_COMPILE_CACHE") != "1"
                     and loads_cleanly(TEST_COMPILE_CACHE))
if USE_COMPILE_CACHE:
    jax.config.update("jax_compilation_cache_dir", str(TEST_COMPILE_CACHE / "programs"))
    jax.config.update("jax_persistent_cache_min_compile_time_secs",
                      MIN_CACHED_COMPILE_SECONDS)

# Process-wide JAX settings a test could leave changed for every later test.
GLOBAL_JAX_OPTIONS = ("jax_compilation_cache_dir", "jax_enable_x64",
                      "jax_default_matmul_precision", "jax_default_device",
                      "jax_numpy_rank_promotion", "jax_numpy_dtype_promotion",
                      "jax_persistent_cache_min_compile_time_secs",
                      "jax_persistent_cache_min_entry_size_bytes")


def jax_options() -> dict[str, object]:
    return {name: getattr(jax.config, name) for name in GLOBAL_JAX_OPTIONS}


# With SMAT_TEST_PROFILE=DIR every test's wall, compile and trace seconds, and the programs
# it compiled by name, are written to DIR/<worker>.jsonl (`make test`, summarised by
# scripts/test_profile.py): JAX reports each program's tracing, lowering and XLA compile
# times through jax.monitoring.
_PROFILE_DIR = os.environ.get("SMAT_TEST_PROFILE")
_COMPILE_EVENTS = {"/jax/core/compile/backend_compile_duration": "compile",
                   "/jax/core/compile/jaxpr_trace_duration": "trace",
                   "/jax/core/compile/jaxpr_to_mlir_module_duration": "lower"}
_current_test: dict[str, float] = {}
# Per program name (jit(f), or jit(op) for an eager operation): [compiles, lowering + XLA
# compile seconds] inside the current test.
_current_programs: dict[str, list[float]] = {}


def _record_compile_event(event: str, seconds: float, *, fun_name: str = "?", **_) -> None:
    if event not in _COMPILE_EVENTS:
        return
    kind = _COMPILE_EVENTS[event]
    _current_test[kind] = _current_test.get(kind, 0.0) + seconds
    if kind != "trace":
        entry = _current_programs.setdefault(fun_name, [0, 0.0])
        entry[0] += kind == "compile"
        entry[1] += seconds


if _PROFILE_DIR:
    jax.monitoring.register_event_duration_secs_listener(_record_compile_event)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """Time one test (setup, call and teardown) and the JAX compile work inside it."""
    if not _PROFILE_DIR:
        return (yield)
    import time

    _current_test.clear()
    _current_programs.clear()
    start = time.perf_counter()
    try:
        return (yield)
    finally:
        record = {"test": item.nodeid, "seconds": round(time.perf_counter() - start, 3),
                  **{name: round(value, 3) for name, value in _current_test.items()},
                  "programs": {name: [count, round(seconds, 3)]
                               for name, (count, seconds) in _current_programs.items()}}
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        os.makedirs(_PROFILE_DIR, exist_ok=True)
        with open(os.path.join(_PROFILE_DIR, f"{worker}.jsonl"), "a") as stream:
            stream.write(json.dumps(record) + "\n")


# Compiled programs are freed after a test module once the process holds this many memory
# mappings (the kernel's limit, vm.max_map_count, is 65,530 by default) or this much
# resident memory (two workers beside a user's other jobs). A worker's resident memory
# passes 3 GiB after a few modules whatever it compiles (1,400-1,800 mappings left after
# clearing, 3.0-3.5 GiB resident), so a 3 GiB limit freed the programs after every later
# module, which then compiled them again.
MAX_MEMORY_MAPPINGS = 20_000
MAX_RESIDENT_BYTES = 6 * 2**30


def memory_in_use() -> tuple[int, int] | None:
    """(memory mappings, resident bytes) of this process; None where /proc cannot tell."""
    try:
        with open("/proc/self/maps", "rb") as maps:
            mappings = sum(1 for _ in maps)
        with open("/proc/self/statm") as statm:
            resident_pages = int(statm.read().split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return mappings, resident_pages * os.sysconf("SC_PAGE_SIZE")


@pytest.fixture(scope="module", autouse=True)
def _release_compiled_programs():
    """Free every compiled program after a test module when the process nears the
    kernel's memory-mapping limit.

    XLA:CPU holds about 3 memory mappings per live executable, and a module-level jitted
    function keeps every executable it ever compiled. Over the whole suite one process
    reached 48k mappings of the kernel's limit of 65,530 (vm.max_map_count); with the
    persistent compilation cache on it went past it, LLVM failed with "Cannot allocate
    memory" and the process aborted inside executable.serialize(). Clearing
    after every module made later modules compile again what earlier ones had compiled
    (the same eager operations and programs on the same shapes: 119 s of XLA compile over
    the suite), so the programs are kept until the process passes
    MAX_MEMORY_MAPPINGS or MAX_RESIDENT_BYTES (and always freed where /proc cannot tell).
    """
    yield
    in_use = memory_in_use()
    if in_use is None or in_use[0] > MAX_MEMORY_MAPPINGS or in_use[1] > MAX_RESIDENT_BYTES:
        jax.clear_caches()
        _current_test["freed"] = 1.0  # counted in the module's last test's profile record


@pytest.fixture(autouse=True)
def _strict_dtype_promotion():
    """Run every test under JAX's strict dtype promotion: mixing dtypes (int32 with a float,
    float32 with a Python float array, ...) raises instead of promoting silently, so the
    library spells out every cast. The context manager is thread-local and restores the
    option on exit, so _no_leaked_jax_config does not see it as a leak."""
    with jax.numpy_dtype_promotion("strict"):
        yield


@pytest.fixture(autouse=True)
def _no_leaked_jax_config():
    """Fail (and repair) any test that leaves a global JAX option changed."""
    before = jax_options()
    yield
    leaked = {name: (value, before[name]) for name, value in jax_options().items()
              if value != before[name]}
    for name, (_, value) in leaked.items():
        jax.config.update(name, value)
    if leaked:
        pytest.fail(f"the test changed global JAX options (now, before): {leaked}")


@pytest.fixture(scope="session")
def user_home_environment() -> dict[str, str]:
    """os.environ with the user's HOME and XDG_CACHE_HOME in place of this session's private
    ones: pip in the wheel-install test reads the user's configuration (index, certificates)
    and shares the download cache that `make test`'s own install filled."""
    environment = dict(os.environ)
    for name, value in _USER_HOME_ENVIRONMENT.items():
        if value is None:
            environment.pop(name, None)
        else:
            environment[name] = value
    return environment


@pytest.fixture
def subprocess_compile_cache(tmp_path_factory) -> dict[str, str]:
    """Environment variables that give a test's `smat` subprocesses one persistent
    compilation cache of their own (a rerun of a command loads what the first run compiled),
    or none where XLA refuses its cached programs. Subprocesses do not share the suite's
    cache: their programs differ (no strict matmul precision)."""
    if not USE_COMPILE_CACHE:
        return {}
    return {"JAX_COMPILATION_CACHE_DIR": str(tmp_path_factory.mktemp("xla-cache")),
            "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": str(MIN_CACHED_COMPILE_SECONDS)}


@pytest.fixture
def key() -> jax.Array:
    return jax.random.key(0)


POSITIVE = ["a great film", "wonderful and moving", "truly great acting", "a joy to watch",
            "great fun", "moving and wonderful story"]
NEGATIVE = ["a dull film", "boring and slow", "truly awful acting", "a waste of time",
            "dull mess", "slow and boring story"]


@pytest.fixture(scope="session")
def tiny_checkpoint(tmp_path_factory):
    """A 2-layer random BERT saved by the PyTorch class, with the MiniLM tokenizer."""
    from smat.models import minilm_path

    transformers = pytest.importorskip("transformers")
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    folder = tmp_path_factory.mktemp("tiny-bert")
    config = transformers.BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=2,
                                     num_attention_heads=4, intermediate_size=37,
                                     max_position_embeddings=64)
    transformers.BertModel(config).save_pretrained(folder, safe_serialization=True)
    for name in ("tokenizer.json", "tokenizer_config.json", "vocab.txt",
                 "special_tokens_map.json"):
        shutil.copy(minilm_path() / name, folder / name)
    return folder


@pytest.fixture(scope="session")
def csv_data(tmp_path_factory):
    rng = np.random.default_rng(0)
    rows = [(text, "pos") for text in POSITIVE] + [(text, "neg") for text in NEGATIVE]
    rows = [rows[i] for i in rng.integers(0, len(rows), size=400)]
    path = tmp_path_factory.mktemp("data") / "reviews.csv"
    path.write_text("sentence,sentiment\n" + "".join(f"{t},{y}\n" for t, y in rows))
    return path


@pytest.fixture(scope="session")
def tiny_teacher_args(tiny_checkpoint, csv_data):
    """`smat train-teacher` flags for the tiny BERT on csv_data (add --output-dir)."""
    return ["--encoder", str(tiny_checkpoint), "--source", str(csv_data), "--text-column",
            "sentence", "--label-column", "sentiment", "--max-len", "16",
            "--student-validation-size", "40", "--student-test-size", "40",
            "--learning-rate", "2e-3", "--warmup-steps", "5", "--max-epochs", "2",
            "--batch-size", "16", "--no-progress"]


@pytest.fixture(scope="session")
def tiny_teacher(tiny_teacher_args, tmp_path_factory):
    """A `smat train-teacher` run folder of the tiny BERT on csv_data (40 test sentences)."""
    from smat.cli import main

    folder = tmp_path_factory.mktemp("teacher")
    assert main(["train-teacher", *tiny_teacher_args, "--output-dir", str(folder)]) == 0
    return folder


@pytest.fixture
def eraser_dir(tmp_path):
    """A two-review ERASER-format folder (test.jsonl + docs/) with rationale spans."""
    docs = {"neg1.txt": "a dull film . boring and slow , truly awful acting",
            "pos1.txt": "a great film . wonderful and moving , truly great acting"}
    (tmp_path / "docs").mkdir()
    for docid, text in docs.items():
        (tmp_path / "docs" / docid).write_text(text)

    def record(docid, label, start, end):
        words = docs[docid].split()
        return {"annotation_id": docid, "classification": label, "query": "",
                "evidences": [[{"docid": docid, "start_token": start, "end_token": end,
                                "text": " ".join(words[start:end])}]]}

    rows = [record("neg1.txt", "NEG", 1, 2), record("pos1.txt", "POS", 4, 7)]
    (tmp_path / "test.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return tmp_path
