"""Generated from book/mcma.md by `python -m mcmc_lib.literate export`.

Do not edit: change the chapter's cells tagged `export` and regenerate.
"""
from __future__ import annotations

# M-CMA (the (1+1)-CMA-ES as a sampler), M-GaA (Gaussian adaptation for sampling) and the fixed-
# proposal Metropolis benchmark, vectorised over chains; book/mcma.md has the derivations.

import math

import numpy as np

from mcmc_lib.samplers.base import (ChainState, Sampler, StepInfo, accept_proposals,
                                    metropolis_hastings_accept, per_chain)
from mcmc_lib.validation import (float_array, require_int, require_positive, require_positive_definite,
                                 require_probability)


def _random_walk(sampler, rng, state, factor, scale):
    """Propose x* = x + scale * (factor @ z) per chain (factor (n, d, d), scale (n,)), decide with
    the Metropolis test. Returns (new state, StepInfo, z, step = factor @ z)."""
    n_chains, dim = state.x.shape
    z = rng.standard_normal((n_chains, dim))
    step = np.einsum("nij,nj->ni", factor, z)
    proposal = state.x + scale[:, None] * step
    logp = sampler.target.logp(proposal)
    accepted, prob, nonfinite = metropolis_hastings_accept(logp - state.logp, rng.uniform(size=n_chains))
    new_state = accept_proposals(state, ChainState(proposal, logp), accepted)
    return new_state, StepInfo(accepted, prob, nonfinite), z, step


def _square_matrix(matrix, dim, name):
    matrix = float_array(matrix, name)
    if matrix.shape != (dim, dim):
        raise ValueError(f"{name} must have shape ({dim}, {dim}), got {matrix.shape}")
    require_positive_definite(matrix, name)
    return matrix


class FixedProposalMH(Sampler):
    """Metropolis-Hastings with a fixed Gaussian random-walk proposal N(x, proposal_cov)."""

    name = "MH"

    def __init__(self, target, proposal_cov, name=None):
        super().__init__(target)
        self.proposal_cov = _square_matrix(proposal_cov, target.dim, "proposal_cov")
        self.chol = np.linalg.cholesky(self.proposal_cov)
        self.name = self.name if name is None else str(name)

    def step(self, rng, state):
        n_chains = state.x.shape[0]
        factor = np.broadcast_to(self.chol, (n_chains,) + self.chol.shape)
        new_state, info, _, _ = _random_walk(self, rng, state, factor, np.ones(n_chains))
        return new_state, info

    def tuning(self):
        return {"proposal_cov": self.proposal_cov}


ONE_FIFTH_TARGET = 2 / 11       # the (1+1)-CMA-ES target success probability p_t
OPTIMAL_SCALING_TARGET = 0.234  # Roberts, Gelman & Gilks (1997)


def cma_constants(dim, target_success=ONE_FIFTH_TARGET):
    """Default constants of the (1+1)-CMA-ES (Igel, Suttorp & Hansen 2006) in dimension ``dim``."""
    dim = require_int(dim, "dim", minimum=1)
    return {
        "target_success": require_probability(target_success, "target_success"),  # p_t
        "success_smoothing": 1 / 12,        # c_p
        "damping": 1 + dim / 2,             # D
        "path_rate": 2 / (dim + 2),         # c_c
        "cov_rate": 2 / (dim**2 + 6),       # c_cov
        "stall_threshold": 0.44,            # p_thresh
    }


def success_rule(sigma, success_rate, success, target_success, smoothing, damping):
    """The smoothed success rate and then the step size with the new rate, per chain.
    sigma, success_rate: (n_chains,); success: bool (n_chains,). Returns (sigma, success_rate)."""
    _check_success_arguments(sigma, success_rate, success, target_success, smoothing, damping)
    success_rate = (1 - smoothing) * success_rate + smoothing * success
    sigma = sigma * np.exp((success_rate - target_success) / (damping * (1 - target_success)))
    return sigma, success_rate


