"""Replay jobs over the API: list, submit, status, cancel (spark_tasks.jobs; no pyspark here).

The same rules as the Replays page (web/replays.py), all made by spark_tasks.jobs as the
token's user: `submit` checks consume_perm on the source stream, produce_perm on the
target's stream (and topic_perm when the job would create the target topic), and that what
would run code or touch files on the server (a `custom` job, `output` paths, the Spark
`master` and `conf`) comes from an administrator (`jobs.refusals`). A job's result, error
and log are shown to administrators and to whoever may consume its source (`jobs.may_see`);
only its submitter (`submitted_by`) and administrators may cancel it (`jobs.may_cancel`).
The runner's `pid` and `host` are the server's: only administrators get them.
"""

from __future__ import annotations

from typing import Any

from flask import Response

from engine import errors
from spark_tasks import jobs as jobs_api
from web.api import api
from web.api.base import field, json_body, json_response, query_int
from web.pages import cluster, cluster_path, principal, user

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
# What only those who may read the job's source see.
PRIVATE_FIELDS = ("result", "error", "log_tail")
# The runner's process id and host: the server's, for its administrators only.
PROCESS_FIELDS = ("pid", "host")


def job_json(job: jobs_api.Job) -> dict[str, Any]:
    data = job.to_dict()
    data.pop("cluster", None)  # the server's directory: nothing a client needs
    data.pop("log_path", None)
    data["done"] = job.done
    data["submitted_by"] = job.params.get(jobs_api.SUBMITTED_BY)
    if not cluster().is_administrator:
        for name in PROCESS_FIELDS:
            data.pop(name, None)
    if not jobs_api.may_see(cluster(), job):
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
    job_id = jobs_api.submit(cluster_path(), kind, principal=principal(), warm=True, **params)
    return json_response(job_json(jobs_api.status(job_id, cluster=cluster_path())), 201)


@api.route("/jobs/<int:job_id>")
def job(job_id: int) -> Response:
    return json_response(job_json(jobs_api.status(job_id, cluster=cluster_path())))


@api.route("/jobs/<int:job_id>/cancel", methods=["POST"])
def cancel_job(job_id: int) -> Response:
    """Cancel a job: its submitter or an administrator."""
    found = jobs_api.status(job_id, cluster=cluster_path())
    if not jobs_api.may_cancel(cluster(), found):
        raise errors.AccessDenied(
            f"user {user().name!r} may not cancel job {job_id}: only its submitter or an "
            "administrator may"
        )
    return json_response(job_json(jobs_api.cancel(job_id, cluster=cluster_path())))
