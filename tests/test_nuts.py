"""Tests of NUTS: exactness after warm-up, metric adaptation, hard boundaries, cost accounting, arguments.

Each test runs its own small loop (init, warm-up with adapt, sampling without adapt), so that it
does not depend on the shared run harness.
"""
import arviz as az
import numpy as np
import pytest

from mcmc_lib.samplers.nuts import (NUTS, DualAveraging, _Point, _Subtree, _Trajectory, initial_step_size,
                                   metric_windows, no_u_turn)
from mcmc_lib.targets import Gaussian, Target

N_SIGMA = 4.5


def run(sampler, rng, x0, n_warmup, n_draws):
    """Warm-up with adapt, then sampling with the kernel fixed. Returns draws (chains, draws, dim),
    the sampling-phase infos and the number of leapfrog steps of all steps (warm-up included)."""
    state = sampler.init(x0)
    n_leapfrog = 0
    for i in range(n_warmup):
        state, info = sampler.step(rng, state)
        sampler.adapt(state, info, i)
        n_leapfrog += sampler.last_n_leapfrog.sum()
    draws = np.empty((n_draws,) + state.x.shape)
    infos = []
    for i in range(n_draws):
        state, info = sampler.step(rng, state)
        n_leapfrog += sampler.last_n_leapfrog.sum()
        draws[i] = state.x
        infos.append(info)
    return draws.transpose(1, 0, 2), infos, n_leapfrog


def mcse(values):
    """Monte Carlo standard error of the mean of values (chains, draws), from arviz's ESS."""
    return values.std() / np.sqrt(az.ess(values, method="mean"))


def assert_moments(draws, mean, variance):
    """Sample means and variances (about the true mean) within N_SIGMA standard errors."""
    for j in range(draws.shape[2]):
        x = draws[:, :, j]
        z_mean = (x.mean() - mean[j]) / mcse(x)
        sq = (x - mean[j]) ** 2
        z_var = (sq.mean() - variance[j]) / mcse(sq)
        assert abs(z_mean) < N_SIGMA, (j, x.mean(), mean[j], z_mean)
        assert abs(z_var) < N_SIGMA, (j, sq.mean(), variance[j], z_var)


class HalfGaussian(Target):
    """N(0, I) restricted to x0 >= 0: log density -inf on half the space (gradient stays finite)."""

    name = "half-Gaussian"

    def _logp(self, x):
        return np.where(x[:, 0] >= 0, -0.5 * np.sum(x**2, axis=1), -np.inf)

    def _grad(self, x):
        return -x


def test_exact_on_correlated_2d_gaussian():
    rng = np.random.default_rng(11)
    target = Gaussian(np.array([[1.0, 0.9], [0.9, 1.0]]))
    sampler = NUTS(target)
    draws, infos, _ = run(sampler, rng, rng.standard_normal((4, 2)), 500, 2000)
    assert_moments(draws, target.mean, np.diag(target.cov))
    cross = draws[:, :, 0] * draws[:, :, 1]
    assert abs(cross.mean() - 0.9) < N_SIGMA * mcse(cross)
    assert 0.6 < np.mean([i.accept_prob for i in infos]) < 0.97


def test_exact_on_5d_diagonal_gaussian_and_metric_adapts():
    rng = np.random.default_rng(12)
    sds = np.array([0.1, 0.5, 1.0, 2.0, 5.0])
    target = Gaussian(sds**2)
    sampler = NUTS(target, metric="diagonal")
    draws, infos, _ = run(sampler, rng, rng.standard_normal((4, 5)), 500, 2000)
    assert_moments(draws, target.mean, sds**2)
    ratio = sampler.tuning()["inv_metric"] / sds**2
    assert np.all((0.6 < ratio) & (ratio < 1.6)), ratio
    # With a good metric the scaled target is isotropic: short trees, step size of order one.
    assert np.all((0.3 < sampler.step_size) & (sampler.step_size < 1.5)), sampler.step_size
    assert np.mean(sampler.last_tree_depth) <= 4


