"""How the console feels in a real browser: light and dark themes that follow the browser's
setting or the footer's theme button, and the keyboard shortcuts of web/static/app.js."""

from __future__ import annotations

import re

from playwright.sync_api import expect

from engine import Cluster
from tests.e2e.conftest import shot

STREAM = "/e2e-feel"

# The body's background, its text and a table header cell, as computed, plus the variables
# the uPlot charts read.
COLOURS = """() => {
  const css = (el, prop) => getComputedStyle(el).getPropertyValue(prop).trim();
  const root = document.documentElement;
  return {
    bg: css(document.body, "background-color"),
    ink: css(document.body, "color"),
    th: css(document.querySelector("th"), "background-color"),
    scheme: css(root, "color-scheme"),
    // as charts.js reads them: resolved by an element (they hold light-dark() pairs)
    chart: ["--chart-grid", "--chart-text", "--chart-series-1", "--chart-series-2",
            "--chart-series-3", "--chart-series-4"].map((name) => {
      const probe = document.createElement("span");
      probe.style.color = `var(${name})`;
      document.body.appendChild(probe);
      const value = getComputedStyle(probe).color;
      probe.remove();
      return value;
    }),
  };
}"""


def luminance(css_rgb: str) -> float:
    """WCAG relative luminance of a computed `rgb(r, g, b)` colour."""
    r, g, b = (int(v) for v in re.findall(r"\d+", css_rgb)[:3])

    def channel(c: int) -> float:
        v = c / 255
        return v / 12.92 if v <= 0.04045 else ((v + 0.055) / 1.055) ** 2.4

    return 0.2126 * channel(r) + 0.7152 * channel(g) + 0.0722 * channel(b)


def contrast(a: str, b: str) -> float:
    hi, lo = sorted((luminance(a), luminance(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def test_the_theme_follows_the_browser_light_or_dark(admin_page, live_server, tmp_path):
    page = admin_page
    home = live_server.cluster
    # a link and a broken one, so the dark replication graph has edges, labels and a warning
    home.create_stream(STREAM, ttl=0)
    Cluster.open(tmp_path / "peer", name="e2e-feel-peer").close()
    Cluster.open(tmp_path / "gone", name="e2e-feel-gone").close()
    home.add_replica(STREAM, tmp_path / "peer")
    home.add_replica(STREAM, tmp_path / "gone")
    (tmp_path / "gone").rename(tmp_path / "gone-away")
    try:
        page.emulate_media(color_scheme="dark")
        page.goto(live_server.url + "/")
        dark = page.evaluate(COLOURS)
        assert luminance(dark["bg"]) < 0.05, dark
        assert luminance(dark["ink"]) > 0.6, dark
        assert contrast(dark["th"], dark["ink"]) > 7, dark
        assert dark["scheme"] == "light dark"
        shot(page, "dark-overview")
        page.goto(live_server.url + "/heat")
        expect(page.locator('svg[data-map="volumes"]')).to_be_visible()
        label = page.locator('svg[data-map="volumes"] text.heat-label').first
        assert luminance(label.evaluate("e => getComputedStyle(e).fill")) > 0.6
        shot(page, "dark-heat")
        page.goto(live_server.url + "/replication")
        expect(page.locator("[data-edge]")).to_have_count(2)
        name = page.locator("[data-node] text.node-name").first
        assert luminance(name.evaluate("e => getComputedStyle(e).fill")) > 0.6
        shot(page, "dark-replication")

        page.emulate_media(color_scheme="light")
        page.goto(live_server.url + "/")
        light = page.evaluate(COLOURS)
        assert luminance(light["bg"]) > 0.8, light
        assert luminance(light["ink"]) < 0.05, light
        assert contrast(light["th"], light["ink"]) > 7, light
        # the chart colours exist in both themes, and differ between them
        assert all(light["chart"]) and all(dark["chart"])
        assert light["chart"] != dark["chart"]

        # the footer's button overrides the browser: dark here though it asks for light,
        # kept across pages, and back to the browser's setting after light
        toggle = page.locator("[data-theme-toggle]")
        expect(toggle).to_have_text("Theme: auto")
        toggle.click()
        expect(toggle).to_have_text("Theme: light")
        toggle.click()
        expect(toggle).to_have_text("Theme: dark")
        assert page.evaluate(COLOURS)["bg"] == dark["bg"]
        page.goto(live_server.url + "/heat")
        expect(page.locator("[data-theme-toggle]")).to_have_text("Theme: dark")
        assert page.evaluate(COLOURS)["bg"] == dark["bg"]
        # the heat scale is turned over in the dark: no load is dark, not a glare of white
        cells = page.locator('svg[data-map="volumes"] g.heat-cells')
        assert "invert(1)" in cells.evaluate("e => getComputedStyle(e).filter")
        shot(page, "dark-heat-chosen")
        page.locator("[data-theme-toggle]").click()
        expect(page.locator("[data-theme-toggle]")).to_have_text("Theme: auto")
        assert page.evaluate(COLOURS)["bg"] == light["bg"]
        assert cells.evaluate("e => getComputedStyle(e).filter") == "none"
    finally:
        home.remove_replica(STREAM, tmp_path / "peer")
        home.remove_replica(STREAM, tmp_path / "gone")
        home.delete_stream(STREAM)


def test_keyboard_shortcuts_focus_search_show_help_and_go_to_pages(admin_page, live_server):
    page = admin_page
    page.goto(live_server.url + "/")
    start = page.url
    search = page.locator("#header-search")
    expect(page.get_by_role("button", name="? for shortcuts")).to_be_visible()

    page.keyboard.press("/")
    expect(search).to_be_focused()
    expect(search).to_have_value("")  # the "/" itself does not land in the box
    # typing in a field is just typing: "g s" there neither navigates nor opens anything
    page.keyboard.type("g s?")
    expect(search).to_have_value("g s?")
    help_dialog = page.get_by_role("dialog", name="Keyboard shortcuts")
    expect(help_dialog).to_be_hidden()
    search.fill("")
    search.blur()
    # Ctrl+g then s is not the "g" prefix
    page.keyboard.press("Control+g")
    page.keyboard.press("s")

    page.keyboard.press("?")
    expect(help_dialog).to_be_visible()
    expect(help_dialog).to_contain_text("Streams")
    expect(help_dialog.locator('[data-go-key="s"]')).to_have_attribute("data-go-href", "/streams")
    page.keyboard.press("Escape")
    expect(help_dialog).to_be_hidden()
    page.get_by_role("button", name="? for shortcuts").click()
    expect(help_dialog).to_be_visible()
    help_dialog.get_by_role("button", name="Close").click()
    expect(help_dialog).to_be_hidden()
    assert page.url == start  # nothing above navigated

    page.keyboard.press("g")
    page.keyboard.press("s")
    page.wait_for_url(live_server.url + "/streams")
    page.keyboard.press("g")
    page.keyboard.press("h")
    page.wait_for_url(re.compile(r"/heat$"))
