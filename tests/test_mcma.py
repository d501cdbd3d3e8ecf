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
                                   normalise_determinant, success_rule)
from mcmc_lib.samplers import HaarioAM, StepInfo

from moments import assert_moments_match, banana_target, correlated_target, run_from_near_the_mean, scaled_target
from planted import RecordingTarget, assert_mutation_caught



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
# The adaptation rules against their formulas: one step, known inputs, literal constants
# --------------------------------------------------------------------------------------------
def rejected_and_accepted(n_rejected, n_accepted):
    accepted = np.array([False] * n_rejected + [True] * n_accepted)
    return StepInfo(accepted, accepted.astype(float), np.zeros_like(accepted))


@pytest.mark.parametrize("dim", [2, 5, 8])
def test_mcma_success_rule_and_damping(dim):
    """p <- (1 - 1/12) p + 1/12 [success];  sigma <- sigma exp((p - p_t) / (D (1 - p_t))), D = 1 + d/2,
    p_t = 2/11 (Igel et al. 2006). Up after a success, down after a failure."""
    target = T.haario_target(1, dim)
    sampler = MCMA(target, normalise=False)
    rng = np.random.default_rng(dim)
    state = sampler.init(target.sample(rng, 4))
    sampler.sigma = np.array([1.0, 0.5, 2.0, 1.0])
    sampler.success_rate = np.array([2 / 11, 0.5, 0.05, 0.3])
    state, _ = sampler.step(rng, state)
    sampler.adapt(state, rejected_and_accepted(2, 2), 1)
    success = np.array([0.0, 0.0, 1.0, 1.0])
    p = (1 - 1 / 12) * np.array([2 / 11, 0.5, 0.05, 0.3]) + success / 12
    damping = 1 + dim / 2
    expected = np.array([1.0, 0.5, 2.0, 1.0]) * np.exp((p - 2 / 11) / (damping * (1 - 2 / 11)))
    np.testing.assert_allclose(sampler.success_rate, p, rtol=1e-14)
    np.testing.assert_allclose(sampler.sigma, expected, rtol=1e-13)
    # direction: from p = p_t, a failure shrinks sigma and a success grows it
    assert sampler.sigma[0] < 1.0
    rule = success_rule(np.ones(2), np.full(2, 2 / 11), np.array([False, True]), 2 / 11, 1 / 12, damping)[0]
    assert rule[0] < 1.0 < rule[1]


def test_mgaa_step_size_rule():
    """sigma <- sigma f_e after an acceptance, sigma f_c after a rejection, with beta = ln(d+1)/(d+1)^2,
    f_e = 1 + beta (1 - 1/e), f_c = 1 - beta / e."""
    dim = 4
    target = T.haario_target(1, dim)
    sampler = MGaA(target)
    rng = np.random.default_rng(3)
    state = sampler.init(target.sample(rng, 2))
    sigma = sampler.sigma.copy()
    state, _ = sampler.step(rng, state)
    sampler.adapt(state, rejected_and_accepted(1, 1), 1)
    beta = math.log(dim + 1) / (dim + 1) ** 2
    np.testing.assert_allclose(sampler.sigma, sigma * [1 - beta / math.e, 1 + beta * (1 - 1 / math.e)], rtol=1e-14)


FORMULA_SAMPLERS = {
    "MCMA": lambda t: MCMA(t, initial_cov=np.array([[1.0, 0.5], [0.5, 2.0]]), initial_scale=0.8),
    "MGaA": lambda t: MGaA(t, initial_scale=1.2),
    "MH": lambda t: FixedProposalMH(t, np.array([[1.0, 0.3], [0.3, 0.5]])),
}


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("sampler_name", FORMULA_SAMPLERS)
def test_accept_prob_formula(sampler_name, seed):
    """Symmetric random walks: the acceptance probability is min(1, pi(x*) / pi(x)) at the recorded
    proposal x*, for every seed (deterministic, unlike a test of moments)."""
    inner = T.haario_target(3, 2)
    target = RecordingTarget(inner)
    rng = np.random.default_rng(seed)
    sampler = FORMULA_SAMPLERS[sampler_name](target)
    state = sampler.init(inner.sample(rng, 40) * 1.5)
    n_init = len(target.calls)
    new_state, info = sampler.step(rng, state)
    (proposal,) = target.calls[n_init:]
    expected = np.exp(np.minimum(inner.logp(proposal) - inner.logp(state.x), 0.0))
    assert 0 < np.mean(expected < 1) < 1
    np.testing.assert_allclose(info.accept_prob, expected, rtol=1e-9, atol=1e-12)
    np.testing.assert_array_equal(new_state.x, np.where(info.accepted[:, None], proposal, state.x))


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
MUTATIONS = {      # each caught by a deterministic formula test, for every seed it runs with
    "wrong-acceptance-ratio": ("logp - state.logp", "logp - 0.8 * state.logp", "test_accept_prob_formula"),
    "gaa-no-det-normalisation": ("/ (det_delta ** (1 / dim))[:, None, None]", "",
                                 "test_gaa_shape_update_matches_the_matrix_square_root"),
    "success-rule-sign": ("np.exp((success_rate - target_success)", "np.exp((target_success - success_rate)",
                          "success_rule_and_damping"),
    "gaa-expansion-contraction-swapped": ('np.where(accepted, c["expansion"], c["contraction"])',
                                          'np.where(accepted, c["contraction"], c["expansion"])',
                                          "test_mgaa_step_size_rule"),
}


