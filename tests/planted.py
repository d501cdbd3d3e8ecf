"""Shared machinery for planted-bug (mutation) tests.

A mutation edits one line of a copy of mcmc_lib in a temporary directory and runs a selection of a
test file against the copy in a subprocess. The planted bug counts as caught only if those tests
FAIL (pytest exit code 1): a crash or an import of the unmutated package does not count.

The selections point at deterministic tests wherever possible (a formula checked on one step with
known inputs, for several seeds), so that a planted bug is caught whatever the random path; see
``RecordingTarget`` below.
"""
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np

from mcmc_lib import targets as _targets

ROOT = Path(__file__).resolve().parent.parent
HELPERS = ("moments.py", "planted.py")


def run_mutant(tmp_path, module, original, mutant, test_file, selection, timeout=600):
    """Replace ``original`` (which must occur exactly once) by ``mutant`` in ``module`` (a path
    relative to the repository root) inside a copy of mcmc_lib in tmp_path, run
    ``pytest -x -k selection test_file`` there in a subprocess, and return it (CompletedProcess)."""
    shutil.copytree(ROOT / "mcmc_lib", tmp_path / "mcmc_lib", ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "tests").mkdir()
    for name in (test_file, *HELPERS):
        shutil.copy(ROOT / "tests" / name, tmp_path / "tests" / name)
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    path = tmp_path / module
    source = path.read_text()
    assert source.count(original) == 1, f"the code to mutate was not found exactly once in {module}"
    path.write_text(source.replace(original, mutant))

    # One subprocess: check that it imports the mutated copy, not the installed package (exit code 3
    # otherwise), then run the selected tests in it.
    dotted = module.removesuffix(".py").replace("/", ".")
    args = ["-q", "-x", "-p", "no:cacheprovider", "-p", "no:randomly", "-k", selection, f"tests/{test_file}"]
    script = (f"import {dotted} as m, pathlib, sys, pytest\n"
              f"if pathlib.Path(m.__file__).resolve() != pathlib.Path({str(path)!r}).resolve(): sys.exit(3)\n"
              f"sys.exit(int(pytest.main({args!r})))")
    return subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True,
                          timeout=timeout)


def assert_caught(completed, module):
    """The planted bug counts as caught only if the selected tests ran on the mutated copy and FAILED."""
    assert completed.returncode != 3, f"the subprocess did not import the mutated copy of {module}"
    assert completed.returncode == 1, f"the planted bug was not caught:\n{completed.stdout[-2000:]}"
    assert "failed" in completed.stdout


def assert_mutation_caught(tmp_path, module, original, mutant, test_file, selection, timeout=600):
    """``run_mutant`` and require the selected tests to fail."""
    assert_caught(run_mutant(tmp_path, module, original, mutant, test_file, selection, timeout), module)


# ----------------------------------------------------------------------------------------------
# Deterministic detection: a target that records where it was evaluated, so that a test can
# recompute a step's acceptance probability from the formula and compare it to the sampler's.
# Such a comparison fails for every seed when the sampler's formula is wrong, unlike a test of
# moments, which catches a small error only with some probability.
# ----------------------------------------------------------------------------------------------
class RecordingTarget(_targets.Target):
    """Wraps a target; ``calls`` lists every batch (n, dim) it was evaluated at, in order."""

    def __init__(self, inner):
        super().__init__(inner.dim)
        self.inner, self.name, self.calls = inner, f"recording {inner.name}", []
        self.mean = getattr(inner, "mean", None)
        self.cov = getattr(inner, "cov", None)

    def _logp(self, x):
        self.calls.append(x.copy())
        return self.inner._logp(x)

    def _grad(self, x):
        self.calls.append(x.copy())
        return self.inner._grad(x)

    def _logp_and_grad(self, x):
        self.calls.append(x.copy())
        return self.inner._logp_and_grad(x)


def leapfrog_momenta(positions, grads, step_size):
    """The initial and final momenta of a leapfrog trajectory with identity mass, recovered from its
    positions x_0, ..., x_L (L >= 1) and the gradients at x_0 and x_L, per chain:
    x_1 = x_0 + h (p_0 + h/2 g_0) gives p_0, and p_L = (x_L - x_{L-1}) / h + h/2 g_L."""
    h = np.asarray(step_size, dtype=float)[:, None]
    p0 = (positions[1] - positions[0]) / h - 0.5 * h * grads[0]
    p_end = (positions[-1] - positions[-2]) / h + 0.5 * h * grads[-1]
    return p0, p_end
