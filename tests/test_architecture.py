"""The floors of docs/architecture.md: every module imports only from its own floor or the
floors below it, read from the source with `ast` (lazy imports inside functions count)."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Lowest first. A module belongs to the longest prefix listed here.
FLOORS = (
    ("smat.parallel", "smat.compile_cache"),
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
