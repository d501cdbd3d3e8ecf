"""Random-walk Metropolis, MALA and HMC, vectorised over chains.

Each has one step size per chain, tuned during warm-up by the gsm paper's code's multiplicative
Robbins-Monro rule toward a target acceptance rate (RWM 0.234, MALA 0.574, HMC 0.8 by default;
the chapters set the rates their paper used). After warm-up the step sizes are frozen.
"""
from __future__ import annotations

import numpy as np

from ..targets import Target
from ..validation import (float_array, require_int, require_positive, require_positive_scalar,
                          require_probability, require_rng,
                          require_target, wrong_type)
from .base import (ChainState, Sampler, StepInfo, accept_proposals, finite_rows,
                   metropolis_hastings_accept, per_chain, robbins_monro_scale)


class _StepSizeSampler(Sampler):
    """Shared parts: a per-chain step size and its warm-up adaptation."""

    default_target_accept = 0.234

    def __init__(self, target, step_size, target_accept=None, adapt_rate=0.01):
        super().__init__(target)
        require_positive(step_size, "step_size")
        if np.ndim(step_size) > 1:
            raise ValueError(f"step_size must be a scalar or one per chain (n_chains,), got shape {np.shape(step_size)}")
        require_positive(adapt_rate, "adapt_rate")
        if np.ndim(adapt_rate) != 0:
            raise ValueError(f"adapt_rate must be a scalar, got shape {np.shape(adapt_rate)}")
        self.initial_step_size = step_size
        self.target_accept = require_probability(
            self.default_target_accept if target_accept is None else target_accept, "target_accept")
        self.adapt_rate = float(adapt_rate)
        self.step_size = None

    def init(self, x0):
        state = super().init(x0)
        self.step_size = per_chain(self.initial_step_size, state.x.shape[0], "step_size")
        return state

    def adapt(self, state, info, iteration):
        # The rule scales the proposal variance h^2; the step size is its square root.
        variance = robbins_monro_scale(self.step_size**2, info.accepted, self.target_accept, self.adapt_rate)
        self.step_size = np.sqrt(variance)

    def tuning(self):
        return {"step_size": self.step_size.copy()}


class RWM(_StepSizeSampler):
    """Random-walk Metropolis: y = x + h eps, eps ~ N(0, I); accept with prob min(1, pi(y)/pi(x))."""

    name = "RWM"
    uses_gradient = False

    def step(self, rng, state):
        y, logp_y = rwm_proposal(rng, self.target, state.x, self.step_size)
        accepted, prob, nonfinite = metropolis_hastings_accept(logp_y - state.logp, rng.uniform(size=len(y)))
        new_state = accept_proposals(state, ChainState(y, logp_y), accepted)
        return new_state, StepInfo(accepted, prob, nonfinite)


def _check_step_arguments(rng, target, x, step_size, x_name="x"):
    """The checks of the proposal helpers (a slow path: the samplers' own arguments pass the fast one)."""
    require_rng(rng)
    require_target(target)
    x = float_array(x, x_name)
    if x.ndim != 2 or x.shape[1] != target.dim:
        raise ValueError(f"{x_name} must have shape (n_chains, {target.dim}), got {x.shape}")
    step_size = float_array(step_size, "step_size")
    if step_size.shape != (x.shape[0],):
        raise ValueError(f"step_size must have shape ({x.shape[0]},) (one per chain), got {step_size.shape}")
    return x, step_size


def _fast(rng, target, x, step_size) -> bool:
    """Whether the proposal helpers' arguments are what the samplers pass (then no further check)."""
    return (type(rng) is np.random.Generator and isinstance(target, Target) and type(x) is np.ndarray
            and type(step_size) is np.ndarray and x.ndim == 2 and step_size.shape == x.shape[:1])


def rwm_proposal(rng, target, x, step_size):
    """The random-walk proposal y = x + h eps, eps ~ N(0, I), per-chain h (n_chains,); returns
    (y, log pi(y)). The log Hastings ratio is log pi(y) - log pi(x): the proposal is symmetric."""
    if not _fast(rng, target, x, step_size):
        x, step_size = _check_step_arguments(rng, target, x, step_size)
    y = x + step_size[:, None] * rng.standard_normal(x.shape)
    return y, target.logp(y)


