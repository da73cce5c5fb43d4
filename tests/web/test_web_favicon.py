"""The console's icon: linked from every page, served to a browser that is not logged in
(the login page shows it too), and /favicon.ico answers for browsers that ask for it
directly instead of a 404 in their console."""

from __future__ import annotations

import re
from xml.etree import ElementTree

from web.security import CONTENT_SECURITY_POLICY

_ICON_LINK = re.compile(r'<link rel="icon" type="image/svg\+xml" href="([^"]+)">')


def test_the_login_page_links_an_svg_icon_that_answers_without_login(app):
    anonymous = app.test_client()
    page = anonymous.get("/login")
    assert page.status_code == 200
    found = _ICON_LINK.search(page.get_data(as_text=True))
    assert found, "base.html links no icon"
    icon = anonymous.get(found.group(1))
    assert icon.status_code == 200
    assert icon.mimetype == "image/svg+xml"
    svg = ElementTree.fromstring(icon.get_data())
    assert svg.tag == "{http://www.w3.org/2000/svg}svg"
    # an image of this origin, with nothing the CSP would refuse inside it
    assert "img-src 'self'" in CONTENT_SECURITY_POLICY
    body = icon.get_data(as_text=True)
    assert "<script" not in body and "style=" not in body and "href=" not in body


def test_favicon_ico_leads_to_the_icon_without_login(app, client):
    for browser in (app.test_client(), client):  # anonymous, and logged in
        answer = browser.get("/favicon.ico")
        assert answer.status_code in (301, 302, 307, 308)
        assert answer.headers["Location"] == "/static/favicon.svg"
        icon = browser.get("/favicon.ico", follow_redirects=True)
        assert icon.status_code == 200 and icon.mimetype == "image/svg+xml"
        assert icon.request.path == "/static/favicon.svg"
