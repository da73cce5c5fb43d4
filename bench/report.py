"""What the benchmark prints: the machine, the results with ratios to the peers, the targets.

Ratios divide Partitionlet's msg/s by its comparable peer's msg/s: same operation, same value
size, and for produce the same durability (acks=0 and acks=1 against WAL `synchronous=NORMAL`
and Redis AOF `everysec`; acks="all" against `synchronous=FULL` only, as the Redis peer makes
no fsync-per-write promise).
"""

from __future__ import annotations

import os
import platform
import sqlite3
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.cases import MACHINE, Result, format_size
from engine.units import format_bytes

PARTITIONLET = "partitionlet"
PEERS = ("redis", "sqlite")
DASH = "—"

# --------------------------------------------------------------------------- the machine


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def cpu_model(cpuinfo: str | None = None) -> str:
    """The CPU's model name from /proc/cpuinfo (falls back to `platform`)."""
    text = _read("/proc/cpuinfo") if cpuinfo is None else cpuinfo
    for key in ("model name", "Model", "Hardware", "cpu model", "Processor"):
        for line in text.splitlines():
            name, _, value = line.partition(":")
            if name.strip() == key and value.strip():
                return value.strip()
    return platform.processor() or platform.machine() or "unknown"


def physical_cores(cpuinfo: str | None = None) -> int | None:
    """Distinct (physical id, core id) pairs in /proc/cpuinfo, or None if it does not say."""
    text = _read("/proc/cpuinfo") if cpuinfo is None else cpuinfo
    cores, physical = set(), "0"
    for line in text.splitlines():
        name, _, value = line.partition(":")
        name = name.strip()
        if name == "physical id":
            physical = value.strip()
        elif name == "core id":
            cores.add((physical, value.strip()))
    return len(cores) or None


def memory_bytes(meminfo: str | None = None) -> int | None:
    text = _read("/proc/meminfo") if meminfo is None else meminfo
    for line in text.splitlines():
        if line.startswith("MemTotal:"):
            parts = line.split()
            return int(parts[1]) * 1024 if parts[2:3] == ["kB"] else int(parts[1])
    return None


def _unescape_mount(field: str) -> str:
    return (
        field.replace("\\040", " ")
        .replace("\\011", "\t")
        .replace("\\012", "\n")
        .replace("\\134", "\\")
    )


def mount_of(path: Path | str, mounts: str | None = None) -> tuple[str, str, str] | None:
    """(device, mount point, file system type) of the mount holding `path`, from /proc/mounts."""
    text = _read("/proc/mounts") if mounts is None else mounts
    target = os.path.realpath(path)
    best: tuple[str, str, str] | None = None
    for line in text.splitlines():
        fields = line.split()
        if len(fields) < 3:
            continue
        device, point, fstype = _unescape_mount(fields[0]), _unescape_mount(fields[1]), fields[2]
        inside = target == point or target.startswith(point.rstrip("/") + "/") or point == "/"
        if inside and (best is None or len(point) >= len(best[1])):
            best = (device, point, fstype)
    return best


def _block_facts(device: str) -> list[str]:
    """'SSD' / 'rotational', and the model, of a /dev block device, when sysfs says."""
    name = os.path.basename(os.path.realpath(device)) if device.startswith("/dev/") else ""
    if not name or not os.path.exists(f"/sys/class/block/{name}"):
        return []
    base = os.path.realpath(f"/sys/class/block/{name}")
    if os.path.exists(os.path.join(base, "partition")):
        base = os.path.dirname(base)
    facts = []
    rotational = _read(os.path.join(base, "queue", "rotational")).strip()
    if rotational in ("0", "1"):
        facts.append("rotational" if rotational == "1" else "non-rotational (SSD/virtual)")
    model = _read(os.path.join(base, "device", "model")).strip()
    if model:
        facts.append(model)
    return facts


