"""Check the rendered book in a real browser: headless Chromium at desktop and phone width.

For every page of ``_build/html/book/`` at 1,400 px and 400 px window width this fails when
- a table, figure or display equation is wider than the text column without a horizontal scroll
  container around it (a scroll container is the visible cue); at 1,400 px a display equation must
  fit without scrolling;
- a figure is shown at less than ``MIN_FIGURE_SCALE`` of its pixel width at 1,400 px (its tick labels
  and legend would be below about 9 px: matplotlib's 10 pt text at 100 dpi is 14 px), or has no alt
  text (a hashed file name counts as none), or does not open at full size (book.js wraps each figure in
  a link to its image: on a phone a multi-panel figure fitted to the column cannot be read otherwise);
- raw LaTeX (``$...$``, ``\\frac``, ``\\(``) or raw MyST (``{glue:text}``, ``{literalinclude}``,
  ``{cite}``, fences) reaches the visible text, the sidebar or the page title;
- the page scrolls sideways, or requests anything from the network (the book must read offline).

The browser is Debian's ``chromium`` (or ``$CHROMIUM``), driven over the DevTools protocol on a pipe
(``tests/cdp.py``, Python stdlib only). Pages are served from a local HTTP server on 127.0.0.1.

    python tests/check_browser.py _build/html [--screenshots DIR] [--pages foundations,gsm]
"""
from __future__ import annotations

import argparse
import functools
import http.server
import sys
import threading
import time
from pathlib import Path
from urllib.parse import urlparse

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cdp import Browser, CDPError, find_browser  # noqa: E402

WIDTHS = (1400, 400)
DESKTOP = 1400
# At 1,400 px a figure may be scaled down to 65% of its pixel width: matplotlib's default 10 pt text
# at 100 dpi (13.9 px) is then 9 px. Wider figures need larger fonts set in the figure itself, which
# this check cannot see, so figures are sized for the column instead (about 10.5 inches at most).
MIN_FIGURE_SCALE = 0.65
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


def check_page(browser: Browser, url: str, width: int) -> tuple[list[str], dict]:
    browser.set_width(width)
    browser.call("Network.enable")
    browser.open(url)
    script = (SCRIPT.replace("__STRICT_MATH__", "true" if width >= DESKTOP else "false")
              .replace("__MIN_FIGURE_SCALE__", str(MIN_FIGURE_SCALE if width >= DESKTOP else 0))
              .replace("__WIDTH__", str(width)))
    result = browser.evaluate(script, timeout=120)
    problems = list(result["problems"])
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
                        problems, stats = check_page(browser, url, width)
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
