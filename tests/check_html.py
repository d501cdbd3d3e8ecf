"""Checks of the rendered book: pages exist, math is served locally, each chapter offers its notebook."""
import re
import sys
from pathlib import Path

CDN = re.compile(r"""(src|href)=["']https?://[^"']*(cdn|unpkg|jsdelivr|googleapis|mathjax)""", re.I)
# Launch links to outside services (they would point at a repository that is not ours).
LAUNCH = re.compile(r"""href=["']https?://[^"']*(colab\.research|mybinder|executablebooks)""", re.I)


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
    for line in problems:
        print(f"check_html: {line}", file=sys.stderr)
    if not problems:
        print(f"check_html: {len(list(root.glob('book/*.html')))} pages, math local, notebooks downloadable")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "_build/html"))
