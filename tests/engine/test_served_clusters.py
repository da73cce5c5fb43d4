"""Which clusters a console shows (engine.served_clusters): named, from a file, linked."""

from __future__ import annotations

import pytest

from engine import Cluster, errors
from engine.served_clusters import read_clusters_file, served_clusters, url_name

STREAM = "/ring"


@pytest.fixture
def ring(tmp_path):
    """dc1 -> dc2 -> dc3 on /ring; and dc4, linked to nobody."""
    paths = {name: tmp_path / name for name in ("dc1", "dc2", "dc3", "dc4")}
    opened = {name: Cluster.open(path, name=name) for name, path in paths.items()}
    dc1, dc2, dc3 = opened["dc1"], opened["dc2"], opened["dc3"]
    dc1.create_stream(STREAM)
    dc1.add_replica(STREAM, dc2.path)
    dc2.add_replica(STREAM, dc3.path)
    for cluster in opened.values():
        cluster.close()
    return paths


def test_the_main_cluster_comes_first_then_the_linked_ones(ring):
    found = served_clusters(ring["dc1"])
    assert [(c.name, c.main, c.linked) for c in found] == [
        ("dc1", True, False),
        ("dc2", False, True),
        ("dc3", False, True),  # along dc2's own link
    ]
    assert found[1].path == str(ring["dc2"].resolve())
    with Cluster.open(ring["dc2"]) as dc2:
        assert found[1].cluster_id == dc2.id


def test_a_link_to_another_console_becomes_a_link_to_it(ring, monkeypatch):
    """An http(s) target is shown, never opened (adding one here would ask the network)."""
    from engine import served_clusters as module
    from engine.replication import GraphLink, GraphNode, LinkState, ReplicationGraph

    def walk(cluster, measure=True):
        assert not measure  # a look at the links, nothing measured
        this = GraphNode(cluster.id, cluster.name, str(cluster.path), cluster.id, this=True)
        url = "https://eu.example.com:5000"
        remote = GraphNode(url, "eu.example.com:5000", url, remote=True)
        link = GraphLink(this.key, remote.key, STREAM, STREAM, LinkState.PAUSED)
        return ReplicationGraph([this, remote], [link], [], [])

    monkeypatch.setattr(module, "walk", walk)
    found = served_clusters(ring["dc1"])
    assert [(c.name, c.path, c.url, c.linked) for c in found] == [
        ("dc1", str(ring["dc1"].resolve()), None, False),
        ("eu.example.com-5000", None, "https://eu.example.com:5000", True),
    ]
    assert not found[1].local


def test_no_linked_keeps_the_named_ones_only(ring):
    found = served_clusters(ring["dc1"], also=[ring["dc4"]], linked=False)
    assert [c.name for c in found] == ["dc1", "dc4"]
    assert not found[1].linked


def test_a_cluster_named_twice_appears_once(ring):
    found = served_clusters(ring["dc1"], also=[ring["dc2"], ring["dc1"], ring["dc2"]])
    assert [c.name for c in found] == ["dc1", "dc2", "dc3"]
    assert not found[1].linked  # named first: the link found it again


def test_a_clusters_file_names_directories_and_consoles(ring, tmp_path):
    file = tmp_path / "conf" / "clusters.toml"
    file.parent.mkdir()
    file.write_text(
        '[[cluster]]\nname = "four"\npath = "../dc4"\n\n'
        '[[cluster]]\nname = "us"\nurl = "https://us.example.com/"\n'
    )
    found = served_clusters(ring["dc3"], clusters_file=file)
    # dc2, dc3's upstream, is not followed (its address is what the source said it was)
    assert [(c.name, c.path, c.url) for c in found] == [
        ("dc3", str(ring["dc3"].resolve()), None),
        ("four", str(ring["dc4"].resolve()), None),
        ("us", None, "https://us.example.com"),
    ]


def test_names_are_made_safe_for_urls_and_unique(tmp_path):
    a = Cluster.open(tmp_path / "a", name="data centre/1")
    b = Cluster.open(tmp_path / "b", name="data centre/1")
    ids = a.id, b.id
    a.close()
    b.close()
    assert url_name("data centre/1") == "data-centre-1"
    assert url_name("..") == url_name("") == "cluster"
    found = served_clusters(tmp_path / "a", also=[tmp_path / "b"])
    assert [c.name for c in found] == ["data-centre-1", f"data-centre-1-{ids[1][:8]}"]


