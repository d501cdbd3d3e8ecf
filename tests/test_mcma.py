"""M-CMA, M-GaA and the Haario-suite metrics of book/mcma.md (module mcmc_lib.methods.mcma).

Exactness with adaptation stopped, the fixed points of the step-size rules, symmetric positive-
definite covariances (and det Q = 1) over long constant-adaptation runs, the closed forms against
direct linear algebra, the confidence-region metrics on exact draws, bad arguments, and planted bugs.
"""
import math
import zlib

import numpy as np
import pytest
from scipy import stats

from mcmc_lib import diagnostics
from mcmc_lib import targets as T
from mcmc_lib.harness import run
from mcmc_lib.methods.mcma import (MCMA, MGaA, ConstantAdaptation, FixedProposalMH, cma_constants,
                                   cma_covariance_update, gaa_constants, gaa_shape_update,
                                   normalise_determinant)
from mcmc_lib.samplers import HaarioAM

from moments import assert_moments_match, banana_target, correlated_target, run_from_near_the_mean, scaled_target
from planted import assert_mutation_caught



# --------------------------------------------------------------------------------------------
# The confidence-region metrics on exact i.i.d. draws
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dim", [2, 8])
@pytest.mark.parametrize("index", [1, 2, 3, 4])
def test_region_metrics_are_zero_on_exact_draws(index, dim):
    """With exact draws the errors e_q = % inside the q-region - 100 q are binomial noise: mean 0,
    sd 100 sqrt(q (1 - q) / N) per run; ||E||^2 has mean tr(Sigma) / N."""
    n_runs, n_draws = 40, 5000
    target = T.haario_target(index, dim)
    rng = np.random.default_rng(zlib.crc32(f"regions-{index}-{dim}".encode()))
    samples = target.sample(rng, n_runs * n_draws).reshape(n_runs, n_draws, dim)
    sq = target.mahalanobis_sq(samples.reshape(-1, dim)).reshape(n_runs, n_draws)
    fractions = diagnostics.confidence_region_fractions(sq, dim)
    for k, q in enumerate(diagnostics.DEFAULT_LEVELS):
        errors = 100 * fractions[:, k] - 100 * q
        binomial_sd = 100 * math.sqrt(q * (1 - q) / n_draws)
        assert abs(errors.mean()) < 4.5 * binomial_sd / math.sqrt(n_runs), (q, errors.mean())
        assert 0.6 < errors.std(ddof=1) / binomial_sd < 1.5, (q, errors.std(ddof=1), binomial_sd)
    # The library's summary (|mean e_68|, mean |e_68|, mean e_99) is ~ 0 up to binomial noise.
    errs = diagnostics.confidence_region_errors(fractions)
    sd68 = 100 * math.sqrt(0.683 * 0.317 / n_draws)
    assert errs["err68"] < 4.5 * sd68 / math.sqrt(n_runs)
    assert errs["err68_mean_abs"] < 1.5 * math.sqrt(2 / math.pi) * sd68
    assert abs(errs["diff99"]) < 4.5 * 100 * math.sqrt(0.01 * 0.99 / n_draws) / math.sqrt(n_runs)
    distance_sq = np.sum((samples.mean(axis=1) - target.mean) ** 2, axis=1)
    expected = np.trace(target.cov) / n_draws
    assert 0.6 < distance_sq.mean() / expected < 1.5


def test_region_fractions_of_a_biased_sample_are_not_zero():
    """A sample with 0.8 x the true spread has far too many points in the 68.3% region."""
    target = T.haario_target(3, 8)
    y = np.random.default_rng(1).standard_normal((20_000, 8)) * 0.8
    y[:, 0] *= 10.0
    x = y.copy()
    x[:, 1] -= target.b * y[:, 0] ** 2 - target.v * target.b     # phi_b^{-1}
    f = diagnostics.confidence_region_fractions(target.mahalanobis_sq(x), 8)
    assert 100 * f[0] - 68.3 > 10


# --------------------------------------------------------------------------------------------
# Exactness with adaptation stopped
# --------------------------------------------------------------------------------------------
EXACT_SAMPLERS = {
    "MCMA": lambda t: MCMA(t),
    "MGaA": lambda t: MGaA(t),
}
EXACT_TARGETS = {"correlated": correlated_target, "scaled": scaled_target, "banana": banana_target}


