"""Chapters as plain Jupyter notebooks (book/_ext/notebook_download.py): what a reader downloads or
gets from ``make notebook`` shows code and numbers, not raw MyST, and runs as is.

Every chapter is converted and rewritten (seconds); foundations is also executed once at the smoke
profile, as the reader would run it, outside the repository, and its text shows the values that run
computed (about a minute). A small synthetic chapter, built at one value and rerun at another, checks
that the downloaded notebook's text follows the rerun (numbers and figures computed above it) and
shows values computed below it as built, then live at the end. The executed notebooks of every chapter
are checked after the smoke build by tests/check_html.py, which reuses the build's execution instead of
running each chapter again.
"""
import sys
import textwrap
from pathlib import Path

import jupytext
import nbformat
import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "book" / "_ext"))
import notebook_download as nd  # noqa: E402
from mcmc_lib import notebook as live  # noqa: E402

CHAPTERS = sorted(p for p in (REPO / "book").glob("*.md") if "kernelspec:" in p.read_text())


@pytest.fixture(scope="module")
def book():
    return nd.Book()


def without_glue(text: str) -> str:
    """A live cell's template without the glue references that show_markdown fills in."""
    return live.INLINE.sub("", live.BLOCK.sub("", text))


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: p.stem)
def test_rewritten_chapter_has_no_raw_myst(chapter, book):
    nb = jupytext.read(chapter)
    source = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    nd.rewrite_notebook(nb, chapter.stem, glue=None, book=book, base=chapter.parent)
    assert nd.raw_myst(nb) == []
    # not executed: every glue reference is live; the templates hold no other MyST
    templates = [c.source for c in nb.cells if nd.is_live_cell(c)]
    assert all(not nd.RAW_MYST.search(without_glue(t)) for t in templates)
    assert ("{glue" in source) == bool(templates)
    markdown = "\n".join([c.source for c in nb.cells if c.cell_type == "markdown"] + templates)
    # every literalinclude became code, every labelled equation got its number
    assert markdown.count("```python") >= source.count("```{literalinclude}")
    assert markdown.count("\\tag{") == len(nd.LABELLED_MATH.findall(source))
    assert "jupytext" not in nb.metadata
    first_code = next(c for c in nb.cells if c.cell_type == "code")
    assert "record_glue()" in first_code.source and first_code.metadata["jupyter"]["source_hidden"]
    assert all(c.metadata["jupyter"]["source_hidden"] and c.metadata["tags"] == ["remove-input"]
               for c in nb.cells if nd.is_live_cell(c))


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
    glued = {"acc": {"text/plain": "0.23456"}, "n": {"text/plain": "20000"}, "who": {"text/plain": "'gadMALAf'"}}
    template = "rate {glue:text}`acc:.2f`, {glue:text}`n:,` draws, {glue:text}`who`"
    assert live.render(template, glued) == [{"text/markdown": "rate 0.23, 20,000 draws, gadMALAf"}]
    assert live.render(template, {}) == [{"text/markdown": "rate `acc` (not computed yet in this run), "
                                          "`n` (not computed yet in this run) draws, `who` (not computed yet in this run)"}]
    # computed above the cell (cell 0 < 3): kept live; computed below it (cell 5): written in as built
    glue = {name: {"data": data, "cell": 0} for name, data in glued.items()}
    rewriter = nd.CellRewriter(book, "x", glue, REPO / "book", position=3)
    assert rewriter.rewrite(template) == template and rewriter.live and rewriter.forward == set()
    glue["acc"]["cell"] = 5
    rewriter = nd.CellRewriter(book, "x", glue, REPO / "book", position=3)
    assert rewriter.rewrite(template) == ("rate 0.23 *(as built; rerun values at the end of the notebook)*, "
                                          "{glue:text}`n:,` draws, {glue:text}`who`")
    assert rewriter.live and rewriter.forward == {"acc"}


@pytest.mark.parametrize("template", [r"$\frac{1}{2}$ of {glue:text}`x`", r'quotes """ and \alpha',
                                      "both ''' and \"\"\"", "ends with a backslash \\"])
def test_a_live_cell_holds_its_template_exactly(template):
    cell = nd.live_cell(template, None)
    assert cell.source.startswith("show_markdown(") and cell.source.endswith(")")
    assert eval(cell.source[len("show_markdown("):-1]).strip("\n") == template


