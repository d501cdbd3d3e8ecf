"""The sampler protocol and the Metropolis-Hastings accept step with an explicit uniform u.

A sampler holds its tuning parameters (one value per chain, so that repeats stay independent) and
offers three methods:

- ``init(x0) -> ChainState``: evaluate the target at the starting states;
- ``step(rng, state) -> (ChainState, StepInfo)``: one transition of every chain;
- ``adapt(state, info, iteration)``: update the tuning parameters; the run harness calls it only
  during warm-up, so that after warm-up the sampler is a fixed, pi-invariant kernel.
"""
from __future__ import annotations

from typing import NamedTuple, Optional

import numpy as np

from ..validation import (as_batch, float_array, require_int, require_number, require_probability,
                          require_target, wrong_type)

_FLOAT, _BOOL = np.dtype(float), np.dtype(bool)     # singletons: "is" compares them cheaply


class ChainState(NamedTuple):
    """The states of all chains: x (n_chains, dim), logp (n_chains,), grad (n_chains, dim) or None."""
    x: np.ndarray
    logp: np.ndarray
    grad: Optional[np.ndarray] = None


class StepInfo(NamedTuple):
    """What one step did, per chain.

    ``nonfinite`` is only about the target: the step met a NaN or infinite log density (or
    gradient), which was rejected. ``divergent`` is only about the integrator (NUTS, and any
    sampler that reports it): a trajectory whose energy error exceeded its threshold at finite
    densities. None (the default) means the sampler has no notion of divergence; the run
    harness counts both separately (``RunResult.n_nonfinite``, ``RunResult.n_divergent``).
    """
    accepted: np.ndarray        # bool (n_chains,)
    accept_prob: np.ndarray     # min(1, exp(log ratio)); 0 where the proposal was non-finite
    nonfinite: np.ndarray       # bool (n_chains,): proposal had a non-finite log density or gradient
    divergent: Optional[np.ndarray] = None   # bool (n_chains,): energy error above the threshold


def metropolis_hastings_accept(log_ratio, u):
    """The accept/reject decision of Metropolis-Hastings, with the uniform u given explicitly.

    Accept iff u < exp(log_ratio), i.e. log u < log_ratio. A non-finite log ratio (the proposal's
    density is NaN, +-inf, or its gradient overflowed) is a rejection, never a new state.

    u is passed in, not drawn here, so that Neal's non-reversible scheme (book/nonrev_u.md) can
    supply a u that it carries in the state. Returns (accepted, accept_prob, nonfinite).
    """
    if type(log_ratio) is not np.ndarray or log_ratio.dtype is not _FLOAT:
        log_ratio = float_array(log_ratio, "log_ratio")
    if getattr(u, "shape", None) != log_ratio.shape:
        u = float_array(u, "u")
        if u.shape != log_ratio.shape:
            raise ValueError(f"u must have the shape of log_ratio {log_ratio.shape} (one uniform per "
                             f"chain), got shape {u.shape}")
    # A +inf ratio is as suspect as NaN: it signals an overflow, not a certainty. -inf (a proposal
    # outside the support) is counted with them.
    nonfinite = ~np.isfinite(log_ratio)
    safe_ratio = np.where(nonfinite, -np.inf, log_ratio)
    with np.errstate(divide="ignore"):
        accepted = np.log(u) < safe_ratio
    accept_prob = np.exp(np.minimum(safe_ratio, 0.0))   # exp(-inf) = 0 for the non-finite ones
    return accepted, accept_prob, nonfinite


def _accepted(accepted, n_chains: int, name: str = "accepted") -> np.ndarray:
    """``accepted`` as a boolean array (n_chains,), checked (the slow path of the step helpers)."""
    arr = np.asarray(accepted)
    if arr.dtype != bool:
        raise wrong_type(name, f"a boolean array of shape ({n_chains},)", accepted)
    if arr.shape != (n_chains,):
        raise ValueError(f"{name} must have shape ({n_chains},) (one decision per chain), got {arr.shape}")
    return arr


def select(accepted, proposed, current):
    """Per-chain choice between a proposed and a current array (states (n, d), log densities (n,))."""
    try:            # the fast check (select runs two or three times a step): arrays of matching shapes
        ndim = current.ndim
        fast = (accepted.dtype is _BOOL and proposed.shape == current.shape and 0 < ndim < 3
                and accepted.shape == current.shape[:1])
    except AttributeError:
        fast = False
    if not fast:
        current = float_array(current, "current")
        proposed = float_array(proposed, "proposed")
        if current.ndim not in (1, 2) or proposed.shape != current.shape:
            raise ValueError(f"proposed and current must have one shape, (n_chains,) or (n_chains, dim), got "
                             f"{proposed.shape} and {current.shape}")
        accepted = _accepted(accepted, current.shape[0])
        ndim = current.ndim
    return np.where(accepted[:, None] if ndim == 2 else accepted, proposed, current)


