"""The header's search, the search page, `/streams?q=` finding topics in any stream, the
stream page's topic search by any fragment, the all-topics page and `/api/v1/search`."""

from __future__ import annotations

import re
from html import unescape

import pytest


def _text(answer) -> str:
    return unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", answer.get_data(as_text=True))))


def _links(answer) -> list[str]:
    return re.findall(r'<a href="(/(?:topics|streams)/[^"]+)"', answer.get_data(as_text=True))


@pytest.fixture
def named(cluster):
    cluster.create_stream("/apps/sensors", default_partitions=1)
    cluster.create_stream("/logistics/fleet", default_partitions=1)
    for name in ("car-17", "fleet-status", "bus-9000"):
        cluster.create_topic(f"/apps/sensors:{name}")
    cluster.create_topic("/logistics/fleet:positions")
    return cluster


def test_every_page_has_the_header_search(client, named):
    page = client.get("/streams").get_data(as_text=True)
    assert 'aria-label="Find streams and topics"' in page
    assert 'hx-target="#search-live"' in page and 'name="q"' in page


def test_search_page_finds_a_middle_fragment_across_streams(client, named):
    answer = client.get("/search?q=eet-sta")
    assert answer.status_code == 200
    assert "/topics/apps/sensors:fleet-status" in _links(answer)
    fleet = client.get("/search?q=fleet")
    links = _links(fleet)
    # topics that start with it, then the stream that contains it
    assert links[:2] == ["/topics/apps/sensors:fleet-status", "/streams/logistics/fleet"]
    assert "2 names contain “fleet”" in _text(fleet)


def test_live_results_are_a_short_fragment_with_a_link_to_all(client, named):
    answer = client.get(
        "/search?q=us-90", headers={"HX-Request": "true", "HX-Target": "search-live"}
    )
    html = answer.get_data(as_text=True)
    assert "<html" not in html and "/topics/apps/sensors:bus-9000" in html
    assert "/search?q=us-90" in html  # All results


def test_short_and_missing_text_say_why(client, named):
    assert "at least 3 characters" in _text(client.get("/search?q=ca"))
    assert "No stream or topic name contains “zzzz”" in _text(client.get("/search?q=zzzz"))


def test_streams_q_finds_topics_in_any_stream(client, named):
    answer = client.get("/streams?q=fleet")
    assert answer.status_code == 200
    links = _links(answer)
    assert "/topics/apps/sensors:fleet-status" in links
    assert "/streams/logistics/fleet" in links


def test_stream_topic_search_shows_real_matches(client, named):
    answer = client.get("/streams/apps/sensors?tq=ar-1")
    text = _text(answer)
    assert "No topic's name starts with ar-1 ; 1 contain it:" in text
    assert "/topics/apps/sensors:car-17" in _links(answer)


def test_all_topics_page_sorts_and_pages(client, named):
    answer = client.get("/topics")
    assert answer.status_code == 200
    assert 'href="/topics"' in client.get("/streams").get_data(as_text=True)  # navigation
    names = re.findall(r'<a href="/topics/([^"]+)"', answer.get_data(as_text=True))
    assert names == sorted(names, key=lambda n: n.split(":")[1])
    first = client.get("/topics?size=20&sort=stream")
    assert re.findall(r'<a href="/topics/([^"]+)"', first.get_data(as_text=True))[0] == (
        "apps/sensors:bus-9000"
    )
    assert client.get("/topics?sort=name&after=garbage").status_code == 400


def test_api_search(app, named):
    token = named.create_api_token("admin", "tests")
    client = app.test_client()
    headers = {"Authorization": f"Bearer {token}"}
    got = client.get("/api/v1/search?q=fleet", headers=headers).get_json()
    assert [h["name"] for h in got["hits"]] == ["/apps/sensors:fleet-status", "/logistics/fleet"]
    assert got["total"] == 2 and got["next_offset"] is None
    short = client.get("/api/v1/search?q=fl", headers=headers)
    assert short.status_code == 400 and "at least 3" in short.get_json()["message"]
    assert client.get("/api/v1/search?q=fleet").status_code == 401
    listing = client.get("/api/v1/topics?sort=created&limit=2", headers=headers).get_json()
    assert [t["topic"] for t in listing["topics"]] == ["car-17", "fleet-status"]
    assert listing["next_after"]


def test_the_nav_marks_the_section_of_the_page(client, named):
    """The search page belongs to no nav item (it shares the topic listing's blueprint);
    the topic listing and every topic's page are the Topics section."""

    def current(url: str) -> list[str]:
        page = client.get(url).get_data(as_text=True)
        nav = page[page.index('<nav aria-label="Main">') :]
        nav = nav[: nav.index("</nav>")]
        return re.findall(r'aria-current="page">([^<]+)<', nav)

    assert current("/search?q=fleet") == []
    assert current("/topics") == ["Topics"]
    assert current("/topics/apps/sensors:car-17") == ["Topics"]
    assert current("/streams") == ["Streams"]
