"""Literate modules: the chapter is the single source of its method.

Code cells tagged ``export`` in ``book/<stem>.md`` are written, in order, to
``mcmc_lib/methods/<stem>.py``. Other chapters, tests and benchmarks import the method from there.

    python -m mcmc_lib.literate export     # regenerate every module
    python -m mcmc_lib.literate check      # exit 1 if a module is out of date with its chapter
"""
from __future__ import annotations

import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
BOOK_DIR = REPO_ROOT / "book"
METHODS_DIR = Path(__file__).resolve().parent / "methods"
EXPORT_TAG = "export"


def exported_source(chapter: Path) -> str | None:
    """The generated module's text for a chapter, or None when it has no exported cells."""
    import jupytext

    notebook = jupytext.read(chapter)
    cells = [cell.source.strip("\n") for cell in notebook.cells
             if cell.cell_type == "code" and EXPORT_TAG in cell.metadata.get("tags", [])]
    if not cells:
        return None
    header = (f'"""Generated from book/{chapter.name} by `python -m mcmc_lib.literate export`.\n\n'
              f"Do not edit: change the chapter's cells tagged `export` and regenerate.\n\"\"\"\n")
    return header + "\n\n\n".join(cells) + "\n"


def chapters(book_dir: Path = BOOK_DIR):
    return sorted(p for p in book_dir.glob("*.md") if p.is_file())


def planned_modules(book_dir: Path = BOOK_DIR, methods_dir: Path = METHODS_DIR) -> dict:
    """{module path: text} for every chapter with exported cells."""
    plan = {}
    for chapter in chapters(book_dir):
        text = exported_source(chapter)
        if text is not None:
            plan[methods_dir / f"{chapter.stem}.py"] = text
    return plan


def export(book_dir: Path = BOOK_DIR, methods_dir: Path = METHODS_DIR) -> list[Path]:
    """Write every module; remove generated modules whose chapter no longer exports anything."""
    methods_dir.mkdir(parents=True, exist_ok=True)
    plan = planned_modules(book_dir, methods_dir)
    for path, text in plan.items():
        path.write_text(text)
    for stale in _generated_modules(methods_dir):
        if stale not in plan:
            stale.unlink()
    return sorted(plan)


def out_of_date(book_dir: Path = BOOK_DIR, methods_dir: Path = METHODS_DIR) -> list[str]:
    """Descriptions of every module that differs from what its chapter would generate."""
    plan = planned_modules(book_dir, methods_dir)
    problems = [f"{p.relative_to(methods_dir.parent.parent)}: missing or differs from its chapter"
                for p, text in plan.items() if not p.exists() or p.read_text() != text]
    problems += [f"{p.relative_to(methods_dir.parent.parent)}: no chapter exports it any more"
                 for p in _generated_modules(methods_dir) if p not in plan]
    return problems


def _generated_modules(methods_dir: Path):
    return [p for p in methods_dir.glob("*.py") if p.name != "__init__.py"]


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    command = argv[0] if argv else "check"
    if command == "export":
        for path in export():
            print(f"wrote {path.relative_to(REPO_ROOT)}")
        return 0
    if command == "check":
        problems = out_of_date()
        for line in problems:
            print(line, file=sys.stderr)
        if problems:
            print("Run `python -m mcmc_lib.literate export` and commit the result.", file=sys.stderr)
            return 1
        print("mcmc_lib/methods is in sync with the chapters")
        return 0
    raise SystemExit(f"usage: python -m mcmc_lib.literate [export|check], got {command!r}")


if __name__ == "__main__":
    sys.exit(main())
