"""The article form of a method chapter: the verdict table at its top, links from each claim to where it
is decided (the article or its audit page), the one provenance block, figures that record their smallest
text, the budgets tests/check_html.py enforces, and an audit page beside every method chapter."""
import io
from pathlib import Path

import matplotlib
import pytest
import yaml

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

import check_html  # noqa: E402
from mcmc_lib import book, claims  # noqa: E402
from mcmc_lib.claims import ClaimsRegistry, Estimate, Rule  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def record(outcome, short="", section="", statement="The sampler beats the baseline on every target.", published="1.2"):
    return {"id": "c", "statement": statement, "short": short, "published": published, "reproduced": "1.3 [1.1, 1.5] (R = 5)",
            "outcome": outcome, "section": section}


# --- claims: verdict table, counts, links --------------------------------------------------------

def test_counts_text_counts_each_outcome_and_leaves_out_empty_ones():
    records = [record(claims.REPRODUCED), record(claims.REPRODUCED), record(claims.NOT_RUN)]
    assert claims.counts_text(records) == "3 claims: 2 reproduced, 1 not run here"
    assert claims.counts_text([record(claims.INCONCLUSIVE)]) == "1 claim: 1 inconclusive"


def test_verdict_table_has_a_row_per_claim_with_short_title_and_badge(tmp_path):
    rows = [record(claims.REPRODUCED, short="beats baseline", section="sec-a"),
            record(claims.NOT_REPRODUCED, statement="x" * 200)]
    text = claims.verdict_html("demo", rows)
    assert text.count("<tr>") == 3 and 'class="claims-table verdict-table"' in text
    assert ">beats baseline</a>" in text and 'href="#sec-a"' in text
    assert "claim-not-reproduced" in text and "x" * 68 not in text      # a long statement is cut
    assert 'R = 5' in text


def test_verdict_table_of_hypotheses_heads_its_column_hypothesis_not_paper():
    papers = [record(claims.REPRODUCED, published="1.5")]
    hypotheses = [record(claims.REPRODUCED, published="hypothesis: ratio above 1.1"),
                  record(claims.NOT_REPRODUCED, published="hypothesis: above each")]
    assert "<th>Paper</th>" in claims.verdict_html("demo", papers)
    ours = claims.verdict_html("demo", hypotheses)
    assert "<th>Hypothesis</th>" in ours and ">ratio above 1.1</td>" in ours and "hypothesis: " not in ours
    assert 'data-label="Hypothesis"' in ours
    mixed = claims.verdict_html("demo", papers + hypotheses)
    assert "<th>Paper or hypothesis</th>" in mixed and "hypothesis: ratio above 1.1" in mixed


def test_evidence_link_points_to_the_page_that_defines_the_label(tmp_path):
    (tmp_path / "demo.md").write_text("(sec-article)=\n## On the article\n")
    (tmp_path / "demo_audit.md").write_text("(sec-audit)=\n## On the audit page\n")
    assert claims.evidence_link("demo", "sec-article", book_dir=tmp_path) == "#sec-article"
    assert claims.evidence_link("demo", "sec-audit", book_dir=tmp_path) == "./demo_audit.html#sec-audit"
    assert claims.evidence_link("demo", "sec-audit", "./", tmp_path) == "./demo_audit.html#sec-audit"
    assert claims.evidence_link("demo", "sec-article", "./", tmp_path) == "./demo.html#sec-article"
    assert claims.evidence_link("demo", "", book_dir=tmp_path) == ""


def test_short_title_is_recorded_and_checked(tmp_path):
    registry = ClaimsRegistry("demo", directory=tmp_path, profile="smoke")
    registry.declare("a", statement="A long statement of the claim.", source="Table 1", published="1.0",
                     rule=Rule.greater("ratio", 1.0, why="paper"), short="ratio above 1")
    registry.decide("a", Estimate.from_interval(1.5, 1.2, 1.8, 5, "given"))
    assert registry.claims[0].short == "ratio above 1"
    with pytest.raises(ValueError, match="short"):
        registry.declare("b", statement="s", source="t", published="1", rule=Rule.greater("q", 1.0, why="w"),
                         short="word " * 20)
    with pytest.raises(ValueError, match="short"):
        registry.not_run("c", statement="s", source="t", published="1", missing="data.", cost="1 h.", short=3)


def test_glue_verdicts_glues_the_three_keys(monkeypatch, tmp_path):
    glued = {}
    import myst_nb

    monkeypatch.setattr(myst_nb, "glue", lambda key, value, display=True: glued.setdefault(key, value))
    registry = ClaimsRegistry("demo", directory=tmp_path, profile="smoke")
    registry.not_run("a", statement="s", source="t", published="1", missing="data.", cost="1 h.", short="no data")
    registry.glue_verdicts()
    assert glued["verdict_counts"] == "1 claim: 1 not run here"
    assert "verdict-table" in glued["verdicts"].data and ">no data<" in glued["verdicts"].data
    assert "claims-table" in glued["claims_full"].data and "verdict-table" not in glued["claims_full"].data


