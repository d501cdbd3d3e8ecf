"""Chapters as notebooks that read and run as is in plain Jupyter.

A chapter's Markdown uses MyST syntax that only Sphinx understands: ``{literalinclude}`` directives
(the code a chapter explains lives in ``mcmc_lib``), ``{glue:text}`` roles and ``{glue:figure}``
directives (numbers and figures computed by the chapter), ``{cite}``, ``{eq}``, ``{ref}``,
``{numref}``, ``{doc}`` roles and ``(label)=`` targets. Jupyter shows all of these raw. This module
rewrites a chapter notebook into plain Jupyter Markdown:

- ``{literalinclude}`` becomes a fenced code block with the included code;
- citations become "(Author, year)", equation references "(n.k)", labelled equations get
  ``\\tag{n.k}``, cross-references the section or page title;
- a Markdown cell that pastes glued values (``{glue:text}`name:fmt```, ``{glue:figure}``, ``{glue}``)
  computed above it becomes a code cell with hidden input, ``show_markdown(template)``
  (``mcmc_lib/notebook.py``), which shows the Markdown with the values the run computed: a reader who
  reruns the notebook sees their own numbers and figures. Its saved output is the same Markdown with
  the build's values, so the notebook reads as the page does before any rerun. The first code cell
  records the values as they are glued (``record_glue()``);
- a value pasted above the cell that computes it (the verdicts at a chapter's top are computed at its
  end) cannot be live in a run from top to bottom: it is written in as built, marked "(as built;
  rerun values at the end of the notebook)", and the cell is shown again, live, at the notebook's end.

Used in three places:
- the Sphinx extension (``setup`` below) writes the executed, rewritten chapter to
  ``_sources/<page>.ipynb``, which sphinx-book-theme offers in the page's download menu;
- ``make notebook CHAPTER=foundations`` (``python book/_ext/notebook_download.py``) converts a
  chapter with jupytext, executes it (``--execute``) and rewrites it into ``_build/notebooks/``;
- ``tests/test_notebooks.py`` checks that no raw MyST reaches any chapter's notebook.
"""
from __future__ import annotations

import argparse
import base64
import json
import os
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
logger = None  # sphinx.util.logging's logger, set in setup()
BOOK = REPO / "book"

ROLE = re.compile(r"\{(?P<role>[a-z]+(?::[a-z]+)?)\}`(?P<body>[^`]*)`")
FENCE = re.compile(r"^(?P<fence>`{3,}|:{3,})\{(?P<name>[\w:-]+)\}[ \t]*(?P<arg>[^\n]*)\n(?P<body>.*?)^(?P=fence)[ \t]*$",
                   re.M | re.S)
TARGET = re.compile(r"^\([\w:-]+\)=[ \t]*\n", re.M)
LABELLED_MATH = re.compile(r"^\$\$(?P<math>.*?)\$\$[ \t]*\((?P<label>[\w:-]+)\)[ \t]*$", re.M | re.S)
# Raw MyST that must not reach a notebook (used by the tests and by ``check``).
RAW_MYST = re.compile(r"\{(glue(:\w+)?|cite(:\w+)?|eq|ref|numref|doc|math|term|download)\}`"   # roles
                      r"|^\s*(`{3,}|:{3,})\{[\w:-]+\}"                                # directives
                      r"|^\([\w:-]+\)=\s*$", re.M)                                     # targets


