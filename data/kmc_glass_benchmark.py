"""Benchmark samples of the GP-classification posterior on Glass for book/kmc.md.

Builds data/kmc_glass_benchmark.npz: independent random-walk Metropolis chains on the
pseudo-marginal posterior (mcmc_lib.methods.kmc.GPClassificationPosterior, n_imp = 100, the same
target the chapter samples). A pseudo-marginal chain is exact, so these are draws from the true
posterior. Run from the repository root:

    OMP_NUM_THREADS=1 .venv/bin/python data/kmc_glass_benchmark.py

Protocol (a scaled-down version of the paper's "hand-tuned MH chains, 500,000 iterations, 100,000
burn-in, every 1000th kept"):
1. pilot: N_CHAINS chains of PILOT iterations of RWM with isotropic steps, the scale tuned by a
   Robbins-Monro rule toward acceptance 0.234, started at theta = 0 plus N(0, 0.25 I) jitter;
2. main: the same chains continue for MAIN iterations of RWM with the fixed proposal covariance
   2.38^2 / d times the pooled covariance of the pilot's second half;
3. the first BURN main iterations are discarded and every THIN-th state is kept.
"""
from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from mcmc_lib.diagnostics import ess
from mcmc_lib.methods.kmc import GPClassificationPosterior, glass_gp_data
from mcmc_lib.samplers.base import metropolis_hastings_accept

SEED = 20150608
N_CHAINS, PILOT, MAIN, BURN, THIN = 20, 1000, 5000, 1000, 25
OUT = Path(__file__).resolve().parent / "kmc_glass_benchmark.npz"


def rwm(target, x, logp, chol, n_iter, rng, scale=None, adapt=False):
    C, d = x.shape
    out = np.empty((C, n_iter, d))
    acc = np.zeros(C)
    for t in range(n_iter):
        step = rng.standard_normal((C, d)) @ chol.T
        y = x + (step if scale is None else scale[:, None] * step)
        logp_y = target.logp(y)
        ok, _, _ = metropolis_hastings_accept(logp_y - logp, rng.uniform(size=C))
        x = np.where(ok[:, None], y, x)
        logp = np.where(ok, logp_y, logp)
        acc += ok
        if adapt:
            scale = scale * np.exp((ok - 0.234) / np.sqrt(t + 1.0))
        out[:, t] = x
    return x, logp, out, acc / n_iter, scale


def main():
    start = time.time()
    rng = np.random.default_rng([SEED, 99])
    X, y = glass_gp_data()
    target = GPClassificationPosterior(X, y, np.random.default_rng([SEED, 98]))
    d = target.dim
    x = 0.5 * rng.standard_normal((N_CHAINS, d))
    logp = target.logp(x)
    x, logp, pilot, pilot_acc, scale = rwm(target, x, logp, np.eye(d), PILOT, rng, np.full(N_CHAINS, 0.5), True)
    cov = np.cov(pilot[:, PILOT // 2:].reshape(-1, d).T)
    chol = np.linalg.cholesky(2.38**2 / d * cov)
    x, logp, chains, acc, _ = rwm(target, x, logp, chol, MAIN, rng)
    kept = chains[:, BURN::THIN]
    min_ess = ess(chains[:, BURN:]).min()
    # Gelman-Rubin R-hat per coordinate over the kept halves of the chains
    post = chains[:, BURN:]
    W = post.var(axis=1, ddof=1).mean(axis=0)
    B = post.shape[1] * post.mean(axis=1).var(axis=0, ddof=1)
    rhat = np.sqrt(((post.shape[1] - 1) / post.shape[1] * W + B / post.shape[1]) / W)
    np.savez_compressed(OUT, samples=kept.reshape(-1, d), chains=kept, pilot_accept=pilot_acc,
                        accept=acc, min_ess_per_chain=ess(post).min(axis=1), rhat=rhat,
                        protocol=np.array([N_CHAINS, PILOT, MAIN, BURN, THIN, SEED]),
                        seconds=time.time() - start)
    print(f"{kept.shape[0] * kept.shape[1]} samples; acceptance {acc.mean():.3f}; min ESS per chain "
          f"{min_ess:.0f}; max R-hat {rhat.max():.4f}; {time.time() - start:.0f} s")


if __name__ == "__main__":
    main()
