"""Replay jobs over the API: list, submit, status, cancel (spark_tasks.jobs; no pyspark here).

The same rules as the Replays page (web/replays.py): a job's process runs as the server's
OS user and checks no ACE, so these checks are the only gate. Submitting needs
consume_perm on the source stream, produce_perm on the target's stream (and topic_perm
when the job would create the target topic); what would run code or touch files on the
server (a `custom` job, `output` paths, the Spark `master` and `conf`) is for administrators
only. A job's result, error and log are shown to administrators and to whoever may consume
its source; only its submitter (`submitted_by`) and administrators may cancel it.
"""

from __future__ import annotations

from typing import Any

from flask import Response

from engine import errors, names
from engine.auth import acl
from spark_tasks import jobs as jobs_api
from web.api import api
from web.api.base import field, json_body, json_response, query_int
from web.pages import cluster, cluster_path, user

# Parameters a job takes (spark_tasks.jobs.check_params validates their values).
PARAMS = frozenset(
    {
        "source",
        "stream",
        "topic_pattern",
        "target",
        "from_offset",
        "to_offset",
        "from_time",
        "to_time",
        "window",
        "output",
        "file",
        "function",
        "master",
        "conf",
    }
)
ADMIN_PARAMS = frozenset({"output", "file", "function", "master", "conf"})
ADMIN_KINDS = frozenset({"custom"})
# Who submitted a job (the Replays page records it under the same name).
SUBMITTED_BY = "submitted_by"
# What only those who may read the job's source see.
PRIVATE_FIELDS = ("result", "error", "log_tail")


def _require(perm: str, stream: str) -> None:
    info = cluster().stream(stream)
    who = user().principal
    if not acl.check(info.policies[perm], who, info.creator, policy=perm):
        raise errors.AccessDenied(
            f"user {who.user!r} may not use stream {stream} in a replay: {perm} is "
            f"{info.policies[perm]!r} (creator {info.creator!r})"
        )


def _source_stream(params: dict[str, Any]) -> str | None:
    source = params.get("source")
    if isinstance(source, str) and source:
        return names.split_full_name(source)[0]
    stream = params.get("stream")
    if isinstance(stream, str) and stream:
        names.validate_stream_path(stream)
        return stream
    return None


def check_submit(kind: str, params: dict[str, Any]) -> None:
    """Raise AccessDenied (or NotFound, InvalidArgument) unless the user may run this job."""
    if not user().admin:
        if kind in ADMIN_KINDS:
            raise errors.AccessDenied(
                f"only administrators may run {kind} jobs: they run a Python file on the server"
            )
        forbidden = sorted(ADMIN_PARAMS & {k for k, v in params.items() if v is not None})
        if forbidden:
            raise errors.AccessDenied(f"only administrators may set {', '.join(forbidden)}")
    c = cluster()
    source = params.get("source")
    if isinstance(source, str) and source:
        c.topic(source)  # UnknownTopic: 404
    stream = _source_stream(params)
    if stream is not None:
        _require("consume_perm", stream)
    target = params.get("target")
    if isinstance(target, str) and target:
        target_stream = names.split_full_name(target)[0]
        _require("produce_perm", target_stream)
        try:
            c.topic(target)
        except errors.UnknownTopic:
            _require("topic_perm", target_stream)  # the job creates it
        if target == source:
            raise errors.InvalidArgument("the target must differ from the source")


def may_see(job: jobs_api.Job) -> bool:
    if user().admin:
        return True
    try:
        stream = _source_stream(job.params)
        if stream is None:
            return False
        _require("consume_perm", stream)
    except (errors.PartitionletError, ValueError):
        return False
    return True


def job_json(job: jobs_api.Job) -> dict[str, Any]:
    data = job.to_dict()
    data.pop("cluster", None)  # the server's directory: nothing a client needs
    data.pop("log_path", None)
    data["done"] = job.done
    data["submitted_by"] = job.params.get(SUBMITTED_BY)
    if not may_see(job):
        for name in PRIVATE_FIELDS:
            data[name] = None
        data["hidden"] = True
    return data


@api.route("/jobs")
def list_jobs() -> Response:
    """Jobs, newest first: `limit` (default 100)."""
    limit = query_int("limit", 100, minimum=1, maximum=1000)
    found = jobs_api.list(cluster=cluster_path(), limit=limit)
    return json_response({"jobs": [job_json(j) for j in found]})


@api.route("/jobs", methods=["POST"])
def submit_job() -> Response:
    """`{"kind": "copy", "params": {"source": "/s:t", "target": "/s:t2", ...}}` -> the job
    (201)."""
    body = json_body()
    kind = field(body, "kind", str, required=True)
    params = field(body, "params", dict) or {}
    if kind not in jobs_api.KINDS:
        raise errors.InvalidArgument(
            f"unknown job kind {kind!r}: one of {', '.join(jobs_api.KINDS)}"
        )
    unknown = sorted(set(params) - PARAMS)
    if unknown:
        raise errors.InvalidArgument(f"unknown job parameter(s): {', '.join(unknown)}")
    check_submit(kind, params)
    jobs_api.check_params(kind, dict(params))  # 400 before anything is recorded
    job_id = jobs_api.submit(cluster_path(), kind, **params, **{SUBMITTED_BY: user().name})
    return json_response(job_json(jobs_api.status(job_id, cluster=cluster_path())), 201)


@api.route("/jobs/<int:job_id>")
def job(job_id: int) -> Response:
    return json_response(job_json(jobs_api.status(job_id, cluster=cluster_path())))


@api.route("/jobs/<int:job_id>/cancel", methods=["POST"])
def cancel_job(job_id: int) -> Response:
    """Cancel a job: its submitter or an administrator."""
    found = jobs_api.status(job_id, cluster=cluster_path())
    me = user()
    if not me.admin and found.params.get(SUBMITTED_BY) != me.name:
        raise errors.AccessDenied(
            f"user {me.name!r} may not cancel job {job_id}: only its submitter or an "
            "administrator may"
        )
    return json_response(job_json(jobs_api.cancel(job_id, cluster=cluster_path())))
