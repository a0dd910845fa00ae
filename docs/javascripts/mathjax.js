// MathJax reads the \( ... \) and $$ ... $$ that pymdownx.arithmatex leaves in the API pages.
window.MathJax = {
  tex: { inlineMath: [["\\(", "\\)"]], displayMath: [["\\[", "\\]"]],
         processEscapes: true, processEnvironments: true },
  options: { ignoreHtmlClass: ".*|", processHtmlClass: "arithmatex" }
};
document$.subscribe(() => { MathJax.typesetPromise(); });