# --------------------------------------------------------------------------------------------------
# What the rewriting needs to know about the book: chapter numbers, labels, the bibliography.
# --------------------------------------------------------------------------------------------------
class Book:
    """Numbers and titles as the HTML book shows them, read from ``_toc.yml`` and the sources.

    Sphinx numbers a chapter's labelled equations and captioned figures "n.k", n the chapter's
    position among the numbered chapters of ``_toc.yml``, k the count within the chapter.
    """

    def __init__(self, root: Path = REPO):
        import yaml

        self.root = root
        toc = yaml.safe_load((root / "_toc.yml").read_text())
        self.chapter_number: dict[str, int] = {}
        n = 0
        for part in toc.get("parts", []):
            for chapter in part.get("chapters", []):
                stem = Path(chapter["file"]).name
                if part.get("numbered"):
                    n += 1
                    self.chapter_number[stem] = n
        self.titles: dict[str, str] = {}
        self.labels: dict[str, str] = {}      # section label -> title
        self.equations: dict[str, str] = {}   # equation label -> "n.k"
        self.figures: dict[str, str] = {}     # figure name -> "n.k"
        for path in sorted((root / "book").glob("*.md")):
            self._scan(path)
        self._bib = None

    def _scan(self, path: Path) -> None:
        stem = path.stem
        text = path.read_text()
        heading = re.search(r"^# (.+)$", text, re.M)
        if heading:
            self.titles[stem] = plain_markdown(heading[1])
        for m in re.finditer(r"^\(([\w:-]+)\)=[ \t]*\n+#+ (.+)$", text, re.M):
            self.labels[m[1]] = plain_markdown(m[2])
        number = self.chapter_number.get(stem)
        if number is None:
            return
        for k, m in enumerate(LABELLED_MATH.finditer(text), start=1):
            self.equations[m["label"]] = f"{number}.{k}"
        k = 0
        for m in FENCE.finditer(text):
            if m["name"] in ("glue:figure", "figure"):
                name = re.search(r"^:name:\s*(\S+)", m["body"], re.M)
                k += 1
                if name:
                    self.figures[name[1]] = f"{number}.{k}"

    # -- citations ---------------------------------------------------------------------------------
    @property
    def bib(self):
        if self._bib is None:
            from pybtex.database import parse_file

            sys.path.insert(0, str(Path(__file__).resolve().parent))
            self._bib = parse_file(str(self.root / "book" / "references.bib"))
        return self._bib

    def cite(self, keys: str, textual: bool) -> str:
        from bib_style import author_year_label

        parts = []
        for key in [k.strip() for k in keys.split(",") if k.strip()]:
            entry = self.bib.entries.get(key)
            label = author_year_label(entry) if entry is not None else key
            if textual:
                who, _, year = label.rpartition(", ")
                parts.append(f"{who} ({year})")
            else:
                parts.append(label)
        return ", ".join(parts) if textual else "(" + "; ".join(parts) + ")"


