"""The browser check (tests/check_browser.py) finds what it is meant to find, on a hand-made page.

Skipped where no Chromium is installed (make check-browser installs Debian's package as root).
"""
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
