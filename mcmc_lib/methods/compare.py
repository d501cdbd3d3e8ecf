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


from scipy import linalg

from mcmc_lib.methods.kmc import (FiniteSurrogate, OnlineFiniteEstimator, RandomFeatures, cv_objective_finite,
                                  finite_b_C, select_sigma_lambda)
from mcmc_lib.validation import float_array, require_int, wrong_type


def online_estimator_from_history(features: RandomFeatures, X, lam: float) -> OnlineFiniteEstimator:
    """The online KMC-finite estimator after it has taken the points X (n, d) one by one, in one batch:
    eq. (eq-cmp-finite-history), O(n d m^2) like the online updates it stands for."""
    if not isinstance(features, RandomFeatures):
        raise wrong_type("features", "RandomFeatures (mcmc_lib.methods.kmc)", features)
    estimator = OnlineFiniteEstimator(features, lam)
    X = float_array(X, "X")
    if X.ndim != 2 or X.shape[1] != features.dim or len(X) == 0:
        raise ValueError(f"X must hold at least one point of dimension {features.dim}, got shape {X.shape}")
    n = len(X)
    b, _ = finite_b_C(features, X)
    A = lam * np.eye(features.m)
    if n > 1:
        A += (n - 1) * finite_b_C(features, X[1:])[1]
    A /= n
    estimator.L = np.linalg.cholesky(A)
    estimator.b, estimator.n = b, n
    estimator.theta = linalg.cho_solve((estimator.L, True), b)
    return estimator


class HistoryFiniteSurrogate(FiniteSurrogate):
    """KMC finite learned from each chain's history: gradient 0 until ``learn`` (called by KMC at its
    ``learn_at`` iterations) chooses (sigma, lambda) by 5-fold cross-validation of the finite objective on
    up to ``learn_size`` distinct history points (grid in log sigma x log lambda, then a few Nelder-Mead
    steps), draws ``n_features`` random Fourier features of that sigma and sets the online estimator from
    the whole history (eq. eq-cmp-finite-history); ``adapt`` then updates it online."""

    def __init__(self, n_chains: int, dim: int, n_features: int, log_sigma_grid, log_lambda_grid,
                 learn_size: int = 200, n_nelder_mead: int = 6):
        n_chains = require_int(n_chains, "n_chains", minimum=1)
        self.dim = require_int(dim, "dim", minimum=1)
        self.m = require_int(n_features, "n_features", minimum=1)
        self.grid = (np.asarray(log_sigma_grid, dtype=float), np.asarray(log_lambda_grid, dtype=float))
        if any(g.ndim != 1 for g in self.grid):
            raise ValueError(f"log_sigma_grid and log_lambda_grid must be one-dimensional grids, got shapes "
                             f"{self.grid[0].shape} and {self.grid[1].shape}")
        if self.grid[0].size < 1 or self.grid[1].size < 1 or not all(np.all(np.isfinite(g)) for g in self.grid):
            raise ValueError("log_sigma_grid and log_lambda_grid must be non-empty and finite")
        self.learn_size = require_int(learn_size, "learn_size", minimum=10)
        self.n_nelder_mead = require_int(n_nelder_mead, "n_nelder_mead", minimum=0)
        self.features, self.online = [None] * n_chains, [None] * n_chains
        self.sigma, self.lam = np.full(n_chains, np.nan), np.full(n_chains, np.nan)
        self.omega = np.zeros((n_chains, self.dim, self.m))
        self.phases = np.zeros((n_chains, self.m))
        self.theta = np.zeros((n_chains, self.m))

    def learn(self, c, history, rng):
        unique = np.unique(history, axis=0)       # repeats after rejections would leak across the folds
        if len(unique) < 20:
            return
        data = unique[rng.choice(len(unique), size=min(self.learn_size, len(unique)), replace=False)]
        seed = int(rng.integers(2**31))
        m_cv = min(self.m, self.learn_size)

        def objective(sigma, lam):
            features = RandomFeatures.gaussian(np.random.default_rng(seed), self.dim, m_cv, sigma)
            return cv_objective_finite(data, features, lam, np.random.default_rng(seed + 1))

        sigma, lam, _ = select_sigma_lambda(objective, *self.grid, n_nelder_mead=self.n_nelder_mead)
        features = RandomFeatures.gaussian(rng, self.dim, self.m, sigma)
        self.features[c], self.sigma[c], self.lam[c] = features, sigma, lam
        self.omega[c], self.phases[c] = features.omega, features.phases
        self.online[c] = online_estimator_from_history(features, history, lam)
        self.theta[c] = self.online[c].theta

    def adapt(self, c, history, x, rng):
        if self.online[c] is not None:
            self.theta[c] = self.online[c].update(x).theta


from mcmc_lib.methods.kmc import KMC
from mcmc_lib.methods.nonrev_u import NonrevState, NonreversibleUSampler
from mcmc_lib.samplers.base import StepInfo


class NonrevKMC(NonreversibleUSampler):
    """The proposals of ``kmc``, a KMC sampler, decided by non-reversible u with drift ``delta`` (delta=None:
    u drawn afresh, KMC's own decision). Nothing adapts: after KMC's warm-up its learned surrogate and
    step-size ranges propose as they are, and its chains are this sampler's chains."""

    uses_gradient = False

    def __init__(self, kmc, delta=None, noise=0.0):
        if not isinstance(kmc, KMC):
            raise wrong_type("kmc", "a KMC sampler (mcmc_lib.methods.kmc.KMC)", kmc)
        super().__init__(kmc.target, None, delta, noise)        # KMC draws each step size from its range
        self.kmc = kmc
        self.name = kmc.name if delta is None else f"{kmc.name} (non-reversible u)"

    def init(self, x0, v0=0.5, p0=None):
        """Start from x0 with v = v0. A KMC sampler already started (warmed up) keeps its step-size ranges
        and must have one chain per row of x0; one never started is started here."""
        if getattr(self.kmc, "log_range", None) is None:
            self.kmc.init(x0)
        n_rows = np.shape(x0)[0] if np.ndim(x0) == 2 else 1
        if len(self.kmc.log_range) != n_rows:
            raise ValueError(f"x0 must have one row per chain of the KMC sampler ({len(self.kmc.log_range)}), "
                             f"got {n_rows}")
        return super().init(x0, v0)

    def step(self, rng, state):
        y, logp_y, log_ratio = self.kmc.propose(rng, state)
        v, accepted, prob, nonfinite = self.decide(rng, state.v, log_ratio)
        new = NonrevState(np.where(accepted[:, None], y, state.x), np.where(accepted, logp_y, state.logp), None, v)
        return new, StepInfo(accepted, prob, nonfinite)

    def tuning(self):
        return {"step_size_range": np.exp(self.kmc.log_range), "delta": self.delta.copy(), "noise": self.noise.copy()}