def describe_disk(path: Path | str) -> str:
    """One line about the disk holding `path`: device, file system, kind, size, free space."""
    path = Path(path)
    probe = path
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    parts = []
    mount = mount_of(probe)
    if mount:
        device, point, fstype = mount
        parts.append(f"{device} ({fstype} on {point})")
        parts.extend(_block_facts(device))
    try:
        st = os.statvfs(probe)
        parts.append(
            f"{format_bytes(st.f_blocks * st.f_frsize)} total, "
            f"{format_bytes(st.f_bavail * st.f_frsize)} free"
        )
    except OSError:
        pass
    return ", ".join(parts) or "unknown"


def machine_info(workdir: Path | str | None = None) -> dict[str, str]:
    """The machine the numbers came from, as label -> text, in print order."""
    info: dict[str, str] = {"cpu": cpu_model()}
    logical = os.cpu_count() or 0
    physical = physical_cores()
    cores = f"{logical} logical"
    if physical:
        cores += f", {physical} physical"
    if hasattr(os, "sched_getaffinity"):
        usable = len(os.sched_getaffinity(0))
        if usable != logical:
            cores += f", {usable} usable by this process"
    info["cores"] = cores
    memory = memory_bytes()
    info["memory"] = format_bytes(memory) if memory else "unknown"
    info["os"] = platform.platform()
    info["python"] = f"{platform.python_implementation()} {platform.python_version()}"
    info["sqlite"] = sqlite3.sqlite_version
    from bench.peers import redis_server_version

    info["redis-server"] = redis_server_version() or "not installed"
    try:
        import redis

        try:
            import hiredis  # noqa: F401

            parser = "hiredis parser"
        except ImportError:
            parser = "pure-Python parser"
        info["redis-py"] = f"{redis.__version__} ({parser})"
    except ImportError:
        info["redis-py"] = "not installed"
    if workdir is not None:
        info["disk"] = describe_disk(workdir)
        info["workdir"] = str(workdir)
    return info


# --------------------------------------------------------------------------- ratios


def ratio(value: float | None, peer: float | None) -> float | None:
    """value / peer, or None when either is missing or the peer is zero."""
    if value is None or peer is None or peer <= 0:
        return None
    return value / peer


def format_ratio(value: float | None) -> str:
    """4.2049 -> '4.20x', 0.0312 -> '0.031x', None -> '—'."""
    if value is None:
        return DASH
    if value < 0.1:
        return f"{value:.3f}x"
    return f"{value:.2f}x"


def format_rate(value: float) -> str:
    return f"{value:,.0f}"


def format_mb(value: float) -> str:
    return f"{value:,.1f}"


def peer_of(result: Result, peer_system: str, results: Iterable[Result]) -> Result | None:
    """The comparable successful result of `peer_system`, or None.

    Same operation and value size; for produce the same durability class, where acks=0
    (no promise) is compared with the peers' everyday setting (survives a process crash).
    """
    want = None
    if result.op == "produce":
        want = MACHINE if result.durability == MACHINE else "process"
    for other in results:
        if other.system != peer_system or other.op != result.op or other.size != result.size:
            continue
        if not other.ok or (want is not None and other.durability != want):
            continue
        return other
    return None


def ratios(result: Result, results: Sequence[Result]) -> dict[str, float | None]:
    """{peer system: Partitionlet msg/s ÷ peer msg/s} for a Partitionlet result, else {}."""
    if result.system != PARTITIONLET:
        return {}
    out: dict[str, float | None] = {}
    for peer in PEERS:
        other = peer_of(result, peer, results)
        out[peer] = ratio(result.msg_per_s, other.msg_per_s) if result.ok and other else None
    return out


# --------------------------------------------------------------------------- targets


