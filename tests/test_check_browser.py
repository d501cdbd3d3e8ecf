"""The browser check (tests/check_browser.py) finds what it is meant to find, on a hand-made page.

Skipped where no Chromium is installed (make check-browser installs Debian's package as root).
"""
import re

import pytest

import check_browser
from cdp import find_browser

pytestmark = pytest.mark.skipif(find_browser() is None, reason="no Chromium (apt-get install chromium)")

PAGE = """<!DOCTYPE html><html><head><meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<style>body {{ margin: 0; }} article.bd-article {{ width: 600px; padding: 0 20px; }}
.scroll {{ overflow-x: auto; }} .cut {{ overflow: hidden; }}</style></head>
<body><main><article class="bd-article"><section><h1>A page</h1>
{body}
</section></article></main></body></html>"""

GOOD = """
<p>Plain text with a price of 5 dollars and code <code>$x$ \\frac</code>.</p>
<div class="scroll"><table><tr><td><div style="width: 900px">a wide table in a scroll container</div></td></tr></table></div>
<a href="scatter.svg"><img alt="A scatter plot of draws" width="300" height="100"
     src="data:image/svg+xml;utf8,<svg xmlns='http://www.w3.org/2000/svg' width='300' height='100'/>"></a>
<pre>```{glue:text}` in code is fine</pre>
"""

BAD = """
<p>Raw math $x^2$ and \\(u\\) and a role {glue:text}`acc:.2f` and {cite}`key`.</p>
<table><tr><td><div style="width: 900px">a wide table without a cue</div></td></tr></table>
<div class="cut"><table><tr><td><div style="width: 900px">a table cut at the edge</div></td></tr></table></div>
<img alt="0a1b2c3d4e5f60718293a4b5c6d7e8f9" width="300" height="100"
     src="data:image/svg+xml;utf8,<svg xmlns='http://www.w3.org/2000/svg' width='300' height='100'/>">
"""


@pytest.fixture(scope="module")
def browser():
    with check_browser.Browser(find_browser()) as b:
        yield b


def check(browser, tmp_path, body, title="A page", width=1400):
    page = tmp_path / "page.html"
    page.write_text(PAGE.format(title=title, body=body))
    server, base = check_browser.serve(tmp_path)
    try:
        problems, stats = check_browser.check_page(browser, f"{base}/page.html", width)
    finally:
        server.shutdown()
    return problems, stats


def test_a_clean_page_passes(browser, tmp_path):
    problems, stats = check(browser, tmp_path, GOOD)
    assert problems == []
    assert stats["tables"] == 1 and stats["figures"] == 1 and stats["scrolling"] == 1


def test_each_defect_is_found(browser, tmp_path):
    problems, _ = check(browser, tmp_path, BAD, title=r"Updating \(u\)")
    text = "\n".join(problems)
    assert "raw $...$ math" in text
    assert "raw \\( \\) or \\[ \\] math in the page text" in text
    assert "raw MyST role" in text
    assert "overflows the column without a scroll cue" in text
    assert "cut at the edge without a scroll cue" in text
    assert "figure without alt text" in text
    assert "figure that does not open at full size" in text
    assert "in the page title" in text
    problems, _ = check(browser, tmp_path, BAD, width=400)
    assert any("the page scrolls sideways" in p for p in problems)


def check_article(browser, tmp_path, body, width=1400):
    page = tmp_path / "page.html"
    page.write_text(PAGE.format(title="An article", body=body))
    server, base = check_browser.serve(tmp_path)
    try:
        return check_browser.check_page(browser, f"{base}/page.html", width, tmp_path, article=True)
    finally:
        server.shutdown()


VERDICTS = '<table class="verdict-table"><tr><td>claim</td><td>reproduced</td></tr></table>'


def figure_file(tmp_path, name, text_px, width_px):
    """A PNG of ``width_px`` that records its smallest text as ``text_px`` (mcmc_lib.book)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from mcmc_lib.book import TEXT_SIZE_KEY, add_png_text, figure_png

    fig = plt.figure(figsize=(width_px / 100, 1), dpi=100)
    fig.patch.set_facecolor("white")
    png = figure_png(fig)
    plt.close(fig)
    (tmp_path / name).write_bytes(add_png_text(png, TEXT_SIZE_KEY, str(text_px)))
    return f'<a href="{name}"><img alt="A test figure" src="{name}" style="max-width: 100%"></a>'


def test_an_article_passes_with_verdicts_on_top_fitting_tables_and_readable_figures(browser, tmp_path):
    body = VERDICTS + "<table><tr><td>narrow</td></tr></table>" + figure_file(tmp_path, "f.png", 14, 500)
    problems, stats = check_article(browser, tmp_path, body)
    assert problems == [] and stats["verdicts_at"] < 200


def test_an_article_with_verdicts_below_the_first_screen_or_wide_tables_or_small_text_fails(browser, tmp_path):
    body = ('<div style="height: 1700px">the story first</div>' + VERDICTS
            + '<div class="scroll"><table><tr><td><div style="width: 900px">a wide table</div></td></tr></table></div>'
            + figure_file(tmp_path, "small.png", 12, 1200))        # 1,200 px shown at 600: 6 px text
    text = "\n".join(check_article(browser, tmp_path, body)[0])
    assert "the verdict table starts at" in text
    assert "should fit at this width" in text
    assert re.search(r"figure text shown at [56]\.\d px", text)     # tight cropping pads the image a little
    # on a phone a wide table may scroll and the first screen is not checked
    phone = "\n".join(check_article(browser, tmp_path, body, width=400)[0])
    assert "verdict table" not in phone and "should fit" not in phone and "figure text" not in phone


def test_an_article_without_a_verdict_table_fails(browser, tmp_path):
    assert any("no verdict table" in p for p in check_article(browser, tmp_path, "<p>Text.</p>")[0])


def test_an_embedded_figure_is_read_from_its_data_url(browser, tmp_path):
    """Figures glued onto an audit page are embedded (mcmc_lib.book.figure_html): their text record is
    read from the data: URL."""
    import base64

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from mcmc_lib.book import TEXT_SIZE_KEY, add_png_text, figure_png

    fig = plt.figure(figsize=(12, 1), dpi=100)
    png = base64.b64encode(add_png_text(figure_png(fig), TEXT_SIZE_KEY, "12")).decode("ascii")
    plt.close(fig)
    body = VERDICTS + f'<a href="#"><img alt="An embedded figure" src="data:image/png;base64,{png}" style="max-width: 100%"></a>'
    problems, _ = check_article(browser, tmp_path, body)
    assert any("figure text shown at" in p and "recorded 12.0 px" in p for p in problems)
