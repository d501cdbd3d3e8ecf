"""Exactness of every baseline with adaptation stopped, non-finite densities, bad arguments."""
import zlib

import numpy as np
import pytest

from mcmc_lib import targets as T
from mcmc_lib.harness import run, summarise
from mcmc_lib.samplers import (HMC, MALA, RWM, ChainState, CholeskyAM, HaarioAM, StepInfo, leapfrog,
                               metropolis_hastings_accept, robbins_monro_scale)

from moments import assert_moments_match, banana_target, correlated_target, run_from_near_the_mean, scaled_target
from planted import RecordingTarget, leapfrog_momenta

N_CHAINS = 4


SAMPLERS = {
    "RWM": lambda t: RWM(t, step_size=1.0 / np.sqrt(t.dim)),
    "MALA": lambda t: MALA(t, step_size=0.5 / t.dim**0.25),
    "HMC": lambda t: HMC(t, step_size=0.2, n_leapfrog=5),
    "HMC-jitter": lambda t: HMC(t, step_size=0.2, n_leapfrog=5, jitter_shape=15),
    "AM": lambda t: HaarioAM(t),
    "AM-Cholesky": lambda t: CholeskyAM(t, n_warmup=2000),
}
TARGETS = {"correlated": correlated_target, "scaled": scaled_target, "banana": banana_target}


def sample(make_sampler, target, seed, n_warmup=2000, n_samples=6000):
    return run_from_near_the_mean(make_sampler, target, seed, N_CHAINS, n_warmup, n_samples)


@pytest.mark.parametrize("target_name", TARGETS)
@pytest.mark.parametrize("sampler_name", SAMPLERS)
def test_sampler_is_exact_after_adaptation_stops(sampler_name, target_name):
    target = TARGETS[target_name]()
    result = sample(SAMPLERS[sampler_name], target, seed=zlib.crc32(f"{sampler_name}-{target_name}".encode()))
    assert 0.05 < result.accept_rate.mean() < 0.99
    assert_moments_match(result.samples, target.mean, target.cov)


def test_mh_accept_with_explicit_u():
    accepted, prob, nonfinite = metropolis_hastings_accept(
        np.array([0.0, -1.0, -1.0, np.nan, np.inf, -np.inf]), np.array([0.5, 0.3, 0.4, 0.1, 0.1, 0.1]))
    np.testing.assert_array_equal(accepted, [True, True, False, False, False, False])
    np.testing.assert_allclose(prob, [1.0, np.exp(-1), np.exp(-1), 0.0, 0.0, 0.0])
    # -inf (a proposal outside the support) is counted as a non-finite rejection too.
    np.testing.assert_array_equal(nonfinite, [False, False, False, True, True, True])


class HalfSpaceGaussian(T.Target):
    """Standard Gaussian truncated to x_0 > 0: log density -inf (or NaN) outside, as a model
    with an invalid region would return."""

    def __init__(self, dim=2, outside=-np.inf):
        super().__init__(dim)
        self.outside = outside

    def _logp(self, x):
        return np.where(x[:, 0] > 0, -0.5 * np.sum(x**2, axis=1), self.outside)

    def _grad(self, x):
        return np.where(x[:, :1] > 0, -x, np.nan)


@pytest.mark.parametrize("outside", [-np.inf, np.nan])
@pytest.mark.parametrize("sampler_name", ["RWM", "MALA", "HMC", "AM"])
def test_nonfinite_density_is_a_counted_rejection(sampler_name, outside):
    target = HalfSpaceGaussian(outside=outside)
    rng = np.random.default_rng(7)
    x0 = np.abs(rng.standard_normal((N_CHAINS, 2)))
    result = run(SAMPLERS[sampler_name](target), x0, 500, 4000, rng)
    assert np.all(np.isfinite(result.samples)) and np.all(result.samples[..., 0] > 0)
    assert result.n_nonfinite.sum() > 0
    # The truncated coordinate is half-normal with mean sqrt(2/pi).
    assert abs(result.samples[..., 0].mean() - np.sqrt(2 / np.pi)) < 0.1


