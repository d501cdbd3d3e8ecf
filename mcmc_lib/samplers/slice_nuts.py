"""The No-U-Turn sampler as Hoffman & Gelman (2014) gave it: a slice variable, Algorithm 3 ("efficient
NUTS") with the dual averaging of Algorithm 6, as in Hoffman's MATLAB ``NUTS.m`` and ``dualAveraging.m``
(the package the gsm paper's authors ran, github.com/aki-nishimura/NUTS-matlab).

``mcmc_lib.samplers.nuts.NUTS`` is Stan's later form (multinomial sampling over the trajectory, the
generalised U-turn criterion checked also across merged halves). This one differs in three ways:

1. a slice variable: with momentum r0 ~ N(0, I) and joint density exp(L(x) - r.r/2),
   log u = L(x0) - r0.r0/2 - E with E ~ Exp(1); a leapfrog point is a candidate if log u < L(x) - r.r/2
   (it lies in the slice), and the doubling stops when a point has log u - 100 >= L(x) - r.r/2
   (Delta_max = 100: the simulation is wildly inaccurate);
2. uniform sampling among the candidates: inside a subtree the later half's sample wins with probability
   n2 / (n1 + n2) (n: candidates in each half); at the top level the sample moves to the new subtree's
   with probability min(1, n' / n) (n: candidates so far), and not at all when the new subtree stopped;
3. the original U-turn criterion on a subtree's two end points only, (x+ - x-).r- < 0 or (x+ - x-).r+ < 0.

As in ``NUTS.m``: the identity metric; the depth limit stops the doubling once the tree's depth exceeds
``max_tree_depth`` (so at most max_tree_depth + 1 doublings, 2^(max_tree_depth + 1) - 1 leapfrog steps),
with 12 during warm-up (``dualAveraging.m``) and 10 afterwards (``NUTS.m``'s default); the acceptance
statistic is the mean over the leapfrog steps built of min(1, exp(H0 - H)). Warm-up is the dual averaging
of ``mcmc_lib.samplers.nuts`` (the same recursion and constants: delta 0.8, gamma 0.05, t0 10, kappa 0.75,
mu = log(10 eps0), eps0 from Hoffman & Gelman's Algorithm 4), after which the step size is exp(log eps_bar).
A non-finite log density or gradient ends the doubling like a Delta_max stop and is counted as non-finite
(the MATLAB code leaves NaN to its comparisons).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..validation import (float_array, require_int, require_number, require_positive, require_positive_scalar,
                          require_rng, require_target)
from .nuts import NUTS


class _End(NamedTuple):
    """One end of a (sub)trajectory: position, momentum, and the gradient at the position."""
    x: np.ndarray
    r: np.ndarray
    grad: np.ndarray


class _SliceTree(NamedTuple):
    """What ``build_tree`` returns: the two ends, the candidate drawn from the subtree (with its log
    density and gradient), the number of candidates ``n``, whether the subtree says stop, and the sum and
    count of the acceptance statistic over its leapfrog steps."""
    minus: _End
    plus: _End
    x: np.ndarray
    logp: float
    grad: np.ndarray
    n: int
    stop: bool
    alpha: float
    n_alpha: int


def u_turn(x_minus, x_plus, r_minus, r_plus) -> bool:
    """Hoffman & Gelman's stop criterion: (x+ - x-).r- < 0 or (x+ - x-).r+ < 0, for four vectors of one
    length (dim,)."""
    names = ("x_minus", "x_plus", "r_minus", "r_plus")
    vectors = [float_array(v, name) for v, name in zip((x_minus, x_plus, r_minus, r_plus), names)]
    if vectors[0].ndim != 1 or any(v.shape != vectors[0].shape for v in vectors):
        raise ValueError(f"{', '.join(names[:3])} and {names[3]} must be vectors of one length (dim,), got shapes "
                         + ", ".join(f"{name} {v.shape}" for name, v in zip(names, vectors)))
    return _u_turn(*vectors)


def _u_turn(x_minus, x_plus, r_minus, r_plus) -> bool:
    """``u_turn`` for vectors the trajectory built (checked where they entered it)."""
    span = x_plus - x_minus
    return bool(np.dot(span, r_minus) < 0 or np.dot(span, r_plus) < 0)


class _SliceTrajectory:
    """The trajectory of one chain for one transition, with its counters."""

    def __init__(self, target, step_size, log_u, joint0, rng, delta_max):
        self.target, self.step_size, self.log_u, self.joint0 = target, step_size, log_u, joint0
        self.rng, self.delta_max = rng, delta_max
        self.n_leapfrog = 0
        self.nonfinite = False
        self.divergent = False

    def leapfrog(self, end: _End, direction: int):
        """One leapfrog step of size direction * eps (one gradient evaluation)."""
        h = direction * self.step_size
        r = end.r + 0.5 * h * end.grad
        x = end.x + h * r
        logp, grad = self.target.logp_and_grad(x)
        grad = grad[0]
        self.n_leapfrog += 1
        return _End(x, r + 0.5 * h * grad, grad), float(logp[0])

    def build(self, end: _End, direction: int, depth: int) -> _SliceTree:
        if depth == 0:
            new, logp = self.leapfrog(end, direction)
            finite = np.isfinite(logp) and np.all(np.isfinite(new.grad)) and np.all(np.isfinite(new.r))
            joint = logp - 0.5 * np.dot(new.r, new.r) if finite else -np.inf
            if not finite:
                self.nonfinite = True
            in_slice = int(self.log_u < joint)
            stop = bool(self.log_u - self.delta_max >= joint)
            if stop and finite:
                self.divergent = True
            alpha = float(np.exp(min(0.0, joint - self.joint0))) if finite else 0.0
            return _SliceTree(new, new, new.x, logp, new.grad, in_slice, stop, alpha, 1)
        first = self.build(end, direction, depth - 1)
        if first.stop:
            return first
        outer = first.minus if direction < 0 else first.plus
        second = self.build(outer, direction, depth - 1)
        n = first.n + second.n
        take_second = n > 0 and self.rng.random() < second.n / n
        pick = second if take_second else first
        minus, plus = (second.minus, first.plus) if direction < 0 else (first.minus, second.plus)
        stop = second.stop or _u_turn(minus.x, plus.x, minus.r, plus.r)
        return _SliceTree(minus, plus, pick.x, pick.logp, pick.grad, n, stop,
                          first.alpha + second.alpha, first.n_alpha + second.n_alpha)


class SliceTransition(NamedTuple):
    """What one transition of one chain produced."""
    x: np.ndarray
    logp: float
    grad: np.ndarray
    moved: bool
    accept_stat: float
    depth: int
    n_leapfrog: int
    divergent: bool
    nonfinite: bool


def slice_nuts_transition(target, x, logp, grad, step_size, rng, max_tree_depth=10,
                          delta_max=100.0) -> SliceTransition:
    """One transition of Hoffman & Gelman's efficient NUTS from x (see the module docstring): one chain's
    x and grad (dim,), its log density logp, a positive step size, a numpy Generator."""
    if not (type(x) is np.ndarray and x.ndim == 1 and type(rng) is np.random.Generator
            and getattr(grad, "shape", None) == x.shape and getattr(target, "dim", None) == x.shape[0]
            and type(max_tree_depth) is int):
        x, grad = _check_transition(target, x, logp, grad, step_size, rng, max_tree_depth, delta_max)
    r0 = rng.standard_normal(x.shape[0])
    joint0 = logp - 0.5 * np.dot(r0, r0)
    log_u = joint0 - rng.exponential()
    traj = _SliceTrajectory(target, step_size, log_u, joint0, rng, delta_max)
    start = _End(x, r0, grad)
    minus = plus = start
    sample_x, sample_logp, sample_grad = x, logp, grad
    n, depth, moved = 1, 0, False
    alpha, n_alpha = 0.0, 0
    while True:
        direction = 1 if rng.random() < 0.5 else -1
        if direction < 0:
            new = traj.build(minus, -1, depth)
            minus = new.minus
        else:
            new = traj.build(plus, 1, depth)
            plus = new.plus
        if not new.stop and rng.random() < new.n / n:
            sample_x, sample_logp, sample_grad = new.x, new.logp, new.grad
            moved = True
        n += new.n
        alpha, n_alpha = alpha + new.alpha, n_alpha + new.n_alpha
        stop = new.stop or _u_turn(minus.x, plus.x, minus.r, plus.r)
        depth += 1
        if stop or depth > max_tree_depth:
            break
    return SliceTransition(sample_x, sample_logp, sample_grad, moved, alpha / n_alpha, depth, traj.n_leapfrog,
                           traj.divergent, traj.nonfinite)


def _check_transition(target, x, logp, grad, step_size, rng, max_tree_depth, delta_max):
    """The arguments of ``slice_nuts_transition`` when they are not the sampler's own (its slow path); returns
    x and grad as float arrays."""
    require_target(target)
    require_rng(rng)
    x, grad = float_array(x, "x"), float_array(grad, "grad")
    if x.shape != (target.dim,):
        raise ValueError(f"x must be one chain's state, shape ({target.dim},), got {x.shape}")
    if grad.shape != x.shape:
        raise ValueError(f"grad must have the shape of x, {x.shape}, got {grad.shape}")
    require_number(logp, "logp", finite=False)
    require_positive_scalar(step_size, "step_size")
    require_int(max_tree_depth, "max_tree_depth", minimum=0)
    require_positive_scalar(delta_max, "delta_max")
    return x, grad


class SliceNUTS(NUTS):
    """Hoffman & Gelman's (2014) efficient NUTS with a slice variable and dual averaging, as in Hoffman's
    MATLAB code (module docstring): identity metric, ``max_tree_depth`` 10 after warm-up and
    ``warmup_max_tree_depth`` 12 during it (each allowing one doubling past it, as ``NUTS.m`` does),
    ``delta_max`` 100. Step size, warm-up, counters and diagnostics as ``mcmc_lib.samplers.nuts.NUTS``
    (``last_energy`` is not kept)."""

    name = "NUTS (slice)"

    def __init__(self, target, step_size=None, target_accept=0.8, max_tree_depth=10, warmup_max_tree_depth=12,
                 delta_max=100.0, n_warmup=500):
        super().__init__(target, step_size=step_size, target_accept=target_accept, max_tree_depth=max_tree_depth,
                         metric="identity", n_warmup=n_warmup)
        self.warmup_max_tree_depth = require_int(warmup_max_tree_depth, "warmup_max_tree_depth", minimum=1)
        self.delta_max = float(require_positive(delta_max, "delta_max"))

    def _transition(self, rng, c, state):
        """NUTS.step's per-chain transition: the slice variant, with NUTS.m's deeper tree during warm-up."""
        depth_limit = self.warmup_max_tree_depth if self.adapting else self.max_tree_depth
        out = slice_nuts_transition(self.target, state.x[c], state.logp[c], state.grad[c], self.step_size[c], rng,
                                    depth_limit, self.delta_max)
        self._record(c, out)
        return out.x, out.logp, out.grad, out.moved
