"""The `plet` command line, through its entry point: click's CliRunner on `engine.cli.cli`
for most tests, and the installed `plet` console script in a real subprocess for a few.

Exit codes are part of the contract (0 success, 1 engine error, 2 usage error), and so is
the split between stdout (data) and stderr (counts, errors).
"""

from __future__ import annotations

import ast
import base64
import json
import os
import re
import shutil
import subprocess
import sys
import time
from datetime import UTC, datetime
from importlib.metadata import entry_points
from pathlib import Path

import click
import pytest
from click.testing import CliRunner, Result

from engine import Cluster, Consumer, TopicPartition
from engine.cli import cli
from tests.timing import scaled

# --- helpers -----------------------------------------------------------------------------


def run(*args: object, input: str | bytes | None = None, env: dict | None = None) -> Result:
    """`plet ARGS` in this process; PLET_CLUSTER is unset unless `env` sets it."""
    environment = {"PLET_CLUSTER": None, "PLET_DEFAULT_STREAM": None, **(env or {})}
    runner = CliRunner()
    return runner.invoke(
        cli, [str(a) for a in args], input=input, env=environment, catch_exceptions=False
    )


def ok(*args: object, **kwargs: object) -> Result:
    result = run(*args, **kwargs)
    assert result.exit_code == 0, (
        f"plet {' '.join(map(str, args))} exited {result.exit_code}\n"
        f"stdout: {result.stdout}\nstderr: {result.stderr}"
    )
    return result


def fails(code: int, *args: object, **kwargs: object) -> Result:
    result = run(*args, **kwargs)
    assert result.exit_code == code, (
        f"plet {' '.join(map(str, args))} exited {result.exit_code}, expected {code}\n"
        f"stdout: {result.stdout}\nstderr: {result.stderr}"
    )
    if code == 1:
        # the error is the last thing said (produce reports its count first)
        assert result.stderr.splitlines()[-1].startswith("error: "), result.stderr
    assert "Traceback" not in result.output
    return result


def json_lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


@pytest.fixture
def cpath(cluster_path: Path) -> Path:
    """An initialised cluster directory, created by `plet init`."""
    ok("init", "--cluster", cluster_path, "--name", "test")
    return cluster_path


def stream_info(cpath: Path, path: str) -> dict:
    return json.loads(ok("stream", "info", path, "--json", "--cluster", cpath).stdout)


def topic_info(cpath: Path, name: str) -> dict:
    return json.loads(ok("topic", "info", name, "--json", "--cluster", cpath).stdout)


def consume_values(cpath: Path, topic: str, *options: object) -> list[str]:
    result = ok("consume", topic, "--cluster", cpath, *options)
    return result.stdout.splitlines()


# --- help, version -----------------------------------------------------------------------


def _command_paths(
    group: click.Group, ctx: click.Context, prefix: tuple[str, ...] = ()
) -> list[tuple[str, ...]]:
    paths = []
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        assert command is not None, name
        paths.append((*prefix, name))
        if isinstance(command, click.Group):
            sub_ctx = click.Context(command, info_name=name, parent=ctx)
            paths.extend(_command_paths(command, sub_ctx, (*prefix, name)))
    return paths


def test_help_on_every_command_and_subcommand():
    paths = _command_paths(cli, click.Context(cli, info_name="plet"))
    expected = {
        ("init",),
        ("stream",),
        ("stream", "create"),
        ("stream", "edit"),
        ("stream", "delete"),
        ("stream", "list"),
        ("stream", "info"),
        ("topic",),
        ("topic", "create"),
        ("topic", "delete"),
        ("topic", "list"),
        ("topic", "info"),
        ("produce",),
        ("consume",),
        ("demo",),
    }
    assert expected <= set(paths)
    for path in [(), *paths]:
        for flag in ("--help", "-h"):
            result = run(*path, flag)
            assert result.exit_code == 0, (path, flag, result.output)
            assert result.stdout.startswith("Usage: "), (path, result.stdout)
    top = run("--help").stdout
    for name in ("init", "stream", "topic", "produce", "consume", "demo"):
        assert name in top


def test_help_mentions_cluster_env_and_examples():
    result = ok("consume", "--help")
    assert "PLET_CLUSTER" in result.stdout
    assert "--from-time" in result.stdout
    assert "plet consume /apps/sensors:car-17" in result.stdout


def test_version():
    result = ok("--version")
    assert result.stdout.startswith("plet, version ")


# --- cluster selection -------------------------------------------------------------------


def test_init_creates_then_reopens(cluster_path):
    result = ok("init", "--cluster", cluster_path, "--name", "dc1", "--volumes", "2")
    assert result.stdout.startswith("created cluster 'dc1'")
    assert "2 volumes" in result.stdout
    assert cluster_path.is_dir()
    again = ok("init", "--cluster", cluster_path)
    assert again.stdout.startswith("opened existing cluster 'dc1'")
    assert "2 volumes" in again.stdout
    with Cluster.open(cluster_path) as cluster:
        assert cluster.name == "dc1"
        assert len(cluster.volumes()) == 2


def test_missing_cluster_directory_is_a_clear_error(tmp_path):
    missing = tmp_path / "no-such-cluster"
    result = fails(1, "stream", "list", "--cluster", missing)
    assert f"no cluster at '{missing}'" in result.stderr
    assert "plet init --cluster" in result.stderr
    assert not missing.exists()  # a typo never creates an empty cluster


def test_no_cluster_at_all_is_a_usage_error():
    result = fails(2, "stream", "list")
    assert "no cluster given" in result.stderr
    assert "PLET_CLUSTER" in result.stderr


def test_cluster_from_env_group_option_and_command_option(cpath, tmp_path):
    ok("stream", "create", "/env/s", env={"PLET_CLUSTER": str(cpath)})
    listed = ok("stream", "list", env={"PLET_CLUSTER": str(cpath)})
    assert "/env/s" in listed.stdout
    # given to the group
    assert "/env/s" in ok("--cluster", cpath, "stream", "list").stdout
    # the command's --cluster wins over the group's and over the environment
    missing = tmp_path / "missing"
    assert "/env/s" in ok("--cluster", missing, "stream", "list", "--cluster", cpath).stdout
    env = {"PLET_CLUSTER": str(missing)}
    assert "/env/s" in ok("stream", "list", "--cluster", cpath, env=env).stdout
    # and a wrong PLET_CLUSTER is reported as such
    assert "no cluster at" in fails(1, "stream", "list", env=env).stderr


# --- streams -----------------------------------------------------------------------------


