"""What a command reports when it cannot do its job: `error: <message>` on stderr with exit
code 1.

Engine errors become these in the root group (`engine.cli.PletGroup`); click's usage errors
keep their exit code 2.
"""

from __future__ import annotations

from typing import Any, NoReturn

import click


class CliError(click.ClickException):
    """An error the user can act on: `error: <message>` on stderr, exit code 1."""

    exit_code = 1

    def show(self, file: Any = None) -> None:
        click.echo(f"error: {self.format_message()}", file=file, err=file is None)


def fail(message: str) -> NoReturn:
    raise CliError(message)
