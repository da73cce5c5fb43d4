"""`plet bench` (and `python -m bench`): run the benchmark suite and print or save the report.

A thin click layer over `bench.suite.run_benchmark`: the options become a `Settings`, the
progress goes to stderr, the plain-text report to stdout, and `--json` / `--markdown` write
the same run to files. The exit code is 1 when a case failed or no Partitionlet case ran,
2 for a usage error, 0 otherwise; a missed performance target is reported, not an error.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click

from bench import archived_reads, latency, poll_size, report
from bench import checksums as checksum_cost
from bench import compression as compression_case
from bench import topics as many_topics
from bench import wal as wal_size
from bench import web as web_pages
from bench import wire as wire_listener
from bench.cases import DEFAULT_ACKS, DEFAULT_SIZES, QUICK_MESSAGES, Case, Result, Settings
from bench.cases import format_size as _format_size
from bench.engine_cases import SYSTEM as PARTITIONLET
from bench.engine_cases import parse_acks
from bench.suite import Run, run_benchmark

MAX_SIZE = 1024 * 1024  # the default max_message_bytes of a stream
RAM_FILESYSTEMS = ("tmpfs", "ramfs")
WORKDIR_PREFIX = "plet-bench-"
# Records per poll when consuming: the Consumer's default max_poll_records (as kafka-python's).
# `plet bench --poll N` compares it with polls of 5,000 and 100,000 (docs/BENCHMARKS.md,
# issues 13 and 28).
CONSUME_MAX_RECORDS = 500

_SIZE = re.compile(r"(\d+)\s*(b|k|kib|m|mib)?", re.IGNORECASE)
_SIZE_UNITS = {"": 1, "b": 1, "k": 1024, "kib": 1024, "m": 1024 * 1024, "mib": 1024 * 1024}
_COUNT = re.compile(r"(\d[\d_]*)\s*([km]?)", re.IGNORECASE)
_COUNT_UNITS = {"": 1, "k": 1_000, "m": 1_000_000}


# --------------------------------------------------------------------------- parsing


def parse_size(text: str) -> int:
    """'100' -> 100, '1KiB' / '1k' -> 1024, '1MiB' -> 1048576 (binary units)."""
    match = _SIZE.fullmatch(text.strip())
    if not match:
        raise ValueError(f"{text!r} is not a size (examples: 100, 1024, 1KiB)")
    size = int(match.group(1)) * _SIZE_UNITS[(match.group(2) or "").lower()]
    if not 1 <= size <= MAX_SIZE:
        raise ValueError(f"{text!r}: a message size must be 1 B to 1 MiB")
    return size


def parse_count(text: str) -> int:
    """'2000' -> 2000, '1_000_000' -> 1000000, '200k' -> 200000, '1M' -> 1000000."""
    match = _COUNT.fullmatch(text.strip())
    if not match:
        raise ValueError(f"{text!r} is not a message count (examples: 50000, 200k, 1M)")
    count = int(match.group(1).replace("_", "")) * _COUNT_UNITS[match.group(2).lower()]
    if count < 1:
        raise ValueError("the message count must be at least 1")
    return count


def _split(text: str) -> list[str]:
    items = [item.strip() for item in text.split(",")]
    if not text.strip() or any(not item for item in items):
        raise ValueError(f"{text!r} is not a comma-separated list")
    return items


def _unique(values: list[Any]) -> tuple[Any, ...]:
    return tuple(dict.fromkeys(values))


def _param(parse):
    """A click callback that runs `parse` on the value and turns ValueError into usage errors."""

    def callback(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
        if value is None:
            return None
        try:
            return parse(value)
        except ValueError as exc:
            raise click.BadParameter(str(exc), ctx=ctx, param=param) from None

    return callback


def _sizes(text: str) -> tuple[int, ...]:
    return _unique([parse_size(item) for item in _split(text)])


def _acks(text: str) -> tuple[int | str, ...]:
    return _unique([parse_acks(item) for item in _split(text)])


def _output_file(text: str) -> Path:
    """A file to write at the end of the run: checked now, so a long run cannot lose it."""
    path = Path(text)
    if path.is_dir():
        raise ValueError(f"{text!r} is a directory")
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise ValueError(f"directory {str(parent)!r} does not exist")
    if not os.access(parent, os.W_OK):
        raise ValueError(f"directory {str(parent)!r} is not writable")
    return path


# --------------------------------------------------------------------------- work directory


def on_ram(path: Path | str) -> bool:
    """True when `path` lives on tmpfs or ramfs, where fsync costs nothing."""
    mount = report.mount_of(path)
    return bool(mount and mount[2] in RAM_FILESYSTEMS)


def default_base() -> Path:
    """Where the work directory goes by default: the temp dir, unless it is in RAM."""
    candidates = [Path(tempfile.gettempdir()), Path("/var/tmp"), Path.cwd()]
    for candidate in candidates:
        if candidate.is_dir() and os.access(candidate, os.W_OK) and not on_ram(candidate):
            return candidate
    return candidates[0]  # everything is in RAM: run anyway, the report says so


def make_workdir(base: Path | None) -> Path:
    """A fresh, empty directory for one run, inside `base` (default: `default_base()`)."""
    base = default_base() if base is None else base
    base.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=WORKDIR_PREFIX, dir=base))


# --------------------------------------------------------------------------- output


def _progress():
    count = [0]

    def progress(case: Case, result: Result | None) -> None:
        if result is None:
            count[0] += 1
            click.echo(f"[{count[0]:2}] {case.name} ... ", nl=False, err=True)
        elif result.error:
            click.echo(f"ERROR {result.error}", err=True)
        else:
            click.echo(
                f"{report.format_rate(result.msg_per_s)} msg/s, "
                f"{report.format_mb(result.mb_per_s)} MB/s ({result.seconds:.3f} s)",
                err=True,
            )

    return progress


def _load() -> str:
    """The 1-minute load average, or '' where the OS does not tell."""
    try:
        return f"{os.getloadavg()[0]:.2f}"
    except (AttributeError, OSError):
        return ""


def _describe(settings: Settings) -> str:
    sizes = ", ".join(
        f"{_format_size(size)} x {settings.messages_for(size):,}" for size in settings.sizes
    )
    acks = ", ".join(str(a) for a in settings.acks)
    peers = "raw SQLite" + (", Redis Streams" if settings.redis else "")
    return f"plet bench: {sizes} messages; acks {acks}; peers: {peers}; in {settings.workdir}"


def _markdown(run: Run) -> str:
    when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    return f"Measured {when}.\n\n{run.markdown()}"


def _problems(run: Run) -> list[str]:
    problems = [f"{len(run.failed)} case(s) failed"] if run.failed else []
    if not any(r.system == PARTITIONLET for r in run.results):
        problems.append("no Partitionlet case ran (see the notes)")
    return problems


# --------------------------------------------------------------------------- the command


@click.command(
    "bench",
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.option(
    "--quick",
    is_flag=True,
    help=f"A smoke run: {QUICK_MESSAGES:,} messages per case. Not for numbers.",
)
@click.option(
    "--messages",
    "-n",
    metavar="N",
    callback=_param(parse_count),
    help="Messages per case, for every size (200k, 1M, ...). "
    "[default: 1,000,000 for 100 B, 200,000 for 1 KiB]",
)
@click.option(
    "--sizes",
    metavar="LIST",
    callback=_param(_sizes),
    help="Message value sizes, comma-separated (100, 1KiB, 4096, ...). [default: 100,1KiB]",
)
@click.option(
    "--acks",
    metavar="LIST",
    callback=_param(_acks),
    help="Produce durability levels, a comma-separated subset of 0, 1, all. [default: 0,1,all]",
)
@click.option(
    "--max-records",
    metavar="N",
    type=click.IntRange(min=1),
    default=CONSUME_MAX_RECORDS,
    show_default=True,
    help="max_records of each Partitionlet poll() when consuming; the default is the "
    "Consumer's own max_poll_records.",
)
@click.option(
    "--dir",
    "base",
    metavar="PATH",
    type=click.Path(file_okay=False, path_type=Path),
    help="Where to make the run's work directory; use a real disk, not tmpfs. "
    "[default: the temp directory if it is on disk, else /var/tmp]",
)
@click.option(
    "--topics",
    metavar="N",
    callback=_param(parse_count),
    help="Also run the many-topics case: N topics made by producing one message to each "
    "(1M takes a few minutes), their listing and reopening. [default: not run]",
)
@click.option(
    "--web",
    "web_topics",
    metavar="N",
    callback=_param(parse_count),
    help="Also run the web console case: server time per page of the Streams pages with N "
    "topics in one stream (the cluster is cached under bench/scratch/; 1M takes a few "
    "minutes to build once). [default: not run]",
)
@click.option(
    "--wal",
    "wal_messages",
    metavar="N",
    callback=_param(parse_count),
    help="Also run the WAL-size case: N messages produced while a consumer tails, under "
    "the checkpoint policy before issue 12 and the current one; the -wal files' peak and "
    "idle sizes and the throughput of each. [default: not run]",
)
@click.option(
    "--poll",
    "poll_messages",
    metavar="N",
    callback=_param(parse_count),
    help="Also run the poll-size case: N messages (with and without headers) read back "
    "with polls of 500, 5,000 and 100,000 records; CPU time per record, the garbage "
    "collections and the page faults of each. [default: not run]",
)
@click.option(
    "--latency",
    "latency_messages",
    metavar="N",
    callback=_param(parse_count),
    help="Also run the latency case: N 100-B messages at 200 msg/s, each timed from its "
    "send to its receipt by a consumer in another process (with and without doorbells), "
    "in the same process, and over the wire; p50, p99 and max. [default: not run]",
)
@click.option(
    "--compression",
    "compression_messages",
    metavar="N",
    callback=_param(parse_count),
    help="Also run the compression case: N 100-B random values and N JSON events each "
    "stored plain, with zstd and with lz4; bytes stored per message, produce msg/s, poll "
    "msg/s and poll_arrow rows/s. [default: not run]",
)
@click.option(
    "--wire",
    "wire_messages",
    metavar="N",
    callback=_param(parse_count),
    help="Also run the Kafka wire case: N 100-B messages through confluent-kafka and kcat "
    "to a `plet serve` process on loopback, beside the embedded API, then N/5 1-KiB messages "
    "over 16 partitions (confluent-kafka) and a kafka-python read of 1,000 partitions with "
    "and without fetch sessions; msg/s, the ratios and "
    f"the server's CPU time (${wire_listener.PROFILE_ENV}=FILE profiles the server). "
    "[default: not run]",
)
@click.option(
    "--checksums",
    "checksum_messages",
    metavar="N",
    callback=_param(parse_count),
    help="Also run the checksums case: N 100-B and N/3 1-KiB messages produced and consumed "
    "embedded and over the wire, and scanned as Spark's tasks do, with the batch checksums "
    "on and off (the engine before them), alternated over five rounds; CPU seconds and the "
    "change. [default: not run]",
)
@click.option(
    "--archived",
    "archived_messages",
    metavar="N",
    callback=_param(parse_count),
    help="Also run the archived-reads case: N 100-B messages archived to Parquet and the "
    "same N kept live, each read from the start by poll, poll_arrow and poll_arrow_batches "
    "(polls of 10,000); CPU rows/s and the ratios archived / live, with the files' row "
    "groups already decoded and not. [default: not run]",
)
@click.option("--keep", is_flag=True, help="Keep the work directory (it is removed by default).")
@click.option("--no-redis", is_flag=True, help="Leave out the Redis Streams peer.")
@click.option(
    "--json",
    "json_path",
    metavar="FILE",
    callback=_param(_output_file),
    help="Also write the run (machine, settings, results, ratios, targets) as JSON.",
)
@click.option(
    "--markdown",
    "markdown_path",
    metavar="FILE",
    callback=_param(_output_file),
    help="Also write the report section for docs/BENCHMARKS.md in Markdown.",
)
@click.pass_context
def bench_command(
    ctx: click.Context,
    quick: bool,
    messages: int | None,
    sizes: tuple[int, ...] | None,
    acks: tuple[int | str, ...] | None,
    max_records: int,
    topics: int | None,
    web_topics: int | None,
    wal_messages: int | None,
    poll_messages: int | None,
    latency_messages: int | None,
    compression_messages: int | None,
    wire_messages: int | None,
    checksum_messages: int | None,
    archived_messages: int | None,
    base: Path | None,
    keep: bool,
    no_redis: bool,
    json_path: Path | None,
    markdown_path: Path | None,
) -> None:
    """Measure produce and consume throughput against raw SQLite and Redis Streams.

    Partitionlet goes through its public API in this one process: produce at each acks
    level (acks=all with linger_ms=5), then consume with one consumer. In the same run, on
    the same disk: raw SQLite executemany into one WAL table (the storage's ceiling) and
    Redis Streams through redis-py with pipelining, against a redis-server (AOF everysec)
    that the benchmark starts on loopback and stops. The report gives msg/s and MB/s, the
    ratios to the peers, and the targets met or missed.

    \b
    Examples:
      plet bench                          the full run (a few minutes)
      plet bench --quick                  a smoke run
      plet bench --sizes 100 --acks 1 -n 200k --no-redis
      plet bench --markdown results.md --json results.json
    """
    if quick and messages is not None:
        raise click.UsageError("--quick and --messages cannot be used together", ctx=ctx)
    count = QUICK_MESSAGES if quick else messages
    sizes = sizes or DEFAULT_SIZES
    try:
        workdir = make_workdir(base)
    except OSError as exc:
        raise click.BadParameter(
            f"cannot make a work directory: {exc}", param_hint="--dir"
        ) from exc
    settings = Settings(
        workdir=workdir,
        sizes=sizes,
        acks=acks or DEFAULT_ACKS,
        messages={size: count for size in sizes} if count else {},
        redis=not no_redis,
        consume_max_records=max_records,
        smoke=quick,
    )
    click.echo(_describe(settings), err=True)
    load_before = _load()
    try:
        run = run_benchmark(settings, progress=_progress())
        many = None
        if topics:
            click.echo(f"many topics: {topics:,} ...", err=True)
            many = many_topics.run(workdir, topics)
        web = None
        if web_topics:
            click.echo(f"web console: {web_topics:,} topics ...", err=True)
            web = web_pages.run(web_topics, progress=lambda line: click.echo(line, err=True))
        wal = None
        if wal_messages:
            click.echo(f"WAL size: {wal_messages:,} messages ...", err=True)
            wal = wal_size.run(workdir / "wal", wal_messages)
        polls = None
        if poll_messages:
            click.echo(f"poll size: {poll_messages:,} messages ...", err=True)
            polls = poll_size.run(workdir / "poll", poll_messages)
        latencies = None
        if latency_messages:
            click.echo(f"latency: {latency_messages:,} messages ...", err=True)
            latencies = latency.run(latency_messages, workdir / "latency")
        compressed = None
        if compression_messages:
            click.echo(f"compression: {compression_messages:,} messages ...", err=True)
            compressed = compression_case.run(workdir / "compression", compression_messages)
        wire = None
        if wire_messages:
            click.echo(f"Kafka wire: {wire_messages:,} messages ...", err=True)
            wire = wire_listener.run(
                workdir / "wire", wire_messages, progress=lambda line: click.echo(line, err=True)
            )
            if load_before:
                wire.load = f"{load_before} before, {_load()} after (1-minute average)"
        checksums = None
        if checksum_messages:
            click.echo(f"checksums: {checksum_messages:,} messages ...", err=True)
            checksums = [
                c
                for size in checksum_cost.SIZES
                for c in checksum_cost.compare(
                    workdir / f"checksums-{size}",
                    size,
                    checksum_messages if size <= 100 else max(1, checksum_messages // 3),
                )
            ]
        archived = None
        if archived_messages:
            click.echo(f"archived reads: {archived_messages:,} messages ...", err=True)
            load = _load()
            archived = archived_reads.run(workdir / "archived", archived_messages)
            if load:
                archived.load = f"{load} before, {_load()} after (1-minute average)"
        if load_before:  # other work on the machine skews the numbers: say how much there was
            run.machine["load"] = f"{load_before} before, {_load()} after (1-minute average)"
    finally:
        if keep:
            click.echo(f"work directory kept: {workdir}", err=True)
        else:
            shutil.rmtree(workdir, ignore_errors=True)

    click.echo()
    click.echo(run.text(), nl=False)
    if many is not None:
        click.echo()
        click.echo(many.text())
    if web is not None:
        click.echo()
        click.echo(web.text())
    if wal is not None:
        click.echo()
        click.echo(wal_size.text(wal))
    if polls is not None:
        click.echo()
        click.echo(poll_size.text(polls))
    if latencies is not None:
        click.echo()
        click.echo(latency.text(latencies))
    if compressed is not None:
        click.echo()
        click.echo(compression_case.text(compressed))
    if wire is not None:
        click.echo()
        click.echo(wire_listener.text(wire))
    if checksums is not None:
        click.echo()
        click.echo(checksum_cost.text(checksums))
    if archived is not None:
        click.echo()
        click.echo(archived_reads.text(archived))
    if json_path is not None:
        data = run.to_json()
        if many is not None:
            data["many_topics"] = {
                **asdict(many),
                "topics_per_s": many.topics_per_s,
                "one_topic_per_s": many.one_topic_per_s,
                "ratio": many.ratio,
            }
        if web is not None:
            data["web"] = {
                "topics": web.topics,
                "rounds": web.rounds,
                "load": web.load,
                "pages": [
                    {"name": p.name, "url": p.url, "median_ms": p.median, "p95_ms": p.p95}
                    for p in web.pages
                ],
            }
        if wal is not None:
            data["wal"] = [
                {**asdict(r), "produce_per_s": r.produce_per_s, "consume_per_s": r.consume_per_s}
                for r in wal
            ]
        if polls is not None:
            data["poll_size"] = [
                {**asdict(r), "ns_per_record": r.ns_per_record, "per_s": r.per_s} for r in polls
            ]
        if latencies is not None:
            data["latency"] = [
                {"case": r.case, "received": len(r.ms), "p50_ms": r.q(0.5),
                 "p99_ms": r.q(0.99), "max_ms": max(r.ms, default=None)}
                for r in latencies
            ]  # fmt: skip
        if compressed is not None:
            data["compression"] = [
                {
                    **asdict(r),
                    "bytes_per_message": r.bytes_per_message,
                    "produce_per_s": r.produce_per_s,
                    "poll_per_s": r.poll_per_s,
                    "arrow_per_s": r.arrow_per_s,
                }
                for r in compressed
            ]
        if wire is not None:
            data["wire"] = wire.to_json()
        if checksums is not None:
            data["checksums"] = [{**asdict(c), "change": c.change} for c in checksums]
        if archived is not None:
            data["archived_reads"] = asdict(archived)
        json_path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
        click.echo(f"wrote {json_path}", err=True)
    if markdown_path is not None:
        text = _markdown(run)
        if many is not None:
            text += "\n" + many.markdown() + "\n"
        if web is not None:
            text += "\n" + web.markdown() + "\n"
        if wal is not None:
            text += "\n" + wal_size.markdown(wal) + "\n"
        if polls is not None:
            text += "\n" + poll_size.markdown(polls) + "\n"
        if latencies is not None and latency_messages:
            text += "\n" + latency.markdown(latencies, latency_messages) + "\n"
        if compressed is not None:
            text += "\n" + compression_case.markdown(compressed) + "\n"
        if wire is not None:
            text += "\n" + wire_listener.markdown(wire) + "\n"
        if checksums is not None:
            text += "\n" + checksum_cost.markdown(checksums) + "\n"
        if archived is not None:
            text += "\n" + archived_reads.markdown(archived) + "\n"
        markdown_path.write_text(text, encoding="utf-8")
        click.echo(f"wrote {markdown_path}", err=True)
    problems = _problems(run)
    if wire is not None and not all(r.ok for r in wire.results):
        problems.append("a Kafka wire case failed")
    if problems:
        click.echo(f"error: {'; '.join(problems)}", err=True)
        ctx.exit(1)