def test_stream_create_info_edit_list_delete(cpath):
    result = ok(
        "stream",
        "create",
        "/apps/sensors",
        "--ttl",
        "86400",
        "--default-partitions",
        "3",
        "--compact",
        "--timestamp-type",
        "log_append",
        "--max-message-bytes",
        "2048",
        "--consume-perm",
        "u:alice | g:ops",
        "--cluster",
        cpath,
    )
    assert result.stdout == "created stream /apps/sensors\n"

    info = stream_info(cpath, "/apps/sensors")
    assert info["path"] == "/apps/sensors"
    assert info["topic_count"] == 0
    policies = info["policies"]
    assert policies["ttl"] == 86400
    assert policies["default_partitions"] == 3
    assert policies["compact"] is True
    assert policies["timestamp_type"] == "log_append"
    assert policies["max_message_bytes"] == 2048
    assert policies["consume_perm"] == "u:alice | g:ops"
    assert policies["auto_create"] is True  # not given: the default
    assert policies["delete_retention_ms"] == 86400000

    text = ok("stream", "info", "/apps/sensors", "--cluster", cpath).stdout
    assert "86400 (1 d)" in text
    assert "86400000 (1 d)" in text  # delete_retention_ms too
    assert "log_append" in text

    result = ok(
        "stream", "edit", "/apps/sensors", "--ttl", "0", "--no-auto-create", "--cluster", cpath
    )
    assert result.stdout.startswith("updated stream /apps/sensors: ")
    assert "ttl=0" in result.stdout and "auto_create=False" in result.stdout
    policies = stream_info(cpath, "/apps/sensors")["policies"]
    assert policies["ttl"] == 0
    assert policies["auto_create"] is False
    assert policies["default_partitions"] == 3  # untouched by the edit
    assert policies["compact"] is True

    listed = ok("stream", "list", "--cluster", cpath).stdout.splitlines()
    assert listed[0].split() == ["PATH", "TOPICS", "MESSAGES", "SIZE", "TTL", "CREATOR"]
    assert listed[1].split()[:6] == ["/apps/sensors", "0", "0", "0", "B", "forever"]

    # delete asks first: "n" keeps the stream
    kept = run("stream", "delete", "/apps/sensors", "--cluster", cpath, input="n\n")
    assert kept.exit_code == 1
    assert "Delete stream /apps/sensors with its 0 topics and 0 messages?" in kept.stderr
    assert "Aborted" in kept.stderr
    assert kept.stdout == ""
    stream_info(cpath, "/apps/sensors")
    result = ok("stream", "delete", "/apps/sensors", "--cluster", cpath, input="y\n")
    assert result.stdout == "deleted stream /apps/sensors\n"
    gone = fails(1, "stream", "info", "/apps/sensors", "--cluster", cpath)
    assert "/apps/sensors" in gone.stderr

    ok("stream", "create", "/apps/other", "--cluster", cpath)
    ok("stream", "delete", "/apps/other", "--yes", "--cluster", cpath)
    assert json.loads(ok("stream", "list", "--json", "--cluster", cpath).stdout) == []


def test_stream_delete_removes_topics_and_messages(cpath):
    ok("stream", "create", "/apps/s", "--cluster", cpath)
    ok("produce", "/apps/s:t", "--cluster", cpath, input="a\nb\n")
    result = ok("stream", "delete", "/apps/s", "-y", "--cluster", cpath)
    assert "deleted stream /apps/s" in result.stdout
    fails(1, "topic", "info", "/apps/s:t", "--cluster", cpath)
    # a new stream of the same path starts empty
    ok("stream", "create", "/apps/s", "--cluster", cpath)
    assert stream_info(cpath, "/apps/s")["topic_count"] == 0


def test_stream_list_paging_prefix_and_json(cpath):
    paths = ["/apps/a", "/apps/b", "/apps/c", "/ops/logs", "/ops/metrics"]
    for path in reversed(paths):
        ok("stream", "create", path, "--cluster", cpath)
    listed = json.loads(ok("stream", "list", "--json", "--cluster", cpath).stdout)
    assert [s["path"] for s in listed] == paths
    assert {"path", "policies", "creator", "created_ms", "topic_count"} <= set(listed[0])

    def names(*options: object) -> list[str]:
        out = ok("stream", "list", "--cluster", cpath, *options).stdout.splitlines()
        return [line.split()[0] for line in out[1:]]

    assert names("--prefix", "/ops") == ["/ops/logs", "/ops/metrics"]
    assert names("--limit", "2") == ["/apps/a", "/apps/b"]
    assert names("--limit", "2", "--offset", "2") == ["/apps/c", "/ops/logs"]
    assert names("--offset", "4") == ["/ops/metrics"]
    assert names("--prefix", "/nothing") == []


def test_invalid_policy_value_changes_nothing(cpath):
    result = fails(
        1, "stream", "create", "/apps/x", "--timestamp-type", "wallclock", "--cluster", cpath
    )
    assert "timestamp_type" in result.stderr
    assert "log_append" in result.stderr  # says what is accepted
    fails(1, "stream", "info", "/apps/x", "--cluster", cpath)

    ok("stream", "create", "/apps/d", "--ttl", "2d", "--archive-after", "90m", "--cluster", cpath)
    made = stream_info(cpath, "/apps/d")["policies"]
    assert (made["ttl"], made["archive_after"]) == (172_800, 5_400)  # durations, in seconds
    result = fails(2, "stream", "edit", "/apps/d", "--ttl", "soon", "--cluster", cpath)
    assert "'soon' is not a duration" in result.stderr and "2d, 90m, 1h30m" in result.stderr
    ok("stream", "create", "/apps/s", "--ttl", "3600", "--cluster", cpath)
    before = stream_info(cpath, "/apps/s")["policies"]
    result = fails(1, "stream", "edit", "/apps/s", "--ttl", "-5", "--cluster", cpath)
    assert "'ttl'" in result.stderr
    # an edit with one bad value among good ones changes none of them
    result = fails(
        1,
        "stream",
        "edit",
        "/apps/s",
        "--default-partitions",
        "4",
        "--max-message-bytes",
        "0",
        "--cluster",
        cpath,
    )
    assert "max_message_bytes" in result.stderr
    assert stream_info(cpath, "/apps/s")["policies"] == before

    fails(1, "stream", "create", "/apps/y", "--default-partitions", "0", "--cluster", cpath)
    fails(1, "stream", "info", "/apps/y", "--cluster", cpath)