def cma_covariance_update(cov, path, step, success_rate, path_rate, cov_rate, stall_threshold):
    """The evolution path and the rank-one covariance update after a success, per chain.

    cov (n, d, d), path and step (n, d), step = (x* - x) / sigma the unscaled step; success_rate
    (n,) is the already updated p-bar, which selects the normal or the stall branch.
    Returns (cov, path)."""
    _check_stack(cov, {"path": path, "step": step}, {"success_rate": success_rate},
                 {"path_rate": path_rate, "cov_rate": cov_rate, "stall_threshold": stall_threshold})
    stalled = success_rate >= stall_threshold
    variance_kept = path_rate * (2 - path_rate)
    path = (1 - path_rate) * path + np.where(stalled[:, None], 0.0, np.sqrt(variance_kept) * step)
    rank_one = np.einsum("ni,nj->nij", path, path)
    stall_term = np.where(stalled, variance_kept, 0.0)[:, None, None] * cov
    return (1 - cov_rate) * cov + cov_rate * (rank_one + stall_term), path


def normalise_determinant(cov, path, sigma):
    """(sigma, C, p_c) -> (s sigma, C / s^2, p_c / s) with s = det(C)^(1/2d), per chain, so that
    det C = 1 and its Cholesky factor Q has det Q = 1. The proposal sigma Q z is unchanged.
    cov (n, d, d), path (n, d), sigma (n,). Returns (cov, chol, path, sigma)."""
    _check_stack(cov, {"path": path}, {"sigma": sigma}, {})
    chol = np.linalg.cholesky(cov)
    dim = cov.shape[-1]
    s = np.exp(np.log(np.diagonal(chol, axis1=-2, axis2=-1)).sum(axis=-1) / dim)
    return cov / s[:, None, None] ** 2, chol / s[:, None, None], path / s[:, None], sigma * s


# Argument checks of the update functions (mcmc_lib.validation): a wrong call fails at the call, naming the
# argument, its value and what is expected. The samplers call them at every adaptation with their own arrays,
# which pass the first, cheap test; only another caller's arguments get the rest.
from mcmc_lib.validation import require_array_shape, require_number, wrong_type


def _check_stack(stack, per_row, per_chain, numbers, stack_name="cov"):
    """A stack of matrices (n, d, d), arrays ``per_row`` of shape (n, d), ``per_chain`` of shape (n,) and
    real ``numbers``."""
    if (type(stack) is np.ndarray and stack.ndim == 3
            and all(type(v) is np.ndarray and v.shape == stack.shape[:2] for v in per_row.values())
            and all(type(v) is np.ndarray and v.shape == stack.shape[:1] for v in per_chain.values())
            and all(type(v) is float for v in numbers.values())):
        return
    arr = float_array(stack, stack_name)
    if not isinstance(stack, np.ndarray) or arr.ndim != 3 or arr.shape[1] != arr.shape[2]:
        raise ValueError(f"{stack_name} must be a numpy array of one d x d matrix per chain, shape (n_chains, d, d), "
                         f"got {type(stack).__name__} of shape {arr.shape}")
    for name, value in per_row.items():
        require_array_shape(value, name, arr.shape[:2], f"n_chains x d, as {stack_name}")
    for name, value in per_chain.items():
        require_array_shape(value, name, arr.shape[:1], "one per chain")
    for name, value in numbers.items():
        require_number(value, name)


def _check_success_arguments(sigma, success_rate, success, target_success, smoothing, damping):
    if (type(sigma) is np.ndarray and sigma.ndim == 1 and type(success_rate) is np.ndarray
            and type(success) is np.ndarray and success.dtype == bool
            and sigma.shape == success_rate.shape == success.shape
            and type(target_success) is float and type(smoothing) is float and type(damping) is float):
        return
    n = np.shape(float_array(sigma, "sigma"))
    if not isinstance(sigma, np.ndarray) or len(n) != 1:
        raise ValueError(f"sigma must be a numpy array of one step size per chain, shape (n_chains,), got {n}")
    require_array_shape(success_rate, "success_rate", n, "one per chain, as sigma")
    if not isinstance(success, np.ndarray) or success.dtype != bool:
        raise wrong_type("success", "a numpy array of booleans (the accept indicators), shape (n_chains,)", success)
    if success.shape != n:
        raise ValueError(f"success must have shape (n_chains,) = {n}, as sigma, got {success.shape}")
    for name, value in (("target_success", target_success), ("smoothing", smoothing), ("damping", damping)):
        require_number(value, name)


