"""The metrics history drawn in a real browser: a topic's throughput chart gets its points
from the recorded history, uPlot paints them, and the window buttons redraw it."""

from __future__ import annotations

from playwright.sync_api import expect

from engine import Consumer, Producer
from engine.clock import SYSTEM_CLOCK
from tests.e2e.conftest import shot

STREAM = "/e2e-charts"
TOPIC = f"{STREAM}:t"

# How many pixels of the plot's canvas have a series' colour (a line drawn, not the axes).
PAINTED = """(figure) => {
  const canvas = figure.querySelector("canvas");
  const { data } = canvas.getContext("2d").getImageData(0, 0, canvas.width, canvas.height);
  const probe = document.createElement("canvas").getContext("2d");
  const colours = ["--chart-series-1", "--chart-series-2"].map((name) => {
    // as charts.js reads it: the variable holds a light-dark() pair, an element resolves it
    const el = document.createElement("span");
    el.style.color = `var(${name})`;
    document.body.appendChild(el);
    probe.fillStyle = getComputedStyle(el).color;
    el.remove();
    probe.fillRect(0, 0, 1, 1);
    return probe.getImageData(0, 0, 1, 1).data;
  });
  let n = 0;
  for (let i = 0; i < data.length; i += 4) {
    if (data[i + 3] > 128 && colours.some(([r, g, b]) => Math.abs(data[i] - r) < 40
        && Math.abs(data[i + 1] - g) < 40 && Math.abs(data[i + 2] - b) < 40)) n++;
  }
  return n;
}"""


def test_a_topic_chart_draws_the_recorded_history(admin_page, live_server, monkeypatch):
    page = admin_page
    home = live_server.cluster
    home.create_stream(STREAM, ttl=0)
    home.create_topic(TOPIC, partitions=2)
    try:
        producer = Producer(home)
        for i in range(300):
            producer.send(TOPIC, f"m{i}".encode())
        producer.flush()
        producer.close()
        reader = Consumer(home, TOPIC, group_id="e2e-charts", auto_offset_reset="earliest")
        got = 0
        while got < 300:
            got += sum(len(r) for r in reader.poll(1000).values())
        reader.close()
        # the server runs in this process: its clock for the history is three minutes on,
        # so the busy minute is complete and recorded
        later = SYSTEM_CLOCK.now_ms() + 3 * 60_000
        monkeypatch.setattr(SYSTEM_CLOCK, "now_ms", lambda: later)  # every cluster of the process
        home.record_metrics()
        minutes = home.metrics("topic", TOPIC, metric="write_messages")
        hours = home.metrics("topic", TOPIC, metric="write_messages", window_s=7 * 86400)
        # 300 messages, whichever minutes (and hours) they fell in
        assert round(sum(v * 60 for _, v in minutes.recorded)) == 300
        assert round(sum(v * 3600 for _, v in hours.recorded)) == 300

        page.goto(f"{live_server.url}/topics/{TOPIC[1:]}?tab=charts")
        figure = page.get_by_role("figure", name=f"Throughput of {TOPIC}")
        expect(figure).to_have_attribute("data-rendered-points", str(len(minutes.recorded)))
        expect(figure.locator("canvas")).to_be_visible()
        assert figure.evaluate(PAINTED) > 20  # the line is painted, not just the axes
        peak = f"{minutes.peak:.2f}"
        expect(figure).to_contain_text(f"Written (msg/s): latest 0.00, peak {peak}")
        figure.get_by_text("Data", exact=True).click()
        expect(figure.locator("td.num", has_text=peak).first).to_be_visible()
        shot(page, "chart-topic")

        figure.get_by_role("button", name="7 d").click()
        figure = page.get_by_role("figure", name=f"Throughput of {TOPIC}")
        expect(figure.get_by_role("button", name="7 d")).to_have_attribute("aria-pressed", "true")
        expect(figure).to_contain_text("a point per hour")
        expect(figure).to_contain_text(
            f"Written (msg/s): latest {hours.latest:.2f}, peak {hours.peak:.2f}"
        )
        expect(figure).to_have_attribute("data-rendered-points", str(len(hours.recorded)))
    finally:
        home.delete_group("e2e-charts")
        home.delete_stream(STREAM)
