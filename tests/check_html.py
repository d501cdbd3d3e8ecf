"""Checks of the rendered book: pages exist, math is served locally, each chapter offers its notebook,
and that notebook reads in plain Jupyter (no raw MyST; numbers and figures filled in from the build's
own execution, so no chapter runs twice); the repository's sources ship with the HTML.

Each method chapter is an article page with an audit page beside it (``<stem>.html`` and
``<stem>_audit.html``); the article keeps to the budgets of a replication article (``article_problems``):
at most ``MAX_PROSE_WORDS`` words of prose outside dropdowns and ``MAX_TOTAL_WORDS`` in all, a verdict
table, no raw arrays and no project history. Every page has at most one provenance block.

The layout of every page in a real browser is checked by tests/check_browser.py (there: the verdict
table on the first screen, tables inside the column, figure text of at least 10 px).
"""
import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "book" / "_ext"))
from notebook_download import RAW_MYST, is_live_cell, shown_markdown  # noqa: E402

MAX_PROSE_WORDS = 5_000      # text of <p> elements of the article body outside <details>
MAX_TOTAL_WORDS = 10_000     # all visible text of the article body: code, tables, outputs and dropdowns
# The project's history belongs in git, not on a page; raw arrays are printed state, not results.
HISTORY = re.compile(r"\b(earlier|previous|older) versions? of (this|the) (chapter|book|page|code|table|figure)\b"
                     r"|\bin an? (earlier|previous) (build|session|version|commit)\b", re.I)
RAW_ARRAY = re.compile(r"\barray\(\[")

CDN = re.compile(r"""(src|href)=["']https?://[^"']*(cdn|unpkg|jsdelivr|googleapis|mathjax)""", re.I)
# Launch links to outside services (they would point at a repository that is not ours).
LAUNCH = re.compile(r"""href=["']https?://[^"']*(colab\.research|mybinder|executablebooks)""", re.I)


def notebook_problems(path: Path) -> list[str]:
    """What a downloadable notebook would show wrongly in plain Jupyter: raw MyST or values not filled
    in, in its Markdown cells and in the build's output of its live text cells (code cells with hidden
    input that show Markdown with the values a run computes: book/_ext/notebook_download.py); a live
    cell without that output, with its input showing, or before the cell that records the values."""
    nb = json.loads(path.read_text())
    found = []
    records = False
    for i, cell in enumerate(nb["cells"]):
        source = "".join(cell["source"])
        if cell["cell_type"] == "code":
            found.extend(f"cell {i} {p}" for p in echoed_values(cell))
            records = records or "record_glue()" in source
        if cell["cell_type"] != "markdown" and not is_live_cell({**cell, "source": source}):
            continue
        if cell["cell_type"] == "code":
            if not cell.get("outputs"):
                found.append(f"cell {i} shows values live but has no output from the build")
            if not cell.get("metadata", {}).get("jupyter", {}).get("source_hidden"):
                found.append(f"cell {i} shows values live but its input is not hidden")
            if not records:
                found.append(f"cell {i} shows values live before the notebook records them (record_glue)")
        text = shown_markdown({**cell, "source": source})
        for m in RAW_MYST.finditer(text):
            found.append(f"cell {i} shows raw MyST: {text[max(0, m.start() - 30):m.end() + 30]!r}")
        if "(not computed" in text or "computed when the notebook runs" in text:
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


def words(text: str) -> int:
    return len(re.findall(r"[^\s]+", text))


def article_body(soup):
    """The page's main text, without the header links Sphinx adds to headings."""
    body = soup.select_one("article.bd-article") or soup.select_one("main") or soup
    for element in body.select("script, style, a.headerlink"):
        element.decompose()
    return body


def page_stats(text: str) -> dict:
    """Words of prose outside dropdowns, words in all, and the number of provenance blocks of a page."""
    from bs4 import BeautifulSoup

    body = article_body(BeautifulSoup(text, "html.parser"))
    for block in body.find_all("pre"):
        # Highlighted code is one <span> per token: count its words as written, not per token.
        block.string = block.get_text("")
    prose = " ".join(p.get_text(" ") for p in body.find_all("p") if p.find_parent("details") is None)
    return {"prose_words": words(prose), "total_words": words(body.get_text(" ")),
            "provenance_blocks": len(body.select("details.provenance")),
            "verdict_tables": len(body.select("table.verdict-table")),
            "history": [m.group(0) for m in HISTORY.finditer(body.get_text(" "))],
            "raw_arrays": len(RAW_ARRAY.findall(output_text(body)))}


