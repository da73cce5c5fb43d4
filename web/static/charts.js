// Charts of the metrics history (web/charts.py, templates/_chart.html), drawn with uPlot
// (served from node_modules by web/assets.py). A chart is a <figure class="chart"> whose
// data-points attribute holds {"t": [epoch seconds], "series": [{label, unit, values}]},
// values null where nothing was recorded (drawn as gaps). Nothing here is inline: the CSP
// forbids inline scripts. Charts are drawn on load and after every htmx swap, follow their
// container's width and the light or dark theme, and mark the figure with
// data-rendered-points (the points that have a value) once drawn.
(() => {
  const HEIGHT = 180;
  const FALLBACK = {
    "--chart-grid": "#d0d5dd",
    "--chart-text": "#555",
    "--chart-series-1": "#2457c5",
    "--chart-series-2": "#c2410c",
    "--chart-series-3": "#1f7a3a",
    "--chart-series-4": "#8e44ad",
  };
  const plots = new WeakMap(); // figure -> {plot, observer}

  // A colour variable as the theme in effect resolves it: the variables hold light-dark()
  // pairs, which only an element's computed colour turns into one colour.
  function colour(name) {
    const probe = document.createElement("span");
    probe.hidden = true;
    probe.style.color = `var(${name}, ${FALLBACK[name]})`;
    document.body.appendChild(probe);
    const value = getComputedStyle(probe).color;
    probe.remove();
    return value || FALLBACK[name];
  }

  function number(v) {
    return v.toLocaleString("en-US", { maximumFractionDigits: Math.abs(v) >= 100 ? 0 : 2 });
  }

  function shortNumber(v) {
    const a = Math.abs(v);
    if (a >= 1e9) return number(v / 1e9) + "G";
    if (a >= 1e6) return number(v / 1e6) + "M";
    if (a >= 1e3) return number(v / 1e3) + "k";
    return number(v);
  }

  function parse(figure) {
    try {
      const data = JSON.parse(figure.dataset.points || "");
      if (!Array.isArray(data.t) || !Array.isArray(data.series) || !data.series.length) return null;
      return data;
    } catch (err) {
      return null;
    }
  }

  function options(data, width) {
    const grid = colour("--chart-grid");
    const text = colour("--chart-text");
    const units = [...new Set(data.series.map((s) => s.unit))];
    const scales = { x: { time: true } };
    const axes = [{ stroke: text, grid: { stroke: grid, width: 1 }, ticks: { stroke: grid, width: 1 } }];
    units.forEach((unit, i) => {
      // from zero: a rate or a lag reads wrong on an axis that starts elsewhere
      scales[unit] = { range: (u, min, max) => [0, max > 0 ? max * 1.1 : 1] };
      axes.push({
        scale: unit,
        label: unit,
        side: i === 0 ? 3 : 1,
        stroke: text,
        size: 60,
        grid: { show: i === 0, stroke: grid, width: 1 },
        ticks: { stroke: grid, width: 1 },
        values: (u, ticks) => ticks.map(shortNumber),
      });
    });
    const series = [{ label: "Time", value: "{YYYY}-{MM}-{DD} {HH}:{mm}" }];
    data.series.forEach((s, i) => {
      series.push({
        label: s.label,
        scale: s.unit,
        stroke: colour(`--chart-series-${(i % 4) + 1}`),
        width: 1.5,
        spanGaps: false,
        points: { show: false },
        value: (u, v) => (v == null ? "–" : `${number(v)} ${s.unit}`),
      });
    });
    return { width, height: HEIGHT, scales, axes, series, legend: { live: true } };
  }

  function draw(figure) {
    const old = plots.get(figure);
    if (old) {
      old.observer.disconnect();
      old.plot.destroy();
      plots.delete(figure);
    }
    const data = parse(figure);
    const holder = figure.querySelector(".chart-plot");
    if (!data || !holder || typeof uPlot === "undefined") return;
    const columns = [data.t, ...data.series.map((s) => s.values)];
    const width = Math.max(holder.clientWidth || figure.clientWidth || 600, 200);
    const plot = new uPlot(options(data, width), columns, holder);
    const observer = new ResizeObserver(() => {
      if (!figure.isConnected) {
        observer.disconnect();
        plot.destroy();
        return;
      }
      const w = Math.max(holder.clientWidth, 200);
      if (w !== plot.width) plot.setSize({ width: w, height: HEIGHT });
    });
    observer.observe(holder);
    plots.set(figure, { plot, observer });
    const rendered = data.t.filter((_, i) => data.series.some((s) => s.values[i] != null)).length;
    figure.dataset.renderedPoints = String(rendered);
  }

  function drawAll(root) {
    const scope = root && root.querySelectorAll ? root : document;
    const figures = [...scope.querySelectorAll("figure.chart[data-points]")];
    if (scope.matches && scope.matches("figure.chart[data-points]")) figures.push(scope);
    // and any chart not drawn yet (an outerHTML swap settles on the element it replaced)
    for (const f of document.querySelectorAll("figure.chart[data-points]:not([data-rendered-points])")) {
      if (!figures.includes(f)) figures.push(f);
    }
    figures.forEach(draw);
  }

  function ready() {
    drawAll(document);
    document.body.addEventListener("htmx:afterSettle", (event) => drawAll(event.target));
    // the theme's colours are read when drawing: draw again when it changes (theme.js)
    document.addEventListener("plet:theme", () => drawAll(document));
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", ready);
  else ready();
})();
