"""Small fixes of the rendered pages.

1. Plain-text page titles for headings that contain math.

A heading such as "Non-reversibly updating the uniform $u$ ..." keeps its math on the page, but
Sphinx copies the math node into the title used by the sidebar, the browser tab, the previous/next
links and the search index, where MathJax does not run (it is loaded only on pages with math, and
never in ``<title>``), so readers saw a raw ``\\(u\\)``. This replaces the math in those copies by
plain text (``u``, ``τ̂``, ``π₄``, ...); so does a reference to a section with math in its title.

2. No script twice. sphinx-thebe (loaded by Jupyter Book, unused here) adds its inline
``const THEBE_JS_URL = ...`` configuration once per read phase, so pages carried it twice and every
page raised "SyntaxError: Identifier 'THEBE_JS_URL' has already been declared" in the console.
"""
import re

from docutils import nodes

GREEK = {
    "alpha": "α", "beta": "β", "gamma": "γ", "delta": "δ", "epsilon": "ε", "varepsilon": "ε",
    "eta": "η", "theta": "θ", "kappa": "κ", "lambda": "λ", "mu": "μ", "nu": "ν", "xi": "ξ",
    "pi": "π", "rho": "ρ", "sigma": "σ", "tau": "τ", "phi": "φ", "varphi": "φ", "chi": "χ",
    "psi": "ψ", "omega": "ω", "Gamma": "Γ", "Delta": "Δ", "Theta": "Θ", "Lambda": "Λ",
    "Sigma": "Σ", "Phi": "Φ", "Psi": "Ψ", "Omega": "Ω", "infty": "∞", "in": "∈", "times": "×",
    "le": "≤", "ge": "≥", "leq": "≤", "geq": "≥", "to": "→", "cdot": "·",
}


SUB = str.maketrans("0123456789+-=()", "₀₁₂₃₄₅₆₇₈₉₊₋₌₍₎")
SUP = str.maketrans("0123456789+-=()", "⁰¹²³⁴⁵⁶⁷⁸⁹⁺⁻⁼⁽⁾")


def latex_to_text(latex: str) -> str:
    text = re.sub(r"_\{?([0-9+\-=()]+)\}?", lambda m: m[1].translate(SUB), latex)
    text = re.sub(r"\^\{?([0-9+\-=()]+)\}?", lambda m: m[1].translate(SUP), text)
    text = re.sub(r"\\(?:hat|widehat)\s*\{?\\?([A-Za-z]+)\}?", lambda m: GREEK.get(m[1], m[1]) + "\u0302", text)
    text = re.sub(r"\\(?:text|mathrm|mathbf|mathit|operatorname)\s*\{([^{}]*)\}", r"\1", text)
    text = re.sub(r"\\([A-Za-z]+)", lambda m: GREEK.get(m[1], m[1]), text)
    text = text.replace("\\,", " ").replace("\\ ", " ").replace("~", " ")
    return re.sub(r"[{}$]", "", text).strip()


def plain_title(title: nodes.Node) -> nodes.Node:
    title = title.deepcopy()
    for math in list(title.findall(nodes.math)):
        math.parent.replace(math, nodes.Text(latex_to_text(math.astext())))
    return title


def has_math(node) -> bool:
    return any(True for _ in node.findall(nodes.math))


def replace_titles(app, doctree):
    env = app.env
    docname = env.docname
    title = env.titles.get(docname)
    if title is not None and has_math(title):
        same = env.longtitles.get(docname) is title
        env.titles[docname] = plain_title(title)
        if same:  # Sphinx later adds the chapter number to this one node: keep it shared
            env.longtitles[docname] = env.titles[docname]
    longtitle = env.longtitles.get(docname)
    if longtitle is not None and has_math(longtitle):
        env.longtitles[docname] = plain_title(longtitle)
    # References to a section ({ref}`label`) show the section's title as plain text: Sphinx keeps the
    # math's LaTeX source there ("Figure 1: samples of \\pi_4").
    labels = env.domaindata.get("std", {}).get("labels", {})
    for name, (label_doc, label_id, title_text) in list(labels.items()):
        if label_doc == docname and "\\" in title_text:
            labels[name] = (label_doc, label_id, latex_to_text(title_text))
    # The sidebar's entry for the page is the first entry of the page's own table of contents.
    toc = env.tocs.get(docname)
    if toc is not None:
        for ref in toc.findall(nodes.reference):
            for math in list(ref.findall(nodes.math)):
                math.parent.replace(math, nodes.Text(latex_to_text(math.astext())))
            break


def dedupe_scripts(app, pagename, templatename, context, doctree):
    scripts = context.get("script_files")
    if not scripts:
        return
    seen, unique = set(), []
    for script in scripts:
        # the same inline script arrives once with filename None and once with ''
        key = (str(getattr(script, "filename", script) or ""),
               repr(sorted(getattr(script, "attributes", {}).items())))
        if key not in seen:
            seen.add(key)
            unique.append(script)
    context["script_files"] = unique


def setup(app):
    # After Sphinx's own TitleCollector (priority 500) has stored the titles.
    app.connect("doctree-read", replace_titles, priority=900)
    app.connect("html-page-context", dedupe_scripts, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
