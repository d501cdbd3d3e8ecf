"""Adaptive Metropolis: Haario, Saksman & Tamminen (2001), and the Cholesky-update variant of the
gsm paper's code (Titsias & Dellaportas 2019). Both adapt only during warm-up (the harness calls
``adapt`` only then), so the sampling phase is random-walk Metropolis with a fixed covariance.
"""
from __future__ import annotations

import numpy as np
from scipy import linalg

from ..validation import (float_array, gigabytes, require_bool, require_int, require_memory, require_number,
                          require_positive, require_positive_definite, require_positive_scalar,
                          require_probability, require_str)
from .base import (ChainState, Sampler, StepInfo, accept_proposals, metropolis_hastings_accept,
                   per_chain, robbins_monro_scale)


def _random_walk_step(sampler, rng, state, chol):
    """Propose y = x + chol z (per-chain lower-triangular chol, shape (n, d, d)) and accept or reject."""
    n_chains, dim = state.x.shape
    z = rng.standard_normal((n_chains, dim))
    y = state.x + np.einsum("nij,nj->ni", chol, z)
    logp_y = sampler.target.logp(y)
    accepted, prob, nonfinite = metropolis_hastings_accept(logp_y - state.logp, rng.uniform(size=n_chains))
    return accept_proposals(state, ChainState(y, logp_y), accepted), StepInfo(accepted, prob, nonfinite)


# The dense d x d float64 matrices each sampler holds and makes at its peak, measured with tracemalloc
# (d = 600, 1 and 3 chains): HaarioAM keeps the initial factor, and per chain the proposal's factor and
# the running scatter matrix, and its adaptation makes three more per chain (the outer product, the
# covariance, its Cholesky factor); CholeskyAM keeps one factor per chain and makes two more per chain
# when it adapts.
HAARIO_MATRICES = (1, 5)            # (shared, per chain) at the peak of a run
CHOLESKY_AM_MATRICES = (0, 3)


def _dense_need(sampler: str, dim: int, n_chains: int, matrices) -> tuple[float, str]:
    """(bytes, what) of a dense-covariance sampler's d x d matrices for ``n_chains`` chains."""
    dim, n_chains = require_int(dim, "dim", minimum=1), require_int(n_chains, "n_chains", minimum=1)
    if np.shape(matrices) != (2,):
        raise ValueError(f"matrices must be (shared, per chain) counts, got {matrices!r}")
    shared, each = (require_int(count, "matrices") for count in matrices)
    count = shared + each * n_chains
    n_bytes = count * dim * dim * 8.0
    return n_bytes, (f"{sampler} at dimension {dim} with {n_chains} chain{'s' if n_chains != 1 else ''} "
                     f"({count} dense {dim} x {dim} matrices of {gigabytes(dim * dim * 8.0)} each)")


def check_memory(sampler: str, dim: int, n_chains: int, matrices, name: str) -> None:
    """Refuse a run whose dense matrices would not fit in the memory available (validation.require_memory)."""
    require_str(sampler, "sampler")
    n_bytes, what = _dense_need(sampler, dim, n_chains, matrices)
    require_memory(n_bytes, what, name)


class HaarioAM(Sampler):
    """AM (Haario et al. 2001): proposal N(x, C_t) with C_t = C_0 for t <= t0 and
    C_t = s_d (Cov(x_0, ..., x_{t-1}) + eps I), s_d = 2.38^2 / d, afterwards.

    The running mean and covariance are updated recursively (Welford), one per chain. The Cholesky
    factor of C_t is refreshed every ``update_every`` warm-up iterations (1 = Haario's scheme).
    """

    name = "AM"

    def __init__(self, target, initial_cov=None, t0=None, eps=1e-6, update_every=1):
        super().__init__(target)
        d = target.dim
        # Up front, before the first d x d matrix: what one chain's run needs (x0 is checked for all of them).
        check_memory("HaarioAM", d, 1, HAARIO_MATRICES, "target.dim")
        initial_cov = (0.1**2 / d) * np.eye(d) if initial_cov is None else float_array(initial_cov, "initial_cov")
        if initial_cov.ndim == 0:
            require_positive(initial_cov, "initial_cov")
            initial_cov = float(initial_cov) * np.eye(d)
        if initial_cov.shape != (d, d):
            raise ValueError(f"initial_cov must be a scalar or a ({d}, {d}) matrix for the {d}-d target, "
                             f"got shape {initial_cov.shape}")
        self.initial_chol = require_positive_definite(initial_cov, "initial_cov")
        self.t0 = require_int(2 * d if t0 is None else t0, "t0", minimum=1)
        self.eps = require_positive_scalar(eps, "eps")
        self.update_every = require_int(update_every, "update_every", minimum=1)
        self.scale = 2.38**2 / d

    def init(self, x0):
        state = super().init(x0)
        n, d = state.x.shape
        check_memory("HaarioAM", d, n, (0, HAARIO_MATRICES[1]), "x0")   # the initial factor exists already
        self.chol = np.broadcast_to(self.initial_chol, (n, d, d)).copy()
        self.count = 1
        self.mean = state.x.copy()
        self.scatter = np.zeros((n, d, d))   # sum of outer products of deviations (Welford's M2)
        return state

    def step(self, rng, state):
        return _random_walk_step(self, rng, state, self.chol)

    def adapt(self, state, info, iteration):
        self.count += 1
        delta = state.x - self.mean
        self.mean += delta / self.count
        self.scatter += np.einsum("ni,nj->nij", delta, state.x - self.mean)
        if self.count > self.t0 and iteration % self.update_every == 0:
            cov = self.scatter / (self.count - 1)
            d = state.x.shape[1]
            self.chol = np.linalg.cholesky(self.scale * (cov + self.eps * np.eye(d)))

    def proposal_cov(self):
        return np.einsum("nij,nkj->nik", self.chol, self.chol)

    def tuning(self):
        return {"proposal_cov": self.proposal_cov()}


