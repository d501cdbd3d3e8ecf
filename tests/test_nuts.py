"""Tests of NUTS: exactness after warm-up, metric adaptation, hard boundaries, cost accounting, arguments.

Each test runs its own small loop (init, warm-up with adapt, sampling without adapt), so that it
does not depend on the shared run harness.
"""
import arviz as az
import numpy as np
import pytest

from mcmc_lib.samplers.nuts import NUTS, initial_step_size, metric_windows
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