# --- figures record their smallest text -----------------------------------------------------------

def test_figure_png_records_the_smallest_text_in_image_pixels():
    fig, ax = plt.subplots(figsize=(4, 3), dpi=100)
    ax.plot([0, 1], [0, 1], label="a line")
    ax.set_xlabel("x (units)", fontsize=12)
    ax.tick_params(labelsize=7.2)
    ax.legend(fontsize=9)
    png = book.figure_png(fig)
    assert float(book.png_text(png)[book.TEXT_SIZE_KEY]) == pytest.approx(7.2 * 100 / 72, abs=0.01)
    from PIL import Image
    Image.open(io.BytesIO(png)).verify()         # the inserted chunk keeps the PNG valid (CRC included)
    assert book.figure_png(fig, dpi=200) != png and \
        float(book.png_text(book.figure_png(fig, dpi=200))[book.TEXT_SIZE_KEY]) == pytest.approx(20.0, abs=0.01)
    plt.close(fig)


def test_a_figure_without_text_records_nothing_and_bad_png_is_refused():
    fig = plt.figure(figsize=(2, 2))
    fig.add_axes([0, 0, 1, 1]).set_axis_off()
    assert book.smallest_text_px(fig) is None and book.TEXT_SIZE_KEY not in book.png_text(book.figure_png(fig))
    plt.close(fig)
    with pytest.raises(ValueError, match="png"):
        book.add_png_text(b"not a png at all, not at all....", "k", "v")


def test_provenance_block_is_one_collapsed_details_element():
    block = book.provenance_block("smoke", [1, 2], scale="paper", timings={"Figure 1": 75.0}, notes=["a note"])
    html = block.data
    assert html.startswith('<details class="provenance">') and html.count("<details") == 1
    assert "Profile <code>smoke</code>" in html and "paper" in html and "seeds 1, 2" in html
    assert "Figure 1: 75 s." in html and "a note" in html and "numpy" in html


# --- the budgets on the built HTML ----------------------------------------------------------------

PAGE = """<html><body><main><article class="bd-article"><h1>T<a class="headerlink">#</a></h1>
{body}</article></main></body></html>"""


def test_page_stats_counts_prose_outside_dropdowns_and_all_words():
    body = ("<p>one two three</p><details><p>four five</p></details><pre>code words here</pre>"
            '<table class="verdict-table"><tr><td>six</td></tr></table><details class="provenance"></details>')
    stats = check_html.page_stats(PAGE.format(body=body))
    assert stats["prose_words"] == 3
    assert stats["total_words"] == 1 + 3 + 2 + 3 + 1          # title, prose, dropdown, code, table
    assert stats["verdict_tables"] == 1 and stats["provenance_blocks"] == 1
    highlighted = '<pre><span class="n">x</span><span class="o">=</span><span class="mi">1</span></pre>'
    assert check_html.page_stats(PAGE.format(body=highlighted))["total_words"] == 1 + 1   # title, "x=1"
    assert check_html.article_problems(stats) == [] and check_html.layout_problems(stats) == []


def test_budgets_history_and_raw_arrays_are_found():
    long_prose = "<p>" + "word " * (check_html.MAX_PROSE_WORDS + 1) + "</p>"
    stats = check_html.page_stats(PAGE.format(body=long_prose))
    problems = " ".join(check_html.article_problems(stats))
    assert "words of prose" in problems and "0 verdict tables" in problems
    many = "<pre>" + "x " * (check_html.MAX_TOTAL_WORDS + 1) + "</pre>"
    assert "words in all" in " ".join(check_html.article_problems(check_html.page_stats(PAGE.format(body=many))))
    body = ('<p>An earlier version of this chapter divided by two.</p><pre>array([1., 2.])</pre>'
            '<details class="provenance"></details><details class="provenance"></details>')
    problems = " ".join(check_html.layout_problems(check_html.page_stats(PAGE.format(body=body))))
    assert "history" in problems and "raw array" in problems and "2 provenance blocks" in problems


# --- every method chapter has its audit page ------------------------------------------------------

def test_every_method_chapter_has_an_audit_page_beside_it():
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    methods = next(part for part in toc["parts"] if part["caption"] == "Methods")["chapters"]
    assert [Path(c["file"]).name for c in methods] == ["gsm", "mcma", "kmc", "nonrev_u", "mamba"]
    for chapter in methods:
        stem = Path(chapter["file"]).name
        assert [s["file"] for s in chapter.get("sections", [])] == [f"book/{stem}_audit"], stem
        audit = (ROOT / "book" / f"{stem}_audit.md").read_text()
        assert "kernelspec" not in audit and "{code-cell}" not in audit, f"{stem}_audit.md must be plain MyST"
        assert "claims.glue_verdicts()" in (ROOT / "book" / f"{stem}.md").read_text(), stem


