// Users page: the "Copy" button next to a new API token (no inline handlers: the CSP
// forbids them). The button comes hidden and is shown here, so it is never pressed before
// this script can answer it (a click then did nothing), and a page without JavaScript has
// no dead button: the token is still in a read-only field to select.
for (const button of document.querySelectorAll("button[data-copy]")) button.hidden = false;

document.addEventListener("click", (event) => {
  const button = event.target.closest("button[data-copy]");
  if (!button) return;
  const field = document.getElementById(button.dataset.copy);
  if (!field) return;
  field.select();
  const done = () => { button.textContent = "Copied"; };
  // The selection copied the old way, where the clipboard API is missing or refused (an
  // unfocused window, a browser's policy); failing that, the user is told what to press.
  const fallback = () => {
    let copied = false;
    try { copied = document.execCommand("copy"); } catch (e) { copied = false; }
    if (copied) done(); else button.textContent = "Press Ctrl+C";
  };
  if (navigator.clipboard && window.isSecureContext) {
    navigator.clipboard.writeText(field.value).then(done, fallback);
  } else {
    fallback();
  }
});