def output_text(body) -> str:
    """The page's text without code that a reader reads as code (cell inputs, code blocks): a raw array
    is printed output, while ``np.array([...])`` in code is fine."""
    inputs = body.select(".cell_input, div[class*='highlight-']")
    code = {id(element) for element in inputs if element.find_parent(class_="cell_output") is None}
    return " ".join(text for text in body.find_all(string=True)
                    if not any(id(parent) in code for parent in text.parents))


def article_problems(stats: dict) -> list[str]:
    """What a method chapter's article page breaks of the article form (its audit page has no budget)."""
    found = []
    if stats["prose_words"] > MAX_PROSE_WORDS:
        found.append(f"{stats['prose_words']:,} words of prose outside dropdowns (at most {MAX_PROSE_WORDS:,}: "
                     "move protocol, per-cell detail and side investigations to the audit page)")
    if stats["total_words"] > MAX_TOTAL_WORDS:
        found.append(f"{stats['total_words']:,} words in all (at most {MAX_TOTAL_WORDS:,}, code, tables and "
                     "dropdowns included)")
    if stats["verdict_tables"] != 1:
        found.append(f"{stats['verdict_tables']} verdict tables (one at the top: claims.glue_verdicts() and "
                     "the glue directive `verdicts`)")
    return found


def layout_problems(stats: dict) -> list[str]:
    """What any page breaks: one provenance block at most, no history, no raw arrays."""
    found = []
    if stats["provenance_blocks"] > 1:
        found.append(f"{stats['provenance_blocks']} provenance blocks (at most one, at the end)")
    found.extend(f"tells the project's history ({h!r}): that belongs in git" for h in stats["history"])
    if stats["raw_arrays"]:
        found.append(f"prints {stats['raw_arrays']} raw array(s) (array([...]))")
    return found


README = Path(__file__).resolve().parent.parent / "README.md"
README_COUNTS = re.compile(r"(\d+) claims are (\d+) reproduced, (\d+) not reproduced, (\d+) inconclusive and "
                           r"(\d+) not run here".replace(" ", r"\s+"))      # the README wraps its lines
SCOREBOARD_COUNTS = re.compile(r"<code[^>]*>(?:<span[^>]*>)?default(?:</span>)?</code></strong>, (\d+) claims: "
                               r"(\d+) reproduced, (\d+) not reproduced, (\d+) inconclusive, (\d+) not run here")


def readme_problems(scoreboard_html: str, readme_text: str) -> list[str]:
    """The README tells newcomers the default build's counts: they must be the scoreboard's (a default
    build only; other profiles' counts differ by design)."""
    built = SCOREBOARD_COUNTS.search(scoreboard_html)
    if built is None:
        return []
    told = README_COUNTS.search(readme_text)
    if told is None:
        return ["README.md no longer states the default build's counts as 'N claims are a reproduced, b not "
                "reproduced, c inconclusive and d not run here'"]
    if told.groups() != built.groups():
        return [f"README.md says {told.group(0)!r}; the default build's scoreboard counts "
                f"{built.group(1)} claims: {', '.join(built.groups()[1:])} (reproduced, not reproduced, "
                "inconclusive, not run here): update the README"]
    return []


def main(html_dir: str) -> int:
    root = Path(html_dir)
    problems = []
    if not (root / "index.html").exists():
        problems.append("index.html is missing")
    if not (root / "_static" / "mathjax" / "tex-chtml.js").exists():
        problems.append("_static/mathjax/tex-chtml.js is missing: math would need the network")
    articles = []
    for page in sorted(root.glob("book/*.html")):
        text = page.read_text(errors="replace")
        stats = page_stats(text)
        problems.extend(f"{page.relative_to(root)}: {p}" for p in layout_problems(stats))
        if (page.parent / f"{page.stem}_audit.html").exists():
            problems.extend(f"{page.relative_to(root)}: {p}" for p in article_problems(stats))
            articles.append(f"{page.stem} {stats['prose_words']:,} words of prose, {stats['total_words']:,} in all")
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
    scoreboard = root / "book" / "scoreboard.html"
    if scoreboard.exists():
        problems.extend(readme_problems(scoreboard.read_text(errors="replace"), README.read_text()))
    archive = root / "_downloads" / "adaptive-mcmc-source.tar.gz"
    if not archive.exists():
        problems.append(f"{archive.relative_to(root)} is missing: readers could not get the sources")
    for line in articles:
        print(f"check_html: article {line}")
    for line in problems:
        print(f"check_html: {line}", file=sys.stderr)
    if not problems:
        print(f"check_html: {len(list(root.glob('book/*.html')))} pages, math local, notebooks downloadable "
              "without raw MyST, sources archived")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "_build/html"))
