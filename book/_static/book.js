// Result tables: short cells ("2,000 + 2,000", "0.52 ± 0.03") never break over lines; long text
// cells still wrap, so that prose tables stay inside the column (see book.css).
document.addEventListener("DOMContentLoaded", () => {
  for (const cell of document.querySelectorAll("div.cell_output table td, div.cell_output table th, " +
                                               "article div.output.text_html table td, article div.output.text_html table th")) {
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
    // A figure embedded in the page (a data: URL, as mcmc_lib.book.figure_html makes for audit pages):
    // browsers refuse to open data: URLs in a tab, so link to a blob of the same image instead.
    if (link.href.startsWith("data:")) {
      fetch(link.href).then(response => response.blob()).then(blob => { link.href = URL.createObjectURL(blob); });
    }
    link.className = "figure-full-size";
    link.title = "Open the figure at full size";
    link.target = "_blank";
    link.rel = "noopener";
    image.replaceWith(link);
    link.append(image);
  }
});
