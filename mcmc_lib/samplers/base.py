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

from ..validation import as_batch


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
    log_ratio = np.asarray(log_ratio, dtype=float)
    # A +inf ratio is as suspect as NaN: it signals an overflow, not a certainty. -inf (a proposal
    # outside the support) is counted with them.
    nonfinite = ~np.isfinite(log_ratio)
    safe_ratio = np.where(nonfinite, -np.inf, log_ratio)
    with np.errstate(divide="ignore"):
        accepted = np.log(u) < safe_ratio
    accept_prob = np.exp(np.minimum(safe_ratio, 0.0))   # exp(-inf) = 0 for the non-finite ones
    return accepted, accept_prob, nonfinite


def select(accepted, proposed, current):
    """Per-chain choice between a proposed and a current array (states (n, d), log densities (n,))."""
    return np.where(accepted[:, None] if np.ndim(current) == 2 else accepted, proposed, current)


def accept_proposals(state: ChainState, proposal: ChainState, accepted) -> ChainState:
    """The next ChainState: the proposal where accepted, the current state elsewhere."""
    grad = None if state.grad is None else select(accepted, proposal.grad, state.grad)
    return ChainState(select(accepted, proposal.x, state.x),
                      select(accepted, proposal.logp, state.logp), grad)


def finite_rows(logp, grad=None):
    """True for chains whose log density (and gradient, if given) are finite."""
    ok = np.isfinite(logp)
    if grad is not None:
        ok &= np.all(np.isfinite(grad), axis=1)
    return ok


def per_chain(value, n_chains: int, name: str) -> np.ndarray:
    """Broadcast a scalar or (n_chains,) tuning parameter to one float per chain."""
    arr = np.asarray(value, dtype=float)
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
        self.target = target

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
    return scale * (1.0 + rate * (accepted.astype(float) - target_rate) / target_rate)