def test_stream_usage_errors(cpath):
    # not an integer: click refuses it before the engine sees it
    assert (
        "--ttl"
        in fails(2, "stream", "create", "/apps/x", "--ttl", "soon", "--cluster", cpath).stderr
    )
    ok("stream", "create", "/apps/s", "--cluster", cpath)
    assert "nothing to change" in fails(2, "stream", "edit", "/apps/s", "--cluster", cpath).stderr
    fails(2, "stream", "create", "--cluster", cpath)  # missing PATH
    fails(2, "stream", "create", "/apps/x", "--no-such-option", "--cluster", cpath)
    fails(2, "stream", "frobnicate", "--cluster", cpath)
    json.loads(ok("stream", "list", "--json", "--cluster", cpath).stdout)  # still fine


def test_stream_engine_errors(cpath):
    ok("stream", "create", "/apps/s", "--cluster", cpath)
    fails(1, "stream", "create", "/apps/s", "--cluster", cpath)  # exists already
    for bad in ("apps", "/apps/", "/apps/../x", "/apps/s p", "/apps/s\n"):
        result = fails(1, "stream", "create", bad, "--cluster", cpath)
        assert "invalid stream path" in result.stderr, bad
    fails(1, "stream", "info", "/nope", "--cluster", cpath)
    fails(1, "stream", "edit", "/nope", "--ttl", "5", "--cluster", cpath)
    fails(1, "stream", "delete", "/nope", "--yes", "--cluster", cpath)
    listed = json.loads(ok("stream", "list", "--json", "--cluster", cpath).stdout)
    assert [s["path"] for s in listed] == ["/apps/s"]


# --- topics ------------------------------------------------------------------------------


def test_topic_create_info_delete(cpath):
    ok("stream", "create", "/apps/s", "--default-partitions", "2", "--cluster", cpath)
    result = ok("topic", "create", "/apps/s:car-17", "--partitions", "3", "--cluster", cpath)
    assert result.stdout == "created topic /apps/s:car-17 with 3 partitions\n"
    result = ok("topic", "create", "/apps/s:car-42", "--cluster", cpath)
    assert result.stdout == "created topic /apps/s:car-42 with 2 partitions\n"  # the policy

    info = topic_info(cpath, "/apps/s:car-17")
    assert info["name"] == "/apps/s:car-17"
    assert info["stream"] == "/apps/s"
    assert info["topic"] == "car-17"
    assert info["partition_count"] == 3
    assert [p["partition"] for p in info["partitions"]] == [0, 1, 2]
    for part in info["partitions"]:
        assert part["log_start_offset"] == part["log_end_offset"] == 0
        assert part["messages"] == 0

    text = ok("topic", "info", "/apps/s:car-17", "--cluster", cpath).stdout
    assert "partition 2" in text
    assert "PARTITIONLET" in text
    assert stream_info(cpath, "/apps/s")["topic_count"] == 2

    assert ok("topic", "delete", "/apps/s:car-17", "--cluster", cpath).stdout == (
        "deleted topic /apps/s:car-17\n"
    )
    fails(1, "topic", "info", "/apps/s:car-17", "--cluster", cpath)
    fails(1, "topic", "delete", "/apps/s:car-17", "--cluster", cpath)
    listed = json.loads(ok("topic", "list", "/apps/s", "--json", "--cluster", cpath).stdout)
    assert [t["name"] for t in listed] == ["/apps/s:car-42"]


def test_topic_errors(cpath):
    ok("stream", "create", "/apps/s", "--cluster", cpath)
    ok("topic", "create", "/apps/s:t", "--cluster", cpath)
    again = fails(1, "topic", "create", "/apps/s:t", "--cluster", cpath)
    assert again.stderr.strip() == "error: topic /apps/s:t exists already"  # its full name
    fails(1, "topic", "create", "/nope:t", "--cluster", cpath)  # unknown stream
    fails(1, "topic", "list", "/nope", "--cluster", cpath)
    # a second ':' is the topic name's fault, not the stream path's
    assert (
        "invalid topic name 'a:b'"
        in fails(1, "topic", "create", "/apps/s:a:b", "--cluster", cpath).stderr
    )
    for bad in ("/apps/s:bad name", "/apps/s:", "/apps/s:..", "apps:t", "/apps/s:" + "x" * 250):
        result = fails(1, "topic", "create", bad, "--cluster", cpath)
        assert "invalid" in result.stderr, bad
    fails(1, "topic", "create", "/apps/s:u", "--partitions", "0", "--cluster", cpath)
    fails(1, "topic", "info", "/apps/s:u", "--cluster", cpath)  # nothing was created
    fails(2, "topic", "create", "/apps/s:v", "--partitions", "many", "--cluster", cpath)
    fails(2, "topic", "list", "--cluster", cpath)  # missing STREAM


def test_topic_list_paging_and_prefix(cpath):
    ok("stream", "create", "/apps/s", "--cluster", cpath)
    names = [f"t{i:02d}" for i in range(12)]
    for name in reversed(names):
        ok("topic", "create", f"/apps/s:{name}", "--cluster", cpath)
    ok("topic", "create", "/apps/s:other", "--cluster", cpath)

    def page(*options: object) -> Result:
        return ok("topic", "list", "/apps/s", "--cluster", cpath, *options)

    def shown(result: Result) -> list[str]:
        lines = result.stdout.splitlines()
        assert lines[0].split()[:2] == ["TOPIC", "PARTITIONS"]
        return [line.split()[0] for line in lines[1:]]

    everything = shown(page())
    assert everything == ["/apps/s:other"] + [f"/apps/s:{n}" for n in names]

    first = page("--prefix", "t", "--limit", "5")
    assert shown(first) == [f"/apps/s:{n}" for n in names[:5]]
    assert "showing 1-5 of 12 topics; next page: --offset 5" in first.stderr
    middle = page("--prefix", "t", "--limit", "5", "--offset", "5")
    assert shown(middle) == [f"/apps/s:{n}" for n in names[5:10]]
    assert "next page: --offset 10" in middle.stderr
    last = page("--prefix", "t", "--limit", "5", "--offset", "10")
    assert shown(last) == [f"/apps/s:{n}" for n in names[10:]]
    assert "next page" not in last.stderr

    assert shown(page("--prefix", "t1")) == ["/apps/s:t10", "/apps/s:t11"]
    assert shown(page("--limit", "2", "--offset", "1")) == ["/apps/s:t00", "/apps/s:t01"]
    as_json = json.loads(page("--prefix", "t0", "--limit", "3", "--json").stdout)
    assert [t["name"] for t in as_json] == ["/apps/s:t00", "/apps/s:t01", "/apps/s:t02"]
    assert all(t["partition_count"] == 1 and t["messages"] == 0 for t in as_json)


