// Users page: the "Copy" button next to a new API token (no inline handlers: the CSP
// forbids them). Without JavaScript the token is still in a read-only field to select.
document.addEventListener("click", (event) => {
  const button = event.target.closest("button[data-copy]");
  if (!button) return;
  const field = document.getElementById(button.dataset.copy);
  if (!field) return;
  field.select();
  const done = () => { button.textContent = "Copied"; };
  if (navigator.clipboard && window.isSecureContext) {
    navigator.clipboard.writeText(field.value).then(done, () => {});
  } else {
    done();  // selected: Ctrl-C copies it
  }
});