def sample(make_sampler, target, seed, n_chains=8, n_warmup=2000, n_samples=6000):
    return run_from_near_the_mean(make_sampler, target, seed, n_chains, n_warmup, n_samples)


@pytest.mark.parametrize("target_name", EXACT_TARGETS)
@pytest.mark.parametrize("sampler_name", EXACT_SAMPLERS)
def test_exact_after_adaptation_stops(sampler_name, target_name):
    target = EXACT_TARGETS[target_name]()
    result = sample(EXACT_SAMPLERS[sampler_name], target, zlib.crc32(f"{sampler_name}-{target_name}".encode()))
    # Only the mean: a frozen M-CMA chain can have any acceptance rate from 0.001 to 0.5, since its
    # sigma is frozen wherever the success rule's random walk happened to be at the end of warm-up.
    assert 0.05 < result.accept_rate.mean() < 0.9
    assert_moments_match(result.samples, target.mean, target.cov)


def test_exact_mcma_0234_and_fixed_mh():
    target = correlated_target()
    for seed, make in ((11, lambda t: MCMA(t, target_success=0.234)),
                       (12, lambda t: FixedProposalMH(t, 2.38**2 / 2 * t.cov))):
        result = sample(make, target, seed)
        assert_moments_match(result.samples, target.mean, target.cov)


def test_stopped_adaptation_freezes_and_constant_keeps_adapting():
    target = T.haario_target(1, 4)
    for constant in (False, True):
        sampler = MCMA(target, constant_adaptation=constant)
        rng = np.random.default_rng(3)
        state = sampler.init(target.sample(rng, 5))
        for t in range(200):                      # a warm-up, as the harness runs it
            state, info = sampler.step(rng, state)
            sampler.adapt(state, info, t + 1)
        frozen = (sampler.sigma.copy(), sampler.cov.copy())
        for _ in range(200):                      # sampling: step only
            state, info = sampler.step(rng, state)
        changed = not (np.array_equal(frozen[0], sampler.sigma) and np.array_equal(frozen[1], sampler.cov))
        assert changed == constant


def test_constant_adaptation_wrapper_adapts_in_sampling():
    target = T.haario_target(1, 3)
    am = HaarioAM(target, t0=10)
    result = run(ConstantAdaptation(am), target.sample(np.random.default_rng(4), 3), 100, 400,
                 np.random.default_rng(5))
    assert am.count == 501              # init counts one state, then one adaptation per iteration
    assert result.samples.shape == (3, 400, 3)


# --------------------------------------------------------------------------------------------
# The step-size rules find their fixed points
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("make, rate", [
    (lambda t: MCMA(t, constant_adaptation=True), 2 / 11),
    (lambda t: MCMA(t, target_success=0.234, constant_adaptation=True), 0.234),
    (lambda t: MGaA(t, constant_adaptation=True), 1 / math.e),
])
def test_step_size_rule_reaches_its_target_acceptance(make, rate):
    target = T.haario_target(2, 4)
    rng = np.random.default_rng(6)
    result = run(make(target), 10 * rng.standard_normal((20, 4)), 2000, 4000, rng)
    assert abs(result.accept_rate.mean() - rate) < 0.03


# --------------------------------------------------------------------------------------------
# Covariances stay symmetric positive definite; det Q = 1
# --------------------------------------------------------------------------------------------
def long_run_checkpoints(sampler, seed, dim, n_steps=20_000, every=5000):
    """Step 20 chains (uniform starts in [-5, 5]^dim) under constant adaptation; yield the state
    every ``every`` steps, for the caller to inspect the sampler's adapted quantities."""
    rng = np.random.default_rng(seed)
    state = sampler.init(rng.uniform(-5, 5, size=(20, dim)))
    for t in range(n_steps):
        state, _ = sampler.step(rng, state)
        if t % every == every - 1:
            yield state