class ConstantAdaptation(Sampler):
    """Wrap any sampler of the mcmc_lib protocol so that it adapts after every step, in warm-up and
    sampling alike (the harness's own calls to ``adapt`` are then ignored). The chain is then
    in general not pi-invariant; with a diminishing adaptation such as AM's it is still ergodic."""

    def __init__(self, sampler):
        if not isinstance(sampler, Sampler):
            raise ValueError(f"sampler must be an mcmc_lib Sampler, got {type(sampler).__name__}")
        super().__init__(sampler.target)
        self.sampler = sampler
        self.name = sampler.name
        self.uses_gradient = sampler.uses_gradient
        self.iteration = 0

    def init(self, x0):
        self.iteration = 0
        return self.sampler.init(x0)

    def step(self, rng, state):
        state, info = self.sampler.step(rng, state)
        self.iteration += 1
        self.sampler.adapt(state, info, self.iteration)
        return state, info

    def tuning(self):
        return self.sampler.tuning()


def _average_window(freeze_average, constant_adaptation):
    """None, or the adaptation iterations (first, last] over which the proposal is averaged."""
    if freeze_average is None:
        return None
    try:
        first, last = (int(v) for v in freeze_average)
    except (TypeError, ValueError):
        raise ValueError(f"freeze_average must be None or a pair (first, last) of iterations, "
                         f"got {freeze_average!r}") from None
    if not 0 <= first < last:
        raise ValueError(f"freeze_average must satisfy 0 <= first < last, got {freeze_average!r}")
    if constant_adaptation:
        raise ValueError("freeze_average needs stopped adaptation: constant_adaptation must be False")
    return first, last


class _AdaptiveRandomWalk(Sampler):
    """Shared parts of M-CMA and M-GaA: a proposal x + sigma Q z per chain, the Metropolis test, and
    where the adaptation happens (``adapt`` by default; inside ``step`` with constant_adaptation).

    ``freeze_average=(first, last)``: adapt as usual up to adaptation iteration ``last`` (the end of
    warm-up), then freeze the proposal at its average over iterations first+1..last: the geometric
    mean of the global scale det(sigma^2 C)^(1/2d) and the arithmetic mean of the shape C / det(C)^(1/d),
    renormalised to determinant 1. Later calls to ``adapt`` change nothing."""

    def __init__(self, target, initial_cov, initial_scale, constant_adaptation, freeze_average=None):
        super().__init__(target)
        dim = target.dim
        self.initial_cov = _square_matrix(np.eye(dim) if initial_cov is None else initial_cov, dim,
                                          "initial_cov")
        self.initial_scale = require_positive(initial_scale, "initial_scale")
        if np.ndim(initial_scale) > 1:
            raise ValueError(f"initial_scale must be a number or one per chain (n_chains,), got shape "
                             f"{np.shape(initial_scale)}")
        if not isinstance(constant_adaptation, (bool, np.bool_)):
            raise ValueError(f"constant_adaptation must be True or False, got {constant_adaptation!r}")
        self.constant_adaptation = bool(constant_adaptation)
        self.freeze_average = _average_window(freeze_average, self.constant_adaptation)
        self._last = None

    def step(self, rng, state):
        new_state, info, z, step = _random_walk(self, rng, state, self._factor(), self.sigma)
        self._last = (z, step)
        if self.constant_adaptation:
            self._update(info.accepted, z, step)
        return new_state, info

    def adapt(self, state, info, iteration):
        if self.constant_adaptation:
            return
        if self.freeze_average is None:
            self._update(info.accepted, *self._last)
            return
        first, last = self.freeze_average
        if iteration > last:
            return                                   # frozen at the average
        self._update(info.accepted, *self._last)
        if iteration > first:
            self._accumulate(reset=iteration == first + 1)
        if iteration == last:
            n = self._n_averaged
            shape = self._shape_sum / n
            _, shape_chol, _, _ = normalise_determinant(shape, np.zeros(shape.shape[:2]), np.ones(len(shape)))
            shape = np.einsum("nij,nkj->nik", shape_chol, shape_chol)      # det 1
            self._set_proposal(np.exp(self._log_scale_sum / n), shape, shape_chol)

    def _accumulate(self, reset):
        """Add the current proposal's log global scale and unit-determinant shape to the running sums."""
        cov = self.proposal_cov()
        shape, _, _, scale = normalise_determinant(cov, np.zeros(cov.shape[:2]), np.ones(len(cov)))
        if reset:
            self._log_scale_sum, self._shape_sum, self._n_averaged = 0.0, 0.0, 0
        self._log_scale_sum = self._log_scale_sum + np.log(scale)
        self._shape_sum = self._shape_sum + shape
        self._n_averaged += 1


