"""Reference posterior moments for targets without a closed form, by importance sampling.

For a smooth unimodal posterior in modest dimension (logistic regression with d up to ~30), the
Laplace approximation N(w*, H^{-1}) at the mode w* is close to the posterior. A multivariate t
with few degrees of freedom centred there has heavier tails than the posterior, so self-normalised
importance sampling from it gives the posterior mean and covariance with a small, computable
Monte Carlo error, independently of any MCMC sampler. The book uses these as the truth against
which samplers are checked.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import linalg, optimize, special

from .validation import float_array, require_int, require_positive_scalar, require_rng, require_target


@dataclass
class ReferenceMoments:
    mean: np.ndarray          # (d,)
    cov: np.ndarray           # (d, d)
    mean_se: np.ndarray       # Monte Carlo standard error of each mean
    var_se: np.ndarray        # Monte Carlo standard error of each variance
    ess: float                # importance-sampling effective sample size (sum w)^2 / sum w^2
    mode: np.ndarray
    n_draws: int


def find_mode(target, x0=None):
    """The posterior mode by BFGS on -log pi (the gradient from the target), gtol 1e-9."""
    require_target(target)
    x0 = np.zeros(target.dim) if x0 is None else float_array(x0, "x0")
    if x0.shape != (target.dim,):
        raise ValueError(f"x0 must have shape ({target.dim},), got {x0.shape}")
    result = optimize.minimize(lambda w: -target.logp(w)[0], x0, jac=lambda w: -target.grad_logp(w)[0],
                               method="BFGS", options={"gtol": 1e-9, "maxiter": 10_000})
    return result.x


def numerical_hessian(target, x, step=1e-5):
    """Central differences of the analytic gradient, symmetrised."""
    require_target(target)
    x = float_array(x, "x")
    if x.shape != (target.dim,):
        raise ValueError(f"x must have shape ({target.dim},), got {x.shape}")
    require_positive_scalar(step, "step")
    d = target.dim
    points = np.concatenate([x + step * np.eye(d), x - step * np.eye(d)])
    grads = target.grad_logp(points)
    hessian = (grads[:d] - grads[d:]) / (2 * step)
    return 0.5 * (hessian + hessian.T)


def importance_moments(target, n_draws: int, rng, dof: float = 5.0, batch: int = 20_000) -> ReferenceMoments:
    """Posterior mean and covariance by self-normalised importance sampling from a multivariate t
    (``dof`` degrees of freedom) centred at the mode with the Laplace covariance."""
    require_target(target)
    require_rng(rng)
    n_draws = require_int(n_draws, "n_draws", minimum=100)
    require_positive_scalar(dof, "dof")
    batch = require_int(batch, "batch", minimum=1)
    mode = find_mode(target)
    hessian = target.hessian(mode)[0] if hasattr(target, "hessian") and callable(target.hessian) else None
    if hessian is None or np.ndim(hessian) != 2:
        hessian = numerical_hessian(target, mode)
    chol = linalg.cholesky(linalg.inv(-hessian), lower=True)
    d = target.dim
    draws, log_w = [], []
    for start in range(0, n_draws, batch):
        m = min(batch, n_draws - start)
        z = rng.standard_normal((m, d))
        scale = np.sqrt(dof / rng.chisquare(dof, size=m))
        x = mode + scale[:, None] * (z @ chol.T)
        # log density of the t proposal, up to its constant (which cancels in self-normalisation)
        quad = np.sum(z**2, axis=1) * scale**2
        log_q = -0.5 * (dof + d) * np.log1p(quad / dof)
        draws.append(x)
        log_w.append(target.logp(x) - log_q)
    x = np.concatenate(draws)
    log_w = np.concatenate(log_w)
    w = np.exp(log_w - special.logsumexp(log_w))
    mean = w @ x
    centred = x - mean
    cov = (w[:, None] * centred).T @ centred
    # Delta-method standard errors of self-normalised estimators: sqrt(sum w_k^2 (f_k - E f)^2).
    mean_se = np.sqrt(w**2 @ centred**2)
    sq = centred**2
    var_se = np.sqrt(w**2 @ (sq - np.diag(cov)) ** 2)
    return ReferenceMoments(mean, cov, mean_se, var_se, float(1.0 / np.sum(w**2)), mode, n_draws)