@pytest.mark.parametrize("index, dim", [(4, 8), (1, 2)])
def test_mcma_covariance_stays_spd_over_long_runs(index, dim):
    sampler = MCMA(T.haario_target(index, dim), constant_adaptation=True)
    for state in long_run_checkpoints(sampler, 7, dim):
        cov = sampler.cov
        assert np.array_equal(cov, np.swapaxes(cov, 1, 2))
        assert np.all(np.linalg.eigvalsh(cov) > 0)
        np.testing.assert_allclose(np.linalg.det(cov), 1.0, rtol=1e-8)
        np.testing.assert_allclose(np.einsum("nij,nkj->nik", sampler.chol, sampler.chol), cov,
                                   rtol=1e-8, atol=1e-10)
        assert np.all(np.isfinite(sampler.sigma) & (sampler.sigma > 0))
        assert np.all(np.isfinite(state.x))


@pytest.mark.parametrize("index, dim", [(4, 8), (1, 2)])
def test_mgaa_shape_keeps_unit_determinant_over_long_runs(index, dim):
    sampler = MGaA(T.haario_target(index, dim), constant_adaptation=True)
    for _ in long_run_checkpoints(sampler, 8, dim):
        np.testing.assert_allclose(np.linalg.det(sampler.shape), 1.0, rtol=1e-8)
        cov = sampler.proposal_cov()
        np.testing.assert_allclose(cov, np.swapaxes(cov, 1, 2), rtol=1e-12, atol=1e-12)
        assert np.all(np.linalg.eigvalsh(cov) > 0)
        assert np.all(np.isfinite(sampler.sigma) & (sampler.sigma > 0))