# --- produce and consume -----------------------------------------------------------------


def test_produce_with_keys_and_headers_then_consume_back(cpath):
    ok("stream", "create", "/apps/s", "--cluster", cpath)
    result = ok(
        "produce",
        "/apps/s:t",
        "--key-separator",
        "=",
        "--header",
        "unit=C",
        "--header",
        "src=a=b",
        "--cluster",
        cpath,
        input="k1=v1\nk2=v2\nk3=v=3\n=no key\n",
    )
    assert result.stdout == ""
    assert result.stderr == "produced 4 messages\n"

    plain = ok("consume", "/apps/s:t", "--from-beginning", "--cluster", cpath)
    assert plain.stdout == "v1\nv2\nv=3\nno key\n"
    assert plain.stderr == "consumed 4 messages\n"

    keyed = ok("consume", "/apps/s:t", "--print-key", "--cluster", cpath)
    assert keyed.stdout == "k1\tv1\nk2\tv2\nk3\tv=3\n\tno key\n"

    records = json_lines(ok("consume", "/apps/s:t", "--format", "json", "--cluster", cpath).stdout)
    assert len(records) == 4
    for record in records:
        # the one record shape of docs/API.md, "Records" (the API and downloads share it)
        assert set(record) == {
            "topic",
            "partition",
            "offset",
            "timestamp",
            "timestamp_type",
            "time",
            "key",
            "key_encoding",
            "value",
            "value_encoding",
            "headers",
        }
        assert record["topic"] == "/apps/s:t"
        assert record["partition"] == 0
        assert record["timestamp_type"] == "create"
        assert isinstance(record["timestamp"], int)
        assert record["headers"] == [
            {"name": "unit", "value": "C", "encoding": "utf-8"},
            {"name": "src", "value": "a=b", "encoding": "utf-8"},
        ]
    assert [r["offset"] for r in records] == [0, 1, 2, 3]
    assert [(r["key"], r["value"]) for r in records] == [
        ("k1", "v1"),
        ("k2", "v2"),
        ("k3", "v=3"),
        ("", "no key"),
    ]

    assert consume_values(cpath, "/apps/s:t", "--offset", "2") == ["v=3", "no key"]
    assert consume_values(cpath, "/apps/s:t", "--max-messages", "2") == ["v1", "v2"]
    assert consume_values(cpath, "/apps/s:t", "--offset", "1", "--max-messages", "1") == ["v2"]
    assert consume_values(cpath, "/apps/s:t", "--offset", "99") == []
    end = ok("consume", "/apps/s:t", "--from-end", "--cluster", cpath)
    assert end.stdout == "" and end.stderr == "consumed 0 messages\n"


def test_consume_filter_takes_every_header_form(cpath):
    """`--filter` is the consoles' filter grammar: three ways to write a header, text
    anywhere, -i, with --group too; what reads two ways is a usage error saying why."""
    ok("stream", "create", "/ops/logs", "--cluster", cpath)
    for host, lines in (("api-1", "a\nb\n"), ("api-2", "c\nd\n"), ("api-1", "e\n")):
        ok("produce", "/ops/logs:api", "--header", f"host={host}", "--cluster", cpath, input=lines)
    for typed in ("host: api-2", "host=api-2", "host:api-2"):
        result = ok("consume", "/ops/logs:api", "--filter", typed, "--cluster", cpath)
        assert result.stdout == "c\nd\n", typed
        assert result.stderr == "consumed 2 messages\n"
    assert consume_values(cpath, "/ops/logs:api", "--filter", "HOST=API-2") == []
    assert consume_values(cpath, "/ops/logs:api", "--filter", "HOST=API-2", "-i") == ["c", "d"]
    assert consume_values(cpath, "/ops/logs:api", "--filter", "e") == ["e"]  # text anywhere
    grouped = ("--group", "g", "--from-beginning", "--filter", "host:api-2")
    assert consume_values(cpath, "/ops/logs:api", *grouped) == ["c", "d"]
    refused = fails(2, "consume", "/ops/logs:api", "--filter", "host==x", "--cluster", cpath)
    assert "two separators after the header name 'host'" in refused.stderr


def test_produce_without_separator_sends_lines_as_they_are(cpath):
    ok("stream", "create", "/apps/s", "--cluster", cpath)
    ok("produce", "/apps/s:t", "--cluster", cpath, input="one\n\n  three  \r\nlast")
    records = json_lines(ok("consume", "/apps/s:t", "--format", "json", "--cluster", cpath).stdout)
    assert [(r["key"], r["value"]) for r in records] == [
        (None, "one"),
        (None, ""),
        (None, "  three  \r"),  # only the trailing newline is removed
        (None, "last"),  # a last line without newline is a message too
    ]
    assert all(r["headers"] == [] for r in records)
    text = ok("consume", "/apps/s:t", "--print-key", "--max-messages", "1", "--cluster", cpath)
    assert text.stdout == "null\tone\n"  # a null key prints as Kafka's console consumer does


def test_binary_values_round_trip(cpath):
    ok("stream", "create", "/apps/bin", "--cluster", cpath)
    payload = bytes([0xFF, 0xFE, 0x00, 0x80, 0x09])
    ok("produce", "/apps/bin:t", "--cluster", cpath, input=payload + b"\n" + "é\n".encode())
    raw = ok("consume", "/apps/bin:t", "--cluster", cpath)
    assert raw.stdout_bytes == payload + b"\n" + "é\n".encode()
    records = json_lines(
        ok("consume", "/apps/bin:t", "--format", "json", "--cluster", cpath).stdout
    )
    assert records[0]["value_encoding"] == "base64"
    assert base64.b64decode(records[0]["value"]) == payload
    assert records[1]["value"] == "é"
    assert records[1]["value_encoding"] == "utf-8"


def test_produce_line_without_separator_fails_after_sending_earlier_lines(cpath):
    ok("stream", "create", "/apps/s", "--cluster", cpath)
    result = fails(
        1,
        "produce",
        "/apps/s:t",
        "--key-separator",
        ":",
        "--cluster",
        cpath,
        input="a:1\nb:2\nno separator\nc:3\n",
    )
    assert "line 3 has no key separator ':'" in result.stderr
    assert "produced 2 messages" in result.stderr
    assert consume_values(cpath, "/apps/s:t", "--print-key") == ["a\t1", "b\t2"]


