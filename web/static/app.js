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