def test_a_glued_figure_shows_as_an_image_then_its_caption():
    template = "Above.\n\n```{glue:figure} fig\n**Fig. 1.2.** Draws of {glue:text}`n:,` chains.\n```\n\nBelow."
    glued = {"fig": {"image/png": "iVBOR", "text/plain": "<Figure size 640x480 with 1 Axes>"},
             "n": {"text/plain": "12000"}}
    assert live.render(template, glued) == [
        {"text/markdown": "Above."}, glued["fig"], {"text/markdown": "**Fig. 1.2.** Draws of 12,000 chains."},
        {"text/markdown": "Below."}]


def test_make_notebook_writes_a_valid_notebook(tmp_path):
    out = nd.convert(REPO / "book" / "mcma.md", tmp_path / "mcma.ipynb", execute=False)
    nb = nbformat.read(out, as_version=4)
    nbformat.validate(nb)
    assert nd.raw_myst(nb) == [] and "rewrite_problems" not in nb.metadata


def run(nb, where: Path):
    from nbclient import NotebookClient

    NotebookClient(nb, timeout=1800, kernel_name="python3", resources={"metadata": {"path": str(where)}}).execute()
    return nb


def shown(cell) -> str:
    return nd.shown_markdown(cell)


def test_foundations_runs_as_is_with_its_numbers(tmp_path, book, monkeypatch):
    """The reader's path: the chapter as the book offers it (executed, then converted: make notebook)
    reruns as is from a directory outside the repository; its text shows the numbers and figures the
    rerun computed, values computed below the text as built (and live at the end); its claims and cache
    go to ./mcmc_book_output/ there, not to the repository's _build/. About a minute: two executions."""
    monkeypatch.setenv("MCMC_BOOK_PROFILE", "smoke")
    monkeypatch.setenv("MCMC_BOOK_OUTPUT", str(tmp_path / "build"))   # the "build" leaves _build/ alone
    chapter = REPO / "book" / "foundations.md"
    nb = nbformat.read(nd.convert(chapter, tmp_path / "foundations.ipynb", execute=True), as_version=4)
    nbformat.validate(nb)
    assert nd.raw_myst(nb) == []
    as_built = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    assert "*(as built; rerun values at the end of the notebook)*" in as_built     # n_chains_text, glued below

    monkeypatch.delenv("MCMC_BOOK_OUTPUT")
    reader = tmp_path / "reader"
    reader.mkdir()
    run(nb, reader)
    live_cells = [c for c in nb.cells if nd.is_live_cell(c)]
    assert live_cells and all(c.outputs for c in live_cells)
    text = "\n".join(shown(c) for c in live_cells)
    assert "not computed" not in text and nd.raw_myst(nb) == []
    assert not any(c.source.lstrip().startswith("#") for c in live_cells)  # headings stay Markdown
    figure = next(c for c in live_cells if "{glue:figure} fig_scatter" in c.source)
    assert any("image/png" in o.get("data", {}) for o in figure.outputs)
    assert not any("application/papermill.record/text/plain" in o.get("data", {}) for c in nb.cells
                   for o in c.get("outputs", []))           # recorded, not shown as an unrenderable output
    assert (reader / "mcmc_book_output" / "claims" / "foundations.json").exists()
    said = [o for c in nb.cells for o in c.get("outputs", []) if "mcmc_book_output" in "".join(o.get("text", ""))]
    assert len(said) == 1                                    # where it writes, said once


DEMO = textwrap.dedent("""\
    ---
    jupytext:
      text_representation:
        extension: .md
        format_name: myst
    kernelspec:
      display_name: Python 3
      language: python
      name: python3
    ---

    # Demo

    We found {glue:text}`verdict_counts`.

    ```{code-cell} ipython3
    import os

    import matplotlib.pyplot as plt
    from myst_nb import glue

    from mcmc_lib.book import glue_value

    value = float(os.environ["DEMO_VALUE"])
    glue_value("value", value)
    fig, ax = plt.subplots()
    ax.set_title(f"value {value:.2f}")
    glue("fig_demo", fig, display=False)
    plt.close(fig)
    ```

    The run computed {glue:text}`value:.2f`, see {numref}`fig-demo`.

    ```{glue:figure} fig_demo
    :name: fig-demo
    :alt: A figure titled with the value

    The value {glue:text}`value:.1f` as a figure title.
    ```

    ```{code-cell} ipython3
    glue("verdict_counts", f"value {value:.2f}", display=False)
    ```
    """)