def test_determinant_normalisation_does_not_change_the_chain():
    """(sigma, C, p_c) -> (s sigma, C / s^2, p_c / s) is an exact reparametrisation."""
    target = T.haario_target(3, 4)
    chains = []
    for normalise in (True, False):
        sampler = MCMA(target, initial_cov=np.diag([100.0, 1, 1, 1]), constant_adaptation=True,
                       normalise=normalise)
        rng = np.random.default_rng(9)
        state = sampler.init(np.random.default_rng(10).uniform(-5, 5, size=(6, 4)))
        for _ in range(1500):
            state, _ = sampler.step(rng, state)
        chains.append((state.x, sampler.proposal_cov()))
    np.testing.assert_allclose(chains[0][0], chains[1][0], rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(chains[0][1], chains[1][1], rtol=1e-6)


# --------------------------------------------------------------------------------------------
# Closed forms against direct computation
# --------------------------------------------------------------------------------------------
def test_gaa_shape_update_matches_the_matrix_square_root():
    rng = np.random.default_rng(11)
    d, rate = 5, gaa_constants(5)["cov_rate"]
    shape = rng.standard_normal((3, d, d))
    shape /= np.abs(np.linalg.det(shape))[:, None, None] ** (1 / d)
    z = rng.standard_normal((3, d))
    new = gaa_shape_update(shape, z, rate)
    for n in range(3):
        delta_c = (1 - rate) * np.eye(d) + rate * np.outer(z[n], z[n])
        w, v = np.linalg.eigh(delta_c)
        delta_q = (v * np.sqrt(w)) @ v.T
        direct = shape[n] @ delta_q / np.linalg.det(delta_q) ** (1 / d)
        np.testing.assert_allclose(new[n], direct, rtol=1e-10, atol=1e-12)
        # Q Q^T moves to the rank-one update (1 - l) Q Q^T + l (Q z)(Q z)^T, up to the det scaling.
        qz = shape[n] @ z[n]
        target_cov = (1 - rate) * shape[n] @ shape[n].T + rate * np.outer(qz, qz)
        np.testing.assert_allclose(new[n] @ new[n].T * np.linalg.det(delta_q) ** (2 / d), target_cov,
                                   rtol=1e-10, atol=1e-12)


def test_cma_covariance_update_both_branches():
    rng = np.random.default_rng(12)
    d = 3
    k = cma_constants(d)
    a = rng.standard_normal((2, d, d))
    cov = np.einsum("nij,nkj->nik", a, a) + np.eye(d)
    path, step = rng.standard_normal((2, d)), rng.standard_normal((2, d))
    success_rate = np.array([0.2, 0.6])            # normal branch, stall branch
    new_cov, new_path = cma_covariance_update(cov, path, step, success_rate, k["path_rate"],
                                              k["cov_rate"], k["stall_threshold"])
    cc, ccov = k["path_rate"], k["cov_rate"]
    p0 = (1 - cc) * path[0] + math.sqrt(cc * (2 - cc)) * step[0]
    p1 = (1 - cc) * path[1]
    np.testing.assert_allclose(new_path, [p0, p1])
    np.testing.assert_allclose(new_cov[0], (1 - ccov) * cov[0] + ccov * np.outer(p0, p0))
    np.testing.assert_allclose(new_cov[1], (1 - ccov) * cov[1] + ccov * (np.outer(p1, p1) + cc * (2 - cc) * cov[1]))
    normalised, chol, _, sigma = normalise_determinant(new_cov, new_path, np.ones(2))
    np.testing.assert_allclose(np.linalg.det(normalised), 1.0)
    np.testing.assert_allclose(sigma[:, None, None] ** 2 * normalised, new_cov)


def test_constants_are_igel_defaults():
    k = cma_constants(8)
    assert k["target_success"] == pytest.approx(2 / 11) and k["success_smoothing"] == pytest.approx(1 / 12)
    assert k["damping"] == 5 and k["path_rate"] == pytest.approx(0.2) and k["cov_rate"] == pytest.approx(2 / 70)
    g = gaa_constants(8)
    assert g["cov_rate"] == pytest.approx(math.log(9) / 81)
    # to first order in beta, log sigma is stationary at acceptance rate P
    p = g["hitting_probability"]
    assert p * math.log(g["expansion"]) + (1 - p) * math.log(g["contraction"]) == pytest.approx(0, abs=g["cov_rate"] ** 2)


# --------------------------------------------------------------------------------------------
# Bad arguments
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("build, name", [
    (lambda t: MCMA(t, initial_cov=np.eye(3)), "initial_cov"),
    (lambda t: MCMA(t, initial_cov=-np.eye(2)), "initial_cov"),
    (lambda t: MCMA(t, initial_scale=-1.0), "initial_scale"),
    (lambda t: MCMA(t, target_success=1.5), "target_success"),
    (lambda t: MCMA(t, constant_adaptation="yes"), "constant_adaptation"),
    (lambda t: MCMA(t, damping=0.0), "damping"),
    (lambda t: MCMA(t, cov_rate=2.0), "cov_rate"),
    (lambda t: MCMA(t, path_rate=0.0), "path_rate"),
    (lambda t: MGaA(t, hitting_probability=0.0), "hitting_probability"),
    (lambda t: MGaA(t, initial_cov=np.array([[1.0, 2.0], [2.0, 1.0]])), "initial_cov"),
    (lambda t: MGaA(t, initial_scale=np.inf), "initial_scale"),
    (lambda t: FixedProposalMH(t, np.ones((2, 2))), "proposal_cov"),
    (lambda t: ConstantAdaptation("AM"), "sampler"),
    (lambda t: cma_constants(0), "dim"),
])
def test_bad_arguments_raise_value_error_naming_them(build, name):
    with pytest.raises(ValueError, match=name):
        build(T.haario_target(1, 2))


def test_bad_initial_state_raises():
    with pytest.raises(ValueError, match="x0"):
        MCMA(T.haario_target(1, 2)).init(np.zeros((3, 4)))


# --------------------------------------------------------------------------------------------
# Planted bugs must make the tests above fail
# --------------------------------------------------------------------------------------------
MUTATIONS = {
    "wrong-acceptance-ratio": ("logp - state.logp", "logp - 0.8 * state.logp", "test_exact_after"),
    "gaa-no-det-normalisation": ("/ (det_delta ** (1 / dim))[:, None, None]", "",
                                 "test_mgaa_shape_keeps_unit_determinant and 4-8"),
    "success-rule-sign": ("np.exp((success_rate - target_success)", "np.exp((target_success - success_rate)",
                          "test_step_size_rule_reaches_its_target_acceptance"),
}


@pytest.mark.parametrize("name", MUTATIONS)
def test_planted_bug_is_caught(name, tmp_path):
    original, mutant, selection = MUTATIONS[name]
    assert_mutation_caught(tmp_path, "mcmc_lib/methods/mcma.py", original, mutant, "test_mcma.py", selection)
