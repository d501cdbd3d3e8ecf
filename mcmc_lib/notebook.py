"""Live numbers in a chapter downloaded as a plain notebook (book/_ext/notebook_download.py).

In the book, Sphinx pastes the values a chapter glues (``myst_nb.glue``, ``mcmc_lib.book.glue_value``)
into its Markdown: ``{glue:text}`name:.2f```, ``{glue}`name``` and the ``{glue:figure}`` / ``{glue}``
directives. Plain Jupyter cannot, so in the downloaded notebook every Markdown cell that pastes values
computed above it is a code cell with hidden input, ``show_markdown(template)``, that renders the
Markdown with the values glued in this kernel. The notebook's first code cell calls ``record_glue()``,
which records them as they are glued. ``render`` is also what the download uses for the cell's saved
output, from the build's values, so the notebook reads the same before a rerun as after one.
"""
from __future__ import annotations

import re

GLUE_PREFIX = "application/papermill.record/"   # the MIME prefix of myst_nb.glue(..., display=False)
GLUED: dict[str, dict] = {}                      # name -> MIME bundle, as glued in this kernel

INLINE = re.compile(r"\{glue(?::text|:any)?\}`(?P<body>[^`]*)`")
BLOCK = re.compile(r"^(?P<fence>`{3,}|:{3,})\{glue(?::figure|:any)?\}[ \t]*(?P<name>\S+)[ \t]*\n"
                   r"(?P<body>.*?)^(?P=fence)[ \t]*$", re.M | re.S)
OPTION = re.compile(r"^:[\w-]+:.*$\n?", re.M)
NOT_COMPUTED = "(not computed yet in this run)"


def _require_template(template):
    if not isinstance(template, str):
        if isinstance(template, (list, tuple)):
            raise ValueError(f"template must be one string of Markdown, got a {type(template).__name__} "
                             f"of {len(template)}")
        raise TypeError(f"template must be a string of Markdown, got {type(template).__name__} {template!r}")
    return template


def record_glue() -> None:
    """Record every value glued from now on in this kernel in ``GLUED``.

    Wraps the kernel's display publisher, through which ``myst_nb.glue`` sends its record (whichever
    way the chapter calls it). A record glued with ``display=False`` is kept here instead of being
    published: Jupyter has no renderer for its MIME types and could say so under the cell."""
    from IPython import get_ipython

    shell = get_ipython()
    if shell is None or getattr(shell.display_pub, "records_glue", False):
        return
    publisher = shell.display_pub
    publish = publisher.publish

    def publish_or_record(data, metadata=None, *args, **kwargs):
        scrapbook = (metadata or {}).get("scrapbook")
        if not scrapbook:
            return publish(data, metadata, *args, **kwargs)
        prefix = scrapbook.get("mime_prefix", "")
        GLUED[scrapbook["name"]] = {key[len(prefix):]: value for key, value in data.items()}
        if not prefix:                        # glue(..., display=True) shows the value as well
            return publish(data, metadata, *args, **kwargs)

    publisher.publish = publish_or_record
    publisher.records_glue = True


def format_text(bundle: dict, spec: str = "") -> str:
    """A glued value as ``{glue:text}`name:spec``` shows it on the page (myst-nb's own formatting)."""
    from myst_nb.core.variables import format_plain_text

    if not isinstance(bundle, dict):
        raise TypeError(f"bundle must be a MIME bundle (a dict), got {type(bundle).__name__} {bundle!r}")
    if "text/plain" not in bundle:
        raise ValueError(f"bundle must hold a 'text/plain' value to format as text, got the keys {sorted(bundle)}")
    if not isinstance(spec, str):
        raise TypeError(f"spec must be a format spec (a string), got {type(spec).__name__} {spec!r}")

    return format_plain_text(_text(bundle["text/plain"]), spec)


def _text(value) -> str:
    return "".join(value) if isinstance(value, list) else value   # nbformat may split text into lines


def render(template: str, glued: dict) -> list[dict]:
    """The MIME bundles that show ``template`` (Markdown with glue references) with the values of
    ``glued`` (name -> MIME bundle): Markdown text, and each glued figure or table as its own bundle
    followed by its caption. A value missing from ``glued`` shows as "(not computed yet in this run)"."""
    _require_template(template)
    if not isinstance(glued, dict):
        if isinstance(glued, (list, tuple)):
            raise ValueError(f"glued must map names to MIME bundles (a dict), got a {type(glued).__name__}")
        raise TypeError(f"glued must map names to MIME bundles (a dict), got {type(glued).__name__} {glued!r}")
    bundles = []

    def markdown(text: str) -> None:
        text = INLINE.sub(lambda m: _inline(m["body"], glued), text).strip("\n")
        if text.strip():
            bundles.append({"text/markdown": text})

    position = 0
    for block in BLOCK.finditer(template):
        markdown(template[position:block.start()])
        name = block["name"]
        if name in glued:
            bundles.append({mime: (_text(v) if mime.startswith("text/") else v) for mime, v in glued[name].items()})
        else:
            bundles.append({"text/markdown": f"*Figure `{name}` {NOT_COMPUTED}.*"})
        markdown(OPTION.sub("", block["body"]))
        position = block.end()
    markdown(template[position:])
    return bundles


def _inline(body: str, glued: dict) -> str:
    name, _, spec = body.partition(":")
    if name not in glued or "text/plain" not in glued[name]:
        return f"`{name}` {NOT_COMPUTED}"
    return format_text(glued[name], spec)


def show_markdown(template: str) -> None:
    """Show ``template`` (Markdown with glue references) with the values glued so far in this kernel."""
    from IPython.display import display

    _require_template(template)
    for bundle in render(template, GLUED):
        display(bundle, raw=True)