def test_truncated_target_stays_finite_and_is_sampled_correctly():
    rng = np.random.default_rng(13)
    target = HalfGaussian(2)
    sampler = NUTS(target)
    x0 = np.abs(rng.standard_normal((3, 2)))
    draws, infos, _ = run(sampler, rng, x0, 500, 2000)
    assert np.all(np.isfinite(draws)) and np.all(draws[:, :, 0] >= 0)
    assert any(info.nonfinite.any() for info in infos)     # the wall is hit, and survived
    assert_moments(draws, [np.sqrt(2 / np.pi), 0.0], [1.0 - 2.0 / np.pi, 1.0])


def test_gradient_evaluations_equal_leapfrog_steps():
    rng = np.random.default_rng(14)
    target = Gaussian(np.array([0.5, 1.0, 3.0]) ** 2)
    sampler = NUTS(target, metric="diagonal", n_warmup=100)   # heuristic runs after each window too
    _, _, n_leapfrog = run(sampler, rng, rng.standard_normal((2, 3)), 100, 100)
    assert np.all(sampler.n_tuning_leapfrog > 0)
    expected = 2 + sampler.n_tuning_leapfrog.sum() + n_leapfrog    # init evaluates each chain once
    assert target.n_grad_evals == expected
    assert target.n_logp_evals == expected


def test_fixed_step_size_and_max_tree_depth_without_warmup():
    rng = np.random.default_rng(15)
    target = Gaussian(np.ones(3))
    sampler = NUTS(target, step_size=[0.01, 0.02], max_tree_depth=3)
    state = sampler.init(np.zeros((2, 3)))
    for _ in range(20):
        state, info = sampler.step(rng, state)
        assert np.all(sampler.last_n_leapfrog <= 7) and np.all(sampler.last_tree_depth <= 3)
        assert np.all(info.accepted) and not info.nonfinite.any()
    np.testing.assert_array_equal(sampler.tuning()["step_size"], [0.01, 0.02])
    assert "inv_metric" not in sampler.tuning()


def test_step_size_freezes_when_adapt_calls_stop_early():
    rng = np.random.default_rng(16)
    sampler = NUTS(Gaussian(np.ones(2)), n_warmup=500)
    state = sampler.init(np.zeros((2, 2)))
    for i in range(60):
        state, info = sampler.step(rng, state)
        sampler.adapt(state, info, i)
    # A step that follows a step (no adapt in between) ends warm-up: the step size becomes eps_bar.
    state, info = sampler.step(rng, state)
    state, info = sampler.step(rng, state)
    assert not sampler.adapting
    frozen = sampler.tuning()["step_size"]
    sampler.adapt(state, info, 60)             # ignored
    for _ in range(5):
        state, info = sampler.step(rng, state)
    np.testing.assert_array_equal(sampler.tuning()["step_size"], frozen)
    assert np.all((0.3 < frozen) & (frozen < 2.5))


def test_initial_step_size_heuristic_scales_with_target():
    rng = np.random.default_rng(17)
    for sd in (0.01, 1.0, 100.0):
        target = Gaussian(np.full(2, sd**2))
        x = np.full(2, sd)
        logp, grad = target.logp_and_grad(x)
        eps, n = initial_step_size(target, x, logp[0], grad[0], np.ones(2), rng)
        assert 0.1 * sd < eps < 10 * sd and n >= 2


def test_metric_windows_follow_stan():
    assert metric_windows(500).ends == (100, 150, 250, 450)
    assert metric_windows(1000).ends == (100, 150, 250, 450, 950)
    short = metric_windows(100)                      # 15% / 75% / 10%
    assert (short.slow_start, short.slow_end, short.ends) == (15, 90, (90,))
    assert metric_windows(19).ends == ()


@pytest.mark.parametrize("kwargs, name", [
    ({"max_tree_depth": 0}, "max_tree_depth"),
    ({"target_accept": 1.0}, "target_accept"),
    ({"target_accept": 0.0}, "target_accept"),
    ({"step_size": -0.1}, "step_size"),
    ({"step_size": 0.0}, "step_size"),
    ({"metric": "dense"}, "metric"),
    ({"max_energy_error": -1.0}, "max_energy_error"),
    ({"n_warmup": -5}, "n_warmup"),
])
def test_bad_arguments_raise(kwargs, name):
    with pytest.raises(ValueError, match=name):
        NUTS(Gaussian(np.ones(2)), **kwargs)


