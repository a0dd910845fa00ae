"""The floors of docs/architecture.md: every module imports only from its own floor or the
floors below it, read from the source with `ast` (lazy imports inside functions count)."""

import argparse
import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Lowest first. A module belongs to the longest prefix listed here.
FLOORS = (
    ("smat.parallel", "smat.compile_cache", "smat.compile_time", "smat.json_files",
     "smat.markdown"),
    ("smat.data",),
    ("smat.models",),
    ("smat.explainers", "baselines"),
    ("smat.store",),
    ("smat.registry",),
    ("smat.training",),
    ("smat.evaluation",),
    ("smat.jobs",),
    ("smat.cli",),
)


def floor_of(module: str) -> int | None:
    matches = [(len(prefix), level) for level, prefixes in enumerate(FLOORS)
               for prefix in prefixes if module == prefix or module.startswith(prefix + ".")]
    return max(matches)[1] if matches else None


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(path: Path) -> set[str]:
    """Every smat / baselines module `path` imports; `from smat import x` counts as smat.x."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found |= {f"{node.module}.{alias.name}" if node.module in ("smat", "smat.jobs",
                                                                       "smat.store",
                                                                       "smat.training")
                      else node.module for alias in node.names}
    return {name for name in found if name.split(".")[0] in ("smat", "baselines")}


def sources() -> list[Path]:
    paths = sorted((ROOT / "smat").rglob("*.py")) + sorted((ROOT / "baselines").rglob("*.py"))
    return [p for p in paths if module_name(p) not in ("smat",)]  # the facade re-exports


def test_every_module_has_a_floor():
    assert [module_name(p) for p in sources() if floor_of(module_name(p)) is None] == []


def test_no_module_imports_from_a_floor_above_it():
    upward = []
    for path in sources():
        own = floor_of(module_name(path))
        for name in sorted(imported_modules(path)):
            level = floor_of(name)
            if level is not None and level > own:
                upward.append(f"{module_name(path)} (floor {own}) imports {name} "
                              f"(floor {level})")
    assert upward == []


def test_the_checker_sees_an_upward_import(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("def f():\n    from smat.jobs import demo\n    import smat.cli\n")
    assert imported_modules(bad) == {"smat.jobs.demo", "smat.cli"}
    assert floor_of("smat.jobs.demo") > floor_of("smat.evaluation.agreement")


# The jobs that evaluate a trained model: they read a run's record and never the trainer.
EVALUATIONS = ("smat.jobs.faithfulness", "smat.jobs.agreement", "smat.jobs.plausibility",
               "smat.jobs.inputs", "smat.jobs.evaluators", "smat.jobs.sanity", "smat.jobs.leakage",
               "smat.jobs.attacks", "smat.jobs.study", "smat.jobs.agreement_study",
               "smat.jobs.explain", "smat.jobs.explain_images", "smat.jobs.predict",
               "smat.jobs.annotation_page", "smat.jobs.benchmark", "smat.jobs.thesis",
               "smat.jobs.thesis_report", "smat.jobs.label_word_task")


def reached(module: str, graph: dict[str, set[str]]) -> set[str]:
    """Every module `module` imports, directly or through the modules it imports."""
    seen, todo = set(), [module]
    while todo:
        for name in graph.get(todo.pop(), ()):
            if name not in seen:
                seen.add(name)
                todo.append(name)
    return seen


def test_evaluations_never_import_the_trainer():
    """An evaluation of a trained model reads its run record (smat.store.run_record) and
    its data's protocol (smat.data.protocol), not smat.training, directly or through
    another job; the check sees such an import (checked on one)."""
    graph = {module_name(path): imported_modules(path) for path in sources()}
    training = [f"{module} reaches {name}" for module in EVALUATIONS
                for name in sorted(reached(module, graph))
                if name.startswith("smat.training")]
    assert training == []
    graph["smat.jobs.predict"] = {*graph["smat.jobs.predict"], "smat.jobs.student_run"}
    assert any(name.startswith("smat.training")
               for name in reached("smat.jobs.predict", graph))


def hand_declared(source: str, *, module: str) -> list[str]:
    """Flags and sub-commands a module of smat.cli declares by hand: `add_argument` belongs
    to smat.cli.flags (one flag per config field), `add_parser` / `add_subparsers` to
    `build_parser` (one sub-command per command-table entry); the top-level `--version` is
    the one flag of the bare `smat` command."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        name = node.func.attr
        first = node.args[0].value if node.args and isinstance(node.args[0], ast.Constant) else None
        if name == "add_argument" and module != "smat.cli.flags" and first != "--version":
            found.append(f"{module}:{node.lineno} add_argument({first!r})")
        if name in ("add_parser", "add_subparsers") and module != "smat.cli":
            found.append(f"{module}:{node.lineno} {name}")
    return found


def test_every_flag_and_command_comes_from_the_command_table():
    found = []
    for path in sorted((ROOT / "smat" / "cli").glob("*.py")):
        found += hand_declared(path.read_text(), module=module_name(path))
    assert found == []
    # the check sees a flag declared by hand (the shape of the command line before the table)
    bad = "def build(p):\n    p.add_argument('--teacher', help='a run folder')\n"
    assert hand_declared(bad, module="smat.cli.commands") == [
        "smat.cli.commands:2 add_argument('--teacher')"]
    assert hand_declared("sub.add_parser('predict')", module="smat.cli.commands") != []


def test_every_command_is_an_entry_of_the_table():
    from smat.cli import build_parser
    from smat.cli.commands import commands

    def leaves(parser, words=()):
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if not subs:
            yield " ".join(words), parser
        for action in subs:
            for name, sub in action.choices.items():
                yield from leaves(sub, (*words, name))

    parsed = dict(leaves(build_parser()))
    assert sorted(parsed) == sorted(c.name for c in commands())
    for command in commands():  # each runs its own config and nothing else
        assert parsed[command.name].get_default("command_entry") == command