def test_produce_usage_errors(cpath):
    ok("stream", "create", "/apps/s", "--cluster", cpath)
    fails(2, "produce", "/apps/s:t", "--header", "novalue", "--cluster", cpath, input="x\n")
    fails(2, "produce", "/apps/s:t", "--header", "=v", "--cluster", cpath, input="x\n")
    fails(2, "produce", "/apps/s:t", "--key-separator", "", "--cluster", cpath, input="x\n")
    fails(2, "produce", "/apps/s:t", "--acks", "2", "--cluster", cpath, input="x\n")
    fails(2, "produce", "--cluster", cpath, input="x\n")  # missing TOPIC
    fails(1, "topic", "info", "/apps/s:t", "--cluster", cpath)  # nothing was produced


def test_produce_engine_errors(cpath):
    ok("stream", "create", "/apps/s", "--cluster", cpath)
    ok("stream", "create", "/apps/closed", "--no-auto-create", "--cluster", cpath)
    fails(1, "produce", "/nope:t", "--cluster", cpath, input="x\n")  # unknown stream
    fails(1, "produce", "/apps/closed:t", "--cluster", cpath, input="x\n")  # no auto-create
    fails(1, "topic", "info", "/apps/closed:t", "--cluster", cpath)
    result = fails(1, "produce", "t", "--cluster", cpath, input="x\n")  # not a full name
    assert "default_stream" in result.stderr or "full name" in result.stderr
    fails(1, "produce", "/apps/s:bad name", "--cluster", cpath, input="x\n")
    fails(1, "consume", "/apps/s:never", "--cluster", cpath)  # unknown topic: no endless wait
    fails(1, "consume", "/nope:t", "--cluster", cpath)
    fails(1, "consume", "/apps/s:bad name", "--cluster", cpath)


def test_produce_auto_creates_topic_and_acks(cpath):
    ok("stream", "create", "/apps/s", "--default-partitions", "2", "--cluster", cpath)
    for acks in ("0", "1", "all"):
        ok("produce", "/apps/s:auto", "--acks", acks, "--cluster", cpath, input=f"acks={acks}\n")
    info = topic_info(cpath, "/apps/s:auto")
    assert info["partition_count"] == 2
    assert info["messages"] == 3
    assert sorted(consume_values(cpath, "/apps/s:auto")) == ["acks=0", "acks=1", "acks=all"]


def test_default_stream_option(cpath):
    ok("stream", "create", "/apps/s", "--cluster", cpath)
    ok("produce", "t", "--default-stream", "/apps/s", "--cluster", cpath, input="a\nb\n")
    assert consume_values(cpath, "t", "--default-stream", "/apps/s") == ["a", "b"]
    assert consume_values(cpath, "/apps/s:t") == ["a", "b"]


def test_partitions_keys_and_order(cpath):
    ok("stream", "create", "/apps/s", "--default-partitions", "3", "--cluster", cpath)
    keys = [f"key-{i}" for i in range(12)]
    lines = [f"{keys[i % 12]}|{i}" for i in range(120)]
    ok(
        "produce",
        "/apps/s:t",
        "--key-separator",
        "|",
        "--cluster",
        cpath,
        input="\n".join(lines) + "\n",
    )
    records = json_lines(ok("consume", "/apps/s:t", "--format", "json", "--cluster", cpath).stdout)
    assert sorted(int(r["value"]) for r in records) == list(range(120))  # each exactly once

    partition_of: dict[str, int] = {}
    for record in records:
        assert partition_of.setdefault(record["key"], record["partition"]) == record["partition"]
    by_partition: dict[int, list[dict]] = {}
    for record in records:
        by_partition.setdefault(record["partition"], []).append(record)
    assert len(by_partition) > 1  # twelve keys do not all hash to one of three partitions
    info = topic_info(cpath, "/apps/s:t")
    for number, part in by_partition.items():
        offsets = [r["offset"] for r in part]
        assert offsets == list(range(len(part)))  # dense, in order, from 0
        values = [int(r["value"]) for r in part]
        assert values == sorted(values)  # order holds within a partition
        assert info["partitions"][number]["log_end_offset"] == len(part)

    # --partition reads one partition only
    for number, part in by_partition.items():
        only = json_lines(
            ok(
                "consume",
                "/apps/s:t",
                "--partition",
                number,
                "--format",
                "json",
                "--cluster",
                cpath,
            ).stdout
        )
        assert [r["offset"] for r in only] == [r["offset"] for r in part]
        assert {r["partition"] for r in only} == {number}
    result = fails(1, "consume", "/apps/s:t", "--partition", "3", "--cluster", cpath)
    assert "0 to 2" in result.stderr
    fails(1, "consume", "/apps/s:t", "--partition", "-1", "--cluster", cpath)


def test_consume_offset_past_the_end_says_so_on_stderr(cpath):
    ok("stream", "create", "/apps/s", "--default-partitions", "2", "--cluster", cpath)
    ok("produce", "/apps/s:t", "--partition", "1", "--cluster", cpath, input="a\nb\nc\n")
    past = ok("consume", "/apps/s:t", "--partition", "1", "--offset", "7", "--cluster", cpath)
    assert past.stdout == ""
    assert past.stderr == (
        "--offset 7 is past the end of partition 1 of /apps/s:t (log end offset 3): "
        "nothing read from it\nconsumed 0 messages\n"
    )
    # every partition: the one it reads from is not named, the ones past their end are
    both = ok("consume", "/apps/s:t", "--offset", "2", "--cluster", cpath)
    assert both.stdout == "c\n"
    assert both.stderr == (
        "--offset 2 is past the end of partition 0 of /apps/s:t (log end offset 0): "
        "nothing read from it\nconsumed 1 message\n"
    )
    at_end = ok("consume", "/apps/s:t", "--partition", "1", "--offset", "3", "--cluster", cpath)
    assert "at the end of partition 1 of /apps/s:t (log end offset 3)" in at_end.stderr
    # within the log: no warning
    inside = ok("consume", "/apps/s:t", "--partition", "1", "--offset", "1", "--cluster", cpath)
    assert inside.stdout == "b\nc\n" and inside.stderr == "consumed 2 messages\n"


def test_produce_to_explicit_partition_then_offset_within_it(cpath):
    ok("stream", "create", "/apps/s", "--default-partitions", "3", "--cluster", cpath)
    ok("produce", "/apps/s:t", "--partition", "2", "--cluster", cpath, input="a\nb\nc\n")
    assert consume_values(cpath, "/apps/s:t", "--partition", "2") == ["a", "b", "c"]
    assert consume_values(cpath, "/apps/s:t", "--partition", "0") == []
    assert consume_values(cpath, "/apps/s:t", "--partition", "2", "--offset", "1") == ["b", "c"]
    offsets = [p["log_end_offset"] for p in topic_info(cpath, "/apps/s:t")["partitions"]]
    assert offsets == [0, 0, 3]
    fails(1, "produce", "/apps/s:t", "--partition", "7", "--cluster", cpath, input="x\n")
    assert topic_info(cpath, "/apps/s:t")["messages"] == 3