def test_bad_per_chain_step_size_shape():
    sampler = NUTS(Gaussian(np.ones(2)), step_size=[0.1, 0.2, 0.3])
    with pytest.raises(ValueError, match="step_size"):
        sampler.init(np.zeros((2, 2)))


# ------------------------------------------------------------------------------------------------
# Divergences and non-finite densities are counted apart
# ------------------------------------------------------------------------------------------------
def test_divergences_are_not_counted_as_nonfinite():
    """A step size 100 times the target's scale makes the energy error explode at finite densities:
    divergences, not non-finite densities. The half-Gaussian's wall (log density -inf) is the
    opposite case."""
    from mcmc_lib.harness import run as run_harness

    rng = np.random.default_rng(21)
    narrow = Gaussian(np.full(2, 1e-4))
    result = run_harness(NUTS(narrow, step_size=1.0, n_warmup=0), 0.01 * rng.standard_normal((2, 2)), 0, 30, rng)
    assert np.all(result.n_divergent == 30) and np.all(result.n_nonfinite == 0)
    wall = run_harness(NUTS(HalfGaussian(2), n_warmup=100), np.abs(rng.standard_normal((2, 2))), 100, 300, rng)
    assert np.all(wall.n_nonfinite > 0) and np.all(wall.n_divergent == 0)
    sampler = NUTS(narrow, step_size=1.0, n_warmup=0)
    state = sampler.init(np.full((1, 2), 0.01))
    _, info = sampler.step(rng, state)
    assert info.divergent.tolist() == [True] and info.nonfinite.tolist() == [False]
    assert sampler.last_divergent.tolist() == [True] and sampler.last_nonfinite.tolist() == [False]


# ------------------------------------------------------------------------------------------------
# The no-U-turn criterion on hand-made momenta (deterministic)
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("p_minus, p_plus, rho, expected", [
    ([1.0, 0.0], [1.0, 0.5], [2.0, 0.5], True),      # rho.p- = 2, rho.p+ = 2.25: still moving apart
    ([1.0, 0.0], [-1.0, 0.5], [1.0, 2.0], False),    # rho.p- = 1, rho.p+ = 0: the end has turned
    ([-1.0, 0.5], [1.0, 0.0], [1.0, 1.0], False),    # rho.p- = -0.5, rho.p+ = 1: the start has turned
    ([-1.0, 0.0], [0.0, -1.0], [1.0, 1.0], False),   # both turned
    ([0.0, 1.0], [1.0, 0.0], [1.0, 0.0], False),     # rho.p- = 0: not > 0
])
def test_no_u_turn_criterion_on_hand_made_momenta(p_minus, p_plus, rho, expected):
    assert bool(no_u_turn(np.array(p_minus), np.array(p_plus), np.array(rho))) == expected


def subtree(*momenta):
    """A subtree of consecutive points with the given momenta (positions do not enter the criterion)."""
    points = [_Point(np.zeros(2), np.array(p, dtype=float), 0.0, np.zeros(2)) for p in momenta]
    return _Subtree(points[0], points[-1], points[0], np.sum([pt.p for pt in points], axis=0), 0.0, True)


# Momenta (a1, a2) of the earlier half and (b1, b2) of the later one; the three checks by hand:
#   full:  rho = a1 + a2 + b1 + b2 with ends a1, b2;
#   left:  rho = a1 + a2 + b1 with ends a1, b1;   right: rho = a2 + b1 + b2 with ends a2, b2.
MERGE_CASES = {
    # rho = (-2, 4): a1.rho = 4, b2.rho = 12; left (0, 2): b1.(0, 2) = 0 -> U-turn; right (-4, 2): 4, 12
    "only-left-fails": ([[2, 2], [-1, 0]], [[-1, 0], [-2, 2]], False),
    # rho = (-6, -1): 21, 8; left (-5, 1): 12, 7; right (-3, 2): a2 gives 7, b2 gives -1 -> U-turn
    "only-right-fails": ([[-3, -3], [-1, 2]], [[-1, 2], [-1, -2]], False),
    # rho = (3, 0): a1.rho = -3 -> U-turn; left (1, 2): 5, 6; right (4, -3): 9, 14
    "only-full-fails": ([[-1, 3], [0, -3]], [[2, 2], [2, -2]], False),
    # rho = (2, 8): 12, 22; left (-1, 6): 14, 6; right (4, 8): 28, 28
    "none-fails": ([[-2, 2], [1, 3]], [[0, 1], [3, 2]], True),
}


