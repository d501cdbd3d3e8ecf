"""Checks of the rendered book: pages exist, math is served locally, each chapter offers its notebook,
and that notebook reads in plain Jupyter (no raw MyST; numbers and figures filled in from the build's
own execution, so no chapter runs twice); the repository's sources ship with the HTML.

The layout of every page in a real browser is checked by tests/check_browser.py.
"""
import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "book" / "_ext"))
from notebook_download import RAW_MYST  # noqa: E402

CDN = re.compile(r"""(src|href)=["']https?://[^"']*(cdn|unpkg|jsdelivr|googleapis|mathjax)""", re.I)
# Launch links to outside services (they would point at a repository that is not ours).
LAUNCH = re.compile(r"""href=["']https?://[^"']*(colab\.research|mybinder|executablebooks)""", re.I)


def notebook_problems(path: Path) -> list[str]:
    """Raw MyST or values not filled in, in the Markdown of a downloadable notebook."""
    nb = json.loads(path.read_text())
    found = []
    for i, cell in enumerate(nb["cells"]):
        if cell["cell_type"] == "code":
            found.extend(f"cell {i} {p}" for p in echoed_values(cell))
        if cell["cell_type"] != "markdown":
            continue
        text = "".join(cell["source"])
        for m in RAW_MYST.finditer(text):
            found.append(f"cell {i} shows raw MyST: {text[max(0, m.start() - 30):m.end() + 30]!r}")
        if "(not computed)" in text or "computed when the notebook runs" in text:
            found.append(f"cell {i} has a number or figure that was not filled in")
        for name in re.findall(r"attachment:([^)\s]+)", text):
            if name not in cell.get("attachments", {}):
                found.append(f"cell {i} shows a missing attachment {name}")
    return found


def echoed_values(cell) -> list[str]:
    """A cell whose last line returns a bare value (a claim's outcome, say) shows it on the page as
    ``'reproduced'``: the page would print what the code meant to keep."""
    found = []
    for output in cell.get("outputs", []):
        data = output.get("data", {})
        if output.get("output_type") == "execute_result" and set(data) == {"text/plain"}:
            text = "".join(data["text/plain"])
            if re.fullmatch(r"""'[^'\n]*'|"[^"\n]*"|-?[\d.e+-]+|None|True|False""", text.strip()):
                found.append(f"echoes a bare value {text.strip()[:40]} (assign it, or end the line with ;)")
    return found


def main(html_dir: str) -> int:
    root = Path(html_dir)
    problems = []
    if not (root / "index.html").exists():
        problems.append("index.html is missing")
    if not (root / "_static" / "mathjax" / "tex-chtml.js").exists():
        problems.append("_static/mathjax/tex-chtml.js is missing: math would need the network")
    for page in sorted(root.glob("book/*.html")):
        text = page.read_text(errors="replace")
        if CDN.search(text):
            problems.append(f"{page.relative_to(root)} loads a script or style from a CDN")
        if LAUNCH.search(text):
            problems.append(f"{page.relative_to(root)} links to an outside launch service")
        notebook = root / "_sources" / "book" / f"{page.stem}.ipynb"
        source = root / "_sources" / "book" / f"{page.stem}.md"
        is_notebook = source.exists() and "kernelspec:" in source.read_text()
        if is_notebook and not notebook.exists():
            problems.append(f"{page.relative_to(root)}: no downloadable notebook at {notebook.relative_to(root)}")
        elif is_notebook:
            problems.extend(f"{notebook.relative_to(root)}: {p}" for p in notebook_problems(notebook))
    archive = root / "_downloads" / "adaptive-mcmc-source.tar.gz"
    if not archive.exists():
        problems.append(f"{archive.relative_to(root)} is missing: readers could not get the sources")
    for line in problems:
        print(f"check_html: {line}", file=sys.stderr)
    if not problems:
        print(f"check_html: {len(list(root.glob('book/*.html')))} pages, math local, notebooks downloadable "
              "without raw MyST, sources archived")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "_build/html"))