def test_consume_from_time(cpath):
    ok("stream", "create", "/apps/s", "--default-partitions", "2", "--cluster", cpath)
    ok("produce", "/apps/s:t", "--key-separator", "=", "--cluster", cpath, input="a=old1\nb=old2\n")
    records = json_lines(ok("consume", "/apps/s:t", "--format", "json", "--cluster", cpath).stdout)
    newest_old = max(r["timestamp"] for r in records)
    # wait until the clock has passed the old messages' timestamps
    while int(time.time() * 1000) <= newest_old + 1:
        time.sleep(0.005)
    boundary = int(time.time() * 1000)
    while int(time.time() * 1000) <= boundary:
        time.sleep(0.005)
    ok("produce", "/apps/s:t", "--key-separator", "=", "--cluster", cpath, input="a=new1\nb=new2\n")

    assert sorted(consume_values(cpath, "/apps/s:t", "--from-time", boundary)) == [
        "new1",
        "new2",
    ]
    iso = datetime.fromtimestamp(boundary / 1000, tz=UTC).isoformat(timespec="milliseconds")
    assert sorted(consume_values(cpath, "/apps/s:t", "--from-time", iso)) == ["new1", "new2"]
    assert sorted(consume_values(cpath, "/apps/s:t", "--from-time", "0")) == [
        "new1",
        "new2",
        "old1",
        "old2",
    ]
    later = datetime.fromtimestamp(boundary / 1000 + 3600, tz=UTC).isoformat()
    assert consume_values(cpath, "/apps/s:t", "--from-time", later) == []
    result = fails(2, "consume", "/apps/s:t", "--from-time", "yesterday", "--cluster", cpath)
    assert "ISO 8601" in result.stderr


def test_consume_start_options_are_exclusive(cpath):
    ok("stream", "create", "/apps/s", "--cluster", cpath)
    ok("produce", "/apps/s:t", "--cluster", cpath, input="a\n")
    for options in (
        ("--from-beginning", "--from-end"),
        ("--offset", "0", "--from-time", "0"),
        ("--from-end", "--offset", "0"),
    ):
        result = fails(2, "consume", "/apps/s:t", *options, "--cluster", cpath)
        assert "use only one of" in result.stderr
    fails(2, "consume", "/apps/s:t", "--offset", "-1", "--cluster", cpath)
    fails(2, "consume", "/apps/s:t", "--format", "xml", "--cluster", cpath)
    fails(2, "consume", "/apps/s:t", "--max-messages", "x", "--cluster", cpath)


def test_consume_with_group_commits(cpath):
    ok("stream", "create", "/apps/s", "--default-partitions", "2", "--cluster", cpath)
    first = [f"u{i % 4}={i}" for i in range(10)]
    ok(
        "produce",
        "/apps/s:t",
        "--key-separator",
        "=",
        "--cluster",
        cpath,
        input="\n".join(first) + "\n",
    )
    got = consume_values(cpath, "/apps/s:t", "--group", "dash")
    assert sorted(map(int, got)) == list(range(10))

    again = ok("consume", "/apps/s:t", "--group", "dash", "--cluster", cpath)
    assert again.stdout == ""
    assert again.stderr == "consumed 0 messages\n"

    ok("produce", "/apps/s:t", "--key-separator", "=", "--cluster", cpath, input="u1=10\nu2=11\n")
    assert sorted(consume_values(cpath, "/apps/s:t", "--group", "dash")) == ["10", "11"]
    assert consume_values(cpath, "/apps/s:t", "--group", "dash") == []

    # the committed offsets are the group's, in the catalog: the partition ends
    with Cluster.open(cpath) as cluster:
        ends = {p.partition: p.log_end_offset for p in cluster.topic("/apps/s:t").partitions}
        consumer = Consumer(cluster, group_id="dash", enable_auto_commit=False)
        try:
            for number, end in ends.items():
                committed = consumer.committed(TopicPartition("/apps/s:t", number))
                # an empty partition's position (0) may be committed too, as in Kafka
                assert committed in ((end,) if end else (None, 0)), (number, committed, end)
        finally:
            consumer.close()

    # another group starts from the beginning; --max-messages commits only what it printed
    assert len(consume_values(cpath, "/apps/s:t", "--group", "other", "--max-messages", "5")) == 5
    rest = consume_values(cpath, "/apps/s:t", "--group", "other")
    assert len(rest) == 7


def test_consume_group_from_end_remembers_its_position(cpath):
    ok("stream", "create", "/apps/s", "--cluster", cpath)
    ok("produce", "/apps/s:t", "--cluster", cpath, input="old1\nold2\n")
    # a new group with --from-end starts at the end and reads nothing...
    assert consume_values(cpath, "/apps/s:t", "--group", "late", "--from-end") == []
    ok("produce", "/apps/s:t", "--cluster", cpath, input="x\n")
    # ...and the next run of the group goes on from there, as with Kafka's console consumer
    assert consume_values(cpath, "/apps/s:t", "--group", "late") == ["x"]


def test_consume_with_group_and_partition_commits_that_partition(cpath):
    ok("stream", "create", "/apps/s", "--default-partitions", "2", "--cluster", cpath)
    ok("produce", "/apps/s:t", "--partition", "1", "--cluster", cpath, input="a\nb\n")
    ok("produce", "/apps/s:t", "--partition", "0", "--cluster", cpath, input="z\n")
    assert consume_values(cpath, "/apps/s:t", "--group", "g", "--partition", "1") == ["a", "b"]
    assert consume_values(cpath, "/apps/s:t", "--group", "g", "--partition", "1") == []
    assert consume_values(cpath, "/apps/s:t", "--group", "g") == ["z"]


def test_consume_log_append_timestamps(cpath):
    ok("stream", "create", "/ops/logs", "--timestamp-type", "log_append", "--cluster", cpath)
    before = int(time.time() * 1000)
    ok("produce", "/ops/logs:api", "--cluster", cpath, input='{"level":"INFO"}\n')
    after = int(time.time() * 1000)
    (record,) = json_lines(
        ok("consume", "/ops/logs:api", "--format", "json", "--cluster", cpath).stdout
    )
    assert record["timestamp_type"] == "log_append"
    assert before <= record["timestamp"] <= after
    assert json.loads(record["value"]) == {"level": "INFO"}


