"""The list of case providers, in the order they run, and one whole benchmark run.

To add a case: write a function `(ctx: Context) -> Measurement` in the module of its system,
wrap it in a `Case` from that module's provider, and list the provider here if it is new.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from bench import engine_cases, peers, report
from bench.cases import Case, Context, Result, Settings, collect_cases, run_cases

Provider = Callable[[Context], Iterable[Case]]

PROVIDERS: tuple[Provider, ...] = (
    engine_cases.cases,
    peers.sqlite_cases,
    peers.redis_cases,
)


@dataclass
class Run:
    """What one benchmark run produced."""

    settings: Settings
    machine: dict[str, str]
    results: list[Result] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def outcomes(self) -> list[report.TargetOutcome]:
        outcomes = report.evaluate_targets(self.results)
        if self.settings.smoke:  # a few thousand messages say nothing of a rate
            return [
                dataclasses.replace(o, actual=f"{o.actual} (--quick: not judged)", met=None)
                for o in outcomes
            ]
        return outcomes

    @property
    def failed(self) -> list[Result]:
        return [r for r in self.results if r.error]

    def text(self) -> str:
        return report.format_text(self.machine, self.results, self.outcomes, self.notes)

    def markdown(self) -> str:
        return report.format_markdown(self.machine, self.results, self.outcomes, self.notes)

    def to_json(self) -> dict[str, Any]:
        return report.to_json(
            self.machine, self.results, self.outcomes, self.notes, self.settings.to_dict()
        )


def run_benchmark(
    settings: Settings,
    providers: Sequence[Provider] = PROVIDERS,
    progress: Callable[[Case, Result | None], None] | None = None,
) -> Run:
    """Collect the cases, run them in order, close every resource, return the results."""
    settings.workdir.mkdir(parents=True, exist_ok=True)
    run = Run(settings, report.machine_info(settings.workdir))
    with contextlib.ExitStack() as stack:
        ctx = Context(settings, stack)
        cases = collect_cases(ctx, providers)
        run.results = run_cases(ctx, cases, progress)
        run.notes = ctx.notes
        mount = report.mount_of(settings.workdir)
        if mount and mount[2] in ("tmpfs", "ramfs"):
            ctx.note(
                f"The work directory is on {mount[2]}: fsync costs nothing there; "
                "use --dir on a real disk to measure durability."
            )
    return run
