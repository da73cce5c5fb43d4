"""A user's effective permissions page (web/users.py, /users/<name>/permissions): streams
by policies with yes/no marks and the ACE text; a user sees their own, an administrator
anyone's; bad names and arguments are 400/403/404 with a message, never 500."""

from __future__ import annotations

import html
import re

from engine import Principal
from tests.web.conftest import ADMIN, USER


def text(answer) -> str:
    return html.unescape(answer.get_data(as_text=True))


def _row(page: str, stream: str) -> list[str]:
    """The answers (yes/no) of one stream's row, in the columns' order."""
    row = re.search(
        rf"<tr>\s*<td class=\"wrap\"><a [^>]*>{re.escape(stream)}</a>.*?</tr>", page, re.S
    )
    assert row, f"no row for {stream}"
    return re.findall(r"</span>(yes|no)\b", row.group(0))


def test_own_and_others_permissions(client, user_client, cluster):
    alice = cluster.as_principal(Principal(USER, ("analysts",)))
    alice.create_stream("/apps/mine", consume_perm="g:analysts & !u:alice", copy_perm="!p")
    cluster.create_stream("/apps/shared", consume_perm="g:analysts", produce_perm="u:bob")
    cluster.create_stream("/other/x")

    page = text(user_client.get(f"/users/{USER}/permissions"))
    assert "Effective permissions of alice" in page and "analysts" in page
    # produce, consume, unmask, topic, copy, admin
    assert _row(page, "/apps/mine") == ["yes", "no", "yes", "yes", "no", "yes"]
    assert _row(page, "/apps/shared") == ["no", "yes", "no", "no", "no", "no"]
    assert "g:analysts &amp; !u:alice" in user_client.get(f"/users/{USER}/permissions").get_data(
        as_text=True
    )
    assert 'aria-hidden="true">✓' in page and 'aria-hidden="true">✗' in page
    assert f'href="/users/{USER}/permissions"' in text(user_client.get("/"))  # her name

    # somebody else's: refused to her, whether they exist or not; shown to an administrator
    for name in (ADMIN, "nobody"):
        refused = user_client.get(f"/users/{name}/permissions")
        assert refused.status_code == 403
        assert "only a cluster administrator" in text(refused)
    seen = text(client.get(f"/users/{USER}/permissions"))
    assert _row(seen, "/apps/mine") == ["yes", "no", "yes", "yes", "no", "yes"]
    own = text(client.get(f"/users/{ADMIN}/permissions"))
    assert _row(own, "/other/x") == ["yes"] * 6 and "(administrator)" in own
    assert f'href="/users/{USER}/permissions"' in text(client.get("/users"))  # users list


def test_filter_paging_and_bad_arguments(client, cluster):
    for i in range(25):
        cluster.create_stream(f"/p/{i:02}")
    cluster.create_stream("/q/only")
    page = text(client.get(f"/users/{USER}/permissions?q=p&size=20&page=2"))
    assert "Streams 21–25 of 25 whose path starts with /p" in re.sub(r"<[^>]+>", "", page)
    assert "/p/24" in page and "/p/00<" not in page and "/q/only" not in page
    partial = client.get(f"/users/{USER}/permissions?q=/q", headers={"HX-Request": "true"})
    assert "<html" not in text(partial) and "/q/only" in text(partial)
    far = text(client.get(f"/users/{USER}/permissions?q=p&size=20&page=99"))
    assert "page 2 of 2" in far  # past the end: the last page
    for url, status, words in (
        (f"/users/{USER}/permissions?size=7", 400, "size must be one of"),
        (f"/users/{USER}/permissions?page=abc", 400, "page must be a whole number"),
        (f"/users/{USER}/permissions?page=0", 400, "page must be 1 or more"),
        ("/users/bad%20name!/permissions", 400, "invalid user name"),
        ("/users/nobody/permissions", 404, "no user 'nobody'"),
    ):
        answer = client.get(url)
        assert answer.status_code == status, url
        assert words in text(answer), url
