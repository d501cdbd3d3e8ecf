"""Offer each executed chapter as a notebook in the page's download menu.

sphinx-book-theme lists ``_sources/<page>.ipynb`` under "download" when the page context has
``ipynb_source``, but it only copies the notebook there when a launch service (Binder, Colab, ...)
is configured, which would add links to outside services. This extension does the copy itself.
"""
import shutil
from pathlib import Path


def copy_executed_notebook(app, pagename, templatename, context, doctree):
    executed = Path(app.outdir).parent / "jupyter_execute" / f"{pagename}.ipynb"
    if not executed.exists():
        return
    target = Path(app.outdir) / "_sources" / f"{pagename}.ipynb"
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(executed, target)
    context["ipynb_source"] = f"{pagename}.ipynb"


def setup(app):
    # Before the theme builds its header buttons (default priority 500).
    app.connect("html-page-context", copy_executed_notebook, priority=100)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
