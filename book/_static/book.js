// Result tables: short cells ("2,000 + 2,000", "0.52 ± 0.03") never break over lines; long text
// cells still wrap, so that prose tables stay inside the column (see book.css).
document.addEventListener("DOMContentLoaded", () => {
  for (const cell of document.querySelectorAll("div.cell_output table td, div.cell_output table th")) {
    if (cell.textContent.trim().length <= 24) cell.style.whiteSpace = "nowrap";
  }
});

// Figures: each image opens at full size in its own tab. A multi-panel figure fitted to a phone's
// column has tick labels of a few pixels; the image alone can be zoomed to its full resolution.
document.addEventListener("DOMContentLoaded", () => {
  for (const image of document.querySelectorAll("figure img, div.cell_output img")) {
    if (image.closest("a")) continue;
    const link = document.createElement("a");
    link.href = image.currentSrc || image.src;
    link.className = "figure-full-size";
    link.title = "Open the figure at full size";
    link.target = "_blank";
    link.rel = "noopener";
    image.replaceWith(link);
    link.append(image);
  }
});
