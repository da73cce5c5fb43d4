// The console's own script: small, and no inline handlers (the CSP forbids them).

// A request that fails outright (server error, network) says so in the status area
// instead of leaving the page silently stale.
document.addEventListener("htmx:responseError", (event) => {
  const flash = document.getElementById("flash");
  if (!flash) return;
  const xhr = event.detail.xhr;
  const p = document.createElement("p");
  p.className = "flash flash-error";
  p.setAttribute("role", "alert");
  p.textContent = `Request failed: ${xhr.status} ${xhr.statusText}`;
  flash.replaceChildren(p);
});
document.addEventListener("htmx:sendError", () => {
  const flash = document.getElementById("flash");
  if (!flash) return;
  const p = document.createElement("p");
  p.className = "flash flash-error";
  p.setAttribute("role", "alert");
  p.textContent = "The console cannot reach its server.";
  flash.replaceChildren(p);
});

// Keyboard shortcuts (the list is the #shortcuts dialog in base.html, which also carries
// the targets of "g <letter>" in data-go-key/data-go-href, so this file holds no URLs):
//   /  focus the header search box     ?  open the list (Escape or Close shuts it)
//   g then a letter within 1.5 s: go to that page.
// They never fire while typing in a field, nor with Ctrl, Alt or Meta held (those are the
// browser's and the system's shortcuts).
(() => {
  const GO_WAIT_MS = 1500;
  let goTimer = null;

  const dialog = () => document.getElementById("shortcuts");

  function typing(el) {
    if (!el || !(el instanceof Element)) return false;
    return el.isContentEditable || el.closest("input, textarea, select, [contenteditable]") !== null;
  }

  function openHelp() {
    const d = dialog();
    if (d && !d.open) d.showModal();
  }

  function cancelGo() {
    if (goTimer !== null) clearTimeout(goTimer);
    goTimer = null;
  }

  function go(letter) {
    const d = dialog();
    if (!d) return false;
    for (const item of d.querySelectorAll("[data-go-key]")) {
      if (item.dataset.goKey === letter) {
        window.location.assign(item.dataset.goHref);
        return true;
      }
    }
    return false;
  }

  document.addEventListener("keydown", (event) => {
    if (event.defaultPrevented || event.isComposing) return;
    if (event.key === "Shift") return; // on its way to "?"
    if (event.ctrlKey || event.altKey || event.metaKey) { cancelGo(); return; }
    if (typing(event.target)) { cancelGo(); return; }
    const d = dialog();
    if (!d || d.open) return; // the open dialog has its own keys (Escape closes it)
    if (goTimer !== null) {
      cancelGo();
      if (go(event.key)) event.preventDefault();
      return;
    }
    if (event.key === "/") {
      const search = document.getElementById("header-search");
      if (!search) return;
      event.preventDefault(); // or the "/" lands in the box
      search.focus();
      search.select();
    } else if (event.key === "?") {
      event.preventDefault();
      openHelp();
    } else if (event.key === "g") {
      event.preventDefault();
      goTimer = setTimeout(cancelGo, GO_WAIT_MS);
    }
  });

  document.addEventListener("click", (event) => {
    const target = event.target instanceof Element ? event.target : null;
    if (!target) return;
    if (target.closest("[data-shortcuts-open]")) openHelp();
    else if (target.closest("[data-shortcuts-close]")) dialog()?.close();
    else if (target.closest("[data-theme-toggle]")) window.pletTheme?.next();
  });

  // The theme button says which theme it set (theme.js keeps the choice).
  function showTheme() {
    const choice = window.pletTheme?.chosen() || "auto";
    for (const button of document.querySelectorAll("[data-theme-toggle]")) {
      button.textContent = "Theme: " + choice;
      button.setAttribute("aria-label", "Theme: " + choice + " (change it)");
    }
  }
  document.addEventListener("plet:theme", showTheme);
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", showTheme);
  else showTheme();
})();

// Tabs (role="tablist", the topic page): each tab is a link, so Tab, Enter and the browser's
// own keys work; Left/Right (and Home/End) move between the tabs as ARIA's tab pattern does.
document.addEventListener("keydown", (event) => {
  const tab = event.target instanceof Element ? event.target.closest('[role="tab"]') : null;
  if (!tab || event.ctrlKey || event.altKey || event.metaKey) return;
  const tabs = [...tab.closest('[role="tablist"]').querySelectorAll('[role="tab"]')];
  const at = tabs.indexOf(tab);
  const to = { ArrowLeft: at - 1, ArrowRight: at + 1, Home: 0, End: tabs.length - 1 }[event.key];
  if (to === undefined) return;
  event.preventDefault();
  tabs[(to + tabs.length) % tabs.length].focus();
});