def accept_proposals(state: ChainState, proposal: ChainState, accepted) -> ChainState:
    """The next ChainState: the proposal where accepted, the current state elsewhere."""
    if type(state) is not ChainState or type(proposal) is not ChainState:
        for name, value in (("state", state), ("proposal", proposal)):
            if not isinstance(value, tuple) or not hasattr(value, "x") or not hasattr(value, "logp"):
                raise wrong_type(name, "a ChainState (x, logp, grad)", value)
    # A proposal without the gradient the state carries fails in select, naming "proposed".
    grad = None if state.grad is None else select(accepted, proposal.grad, state.grad)
    return ChainState(select(accepted, proposal.x, state.x),
                      select(accepted, proposal.logp, state.logp), grad)


def finite_rows(logp, grad=None):
    """True for chains whose log density (and gradient, if given) are finite."""
    if type(logp) is not np.ndarray or logp.ndim != 1:
        logp = float_array(logp, "logp")
        if logp.ndim != 1:
            raise ValueError(f"logp must have shape (n_chains,), got {logp.shape}")
    if grad is not None and (type(grad) is not np.ndarray or grad.ndim != 2 or grad.shape[0] != logp.shape[0]):
        grad = float_array(grad, "grad")
        if grad.ndim != 2 or grad.shape[0] != logp.shape[0]:
            raise ValueError(f"grad must have shape ({logp.shape[0]}, dim) for logp of shape {logp.shape}, "
                             f"got {grad.shape}")
    ok = np.isfinite(logp)
    if grad is not None:
        ok &= np.all(np.isfinite(grad), axis=1)
    return ok


def per_chain(value, n_chains: int, name: str) -> np.ndarray:
    """Broadcast a scalar or (n_chains,) tuning parameter to one float per chain."""
    if not isinstance(name, str):
        raise wrong_type("name", "a string (the parameter's name)", name)
    n_chains = require_int(n_chains, "n_chains", minimum=1)
    arr = float_array(value, name)
    if arr.ndim == 0:
        return np.full(n_chains, float(arr))
    if arr.shape != (n_chains,):
        raise ValueError(f"{name} must be a scalar or have shape ({n_chains},), got {arr.shape}")
    return arr.copy()


class Sampler:
    """Base class. Subclasses set ``name`` and ``uses_gradient`` and implement ``step``."""

    name = "sampler"
    uses_gradient = False

    def __init__(self, target):
        self.target = require_target(target)

    def init(self, x0) -> ChainState:
        x0 = as_batch(x0, self.target.dim, "x0", min_rows=1)
        if self.uses_gradient:
            logp, grad = self.target.logp_and_grad(x0)
        else:
            logp, grad = self.target.logp(x0), None
        if not np.all(finite_rows(logp, grad)):
            bad = np.flatnonzero(~finite_rows(logp, grad))
            raise ValueError(f"x0 has a non-finite log density or gradient in chains {bad.tolist()}")
        return ChainState(x0.copy(), np.asarray(logp, dtype=float), grad)

    def step(self, rng, state: ChainState):
        raise NotImplementedError

    def adapt(self, state: ChainState, info: StepInfo, iteration: int):
        """Default: nothing to adapt."""

    def tuning(self) -> dict:
        """The current tuning parameters, for reports."""
        return {}


def robbins_monro_scale(scale, accepted, target_rate, rate=0.01):
    """The gsm paper's code's multiplicative rule: scale <- scale (1 + rate (a - a*) / a*), per chain,
    with a the 0/1 accept indicator. It drives the acceptance rate to a* during warm-up: an
    acceptance multiplies the scale by 1 + rate (1 - a*) / a* > 1, a rejection by 1 - rate < 1,
    and the expected change is 0 exactly when P(accept) = a*."""
    if getattr(accepted, "dtype", None) is not _BOOL or type(target_rate) is not float:
        if np.asarray(accepted).dtype != bool:
            raise wrong_type("accepted", "booleans (one accept decision per chain)", accepted)
        accepted = np.asarray(accepted)
        target_rate = require_probability(target_rate, "target_rate")
    if type(scale) is not np.ndarray or scale.shape != accepted.shape:
        arr = float_array(scale, "scale")
        if arr.shape not in ((), accepted.shape):
            raise ValueError(f"scale must be a scalar or have the shape of accepted {accepted.shape}, got {arr.shape}")
    if type(rate) is not float:
        require_number(rate, "rate")
    return scale * (1.0 + rate * (accepted.astype(float) - target_rate) / target_rate)
