"""Publishing the book: `make publish` (.ci/publish, ghp-import onto a gh-pages branch) and the GitHub
Actions workflow that deploys it to GitHub Pages (.github/workflows/book.yml).

The publish test runs the script `make publish` runs, in a scratch repository whose remote is a local
bare repository, never in this one (ghp-import rewrites the gh-pages branch of the current repository).
"""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
PUBLISH = REPO / ".ci" / "publish"
GHP_IMPORT = Path(sys.executable).parent / "ghp-import"

needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def git(*args, cwd):
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True).stdout


@pytest.fixture
def scratch(tmp_path):
    """A working repository with one commit and a bare repository as its remote ``origin``."""
    env = {"GIT_AUTHOR_NAME": "test", "GIT_AUTHOR_EMAIL": "test@example.org",
           "GIT_COMMITTER_NAME": "test", "GIT_COMMITTER_EMAIL": "test@example.org"}
    bare, work = tmp_path / "remote.git", tmp_path / "work"
    git("init", "-q", "--bare", str(bare), cwd=tmp_path)
    git("init", "-q", str(work), cwd=tmp_path)
    (work / "README.md").write_text("a book\n")
    git("add", "README.md", cwd=work)
    subprocess.run(["git", "commit", "-q", "-m", "start"], cwd=work, check=True, env={**os.environ, **env})
    git("remote", "add", "origin", str(bare), cwd=work)
    return work, bare, env


def publish(work, html, remote, env):
    return subprocess.run([str(PUBLISH), str(html), remote, str(GHP_IMPORT)], cwd=work, capture_output=True,
                          text=True, env={**os.environ, **env})


def test_make_publish_runs_the_script_with_its_variables():
    out = subprocess.run(["make", "-n", "-o", ".venv/.installed", "publish", "PUBLISH_REMOTE=upstream"],
                         cwd=REPO, capture_output=True, text=True, check=True).stdout
    assert ".ci/publish _build/html upstream .venv/bin/ghp-import" in out


@needs_git
def test_publish_pushes_the_html_with_nojekyll_to_gh_pages(scratch, tmp_path):
    work, bare, env = scratch
    html = tmp_path / "_build" / "html"
    (html / "_static").mkdir(parents=True)
    (html / "index.html").write_text("<html><body>the book</body></html>\n")
    (html / "_static" / "book.css").write_text("body {}\n")
    result = publish(work, html, "origin", env)
    assert result.returncode == 0, result.stderr
    files = git("ls-tree", "-r", "--name-only", "gh-pages", cwd=bare).split()
    assert set(files) == {".nojekyll", "index.html", "_static/book.css"}
    assert git("show", "gh-pages:index.html", cwd=bare) == "<html><body>the book</body></html>\n"
    assert git("rev-parse", "--abbrev-ref", "HEAD", cwd=work).strip() != "gh-pages"   # the work tree is left alone

    # a second publish replaces the site (a page removed from the build is gone from gh-pages)
    (html / "_static" / "book.css").unlink()
    assert publish(work, html, "origin", env).returncode == 0
    assert set(git("ls-tree", "-r", "--name-only", "gh-pages", cwd=bare).split()) == {".nojekyll", "index.html"}


@needs_git
def test_publish_refuses_without_a_built_book(scratch, tmp_path):
    work, bare, env = scratch
    (tmp_path / "_build" / "html").mkdir(parents=True)
    result = publish(work, tmp_path / "_build" / "html", "origin", env)
    assert result.returncode == 1
    assert "index.html does not exist: build the book first (make book)" in result.stderr
    assert git("branch", "--list", "gh-pages", cwd=bare) == ""


def test_the_workflow_builds_the_book_and_deploys_it_to_pages():
    workflow = yaml.safe_load((REPO / ".github" / "workflows" / "book.yml").read_text())
    triggers = workflow.get("on", workflow.get(True))            # YAML 1.1 reads the key `on` as True
    assert triggers["push"]["branches"] == ["main"] and "workflow_dispatch" in triggers
    build, deploy = workflow["jobs"]["build"], workflow["jobs"]["deploy"]
    steps = build["steps"]
    assert any(s.get("with", {}).get("python-version") == "3.11" for s in steps if "setup-python" in s.get("uses", ""))
    runs = [i for i, s in enumerate(steps) if s.get("run", "").strip() == "make book"]
    uploads = [i for i, s in enumerate(steps) if s.get("uses", "").startswith("actions/upload-pages-artifact@")]
    assert runs and uploads and runs[0] < uploads[0]
    assert steps[uploads[0]]["with"]["path"] == "_build/html"
    assert deploy["needs"] == "build"
    assert deploy["permissions"] == {"pages": "write", "id-token": "write"}
    assert deploy["environment"]["name"] == "github-pages"
    assert any(s.get("uses", "").startswith("actions/deploy-pages@") for s in deploy["steps"])
