"""Small helpers for the chapters' pages: glued values, the one provenance block a page ends with, and
figures that record the size of their smallest text (so the browser check can see it is readable)."""
from __future__ import annotations

import html
import os
import platform
import struct
import zlib
from io import BytesIO

import numpy as np

from .validation import require_mapping, require_number, require_sequence, require_str, wrong_type

# The PNG text chunk in which a figure records its smallest text, in pixels of the image (tests/check_browser.py).
TEXT_SIZE_KEY = "mcmc_lib:min-text-px"


def _require_figure(figure, name: str = "figure"):
    """A matplotlib figure."""
    from matplotlib.figure import Figure

    if not isinstance(figure, Figure):
        if isinstance(figure, (list, tuple)):
            raise ValueError(f"{name} must be one matplotlib figure, got a {type(figure).__name__} of {len(figure)}")
        raise wrong_type(name, "a matplotlib Figure", figure)
    return figure


def _require_dpi(dpi):
    if dpi is not None and require_number(dpi, "dpi") <= 0:
        raise ValueError(f"dpi must be positive, got {dpi!r}")


def _require_png(png):
    if not isinstance(png, (bytes, bytearray)):
        if isinstance(png, (list, tuple)):
            raise ValueError(f"png must be one PNG as bytes, got a {type(png).__name__} of {len(png)}")
        raise wrong_type("png", "PNG bytes", png)


def glue_value(name: str, value) -> None:
    """``myst_nb.glue`` a value (number or text) for ``{glue:text}`name:.3f``` formatting: numpy scalars become
    Python numbers first (glue stores their repr, which the formatter cannot parse)."""
    require_str(name, "name")
    from myst_nb import glue

    value = value.item() if isinstance(value, np.generic) else value
    glue(name, value, display=False)


def listed(items) -> str:
    """Items as prose lists them: 'a', 'a and b', 'a, b and c'."""
    items = [require_str(item, f"items[{i}]") for i, item in enumerate(require_sequence(items, "items"))]
    if not items:
        raise ValueError("items must hold at least one string, got an empty list")
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def one_blas_thread() -> None:
    """Limit BLAS to one thread in this kernel for the rest of the session, as ``make`` does
    (OMP_NUM_THREADS=1) and as every experiment unit does: the chains are vectorised already, a chapter
    run in a reader's Jupyter then gives the book's numbers bit for bit, and on a busy machine BLAS
    threads fighting over the cores cannot make a chapter many times slower."""
    import scipy.linalg  # noqa: F401  loads scipy's own BLAS, so that the limit covers it too
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=1)


def chapter_setup() -> None:
    """What every chapter does first: one BLAS thread (``one_blas_thread``) and figures that record their
    smallest text size (``record_figure_text_size``)."""
    one_blas_thread()
    record_figure_text_size()


# --------------------------------------------------------------------------------------------------
# Figures: the smallest text, recorded in the PNG
# --------------------------------------------------------------------------------------------------

def smallest_text_px(figure, dpi: float | None = None) -> float | None:
    """The size in image pixels of the smallest visible, non-empty text of a matplotlib figure (tick
    labels, legends, titles, annotations) when saved at ``dpi`` (the figure's own by default); None when
    the figure has no text."""
    from matplotlib.text import Text

    _require_figure(figure)
    _require_dpi(dpi)
    dpi = figure.dpi if dpi is None else dpi
    sizes = [t.get_fontsize() for t in figure.findobj(Text)
             if t.get_visible() and t.get_text().strip()]
    return min(sizes) * dpi / 72 if sizes else None


def figure_png(figure, dpi: float | None = None) -> bytes:
    """The figure as PNG (cropped as Jupyter shows it), with its smallest text size recorded in a text
    chunk under ``TEXT_SIZE_KEY``."""
    _require_figure(figure)
    _require_dpi(dpi)
    dpi = figure.dpi if dpi is None else dpi
    buffer = BytesIO()
    figure.savefig(buffer, format="png", dpi=dpi, bbox_inches="tight", facecolor=figure.get_facecolor())
    size = smallest_text_px(figure, dpi)
    return buffer.getvalue() if size is None else add_png_text(buffer.getvalue(), TEXT_SIZE_KEY, f"{size:.2f}")


