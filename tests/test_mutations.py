"""Planted bugs must make the exactness tests fail.

Each mutation edits a copy of mcmc_lib in a temporary directory (a wrong sign, a missing Hastings
term, a missing momentum half-step) and runs the relevant exactness tests against the copy in a
subprocess. The test passes only if those tests FAIL on the mutant, so a check that cannot fail
would be caught here.
"""
import pytest

from planted import assert_mutation_caught

MUTATIONS = {
    "mala-drift-sign": ("mcmc_lib/samplers/classic.py",
                        "y = state.x + 0.5 * h[:, None] ** 2 * state.grad",
                        "y = state.x - 0.5 * h[:, None] ** 2 * state.grad",
                        "MALA and exact"),
    "mala-no-hastings": ("mcmc_lib/samplers/classic.py",
                         "+ mala_log_proposal(state.x, y, grad_y, h)\n                 + 0.5 * np.einsum(\"ij,ij->i\", noise, noise))",
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
    module, original, mutant, selection = MUTATIONS[name]
    assert_mutation_caught(tmp_path, module, original, mutant, "test_samplers.py", selection)