def test_a_named_directory_without_a_cluster_is_refused_not_created(ring, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(errors.NotACluster, match="no cluster at"):
        served_clusters(ring["dc1"], also=[empty])
    assert list(empty.iterdir()) == []


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("[[cluster]]\nname = 'x'\n", "either path or url"),
        ("[[cluster]]\nname = 'x'\npath = 'a'\nurl = 'https://h'\n", "either path or url"),
        ("[[cluster]]\nname = 'a b'\npath = 'a'\n", "name must be"),
        ("[[cluster]]\nname = 'x'\nurl = 'ftp://h'\n", "http"),
        ("[[cluster]]\nname = 'x'\npath = 'a'\nport = 1\n", "takes name"),
        ("[server]\nport = 1\n", "expected"),
        ("[[cluster]\n", "clusters file"),
        ("[[cluster]]\nname = 'x'\npath = 'a'\ntoken = 't'\n", "go with a url only"),
        ("[[cluster]]\nname = 'x'\nurl = 'https://h'\ntoken = 't'\ntoken_file = 'f'\n", "not both"),
        ("[[cluster]]\nname = 'x'\nurl = 'https://h'\ntoken_file = 'nowhere'\n", "token_file"),
        ("[[cluster]]\nname = 'x'\nurl = 'https://h'\ntoken = ' '\n", "printable characters"),
        ("[[cluster]]\nname = 'x'\nurl = 'https://h'\ntoken = \"a\\nb\"\n", "printable characters"),
        ("[[cluster]]\nname = 'x'\nurl = 'https://h'\nca_file = 'ca.pem'\n", "need a token"),
        (
            "[[cluster]]\nname = 'x'\nurl = 'https://h'\ntoken = 't'\nca_file = 'no.pem'\n",
            "no ca_file",
        ),
        ("[[cluster]]\nname = 'x'\nurl = 'https://h/c/eu'\ntoken = 't'\n", "without a path"),
        ("[[cluster]]\nname = 'x'\nurl = 'http://h.example'\ntoken = 't'\n", "in clear"),
        (
            "[[cluster]]\nname = 'x'\nurl = 'https://h'\ntoken = 't'\ninsecure = 1\n",
            "true or false",
        ),
    ],
)
def test_a_bad_clusters_file_says_what_is_wrong(tmp_path, text, problem):
    file = tmp_path / "clusters.toml"
    file.write_text(text)
    with pytest.raises(errors.InvalidArgument, match=problem):
        read_clusters_file(file)


def test_a_console_with_a_token_is_served_through_it(tmp_path):
    """https, or plain http on loopback or when told `insecure`; the token never shown."""
    (tmp_path / "eu.token").write_text("plr_secret-one\n")
    (tmp_path / "ca.pem").write_text("a CA")
    file = tmp_path / "clusters.toml"
    file.write_text(
        '[[cluster]]\nname = "eu"\nurl = "https://eu.example.com:5000/"\n'
        'token_file = "eu.token"\nca_file = "ca.pem"\n\n'
        '[[cluster]]\nname = "lo"\nurl = "http://127.0.0.1:5001"\ntoken = "t2"\n\n'
        '[[cluster]]\nname = "lan"\nurl = "http://10.0.0.5:5000"\ntoken = "t3"\n'
        "insecure = true\n\n"
        '[[cluster]]\nname = "link"\nurl = "http://10.0.0.6:5000"\n'
    )
    found = read_clusters_file(file)
    assert [(c.name, c.url, c.token, c.ca_file, c.insecure, c.proxied) for c in found] == [
        (
            "eu",
            "https://eu.example.com:5000",
            "plr_secret-one",
            str(tmp_path / "ca.pem"),
            False,
            True,
        ),
        ("lo", "http://127.0.0.1:5001", "t2", None, False, True),
        ("lan", "http://10.0.0.5:5000", "t3", None, True, True),
        ("link", "http://10.0.0.6:5000", None, None, False, False),
    ]
    assert "secret" not in repr(found)


def test_a_link_to_another_console_is_served_through_it_with_the_links_token(ring, monkeypatch):
    """The main cluster's own link holds a token the target issued: the console is served
    through it (https, or plain http on loopback only); without a token, a link."""
    from engine import served_clusters as module
    from engine.replication import GraphLink, GraphNode, LinkState, ReplicationGraph

    urls = [
        "https://eu.example.com:5000",
        "http://127.0.0.1:5001",
        "http://10.0.0.6:5000",
        "https://us.example.com",
    ]
    with Cluster.open(ring["dc1"]) as dc1:
        stream_id = dc1.catalog.stream(STREAM).id
        for url in urls[:3]:
            dc1.catalog.set_replica_token(stream_id, url, f"plr_token-of-{url}")

    def walk(cluster, measure=True):
        this = GraphNode(cluster.id, cluster.name, str(cluster.path), cluster.id, this=True)
        # a target whose id the link recorded is keyed by that id, not by its address
        keys = ["id-of-eu", *urls[1:]]
        nodes = [this] + [
            GraphNode(key, url.split("//")[1], url, remote=True)
            for key, url in zip(keys, urls, strict=True)
        ]
        links = [GraphLink(this.key, key, STREAM, STREAM, LinkState.PAUSED) for key in keys]
        return ReplicationGraph(nodes, links, [], [])

    monkeypatch.setattr(module, "walk", walk)
    found = served_clusters(ring["dc1"])
    assert [(c.url, c.token, c.proxied) for c in found[1:]] == [
        ("https://eu.example.com:5000", "plr_token-of-https://eu.example.com:5000", True),
        ("http://127.0.0.1:5001", "plr_token-of-http://127.0.0.1:5001", True),
        ("http://10.0.0.6:5000", None, False),  # plain http off this machine: a link
        ("https://us.example.com", None, False),  # no token
    ]