def test_start_with_nonfinite_density_raises():
    with pytest.raises(ValueError, match="x0"):
        RWM(HalfSpaceGaussian(), 0.5).init(-np.ones((2, 2)))


def test_run_reports_costs_and_summary():
    target = scaled_target()
    result = sample(SAMPLERS["HMC"], target, seed=11, n_warmup=100, n_samples=300)
    # HMC-5 reuses the gradient at the start of a trajectory: 5 gradients per iteration,
    # plus one at the starting point, counted in warm-up.
    assert result.grad_evals == {"warmup": 501.0, "sampling": 1500.0}
    assert result.samples.shape == (N_CHAINS, 300, 4)
    row = summarise(result)
    assert row["ess_min"] <= row["ess_median"] <= row["ess_max"]
    assert row["min_ess_per_1000_grads"] == pytest.approx(row["ess_min"] / 2001 * 1000)
    assert result.to_inference_data().posterior["x"].shape == (N_CHAINS, 300, 4)


def test_step_size_adaptation_reaches_target_rate():
    target = scaled_target()
    rng = np.random.default_rng(12)
    result = run(RWM(target, step_size=0.05, target_accept=0.3), rng.standard_normal((N_CHAINS, 4)), 20000, 4000, rng)
    assert abs(result.accept_rate.mean() - 0.3) < 0.05


@pytest.mark.parametrize("build,name", [
    (lambda t: RWM(t, step_size=-1.0), "step_size"),
    (lambda t: MALA(t, step_size=0.1, target_accept=1.5), "target_accept"),
    (lambda t: HMC(t, step_size=0.1, n_leapfrog=0), "n_leapfrog"),
    (lambda t: HaarioAM(t, initial_cov=-np.eye(4)), "initial_cov"),
    (lambda t: CholeskyAM(t, n_warmup=0), "n_warmup"),
])
def test_bad_sampler_arguments(build, name):
    with pytest.raises(ValueError, match=name):
        build(scaled_target())


def test_bad_run_arguments():
    target = scaled_target()
    with pytest.raises(ValueError, match="rng"):
        run(RWM(target, 0.5), np.zeros((2, 4)), 10, 10, rng=np.random.RandomState(0))
    with pytest.raises(ValueError, match="x0"):
        run(RWM(target, 0.5), np.zeros((2, 3)), 10, 10, rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match="n_samples"):
        run(RWM(target, 0.5), np.zeros((2, 4)), 10, 0, rng=np.random.default_rng(0))


def test_bad_run_arguments_are_named_before_anything_runs():
    target = scaled_target()
    x0 = np.zeros((2, 4))
    with pytest.raises(ValueError, match="thin must be at most n_samples = 10.*got 11"):
        run(RWM(target, 0.5), x0, 10, 10, rng=np.random.default_rng(0), thin=11)
    for sampler in (RWM(target, 0.5), HaarioAM(target), CholeskyAM(target, n_warmup=10)):
        with pytest.raises(ValueError, match=r"x0 must hold at least 1 chain.*\(0, 4\)"):
            run(sampler, np.zeros((0, 4)), 10, 10, rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match=r"keep must map.*\(2, n_stored\).*got shape \(2,\)"):
        run(RWM(target, 0.5), x0, 0, 10, rng=np.random.default_rng(0), keep=lambda x: x[:, 0])
    with pytest.raises(ValueError, match="keep must be a function"):
        run(RWM(target, 0.5), x0, 0, 10, rng=np.random.default_rng(0), keep=[0, 1])
    # thin = n_samples keeps exactly one state per chain
    result = run(RWM(target, 0.5), x0, 0, 10, rng=np.random.default_rng(0), thin=10, keep=lambda x: x[:, :2])
    assert result.samples.shape == (2, 1, 2)