@dataclass(frozen=True)
class Target:
    """A goal from the issue: a Partitionlet result's msg/s, or its ratio to a peer."""

    label: str
    select: Callable[[Result], bool]
    minimum: float
    peer: str | None = None  # None: compare msg/s; else the ratio to this peer

    def evaluate(self, results: Sequence[Result]) -> TargetOutcome:
        chosen = next((r for r in results if r.system == PARTITIONLET and self.select(r)), None)
        required = (
            f">= {format_ratio(self.minimum)} {self.peer}"
            if self.peer
            else f">= {format_rate(self.minimum)} msg/s"
        )
        if chosen is None:
            return TargetOutcome(self.label, required, "not measured", None)
        if not chosen.ok:
            return TargetOutcome(self.label, required, f"failed: {chosen.error}", False)
        if self.peer is None:
            actual = chosen.msg_per_s
            return TargetOutcome(
                self.label, required, f"{format_rate(actual)} msg/s", actual >= self.minimum
            )
        value = ratios(chosen, results).get(self.peer)
        if value is None:
            return TargetOutcome(self.label, required, f"no {self.peer} result", None)
        return TargetOutcome(
            self.label, required, f"{format_ratio(value)} {self.peer}", value >= self.minimum
        )


@dataclass(frozen=True)
class TargetOutcome:
    label: str
    required: str
    actual: str
    met: bool | None  # None: could not be judged in this run

    @property
    def verdict(self) -> str:
        return {True: "met", False: "NOT MET", None: "n/a"}[self.met]

    def to_dict(self) -> dict[str, Any]:
        return {
            "target": self.label,
            "required": self.required,
            "actual": self.actual,
            "met": self.met,
        }


def _produce(size: int, acks: int | str) -> Callable[[Result], bool]:
    return lambda r: r.op == "produce" and r.size == size and r.params.get("acks") == acks


def _consume(size: int) -> Callable[[Result], bool]:
    return lambda r: r.op == "consume" and r.size == size


TARGETS: tuple[Target, ...] = (
    Target("produce 100 B, acks=1", _produce(100, 1), 500_000),
    Target("consume 100 B", _consume(100), 1_000_000),
    Target("produce 100 B, acks=1 vs Redis Streams", _produce(100, 1), 4.0, peer="redis"),
    Target("consume 100 B vs Redis Streams", _consume(100), 7.0, peer="redis"),
    Target("produce 100 B, acks=all, linger_ms=5", _produce(100, "all"), 100_000),
)


def evaluate_targets(
    results: Sequence[Result], targets: Sequence[Target] = TARGETS
) -> list[TargetOutcome]:
    return [target.evaluate(results) for target in targets]


# --------------------------------------------------------------------------- tables

HEADERS = ("case", "messages", "seconds", "msg/s", "MB/s", "÷ redis", "÷ sqlite")
RIGHT = (False, True, True, True, True, True, True)


def rows(results: Sequence[Result]) -> list[tuple[str, ...]]:
    """One row of text cells per result, in HEADERS order."""
    out = []
    for result in results:
        found = ratios(result, results)
        if result.ok:
            cells = (
                f"{result.messages:,}",
                f"{result.seconds:.3f}",
                format_rate(result.msg_per_s),
                format_mb(result.mb_per_s),
            )
        else:
            cells = (f"{result.messages:,}", f"{result.seconds:.3f}", "error", DASH)
        peer_cells = tuple(format_ratio(found[p]) if found else "" for p in PEERS)
        out.append((result.name, *cells, *peer_cells))
    return out


def _table(headers: Sequence[str], body: Sequence[Sequence[str]], right: Sequence[bool]) -> str:
    widths = [max(len(str(row[i])) for row in [headers, *body]) for i in range(len(headers))]

    def line(row: Sequence[str]) -> str:
        cells = [
            str(c).rjust(w) if r else str(c).ljust(w)
            for c, w, r in zip(row, widths, right, strict=True)
        ]
        return "  ".join(cells).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([line(headers), rule, *(line(row) for row in body)])


