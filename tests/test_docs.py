"""The documentation runs: every Python block of the README quick start, the tutorial and
the Flax how-to executes on a fresh install, every `smat` command they show parses, every
experiment command the docs and the drivers' docstrings show parses, and the command-line
reference page is the parser's current help."""

import argparse
import importlib
import importlib.util
import json
import re
import shlex
from pathlib import Path

import pytest

from smat.cli import build_parser

ROOT = Path(__file__).resolve().parents[1]
EXECUTED = ("README.md", "docs/tutorial.md", "docs/howto/flax.md")


def _blocks(path: Path, language: str) -> list[str]:
    return _blocks_of(path.read_text(), language)


def _blocks_of(text: str, language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", text, re.S)


@pytest.mark.parametrize("page", EXECUTED)
def test_python_blocks_run(page, tmp_path, monkeypatch, capsys):
    """The blocks of one page run in order in one namespace, in an empty folder."""
    blocks = _blocks(ROOT / page, "python")
    assert blocks, f"{page} has no Python block"
    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": "__docs__"}
    for block in blocks:
        exec(compile(block, f"{page} block", "exec"), namespace)  # noqa: S102
    capsys.readouterr()


def _commands(page: str) -> list[list[str]]:
    commands = []
    for block in _blocks(ROOT / page, "bash"):
        joined = block.replace("\\\n", " ")
        for line in joined.splitlines():
            line = line.split("#", 1)[0].strip()
            if line.startswith("smat ") and "..." not in line:  # "..." elides flags
                commands.append(shlex.split(line)[1:])
    return commands


@pytest.mark.parametrize("page", ("README.md", "docs/tutorial.md", "docs/command_line.md",
                                  "docs/which_explainer.md"))
def test_every_command_shown_parses(page):
    commands = _commands(page)
    assert commands, f"{page} shows no smat command"
    parser = build_parser()
    for argv in commands:
        if argv == ["--help"]:
            continue
        parser.parse_args(argv)  # SystemExit (a failure) on a stale flag


def test_cli_reference_page_is_current():
    spec = importlib.util.spec_from_file_location("cli_reference",
                                                  ROOT / "scripts" / "cli_reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert (ROOT / "docs" / "cli_reference.md").read_text() == module.reference(), (
        "docs/cli_reference.md is stale: python scripts/cli_reference.py > "
        "docs/cli_reference.md")


def _experiment_commands() -> list[tuple[str, str, list[str]]]:
    """Every `python experiments/NAME.py ...` command the docs and the drivers' docstrings
    show: (where, driver, argv)."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")),
             *sorted((ROOT / "experiments").glob("*.py"))]
    found = []
    for page in pages:
        if "results" in page.relative_to(ROOT).parts:
            continue
        # a docstring writes its line continuations as "\\", a page as "\"
        text = re.sub(r"\\\\?\n\s*", " ", page.read_text())
        for match in re.finditer(r"python experiments/(\w+)\.py([^`\n#]*)", text):
            found.append((page.name, match.group(1), shlex.split(match.group(2))))
    return found


class _Parsed(Exception):
    """Raised in place of running a driver, once its flags have parsed."""


def test_every_experiment_command_shown_parses(monkeypatch):
    commands = _experiment_commands()
    assert len({driver for _, driver, _ in commands}) >= 10, commands
    monkeypatch.syspath_prepend(str(ROOT / "experiments"))
    parse = argparse.ArgumentParser.parse_args

    def parse_then_stop(parser, args=None, namespace=None):
        parse(parser, args, namespace)
        raise _Parsed

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", parse_then_stop)
    stale = []
    for where, driver, argv in commands:
        try:
            importlib.import_module(driver).main(argv)
        except _Parsed:
            continue
        except SystemExit:
            stale.append(f"{where}: experiments/{driver}.py {shlex.join(argv)}")
    assert stale == []


def test_the_api_reference_renders_every_docstring_role():
    """The site's griffe extension rewrites every reST role and math directive of smat's
    and baselines' docstrings (mkdocs.yml), so the API page shows none of them raw; a
    docstring left as written would (checked on one)."""
    import griffe

    spec = importlib.util.spec_from_file_location("griffe_roles",
                                                  ROOT / "scripts" / "griffe_roles.py")
    roles = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(roles)
    raw, rendered = [], 0
    for package in ("smat", "baselines"):
        loaded = griffe.load(package, search_paths=[str(ROOT)],
                             extensions=griffe.load_extensions(roles.SphinxRoles))

        def walk(obj):
            nonlocal rendered
            if obj.is_alias:
                return
            if obj.docstring is not None:
                rendered += 1
                if roles.RAW_ROLE.search(obj.docstring.value):
                    raw.append(obj.path)
            for member in obj.members.values():
                walk(member)

        walk(loaded)
    assert rendered > 500 and not raw, raw
    written = "Scores, :math:`\\sum_h s^h` of :func:`~smat.explainers.apply`."
    assert roles.RAW_ROLE.search(written)
    assert not roles.RAW_ROLE.search(roles.markdown_of(written, str))


def test_the_images_walk_through_runs_as_written(tmp_path, monkeypatch):
    """The command-line guide's image section on 200 digits: its Python block writes the
    data and the ViT config, then every command of its shell block runs as written."""
    pytest.importorskip("sklearn")
    from smat.cli import main

    guide = (ROOT / "docs" / "command_line.md").read_text()
    section = guide[guide.index("## Images"):guide.index("## Explanations computed elsewhere")]
    (python,) = _blocks_of(section, "python")
    (shell,) = _blocks_of(section, "bash")
    monkeypatch.chdir(tmp_path)
    exec(compile(python, "command_line.md (images)", "exec"), {})
    commands = [shlex.split(line) for line in shell.replace("\\\n", " ").splitlines()
                if line.strip()]
    assert [c[:2] for c in commands] == [["smat", "train-teacher"], ["smat", "train-teacher"],
                                         ["smat", "train-student"], ["smat", "explain"]]
    for command in commands:
        assert main([*command[1:], "--no-progress"]) == 0, command
    records = json.loads((tmp_path / "runs" / "vit_explain" / "explanations.json").read_text())
    assert len(records) == 200 and len(records[0]["scores"]) == 4
    assert all(len(scores) == 16 for scores in records[0]["scores"].values())  # 4 x 4 patches
    assert (tmp_path / "runs" / "vit" / "students" / "n20" / "smat" / "seed1" / "explainer"
            ).is_dir()


def test_every_design_reference_names_a_section_of_the_design_page():
    """Docstrings cite the project's own contracts as "design §N"; each N must be a section
    of docs/design.md, and nothing cites a design document the project does not ship."""
    sections = set(re.findall(r"^## (\d+)\. ", (ROOT / "docs" / "design.md").read_text(),
                              re.M))
    cited, outside = {}, []
    for path in [*ROOT.glob("smat/**/*.py"), *ROOT.glob("baselines/**/*.py"),
                 *ROOT.glob("experiments/*.py"), *ROOT.glob("benchmarks/*.py"),
                 *ROOT.glob("scripts/*.py"), *ROOT.glob("tests/*.py"), ROOT / "Makefile",
                 *ROOT.glob("smat/**/*.md")]:
        text = path.read_text()
        for number in re.findall(r"design §(\d+)", text):
            cited.setdefault(number, []).append(path.name)
        if re.search(r"DESIGN(?:\.md)? ?§?\d", text):
            outside.append(path.name)
    assert cited and set(cited) <= sections, {n: cited[n] for n in set(cited) - sections}
    assert not outside, outside


def test_every_marked_table_equals_the_one_its_results_give():
    """Tables between <!-- table: NAME --> markers are made from committed result files
    (scripts/docs_tables.py); a page whose copy drifted from its results fails, and a
    changed copy is caught (checked on one)."""
    spec = importlib.util.spec_from_file_location("docs_tables",
                                                  ROOT / "scripts" / "docs_tables.py")
    tables = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tables)
    marked = [(page, name, body) for page in tables.PAGES
              for name, body in tables.marked_tables(page)]
    assert {name for _, name, _ in marked} == set(tables.TABLES)  # each table is shown
    for page, name, body in marked:
        assert body == tables.TABLES[name](), f"{page.name}: table {name}"
    _, name, body = marked[0]
    assert body.replace("|", "| ", 1) != tables.TABLES[name]()


def test_user_docs_say_nothing_of_the_workshop():
    """README, the docs (the result tables included; CHANGELOG aside) and the code's
    docstrings name no folder a user does not have and no issue of the project's tracker;
    the pages speak of runs, not of the sessions they were made in."""
    pages = [ROOT / "README.md", *(ROOT / "docs").rglob("*.md")]
    code = [p for folder in ("smat", "baselines", "experiments", "benchmarks", "scripts")
            for p in (ROOT / folder).rglob("*.py")]
    found = [f"{path.relative_to(ROOT)}: {match.group(0)}" for path in [*pages, *code]
             for match in re.finditer(r"\.\./shared|\bissues? #?\d+", path.read_text(),
                                      re.IGNORECASE)]
    found += [f"{path.relative_to(ROOT)}: {match.group(0)}" for path in pages
              for match in re.finditer(r"\bsessions?\b", path.read_text(), re.IGNORECASE)]
    assert not found, found
    assert re.search(r"\bissue #?\d+", "as issue 33 asked", re.IGNORECASE)  # the check bites


def test_the_benchmark_summary_gives_each_committed_ratio():
    """Each row of docs/benchmarks.md's summary whose benchmark records a ratio
    (benchmarks/results/<name>.json) shows that ratio first, in bold."""
    page = (ROOT / "docs" / "benchmarks.md").read_text()
    rows = re.findall(r"^\| `(\w+)\.py` \|[^|]*\| \*\*([\d.]+)x\*\*", page, re.MULTILINE)
    checked = 0
    for name, shown in rows:
        path = ROOT / "benchmarks" / "results" / f"{name}.json"
        ratio = json.loads(path.read_text()).get("ratio") if path.is_file() else None
        if ratio is not None:
            assert shown == f"{ratio:.2f}", f"{name}: the summary shows {shown}x, " \
                                            f"{path.name} {ratio:.2f}x"
            checked += 1
    assert checked >= 7, rows