@pytest.mark.parametrize("build,name", [
    (lambda t: RWM(t, step_size=True), "step_size"),
    (lambda t: MALA(t, step_size=np.array([True, False])), "step_size"),
    (lambda t: MALA(t, step_size=0.1, target_accept=True), "target_accept"),
    (lambda t: HMC(t, step_size=0.1, n_leapfrog=True), "n_leapfrog"),
    (lambda t: HMC(t, step_size=0.1, n_leapfrog=5, jitter_shape=True), "jitter_shape"),
    (lambda t: HaarioAM(t, eps=True), "eps"),
    (lambda t: HaarioAM(t, t0=True), "t0"),
    (lambda t: CholeskyAM(t, n_warmup=10, step_variance=True), "step_variance"),
    (lambda t: CholeskyAM(t, n_warmup=10, diagonal="no"), "diagonal"),
    (lambda t: RWM(t, step_size="0.5"), "step_size"),
])
def test_booleans_and_strings_are_not_numbers(build, name):
    """Issue 47: step_size=True ran with step 1.0. A boolean (or a string) where a number is expected is a
    TypeError naming the argument, raised at the boundary (mcmc_lib.validation), for every numeric argument."""
    with pytest.raises(TypeError, match=rf"{name} must be .*got (bool|ndarray|str)"):
        build(scaled_target())


def test_a_dense_covariance_that_cannot_fit_is_refused_before_it_is_allocated(monkeypatch):
    """Issue 47: HaarioAM at d = 20,000 allocated a 6 GiB covariance after two minutes. The dense samplers
    say up front what their d x d matrices need and what is available (here a stated ceiling)."""
    from mcmc_lib.validation import InsufficientMemoryError
    big = T.DiagonalGaussian(np.ones(20_000))                     # O(d) itself: no dense matrix
    monkeypatch.setenv("MCMC_BOOK_MEMORY_LIMIT", str(int(4e9)))
    for make in (lambda: HaarioAM(big), lambda: CholeskyAM(big, n_warmup=10)):
        with pytest.raises(InsufficientMemoryError, match=r"target\.dim: .* at dimension 20000 with 1 chain .*"
                                                          r"needs about .* GB, and 4 GB is the ceiling"):
            make()
    # What fits for one chain is checked again for all of them when the chains start, before allocating.
    monkeypatch.setenv("MCMC_BOOK_MEMORY_LIMIT", str(int(6e6)))   # 100-d: 6 x 80 kB for one chain, not for 20
    target = T.DiagonalGaussian(np.ones(100))
    am = HaarioAM(target)
    with pytest.raises(ValueError, match=r"x0: HaarioAM at dimension 100 with 20 chains .*needs about"):
        am.init(np.zeros((20, 100)))
    am.init(np.zeros((2, 100)))
    monkeypatch.delenv("MCMC_BOOK_MEMORY_LIMIT")
    with pytest.raises(MemoryError, match=r"HaarioAM at dimension 1000000 .*available on this machine"):
        HaarioAM(T.DiagonalGaussian(np.ones(1_000_000)))        # 8 TB per matrix: refused on any machine


def test_summarise_has_no_gradient_column_for_a_gradient_free_sampler():
    """Issue 47: summarise reported min_ess_per_1000_grads = nan, with no note, for samplers that evaluate no
    gradient. Such a row has no such column (a table built from rows shows it empty); a gradient sampler's has."""
    target = scaled_target()
    rng = np.random.default_rng(5)
    free = summarise(run(RWM(target, 0.5), rng.standard_normal((2, 4)), 0, 50, rng))
    assert "min_ess_per_1000_grads" not in free and free["ess_min"] >= 0
    with_gradients = summarise(run(MALA(target, 0.3), rng.standard_normal((2, 4)), 0, 50, rng))
    assert np.isfinite(with_gradients["min_ess_per_1000_grads"])
    assert list(with_gradients) == ["sampler", "time_s", "accept", "ess_min", "ess_median", "ess_max", "min_ess_per_s",
                                    "min_ess_per_s_sd", "min_ess_per_1000_grads", "n_chains"]
    with pytest.raises(TypeError, match="result must be a RunResult"):
        summarise({"samples": np.zeros((2, 5, 4))})


