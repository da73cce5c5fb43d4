"""One door (DESIGN.md, "Layout"): SQL and files belong to engine/storage; everything else
uses public objects.

Three static checks over the source, with `ast` (so a string or a comment that mentions a
name does not count, and an import inside a function does):

- nothing outside engine/storage imports `sqlite3` (bench/ may: raw SQLite is a benchmark
  peer);
- the frontends (web, console, spark_tasks, the CLI, the kafka facade) import nothing from
  engine.storage but the documented scan plan Spark reads volume files through;
- no code outside engine/storage reads a private attribute of another module's object
  (`cluster._catalog`, `consumer._x`): an attribute whose name starts with one underscore
  may be read on `self`, `cls`, `super()`, or when the same file defines that name.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.test_layout import ROOT, imported_modules, module_name

CODE = ("engine", "web", "console", "spark_tasks")
STORAGE = ROOT / "engine" / "storage"
FRONTENDS = ("web", "console", "spark_tasks", "engine/cli", "engine/kafka", "engine/wire")
# what a frontend may import from the storage layer: the scan plan of docs/SPARK.md
STORAGE_FOR_FRONTENDS = frozenset({"engine.storage.scan"})
# namedtuple's public API has leading underscores so it cannot clash with field names
NAMEDTUPLE_API = frozenset({"_replace", "_asdict", "_fields", "_make", "_field_defaults"})


def _files(*folders: str) -> list[Path]:
    found = []
    for folder in folders:
        found += [p for p in sorted((ROOT / folder).rglob("*.py")) if "__pycache__" not in p.parts]
    return found


def _outside_storage(*folders: str) -> list[Path]:
    return [p for p in _files(*folders) if STORAGE not in p.parents]


def _imports(path: Path):
    current, is_package = module_name(path, ROOT)
    return imported_modules(path.read_text(encoding="utf-8"), current, is_package)


def private_reads(source: str) -> list[tuple[int, str]]:
    """(line, expression) of each read of another object's private attribute in `source`."""
    tree = ast.parse(source)
    own: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            own.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            own.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            own.add(node.attr)  # self._x = ...: a name of this module's own classes
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            own.add(node.target.id)
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute):
            continue
        name = node.attr
        if not name.startswith("_") or name.startswith("__") or name in NAMEDTUPLE_API:
            continue
        value = node.value
        if isinstance(value, ast.Name) and value.id in ("self", "cls"):
            continue
        if isinstance(value, ast.Call) and getattr(value.func, "id", None) == "super":
            continue
        if name in own:
            continue
        found.append((node.lineno, ast.unparse(node)))
    return found


def test_only_the_storage_layer_imports_sqlite3():
    found = [
        f"{path.relative_to(ROOT)}:{line}"
        for path in _outside_storage(*CODE)
        for line, name in _imports(path)
        if name.split(".")[0] == "sqlite3"
    ]
    assert not found, "sqlite3 outside engine/storage:\n" + "\n".join(found)


def test_frontends_use_no_storage_module_but_the_scan_plan():
    found = [
        f"{path.relative_to(ROOT)}:{line}: {name}"
        for path in _files(*FRONTENDS)
        for line, name in _imports(path)
        if name.startswith("engine.storage")
        and name != "engine.storage"
        and not any(name == ok or name.startswith(ok + ".") for ok in STORAGE_FOR_FRONTENDS)
    ]
    assert not found, "a frontend imports the storage layer:\n" + "\n".join(found)


def test_no_private_attribute_of_another_module_is_read():
    found = [
        f"{path.relative_to(ROOT)}:{line}: {expr}"
        for path in _outside_storage(*CODE)
        for line, expr in private_reads(path.read_text(encoding="utf-8"))
    ]
    assert not found, "private attributes read from outside:\n" + "\n".join(found)


def test_no_catalog_or_volume_field_is_reached_outside_storage():
    # The plain text check the issue names: `grep` for these finds nothing outside storage.
    found = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in _outside_storage(*CODE)
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if any(f"._{field}" in line for field in ("catalog", "volume", "authorize"))
        and not line.lstrip().startswith("#")
    ]
    assert not found, "\n".join(found)


# ------------------------------------------------------------------ the checker itself


@pytest.mark.parametrize(
    "snippet",
    [
        "cluster._catalog.topic('x')",
        "def f(c):\n    return c._volume(1)",
        "import x\nx._private",
    ],
)
def test_checker_flags_a_private_read(snippet):
    assert private_reads(snippet)


@pytest.mark.parametrize(
    "snippet",
    [
        "self._x",
        "cls._y",
        "super()._on_idle()",
        "record._replace(offset=1)",
        "class A:\n    def f(self, other):\n        self._n = 1\n        return other._n",
    ],
)
def test_checker_accepts_own_and_public_reads(snippet):
    assert not private_reads(snippet)
