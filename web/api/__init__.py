"""The JSON API, mounted at `/api/v1/` (docs/API.md is its reference).

Two kinds of bearer token open it, never a session cookie:

- per-user API tokens (`plet user token`, the Users page) open the resource endpoints
  (web/api/resources.py, web/api/jobs.py); the request acts as that user, through
  `Cluster.as_principal`, so stream ACEs apply exactly as in the console;
- per-stream replication tokens (`plet replica token`) open `POST /replication/<op>` only
  (web/api/replication.py), the door other clusters' replicators use.

The blueprint is exempt from CSRF protection (web/__init__.py): CSRF rides on credentials
a browser adds by itself (cookies), and this API ignores cookies altogether and takes only
an `Authorization` header, which a cross-site page cannot make a browser send.

Every answer is JSON; errors are `{"error": ClassName, "message": ...}` with 400 (bad input),
401 (no or unknown token, with `WWW-Authenticate: Bearer`), 403 (an ACE refuses), 404, 409.
"""

from __future__ import annotations

from flask import Blueprint

api = Blueprint("api", __name__)

# The modules register their routes on `api` when imported.
from web.api import jobs, metrics, replication, resources, search  # noqa: E402, F401

__all__ = ["api"]