def test_stream_and_topic_info_count_messages(cpath):
    ok("stream", "create", "/apps/s", "--cluster", cpath)
    ok("produce", "/apps/s:t", "--cluster", cpath, input="a\nbb\nccc\n")
    info = topic_info(cpath, "/apps/s:t")
    assert info["messages"] == 3
    assert info["partitions"][0]["log_end_offset"] == 3
    assert info["partitions"][0]["high_watermark"] == 3
    assert info["bytes"] > 0
    lets = info["partitions"][0]["partitionlets"]
    assert lets and lets[-1]["active"] and lets[-1]["last_offset"] == 2
    assert stream_info(cpath, "/apps/s")["messages"] == 3
    listed = ok("topic", "list", "/apps/s", "--cluster", cpath).stdout.splitlines()
    assert listed[1].split()[:3] == ["/apps/s:t", "1", "3"]


# --- demo --------------------------------------------------------------------------------


def test_demo_twice(tmp_path):
    where = tmp_path / "demo"
    first = ok("demo", "--cluster", where)
    assert "Partitionlet demo" in first.stdout
    assert "Seeded 4 streams, 6 topics and " in first.stdout
    for path in ("/apps/sensors", "/apps/clicks", "/apps/profiles", "/ops/logs"):
        assert path in first.stdout
    assert "/apps/sensors:car-17" in first.stdout
    assert "A few messages of /apps/sensors:car-17" in first.stdout
    assert "[unit=" in first.stdout
    assert "plet consume /apps/sensors:car-17" in first.stdout

    with Cluster.open(where) as cluster:
        counts = {t.name: t.messages for s in cluster.streams() for t in cluster.topics(s.path)}
    assert all(counts.values()), counts

    second = ok("demo", "--cluster", where)
    assert "Already seeded: nothing added." in second.stdout
    assert "Seeded" not in second.stdout
    with Cluster.open(where) as cluster:
        again = {t.name: t.messages for s in cluster.streams() for t in cluster.topics(s.path)}
    assert again == counts

    # the tour's commands work on the demo cluster
    values = consume_values(where, "/apps/sensors:car-17", "--max-messages", "5")
    assert len(values) == 5
    logs = json_lines(
        ok(
            "consume",
            "/ops/logs:api",
            "--format",
            "json",
            "--max-messages",
            "2",
            "--cluster",
            where,
        ).stdout
    )
    assert [r["timestamp_type"] for r in logs] == ["log_append", "log_append"]
    assert all(json.loads(r["value"])["level"] for r in logs)


def test_demo_ignores_plet_cluster_and_defaults_to_make_runs_dc1(tmp_path, monkeypatch):
    real = tmp_path / "real"
    ok("init", "--cluster", real)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    result = ok("demo", env={"PLET_CLUSTER": str(real)})
    assert "cluster 'dc1' at data/demo/dc1" in result.stdout
    assert (work / "data" / "demo" / "dc1" / "catalog.db").is_file()
    assert json.loads(ok("stream", "list", "--json", "--cluster", real).stdout) == []


# --- the installed console script, in real processes -------------------------------------


def _plet_script() -> str:
    candidate = Path(sys.executable).parent / "plet"
    if candidate.exists():
        return str(candidate)
    found = shutil.which("plet")
    if found is None:
        pytest.fail("the `plet` console script is not installed (run `make setup-test`)")
    return found


def _plet(*args: object, input: bytes | None = None, env: dict | None = None):
    environment = {k: v for k, v in os.environ.items() if k != "PLET_CLUSTER"}
    environment.update(env or {})
    return subprocess.run(
        [_plet_script(), *map(str, args)],
        input=input,
        capture_output=True,
        env=environment,
        timeout=scaled(120),
    )