class MCMA(_AdaptiveRandomWalk):
    """M-CMA: the (1+1)-CMA-ES as a sampler (Milgo et al.), vectorised over chains.

    Proposal x* = x + sigma Q z with Q = chol(C); Metropolis acceptance is the success of the
    (1+1)-CMA-ES: the success rule adapts sigma at every adaptation step toward acceptance rate
    ``target_success`` (2/11 by default; 0.234 is the optimal-scaling alternative), and on
    acceptance the evolution path and C get the rank-one update with the stall branch. With
    ``normalise=True`` det C is kept at 1 (an exact reparametrisation). Per-chain state: sigma and
    success_rate (n,), path (n, d), cov and chol (n, d, d).

    To take the adaptation apart: ``adapt_shape=False`` keeps C at the normalised C_0 (sigma only,
    as with c_cov = 0); ``adapt_scale=False`` keeps sigma at its initial value and C at det 1, so that
    only the shape adapts (p-bar is still tracked: it selects the stall branch).
    ``freeze_average=(first, last)``: see ``_AdaptiveRandomWalk``.
    """

    name = "M-CMA"

    def __init__(self, target, initial_cov=None, initial_scale=1.0, target_success=ONE_FIFTH_TARGET,
                 constant_adaptation=False, normalise=True, damping=None, success_smoothing=None,
                 path_rate=None, cov_rate=None, stall_threshold=None, adapt_scale=True, adapt_shape=True,
                 freeze_average=None):
        super().__init__(target, initial_cov, initial_scale, constant_adaptation, freeze_average)
        for key, value in (("adapt_scale", adapt_scale), ("adapt_shape", adapt_shape)):
            if not isinstance(value, (bool, np.bool_)):
                raise ValueError(f"{key} must be True or False, got {value!r}")
        if not (adapt_scale or adapt_shape):
            raise ValueError("adapt_scale and adapt_shape are both False: nothing would adapt (use FixedProposalMH)")
        self.adapt_scale, self.adapt_shape = bool(adapt_scale), bool(adapt_shape)
        self.constants = cma_constants(target.dim, target_success)
        for key, value in (("success_smoothing", success_smoothing), ("path_rate", path_rate),
                           ("cov_rate", cov_rate), ("stall_threshold", stall_threshold)):
            if value is not None:
                self.constants[key] = require_probability(value, key)
        if damping is not None:
            self.constants["damping"] = float(require_positive(damping, "damping"))
        self.normalise = bool(normalise)
        if not math.isclose(self.constants["target_success"], ONE_FIFTH_TARGET):
            self.name = f"M-CMA ({self.constants['target_success']:g})"
        if not (self.adapt_scale and self.adapt_shape):
            self.name += " (sigma only)" if self.adapt_scale else " (shape only)"

    def init(self, x0):
        state = super().init(x0)
        n_chains, dim = state.x.shape
        self.sigma = per_chain(self.initial_scale, n_chains, "initial_scale")
        self.success_rate = np.full(n_chains, self.constants["target_success"])
        self.path = np.zeros((n_chains, dim))
        self.cov = np.broadcast_to(self.initial_cov, (n_chains, dim, dim)).copy()
        self.chol = np.linalg.cholesky(self.cov)
        if self.normalise:
            self.cov, self.chol, self.path, self.sigma = normalise_determinant(self.cov, self.path, self.sigma)
        return state

    def _factor(self):
        return self.chol

    def _update(self, accepted, z, step):
        c = self.constants
        sigma, self.success_rate = success_rule(self.sigma, self.success_rate, accepted,
                                                c["target_success"], c["success_smoothing"], c["damping"])
        if self.adapt_scale:
            self.sigma = sigma
        rows = np.flatnonzero(accepted)
        if rows.size == 0 or not self.adapt_shape:
            return
        cov, path = cma_covariance_update(self.cov[rows], self.path[rows], step[rows], self.success_rate[rows],
                                          c["path_rate"], c["cov_rate"], c["stall_threshold"])
        if self.normalise or not self.adapt_scale:
            cov, chol, path, sigma = normalise_determinant(cov, path, self.sigma[rows])
            if self.adapt_scale:             # the scale moves into sigma; shape only: it is dropped
                self.sigma[rows] = sigma
        else:
            chol = np.linalg.cholesky(cov)
        self.cov[rows], self.chol[rows], self.path[rows] = cov, chol, path

    def _set_proposal(self, sigma, shape, shape_chol):
        self.sigma, self.cov, self.chol = sigma, shape, shape_chol

    def proposal_cov(self):
        return self.sigma[:, None, None] ** 2 * self.cov

    def tuning(self):
        return {"sigma": self.sigma.copy(), "success_rate": self.success_rate.copy(),
                "proposal_cov": self.proposal_cov()}


