// Result tables: short cells ("2,000 + 2,000", "0.52 ± 0.03") never break over lines; long text
// cells still wrap, so that prose tables stay inside the column (see book.css).
document.addEventListener("DOMContentLoaded", () => {
  for (const cell of document.querySelectorAll("div.cell_output table td, div.cell_output table th")) {
    if (cell.textContent.trim().length <= 24) cell.style.whiteSpace = "nowrap";
  }
});
