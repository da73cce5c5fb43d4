// The theme: "light" or "dark" as chosen with the footer's button (kept in localStorage),
// else the browser's setting. Loaded in <head> without defer, so the page is drawn in it
// from the start. data-theme on <html> is the choice (app.css's colour-scheme follows it);
// data-scheme is the theme in effect, for what light-dark() cannot turn (the heat maps).
(function () {
  "use strict";
  const KEY = "plet-theme";
  const root = document.documentElement;
  const dark = window.matchMedia("(prefers-color-scheme: dark)");

  function chosen() {
    try {
      const value = localStorage.getItem(KEY);
      return value === "light" || value === "dark" ? value : null;
    } catch (e) {
      return null; // storage refused (private mode): follow the browser
    }
  }

  function apply() {
    const choice = chosen();
    if (choice) root.dataset.theme = choice;
    else delete root.dataset.theme;
    root.dataset.scheme = choice || (dark.matches ? "dark" : "light");
  }

  // the footer's button (app.js) calls it: auto, then light, then dark, then auto again
  window.pletTheme = {
    next() {
      const order = [null, "light", "dark"];
      const choice = order[(order.indexOf(chosen()) + 1) % order.length];
      try {
        if (choice) localStorage.setItem(KEY, choice);
        else localStorage.removeItem(KEY);
      } catch (e) {
        if (choice) root.dataset.theme = choice; // this page only
      }
      apply();
      document.dispatchEvent(new CustomEvent("plet:theme"));
      return choice;
    },
    chosen,
  };
  dark.addEventListener("change", () => {
    apply();
    document.dispatchEvent(new CustomEvent("plet:theme"));
  });
  apply();
})();
