"""Tests of Hoffman & Gelman's slice NUTS (mcmc_lib/samplers/slice_nuts.py), the gsm authors' NUTS baseline:
exactness after warm-up (moments within Monte Carlo error), a hard boundary, the depth limit of NUTS.m
(one doubling past max_tree_depth), the gradient count, the U-turn criterion by hand, and bad arguments.

Each test runs its own small loop (init, warm-up with adapt, sampling without adapt), as tests/test_nuts.py.
"""
import numpy as np
import pytest

from mcmc_lib.samplers.nuts import NUTS
from mcmc_lib.samplers.slice_nuts import SliceNUTS, slice_nuts_transition, u_turn
from mcmc_lib.targets import Gaussian

from test_nuts import HalfGaussian, assert_moments, mcse, run

N_SIGMA = 4.5


def test_exact_on_correlated_2d_gaussian():
    rng = np.random.default_rng(31)
    target = Gaussian(np.array([[1.0, 0.9], [0.9, 1.0]]))
    draws, infos, _ = run(SliceNUTS(target), rng, rng.standard_normal((4, 2)), 500, 3000)
    assert_moments(draws, target.mean, np.diag(target.cov))
    cross = draws[:, :, 0] * draws[:, :, 1]
    assert abs(cross.mean() - 0.9) < N_SIGMA * mcse(cross)
    assert 0.6 < np.mean([i.accept_prob for i in infos]) < 0.97


def test_exact_on_badly_scaled_diagonal_gaussian():
    """Scales 0.1 to 3 with the identity metric: long trajectories, the U-turn and the depth limit at work."""
    rng = np.random.default_rng(32)
    sds = np.array([0.1, 0.5, 1.0, 3.0])
    target = Gaussian(sds**2)
    sampler = SliceNUTS(target)
    draws, _, _ = run(sampler, rng, rng.standard_normal((4, 4)), 500, 3000)
    assert_moments(draws, target.mean, sds**2)
    assert np.all(sampler.step_size < 0.3)            # set by the smallest scale


def test_truncated_target_stays_finite_and_is_sampled_correctly():
    rng = np.random.default_rng(33)
    sampler = SliceNUTS(HalfGaussian(2))
    draws, infos, _ = run(sampler, rng, np.abs(rng.standard_normal((3, 2))), 500, 3000)
    assert np.all(np.isfinite(draws)) and np.all(draws[:, :, 0] >= 0)
    assert any(info.nonfinite.any() for info in infos)
    assert_moments(draws, [np.sqrt(2 / np.pi), 0.0], [1.0 - 2.0 / np.pi, 1.0])


def test_same_law_as_multinomial_nuts_on_a_skewed_target():
    """Both NUTS forms sample a non-Gaussian target (a 2-d banana-like logistic posterior stand-in: a
    Gaussian is not enough to tell a biased proposal rule) to the same moments within Monte Carlo error."""
    from mcmc_lib.targets import LogisticRegression

    data = np.random.default_rng(34)
    X = np.hstack([data.standard_normal((15, 1)), np.ones((15, 1))])
    t = (data.uniform(size=15) < 0.8).astype(float)
    target = LogisticRegression(X, t, prior_var=4.0)
    moments = {}
    for name, make in (("slice", SliceNUTS), ("multinomial", NUTS)):
        rng = np.random.default_rng(35)
        draws, _, _ = run(make(target), rng, 0.1 * rng.standard_normal((4, 2)), 500, 4000)
        moments[name] = [(draws[:, :, j], draws[:, :, j] ** 2) for j in range(2)]
    for (a1, a2), (b1, b2) in zip(moments["slice"], moments["multinomial"]):
        for a, b in ((a1, b1), (a2, b2)):
            z = (a.mean() - b.mean()) / np.hypot(mcse(a), mcse(b))
            assert abs(z) < N_SIGMA, z


