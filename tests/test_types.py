"""Every `# type: ignore` says what it silences and why: an error code (mypy checks that
too, `ignore-without-code`) and a reason after it, as `# type: ignore[code]  # reason`.
mypy itself runs in `make lint` ([tool.mypy] in pyproject.toml)."""

from __future__ import annotations

import io
import re
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("engine", "console", "web", "spark_tasks", "bench", "tests")

_IGNORE = re.compile(r"type:\s*ignore")
_WELL_FORMED = re.compile(r"type: ignore\[[a-z-]+(?:, *[a-z-]+)*\]\s+#\s*\S.*")


def bad_ignores(source: str) -> list[int]:
    """Lines of `source` with a `# type: ignore` comment lacking a code or a reason."""
    bad = []
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type != tokenize.COMMENT:
            continue
        found = _IGNORE.search(token.string)
        if found and not _WELL_FORMED.fullmatch(token.string, found.start()):
            bad.append(token.start[0])
    return bad


def test_every_type_ignore_has_a_code_and_a_reason():
    offenders = [
        f"{path.relative_to(ROOT)}:{line}"
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
        for line in bad_ignores(path.read_text(encoding="utf-8"))
    ]
    assert offenders == [], "write `# type: ignore[code]  # reason` at:\n" + "\n".join(offenders)


@pytest.mark.parametrize(
    "line",
    [
        "x = f()  # type: ignore\n",
        "x = f()  # type: ignore[arg-type]\n",
        "x = f()  # type: ignore[arg-type]  #\n",
        "x = f()  # type:ignore[arg-type]  # no space after the colon\n",
        "x = f()  # noqa: E501  # type: ignore\n",
    ],
)
def test_checker_flags_an_ignore_without_code_or_reason(line):
    assert bad_ignores(line) == [1]


@pytest.mark.parametrize(
    "line",
    [
        "x = f()  # type: ignore[arg-type]  # the stub says int, the codec takes None\n",
        "x = f()  # type: ignore[attr-defined, union-attr]  # set by the metaclass\n",
        "x = '# type: ignore'  # a string, not a comment\n",
    ],
)
def test_checker_accepts_an_ignore_with_code_and_reason(line):
    assert bad_ignores(line) == []


def test_make_lint_runs_mypy():
    lint = (ROOT / "Makefile").read_text().split("\nlint:", 1)[1].split("\n\n", 1)[0]
    assert "$(BIN)/mypy" in lint
