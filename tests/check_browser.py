"""Check the rendered book in a real browser: headless Chromium at desktop and phone width.

For every page of ``_build/html/book/`` at 1,400 px and 400 px window width this fails when
- a table, figure or display equation is wider than the text column without a horizontal scroll
  container around it (a scroll container is the visible cue); at 1,400 px a display equation must
  fit without scrolling;
- a figure's smallest text (ticks, legends, labels) is shown below ``MIN_TEXT_PX`` at 1,400 px: the
  chapters' figures record their smallest text in the PNG (``mcmc_lib.book.figure_png``), which is
  scaled by the width the page gives the image (a figure without the record is taken to have
  matplotlib's default 10 pt text); or it has no alt text (a hashed file name counts as none), or does
  not open at full size (book.js wraps each figure in a link to its image: on a phone a multi-panel
  figure fitted to the column cannot be read otherwise);
- on a method chapter's article page (a page with an audit page ``<stem>_audit.html`` beside it), at
  1,400 px: the verdict table does not start within the first ``VERDICT_WITHIN_PX``, or a table is
  wider than the column (wide data tables belong on the audit page, where they may scroll);
- raw LaTeX (``$...$``, ``\\frac``, ``\\(``) or raw MyST (``{glue:text}``, ``{literalinclude}``,
  ``{cite}``, fences) reaches the visible text, the sidebar or the page title;
- the page scrolls sideways, or requests anything from the network (the book must read offline).

The browser is Debian's ``chromium`` (or ``$CHROMIUM``), driven over the DevTools protocol on a pipe
(``tests/cdp.py``, Python stdlib only). Pages are served from a local HTTP server on 127.0.0.1.

    python tests/check_browser.py _build/html [--screenshots DIR] [--pages foundations,gsm]
"""
from __future__ import annotations

import argparse
import base64
import functools
import http.server
import sys
import threading
import time
from pathlib import Path
from urllib.parse import urlparse

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cdp import Browser, CDPError, find_browser  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from mcmc_lib.book import TEXT_SIZE_KEY, png_text  # noqa: E402

