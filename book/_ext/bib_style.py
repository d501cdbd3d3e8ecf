"""Author-year labels in the bibliography, matching the (Author, year) citations in the text.

sphinxcontrib-bibtex cites in author-year form (``bibtex_reference_style: author_year``) but labels
the bibliography with pybtex's default ``alpha`` style ([AR09]), so a reader cannot match a citation
to its entry at a glance. This registers a pybtex formatting style ``authoryear`` (set as
``bibtex_default_style``): entries sorted by author, year and title and labelled "Andrieu and
Thoms, 2008", "Haario et al., 2001", the same text as the citation.
"""
from pybtex.plugin import register_plugin
from pybtex.style.formatting.unsrt import Style as UnsrtStyle
from pybtex.style.labels import BaseLabelStyle
from pybtex.style.sorting.author_year_title import SortingStyle


def _last_name(person) -> str:
    # "M{\"u}ller" -> "Müller": pybtex's rich text rendering resolves the LaTeX accents.
    from pybtex.richtext import Text

    parts = person.rich_prelast_names + person.rich_last_names
    return " ".join(str(Text(part).render_as("text")) for part in parts)


def author_year_label(entry) -> str:
    people = entry.persons.get("author") or entry.persons.get("editor") or []
    names = [_last_name(p) for p in people]
    if not names:
        who = entry.fields.get("title", entry.key)
    elif len(names) == 1:
        who = names[0]
    elif len(names) == 2:
        who = f"{names[0]} and {names[1]}"
    else:
        who = f"{names[0]} et al."
    return f"{who}, {entry.fields.get('year', 'undated')}"


class AuthorYearLabelStyle(BaseLabelStyle):
    def format_labels(self, sorted_entries):
        labels = [author_year_label(entry) for entry in sorted_entries]
        # Two works with the same label get a, b, ... after the year.
        counts = {label: labels.count(label) for label in labels}
        seen: dict[str, int] = {}
        for label in labels:
            if counts[label] > 1:
                seen[label] = seen.get(label, 0) + 1
                yield f"{label}{chr(ord('a') + seen[label] - 1)}"
            else:
                yield label


class AuthorYearStyle(UnsrtStyle):
    default_label_style = AuthorYearLabelStyle
    default_sorting_style = SortingStyle


def setup(app):
    register_plugin("pybtex.style.formatting", "authoryear", AuthorYearStyle)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