@pytest.mark.parametrize("name", MUTATIONS)
def test_planted_bug_is_caught(name, tmp_path):
    original, mutant, selection = MUTATIONS[name]
    assert_mutation_caught(tmp_path, "mcmc_lib/methods/mcma.py", original, mutant, "test_mcma.py", selection)


# --------------------------------------------------------------------------------------------
# The averaged stop (freeze_average) and the split of M-CMA's adaptation (adapt_scale, adapt_shape)
# --------------------------------------------------------------------------------------------
def drive(sampler, target, seed, n_iter, record=None):
    """Step and adapt as the harness's warm-up does; record(t, sampler) after each adaptation."""
    rng = np.random.default_rng(seed)
    state = sampler.init(np.random.default_rng(seed + 1).uniform(-5, 5, size=(6, target.dim)))
    for t in range(1, n_iter + 1):
        state, info = sampler.step(rng, state)
        sampler.adapt(state, info, t)
        if record is not None:
            record(t, sampler)
    return state


@pytest.mark.parametrize("make", [
    lambda t, **kw: MCMA(t, initial_cov=np.diag([100.0, 1, 1, 1]), **kw),
    lambda t, **kw: MGaA(t, initial_cov=np.diag([100.0, 1, 1, 1]), **kw),
])
def test_freeze_average_freezes_at_the_window_average(make):
    """The frozen proposal is exp(mean log s)^2 times the mean of the unit-determinant shapes C / s^2
    (renormalised), s = det(sigma^2 C)^(1/2d), over adaptation iterations first+1..last, computed here
    from a twin sampler that never freezes; after the freeze, adapt changes nothing."""
    target = T.haario_target(3, 4)
    first, last = 20, 60
    seen = []

    def record(t, sampler):
        if first < t <= last:
            seen.append(sampler.proposal_cov().copy())

    drive(make(target), target, 31, last, record)                 # the twin: same path, no freeze
    frozen = make(target, freeze_average=(first, last))
    state = drive(frozen, target, 31, last)
    covs = np.array(seen)                                          # (window, chains, d, d)
    log_scale = np.linalg.slogdet(covs)[1] / (2 * 4)
    shapes = covs / np.exp(2 * log_scale)[..., None, None]
    mean_shape = shapes.mean(axis=0)
    mean_shape /= np.linalg.det(mean_shape)[:, None, None] ** (1 / 4)
    expected = np.exp(2 * log_scale.mean(axis=0))[:, None, None] * mean_shape
    np.testing.assert_allclose(frozen.proposal_cov(), expected, rtol=1e-9)
    assert not np.allclose(covs[-1], expected, rtol=1e-3)          # the average is not the last value
    before = frozen.proposal_cov().copy()
    rng = np.random.default_rng(32)
    for t in range(last + 1, last + 50):
        state, info = frozen.step(rng, state)
        frozen.adapt(state, info, t)
    np.testing.assert_array_equal(frozen.proposal_cov(), before)


def test_freeze_average_leaves_the_chain_exact():
    target = correlated_target()
    result = sample(lambda t: MCMA(t, freeze_average=(1000, 2000)), target, 33)
    assert_moments_match(result.samples, target.mean, target.cov)


