"""Consumer groups: the list with state, members and lag; a group's members, assignment,
committed offsets and lag per partition; and resetting its offsets on one of its topics.

Group metadata (ids, members, offsets) is shown to every logged-in user, as the engine's
`groups()` checks no ACE; resetting offsets needs `admin_perm` on the topic's stream, which
`Cluster.reset_offsets` checks as the logged-in user.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from flask import Blueprint, make_response, request

from engine import errors, times
from engine.records import GroupInfo, TopicPartition
from web.messages import MAX_WHOLE, whole
from web.pages import cluster, render, wants_partial

groups = Blueprint("groups", __name__)

# The CSS class of each of Kafka's group states (app.css: .state-<class>).
_STATE_CLASSES = {"Stable": "stable", "Empty": "empty", "PreparingRebalance": "rebalancing"}
RESET_TARGETS = ("earliest", "latest", "offset", "time")


@groups.app_template_filter("group_state_class")
def group_state_class(state: str) -> str:
    return _STATE_CLASSES.get(state, state.lower())


@groups.app_template_filter("group_owners")
def group_owners(info: GroupInfo) -> dict[tuple[str, int], str]:
    """(topic, partition) -> the id of the member it is assigned to."""
    return {(tp.topic, tp.partition): m.member_id for m in info.members for tp in m.assignment}


def group_topics(info: GroupInfo) -> list[str]:
    """The full names of the topics the group has offsets in or is assigned, sorted."""
    names = {p.topic for p in info.partitions}
    names.update(tp.topic for m in info.members for tp in m.assignment)
    return sorted(names)


@dataclass
class ResetForm:
    """The reset form's values as typed, its errors per field, and the outcome."""

    topic: str = ""
    to: str = "earliest"
    offset: str = ""
    time: str = ""
    errors: dict[str, str] = field(default_factory=dict)
    result: dict[TopicPartition, int] | None = None

    @classmethod
    def from_request(cls) -> ResetForm:
        form = request.form
        return cls(
            topic=(form.get("topic") or "").strip(),
            to=(form.get("to") or "").strip(),
            offset=(form.get("offset") or "").strip(),
            time=(form.get("time") or "").strip(),
        )

    def target(self, topics: list[str]) -> str | int | datetime | None:
        """What to reset to, as `reset_offsets` takes it; None (with `errors` set) if the
        input is bad."""
        if self.topic not in topics:
            self.errors["topic"] = "Choose one of the group's topics."
        if self.to not in RESET_TARGETS:
            self.errors["to"] = "Choose earliest, latest, an offset or a time."
            return None
        if self.to == "offset":
            offset = whole(self.offset)  # ASCII digits that fit int64, else None
            if offset is None:
                self.errors["offset"] = (
                    f"An offset is a whole number from 0 to {MAX_WHOLE:,}, "
                    f"not {self.offset[:40]!r}."
                )
                return None
            return None if self.errors else offset
        if self.to == "time":
            try:
                moment = times.to_datetime(times.parse_time(self.time))
            except errors.InvalidArgument as exc:
                self.errors["time"] = str(exc)
                return None
            return None if self.errors else moment
        return None if self.errors else self.to


@groups.route("/groups")
def index():
    return render("groups/index.html", "groups/_list.html", groups=cluster().groups())


@groups.route("/groups/<path:group_id>", methods=["GET", "POST"])
def group(group_id: str):
    """GET: the group page (or, for htmx polling, its live part). POST: reset offsets,
    answered with the form (htmx: the form alone, and an `offsets-reset` event that makes
    the live part reload at once)."""
    c = cluster()
    if request.method == "GET":
        info = c.group(group_id)
        topics = group_topics(info)
        form = ResetForm(topic=(topics or [""])[0])
        return render(
            "groups/group.html", "groups/_live.html", group=info, form=form, topics=topics
        )

    info = c.group(group_id)  # an unknown group is a 404, before anything is changed
    topics = group_topics(info)
    form = ResetForm.from_request()
    status = 200
    to = form.target(topics)
    if form.errors:
        status = 400
    else:
        try:
            form.result = c.reset_offsets(group_id, form.topic, to)  # type: ignore[arg-type]
        except errors.AccessDenied as exc:
            form.errors["form"], status = str(exc), 403
        except errors.IllegalState as exc:  # live members: Kafka refuses too
            form.errors["form"], status = str(exc), 409
        except (errors.NotFound, ValueError) as exc:  # topic deleted meanwhile, bad offset
            form.errors["form"], status = str(exc), 400
        info = c.group(group_id)
    if wants_partial():
        # htmx swaps 2xx answers only: the form with its errors is the answer either way
        response = make_response(
            render("groups/group.html", "groups/_reset.html", group=info, form=form, topics=topics)
        )
        if form.result is not None:
            response.headers["HX-Trigger"] = "offsets-reset"
        return response
    return render("groups/group.html", group=info, form=form, topics=topics), status
