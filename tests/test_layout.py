"""The direction of imports between the top-level packages (DESIGN.md, "Layout").

- `engine` imports none of `console`, `web`, `spark_tasks`, nor a UI, web or Spark
  library (textual, flask, htmx_flask, pyspark), ever.
- `web` and `console` may call `spark_tasks`' job API but never import pyspark themselves
  (a Spark job runs in its own process); each talks to engine (and spark_tasks), not to
  the other console.
- `spark_tasks` talks to engine, never to a console.

Two checks: a static one that reads every .py file with `ast` (any import statement,
wherever it stands: module level, inside a function, under TYPE_CHECKING, relative, or
through importlib.import_module / __import__ with a literal name), and a dynamic one that
imports every module of a package in a fresh interpreter and looks at `sys.modules`, which
also catches an import that goes through a third module.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.timing import scaled

ROOT = Path(__file__).resolve().parents[1]

# package -> top-level modules it must never import
FORBIDDEN: dict[str, frozenset[str]] = {
    "engine": frozenset(
        {"console", "web", "spark_tasks", "textual", "flask", "htmx_flask", "pyspark"}
    ),
    "web": frozenset({"pyspark", "console", "textual"}),
    "console": frozenset({"pyspark", "web", "flask", "htmx_flask"}),
    "spark_tasks": frozenset({"console", "web", "textual", "flask", "htmx_flask"}),
}

_DYNAMIC_IMPORTERS = {"import_module", "__import__"}


def module_name(path: Path, root: Path) -> tuple[str, bool]:
    """The dotted name of the module in `path` under `root`, and whether it is a package."""
    rel = path.relative_to(root).with_suffix("")
    parts = list(rel.parts)
    is_package = parts[-1] == "__init__"
    if is_package:
        parts = parts[:-1]
    return ".".join(parts), is_package


def _resolve(module: str | None, level: int, current: str, is_package: bool) -> str:
    """The absolute name of `from <level dots><module> import ...` written in `current`."""
    if level == 0:
        return module or ""
    package = current.split(".") if is_package else current.split(".")[:-1]
    base = package[: len(package) - (level - 1)] if level > 1 else package
    return ".".join([*base, module] if module else base)


def imported_modules(source: str, current: str = "", is_package: bool = False):
    """Yield (line, absolute dotted name) for everything `source` imports.

    `from a import b` yields both `a` and `a.b`, since `b` may be a module.
    """
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(node.module, node.level, current, is_package)
            if base:
                yield node.lineno, base
            for alias in node.names:
                if alias.name != "*":
                    yield node.lineno, f"{base}.{alias.name}" if base else alias.name
        elif isinstance(node, ast.Call):
            func = node.func
            name = (
                func.attr
                if isinstance(func, ast.Attribute)
                else func.id
                if isinstance(func, ast.Name)
                else None
            )
            if (
                name in _DYNAMIC_IMPORTERS
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str)
            ):
                yield node.lineno, node.args[0].value


def forbidden_imports(
    source: str, forbidden: frozenset[str], current: str = "", is_package: bool = False
) -> list[tuple[int, str]]:
    """(line, name) of each import in `source` whose top-level module is in `forbidden`."""
    found = []
    for line, name in imported_modules(source, current, is_package):
        if name.split(".")[0] in forbidden and (line, name) not in found:
            found.append((line, name))
    return found


def violations(package: str, root: Path = ROOT) -> list[str]:
    """Every forbidden import in the .py files of `package` under `root`, as 'file:line: name'."""
    forbidden = FORBIDDEN[package]
    found = []
    for path in sorted((root / package).rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        current, is_package = module_name(path, root)
        source = path.read_text(encoding="utf-8")
        for line, name in forbidden_imports(source, forbidden, current, is_package):
            found.append(f"{path.relative_to(root)}:{line}: imports {name}")
    return found


# ------------------------------------------------------------------ the project itself


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_package_imports_follow_the_design(package):
    found = violations(package)
    assert not found, (
        f"{package} must not import {sorted(FORBIDDEN[package])} (DESIGN.md, Layout):\n"
        + "\n".join(found)
    )


_PROBE = textwrap.dedent(
    """
    import importlib, json, pkgutil, sys
    package, forbidden = sys.argv[1], set(json.loads(sys.argv[2]))
    root = importlib.import_module(package)
    names = [package]
    for info in pkgutil.walk_packages(root.__path__, package + "."):
        if info.name.rsplit(".", 1)[-1] != "__main__":  # would run a program
            names.append(info.name)
    for name in names:
        importlib.import_module(name)
    loaded = sorted(m for m in sys.modules if m.split(".")[0] in forbidden)
    print(json.dumps({"modules": names, "loaded": loaded}))
    """
)


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_importing_a_package_loads_nothing_forbidden(package):
    forbidden = sorted(FORBIDDEN[package])
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, package, json.dumps(forbidden)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=scaled(120),
    )
    assert done.returncode == 0, f"importing {package}'s modules failed:\n{done.stderr}"
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert not result["loaded"], (
        f"importing {package} ({len(result['modules'])} modules) loaded {result['loaded']}, "
        f"which it must not import, directly or through another module"
    )


# ------------------------------------------------------------------ the checker can fail

ENGINE = FORBIDDEN["engine"]


@pytest.mark.parametrize(
    "snippet",
    [
        "import flask",
        "import os, pyspark.sql",
        "from pyspark.sql import SparkSession",
        "from textual.app import App",
        "import web.app as w",
        "from console import app",
        "from spark_tasks.jobs import submit",
        "def launch():\n    from web import create_app\n    return create_app()",
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import pyspark",
        "import importlib\nmod = importlib.import_module('web')",
        "from importlib import import_module\nimport_module('textual.widgets')",
        "spark = __import__('pyspark')",
        "try:\n    import htmx_flask\nexcept ImportError:\n    pass",
    ],
)
def test_checker_flags_a_forbidden_import(snippet):
    assert forbidden_imports(snippet, ENGINE, current="engine.cluster")


def test_checker_resolves_relative_imports():
    # `from .. import web` in engine/cluster.py is the top-level `web`
    assert forbidden_imports("from .. import web", ENGINE, "engine.cluster") == [(1, "web")]
    assert forbidden_imports("from ..console.app import X", ENGINE, "engine.cluster")
    # ... and in engine/__init__.py, one dot is engine itself
    assert forbidden_imports("from .. import web", ENGINE, "engine", is_package=True)
    # `from . import web` in engine/cluster.py is engine.web, a module of the engine
    assert forbidden_imports("from . import web", ENGINE, "engine.cluster") == []


@pytest.mark.parametrize(
    "snippet",
    [
        "import sqlite3, threading",
        "from engine import errors",
        "from engine.records import TopicPartition",
        "from .names import parse_topic",
        "import webbrowser",  # a prefix of a forbidden name is not that name
        "import flaskish",
        "name = 'flask'  # a string is not an import",
        "from __future__ import annotations",
    ],
)
def test_checker_accepts_allowed_imports(snippet):
    assert forbidden_imports(snippet, ENGINE, current="engine.cluster") == []


def test_violations_reports_file_and_line(tmp_path):
    package = tmp_path / "engine"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "ok.py").write_text("import sqlite3\n")
    (package / "sub" / "__init__.py").write_text("")
    (package / "sub" / "bad.py").write_text("import json\n\nfrom ... import console\n")
    assert violations("engine", root=tmp_path) == [
        f"{Path('engine/sub/bad.py')}:3: imports console"
    ]


def test_no_symlink_is_committed():
    # A worktree's link to the shared virtualenv or node_modules, once committed, replaces
    # the real folder in every checkout it is merged into (git deletes ignored files).
    listed = subprocess.run(
        ["git", "-C", str(ROOT), "ls-files", "-s"], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert listed  # a checkout, with files
    links = [line.split("\t", 1)[1] for line in listed if line.startswith("120000 ")]
    assert links == []
