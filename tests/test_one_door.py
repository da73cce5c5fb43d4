"""One door (DESIGN.md, "Layout"): SQL and files belong to engine/storage; everything else
uses public objects.

Three static checks over the source, with `ast` (so a string or a comment that mentions a
name does not count, and an import inside a function does):

- nothing outside engine/storage imports `sqlite3` (bench/ may: raw SQLite is a benchmark
  peer);
- the frontends (web, console, spark_tasks, the CLI, the kafka facade) import nothing from
  engine.storage but the documented scan plan Spark reads volume files through;
- no code outside engine/storage reads a private attribute of another module's object
  (`cluster._cat`, `consumer._x`): an attribute whose name starts with one underscore
  may be read on `self`, `cls`, `super()`, or when the same file defines that name;
- no frontend touches a private attribute of an engine object at all, even one whose name
  the frontend's own code also uses: the engine's private names are read from the real
  classes and from live objects (a `Cluster` and its view, its catalog, job table,
  placement and schema registry, a `Producer`, a `Consumer`), so a new private field is
  covered the day it is written. The checker is proven to fail on planted files.
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
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


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__") and name not in NAMEDTUPLE_API


def private_reads(source: str, engine_names: frozenset[str] = frozenset()) -> list[tuple[int, str]]:
    """(line, expression) of each read of another object's private attribute in `source`.

    A name in `engine_names` (an engine object's private attribute) counts even when
    `source` defines that name too: a frontend's own `self._cat` does not make
    `cluster._cat` its own."""
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
        if not _private(name):
            continue
        value = node.value
        if isinstance(value, ast.Name) and value.id in ("self", "cls"):
            continue
        if isinstance(value, ast.Call) and getattr(value.func, "id", None) == "super":
            continue
        if name in own and name not in engine_names:
            continue
        found.append((node.lineno, ast.unparse(node)))
    return found


# The engine's own packages; the frontends among its folders (engine/cli, engine/kafka,
# engine/wire) are left out: their private names are theirs.
_FRONTEND_PACKAGES = tuple(f.replace("/", ".") for f in FRONTENDS if f.startswith("engine/"))


def engine_private_names(tmp_path: Path) -> frozenset[str]:
    """Every private attribute name of the engine's objects: what the classes of its modules
    define (methods, class fields, slots) and what live objects hold (the fields set in
    `__init__`, such as `Cluster._cat` and `Cluster._vols`)."""
    import engine
    from engine import Cluster, Consumer, Principal, Producer

    found: set[str] = set()
    for info in pkgutil.walk_packages(engine.__path__, "engine."):
        if info.name.startswith(_FRONTEND_PACKAGES) or info.name.endswith("__main__"):
            continue
        module = importlib.import_module(info.name)
        for value in vars(module).values():
            if isinstance(value, type) and value.__module__ == module.__name__:
                slots = getattr(value, "__slots__", ())
                slots = (slots,) if isinstance(slots, str) else slots
                found.update(n for n in [*vars(value), *slots] if _private(n))
    with Cluster.open(tmp_path / "probe") as cluster:
        producer, consumer = Producer(cluster), Consumer(cluster)
        live = [
            cluster,
            cluster.as_principal(Principal("probe")),
            cluster.catalog,
            cluster.jobs,
            cluster.placement,
            cluster.schemas,
            producer,
            consumer,
        ]
        for obj in live:
            found.update(n for n in vars(obj) if _private(n))
        consumer.close()
        producer.close()
    return frozenset(found)


def frontend_violations(engine_names: frozenset[str], root: Path = ROOT) -> list[str]:
    """Each place a frontend under `root` touches a private attribute of an engine object
    (or of any object not its own), as 'file:line: expression'."""
    found = []
    for folder in FRONTENDS:
        for path in sorted((root / folder).rglob("*.py")):
            if "__pycache__" in path.parts:
                continue
            source = path.read_text(encoding="utf-8")
            for line, expr in private_reads(source, engine_names):
                found.append(f"{path.relative_to(root)}:{line}: {expr}")
    return found


@pytest.fixture(scope="module")
def engine_names(tmp_path_factory) -> frozenset[str]:
    return engine_private_names(tmp_path_factory.mktemp("one-door"))


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


def test_no_frontend_touches_a_private_attribute_of_an_engine_object(engine_names):
    found = frontend_violations(engine_names)
    assert not found, "a frontend reaches into an engine object:\n" + "\n".join(found)


def test_the_engine_names_are_read_from_the_real_objects(engine_names):
    # the fields the issue found a text grep could not see, and a method
    assert {"_cat", "_vols", "_own_principal", "_metadata_changed"} <= engine_names
    assert "__init__" not in engine_names and "_replace" not in engine_names


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


@pytest.mark.parametrize(
    ("folder", "code"),
    [
        ("web", "def topic(cluster):\n    return cluster._cat.topic('x')\n"),
        ("console/widgets", "def volumes(app):\n    return app.cluster._vols\n"),
        ("spark_tasks", "def f(producer):\n    producer._wake.notify()\n"),
        ("engine/cli", "def f(c):\n    return c.as_principal(p)._own_principal\n"),
        # the loophole of the lenient rule: the module's own class has a field `_cat` too
        (
            "engine/wire",
            "class Mine:\n    def __init__(self, cluster):\n        self._cat = 1\n"
            "        self.n = cluster._cat.topic_count()\n",
        ),
    ],
)
def test_the_checker_fails_on_a_planted_private_access(tmp_path, engine_names, folder, code):
    (tmp_path / folder).mkdir(parents=True)
    (tmp_path / folder / "planted.py").write_text(code, encoding="utf-8")
    (tmp_path / folder / "clean.py").write_text(
        "class Own:\n    def __init__(self):\n        self._tally_of_mine = 1\n\n"
        "    def same(self, other):\n        return other._tally_of_mine + self._tally_of_mine\n",
        encoding="utf-8",
    )
    found = frontend_violations(engine_names, root=tmp_path)
    assert len(found) == 1 and found[0].startswith(str(Path(folder) / "planted.py"))
