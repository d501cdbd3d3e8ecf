"""Generated from book/compare.md by `python -m mcmc_lib.literate export`.

Do not edit: change the chapter's cells tagged `export` and regenerate.
"""
import numpy as np

from mcmc_lib.methods.gsm import matvec, rmatvec
from mcmc_lib.targets import Target
from mcmc_lib.validation import as_batch


class LearnedCoordinates(Target):
    """The target in the coordinates z of eq. (eq-cmp-coordinates): x = L_c z for chain c, one
    invertible matrix L_c per chain. log pi_z(z) = log pi(L_c z) (the constant Jacobian dropped) and
    grad_z = L_c^T grad log pi(L_c z). Row c of every batch is chain c, so a batch must hold one row per
    chain, in order: the samplers that run on it (random-walk Metropolis, MALA, persistent Langevin, with
    either decision) evaluate whole batches."""

    def __init__(self, target, factors):
        if not isinstance(target, Target):
            raise TypeError(f"target must be a mcmc_lib Target, got {type(target).__name__}")
        factors = np.array(factors, dtype=float)
        if factors.ndim != 3 or factors.shape[1:] != (target.dim, target.dim):
            raise ValueError(f"factors must have shape (n_chains, {target.dim}, {target.dim}), one matrix per "
                             f"chain, got {factors.shape}")
        if not np.all(np.isfinite(factors)):
            raise ValueError("factors must be finite")
        sign, log_det = np.linalg.slogdet(factors)
        if np.any(sign == 0) or np.any(~np.isfinite(log_det)):
            raise ValueError(f"factors must be invertible: chains {np.flatnonzero(sign == 0).tolist()} are singular")
        super().__init__(target.dim)
        self.target, self.factors = target, factors
        self.name = f"{target.name} in learned coordinates"

    @property
    def n_chains(self) -> int:
        return self.factors.shape[0]

    def to_x(self, z):
        """x = L_c z, row by row (z: one row per chain)."""
        return matvec(self.factors, self._rows(z, "z"))

    def to_z(self, x):
        """z = L_c^{-1} x, row by row (x: one row per chain): the starting states of a run."""
        return np.linalg.solve(self.factors, self._rows(x, "x")[:, :, None])[:, :, 0]

    def _rows(self, values, name):
        values = as_batch(values, self.dim, name)
        if values.shape[0] != self.n_chains:
            raise ValueError(f"{name} must hold one row per chain ({self.n_chains} chains, in order), got "
                             f"{values.shape[0]} rows")
        return values

    def _logp(self, z):
        return self.target.logp(self.to_x(z))

    def _grad(self, z):
        return rmatvec(self.factors, self.target.grad_logp(self.to_x(z)))

    def _logp_and_grad(self, z):
        logp, grad = self.target.logp_and_grad(self.to_x(z))
        return logp, rmatvec(self.factors, grad)


def learned_factors(sampler) -> np.ndarray:
    """The linear map per chain that an adaptive sampler's warm-up learned, shape (n_chains, d, d):
    L for gadRWM and gadMALAf; for M-CMA and M-GaA the Cholesky factor of their proposal covariance,
    sigma^2 times the shape (the same map up to an orthogonal rotation, which leaves a spherical
    random walk's proposal unchanged)."""
    unfitted = ValueError(
        f"sampler {getattr(sampler, 'name', sampler)!r} has learned no linear map: run its warm-up first (a "
        "gadRWM, gadMALAf, M-CMA or M-GaA sampler after mcmc_lib.harness.run)")
    if hasattr(sampler, "L"):                       # gadRWM, gadMALAf: None until init
        if sampler.L is None:
            raise unfitted
        return np.array(sampler.L)
    if getattr(sampler, "sigma", None) is None or not hasattr(sampler, "proposal_cov"):
        raise unfitted
    covariance = np.asarray(sampler.proposal_cov(), dtype=float)
    if covariance.ndim != 3:
        raise ValueError(f"sampler {sampler.name!r} holds one proposal for all chains, not one per chain")
    return np.linalg.cholesky(covariance)