def gaa_constants(dim, hitting_probability=1 / math.e):
    """Gaussian adaptation's constants: lambda_C = beta = ln(d+1)/(d+1)^2 and the factors
    f_e = 1 + beta (1 - P), f_c = 1 - beta P around the hitting probability P (1/e)."""
    dim = require_int(dim, "dim", minimum=1)
    p = require_probability(hitting_probability, "hitting_probability")
    rate = math.log(dim + 1) / (dim + 1) ** 2
    return {"hitting_probability": p, "cov_rate": rate,
            "expansion": 1 + rate * (1 - p), "contraction": 1 - rate * p}


def gaa_shape_update(shape, z, cov_rate):
    """Q <- Q dQ / det(dQ)^(1/d) with dQ = sqrt((1 - l) I + l z z^T) in closed form, per chain.
    shape (n, d, d) with det 1, z (n, d). Returns the new shape, again with det 1."""
    _check_stack(shape, {"z": z}, {}, {"cov_rate": cov_rate}, stack_name="shape")
    dim = z.shape[1]
    norm_sq = np.maximum(np.einsum("ni,ni->n", z, z), np.finfo(float).tiny)
    across = math.sqrt(1 - cov_rate)
    along = np.sqrt(1 - cov_rate + cov_rate * norm_sq)
    unit = z / np.sqrt(norm_sq)[:, None]
    delta = across * np.eye(dim) + (along - across)[:, None, None] * np.einsum("ni,nj->nij", unit, unit)
    det_delta = across ** (dim - 1) * along
    return np.einsum("nij,njk->nik", shape, delta) / (det_delta ** (1 / dim))[:, None, None]


class MGaA(_AdaptiveRandomWalk):
    """M-GaA: Gaussian adaptation as a sampler (Mueller 2010), vectorised over chains.

    Proposal x* = x + sigma Q z with det Q = 1; sigma expands by f_e on acceptance and contracts by
    f_c on rejection (acceptance rate driven to the hitting probability P = 1/e); on acceptance
    Q <- Q sqrt((1 - l) I + l z z^T), renormalised to det Q = 1. Per-chain sigma (n,), Q (n, d, d).
    ``freeze_average=(first, last)``: see ``_AdaptiveRandomWalk``.
    """

    name = "M-GaA"

    def __init__(self, target, initial_cov=None, initial_scale=1.0, hitting_probability=1 / math.e,
                 constant_adaptation=False, freeze_average=None):
        super().__init__(target, initial_cov, initial_scale, constant_adaptation, freeze_average)
        self.constants = gaa_constants(target.dim, hitting_probability)

    def init(self, x0):
        state = super().init(x0)
        n_chains, dim = state.x.shape
        eigenvalues, vectors = np.linalg.eigh(self.initial_cov)
        root = (vectors * np.sqrt(eigenvalues)) @ vectors.T          # symmetric square root of C_0
        volume = np.exp(np.log(eigenvalues).sum() / (2 * dim))        # det(C_0)^(1/2d)
        self.shape = np.broadcast_to(root / volume, (n_chains, dim, dim)).copy()
        self.sigma = per_chain(self.initial_scale, n_chains, "initial_scale") * volume
        return state

    def _factor(self):
        return self.shape

    def _update(self, accepted, z, step):
        c = self.constants
        self.sigma = self.sigma * np.where(accepted, c["expansion"], c["contraction"])
        rows = np.flatnonzero(accepted)
        if rows.size:
            self.shape[rows] = gaa_shape_update(self.shape[rows], z[rows], c["cov_rate"])

    def _set_proposal(self, sigma, shape, shape_chol):
        self.sigma, self.shape = sigma, shape_chol          # any square root of the shape will do

    def proposal_cov(self):
        return self.sigma[:, None, None] ** 2 * np.einsum("nij,nkj->nik", self.shape, self.shape)

    def tuning(self):
        return {"sigma": self.sigma.copy(), "proposal_cov": self.proposal_cov()}