@pytest.mark.parametrize("initial_cov", [np.eye(3), np.eye(5), np.ones(4), np.ones((4, 3))])
def test_wrong_size_initial_cov_is_named_with_both_shapes(initial_cov):
    with pytest.raises(ValueError, match=r"initial_cov must be a scalar or a \(4, 4\) matrix.*got shape"):
        HaarioAM(scaled_target(), initial_cov=initial_cov)


class ColumnLogp(T.Target):
    """A user's target whose log density comes back as a column (n, 1) instead of (n,)."""

    name = "column"

    def _logp(self, x):
        return -0.5 * np.sum(x**2, axis=1, keepdims=True)


def test_logp_of_the_wrong_shape_is_refused_at_the_first_evaluation():
    with pytest.raises(ValueError, match=r"logp of 'column' must return one log density per row: "
                                         r"shape \(3,\).*got shape \(3, 1\)"):
        run(RWM(ColumnLogp(2), 0.5), np.zeros((3, 2)), 10, 10, rng=np.random.default_rng(0))


def test_a_chain_that_never_moves_scores_zero_not_the_best():
    """A random walk with an absurd step size never moves: its ESS is 0 (no information), so its
    min ESS per second is 0 and cannot beat a working sampler (ArviZ alone would give ESS = N)."""
    target = scaled_target()
    rng = np.random.default_rng(3)
    x0 = rng.standard_normal((3, 4)) * 0.3
    stuck = run(RWM(target, step_size=1e6), x0, 0, 500, rng)
    assert np.all(stuck.accept_rate == 0)
    row = summarise(stuck)
    assert row["ess_min"] == row["ess_max"] == 0 and row["min_ess_per_s"] == 0
    healthy = summarise(run(RWM(target, step_size=0.6), x0, 0, 500, rng))
    assert healthy["min_ess_per_s"] > row["min_ess_per_s"]


# ------------------------------------------------------------------------------------------------
# The acceptance probability of one step, recomputed from its formula at the recorded proposal.
# Deterministic: a wrong ratio (a missing Hastings term, a wrong sign, a factor on log pi(x)) gives
# a different number for every seed.
# ------------------------------------------------------------------------------------------------
FORMULA_SEEDS = range(5)
FORMULA_TARGETS = {"correlated": correlated_target, "banana": banana_target}


def one_recorded_step(make_sampler, target_name, seed, n_chains=40):
    inner = FORMULA_TARGETS[target_name]()
    target = RecordingTarget(inner)
    rng = np.random.default_rng(seed)
    # away from the mode (log pi(x) far from 0) and with mixed uphill and downhill proposals
    x0 = inner.mean + 1.5 * rng.standard_normal((n_chains, inner.dim))
    sampler = make_sampler(target)
    state = sampler.init(x0)
    n_init = len(target.calls)
    new_state, info = sampler.step(rng, state)
    return inner, sampler, state, new_state, info, target.calls[n_init:]


def assert_mh_step(state, new_state, info, y, log_ratio):
    expected = np.exp(np.minimum(log_ratio, 0.0))
    assert 0 < np.mean(expected < 1) < 1                       # both kinds of proposals occur
    np.testing.assert_allclose(info.accept_prob, expected, rtol=1e-9, atol=1e-12)
    np.testing.assert_array_equal(new_state.x, np.where(info.accepted[:, None], y, state.x))
    assert not np.any(info.nonfinite)


@pytest.mark.parametrize("seed", FORMULA_SEEDS)
@pytest.mark.parametrize("target_name", FORMULA_TARGETS)
@pytest.mark.parametrize("sampler_name", ["RWM", "AM", "AM-Cholesky"])
def test_accept_prob_formula_random_walk(sampler_name, target_name, seed):
    """Symmetric proposals: alpha = min(1, pi(y) / pi(x))."""
    inner, _, state, new_state, info, calls = one_recorded_step(SAMPLERS[sampler_name], target_name, seed)
    (y,) = calls
    assert_mh_step(state, new_state, info, y, inner.logp(y) - inner.logp(state.x))


