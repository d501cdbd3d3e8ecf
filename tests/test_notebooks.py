"""Chapters as plain Jupyter notebooks (book/_ext/notebook_download.py): what a reader downloads or
gets from ``make notebook`` shows code and numbers, not raw MyST, and runs as is.

Every chapter is converted and rewritten (seconds); foundations is also executed once at the smoke
profile, as the reader would run it, and its glued values fill in its text (about a minute). The
executed notebooks of every chapter are checked after the smoke build by tests/check_html.py, which
reuses the build's execution instead of running each chapter again.
"""
import sys
from pathlib import Path

import jupytext
import nbformat
import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "book" / "_ext"))
import notebook_download as nd  # noqa: E402

CHAPTERS = sorted(p for p in (REPO / "book").glob("*.md") if "kernelspec:" in p.read_text())


@pytest.fixture(scope="module")
def book():
    return nd.Book()


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: p.stem)
def test_rewritten_chapter_has_no_raw_myst(chapter, book):
    nb = jupytext.read(chapter)
    source = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    nd.rewrite_notebook(nb, chapter.stem, glue=None, book=book, base=chapter.parent)
    assert nd.raw_myst(nb) == []
    markdown = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    # every literalinclude became code, every labelled equation got its number
    assert markdown.count("```python") >= source.count("```{literalinclude}")
    assert markdown.count("\\tag{") == len(nd.LABELLED_MATH.findall(source))
    assert "jupytext" not in nb.metadata


def test_equation_and_figure_numbers_follow_the_toc(book):
    # foundations is chapter 1 and gsm chapter 2 in _toc.yml; numbers count within the chapter
    assert book.equations["eq-mh"] == "1.1"
    assert all(v.startswith("2.") for k, v in book.equations.items() if k.startswith("eq-gsm"))
    assert book.figures and all(v.count(".") == 1 for v in book.figures.values())


def test_literalinclude_and_citations(book):
    code = nd.literalinclude("../mcmc_lib/samplers/base.py", {"pyobject": "metropolis_hastings_accept"},
                             REPO / "book")
    assert code.startswith("From `mcmc_lib/samplers/base.py`")
    assert "def metropolis_hastings_accept(" in code and code.rstrip().endswith("```")
    assert book.cite("metropolis1953equation,hastings1970monte", textual=False) == \
        "(Metropolis et al., 1953; Hastings, 1970)"
    assert book.cite("rasmussen2006gaussian", textual=True) == "Rasmussen and Williams (2006)"


def test_glue_values_are_formatted_as_on_the_page(book):
    rewriter = nd.CellRewriter(book, "x", {"acc": {"data": {"text/plain": "0.23456"}},
                                           "n": {"data": {"text/plain": "20000"}},
                                           "who": {"data": {"text/plain": "'gadMALAf'"}}}, REPO / "book")
    text = rewriter.rewrite("rate {glue:text}`acc:.2f`, {glue:text}`n:,` draws, {glue:text}`who`")
    assert text == "rate 0.23, 20,000 draws, gadMALAf"


def test_make_notebook_writes_a_valid_notebook(tmp_path):
    out = nd.convert(REPO / "book" / "mcma.md", tmp_path / "mcma.ipynb", execute=False)
    nb = nbformat.read(out, as_version=4)
    nbformat.validate(nb)
    assert nd.raw_myst(nb) == [] and "rewrite_problems" not in nb.metadata


def test_foundations_runs_as_is_with_its_numbers(tmp_path, book, monkeypatch):
    """The reader's path, with one execution: the rewritten notebook runs as is (from a directory that
    is not the book's), and the values it glues fill in every number and figure of its text."""
    from nbclient import NotebookClient

    monkeypatch.setenv("MCMC_BOOK_PROFILE", "smoke")
    chapter = REPO / "book" / "foundations.md"
    as_downloaded = nd.rewrite_notebook(jupytext.read(chapter), "foundations", None, book, chapter.parent)
    as_downloaded.metadata.pop("rewrite_problems")
    NotebookClient(as_downloaded, timeout=1800, kernel_name="python3",
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    glue = nd.glue_from_outputs(as_downloaded)
    assert "fig_scatter" in glue

    nb = nd.rewrite_notebook(jupytext.read(chapter), "foundations", glue, book, chapter.parent)
    assert nb.metadata.pop("rewrite_problems") == []
    markdown = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    assert nd.raw_myst(nb) == []
    assert "computed when the notebook runs" not in markdown
    figure_cell = next(c for c in nb.cells if "attachment:fig_scatter.png" in c.source)
    assert "image/png" in figure_cell.attachments["fig_scatter.png"]
    nbformat.validate(nb)


def test_a_cell_that_echoes_a_bare_value_is_a_problem():
    sys.path.insert(0, str(REPO / "tests"))
    from check_html import echoed_values

    def cell(*outputs):
        return nbformat.v4.new_code_cell("x", outputs=list(outputs))

    echo = nbformat.v4.new_output("execute_result", {"text/plain": "'reproduced'"}, execution_count=1)
    table = nbformat.v4.new_output("execute_result", {"text/plain": "<table>", "text/html": "<table/>"},
                                   execution_count=2)
    shown = nbformat.v4.new_output("display_data", {"text/plain": "'reproduced'"})
    assert echoed_values(cell(echo)) == ["echoes a bare value 'reproduced' (assign it, or end the line with ;)"]
    assert echoed_values(cell(table, shown)) == []          # a rich result and a deliberate display are fine
