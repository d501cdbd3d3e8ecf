"""The README's example of using mcmc_lib outside the book runs and does what it says."""
import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def test_readme_example_runs():
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert blocks, "README.md has no python example"
    completed = subprocess.run([sys.executable, "-c", blocks[0]], capture_output=True, text=True, timeout=300)
    assert completed.returncode == 0, completed.stderr
    assert "acceptance" in completed.stdout and "(4, 5000, 20)" in completed.stdout


def test_readme_names_only_functions_that_exist():
    """Every `name` the README gives next to `mcmc_lib.diagnostics` is a function there (it once
    pointed readers to a `diagnostics.mmd` that does not exist)."""
    from mcmc_lib import diagnostics

    text = README.read_text()
    sentence = text[text.index("Diagnostics are in `mcmc_lib.diagnostics`"):]
    sentence = sentence[: sentence.index("datasets in")]
    names = re.findall(r"`([a-z_]+)`", sentence)
    assert len(names) >= 5
    missing = [name for name in names if not callable(getattr(diagnostics, name, None))]
    assert not missing, f"README names diagnostics that do not exist: {missing}"


def test_readme_and_the_module_docstring_name_the_entry_points_of_units():
    """Issue 47: a user who guessed `units.run` or `units.map` met an AttributeError; the README's library
    section and the module docstring name the entry points, each of which exists, and a wrong guess says
    what they are."""
    import pytest

    from mcmc_lib import units

    text = README.read_text()
    library = text[text.index("## Using `mcmc_lib` outside the book"):text.index("## Running at scale")]
    sentence = library[library.index("`mcmc_lib.units`"):]
    named = re.findall(r"`([A-Za-z_]+)\(", sentence)
    assert {"Unit", "run_units", "run_with_stats"} <= set(named)
    assert all(callable(getattr(units, name)) for name in named)
    for name in ("run_units", "run_with_stats", "Unit"):
        assert f"``{name}" in units.__doc__.split("\n\n")[1]          # the docstring's first paragraph after the title
    with pytest.raises(AttributeError, match="entry points are Unit, run_units, run_with_stats"):
        units.run  # noqa: B018
