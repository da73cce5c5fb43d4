"""A pytest plugin (`-p tests.pure_python`): the Python files Cython compiles
(engine/client/accumulator.py, engine/client/partitioner.py; setup.py) imported as the
Python they are, in place of the modules built from them: what a checkout runs before
`pip install -e .`. The run's header says so, for the test that starts such a run to check
(tests/engine/client/test_accumulator.py)."""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
from pathlib import Path
from typing import Any

ENGINE = Path(__file__).resolve().parents[1] / "engine"
SOURCES = {
    "engine.client.accumulator": ENGINE / "client" / "accumulator.py",
    "engine.client.partitioner": ENGINE / "client" / "partitioner.py",
}


class _Source(importlib.abc.MetaPathFinder):
    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        source = SOURCES.get(name)
        return None if source is None else importlib.util.spec_from_file_location(name, source)


assert not set(SOURCES) & set(sys.modules), "the plugin must load before the engine"
sys.meta_path.insert(0, _Source())


def pytest_report_header(config: Any) -> str:
    for name, source in SOURCES.items():
        module = importlib.import_module(name)
        assert module.__file__ == str(source), module.__file__
    return "compiled modules: their Python sources, not compiled"
