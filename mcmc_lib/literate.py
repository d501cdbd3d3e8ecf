"""Literate modules: the chapter is the single source of its method.

Code cells tagged ``export`` in ``book/<stem>.md`` are written, in order, to
``mcmc_lib/methods/<stem>.py``. Other chapters, tests and benchmarks import the method from there.

    python -m mcmc_lib.literate export     # regenerate every module
    python -m mcmc_lib.literate check      # exit 1 if a module is out of date with its chapter
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
BOOK_DIR = REPO_ROOT / "book"
METHODS_DIR = Path(__file__).resolve().parent / "methods"
EXPORT_TAG = "export"


def _path(value, name: str) -> Path:
    """A directory or file argument: a string or a path (the checks of mcmc_lib.validation, which this
    module does not import: it runs before the chapters' modules exist)."""
    if isinstance(value, (list, tuple)):
        raise ValueError(f"{name} must be one path, got a {type(value).__name__} of {len(value)}: {value!r}")
    if not isinstance(value, (str, os.PathLike)):
        raise TypeError(f"{name} must be a path (str or pathlib.Path), got {type(value).__name__} {value!r}")
    return Path(value)


def exported_source(chapter: Path) -> str | None:
    """The generated module's text for a chapter, or None when it has no exported cells."""
    import jupytext

    notebook = jupytext.read(_path(chapter, "chapter"))
    cells = [cell.source.strip("\n") for cell in notebook.cells
             if cell.cell_type == "code" and EXPORT_TAG in cell.metadata.get("tags", [])]
    if not cells:
        return None
    header = (f'"""Generated from book/{chapter.name} by `python -m mcmc_lib.literate export`.\n\n'
              f"Do not edit: change the chapter's cells tagged `export` and regenerate.\n\"\"\"\n")
    return header + "\n\n\n".join(cells) + "\n"


def chapters(book_dir: Path = BOOK_DIR):
    return sorted(p for p in _path(book_dir, "book_dir").glob("*.md") if p.is_file())


def planned_modules(book_dir: Path = BOOK_DIR, methods_dir: Path = METHODS_DIR) -> dict:
    """{module path: text} for every chapter with exported cells."""
    book_dir, methods_dir = _path(book_dir, "book_dir"), _path(methods_dir, "methods_dir")
    plan = {}
    for chapter in chapters(book_dir):
        text = exported_source(chapter)
        if text is not None:
            plan[methods_dir / f"{chapter.stem}.py"] = text
    return plan


def export(book_dir: Path = BOOK_DIR, methods_dir: Path = METHODS_DIR) -> list[Path]:
    """Write every module; remove generated modules whose chapter no longer exports anything."""
    book_dir, methods_dir = _path(book_dir, "book_dir"), _path(methods_dir, "methods_dir")
    methods_dir.mkdir(parents=True, exist_ok=True)
    plan = planned_modules(book_dir, methods_dir)
    for path, text in plan.items():
        # unchanged modules are left alone: a rewrite would mark them edited (make verify-code refuses a
        # record whose module changed on disk while it ran)
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
    for stale in _generated_modules(methods_dir):
        if stale not in plan:
            stale.unlink()
    return sorted(plan)


def out_of_date(book_dir: Path = BOOK_DIR, methods_dir: Path = METHODS_DIR) -> list[str]:
    """Descriptions of every module that differs from what its chapter would generate."""
    book_dir, methods_dir = _path(book_dir, "book_dir"), _path(methods_dir, "methods_dir")
    plan = planned_modules(book_dir, methods_dir)
    problems = [f"{p.relative_to(methods_dir.parent.parent)}: missing or differs from its chapter"
                for p, text in plan.items() if not p.exists() or p.read_text() != text]
    problems += [f"{p.relative_to(methods_dir.parent.parent)}: no chapter exports it any more"
                 for p in _generated_modules(methods_dir) if p not in plan]
    return problems


def _generated_modules(methods_dir: Path):
    return [p for p in methods_dir.glob("*.py") if p.name != "__init__.py"]


def main(argv=None) -> int:
    """``python -m mcmc_lib.literate [export|check]``; ``argv``: the arguments as a list of strings."""
    if argv is not None:
        if isinstance(argv, str):
            raise ValueError(f"argv must be a list of arguments, got the string {argv!r} (write [{argv!r}])")
        if not isinstance(argv, (list, tuple)) or not all(isinstance(a, str) for a in argv):
            raise TypeError(f"argv must be a list of strings, got {type(argv).__name__} {argv!r}")
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
