"""`GET /api/v1/metrics`: one series of the metrics history (engine.ops.metrics).

Arguments: `scope` (cluster, stream, topic, group, replica; default cluster), `name` (a
stream path, a topic's full name, a group id, or `STREAM -> TARGET` for a replication
link; none for the cluster), `metric` (default write_messages) and `window` (1h, 6h, 24h,
7d or whole seconds; default 1h). A series of a stream, topic, group or link is answered
to whoever the console shows that stream, topic, group or link to (web/charts.py), 404
otherwise; a bad argument is a 400 with the engine's message. The token's owner is
authenticated by web/api/resources.py's `before_request`, as for every resource endpoint.
"""

from __future__ import annotations

from flask import Response, request

from web.api import api
from web.api.base import json_response
from web.charts import check_visible, parse_window, series_json
from web.pages import cluster


@api.route("/metrics")
def metrics() -> Response:
    scope = request.args.get("scope") or "cluster"
    name = request.args.get("name", "")
    metric = request.args.get("metric") or "write_messages"
    window_s = parse_window(request.args.get("window"))
    c = cluster()
    # the engine checks scope, metric and window first: a bad one is a 400, not a lookup
    series = c.metrics(scope, name, metric=metric, window_s=window_s)
    check_visible(c, scope, name)
    return json_response(series_json(series))