def test_console_script_end_to_end(tmp_path):
    where = tmp_path / "dc1"
    done = _plet("init", "--cluster", where, "--name", "dc1")
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode().startswith("created cluster 'dc1'")

    env = {"PLET_CLUSTER": str(where)}
    done = _plet("stream", "create", "/apps/sensors", "--default-partitions", "3", env=env)
    assert done.returncode == 0, done.stderr
    lines = b"".join(f"engine-temp={40 + i}\n".encode() for i in range(20))
    done = _plet(
        "produce",
        "/apps/sensors:car-17",
        "--key-separator",
        "=",
        "--header",
        "unit=C",
        input=lines,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == b"produced 20 messages\n"
    assert done.stdout == b""

    done = _plet("consume", "/apps/sensors:car-17", "--print-key", env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout == lines.replace(b"=", b"\t")  # one key: one partition, in order

    done = _plet("consume", "/apps/sensors:car-17", "--group", "g", env=env)
    assert done.returncode == 0 and len(done.stdout.splitlines()) == 20
    done = _plet("consume", "/apps/sensors:car-17", "--group", "g", env=env)
    assert done.returncode == 0 and done.stdout == b""
    assert done.stderr == b"consumed 0 messages\n"

    # exit codes: 1 for engine errors, 2 for usage errors, never a traceback
    done = _plet("consume", "/apps/sensors:nope", env=env)
    assert done.returncode == 1
    assert done.stderr.startswith(b"error: ")
    assert b"Traceback" not in done.stderr
    done = _plet("stream", "create", "not-a-path", env=env)
    assert done.returncode == 1 and b"invalid stream path" in done.stderr
    done = _plet("consume", "/apps/sensors:car-17", "--from-end", "--offset", "1", env=env)
    assert done.returncode == 2 and b"Traceback" not in done.stderr
    done = _plet("stream", "list", "--cluster", tmp_path / "missing")
    assert done.returncode == 1 and b"no cluster at" in done.stderr
    done = _plet("--help")
    assert done.returncode == 0 and done.stdout.startswith(b"Usage: plet ")


def test_console_script_demo_twice(tmp_path):
    where = tmp_path / "demo"
    first = _plet("demo", "--cluster", where)
    assert first.returncode == 0, first.stderr
    assert b"Seeded 4 streams" in first.stdout
    second = _plet("demo", "--cluster", where)
    assert second.returncode == 0, second.stderr
    assert b"Already seeded: nothing added." in second.stdout


def test_console_script_consume_into_closed_pipe(tmp_path):
    where = tmp_path / "dc1"
    env = {"PLET_CLUSTER": str(where)}
    assert _plet("init", env=env).returncode == 0
    assert _plet("stream", "create", "/apps/s", env=env).returncode == 0
    payload = b"".join(b"%06d-" % i + b"x" * 200 + b"\n" for i in range(3000))
    assert _plet("produce", "/apps/s:t", input=payload, env=env).returncode == 0

    environment = {k: v for k, v in os.environ.items() if k != "PLET_CLUSTER"}
    environment.update(env)
    reader = subprocess.Popen(
        [_plet_script(), "consume", "/apps/s:t"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=environment,
    )
    assert reader.stdout is not None and reader.stderr is not None
    first = reader.stdout.readline()  # like `| head -1`
    reader.stdout.close()
    stderr = reader.stderr.read()
    assert reader.wait(timeout=scaled(120)) == 0, stderr
    assert first.startswith(b"000000-")
    assert b"Traceback" not in stderr


# --- commands of other packages, found by entry point ------------------------------------

FRONTEND_COMMANDS = {
    "bench": "bench.command:bench_command",
    "replay": "spark_tasks.cli:replay_group",
    "tui": "console.cli:tui_command",
    "web": "web.cli:web_command",
}


def test_frontend_commands_are_entry_points_the_root_group_lists():
    registered = entry_points(group="partitionlet.commands")
    assert {ep.name: ep.value for ep in registered} == FRONTEND_COMMANDS
    top = ok("--help").stdout
    for name in FRONTEND_COMMANDS:
        assert f"\n  {name} " in top, top
    assert "--port" in ok("web", "--help").stdout
    assert "--topic FULL_NAME" in ok("tui", "--help").stdout


def test_the_engine_names_no_frontend_module():
    # A module named in a string (for importlib or a lazy loader) is an import all the same.
    frontend = re.compile(r"(web|console|spark_tasks|bench)(\.[a-z_]+)+(:[a-z_]+)?")
    root = Path(__file__).resolve().parents[3]
    found = []
    for path in sorted((root / "engine").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and frontend.fullmatch(node.value)
            ):
                found.append(f"{path.relative_to(root)}:{node.lineno}: {node.value!r}")
    assert not found, "\n".join(found)


def test_a_missing_or_broken_command_package_is_an_error_not_a_traceback(tmp_path):
    # A distribution of our own on PYTHONPATH registers four commands: one whose package is
    # not installed, one whose import fails (as a frontend without pyspark would), one that
    # is not a command, and one that tries to take the place of a built-in command.
    info = tmp_path / "plugins_demo-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: plugins-demo\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        "[partitionlet.commands]\n"
        "ghost = no_such_package.cli:command\n"
        "broken = broken_plugin:command\n"
        "notcmd = json:dumps\n"
        "stream = json:dumps\n"
    )
    (tmp_path / "broken_plugin.py").write_text("import no_such_dependency_xyz\n")
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    env.pop("PLET_CLUSTER", None)

    def plet(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "engine.cli", *args],
            capture_output=True,
            text=True,
            env=env,
            timeout=scaled(120),
        )

    top = plet("--help")
    assert top.returncode == 0, top.stderr
    assert "ghost" not in top.stdout  # its package is not installed: not listed
    assert "(unavailable: No module named 'no_such_dependency_xyz')" in top.stdout
    assert "\n  web " in top.stdout  # the others still work

    for name, reason in [
        ("ghost", "No module named 'no_such_package'"),
        ("broken", "No module named 'no_such_dependency_xyz'"),
        ("notcmd", "json:dumps is not a click command"),
    ]:
        done = plet(name, "--some-option")
        assert done.returncode == 1, (name, done.stderr)
        assert done.stderr == f"error: 'plet {name}' is not available: {reason}\n"
        assert done.stdout == ""

    builtin = plet("stream", "--help")
    assert builtin.returncode == 0 and "Create, edit, delete, list and describe" in builtin.stdout


def test_topic_import_takes_what_consume_writes_and_refuses_a_bad_file_whole(cpath, tmp_path):
    ok("stream", "create", "/apps/imp", "--default-partitions", "2", "--cluster", cpath)
    ok("topic", "create", "/apps/imp:copy", "--cluster", cpath)
    payload = bytes([0xFF, 0x00, 0x80])
    ok(
        "produce",
        "/apps/imp:t",
        "--key-separator",
        "|",
        "--cluster",
        cpath,
        input=b"a|one\nb|" + payload + b"\n",
    )
    exported = ok("consume", "/apps/imp:t", "--format", "json", "--cluster", cpath).stdout
    path = tmp_path / "t.jsonl"
    path.write_text(exported)
    dry = ok("topic", "import", "/apps/imp:copy", path, "--dry-run", "--cluster", cpath)
    assert dry.stdout.startswith("dry run: 2 messages into /apps/imp:copy: ")
    assert dry.stdout.endswith(" Nothing was written.\n")
    assert ok("consume", "/apps/imp:copy", "--cluster", cpath).stdout == ""
    done = ok("topic", "import", "/apps/imp:copy", path, "--cluster", cpath)
    assert done.stdout == "imported 2 messages into /apps/imp:copy\n"

    def shape(records):
        return sorted(
            (
                r["partition"],
                r["offset"],
                r["timestamp"],
                r["key"],
                r["value"],
                r["value_encoding"],
                r["headers"],
            )
            for r in records
        )

    copied = ok("consume", "/apps/imp:copy", "--format", "json", "--cluster", cpath).stdout
    assert shape(json_lines(copied)) == shape(json_lines(exported))
    # a bad line: every one said, nothing written, exit 1
    bad = tmp_path / "bad.ndjson"
    bad.write_text('{"value": "fine"}\n{"value": 5}\n{"value": "x", "partition": 9}\n')
    result = fails(1, "topic", "import", "/apps/imp:copy", bad, "--cluster", cpath)
    assert result.stderr.splitlines() == [
        "line 2: value must be text or null, not int",
        "line 3: partition 9: /apps/imp:copy has partitions 0 to 1 (import by key instead "
        "of the file's partitions)",
        "error: Nothing written: 2 lines refused.",
    ]
    assert (
        len(
            json_lines(
                ok("consume", "/apps/imp:copy", "--format", "json", "--cluster", cpath).stdout
            )
        )
        == 2
    )
    fails(
        1,
        "topic",
        "import",
        "/apps/imp:copy",
        tmp_path / "t.jsonl",
        "--format",
        "csv",
        "--cluster",
        cpath,
    )
    other = tmp_path / "t.txt"
    other.write_text(exported)
    assert (
        "give --format"
        in fails(1, "topic", "import", "/apps/imp:copy", other, "--cluster", cpath).stderr
    )