@pytest.mark.parametrize("seed", FORMULA_SEEDS)
@pytest.mark.parametrize("target_name", FORMULA_TARGETS)
def test_accept_prob_formula_MALA(target_name, seed):
    """alpha = min(1, pi(y) q(x | y) / (pi(x) q(y | x))), q(a | b) = N(a; b + h^2/2 grad log pi(b), h^2 I)."""
    inner, sampler, state, new_state, info, calls = one_recorded_step(SAMPLERS["MALA"], target_name, seed)
    (y,) = calls
    h = sampler.step_size[:, None]

    def log_q(a, b):
        return -0.5 * np.sum((a - b - 0.5 * h**2 * inner.grad_logp(b)) ** 2, axis=1) / h[:, 0] ** 2

    log_ratio = inner.logp(y) - inner.logp(state.x) + log_q(state.x, y) - log_q(y, state.x)
    assert_mh_step(state, new_state, info, y, log_ratio)


@pytest.mark.parametrize("seed", FORMULA_SEEDS)
@pytest.mark.parametrize("target_name", FORMULA_TARGETS)
def test_accept_prob_formula_HMC(target_name, seed):
    """alpha = min(1, exp(H(x, p) - H(x*, p*))), H = -log pi + |p|^2 / 2, with the momenta recovered
    from the leapfrog positions the target was evaluated at."""
    inner, sampler, state, new_state, info, calls = one_recorded_step(SAMPLERS["HMC"], target_name, seed)
    assert len(calls) == sampler.n_leapfrog
    positions = [state.x] + calls
    grads = [inner.grad_logp(state.x), inner.grad_logp(calls[-1])]
    p0, p_end = leapfrog_momenta(positions, grads, sampler.step_size)
    y = calls[-1]
    log_ratio = (inner.logp(y) - 0.5 * np.sum(p_end**2, axis=1)) - (inner.logp(state.x) - 0.5 * np.sum(p0**2, axis=1))
    assert_mh_step(state, new_state, info, y, log_ratio)


# ------------------------------------------------------------------------------------------------
# Adaptation rules against their formulas (one step, known inputs) and their direction
# ------------------------------------------------------------------------------------------------
def info_with(accepted, accept_prob=None):
    accepted = np.asarray(accepted, dtype=bool)
    prob = accepted.astype(float) if accept_prob is None else np.asarray(accept_prob, dtype=float)
    return StepInfo(accepted, prob, np.zeros_like(accepted))


def test_robbins_monro_rule_formula_and_direction():
    scale = np.array([2.0, 2.0, 0.5])
    new = robbins_monro_scale(scale, np.array([True, False, True]), 0.25, 0.01)
    # scale (1 + rate (a - a*) / a*): x1.03 on acceptance, x0.99 on rejection, for a* = 0.25
    np.testing.assert_allclose(new, [2.0 * 1.03, 2.0 * 0.99, 0.5 * 1.03], rtol=1e-15)
    new = robbins_monro_scale(np.ones(2), np.array([True, False]), 0.8, 0.05)
    np.testing.assert_allclose(new, [1.0 + 0.05 * 0.2 / 0.8, 1.0 - 0.05], rtol=1e-15)
    # at acceptance rate a* the expected multiplicative change is exactly 0
    a = 0.3
    expected = a * robbins_monro_scale(1.0, np.array(True), a) + (1 - a) * robbins_monro_scale(1.0, np.array(False), a)
    assert expected == pytest.approx(1.0, abs=1e-15)