def plain_markdown(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


# --------------------------------------------------------------------------------------------------
# Rewriting one Markdown cell
# --------------------------------------------------------------------------------------------------
def _options(body: str) -> tuple[dict, str]:
    """Split a directive body into its ``:key: value`` options and the remaining content."""
    options, lines = {}, body.split("\n")
    while lines and re.match(r"^:[\w-]+:", lines[0]):
        key, _, value = lines.pop(0)[1:].partition(":")
        options[key.strip()] = value.strip()
    return options, "\n".join(lines).strip("\n")


def literalinclude(arg: str, options: dict, base: Path) -> str:
    """The code a ``{literalinclude}`` shows (the options this book uses: pyobject, lines)."""
    path = (base / arg.strip()).resolve()
    source = path.read_text()
    lines = source.splitlines()
    if "pyobject" in options:
        from sphinx.pycode import ModuleAnalyzer

        tags = ModuleAnalyzer.for_string(source, "").find_tags()
        if options["pyobject"] not in tags:
            raise ValueError(f"{path}: no object {options['pyobject']!r}")
        _, start, end = tags[options["pyobject"]]
        lines = lines[start - 1:end]
        while lines and not lines[-1].strip():
            lines.pop()
        # dedent methods to the left margin, as the HTML book shows them
        indent = min((len(l) - len(l.lstrip()) for l in lines if l.strip()), default=0)
        lines = [l[indent:] for l in lines]
    if "lines" in options:
        chosen = []
        for part in options["lines"].split(","):
            a, _, b = part.partition("-")
            chosen.extend(lines[int(a) - 1:int(b or a)])
        lines = chosen
    language = options.get("language", "python")
    relative = os.path.relpath(path, REPO)
    return f"From `{relative}`:\n\n```{language}\n" + "\n".join(lines) + "\n```"


def format_glue(data: dict, spec: str) -> str:
    from myst_nb.core.variables import format_plain_text

    return format_plain_text(data["text/plain"], spec or "s")


AS_BUILT = "*(as built; rerun values at the end of the notebook)*"


class CellRewriter:
    """Rewrites the MyST of one Markdown cell, the cell at ``position`` of the notebook.

    ``glue``: name -> {"data": {mime: value}, "cell": index of the code cell that glued it (None when
    unknown)}, from the executed notebook; None when the notebook was not executed. A glue reference
    stays in the text, to be shown live by ``mcmc_lib.notebook.show_markdown`` (``self.live``), when the
    value is computed above the cell (or the notebook was not executed, or ``position`` is None: the
    copy at the notebook's end); one computed below is written in as built (``self.forward``)."""

    def __init__(self, book: Book, stem: str, glue: dict | None, base: Path, position: int | None = None):
        self.book = book
        self.stem = stem
        self.glue = glue
        self.base = base
        self.position = position
        self.attachments: dict[str, dict] = {}
        self.problems: list[str] = []
        self.live = False       # the text keeps a glue reference to show live
        self.forward: set[str] = set()   # values computed below the cell, which the text shows as built

    def is_live(self, key: str) -> bool:
        if self.glue is None or self.position is None:
            return True
        if key not in self.glue:
            self.problems.append(f"nothing glued under {key!r}")
            return False
        cell = self.glue[key].get("cell")
        if cell is not None and cell > self.position:
            self.forward.add(key)
            return False
        return True

    def glue_text(self, m: re.Match) -> str:
        body = m["body"]
        key, _, spec = body.partition(":")
        if self.is_live(key):
            self.live = True
            return f"{{glue:text}}`{body}`"
        if key not in self.glue or "text/plain" not in self.glue[key]["data"]:
            return f"`{key}` (not computed)"
        return f"{format_glue(self.glue[key]['data'], spec)} {AS_BUILT}"

    def role(self, m: re.Match) -> str:
        role, body = m["role"], m["body"]
        if role in ("glue:text", "glue", "glue:any"):
            return self.glue_text(m)
        if role in ("cite", "cite:p", "cite:ps"):
            return self.book.cite(body, textual=False)
        if role in ("cite:t", "cite:ts"):
            return self.book.cite(body, textual=True)
        explicit = re.match(r"^(?P<text>.*?)\s*<(?P<target>[^>]+)>$", body, re.S)
        text, target = (explicit["text"], explicit["target"]) if explicit else (None, body)
        if role == "eq":
            number = self.book.equations.get(target)
            return text or f"({number})" if number else text or f"({target})"
        if role == "numref":
            number = self.book.figures.get(target)
            if text:
                return text.replace("%s", number or target).replace("{number}", number or target)
            return f"Fig. {number}" if number else target
        if role == "ref":
            return text or self.book.labels.get(target, target)
        if role == "doc":
            return text or self.book.titles.get(target.split("/")[-1], target)
        if role in ("math",):
            return f"${body}$"
        return text or body

    def directive(self, m: re.Match) -> str:
        name, arg = m["name"], m["arg"].strip()
        options, content = _options(m["body"])
        if name == "literalinclude":
            return literalinclude(arg, options, self.base)
        if name in ("glue:figure", "glue", "glue:any"):
            number = self.book.figures.get(options.get("name", ""), "")
            text = self.inline(content)
            caption = (f"**Fig. {number}.** " if number else "") + text
            if self.is_live(arg):
                # shown by mcmc_lib.notebook.render: the glued figure or table, then its caption
                self.live = True
                return f"```{{{name}}} {arg}\n{caption}\n```"
            if arg not in self.glue:
                return f"*Figure `{arg}` (not computed).* {caption}"
            alt = options.get("alt", text.split(". ")[0] if text else arg)
            return self.as_built(arg, alt, caption)
        if name in ("math",):
            return f"$$\n{content}\n$$"
        if name in ("note", "warning", "important", "tip", "admonition", "seealso", "attention"):
            title = arg or name.capitalize()
            inner = self.inline(content)
            return "\n".join(f"> {line}" if line else ">" for line in f"**{title}.** {inner}".split("\n"))
        if name == "bibliography":
            return ""
        return self.inline(content)

    def as_built(self, name: str, alt: str, caption: str) -> str:
        """A glued figure or table written into the Markdown as the build computed it."""
        data = self.glue[name]["data"]
        mime = next((k for k in ("image/png", "image/jpeg", "image/svg+xml") if k in data), None)
        if mime is not None:
            filename = f"{name}.{mime.split('/')[1].split('+')[0]}"
            self.attachments[filename] = {mime: data[mime]}
            shown = f"![{alt.replace(']', '')}](attachment:{filename})"
        elif "text/html" in data:        # a table (the verdicts): Jupyter renders HTML in Markdown
            shown = "".join(data["text/html"]).strip()
        else:
            shown = f"```\n{''.join(data.get('text/plain', ''))}\n```"
        return "\n\n".join(part for part in (shown, caption, AS_BUILT) if part)

    def inline(self, text: str) -> str:
        return ROLE.sub(self.role, text)

    def rewrite(self, source: str) -> str:
        text = TARGET.sub("", source)
        text = FENCE.sub(self.directive, text)

        def tag(m):
            number = self.book.equations.get(m["label"])
            tagged = f"{m['math'].rstrip()} \\tag{{{number}}}\n" if number else m["math"]
            return f"$${tagged}$$"

        text = LABELLED_MATH.sub(tag, text)
        return self.inline(text)


def rewrite_notebook(nb, stem: str, glue: dict | None, book: Book | None = None, base: Path = BOOK):
    """Rewrite the Markdown of ``nb`` (an nbformat notebook, changed in place) into plain Jupyter.

    ``glue``: what the executed chapter glued (``glue_from_outputs``), None when it was not executed. A
    Markdown cell whose values are computed above it becomes a live code cell (``live_cell``); one that
    shows values computed below it as built is shown again, live, in a section at the end."""
    import nbformat

    book = book or Book()
    glued = None if glue is None else {name: record["data"] for name, record in glue.items()}
    problems, cells, shown_again = [], [], []
    for position, cell in enumerate(nb.cells):
        if cell.cell_type != "markdown":
            cells.append(cell)
            continue
        source = cell.source
        rewriter = CellRewriter(book, stem, glue, base, position)
        text = rewriter.rewrite(source)
        problems.extend(rewriter.problems)
        if rewriter.live:
            cells.extend(split_live(text, glued, rewriter.attachments))
        else:
            cell.source = text
            cells.append(cell)
            if rewriter.attachments:
                cell.setdefault("attachments", {}).update(rewriter.attachments)
        if rewriter.forward:
            again = CellRewriter(book, stem, glue, base, position=None).rewrite(source)
            shown_again.append(sentences_pasting(again, rewriter.forward))
    if shown_again:
        cells.append(nbformat.v4.new_markdown_cell(
            "## Values computed below the text that shows them\n\nThe text above shows these values as the book "
            "was built (marked *as built*): the chapter computes them further down (the verdicts at its end). "
            "As this run computed them:"))
        cells.extend(live_cell(text, glued) for text in shown_again)
    first_code = next((i for i, c in enumerate(cells) if c.cell_type == "code"), len(cells))
    cells.insert(first_code, hidden_code_cell(
        "# Records the values this run glues, for the text cells that show them (mcmc_lib/notebook.py)\n"
        "from mcmc_lib.notebook import record_glue, show_markdown\n\nrecord_glue()"))
    nb.cells = cells
    # jupytext's own metadata would make Jupyter re-pair the notebook with a .md that is not there.
    nb.metadata.pop("jupytext", None)
    nb.metadata["rewrite_problems"] = problems  # read and removed by the callers
    return nb


def split_live(text: str, glued: dict | None, attachments: dict) -> list:
    """The cells that show a Markdown cell with live values: its headings and the images written in as
    built (cell attachments) stay Markdown, so that Jupyter's table of contents and collapsible
    sections see the headings; the text between them is a live cell where it pastes a value."""
    import nbformat
    from mcmc_lib.notebook import BLOCK, INLINE

    parts, current, fenced = [], [], False
    for line in text.split("\n"):
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
        if not fenced and (re.match(r"#{1,6} ", line) or re.match(r"!\[[^\]]*\]\(attachment:", line)):
            parts += ["\n".join(current), line]
            current = []
        else:
            current.append(line)
    parts.append("\n".join(current))

    cells, plain = [], []

    def markdown():
        if "\n".join(plain).strip():
            source = "\n".join(plain).strip("\n")
            cell = nbformat.v4.new_markdown_cell(source)
            used = {n: a for n, a in attachments.items() if f"attachment:{n}" in source}
            if used:
                cell["attachments"] = used
            cells.append(cell)
        plain.clear()

    for part in parts:
        if INLINE.search(part) or BLOCK.search(part):
            markdown()
            cells.append(live_cell(part.strip("\n"), glued))
        else:
            plain.append(part)
    markdown()
    return cells


def sentences_pasting(text: str, names: set) -> str:
    """The sentences of ``text`` that paste one of the glued values ``names``, and the glued figures and
    tables among them with their captions: what the notebook's end shows again, live."""
    from mcmc_lib.notebook import BLOCK, INLINE

    def pastes(part):
        return (any(m["name"] in names for m in BLOCK.finditer(part))
                or any(m["body"].partition(":")[0] in names for m in INLINE.finditer(part)))

    kept, position = [], 0
    blocks = list(BLOCK.finditer(text)) + [None]
    for block in blocks:
        between = text[position:block.start() if block else len(text)]
        for paragraph in between.split("\n\n"):
            sentences = re.split(r"(?<=[.!?])\s+(?=[A-Z*(])", paragraph.strip("\n"))
            chosen = " ".join(sentence for sentence in sentences if pastes(sentence))
            if chosen:
                kept.append(chosen)
        if block and pastes(block.group(0)):
            kept.append(block.group(0))
        position = block.end() if block else len(text)
    return "\n\n".join(kept)


def hidden_code_cell(source: str, outputs=()):
    """A code cell whose input Jupyter folds away (and a book built from the notebook removes)."""
    import nbformat

    return nbformat.v4.new_code_cell(source, outputs=list(outputs),
                                     metadata={"jupyter": {"source_hidden": True}, "tags": ["remove-input"]})


def live_cell(template: str, glued: dict | None):
    """``show_markdown(template)`` as a hidden code cell, its output the build's rendering (none when
    the chapter was not executed)."""
    import nbformat
    from mcmc_lib.notebook import render

    # a raw triple-quoted string reads as the Markdown it holds (LaTeX backslashes included)
    quote = '"""' if '"""' not in template else "'''"
    literal = f"r{quote}\n{template}\n{quote}" if quote not in template else repr(template)
    outputs = [] if glued is None else [nbformat.v4.new_output("display_data", data=bundle)
                                        for bundle in render(template, glued)]
    return hidden_code_cell(f"show_markdown({literal})", outputs)


def is_live_cell(cell) -> bool:
    return cell.get("cell_type") == "code" and cell.get("source", "").startswith("show_markdown(")


def shown_markdown(cell) -> str:
    """The Markdown a cell shows: its source, or a live cell's rendered output."""
    if cell.get("cell_type") == "markdown":
        return "".join(cell["source"])
    if is_live_cell(cell):
        return "\n".join("".join(o.get("data", {}).get("text/markdown", "")) for o in cell.get("outputs", []))
    return ""


def raw_myst(nb) -> list[str]:
    """Raw MyST left in the Markdown a notebook shows (each as a short excerpt)."""
    found = []
    for i, cell in enumerate(nb.cells):
        text = shown_markdown(cell)
        for m in RAW_MYST.finditer(text):
            found.append(f"cell {i}: {text[max(0, m.start() - 30):m.end() + 30]!r}")
    return found


def load_glue(path: Path) -> dict | None:
    """The glue records myst-nb wrote beside an executed page (``<page>.glue.json``), as
    ``glue_from_outputs`` gives them."""
    if not path.exists():
        return None
    return {name: {"data": record["data"], "cell": record.get("metadata", {}).get("scrapbook", {}).get("cell")}
            for name, record in json.loads(path.read_text()).items()}


def glue_from_outputs(nb) -> dict:
    """Glued values as recorded in an executed notebook's outputs (myst_nb.glue, display=False):
    name -> {"data": {mime: value}, "cell": index of the code cell that glued it}."""
    glue = {}
    prefix = "application/papermill.record/"
    for index, cell in enumerate(nb.cells):
        for output in cell.get("outputs", []):
            meta = output.get("metadata", {}).get("scrapbook", {})
            if "name" in meta:
                data = {k[len(prefix):]: v for k, v in output.get("data", {}).items() if k.startswith(prefix)}
                glue[meta["name"]] = {"data": data, "cell": index}
    return glue


def strip_glue_outputs(nb) -> None:
    """Remove the invisible glue records from the outputs (they are in the Markdown now)."""
    for cell in nb.cells:
        if "outputs" in cell:
            cell.outputs = [o for o in cell.outputs if "scrapbook" not in o.get("metadata", {})]


# --------------------------------------------------------------------------------------------------
# Sphinx: the download menu's notebook
# --------------------------------------------------------------------------------------------------
def copy_executed_notebook(app, pagename, templatename, context, doctree):
    """Offer the executed, rewritten chapter as ``_sources/<page>.ipynb``.

    sphinx-book-theme lists ``_sources/<page>.ipynb`` under "download" when the page context has
    ``ipynb_source``, but only copies a notebook there when a launch service (Binder, Colab, ...) is
    configured, which would add links to outside services. This does the copy itself.
    """
    import nbformat

    executed = Path(app.outdir).parent / "jupyter_execute" / f"{pagename}.ipynb"
    if not executed.exists():
        return
    nb = nbformat.read(executed, as_version=4)
    glue = load_glue(executed.with_suffix(".glue.json")) or glue_from_outputs(nb) or None
    if glue and any(record["cell"] is None for record in glue.values()):
        logger.warning("downloadable notebook: myst-nb's glue records do not say which cell glued them "
                       "(record_glue_cells); values computed below the text are shown as if live",
                       location=pagename)
    strip_glue_outputs(nb)
    source = Path(app.srcdir) / f"{pagename}.md"
    rewrite_notebook(nb, Path(pagename).name, glue, base=source.parent)
    for problem in nb.metadata.pop("rewrite_problems", []):
        logger.warning(f"downloadable notebook: {problem}", location=pagename)
    target = Path(app.outdir) / "_sources" / f"{pagename}.ipynb"
    target.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, target)
    context["ipynb_source"] = f"{pagename}.ipynb"