class CholeskyAM(Sampler):
    """The AM variant of the gsm paper's code: y = x + sqrt(delta) L eps, and during warm-up

        mu <- mu + 0.01 (x - mu),  z = L^{-1} (x - mu),  L <- tril(L + rho_t L (z z^T - I)),
        diag(L) >= 1e-3,  delta <- delta (1 + 0.01 (a - 0.25) / 0.25),

    with rho_t = rho0 / (1 + t / T0). The code used rho0 = 5e-4 and T0 = warm-up / 4 (the paper
    states 0.001 and 4000). ``diagonal=True`` keeps L diagonal, as the code did for Neal's Gaussian.
    L (z z^T - I) is formed as (L z) z^T - L, which costs O(d^2) rather than the code's O(d^3).
    """

    name = "AM (Cholesky)"

    def __init__(self, target, n_warmup, step_variance=None, rho0=5e-4, schedule_t0=None,
                 target_accept=0.25, diagonal=False, min_diag=1e-3):
        super().__init__(target)
        d = target.dim
        check_memory("CholeskyAM", d, 1, CHOLESKY_AM_MATRICES, "target.dim")
        n_warmup = require_int(n_warmup, "n_warmup", minimum=1)
        self.initial_variance = 0.1 / np.sqrt(d) if step_variance is None else step_variance
        require_positive(self.initial_variance, "step_variance")
        if np.ndim(self.initial_variance) > 1:
            raise ValueError(f"step_variance must be a scalar or one per chain (n_chains,), got shape "
                             f"{np.shape(self.initial_variance)}")
        self.rho0 = require_positive_scalar(rho0, "rho0")
        self.schedule_t0 = require_int(round(n_warmup / 4) if schedule_t0 is None else schedule_t0,
                                       "schedule_t0", minimum=1)
        self.target_accept = require_probability(target_accept, "target_accept")
        self.diagonal = require_bool(diagonal, "diagonal")
        self.min_diag = require_number(min_diag, "min_diag")
        if self.min_diag < 0:
            raise ValueError(f"min_diag must be >= 0 (the floor on diag(L)), got {min_diag!r}")

    def init(self, x0):
        state = super().init(x0)
        n, d = state.x.shape
        check_memory("CholeskyAM", d, n, CHOLESKY_AM_MATRICES, "x0")   # dense (n, d, d) even when diagonal
        self.variance = per_chain(self.initial_variance, n, "step_variance")
        self.chol = np.broadcast_to(np.eye(d), (n, d, d)).copy()
        self.mean = state.x.copy()
        return state

    def step(self, rng, state):
        return _random_walk_step(self, rng, state, np.sqrt(self.variance)[:, None, None] * self.chol)

    def adapt(self, state, info, iteration):
        rho = self.rho0 / (1.0 + iteration / self.schedule_t0)
        self.mean += 0.01 * (state.x - self.mean)
        centred = state.x - self.mean
        if self.diagonal:
            diag = np.diagonal(self.chol, axis1=1, axis2=2)
            z = centred / diag
            new_diag = np.maximum(diag + rho * diag * (z**2 - 1.0), self.min_diag)
            self.chol = np.einsum("ni,ij->nij", new_diag, np.eye(state.x.shape[1]))
        else:
            z = np.stack([linalg.solve_triangular(L, c, lower=True) for L, c in zip(self.chol, centred)])
            lz = np.einsum("nij,nj->ni", self.chol, z)
            self.chol = np.tril(self.chol + rho * (np.einsum("ni,nj->nij", lz, z) - self.chol))
            idx = np.arange(state.x.shape[1])
            self.chol[:, idx, idx] = np.maximum(self.chol[:, idx, idx], self.min_diag)
        self.variance = robbins_monro_scale(self.variance, info.accepted, self.target_accept)

    def proposal_cov(self):
        return self.variance[:, None, None] * np.einsum("nij,nkj->nik", self.chol, self.chol)

    def tuning(self):
        return {"step_variance": self.variance.copy(), "proposal_cov": self.proposal_cov()}