WIDTHS = (1400, 400)
DESKTOP = 1400
MIN_TEXT_PX = 10             # figure text as shown at 1,400 px
DEFAULT_TEXT_PX = 10 * 100 / 72   # matplotlib's 10 pt at 100 dpi, for a figure that records no size
VERDICT_WITHIN_PX = 1600     # the verdict table starts on the first screen or just below it
SCRIPT = (Path(__file__).resolve().parent / "check_browser.js").read_text()


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def serve(root: Path):
    handler = functools.partial(QuietHandler, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


def image_png(src: str, root: Path) -> bytes | None:
    """The PNG bytes an image shows: a file under ``root``, or embedded in a data: URL; None otherwise."""
    prefix = "data:image/png;base64,"
    if src.startswith(prefix):
        return base64.b64decode(src[len(prefix):])
    path = root / src.lstrip("/")
    return path.read_bytes() if path.suffix == ".png" and path.exists() else None


def figure_text_problems(images: list, root: Path) -> list[str]:
    """Figures whose smallest text is shown below ``MIN_TEXT_PX``: the size recorded in the PNG (or
    matplotlib's default) times the width the page gives the image over its own width."""
    found = []
    for image in images:
        if not image["natural"] or not image["shown"]:
            continue
        recorded = png_text(png).get(TEXT_SIZE_KEY) if (png := image_png(image["src"], root)) else None
        text_px = (float(recorded) if recorded else DEFAULT_TEXT_PX) * image["shown"] / image["natural"]
        if text_px < MIN_TEXT_PX - 0.05:
            found.append(f"figure text shown at {text_px:.1f} px (at least {MIN_TEXT_PX}; "
                         f"{'recorded' if recorded else 'assumed'} {float(recorded or DEFAULT_TEXT_PX):.1f} px in a "
                         f"{image['natural']} px image shown {round(image['shown'])} px wide: size the figure for "
                         f"the column or enlarge its fonts): {image['where']}")
    return found


def check_page(browser: Browser, url: str, width: int, root: Path | None = None,
               article: bool = False) -> tuple[list[str], dict]:
    browser.set_width(width)
    browser.call("Network.enable")
    browser.open(url)
    desktop = width >= DESKTOP
    script = (SCRIPT.replace("__STRICT_MATH__", "true" if desktop else "false")
              .replace("__STRICT_TABLES__", "true" if desktop and article else "false")
              .replace("__WIDTH__", str(width)))
    result = browser.evaluate(script, timeout=120)
    problems = list(result["problems"])
    if desktop and root is not None:
        problems.extend(figure_text_problems(result.get("images", []), root))
    if desktop and article:
        top = result.get("verdictTop")
        if top is None:
            problems.append("no verdict table (table.verdict-table) on this article page")
        elif top > VERDICT_WITHIN_PX:
            problems.append(f"the verdict table starts at {top} px, below the first {VERDICT_WITHIN_PX} px: "
                            "shorten what stands above it")
        result["stats"]["verdicts_at"] = top
    host = urlparse(url).netloc
    for event in browser.events:
        if event.get("method") == "Network.requestWillBeSent":
            request_url = event["params"]["request"]["url"]
            parsed = urlparse(request_url)
            if parsed.scheme in ("http", "https", "ws", "wss") and parsed.netloc != host:
                problems.append(f"requests {request_url} from the network")
        if event.get("method") == "Runtime.exceptionThrown":
            details = event["params"]["exceptionDetails"]
            problems.append(f"script error: {details.get('exception', {}).get('description', details.get('text'))}")
    browser.events.clear()
    check_page.notes = result.get("notes", [])
    return problems, result["stats"]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("html_dir", nargs="?", default="_build/html")
    parser.add_argument("--pages", help="comma-separated page stems (default: every page under book/)")
    parser.add_argument("--widths", default=",".join(map(str, WIDTHS)))
    parser.add_argument("--screenshots", help="directory for a screenshot of each page's top at each width")
    parser.add_argument("--full-page", action="store_true", help="screenshots of the whole page (up to 12,000 px)")
    parser.add_argument("--verbose", action="store_true", help="also list the content that scrolls (allowed)")
    args = parser.parse_args(argv)

    root = Path(args.html_dir)
    pages = sorted(root.glob("book/*.html"))
    if args.pages:
        wanted = set(args.pages.split(","))
        pages = [p for p in pages if p.stem in wanted]
    if not pages:
        print(f"check_browser: no pages under {root}/book", file=sys.stderr)
        return 1
    executable = find_browser()
    if executable is None:
        print("check_browser: no Chromium found (apt-get install chromium, or set CHROMIUM)", file=sys.stderr)
        return 2
    widths = [int(w) for w in args.widths.split(",")]
    shots = Path(args.screenshots) if args.screenshots else None
    if shots:
        shots.mkdir(parents=True, exist_ok=True)

    start = time.monotonic()
    server, base = serve(root)
    failures = 0
    try:
        with Browser(executable) as browser:
            for page in pages:
                for width in widths:
                    url = f"{base}/{page.relative_to(root).as_posix()}"
                    try:
                        problems, stats = check_page(browser, url, width, root,
                                                     article=(page.parent / f"{page.stem}_audit.html").exists())
                    except CDPError as error:
                        problems, stats = [f"could not check the page: {error}"], {}
                    if shots:
                        browser.screenshot(str(shots / f"{page.stem}-{width}.png"), full_page=args.full_page)
                    failures += len(problems)
                    summary = ", ".join(f"{k} {v}" for k, v in stats.items())
                    print(f"check_browser: {page.stem} at {width} px: {len(problems)} problems ({summary})")
                    for line in (problems + [f"(ok) {n}" for n in check_page.notes] if args.verbose else problems):
                        # JavaScript slices strings in UTF-16 units and may split a surrogate pair
                        line = line.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
                        print(f"  - {line}")
    finally:
        server.shutdown()
    elapsed = time.monotonic() - start
    print(f"check_browser: {len(pages)} pages at {', '.join(map(str, widths))} px in {elapsed:.0f} s: "
          f"{'OK' if failures == 0 else f'{failures} problems'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
