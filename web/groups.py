"""Consumer groups: the list with state, members and lag; a group's members, assignment,
committed offsets and lag per partition; resetting its offsets on one of its topics (all
partitions or some, to earliest, latest, an offset, a time or shifted by N), with a
preview of the new offsets and lags before applying; and deleting a group.

A group is shown to the users its describe_perm lets in (by default its creator;
administrators always), and in it only the topics they may consume; previewing and
resetting offsets need its reset_perm and the consume permission of the topic (one the group
already has), deleting it its delete_perm: `Cluster.groups`, `group`, `plan_offset_reset`,
`apply_offset_reset` and `delete_group` check them as the logged-in user
(engine.groups.perms; docs/WEB.md, "Consumer group permissions"). The group's own ACEs are
edited in a form (its creator and administrators: `Cluster.set_group_permissions`).

The preview's Apply sends the previewed plan back (partition, committed offset, new
offset); the server plans again from the same form and applies only if both agree, so what
is applied is exactly what was shown, or the user is told the log moved and sees the new
preview.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from flask import Blueprint, make_response, redirect, request, url_for

from engine import errors
from engine.groups import ResetTarget, form_target, parse_partitions
from engine.groups.grammar import TARGET_KINDS
from engine.groups.perms import PERMS, ace_errors
from engine.records import GroupInfo, OffsetResetPlan, TopicPartition
from web.pages import cluster, render, wants_partial

groups = Blueprint("groups", __name__)

# The CSS class of each of Kafka's group states (app.css: .state-<class>).
_STATE_CLASSES = {"Stable": "stable", "Empty": "empty", "PreparingRebalance": "rebalancing"}


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
    """The reset form's values as typed, its errors per field, the preview and the outcome."""

    topic: str = ""
    to: str = "earliest"
    offset: str = ""
    time: str = ""
    shift: str = ""
    partitions: str = ""
    errors: dict[str, str] = field(default_factory=dict)
    plan: list[OffsetResetPlan] | None = None  # the preview shown
    moved: bool = False  # Apply found the log or the offsets changed since the preview
    result: dict[TopicPartition, int] | None = None

    @classmethod
    def from_request(cls) -> ResetForm:
        form = request.form
        return cls(
            topic=(form.get("topic") or "").strip(),
            to=(form.get("to") or "").strip(),
            offset=(form.get("offset") or "").strip(),
            time=(form.get("time") or "").strip(),
            shift=(form.get("shift") or "").strip(),
            partitions=(form.get("partitions") or "").strip(),
        )

    def chosen_partitions(self) -> list[int] | None:
        try:
            return parse_partitions(self.partitions)
        except errors.InvalidArgument as exc:
            self.errors["partitions"] = str(exc)
            return None

    def target(self, topics: list[str]) -> ResetTarget | None:
        """What to reset to (the engine's grammar); None (with `errors` set) if the input
        is bad."""
        if self.topic not in topics:
            self.errors["topic"] = "Choose one of the group's topics."
        if self.to not in TARGET_KINDS:
            self.errors["to"] = "Choose earliest, latest, an offset, a time or a shift."
            return None
        value = {"offset": self.offset, "time": self.time, "shift": self.shift}.get(self.to, "")
        try:
            target = form_target(self.to, value)
        except (errors.InvalidArgument, errors.InvalidOffset) as exc:
            message = str(exc)
            self.errors[self.to] = message[:1].upper() + message[1:]  # a field's sentence
            return None
        return None if self.errors else target


def _posted_plan() -> list[tuple[int, int | None, int]] | None:
    """The preview the Apply button sends back: [(partition, current, new)], or None if
    it is missing or not that shape."""
    try:
        rows = json.loads(request.form.get("plan") or "")
    except (ValueError, RecursionError):  # a hostile plan may nest deeply
        return None
    ok = isinstance(rows, list) and all(
        isinstance(r, list)
        and len(r) == 3
        and all(isinstance(x, int) and not isinstance(x, bool) for x in (r[0], r[2]))
        and (r[1] is None or (isinstance(r[1], int) and not isinstance(r[1], bool)))
        for r in rows
    )
    return [tuple(r) for r in rows] if ok else None


def plan_json(plan: list[OffsetResetPlan]) -> str:
    """The preview as the Apply button sends it back."""
    return json.dumps([[p.partition, p.current, p.new] for p in plan])


@groups.app_template_filter("reset_plan_json")
def _reset_plan_json(plan: list[OffsetResetPlan]) -> str:
    return plan_json(plan)


@groups.route("/groups")
def index():
    deleted = request.args.get("deleted", "")[:300]
    return render(
        "groups/index.html", "groups/_list.html", groups=cluster().groups(), deleted=deleted
    )


