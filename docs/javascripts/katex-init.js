// Render the math that pymdownx.arithmatex (generic mode) leaves in the pages, with the KaTeX
// copy the site serves itself. Inline math arrives as \( … \), display math as \[ … \].
(function () {
  function render() {
    if (typeof katex === "undefined") {
      document.body.setAttribute("data-math", "katex-missing");
      return;
    }
    var failures = 0;
    document.querySelectorAll(".arithmatex").forEach(function (el) {
      var text = el.textContent.trim();
      var display = text.startsWith("\\[");
      var body = text.slice(2, -2);
      try {
        katex.render(body, el, { displayMode: display, throwOnError: true });
      } catch (err) {
        failures += 1;
        el.setAttribute("data-math-error", String(err));
      }
    });
    document.body.setAttribute("data-math", failures ? "errors" : "rendered");
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", render);
  } else {
    render();
  }
})();