def test_gradient_evaluations_equal_leapfrog_steps():
    rng = np.random.default_rng(36)
    target = Gaussian(np.array([0.5, 1.0, 3.0]) ** 2)
    sampler = SliceNUTS(target, n_warmup=100)
    _, _, n_leapfrog = run(sampler, rng, rng.standard_normal((2, 3)), 100, 100)
    assert np.all(sampler.n_tuning_leapfrog > 0)
    expected = 2 + sampler.n_tuning_leapfrog.sum() + n_leapfrog    # init evaluates each chain once
    assert target.n_grad_evals == expected and target.n_logp_evals == expected


def test_depth_limit_allows_one_doubling_past_it_as_nuts_m():
    """NUTS.m breaks once depth > max_tree_depth: up to max_tree_depth + 1 doublings. A tiny step size on a
    wide target never U-turns, so every transition uses them all: 2^4 - 1 = 15 leapfrog steps for 3, and the
    warm-up limit during warm-up."""
    rng = np.random.default_rng(37)
    target = Gaussian(np.ones(3))
    sampler = SliceNUTS(target, step_size=1e-3, max_tree_depth=3, warmup_max_tree_depth=5, n_warmup=2)
    state = sampler.init(np.zeros((2, 3)))
    state, info = sampler.step(rng, state)
    assert sampler.last_n_leapfrog.tolist() == [63, 63] and sampler.last_tree_depth.tolist() == [6, 6]
    sampler.adapt(state, info, 0)
    state, info = sampler.step(rng, state)
    sampler.adapt(state, info, 1)
    sampler.step_size = np.full(2, 1e-3)        # keep it tiny after warm-up
    for _ in range(5):
        state, info = sampler.step(rng, state)
        assert sampler.last_n_leapfrog.tolist() == [15, 15] and sampler.last_tree_depth.tolist() == [4, 4]
        assert np.all(info.accepted)


def test_a_wildly_inaccurate_step_stops_the_doubling_and_stays_put():
    """A step size 1000 times the scale: the first leapfrog point is far outside the slice (Delta_max), so the
    transition stops after one step, keeps the current state and reports a divergence, not a non-finite."""
    target = Gaussian(np.full(2, 1e-4))
    x = np.full(2, 0.01)
    logp, grad = target.logp_and_grad(x)
    out = slice_nuts_transition(target, x, float(logp[0]), grad[0], 10.0, np.random.default_rng(38))
    assert out.n_leapfrog == 1 and out.depth == 1 and not out.moved
    assert out.divergent and not out.nonfinite and out.accept_stat == 0.0
    np.testing.assert_array_equal(out.x, x)


@pytest.mark.parametrize("x_minus, x_plus, r_minus, r_plus, expected", [
    ([0.0, 0.0], [1.0, 0.0], [1.0, 0.0], [1.0, 1.0], False),    # both ends still move apart
    ([0.0, 0.0], [1.0, 0.0], [1.0, 0.0], [-0.5, 1.0], True),    # the later end has turned back
    ([0.0, 0.0], [1.0, 0.0], [-0.1, 0.0], [1.0, 0.0], True),    # the earlier end has turned back
    ([0.0, 0.0], [0.0, 1.0], [1.0, 0.0], [1.0, 0.0], False),    # orthogonal: not < 0
])
def test_u_turn_criterion_by_hand(x_minus, x_plus, r_minus, r_plus, expected):
    assert u_turn(*map(np.array, (x_minus, x_plus, r_minus, r_plus))) == expected


@pytest.mark.parametrize("kwargs, name", [
    ({"max_tree_depth": 0}, "max_tree_depth"),
    ({"warmup_max_tree_depth": 0}, "warmup_max_tree_depth"),
    ({"delta_max": -1.0}, "delta_max"),
    ({"target_accept": 1.0}, "target_accept"),
    ({"step_size": -0.1}, "step_size"),
    ({"n_warmup": -5}, "n_warmup"),
])
def test_bad_arguments_raise(kwargs, name):
    with pytest.raises(ValueError, match=name):
        SliceNUTS(Gaussian(np.ones(2)), **kwargs)
