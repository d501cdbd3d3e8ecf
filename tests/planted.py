"""Shared machinery for planted-bug (mutation) tests.

A mutation edits one line of a copy of mcmc_lib in a temporary directory and runs a selection of a
test file against the copy in a subprocess. The planted bug counts as caught only if those tests
FAIL (pytest exit code 1): a crash or an import of the unmutated package does not count.
"""
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HELPERS = ("moments.py", "planted.py")


def assert_mutation_caught(tmp_path, module, original, mutant, test_file, selection, timeout=600):
    """Replace ``original`` (which must occur exactly once) by ``mutant`` in ``module`` (a path
    relative to the repository root) inside a copy, then run ``pytest -k selection test_file``
    there and require it to fail."""
    shutil.copytree(ROOT / "mcmc_lib", tmp_path / "mcmc_lib", ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "tests").mkdir()
    for name in (test_file, *HELPERS):
        shutil.copy(ROOT / "tests" / name, tmp_path / "tests" / name)
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    path = tmp_path / module
    source = path.read_text()
    assert source.count(original) == 1, f"the code to mutate was not found exactly once in {module}"
    path.write_text(source.replace(original, mutant))

    # The subprocess must import the mutated copy, not the installed package.
    dotted = module.removesuffix(".py").replace("/", ".")
    check = (f"import {dotted} as m, pathlib, sys; "
             f"sys.exit(0 if pathlib.Path(m.__file__).resolve() == pathlib.Path({str(path)!r}).resolve() else 3)")
    imported = subprocess.run([sys.executable, "-c", check], cwd=tmp_path, capture_output=True, text=True,
                              timeout=120)
    assert imported.returncode == 0, f"the subprocess did not import the mutated copy of {module}"

    completed = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "-p", "no:randomly",
         "-k", selection, f"tests/{test_file}"],
        cwd=tmp_path, capture_output=True, text=True, timeout=timeout)
    assert completed.returncode == 1, f"the planted bug was not caught:\n{completed.stdout[-2000:]}"
    assert "failed" in completed.stdout
