"""Planted bugs must make the exactness tests fail.

Each mutation edits a copy of mcmc_lib in a temporary directory (a wrong sign, a missing Hastings
term, a missing momentum half-step) and runs the relevant exactness tests against the copy in a
subprocess. The test passes only if those tests FAIL on the mutant, so a check that cannot fail
would be caught here.
"""
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

MUTATIONS = {
    "mala-drift-sign": ("mcmc_lib/samplers/classic.py",
                        "y = state.x + 0.5 * h[:, None] ** 2 * state.grad",
                        "y = state.x - 0.5 * h[:, None] ** 2 * state.grad",
                        "MALA and exact"),
    "mala-no-hastings": ("mcmc_lib/samplers/classic.py",
                         "+ mala_log_proposal(state.x, y, grad_y, h)\n                     + 0.5 * np.einsum(\"ij,ij->i\", noise, noise))",
                         ")",
                         "MALA and exact"),
    "hmc-kinetic-sign": ("mcmc_lib/samplers/classic.py",
                         "- 0.5 * np.sum(p**2, axis=1) + 0.5 * np.sum(p0**2, axis=1)",
                         "+ 0.5 * np.sum(p**2, axis=1) - 0.5 * np.sum(p0**2, axis=1)",
                         "HMC and exact"),
    "am-wrong-acceptance-ratio": ("mcmc_lib/samplers/adaptive_metropolis.py",
                              "logp_y - state.logp", "logp_y - 0.9 * state.logp", "AM and exact"),
}


@pytest.mark.parametrize("name", MUTATIONS)
def test_planted_bug_is_caught(name, tmp_path):
    relative, original, mutant, selection = MUTATIONS[name]
    shutil.copytree(ROOT / "mcmc_lib", tmp_path / "mcmc_lib")
    (tmp_path / "tests").mkdir()
    for helper in ("test_samplers.py", "moments.py"):
        shutil.copy(ROOT / "tests" / helper, tmp_path / "tests" / helper)
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    source = (tmp_path / relative).read_text()
    assert source.count(original) == 1, f"mutation {name}: the original code was not found once"
    (tmp_path / relative).write_text(source.replace(original, mutant))
    completed = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-x", "-k", selection, "tests/test_samplers.py"],
        cwd=tmp_path, capture_output=True, text=True, timeout=600)
    # The copy must be what was imported, and the mutant must fail (exit code 1), not error out.
    assert completed.returncode == 1, f"mutation {name} was not caught:\n{completed.stdout[-2000:]}"
    assert "failed" in completed.stdout
