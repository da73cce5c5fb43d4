"""What every view needs: the cluster, the logged-in user's principal, and rendering a page
or, for an htmx request, just the partial it asked for."""

from __future__ import annotations

from typing import Any

from flask import current_app, g, render_template
from htmx_flask import request

from engine.auth.principal import Principal


def cluster():
    """The cluster as the logged-in user: a view (`Cluster.as_principal`) of the app's
    shared, thread-safe `Cluster`, so every engine call checks that user's ACEs. Before
    login (and for the API's own token checks) it is the app's cluster itself."""
    view = g.get("cluster")
    if view is not None:
        return view
    return app_cluster()


def app_cluster():
    """The app's own `Cluster` (acting as the operating-system user running the server):
    for authentication and background work only, never for a user's request."""
    from web import state

    return state(current_app).cluster


def cluster_path() -> str:
    from web import state

    return state(current_app).cluster_path


def user():
    """The logged-in `engine.auth.users.UserInfo` (web/auth.py sets it before every view)."""
    return g.user


def principal() -> Principal:
    """Whom the engine checks ACEs against in this request (`cluster()` already acts as
    them; pass it where an API takes `principal=` explicitly)."""
    return g.user.principal


def wants_partial() -> bool:
    """An htmx request for a part of a page (not a boosted navigation, nor a history
    restore, which need the whole page)."""
    return (
        bool(request.htmx) and not request.htmx.boosted and not request.htmx.history_restore_request
    )


def render(page: str, partial: str | None = None, **context: Any) -> str:
    """The full `page` template, or `partial` alone when htmx asked for a part.

    A page template includes its partial, so both always show the same thing.
    """
    if partial is not None and wants_partial():
        return render_template(partial, **context)
    return render_template(page, **context)


# The main navigation: (endpoint, label), shown when the endpoint is registered.
# (endpoint, label): the item is the current page's on every page of the endpoint's
# blueprint, except where SECTIONS says which blueprints and endpoints it stands for (the
# search blueprint serves the topic listing and the name search, which is no nav item)
NAV = (
    ("overview.index", "Overview"),
    ("streams.index", "Streams"),
    ("search.topics", "Topics"),
    ("schemas.index", "Schemas"),
    ("groups.index", "Consumer groups"),
    ("transactions.index", "Transactions"),
    ("replication.index", "Replication"),
    ("heat.index", "Heat"),
    ("replays.index", "Replays"),
    ("users.index", "Users"),
)


SECTIONS = {"search.topics": {"topics", "search.topics"}}


def _is_current(endpoint: str) -> bool:
    """Whether the nav item of `endpoint` is the section of the page being served."""
    section = SECTIONS.get(endpoint, {endpoint.split(".")[0]})
    return request.blueprint in section or request.endpoint in section


def init_app(app) -> None:
    @app.context_processor
    def page_globals() -> dict[str, Any]:
        def has_endpoint(endpoint: str) -> bool:
            return endpoint in current_app.view_functions

        return {
            "cluster_name": lambda: cluster().name,
            "cluster_id": lambda: cluster().id,
            "nav_items": lambda: [
                (e, label, _is_current(e)) for e, label in NAV if has_endpoint(e)
            ],
            "has_endpoint": has_endpoint,
        }
