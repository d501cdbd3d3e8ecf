"""Shared pieces of the exactness tests: small targets with known moments, and the check of sample
moments against the truth within Monte Carlo error."""
import numpy as np

from mcmc_lib import targets as T

from mcmc_lib.diagnostics import ess
from mcmc_lib.harness import run


def mcse_of_mean(series):
    """Monte Carlo standard error of the mean of a (n_chains, n_draws) series, from its pooled ESS."""
    pooled_ess = float(ess(series[..., None], per_chain=False)[0])
    return np.std(series, ddof=1) / np.sqrt(pooled_ess)


def moment_z_scores(samples, mean, cov):
    """z-scores of the sample mean and every sample (co)variance entry against the truth.
    samples: (n_chains, n_draws, dim); moments centred at the true mean."""
    samples = np.asarray(samples, dtype=float)
    centred = samples - mean
    z = []
    for i in range(samples.shape[2]):
        z.append(centred[..., i].mean() / mcse_of_mean(centred[..., i]))
        for j in range(i, samples.shape[2]):
            product = centred[..., i] * centred[..., j]
            z.append((product.mean() - cov[i, j]) / mcse_of_mean(product))
    return np.array(z)


def run_from_near_the_mean(make_sampler, target, seed, n_chains, n_warmup=2000, n_samples=6000):
    """Chains of make_sampler(target) started at the true mean plus N(0, I) noise; adaptation during
    the warm-up only (mcmc_lib.harness.run)."""
    rng = np.random.default_rng(seed)
    x0 = target.mean + rng.standard_normal((n_chains, target.dim))
    return run(make_sampler(target), x0, n_warmup, n_samples, rng)


def assert_moments_match(samples, mean, cov, bound=4.5):
    z = moment_z_scores(samples, mean, cov)
    worst = int(np.argmax(np.abs(z)))
    assert np.all(np.abs(z) < bound), f"moment {worst} is {z[worst]:.2f} Monte Carlo standard errors off (all: {np.round(z, 2)})"


# Small targets with known moments, shared by the chapters' exactness tests.
def correlated_target():
    return T.Gaussian(np.array([[1.0, 0.9], [0.9, 1.0]]), mean=np.array([1.0, -2.0]), name="rho=0.9")


def scaled_target():
    return T.Gaussian(np.array([0.3, 1.0, 2.0, 0.5]) ** 2, name="diagonal, sds 0.3..2")


def banana_target():
    return T.TwistedGaussian(2, b=0.2, v=4.0, name="mild banana")