@pytest.mark.parametrize("case", MERGE_CASES)
def test_u_turn_checks_across_merged_halves(case):
    first, second, expected = MERGE_CASES[case]
    traj = _Trajectory(Gaussian(np.ones(2)), 0.1, np.ones(2), 1000.0, np.random.default_rng(0))
    assert bool(traj.merge_ok(subtree(*first), subtree(*second))) == expected


def test_u_turn_criterion_uses_the_metric():
    """rho . M^{-1} p: with inv_metric (1, 10) the point p+ = (1, -0.5) has turned back against
    rho = (2, 0.5) (1 - 2.5 < 0), with the identity it has not (2 - 0.25 > 0)."""
    first, second = subtree([1.0, 1.0]), subtree([1.0, -0.5])
    identity = _Trajectory(Gaussian(np.ones(2)), 0.1, np.ones(2), 1000.0, np.random.default_rng(0))
    scaled = _Trajectory(Gaussian(np.ones(2)), 0.1, np.array([1.0, 10.0]), 1000.0, np.random.default_rng(0))
    assert bool(identity.merge_ok(first, second)) is True
    assert bool(scaled.merge_ok(first, second)) is False


# ------------------------------------------------------------------------------------------------
# Dual averaging against Hoffman & Gelman's Algorithm 5 (one step at a time, known inputs)
# ------------------------------------------------------------------------------------------------
def test_dual_averaging_formula_and_direction():
    """H_t = (1 - 1/(t + 10)) H_{t-1} + (delta - a_t)/(t + 10); log eps_t = log(10 eps_0) - sqrt(t)/0.05 H_t;
    log eps_bar_t = t^-0.75 log eps_t + (1 - t^-0.75) log eps_bar_{t-1}."""
    delta, eps0 = 0.8, 0.5
    da = DualAveraging(2, delta)
    da.restart(np.array([eps0, eps0]))
    stats = [np.array([0.6, 0.95]), np.array([0.9, 1.4]), np.array([0.1, 0.7])]   # 1.4 is clipped to 1
    h_bar, log_bar = np.zeros(2), np.zeros(2)
    for t, a in enumerate(stats, start=1):
        eps = da.update(a)
        h_bar = (1 - 1 / (t + 10)) * h_bar + (delta - np.minimum(a, 1.0)) / (t + 10)
        log_eps = np.log(10 * eps0) - np.sqrt(t) / 0.05 * h_bar
        log_bar = t**-0.75 * log_eps + (1 - t**-0.75) * log_bar
        np.testing.assert_allclose(eps, np.exp(log_eps), rtol=1e-13)
        np.testing.assert_allclose(da.final_step_size(np.ones(2)), np.exp(log_bar), rtol=1e-13)
    # direction: from the same state, an acceptance statistic above delta gives a larger step size
    low, high = DualAveraging(1, delta), DualAveraging(1, delta)
    low.restart(np.array([eps0]))
    high.restart(np.array([eps0]))
    assert high.update(np.array([0.95]))[0] > low.update(np.array([0.6]))[0]
    # and NUTS.adapt feeds it the step's acceptance statistic
    sampler = NUTS(Gaussian(np.ones(2)), step_size=eps0, n_warmup=100)
    state = sampler.init(np.zeros((2, 2)))
    state, info = sampler.step(np.random.default_rng(0), state)
    sampler.adapt(state, info, 1)
    h1 = (delta - np.minimum(info.accept_prob, 1.0)) / 11
    np.testing.assert_allclose(sampler.step_size, np.exp(np.log(10 * eps0) - h1 / 0.05), rtol=1e-13)