def mala_log_proposal(to_x, from_x, from_grad, step_size):
    """log q(to | from) up to a constant, for the MALA proposal N(from + h^2/2 grad, h^2 I)."""
    try:
        shape = to_x.shape
        fast = (len(shape) == 2 and from_x.shape == shape and from_grad.shape == shape
                and step_size.shape == shape[:1])
    except AttributeError:
        fast = False
    if not fast:
        to_x, from_x, from_grad = (float_array(a, n) for a, n in ((to_x, "to_x"), (from_x, "from_x"),
                                                                   (from_grad, "from_grad")))
        step_size = float_array(step_size, "step_size")
        if to_x.ndim != 2 or not to_x.shape == from_x.shape == from_grad.shape:
            raise ValueError(f"to_x, from_x and from_grad must have one shape (n_chains, dim), got {to_x.shape}, "
                             f"{from_x.shape} and {from_grad.shape}")
        if step_size.shape != to_x.shape[:1]:
            raise ValueError(f"step_size must have shape ({to_x.shape[0]},) (one per chain), got {step_size.shape}")
    residual = to_x - from_x - 0.5 * step_size[:, None] ** 2 * from_grad
    return -0.5 * np.einsum("ij,ij->i", residual, residual) / step_size**2


class MALA(_StepSizeSampler):
    """Metropolis-adjusted Langevin: y = x + (h^2/2) grad log pi(x) + h eps, with the Hastings ratio
    log pi(y) - log pi(x) + log q(x|y) - log q(y|x)."""

    name = "MALA"
    uses_gradient = True
    default_target_accept = 0.574

    def step(self, rng, state):
        y, logp_y, grad_y, log_ratio = mala_proposal(rng, self.target, state, self.step_size)
        accepted, prob, nonfinite = metropolis_hastings_accept(log_ratio, rng.uniform(size=len(y)))
        new_state = accept_proposals(state, ChainState(y, logp_y, grad_y), accepted)
        return new_state, StepInfo(accepted, prob, nonfinite)


def mala_proposal(rng, target, state, step_size):
    """The MALA proposal y = x + (h^2/2) grad log pi(x) + h eps from state (x, log pi, grad), per-chain h;
    returns (y, log pi(y), grad log pi(y), log Hastings ratio), the ratio NaN (a rejection) where
    log pi(y) or its gradient is not finite."""
    if not isinstance(state, tuple) or getattr(state, "grad", None) is None:
        raise wrong_type("state", "a ChainState with its gradient (x, logp, grad)", state)
    if not _fast(rng, target, state.x, step_size):
        step_size = _check_step_arguments(rng, target, state.x, step_size, "state.x")[1]
    h = step_size
    noise = rng.standard_normal(state.x.shape)
    y = state.x + 0.5 * h[:, None] ** 2 * state.grad + h[:, None] * noise
    logp_y, grad_y = target.logp_and_grad(y)
    # log q(y | x) = -|noise|^2 / 2 exactly (y - mean = h noise), which saves recomputing it.
    log_ratio = (logp_y - state.logp
                 + mala_log_proposal(state.x, y, grad_y, h)
                 + 0.5 * np.einsum("ij,ij->i", noise, noise))
    return y, logp_y, grad_y, np.where(finite_rows(logp_y, grad_y), log_ratio, np.nan)


def leapfrog(target, x, p, grad, step_size, n_steps):
    """n_steps leapfrog steps of Hamiltonian dynamics with H = -log pi(x) + |p|^2/2 (identity mass),
    per-chain step sizes (n_chains,). Returns (x, p, logp, grad) at the end of the trajectory.
    The gradient at the start is reused, so a trajectory costs n_steps gradient evaluations (and one
    of the log density, at the end)."""
    if not (type(x) is np.ndarray and type(p) is np.ndarray and type(grad) is np.ndarray and type(step_size) is
            np.ndarray and x.ndim == 2 and x.shape == p.shape == grad.shape and step_size.shape == x.shape[:1]
            and type(n_steps) is int and n_steps >= 1 and isinstance(target, Target)):
        x, p, grad, step_size, n_steps = _check_leapfrog(target, x, p, grad, step_size, n_steps)
    h = step_size[:, None]
    p = p + 0.5 * h * grad          # half kick; new arrays, so the caller's p and x stay as they were
    x = x + h * p                   # drift
    if n_steps > 1:
        # On cheap targets NumPy's per-call overhead is the cost (about 0.7 us a call at d = 100, one
        # chain), so the inner steps make as few calls as they can: they carry the scaled momentum
        # s = h p, so that a full kick and a drift are s += h^2 grad and x += s (three calls, in place
        # through one scratch array), and they take the gradient without the per-call input check.
        gradient = _inner_gradient(target)
        h_squared = h * h
        scaled_momentum = h * p
        scratch = np.empty_like(x)
        for _ in range(n_steps - 1):
            scaled_momentum += np.multiply(h_squared, gradient(x), out=scratch)     # two half kicks
            x += scaled_momentum                                                   # drift
        p = scaled_momentum / h
    logp, grad = target.logp_and_grad(x)            # the log density at the end point only
    p += 0.5 * h * grad                             # half kick
    return x, p, logp, grad