def test_figures_in_a_kernel_record_their_text_size_inline_and_glued():
    """In Jupyter the inline backend registers its own PNG formatter when it loads; every figure of a
    chapter that called chapter_setup() must still carry the record, in the setup cell and after it."""
    import base64

    import nbformat
    from nbclient import NotebookClient

    draw = "fig, ax = plt.subplots(figsize=(4, 3)); ax.plot([1, 2]); ax.set_xlabel('time (s)', fontsize=9)\n"
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("import matplotlib.pyplot as plt\nfrom mcmc_lib.book import chapter_setup\n"
                                          "chapter_setup()\n" + draw),
                nbformat.v4.new_code_cell(draw + "from myst_nb import glue\nglue('figure', fig, display=False)"),
                nbformat.v4.new_code_cell(draw)]
    NotebookClient(nb, timeout=120, kernel_name="python3").execute()
    images = [base64.b64decode(data) for cell in nb.cells for output in cell.outputs
              for mime, data in output.get("data", {}).items() if mime.endswith("image/png")]
    assert len(images) == 4                              # three inline figures and the glued one
    assert all(float(book.png_text(png)[book.TEXT_SIZE_KEY]) == pytest.approx(9 * 100 / 72, abs=0.01)   # the 9 pt label
               for png in images)


def test_figure_html_embeds_the_png_with_alt_text_caption_and_record():
    import base64
    import re

    fig, ax = plt.subplots(figsize=(3, 2))
    ax.set_xlabel("step size", fontsize=11)
    html = book.figure_html(fig, alt="A curve & its <axes>", caption="Figure A1. A caption.").data
    assert 'alt="A curve &amp; its &lt;axes&gt;"' in html and "<figcaption><p>Figure A1. A caption.</p>" in html
    png = base64.b64decode(re.search(r'src="data:image/png;base64,([^"]+)"', html).group(1))
    assert book.TEXT_SIZE_KEY in book.png_text(png)
    assert not plt.fignum_exists(fig.number)                   # shown only where it is pasted
    with pytest.raises(ValueError, match="alt"):
        book.figure_html(plt.figure(), alt=" ")
    assert book.scrolling_table("<table></table>").data == '<div class="claims-scroll"><table></table></div>'


def test_code_that_builds_an_array_is_not_a_printed_array():
    body = ('<div class="cell_input"><pre>x = np.array([1, 2])</pre></div>'
            '<div class="highlight-python notranslate"><pre>np.array([3])</pre></div>')
    assert check_html.page_stats(PAGE.format(body=body))["raw_arrays"] == 0
    printed = '<div class="cell_output"><pre>array([0.1, 0.2])</pre></div>'
    assert check_html.page_stats(PAGE.format(body=printed))["raw_arrays"] == 1


def test_a_group_of_per_cell_claims_is_one_row_with_its_outcome_counts():
    cells = [dict(record(outcome, short=f"cell {i}", section="sec-fig"), group="Figure 2 cells")
             for i, outcome in enumerate([claims.REPRODUCED, claims.INCONCLUSIVE, claims.REPRODUCED])]
    rows = [record(claims.REPRODUCED, short="before")] + cells + [record(claims.NOT_RUN, short="after")]
    text = claims.verdict_html("demo", rows)
    assert text.count("<tr>") == 1 + 3 and "Figure 2 cells (3 cells)" in text and "cell 1" not in text
    assert '2&nbsp;<span class="claim-badge claim-reproduced">' in text and "1&nbsp;<span class=\"claim-badge claim-inconclusive" in text
    assert text.index("before") < text.index("Figure 2 cells") < text.index("after")
    assert claims.claims_html("demo", rows).count("<tr>") == 1 + 5      # the full table keeps every claim


def test_the_readme_counts_must_be_the_default_scoreboards():
    scoreboard = ('<p><strong>Profile <code class="docutils literal notranslate"><span class="pre">default</span>'
                  "</code></strong>, 12 claims: 7 reproduced, 2 not reproduced, 1 inconclusive, 2 not run here.</p>")
    readme = "the book's 12 claims are 7 reproduced, 2 not\nreproduced, 1 inconclusive and 2 not run here; the"
    assert check_html.readme_problems(scoreboard, readme) == []
    stale = readme.replace("7 reproduced", "8 reproduced")
    assert "update the README" in check_html.readme_problems(scoreboard, stale)[0]
    assert "no longer states" in check_html.readme_problems(scoreboard, "no counts here")[0]
    smoke = scoreboard.replace(">default<", ">smoke<")
    assert check_html.readme_problems(smoke, stale) == []          # other profiles' counts differ by design