@groups.route("/groups/<path:group_id>", methods=["GET", "POST"])
def group(group_id: str):
    """GET: the group page (or, for htmx polling, its live part). POST: preview
    (`action=preview`), apply a preview (`action=apply` with `plan`), reset at once
    (no action: the form without a preview), or delete the group (`action=delete`, then
    with `confirm=yes`); the reset actions are answered with the form (htmx: the form
    alone, and after a change an `offsets-reset` event that makes the live part reload)."""
    c = cluster()
    if request.method == "GET":
        info = c.group(group_id)
        topics = group_topics(info)
        form = ResetForm(topic=(topics or [""])[0])
        return render(
            "groups/group.html",
            "groups/_live.html",
            group=info,
            form=form,
            topics=topics,
            perms=c.group_permissions(group_id),
        )

    info = c.group(group_id)  # an unknown group is a 404, before anything is changed
    action = request.form.get("action") or "reset"
    if action == "delete":
        return _delete(c, info)
    if action == "perms":
        return _set_perms(c, info)
    topics = group_topics(info)
    form = ResetForm.from_request()
    status = 200
    to = form.target(topics)
    partitions = form.chosen_partitions()
    if action not in ("reset", "preview", "apply"):
        form.errors["form"] = "Unknown action: use Preview or Apply."
    posted = _posted_plan() if action == "apply" else None
    if action == "apply" and posted is None and not form.errors:
        form.errors["form"] = "The preview sent back is missing or damaged: preview again."
    if form.errors:
        status = 400
    else:
        try:
            plan = c.plan_offset_reset(group_id, form.topic, to, partitions=partitions)
            if action == "preview":
                form.plan = plan
            elif action == "apply" and [(p.partition, p.current, p.new) for p in plan] != posted:
                form.plan, form.moved, status = plan, True, 409
                form.errors["form"] = (
                    "The log or the group's offsets moved since the preview: nothing was "
                    "changed. Check the new preview below and apply again."
                )
            else:
                form.result = c.apply_offset_reset(group_id, plan)
        except errors.AccessDenied as exc:
            form.errors["form"], status = str(exc), 403
        except errors.IllegalState as exc:  # live members: Kafka refuses too
            form.errors["form"], status = str(exc), 409
        except errors.InvalidPartition as exc:
            form.errors["partitions"], status = str(exc), 400
        except errors.InvalidOffset as exc:  # a shift where nothing is committed, ...
            form.errors["shift" if form.to == "shift" else "form"], status = str(exc), 400
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
    page = render(
        "groups/group.html",
        group=info,
        form=form,
        topics=topics,
        perms=c.group_permissions(group_id),
    )
    return page, status


def _set_perms(c, info: GroupInfo):
    """POST `action=perms`: the group's own ACEs, one field per permission (blank: back
    to the default, or the prefix rule that applies). Every bad ACE is shown next to its
    field with the engine's message (400) and nothing changes; a user who is neither the
    group's creator nor an administrator is refused by the engine (403)."""
    group_id = info.group_id
    values = {perm: (request.form.get(perm) or "").strip() for perm in PERMS}
    found = ace_errors(values)
    status = 400 if found else 200
    if not found:
        try:
            c.set_group_permissions(group_id, **values)
        except errors.AccessDenied as exc:
            found["form"], status = str(exc), 403
        except ValueError as exc:  # a check the form's did not make
            found["form"], status = str(exc), 400
    context = {
        "group": info,
        "perms": c.group_permissions(group_id),
        "perm_values": values if found else None,
        "perm_errors": found,
        "perm_saved": not found,
    }
    if wants_partial():
        return render("groups/group.html", "groups/_perms.html", **context)
    topics = group_topics(info)
    return render(
        "groups/group.html", form=ResetForm(topic=(topics or [""])[0]), topics=topics, **context
    ), status


def _delete(c, info: GroupInfo):
    """POST `action=delete` (on the group's own URL: a group id may hold "/", so no
    sub-path could be told from it). Two steps: without `confirm=yes`, a page that asks;
    with it, delete the group and go to the list (htmx: by HX-Redirect)."""
    group_id = info.group_id
    if request.form.get("confirm") != "yes":
        return render("groups/delete.html", group=info, error="")
    try:
        c.delete_group(group_id)
    except errors.AccessDenied as exc:
        return render("groups/delete.html", group=info, error=str(exc)), 403
    except errors.IllegalState as exc:  # a consumer joined meanwhile
        return render("groups/delete.html", group=c.group(group_id), error=str(exc)), 409
    except errors.NotFound:  # deleted meanwhile by someone else: the outcome wanted
        pass
    target = url_for("groups.index", deleted=group_id)
    if wants_partial():
        return "", 200, {"HX-Redirect": target}
    return redirect(target, code=303)