@pytest.mark.parametrize("make, target_accept", [
    (lambda t: RWM(t, step_size=0.7), 0.234),
    (lambda t: MALA(t, step_size=0.7), 0.574),
    (lambda t: HMC(t, step_size=0.7, n_leapfrog=3), 0.8),
    (lambda t: RWM(t, step_size=0.7, target_accept=0.5, adapt_rate=0.1), 0.5),
])
def test_step_size_adaptation_formula(make, target_accept):
    """The rule scales h^2: h <- h sqrt(1 + rate (a - a*) / a*); up after an acceptance, down after a rejection."""
    sampler = make(scaled_target())
    state = sampler.init(np.zeros((2, 4)))
    sampler.adapt(state, info_with([True, False]), 1)
    rate = sampler.adapt_rate
    np.testing.assert_allclose(sampler.step_size, [0.7 * np.sqrt(1 + rate * (1 - target_accept) / target_accept),
                                                   0.7 * np.sqrt(1 - rate)], rtol=1e-14)
    assert sampler.step_size[0] > 0.7 > sampler.step_size[1]


def test_haario_am_recursive_covariance_and_scale():
    """C_t = C_0 while t <= t0, then (2.38^2 / d) (Cov(x_0, ..., x_t) + eps I), with the running mean
    and covariance (Welford) equal to the batch ones at every step."""
    d, t0, eps = 3, 6, 1e-6
    target = T.Gaussian(np.array([0.5, 1.0, 2.0]) ** 2)
    initial_cov = np.diag([0.3, 0.2, 0.1])
    am = HaarioAM(target, initial_cov=initial_cov, t0=t0, eps=eps)
    rng = np.random.default_rng(0)
    history = [rng.standard_normal((2, d)) * [1.0, 3.0, 0.2] + 5.0]
    state = am.init(history[0])
    for t in range(1, 15):
        x = rng.standard_normal((2, d)) * [1.0, 3.0, 0.2] + 5.0
        history.append(x)
        am.adapt(ChainState(x, target.logp(x)), info_with([True, False]), t)
        h = np.stack(history, axis=1)                              # (chains, t + 1, d)
        np.testing.assert_allclose(am.mean, h.mean(axis=1), rtol=1e-13)
        for c in range(2):
            if t + 1 > t0:
                expected = 2.38**2 / d * (np.cov(h[c].T) + eps * np.eye(d))
            else:
                expected = initial_cov
            np.testing.assert_allclose(am.proposal_cov()[c], expected, rtol=1e-10)
    # direction: a history twice as wide gives a proposal covariance four times as large
    wide = HaarioAM(target, t0=2)
    wide.init(2 * history[0])
    for t, x in enumerate(history[1:], start=1):
        wide.adapt(ChainState(2 * x, target.logp(2 * x)), info_with([True, True]), t)
    np.testing.assert_allclose(wide.proposal_cov() - 2.38**2 / d * eps * np.eye(d),
                               4 * (am.proposal_cov() - 2.38**2 / d * eps * np.eye(d)), rtol=1e-9)