def _md_table(headers: Sequence[str], body: Sequence[Sequence[str]], right: Sequence[bool]) -> str:
    def esc(cell: str) -> str:
        return str(cell).replace("|", "\\|")

    lines = [
        "| " + " | ".join(esc(h) for h in headers) + " |",
        "| " + " | ".join("---:" if r else "---" for r in right) + " |",
    ]
    lines += ["| " + " | ".join(esc(c) for c in row) + " |" for row in body]
    return "\n".join(lines)


def _errors(results: Sequence[Result]) -> list[str]:
    return [f"{r.name}: {r.error}" for r in results if r.error]


def _target_rows(outcomes: Sequence[TargetOutcome]) -> list[tuple[str, str, str, str]]:
    return [(o.label, o.required, o.actual, o.verdict) for o in outcomes]


def format_text(
    machine: dict[str, str],
    results: Sequence[Result],
    outcomes: Sequence[TargetOutcome],
    notes: Sequence[str] = (),
) -> str:
    """The plain-text report: machine, results table, errors, notes and targets."""
    width = max((len(k) for k in machine), default=0)
    parts = ["Machine", *(f"  {k.ljust(width)}  {v}" for k, v in machine.items()), ""]
    if results:
        parts += [_table(HEADERS, rows(results), RIGHT), ""]
    else:
        parts += ["No results.", ""]
    parts.append(
        "MB/s counts message values in 10^6 bytes. Ratios: Partitionlet msg/s ÷ peer "
        "msg/s (acks=0/1 vs WAL NORMAL and AOF everysec; acks=all vs synchronous=FULL)."
    )
    errors = _errors(results)
    if errors:
        parts += ["", "Errors:", *(f"  {e}" for e in errors)]
    if notes:
        parts += ["", "Notes:", *(f"  {n}" for n in notes)]
    if outcomes:
        parts += [
            "",
            "Targets (one process):",
            _table(
                ("target", "required", "actual", "verdict"),
                _target_rows(outcomes),
                (False, False, True, False),
            ),
        ]
    return "\n".join(parts) + "\n"


def format_markdown(
    machine: dict[str, str],
    results: Sequence[Result],
    outcomes: Sequence[TargetOutcome],
    notes: Sequence[str] = (),
) -> str:
    """The same report in Markdown, for docs/BENCHMARKS.md."""
    parts = ["**Machine**", "", *(f"- {k}: {v}" for k, v in machine.items() if k != "workdir"), ""]
    if results:
        parts += [_md_table(HEADERS, rows(results), RIGHT), ""]
    parts.append(
        "MB/s counts message values in 10^6 bytes. Ratios: Partitionlet msg/s ÷ peer "
        "msg/s (acks=0/1 vs WAL `synchronous=NORMAL` and AOF `everysec`; acks=all vs "
        "`synchronous=FULL`)."
    )
    errors = _errors(results)
    if errors:
        parts += ["", "**Errors**", "", *(f"- {e}" for e in errors)]
    if notes:
        parts += ["", "**Notes**", "", *(f"- {n}" for n in notes)]
    if outcomes:
        parts += [
            "",
            "**Targets** (one process)",
            "",
            _md_table(
                ("target", "required", "actual", "verdict"),
                _target_rows(outcomes),
                (False, False, True, False),
            ),
        ]
    return "\n".join(parts) + "\n"


def to_json(
    machine: dict[str, str],
    results: Sequence[Result],
    outcomes: Sequence[TargetOutcome],
    notes: Sequence[str] = (),
    settings: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Everything as plain JSON-able data; results carry their ratios."""
    out_results = []
    for result in results:
        item = result.to_dict()
        item["extra"] = {k: v for k, v in item["extra"].items() if k != "traceback"}
        item["ratios"] = ratios(result, results)
        out_results.append(item)
    return {
        "machine": machine,
        "settings": settings or {},
        "results": out_results,
        "targets": [o.to_dict() for o in outcomes],
        "notes": list(notes),
        "sizes": {str(r.size): format_size(r.size) for r in results},
    }