def add_png_text(png: bytes, key: str, value: str) -> bytes:
    """``png`` with a tEXt chunk ``key``: ``value`` inserted after its header chunk."""
    _require_png(png)
    require_str(key, "key")
    require_str(value, "value")
    signature, header_end = 8, 8 + 4 + 4 + 13 + 4          # signature, then IHDR (length, type, 13 bytes, CRC)
    if png[:signature] != b"\x89PNG\r\n\x1a\n" or png[12:16] != b"IHDR":
        raise ValueError("png must be PNG bytes starting with their IHDR chunk")
    body = b"tEXt" + key.encode("latin-1") + b"\0" + value.encode("latin-1")
    chunk = struct.pack(">I", len(body) - 4) + body + struct.pack(">I", zlib.crc32(body) & 0xFFFFFFFF)
    return png[:header_end] + chunk + png[header_end:]


def png_text(png: bytes) -> dict:
    """The tEXt chunks of PNG bytes, as a dict."""
    _require_png(png)
    found, position = {}, 8
    while position + 8 <= len(png):
        length, kind = struct.unpack(">I", png[position:position + 4])[0], png[position + 4:position + 8]
        if kind == b"tEXt":
            key, _, value = png[position + 8:position + 8 + length].partition(b"\0")
            found[key.decode("latin-1")] = value.decode("latin-1")
        if kind == b"IEND":
            break
        position += 12 + length
    return found


def figure_html(figure, alt: str, caption: str = "", dpi: float | None = None):
    """A matplotlib figure as an HTML ``<figure>`` (the PNG embedded, its text size recorded, ``alt`` as
    its alt text, ``caption`` under it), for glue onto another page: an audit page pastes it with the
    ``{glue}`` directive and ``:doc:``, which would give a plain image no alt text and no caption. The
    figure is closed (it is shown only where it is pasted)."""
    import base64

    import matplotlib.pyplot as plt
    from IPython.display import HTML

    _require_figure(figure)
    if not isinstance(alt, str) or not alt.strip():
        raise ValueError(f"alt must describe the figure for readers who cannot see it, got {alt!r}")
    require_str(caption, "caption")
    png = base64.b64encode(figure_png(figure, dpi)).decode("ascii")
    plt.close(figure)
    caption_html = f"<figcaption><p>{html.escape(caption)}</p></figcaption>" if caption else ""
    return HTML(f'<figure class="glued-figure"><img alt="{html.escape(alt)}" src="data:image/png;base64,{png}">'
                f"{caption_html}</figure>")


def scrolling_table(table):
    """A table (a pandas DataFrame or Styler, or HTML text) for glue onto an audit page, in a container
    that scrolls sideways when the table is wider than the column."""
    from IPython.display import HTML

    if not isinstance(table, str) and not callable(getattr(table, "to_html", None)):
        if isinstance(table, (list, tuple)):
            raise ValueError(f"table must be one table, got a {type(table).__name__} of {len(table)}")
        raise wrong_type("table", "a pandas DataFrame or Styler, or HTML text", table)
    text = table if isinstance(table, str) else table.to_html()
    return HTML(f'<div class="claims-scroll">{text}</div>')


def record_figure_text_size() -> None:
    """Show matplotlib figures in this kernel (inline, and through ``glue``) as PNGs that record their
    smallest text size, which ``tests/check_browser.py`` scales by the width the page gives the image."""
    try:
        from IPython import get_ipython
    except ImportError:
        return
    shell = get_ipython()
    if shell is None:
        return
    # Jupyter's inline backend registers its own PNG formatter when it loads (at the first figure, or
    # after the cell that loaded it), which would replace this one: load it now, then install this one,
    # and again before every cell.
    import matplotlib.pyplot as plt

    plt.close(plt.figure())
    _install_png_formatter()
    if _install_png_formatter not in shell.events.callbacks["pre_run_cell"]:
        shell.events.register("pre_run_cell", _install_png_formatter)


def _install_png_formatter(*_) -> None:
    from IPython import get_ipython
    from matplotlib.figure import Figure

    get_ipython().display_formatter.formatters["image/png"].for_type(Figure, figure_png)


# --------------------------------------------------------------------------------------------------
# The provenance block: environment, profile, seeds and stores, once per page, collapsed
# --------------------------------------------------------------------------------------------------