def _check_leapfrog(target, x, p, grad, step_size, n_steps):
    """``leapfrog``'s arguments checked, as float arrays and an int (its slow path)."""
    require_target(target)
    n_steps = require_int(n_steps, "n_steps", minimum=1)
    x, p, grad = (float_array(a, n) for a, n in ((x, "x"), (p, "p"), (grad, "grad")))
    if x.ndim != 2 or x.shape[1] != target.dim or not x.shape == p.shape == grad.shape:
        raise ValueError(f"x, p and grad must have one shape (n_chains, {target.dim}), got {x.shape}, {p.shape} "
                         f"and {grad.shape}")
    step_size = float_array(step_size, "step_size")
    if step_size.shape != x.shape[:1]:
        raise ValueError(f"step_size must have shape ({x.shape[0]},) (one per chain), got {step_size.shape}")
    return x, p, grad, step_size, n_steps


def _inner_gradient(target):
    """The gradient function for the leapfrog's inner steps.

    A target that computes its gradient through ``Target.grad_logp`` gets its ``_grad`` with the same
    count and output-shape check but without converting and checking the input, which the loop's own
    float (n_chains, dim) array does not need and which costs as much as a 100-d diagonal Gaussian's
    gradient itself. A target with its own ``grad_logp`` (stochastic or surrogate gradients) keeps it.
    """
    if type(target).grad_logp is not Target.grad_logp:
        return target.grad_logp

    def gradient(x):
        target.n_grad_evals += x.shape[0]
        value = target._grad(x)
        return value if np.shape(value) == x.shape else target._checked_grad(value, x.shape[0])
    return gradient


def gamma_jitter(rng, n_chains, shape):
    """Neal's (2020) step-size randomisation: multiply by 1/sqrt(G), G ~ Gamma(shape, mean 1)."""
    if type(rng) is not np.random.Generator or type(n_chains) is not int or type(shape) is not float:
        require_rng(rng)
        require_int(n_chains, "n_chains", minimum=1)
        require_positive(shape, "shape")
        if np.ndim(shape) != 0:
            raise ValueError(f"shape must be a scalar, got shape {np.shape(shape)}")
    return 1.0 / np.sqrt(rng.gamma(shape, 1.0 / shape, size=n_chains))


class HMC(_StepSizeSampler):
    """Hamiltonian Monte Carlo with identity mass matrix and a fixed number of leapfrog steps.

    Momentum p ~ N(0, I) is drawn afresh each iteration; the proposal (x*, p*) at the end of the
    trajectory is accepted with prob min(1, exp(H(x, p) - H(x*, p*))). With ``jitter_shape`` set,
    each trajectory's step size is multiplied by 1/sqrt(Gamma(shape, mean 1)), as in Neal (2020).
    """

    name = "HMC"
    uses_gradient = True
    default_target_accept = 0.8

    def __init__(self, target, step_size, n_leapfrog, target_accept=None, adapt_rate=0.01,
                 jitter_shape=None):
        super().__init__(target, step_size, target_accept, adapt_rate)
        self.n_leapfrog = require_int(n_leapfrog, "n_leapfrog", minimum=1)
        self.jitter_shape = None if jitter_shape is None else require_positive_scalar(jitter_shape, "jitter_shape")
        self.name = f"HMC-{self.n_leapfrog}"

    def step(self, rng, state):
        n_chains, dim = state.x.shape
        p0 = rng.standard_normal((n_chains, dim))
        h = self.step_size
        if self.jitter_shape is not None:
            h = h * gamma_jitter(rng, n_chains, self.jitter_shape)
        with np.errstate(over="ignore", invalid="ignore"):
            x, p, logp_y, grad_y = leapfrog(self.target, state.x, p0, state.grad, h, self.n_leapfrog)
            # A non-finite log density or end-point gradient (the last half kick carries it into p)
            # makes the log ratio non-finite, which the accept step rejects and counts.
            log_ratio = logp_y - state.logp - 0.5 * (np.vecdot(p, p) - np.vecdot(p0, p0))
        accepted, prob, nonfinite = metropolis_hastings_accept(log_ratio, rng.uniform(size=n_chains))
        new_state = accept_proposals(state, ChainState(x, logp_y, grad_y), accepted)
        return new_state, StepInfo(accepted, prob, nonfinite)