def record_glue_cells() -> None:
    """Have myst-nb note in each glue record which code cell glued it (``"cell"`` in the record's
    ``scrapbook`` metadata, kept in ``<page>.glue.json``): the download needs it to tell a value
    computed above the text that shows it (shown live) from one computed below (shown as built).
    myst-nb (1.4) collects the records in ``extract_glue_data`` right after executing a notebook and
    drops their cells."""
    from myst_nb.core.execute import base

    extract = base.extract_glue_data
    if getattr(extract, "records_cells", False):
        return

    def extract_with_cells(notebook, source_map, logger):
        for index, cell in enumerate(notebook.cells):
            for output in cell.get("outputs", []):
                scrapbook = output.get("metadata", {}).get("scrapbook")
                if scrapbook is not None:
                    scrapbook["cell"] = index
        return extract(notebook, source_map, logger)

    extract_with_cells.records_cells = True
    base.extract_glue_data = extract_with_cells


def setup(app):
    global logger
    from sphinx.util import logging

    logger = logging.getLogger(__name__)
    record_glue_cells()
    # Before the theme builds its header buttons (default priority 500).
    app.connect("html-page-context", copy_executed_notebook, priority=100)
    return {"parallel_read_safe": True, "parallel_write_safe": True}


# --------------------------------------------------------------------------------------------------
# Command line: make notebook CHAPTER=<stem>
# --------------------------------------------------------------------------------------------------
def convert(chapter: Path, output: Path, execute: bool, timeout: int = 3600) -> Path:
    import jupytext
    import nbformat

    nb = jupytext.read(chapter)
    glue = None
    if execute:
        from nbclient import NotebookClient

        # The kernel runs in the chapter's directory, as in the book build.
        NotebookClient(nb, timeout=timeout, kernel_name="python3",
                       resources={"metadata": {"path": str(chapter.parent.resolve())}}).execute()
        glue = glue_from_outputs(nb)
        strip_glue_outputs(nb)
    rewrite_notebook(nb, chapter.stem, glue, base=chapter.parent)
    problems = nb.metadata.pop("rewrite_problems", [])
    output.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, output)
    left = raw_myst(nb) + problems
    if left:
        raise SystemExit(f"{output}: raw MyST left:\n" + "\n".join(left))
    return output


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="A chapter as a plain Jupyter notebook")
    parser.add_argument("chapter", help="book/<stem>.md or just <stem>")
    parser.add_argument("-o", "--output", help="default: _build/notebooks/<stem>.ipynb")
    parser.add_argument("--execute", action="store_true",
                        help="run it first (at MCMC_BOOK_PROFILE), so that numbers and figures are filled in")
    args = parser.parse_args(argv)
    chapter = Path(args.chapter)
    if not chapter.suffix:
        chapter = BOOK / f"{chapter}.md"
    output = Path(args.output) if args.output else REPO / "_build" / "notebooks" / f"{chapter.stem}.ipynb"
    convert(chapter, output, args.execute)
    print(f"{output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