def provenance_block(profile: str, seeds, scale: str | None = None, stored=None, timings=None, notes=()):
    """The one collapsed block a chapter ends with: versions, machine, floating point, profile and
    seeds, where each experiment's results came from (``stored``: a ``mcmc_lib.store.Experiments``;
    every experiment it ran), the wall times (``timings``: {what: seconds}) and any ``notes`` (text).
    Returns an IPython HTML object (``<details class="provenance">``)."""
    from IPython.display import HTML

    require_str(profile, "profile")
    if scale is not None:
        require_str(scale, "scale")
    if stored is not None:
        _require_experiments(stored)
    if timings is not None:
        for what, seconds in require_mapping(timings, "timings").items():
            require_number(seconds, f"timings[{what!r}]")
    require_sequence(notes, "notes")

    from .store import duration_text

    e = html.escape
    lines = [f"Profile <code>{e(profile)}</code>"
             + (f", results at the <code>{e(scale)}</code> profile's scale (from the committed store)"
                if scale and scale != profile else "")
             + f"; seeds {e(', '.join(map(str, np.atleast_1d(seeds).tolist())))}."]
    lines.append(e(_versions()))
    lines.append(e(_machine()))
    for what, seconds in (timings or {}).items():
        lines.append(f"{e(what)}: {duration_text(seconds)}.")
    lines.extend(e(str(n)) for n in notes)
    items = "".join(f"<li>{line}</li>" for line in lines)
    table = experiments_table(stored) if stored is not None and stored.results else ""
    return HTML(f'<details class="provenance"><summary>Environment and provenance</summary><ul>{items}</ul>'
                f"{table}</details>")


def _short_commit(entry: dict) -> str:
    """A run's or a verification's commit as a table shows it: 7 characters, "+" for uncommitted changes."""
    return str(entry.get("commit", ""))[:7] + ("+" if entry.get("uncommitted_changes") else "")


def experiments_table(stored) -> str:
    """Where each experiment's results came from, a row each: the profile whose scale they have, the file
    or this build, units, commit, date, computing time, and whether the code changed since (HTML)."""
    from .store import _units, duration_text

    _require_experiments(stored)
    e = html.escape
    rows = []
    for name, result in stored.results.items():
        record = result.record or {}
        where = "store" if result.source == "store" else "this build"
        compute = record.get("unit_cpu_seconds_total") or record.get("unit_seconds_total")
        commit = _short_commit(record)
        remarks = []
        if result.code_changed:
            remarks.append("code changed since")
        elif getattr(result, "verified", None):        # changed, and a sample rerun under it gave these results
            remarks.append(f"verified under {_short_commit(result.verified)} "
                           f"({_units(len(result.verified['units']))} rerun, identical"
                           f"{' but for times' if result.verified.get('timings_aside') else ''})")
        if record.get("n_units_sharing_a_core"):
            remarks.append(f"{record['n_units_sharing_a_core']} shared a core")
        cells = [name, result.profile, where, record.get("n_units", len(result.values)), commit,
                 str(record.get("date", ""))[:10], duration_text(compute) if compute else "",
                 "; ".join(remarks)]
        rows.append("<tr>" + "".join(f"<td>{e(str(c))}</td>" for c in cells) + "</tr>")
    head = "".join(f"<th>{h}</th>" for h in ("experiment", "scale", "from", "units", "commit", "date",
                                             "computing", "remarks"))
    return (f"<p>Stored results are in <code>results/&lt;scale&gt;/{e(stored.chapter)}/&lt;experiment&gt;.json</code>, "
            "with the full record of each run (machine, unit times, seeds).</p>"
            f'<div class="claims-scroll"><table class="provenance-table"><thead><tr>{head}</tr></thead>'
            f'<tbody>{"".join(rows)}</tbody></table></div>')


def _require_experiments(stored, name: str = "stored"):
    """A ``mcmc_lib.store.Experiments`` (what provenance_block and experiments_table read)."""
    if not isinstance(getattr(stored, "results", None), dict) or not isinstance(getattr(stored, "chapter", None), str):
        if isinstance(stored, (list, tuple)):
            raise ValueError(f"{name} must be one Experiments, got a {type(stored).__name__} of {len(stored)}")
        raise wrong_type(name, "a mcmc_lib.store.Experiments", stored)
    return stored


def _versions() -> str:
    from importlib.metadata import PackageNotFoundError, version

    parts = [f"Python {platform.python_version()}"]
    for package in ("numpy", "scipy", "autograd", "arviz", "matplotlib", "pandas"):
        try:
            parts.append(f"{package} {version(package)}")
        except PackageNotFoundError:
            continue
    from . import __version__

    return ", ".join(parts + [f"mcmc_lib {__version__}"]) + "."


def _machine() -> str:
    from .portable import describe

    return (f"Machine: {platform.machine()}, {platform.system()} {platform.release()}, {os.cpu_count()} cores, "
            f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}; floating point: {describe()}.")