@pytest.mark.parametrize("diagonal", [False, True])
def test_cholesky_am_one_step_formula(diagonal):
    """mu <- mu + 0.01 (x - mu); z = L^{-1} (x - mu); L <- tril(L + rho_t L (z z^T - I)), diag(L) >= 1e-3;
    delta <- delta (1 + 0.01 (a - 0.25) / 0.25); rho_t = rho0 / (1 + t / T0)."""
    d, n_warmup, t = 3, 400, 37
    target = T.Gaussian(np.array([0.5, 1.0, 2.0]) ** 2)
    am = CholeskyAM(target, n_warmup=n_warmup, step_variance=0.3, rho0=0.05, diagonal=diagonal)
    rng = np.random.default_rng(1)
    state = am.init(rng.standard_normal((2, d)))
    L = np.tril(rng.uniform(0.2, 1.0, (2, d, d)))
    if diagonal:
        L = L * np.eye(d)
    L[1, 0, 0] = 2e-3                                   # close to the clamp
    am.chol = L.copy()
    mean = am.mean.copy()
    x = rng.standard_normal((2, d)) * 3
    am.adapt(ChainState(x, target.logp(x)), info_with([True, False]), t)
    rho = 0.05 / (1 + t / (n_warmup / 4))
    new_mean = mean + 0.01 * (x - mean)
    np.testing.assert_allclose(am.mean, new_mean, rtol=1e-14)
    for c in range(2):
        z = np.linalg.solve(L[c], x[c] - new_mean[c])
        expected = np.tril(L[c] + rho * L[c] @ (np.outer(z, z) - np.eye(d)))
        if diagonal:
            expected = expected * np.eye(d)
        idx = np.arange(d)
        expected[idx, idx] = np.maximum(expected[idx, idx], 1e-3)
        np.testing.assert_allclose(am.chol[c], expected, rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(am.variance, [0.3 * (1 + 0.01 * 0.75 / 0.25), 0.3 * (1 - 0.01)], rtol=1e-14)


# ------------------------------------------------------------------------------------------------
# The leapfrog integrator against the textbook scheme, step by step
# ------------------------------------------------------------------------------------------------
def textbook_leapfrog(grad_logp, x, p, step_size, n_steps):
    """Half kick, then (drift, full kick) n_steps - 1 times, then a drift and a half kick."""
    h = step_size[:, None]
    p = p + 0.5 * h * grad_logp(x)
    for step in range(n_steps):
        x = x + h * p
        p = p + (h if step < n_steps - 1 else 0.5 * h) * grad_logp(x)
    return x, p


class OwnGradient(T.Target):
    """A target with its own grad_logp (as stochastic or surrogate gradients have): the leapfrog
    must call it, not bypass it."""

    def __init__(self, inner):
        super().__init__(inner.dim)
        self.inner, self.own_calls = inner, 0

    def _logp_and_grad(self, x):
        return self.inner._logp_and_grad(x)

    def grad_logp(self, x):
        self.own_calls += 1
        self.n_grad_evals += x.shape[0]
        return self.inner._grad(x)


LEAPFROG_TARGETS = {**FORMULA_TARGETS, "neal-20": lambda: T.neal_gaussian(20)}


@pytest.mark.parametrize("n_steps", [1, 2, 7])
@pytest.mark.parametrize("target_name", LEAPFROG_TARGETS)
def test_leapfrog_is_the_textbook_scheme_and_counts_its_gradients(target_name, n_steps):
    """Equal to the textbook loop up to rounding (the inner steps carry h p, not p), through the fast
    inner gradient (a plain target) and through a target's own grad_logp; inputs left alone."""
    target = LEAPFROG_TARGETS[target_name]()
    rng = np.random.default_rng(n_steps)
    x0 = rng.standard_normal((5, target.dim))
    p0 = rng.standard_normal((5, target.dim))
    h = rng.uniform(0.05, 0.3, size=5)
    expected_x, expected_p = textbook_leapfrog(target.grad_logp, x0, p0, h, n_steps)
    expected_logp, start_grad = target.logp(expected_x), target.grad_logp(x0)
    for tested in (target, OwnGradient(target)):
        tested.reset_counters()
        x0_before, p0_before = x0.copy(), p0.copy()
        x, p, logp, grad = leapfrog(tested, x0, p0, start_grad, h, n_steps)
        assert tested.n_grad_evals == 5 * n_steps             # n_steps - 1 inner gradients and the end one
        assert tested.n_logp_evals == 5
        np.testing.assert_allclose(x, expected_x, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(p, expected_p, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(logp, expected_logp, rtol=1e-10, atol=1e-12)
        np.testing.assert_array_equal(x0, x0_before)          # the caller's arrays are left alone
        np.testing.assert_array_equal(p0, p0_before)
    assert tested.own_calls == n_steps - 1


class WrongGradientShape(T.Target):
    def _logp(self, x):
        return -0.5 * np.sum(x**2, axis=1)

    def _grad(self, x):
        return -x[:, :1]                       # one column: would broadcast silently over p


def test_leapfrog_refuses_a_gradient_of_the_wrong_shape_in_its_inner_steps():
    x0 = np.ones((3, 2))
    with pytest.raises(ValueError, match=r"gradient of logp of 'target' must have shape \(3, 2\)"):
        leapfrog(WrongGradientShape(2), x0, np.zeros((3, 2)), -x0, np.full(3, 0.1), 3)
