"""Ship the repository the book was built from with the HTML: ``_downloads/adaptive-mcmc-source.tar.gz``.

The book has no public repository address. So that a reader of the HTML can still rerun everything
(``make book``, ``make test``, ``pip install -e .``), every HTML build writes an archive of the source
files of the working tree it was built from: the files git tracks plus new files not ignored by
``.gitignore`` (no ``_build/``, no ``.venv/``). Outside a git checkout it archives the tree minus the
same directories. ``book/about.md`` links to it.
"""
import subprocess
import tarfile
from pathlib import Path

ARCHIVE = "adaptive-mcmc-source.tar.gz"
PREFIX = "adaptive-mcmc"
SKIP = {".git", ".venv", "_build", "__pycache__", ".pytest_cache", ".ipynb_checkpoints"}


def source_files(root: Path) -> list[str]:
    try:
        out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                             cwd=root, capture_output=True, check=True).stdout
        files = [f for f in out.decode().split("\0") if f]
    except (OSError, subprocess.CalledProcessError):
        files = [str(p.relative_to(root)) for p in root.rglob("*")
                 if p.is_file() and not SKIP.intersection(p.relative_to(root).parts)]
    return sorted(f for f in files if (root / f).is_file() and not SKIP.intersection(Path(f).parts))


def write_archive(app, exception):
    if exception is not None or app.builder.format != "html":
        return
    root = Path(app.confdir)
    target = Path(app.outdir) / "_downloads" / ARCHIVE
    target.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(target, "w:gz") as tar:
        for name in source_files(root):
            info = tar.gettarinfo(str(root / name), arcname=f"{PREFIX}/{name}")
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            info.mtime = 0  # the same sources give the same archive
            with open(root / name, "rb") as f:
                tar.addfile(info, f)


def setup(app):
    app.connect("build-finished", write_archive)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
