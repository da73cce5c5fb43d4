"""The `compression` policy (issue 15) in the web console's policy forms, which are built
from `engine.policies.POLICIES`: a list of its codecs, saved like any policy, and an
unknown codec refused next to its field."""

from __future__ import annotations

import re
from html import unescape

from engine.policies import policy


def test_the_policies_form_offers_the_codecs_and_saves_one(client, cluster):
    cluster.create_stream("/s")
    html = client.get("/streams/s").get_data(as_text=True)
    select = re.search(r'<select[^>]* id="policy-compression".*?</select>', html, re.S).group(0)
    assert re.findall(r'<option value="([^"]+)"', select) == ["none", "zstd", "lz4"]
    hint = re.search(r'id="policy-compression-hint">(.*?)</span>', html, re.S).group(1)
    assert unescape(hint).startswith(policy("compression").hint)
    ok = client.post(
        "/streams/s/~/policies", data={"compression": "zstd", "csrf_token": client.csrf}
    )
    assert ok.status_code == 303
    assert cluster.stream("/s").policies["compression"] == "zstd"
    bad = client.post(
        "/streams/s/~/policies", data={"compression": "gzip", "csrf_token": client.csrf}
    )
    assert bad.status_code == 400
    error = re.search(
        r'id="policy-compression-error">(.*?)</div>', bad.get_data(as_text=True), re.S
    ).group(1)
    assert unescape(error) == "policy 'compression' must be 'none' or 'zstd' or 'lz4', got 'gzip'"
    assert cluster.stream("/s").policies["compression"] == "zstd"
