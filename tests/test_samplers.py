"""Exactness of every baseline with adaptation stopped, non-finite densities, bad arguments."""
import zlib

import numpy as np
import pytest

from mcmc_lib import targets as T
from mcmc_lib.harness import run, summarise
from mcmc_lib.samplers import HMC, MALA, RWM, CholeskyAM, HaarioAM, metropolis_hastings_accept

from moments import assert_moments_match, banana_target, correlated_target, run_from_near_the_mean, scaled_target

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