def test_a_rerun_shows_its_own_numbers(tmp_path, monkeypatch):
    """Built with DEMO_VALUE=1.62, the downloaded notebook reads 1.62; rerun with 1.97, its text says
    1.97 where the value is computed above the text, and keeps the build's 1.62, marked as built, at the
    top, with this run's value at the end."""
    chapter = tmp_path / "demo.md"
    chapter.write_text(DEMO)
    monkeypatch.setenv("DEMO_VALUE", "1.62")
    monkeypatch.setenv("MCMC_BOOK_OUTPUT", str(tmp_path / "output"))
    download = nd.convert(chapter, tmp_path / "demo.ipynb", execute=True)
    nb = nbformat.read(download, as_version=4)
    nbformat.validate(nb)
    top, value_cell, at_end = nb.cells[0], nb.cells[3], nb.cells[-1]
    assert top.cell_type == "markdown" and "value 1.62 *(as built; rerun values at the end" in top.source
    assert nd.is_live_cell(value_cell) and "{glue:text}`value:.2f`" in value_cell.source
    assert "The run computed 1.62, see Fig." not in shown(value_cell)           # not in _toc.yml: no number
    assert "The run computed 1.62, see fig-demo" in shown(value_cell)
    assert "The value 1.6 as a figure title." in shown(value_cell)
    assert any("image/png" in o.data for o in value_cell.outputs)
    assert nd.is_live_cell(at_end) and shown(at_end) == "We found value 1.62."
    assert nd.raw_myst(nb) == []

    monkeypatch.setenv("DEMO_VALUE", "1.97")
    run(nb, tmp_path)
    assert "value 1.62 *(as built; rerun values at the end" in nb.cells[0].source
    assert "The run computed 1.97" in shown(nb.cells[3]) and "The value 2.0 as a figure title." in shown(nb.cells[3])
    assert shown(nb.cells[-1]) == "We found value 1.97."
    assert "1.62" not in shown(nb.cells[3]) + shown(nb.cells[-1])


def test_the_books_download_follows_a_rerun(tmp_path, monkeypatch):
    """The Sphinx path: a one-page book built with the extension (myst-nb executes it and notes which
    cell glued each value) offers a notebook that tests/check_html.py accepts, and that the documented
    command, jupyter nbconvert --to notebook --execute, reruns with its own numbers."""
    import subprocess

    sys.path.insert(0, str(REPO / "tests"))
    from check_html import notebook_problems

    (tmp_path / "demo.md").write_text(DEMO)
    (tmp_path / "_toc.yml").write_text("format: jb-book\nroot: demo\n")
    (tmp_path / "_config.yml").write_text(textwrap.dedent(f"""\
        title: demo
        execute: {{execute_notebooks: force, raise_on_error: true}}
        html: {{use_download_button: true}}
        sphinx: {{local_extensions: {{notebook_download: {REPO / "book" / "_ext"}}}}}
        """))
    monkeypatch.setenv("DEMO_VALUE", "1.62")
    bin_dir = Path(sys.executable).parent
    subprocess.run([str(bin_dir / "jupyter-book"), "build", str(tmp_path), "-W", "-n", "--keep-going"],
                   check=True, capture_output=True, text=True)
    download = tmp_path / "_build" / "html" / "_sources" / "demo.ipynb"
    assert notebook_problems(download) == []
    nb = nbformat.read(download, as_version=4)
    assert "value 1.62 *(as built" in nb.cells[0].source and shown(nb.cells[-1]) == "We found value 1.62."

    monkeypatch.setenv("DEMO_VALUE", "1.97")
    rerun = tmp_path / "rerun"
    subprocess.run([str(bin_dir / "jupyter"), "nbconvert", "--to", "notebook", "--execute", str(download),
                    "--output-dir", str(rerun)], check=True, capture_output=True, text=True, cwd=tmp_path)
    nb = nbformat.read(rerun / "demo.ipynb", as_version=4)
    live_cells = [c for c in nb.cells if nd.is_live_cell(c)]
    assert "The run computed 1.97" in shown(live_cells[0]) and shown(live_cells[-1]) == "We found value 1.97."

    # what check_html reports on a download gone wrong
    nb.cells[0].source += " {glue:text}`value`"
    del live_cells[0].metadata["jupyter"]
    live_cells[-1].outputs = []
    nbformat.write(nb, tmp_path / "bad.ipynb")
    problems = notebook_problems(tmp_path / "bad.ipynb")
    assert any("cell 0 shows raw MyST" in p for p in problems)
    assert any("input is not hidden" in p for p in problems)
    assert any("has no output from the build" in p for p in problems)


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