def test_sigma_only_and_shape_only_adapt_what_they_say():
    target = T.haario_target(3, 4)
    c0 = np.diag([100.0, 1, 1, 1])
    sigma_only = MCMA(target, initial_cov=c0, constant_adaptation=True, adapt_shape=False)
    shape_only = MCMA(target, initial_cov=c0, constant_adaptation=True, adapt_scale=False)
    both = MCMA(target, initial_cov=c0, constant_adaptation=True)
    for sampler in (sigma_only, shape_only, both):
        sampler.init(np.zeros((6, 4)))
    cov0, sigma0 = sigma_only.cov.copy(), sigma_only.sigma.copy()     # det C_0 normalised into sigma
    for sampler in (sigma_only, shape_only, both):
        drive(sampler, target, 34, 800)
    np.testing.assert_array_equal(sigma_only.cov, cov0)
    assert not np.allclose(sigma_only.sigma, sigma0)
    np.testing.assert_array_equal(shape_only.sigma, sigma0)
    assert not np.allclose(shape_only.cov, cov0)
    np.testing.assert_allclose(np.linalg.det(shape_only.cov), 1.0, rtol=1e-9)
    assert not np.allclose(both.sigma, sigma0) and not np.allclose(both.cov, cov0)
    assert sigma_only.name == "M-CMA (sigma only)" and shape_only.name == "M-CMA (shape only)"


@pytest.mark.parametrize("build, name", [
    (lambda t: MCMA(t, constant_adaptation=True, freeze_average=(10, 20)), "freeze_average"),
    (lambda t: MGaA(t, freeze_average=(20, 20)), "freeze_average"),
    (lambda t: MCMA(t, freeze_average=(-1, 20)), "freeze_average"),
    (lambda t: MCMA(t, freeze_average="late"), "freeze_average"),
    (lambda t: MCMA(t, adapt_scale="no"), "adapt_scale"),
    (lambda t: MCMA(t, adapt_scale=False, adapt_shape=False), "adapt_scale and adapt_shape"),
])
def test_bad_freeze_and_split_arguments_raise(build, name):
    with pytest.raises(ValueError, match=name):
        build(T.haario_target(1, 2))


FREEZE_MUTATIONS = {   # caught by the deterministic comparison with the twin sampler
    "freeze-at-last-shape": ("shape = self._shape_sum / n", "shape = self.proposal_cov()"),
    "freeze-arithmetic-scale": ("np.exp(self._log_scale_sum / n)", "np.exp(self._log_scale_sum / n) * 1.01"),
}


@pytest.mark.parametrize("name", FREEZE_MUTATIONS)
def test_planted_freeze_bug_is_caught(name, tmp_path):
    original, mutant = FREEZE_MUTATIONS[name]
    assert_mutation_caught(tmp_path, "mcmc_lib/methods/mcma.py", original, mutant, "test_mcma.py",
                           "test_freeze_average_freezes_at_the_window_average")


# --------------------------------------------------------------------------------------------
# The mixing of x_1 at the chapter's run length (book/mcma.md, eq-mcma-tau)
# --------------------------------------------------------------------------------------------
def test_tau_from_per_run_means_is_right_where_geyer_per_run_is_not():
    """The chapter estimates the autocorrelation time of x_1 from the spread of independent runs' means,
    tau_hat = N mean(xbar^2) / var (true mean 0), because Geyer's ESS of one run of N = 5000 draws
    overstates the ESS where tau is a quarter of N. On AR(1) chains with tau = 1250 (as x_1's on pi_4),
    started in equilibrium: tau_hat matches the exact N var(xbar) of a run within its Monte Carlo error,
    and Geyer's per-run ESS is well above N / that (about twice)."""
    n_runs, n, tau = 400, 5000, 1250.0
    rho = (tau - 1) / (tau + 1)
    rng = np.random.default_rng(20171106)
    x = np.empty((n_runs, n))
    x[:, 0] = rng.standard_normal(n_runs)
    noise = math.sqrt(1 - rho**2) * rng.standard_normal((n_runs, n))
    for t in range(1, n):
        x[:, t] = rho * x[:, t - 1] + noise[:, t]
    exact = tau - 2 * rho * (1 - rho**n) / (n * (1 - rho) ** 2)         # N var(xbar) of a run, exactly
    per_run = n * x.mean(axis=1) ** 2
    tau_hat = per_run.mean()
    assert abs(tau_hat - exact) < 4 * per_run.std(ddof=1) / math.sqrt(n_runs)
    geyer = np.mean([diagnostics.geyer_ess_1d(chain, "arviz") for chain in x])
    assert geyer > 1.5 * n / exact
