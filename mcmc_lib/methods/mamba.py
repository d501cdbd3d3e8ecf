"""Generated from book/mamba.md by `python -m mcmc_lib.literate export`.

Do not edit: change the chapter's cells tagged `export` and regenerate.
"""
from __future__ import annotations

import copy
import math
import time
import warnings
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from mcmc_lib import diagnostics
from mcmc_lib.targets import LogisticRegression, _sigmoid
from mcmc_lib.validation import (float_array, require_bool, require_callable, require_int, require_number,
                                 require_positive, require_positive_scalar, require_rng, require_sequence,
                                 require_str, require_target, wrong_type)

SAMPLERS = ("sgld", "sgld-cv", "sghmc", "sghmc-cv", "sgnht", "sgnht-cv")


class MinibatchStream:
    """Minibatches of ``batch_size`` of ``n_data`` rows for each of ``n_chains`` chains: consecutive
    slices of a fresh uniform permutation of the rows per chain and epoch, so every row is used once
    per epoch. A minibatch that straddles two epochs takes the rest of the old permutation and the
    first rows of the new one, which is drawn so that those first rows avoid the rows just taken:
    every minibatch is a uniform sample without replacement. O(batch_size) per minibatch and chain,
    amortised (one O(n_data) permutation per chain and epoch)."""

    def __init__(self, n_data: int, batch_size: int, n_chains: int):
        self.n_data = require_int(n_data, "n_data", minimum=1)
        self.batch_size = require_int(batch_size, "batch_size", minimum=1)
        self.n_chains = require_int(n_chains, "n_chains", minimum=1)
        if self.batch_size > self.n_data:
            raise ValueError(f"batch_size must be at most n_data = {self.n_data}, got {batch_size}")
        self.perm = None           # (n_chains, n_data): the current epoch's permutations
        self.pos = 0               # rows of the current epoch already used
        self.epochs = 0            # epochs begun

    def _permute(self, rng, row: int, taken) -> None:
        """Fill ``perm[row]`` with a uniform permutation of the rows whose first batch_size - len(taken)
        entries avoid ``taken`` (distinct rows): the first rows of a uniform permutation of the other
        rows, then the rest of it with the taken rows put, in random order, at uniformly chosen places.
        In place: a fresh (c, N) array per epoch would cost page faults, about twice the shuffle."""
        out = self.perm[row]
        out[:] = self._rows
        rng.shuffle(out)
        head = self.batch_size - len(taken)
        if len(taken) == 0 or head == 0:
            return
        others = np.ones(self.n_data, dtype=bool)
        others[taken] = False
        perm = out[others[out]]                                     # the other rows, in random order
        slots = np.zeros(self.n_data - head, dtype=bool)
        slots[rng.choice(len(slots), len(taken), replace=False)] = True
        out[:head] = perm[:head]
        rest = out[head:]
        rest[slots] = rng.permutation(taken)
        rest[~slots] = perm[head:]

    def start(self, rng):
        """Begin an epoch now, if none is under way (so that a timed run need not pay for it)."""
        if self.perm is None:
            dtype = np.int32 if self.n_data < 2**31 else np.int64
            self._rows = np.arange(self.n_data, dtype=dtype)
            self.perm = np.empty((self.n_chains, self.n_data), dtype=dtype)
            for row in range(self.n_chains):
                self._permute(rng, row, ())
            self.pos, self.epochs = 0, self.epochs + 1

    def next(self, rng) -> np.ndarray:
        """The next minibatch of every chain: (n_chains, batch_size) row indices."""
        n = self.batch_size
        self.start(rng)
        if self.pos + n <= self.n_data:
            idx = self.perm[:, self.pos:self.pos + n].copy()
            self.pos += n
            return idx
        rest = self.perm[:, self.pos:].copy()
        for row in range(self.n_chains):
            self._permute(rng, row, rest[row])
        self.pos, self.epochs = n - rest.shape[1], self.epochs + 1
        return np.concatenate([rest, self.perm[:, :self.pos]], axis=1)


class GradientEstimator:
    """The minibatch score estimate (eq-mamba-sg), or its control-variate form (eq-mamba-cv) when
    ``centre`` is given, for a target with ``n_data`` and ``minibatch_grad(w, indices)``. A target
    may also offer ``minibatch_grads(w, idx)`` with one row of indices per chain (idx (c, n));
    for ``LogisticRegression`` that vectorised form is built in here.

    ``cost`` is the number of gradient evaluations one call charges per chain: n/N, doubled for
    the control variate (two minibatch gradients), 1 when n = N (the exact score). Minibatches come
    from a ``MinibatchStream`` (a permutation per epoch), started afresh by the first call and
    whenever the number of chains changes. ``shared``: every chain takes the same minibatch (one
    stream), as the authors' grid search does (one random key per group of grid points): each chain is
    still a valid SG-MCMC chain, and the rows are gathered once for all of them.
    """

    def __init__(self, target, batch_size: int, centre=None, shared: bool = False):
        if not hasattr(target, "minibatch_grad") or not hasattr(target, "n_data"):
            raise ValueError(f"target must have n_data and minibatch_grad, got {type(target).__name__}")
        self.target = target
        self.n_data = int(target.n_data)
        self.batch_size = require_int(batch_size, "batch_size", minimum=1)
        if self.batch_size > self.n_data:
            raise ValueError(f"batch_size must be at most n_data = {self.n_data}, got {batch_size}")
        self.full = self.batch_size == self.n_data
        if centre is not None:
            centre = np.asarray(centre, dtype=float)
            if centre.shape != (target.dim,) or not np.all(np.isfinite(centre)):
                raise ValueError(f"centre must be a finite array of shape ({target.dim},), got {centre.shape}")
            self.centre_grad = target.grad_logp(centre[None])[0]  # computed once, not charged
        self.centre = centre
        fraction = self.batch_size / self.n_data
        self.cost = 1.0 if self.full else fraction * (2.0 if centre is not None else 1.0)
        self.shared = require_bool(shared, "shared")
        self.stream = None

    def start(self, rng, n_chains: int):
        """The minibatch stream of n_chains chains, with its first epoch drawn: the current one, or
        a new one if there is none or it serves another number of chains (None for a full batch)."""
        if self.full:
            return None
        n_streams = 1 if self.shared else n_chains
        if self.stream is None or self.stream.n_chains != n_streams:
            self.stream = MinibatchStream(self.n_data, self.batch_size, n_streams)
        self.stream.start(rng)
        return self.stream

    def _minibatch(self, points, idx):
        """For each of ``points`` (one (c, d) array, or two: the chains and the control variates' centre),
        (N/n) sum_{i in S_c} grad log f(y_i | w_c) + grad log p(w_c), one minibatch per chain (idx (c, n),
        or (1, n) shared by every chain). Logistic regression gathers the minibatch's rows once for all
        the points."""
        t = self.target
        if isinstance(t, LogisticRegression) and not hasattr(t, "minibatch_grads"):
            scale = self.n_data / idx.shape[1]
            if self.shared:                         # one minibatch: (n, d), every chain against it
                Xb, tb = t.X[idx[0]], t.t[idx[0]]
                out = []
                for w in points:
                    t.n_grad_evals += w.shape[0] * idx.shape[1] / self.n_data
                    out.append(scale * ((tb - _sigmoid(w @ Xb.T)) @ Xb) - w / t.prior_var)
                return out
            Xb, tb = t.X[idx], t.t[idx]              # (c, n, d), (c, n)
            out = []
            for w in points:
                resid = tb - _sigmoid(np.einsum("cnd,cd->cn", Xb, w))
                t.n_grad_evals += w.shape[0] * idx.shape[1] / self.n_data
                out.append(scale * np.einsum("cn,cnd->cd", resid, Xb) - w / t.prior_var)
            return out
        idx = np.broadcast_to(idx, (points[0].shape[0], idx.shape[1])) if self.shared else idx
        if hasattr(t, "minibatch_grads"):          # a target's own vectorised version
            return [t.minibatch_grads(w, idx) for w in points]
        return [np.concatenate([t.minibatch_grad(w[c:c + 1], idx[c]) for c in range(w.shape[0])]) for w in points]

    def __call__(self, rng, w):
        w = np.asarray(w, dtype=float)
        if self.full:
            return self.target.grad_logp(w)
        idx = self.start(rng, w.shape[0]).next(rng)
        if self.centre is None:
            return self._minibatch([w], idx)[0]
        g, at_centre = self._minibatch([w, np.broadcast_to(self.centre, w.shape)], idx)
        return g + self.centre_grad - at_centre


class SGState(NamedTuple):
    """Chains' positions x (c, d), velocities v (c, d) and thermostats xi (c, B), one per block."""
    x: np.ndarray
    v: np.ndarray
    xi: np.ndarray


def _check_step(rng, state, h, grad_fn) -> None:
    """The arguments every SG step takes: a Generator, an SGState, one step size per chain, a gradient."""
    require_rng(rng)
    if not isinstance(state, SGState):
        raise wrong_type("state", "an SGState (x, v, xi)", state)
    n_chains = state.x.shape[0]
    if np.shape(h) != (n_chains,):
        raise ValueError(f"h must hold one step size per chain, shape ({n_chains},), got shape {np.shape(h)}")
    require_positive(h, "h")
    require_callable(grad_fn, "grad_fn")


def sgld_step(rng, state: SGState, h, grad_fn) -> SGState:
    """Eq. (eq-mamba-sgld); h: (c,) step sizes."""
    _check_step(rng, state, h, grad_fn)
    x = state.x
    x = x + h[:, None] * grad_fn(rng, x) + np.sqrt(2.0 * h)[:, None] * rng.standard_normal(x.shape)
    return SGState(x, state.v, state.xi)


def sghmc_step(rng, state: SGState, h, grad_fn, n_leapfrog: int, alpha: float = 0.01,
               stale_gradient: bool = False) -> SGState:
    """Eq. (eq-mamba-sghmc): fresh v ~ N(0, h I), then n_leapfrog steps; returns the end point.
    stale_gradient=True evaluates the gradient before the move, as the original code does."""
    _check_step(rng, state, h, grad_fn)
    n_leapfrog = require_int(n_leapfrog, "n_leapfrog", minimum=1)
    x = state.x
    v = np.sqrt(h)[:, None] * rng.standard_normal(x.shape)
    noise_sd = np.sqrt(2.0 * alpha * h)[:, None]
    for _ in range(n_leapfrog):
        g = grad_fn(rng, x) if stale_gradient else None
        x = x + v
        g = grad_fn(rng, x) if g is None else g
        v = v + h[:, None] * g - alpha * v + noise_sd * rng.standard_normal(x.shape)
    return SGState(x, v, state.xi)


def block_sizes(target) -> tuple:
    """The sizes of the target's parameter blocks (``target.blocks``; one block of all d otherwise)."""
    require_target(target)
    sizes = tuple(int(b) for b in getattr(target, "blocks", (target.dim,)))
    if not sizes or min(sizes) < 1 or sum(sizes) != target.dim:
        raise ValueError(f"blocks must be positive sizes summing to dim = {target.dim}, got {sizes}")
    return sizes


def sgnht_step(rng, state: SGState, h, grad_fn, a: float = 0.01, blocks=None) -> SGState:
    """Eq. (eq-mamba-sgnht): one thermostat per chain and block; blocks: the sizes of the consecutive
    blocks of coordinates (None: one block), xi (c, len(blocks))."""
    _check_step(rng, state, h, grad_fn)
    x, v, xi = state
    sizes = np.array([x.shape[1]] if blocks is None else blocks)
    v = v + h[:, None] * grad_fn(rng, x) - np.repeat(xi, sizes, axis=1) * v \
        + np.sqrt(2.0 * a * h)[:, None] * rng.standard_normal(x.shape)
    x = x + v
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    xi = xi + np.add.reduceat(v**2, starts, axis=1) / sizes - h[:, None]
    return SGState(x, v, xi)


@dataclass(frozen=True)
class SGConfig:
    """One arm: sampler name, step size h, batch size n, leapfrog steps L (SGHMC only)."""
    sampler: str
    step_size: float
    batch_size: int
    n_leapfrog: int = 1

    def __post_init__(self):
        if self.sampler not in SAMPLERS:
            raise ValueError(f"sampler must be one of {SAMPLERS}, got {self.sampler!r}")
        require_positive_scalar(self.step_size, "step_size")
        require_int(self.batch_size, "batch_size", minimum=1)
        require_int(self.n_leapfrog, "n_leapfrog", minimum=1)


class CostModel:
    """Modelled seconds of one gradient estimate, log-log interpolated in the batch fraction n/N
    between calibration points (fractions, seconds), times ``cv_factor`` for a control variate."""

    def __init__(self, fractions, seconds, cv_factor: float = 1.0):
        self.fractions = np.asarray(fractions, dtype=float)
        self.seconds = np.asarray(seconds, dtype=float)
        if (self.fractions.ndim != 1 or self.fractions.shape != self.seconds.shape or len(self.fractions) < 2
                or np.any(np.diff(self.fractions) <= 0) or np.any(self.seconds <= 0) or self.fractions[0] <= 0):
            raise ValueError("fractions must increase from > 0 and seconds be positive, of the same length >= 2")
        self.cv_factor = float(require_positive(cv_factor, "cv_factor"))

    def __call__(self, fraction: float, cv: bool = False) -> float:
        x = np.log(np.clip(fraction, self.fractions[0], self.fractions[-1]))
        seconds = float(np.exp(np.interp(x, np.log(self.fractions), np.log(self.seconds))))
        return seconds * (self.cv_factor if cv else 1.0)


class SGMCMC:
    """A batch of chains of one SG sampler; per-chain step sizes, shared batch size and L.
    alpha: SGHMC friction; a: SGNHT noise; stale_gradient: SGHMC's gradient before the move (code);
    shared_minibatch: one minibatch for all the chains (GradientEstimator's ``shared``).

    ``cost_per_step``: gradient evaluations one step charges per chain (L x the estimator's cost);
    ``model_cost_per_step``: L x ``cost_model(n/N, cv)`` (modelled seconds) when a CostModel is given.
    """

    def __init__(self, target, sampler: str, step_size, batch_size: int, n_leapfrog: int = 1,
                 centre=None, alpha: float = 0.01, a: float = 0.01, stale_gradient: bool = False,
                 cost_model: CostModel | None = None, shared_minibatch: bool = False):
        if sampler not in SAMPLERS:
            raise ValueError(f"sampler must be one of {SAMPLERS}, got {sampler!r}")
        self.target, self.sampler = target, sampler
        self.step_size = np.atleast_1d(np.asarray(require_positive(step_size, "step_size"), dtype=float))
        if self.step_size.ndim != 1:
            raise ValueError(f"step_size must be a scalar or (n_chains,), got shape {np.shape(step_size)}")
        self.n_leapfrog = require_int(n_leapfrog, "n_leapfrog", minimum=1)
        self.alpha = float(require_positive(alpha, "alpha"))
        self.a = float(require_positive(a, "a"))
        self.stale_gradient = bool(stale_gradient)
        use_cv = sampler.endswith("-cv")
        if use_cv and centre is None:
            raise ValueError(f"centre (the control variates' centring value) is needed for {sampler}")
        self.grad_fn = GradientEstimator(target, batch_size, centre if use_cv else None, shared_minibatch)
        self.kind = sampler.split("-")[0]
        self.blocks = block_sizes(target)
        steps = self.n_leapfrog if self.kind == "sghmc" else 1
        self.cost_per_step = steps * self.grad_fn.cost
        self.model_cost_per_step = (None if cost_model is None else
                                    steps * cost_model(self.grad_fn.batch_size / self.grad_fn.n_data, use_cv))

    def init(self, x0, rng) -> SGState:
        """States from x0 (c, d); v ~ N(0, h I) and xi = a (one per block) for SGNHT."""
        rng = require_rng(rng)
        x0 = np.asarray(x0, dtype=float)
        if x0.ndim != 2 or x0.shape[1] != self.target.dim or not np.all(np.isfinite(x0)):
            raise ValueError(f"x0 must be a finite array (n_chains, {self.target.dim}), got shape {x0.shape}")
        h = np.broadcast_to(self.step_size, (x0.shape[0],))
        v = np.sqrt(h)[:, None] * rng.standard_normal(x0.shape) if self.kind == "sgnht" else np.zeros_like(x0)
        return SGState(x0.copy(), v, np.full((x0.shape[0], len(self.blocks)), self.a))

    def step(self, rng, state: SGState) -> SGState:
        h = np.broadcast_to(self.step_size, (state.x.shape[0],))
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            if self.kind == "sgld":
                return sgld_step(rng, state, h, self.grad_fn)
            if self.kind == "sghmc":
                return sghmc_step(rng, state, h, self.grad_fn, self.n_leapfrog, self.alpha, self.stale_gradient)
            return sgnht_step(rng, state, h, self.grad_fn, self.a, self.blocks)


BUDGET_KINDS = ("gradients", "model", "seconds")


@dataclass
class SGRun:
    """A run's stored draws (n_kept, c, d), final state, steps taken, time, diverged chains, and the
    thinning used (every ``thin``-th state kept, starting with the first)."""
    samples: np.ndarray
    state: SGState
    n_steps: int
    seconds: float
    diverged: np.ndarray
    thin: int = 1


def _stride_chain(thin: int) -> list:
    """Strides 1 = s_0 | s_1 | ... | s_m = thin, each dividing the next (cumulative prime factors),
    so that draws kept at one stride contain those of the next."""
    chain, rest, p = [1], thin, 2
    while rest > 1:
        while rest % p == 0:
            chain.append(chain[-1] * p)
            rest //= p
        p += 1
    return chain


def steps_for_budget(sampler: SGMCMC, budget: float, budget_kind: str) -> int:
    """Steps a counted budget buys: floor(budget / cost per step), in gradient evaluations
    (``gradients``) or modelled seconds (``model``)."""
    if not isinstance(sampler, SGMCMC):
        raise wrong_type("sampler", "an SGMCMC", sampler)
    budget = require_number(budget, "budget")
    require_str(budget_kind, "budget_kind", ("gradients", "model"))
    cost = sampler.cost_per_step if budget_kind == "gradients" else sampler.model_cost_per_step
    if cost is None:
        raise ValueError("budget_kind 'model' needs a sampler built with a cost_model")
    return int(math.floor(budget / cost + 1e-9))


def run_sgmcmc(sampler: SGMCMC, state: SGState, rng, budget: float, budget_kind: str = "gradients",
               thin: int = 1, min_kept: int = 1, min_steps: int = 1, n_steps: int | None = None) -> SGRun:
    """Run ``sampler`` from ``state`` for ``budget`` gradient evaluations per chain, modelled seconds
    (``model``: both a fixed number of steps) or wall-clock ``seconds``; at least ``min_steps`` steps.
    ``n_steps`` (counted budgets only) fixes the number of steps instead. Under a time budget a step
    starts while the clock is below ``budget`` (or while fewer than ``min_steps`` have run). The minibatch
    stream's first epoch is drawn before the clock starts.

    Keeps every ``thin``-th state, starting with the first, unless that would keep fewer than
    ``min_kept`` draws: then the thinning is lowered (adaptive thinning), to n_steps // min_kept for
    counted budgets; under a time budget the stride grows 1 -> ... -> thin (each dividing the next)
    as the kept draws pass 2 min_kept, so memory stays bounded.
    """
    rng = require_rng(rng)
    if not isinstance(sampler, SGMCMC):
        raise wrong_type("sampler", "an SGMCMC", sampler)
    if not isinstance(state, SGState):
        raise wrong_type("state", "an SGState (SGMCMC.init)", state)
    budget = require_number(budget, "budget", finite=False)
    if not (math.isfinite(budget) and budget >= 0.0):
        raise ValueError(f"budget must be finite and non-negative, got {budget!r}")
    if budget_kind not in BUDGET_KINDS:
        raise ValueError(f"budget_kind must be one of {BUDGET_KINDS}, got {budget_kind!r}")
    thin = require_int(thin, "thin", minimum=1)
    min_kept = require_int(min_kept, "min_kept", minimum=1)
    min_steps = require_int(min_steps, "min_steps", minimum=1)
    if n_steps is not None and budget_kind == "seconds":
        raise ValueError("n_steps fixes the steps of a counted budget, not of budget_kind 'seconds'")
    sampler.grad_fn.start(rng, state.x.shape[0])
    kept = []
    start = time.perf_counter()
    if budget_kind != "seconds":
        if n_steps is None:
            n_steps = max(min_steps, steps_for_budget(sampler, budget, budget_kind))
        n_steps = require_int(n_steps, "n_steps", minimum=1)
        stride = max(1, min(thin, n_steps // min_kept))
        for k in range(n_steps):
            state = sampler.step(rng, state)
            if k % stride == 0:
                kept.append(state.x)
    else:
        strides = _stride_chain(thin)
        level, n_steps = 0, 0
        while time.perf_counter() - start < budget or n_steps < min_steps:
            state = sampler.step(rng, state)
            if n_steps % strides[level] == 0:
                kept.append(state.x)
                if level + 1 < len(strides) and len(kept) >= 2 * min_kept * strides[level + 1] // strides[level]:
                    level += 1                                  # keep the draws at the next stride
                    ratio = strides[level] // strides[level - 1]
                    kept = kept[::ratio]
            n_steps += 1
        stride = strides[level]
    if not kept:
        raise ValueError("the run took no step: give a positive budget or min_steps")
    samples = np.stack(kept)
    diverged = ~np.all(np.isfinite(samples), axis=(0, 2)) | ~np.all(np.isfinite(state.x), axis=1)
    return SGRun(samples, state, n_steps, time.perf_counter() - start, diverged, stride)


# "fssd-code": FSSD-opt as the authors' code computes it, its ten test locations one point repeated (they stay
# identical under the optimisation: FSSD-opt at one location, up to Adam's epsilon).
METRICS = ("ksd", "fssd", "fssd-code")


def _draws(value, dim: int, name: str) -> np.ndarray:
    """``value`` as draws (M, dim): one chain's states, one row per draw."""
    draws = float_array(value, name)
    if draws.ndim != 2 or draws.shape[1] != dim:
        raise ValueError(f"{name} must be one chain's draws, shape (n_draws, {dim}), got shape {draws.shape}")
    return draws


def full_scores(target, points, max_elements: int = 20_000_000) -> np.ndarray:
    """Full-data grad log pi at points (M, d), in chunks of at most max_elements of X w products."""
    require_target(target)
    points = _draws(points, target.dim, "points")
    n_data = getattr(target, "n_data", 1)
    chunk = max(1, max_elements // max(1, n_data))
    return np.concatenate([target.grad_logp(points[i:i + chunk]) for i in range(0, len(points), chunk)])


def stein_discrepancy(target, draws, metric: str, rng, max_points=None) -> float:
    """KSD (``mcmc_lib.diagnostics.ksd``) or FSSD-opt squared (``diagnostics.fssd_opt``) of draws
    (M, d), with full-data scores; +inf for non-finite draws or scores (a diverged arm), for
    fewer than two draws, or when FSSD's Gaussian fit for its test locations fails (draws so far
    apart that their covariance overflows: a diverging arm)."""
    require_target(target)
    require_str(metric, "metric", METRICS)
    draws = _draws(draws, target.dim, "draws")
    if max_points is not None and len(draws) > max_points:
        draws = draws[np.linspace(0, len(draws) - 1, max_points).astype(int)]
    if len(draws) < 2 or not np.all(np.isfinite(draws)):
        return math.inf
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        scores = full_scores(target, draws)
        if not np.all(np.isfinite(scores)):
            return math.inf
        if metric == "ksd":
            value = diagnostics.ksd(draws, scores)
        else:
            with warnings.catch_warnings():     # few draws: a singular Gaussian fit for the locations
                warnings.simplefilter("ignore", RuntimeWarning)
                try:
                    if metric == "fssd":
                        value = diagnostics.fssd_opt(draws, scores, rng, n_locations=10, n_steps=100,
                                                     learning_rate=1e-3)
                    else:
                        one = diagnostics.initial_test_locations(draws, 1, rng)
                        v = diagnostics.optimise_test_locations(draws, scores, np.repeat(one, 10, axis=0), 100, 1e-3)
                        value = diagnostics.fssd(draws, scores, v)
                except np.linalg.LinAlgError:   # draws so far apart that the Gaussian fit overflows
                    value = math.inf
    return value if np.isfinite(value) else math.inf


def n_rounds(n_arms: int, eta: int) -> int:
    """K = floor(log_eta n_arms) in integer arithmetic (at least 1)."""
    n_arms = require_int(n_arms, "n_arms", minimum=1)
    eta = require_int(eta, "eta", minimum=2)
    k, power = 0, eta
    while power <= n_arms:
        k, power = k + 1, power * eta
    return max(k, 1)


class NoFiniteScoreError(RuntimeError):
    """A round of successive halving in which no arm has a finite score: any choice would be arbitrary."""


def halving_budgets(n_arms: int, budget: float, eta: int = 3) -> list:
    """The budget per arm of each round of eq. (eq-mamba-halving), r_i = T / (|S_i| K): what an arm that
    survives every round gets in each. They sum to ``budget`` (R) when eta^i divides n_arms exactly,
    and to a little more otherwise (the rounded-down |S_i|), as in the original code."""
    n_arms = require_int(n_arms, "n_arms", minimum=1)
    eta = require_int(eta, "eta", minimum=2)
    budget = require_positive_scalar(budget, "budget")
    k = n_rounds(n_arms, eta)
    total = budget / sum(eta**i for i in range(k)) * n_arms * k
    sizes = [n_arms]
    for _ in range(k - 1):
        sizes.append(max(1, sizes[-1] // eta))
    return [total / (n * k) for n in sizes]


@dataclass
class HalvingResult:
    best: int                                   # index of the chosen arm
    rounds: list = field(default_factory=list)  # per round: arms, budget per arm, metrics


def successive_halving(n_arms: int, pull, budget: float, eta: int = 3) -> HalvingResult:
    """Successive halving with the budget of eq. (eq-mamba-halving).

    pull(arms, per_arm_budget, round) runs the arms (an index array) for per_arm_budget more and
    returns one metric per arm, lower is better; a non-finite metric (a diverged or priced-out arm) ranks
    after every finite one, ties in grid order, and a round with no finite metric raises
    NoFiniteScoreError. ``budget`` is R, the total budget of an arm that survives every round. Each round
    records ``advanced_unscored``: the arms without a finite metric that went on to the next round because
    fewer arms had one than survive (0 in the last round, whose best arm has a finite metric).
    """
    require_callable(pull, "pull")
    budgets = halving_budgets(n_arms, budget, eta)
    eta = int(eta)
    active = np.arange(n_arms)
    result = HalvingResult(best=-1)
    for i, per_arm in enumerate(budgets):
        metrics = np.asarray(pull(active, per_arm, i), dtype=float)
        if metrics.shape != active.shape:
            raise ValueError(f"pull must return {len(active)} metrics, got shape {metrics.shape}")
        metrics = np.where(np.isfinite(metrics), metrics, np.inf)
        if not np.any(np.isfinite(metrics)):
            raise NoFiniteScoreError(f"round {i}: none of the {len(active)} arms {active.tolist()} has a finite "
                                     "score, so the round cannot rank them (every chain diverged or was "
                                     "priced out: the round's budget buys it fewer than two steps)")
        order = np.argsort(metrics, kind="stable")      # finite metrics first; ties in grid order
        keep = order[:max(1, len(active) // eta)]
        advancing = keep if i + 1 < len(budgets) else order[:1]
        result.rounds.append({"arms": active.copy(), "budget": per_arm, "metrics": metrics,
                              "advanced_unscored": int(np.sum(~np.isfinite(metrics[advancing])))})
        result.best = int(active[order[0]])
        active = active[np.sort(keep)]
    return result


@dataclass
class MambaResult:
    best: SGConfig
    configs: list
    halving: HalvingResult
    log: list            # one dict per (round, arm): config, budget, steps, priced_out, metric, ...
    seconds: float


def make_grid(sampler: str, log10_step_sizes, batch_sizes, n_leapfrogs=(1,)) -> list:
    """Arms = step size x batch size (x L for SGHMC), step size varying fastest (the code's order).
    Step sizes are given as log10 h; every value in (0, 1) would be steps between 1 and 10, most likely
    step sizes passed for their logarithms, and is refused."""
    require_str(sampler, "sampler", SAMPLERS)
    log10_h = float_array(require_sequence(log10_step_sizes, "log10_step_sizes"), "log10_step_sizes")
    if log10_h.ndim != 1 or log10_h.size == 0 or not np.all(np.isfinite(log10_h)):
        raise ValueError(f"log10_step_sizes must be a non-empty list of finite numbers, got {log10_step_sizes!r}")
    if np.all((log10_h > 0) & (log10_h < 1)):
        raise ValueError(f"log10_step_sizes must be the log10 of the step sizes; {log10_step_sizes!r} would be "
                         "steps between 1 and 10 (pass np.log10(step_sizes))")
    batches = [require_int(n, f"batch_sizes[{i}]", minimum=1)
               for i, n in enumerate(require_sequence(batch_sizes, "batch_sizes"))]
    leapfrogs = [require_int(L, f"n_leapfrogs[{i}]", minimum=1)
                 for i, L in enumerate(require_sequence(n_leapfrogs, "n_leapfrogs"))]
    if not sampler.startswith("sghmc"):
        leapfrogs = [1]
    return [SGConfig(sampler, float(10.0**lh), n, L) for L in leapfrogs for n in batches for lh in log10_h]


def _cheapest_step(target, configs, budget_kind, centre, cost_model) -> dict:
    """{batch size: the least an arm of that batch size pays for one step}, in the budget's units (an arm's
    step costs the same whatever its step size, so one sampler per batch size and L is priced). Prices on a
    copy of the target, whose gradient count stays as it was."""
    target = copy.copy(target)
    cheapest = {}
    for c in {(c.sampler, c.batch_size, c.n_leapfrog): c for c in configs}.values():
        sampler = SGMCMC(target, c.sampler, c.step_size, c.batch_size, c.n_leapfrog, centre, cost_model=cost_model)
        cost = sampler.cost_per_step if budget_kind == "gradients" else sampler.model_cost_per_step
        cheapest[c.batch_size] = min(cost, cheapest.get(c.batch_size, math.inf))
    return cheapest


def _check_counted(configs, budget_kind, cost_model):
    require_sequence(configs, "configs", SGConfig, "SGConfig")
    if not configs:
        raise ValueError("configs must be a non-empty list of SGConfig")
    require_str(budget_kind, "budget_kind", ("gradients", "model"))
    if budget_kind == "model" and cost_model is None:
        raise ValueError("budget_kind 'model' needs a cost_model")


def priced_out_batches(target, configs, budget: float, budget_kind: str = "gradients", centre=None,
                       cost_model: CostModel | None = None, eta: int = 3, min_steps: int = 2) -> list:
    """The batch sizes of which MAMBA (``mamba`` with these arguments) prices out every arm in round 0:
    the round's budget r_0 buys none of them ``min_steps`` steps, so MAMBA never compares them and its
    choice among the others is forced. Counted budgets only (a clock depends on the machine)."""
    _check_counted(configs, budget_kind, cost_model)
    r0 = halving_budgets(len(configs), budget, eta)[0]
    cheapest = _cheapest_step(target, configs, budget_kind, centre, cost_model)
    return sorted(n for n, cost in cheapest.items() if math.floor(r0 / cost + 1e-9) < min_steps)


def budget_scoring_every_batch(target, configs, budget_kind: str = "gradients", centre=None,
                               cost_model: CostModel | None = None, eta: int = 3, min_steps: int = 2) -> float:
    """The smallest budget R under which round 0 lets the cheapest arm of every batch size take
    ``min_steps`` steps, so that MAMBA scores an arm of each: R = (1 + eta + ... + eta^(K-1)) x min_steps x
    the dearest of those cheapest steps (r_0 = R / that sum, eq. eq-mamba-halving)."""
    _check_counted(configs, budget_kind, cost_model)
    n_arms = len(configs)
    k = n_rounds(n_arms, require_int(eta, "eta", minimum=2))
    cheapest = _cheapest_step(target, configs, budget_kind, centre, cost_model)
    return sum(eta**i for i in range(k)) * require_int(min_steps, "min_steps", minimum=1) * max(cheapest.values())


def mamba(target, configs, x0, budget: float, rng, metric: str = "ksd", eta: int = 3, centre=None,
          budget_kind: str = "gradients", thin: int = 10, max_points=None, min_kept: int = 10,
          min_steps: int = 2, cost_model: CostModel | None = None,
          require_every_batch: bool = False, stale_gradient: bool = False) -> MambaResult:
    """MAMBA (Algorithm 1): successive halving over SG-MCMC arms, reward = -Stein discrepancy.

    configs: list of SGConfig; x0: (d,) start of every chain; budget: R per surviving arm, in
    gradient evaluations, modelled seconds (``model``, with ``cost_model``) or seconds
    (``budget_kind``); centre: the control variates' centre. Each arm-round keeps every ``thin``-th
    draw, or more when that would keep fewer than ``min_kept`` (adaptive thinning).

    The paper's clock: in round i every surviving arm runs for r_i (``halving_budgets``) and is scored on
    that round's draws; a round's budget never carries over to the next. Counted budgets: the arm takes
    the floor(r_i / cost per step) steps r_i buys; if that is fewer than ``min_steps`` (2, the fewest that
    can be scored) it takes no step and is *priced out*: its metric is +inf, so it ranks after every scored
    arm, like a diverged one. Seconds: the arm runs while its clock is below r_i and is priced out if it
    took fewer than ``min_steps`` steps. No arm spends more than r_i in a round (seconds: up to the timing
    of its last step). The log has one row per arm-round: the config, ``budget`` (r_i), ``steps``, ``thin``,
    ``kept``, ``round_spent`` and ``spent`` (this round's and the arm's total spending), ``priced_out``,
    ``metric``, ``diverged`` and ``advanced`` (it went on to the next round; in the last round: chosen).
    ``require_every_batch``: refuse a counted budget whose round 0 would price out every arm of a batch size
    (``priced_out_batches``), naming the smallest budget that scores each (``budget_scoring_every_batch``).
    ``stale_gradient``: SGHMC in the code's order (``SGMCMC``).
    """
    rng = require_rng(rng)
    if not configs or not all(isinstance(c, SGConfig) for c in configs):
        raise ValueError("configs must be a non-empty list of SGConfig")
    if metric not in METRICS:
        raise ValueError(f"metric must be one of {METRICS}, got {metric!r}")
    if budget_kind not in BUDGET_KINDS:
        raise ValueError(f"budget_kind must be one of {BUDGET_KINDS}, got {budget_kind!r}")
    x0 = np.asarray(x0, dtype=float)
    if x0.shape != (target.dim,) or not np.all(np.isfinite(x0)):
        raise ValueError(f"x0 must be a finite array of shape ({target.dim},), got {x0.shape}")
    thin = require_int(thin, "thin", minimum=1)
    min_steps = require_int(min_steps, "min_steps", minimum=1)
    stale_gradient = require_bool(stale_gradient, "stale_gradient")
    if budget_kind == "model" and cost_model is None:
        raise ValueError("budget_kind 'model' needs a cost_model")
    if require_bool(require_every_batch, "require_every_batch") and budget_kind != "seconds":
        priced_out = priced_out_batches(target, configs, budget, budget_kind, centre, cost_model, eta, min_steps)
        if priced_out:
            needed = budget_scoring_every_batch(target, configs, budget_kind, centre, cost_model, eta, min_steps)
            raise ValueError(f"budget {budget:g} ({budget_kind}) lets round 0 score no arm of batch size(s) "
                             f"{priced_out}, so MAMBA would never compare them: give a budget of at least "
                             f"{needed:g}")
    states: dict = {}
    log = []
    start = time.perf_counter()
    spent = np.zeros(len(configs))      # each arm's spending so far (budget units)

    def row(i, a, per_arm, **values):
        return {"round": i, "arm": int(a), **configs[a].__dict__, "budget": per_arm, **values}

    def run_group(arms, per_arm, i):
        cfg = configs[arms[0]]
        sampler = SGMCMC(target, cfg.sampler, [configs[a].step_size for a in arms], cfg.batch_size,
                         cfg.n_leapfrog, centre, stale_gradient=stale_gradient, cost_model=cost_model)
        n_steps = None
        if budget_kind != "seconds":
            n_steps = steps_for_budget(sampler, per_arm, budget_kind)    # what this round's r_i buys
            if n_steps < min_steps:         # priced out: no step this round, ranked last
                for a in arms:
                    log.append(row(i, a, per_arm, steps=0, thin=thin, kept=0, round_spent=0.0,
                                   spent=float(spent[a]), priced_out=True, metric=math.inf, diverged=False))
                return [math.inf] * len(arms)
        fresh = [a not in states for a in arms]
        if all(fresh):                      # an arm's first round that it runs (round 0, or priced out so far)
            state = sampler.init(np.tile(x0, (len(arms), 1)), rng)
        elif any(fresh):
            raise RuntimeError("the arms of a group must share their history")   # same config, same rounds
        else:
            rows = [states[a] for a in arms]
            state = SGState(*(np.stack([r[k] for r in rows]) for k in range(3)))
        if budget_kind != "seconds":
            out = run_sgmcmc(sampler, state, rng, 0.0, budget_kind, thin, min_kept, n_steps=n_steps)
            used = n_steps * (sampler.cost_per_step if budget_kind == "gradients" else sampler.model_cost_per_step)
        else:
            out = run_sgmcmc(sampler, state, rng, per_arm, budget_kind, thin, min_kept)
            used = out.seconds
        priced_out = out.n_steps < min_steps    # under a time budget: too few steps within r_i to be scored
        values = []
        for j, a in enumerate(arms):
            states[a] = tuple(part[j] for part in out.state)
            spent[a] += used
            value = math.inf if priced_out else stein_discrepancy(target, out.samples[:, j], metric, rng, max_points)
            values.append(value)
            log.append(row(i, a, per_arm, steps=out.n_steps, thin=out.thin, kept=len(out.samples),
                           round_spent=float(used), spent=float(spent[a]), priced_out=bool(priced_out),
                           metric=value, diverged=bool(out.diverged[j])))
        return values

    def pull(active, per_arm, i):
        metrics = {}
        if budget_kind != "seconds":                  # counted budgets: same steps, one batch of chains
            groups: dict = {}
            for a in active:
                c = configs[a]
                groups.setdefault((c.sampler, c.batch_size, c.n_leapfrog), []).append(int(a))
            for arms in groups.values():
                metrics.update(zip(arms, run_group(arms, per_arm, i)))
        else:
            for a in active:
                metrics[int(a)] = run_group([int(a)], per_arm, i)[0]
        return [metrics[int(a)] for a in active]

    halving = successive_halving(len(configs), pull, budget, eta)
    rounds = halving.rounds
    for entry in log:                                 # which arms went on (in the last round: the chosen one)
        i = entry["round"]
        entry["advanced"] = (entry["arm"] in set(rounds[i + 1]["arms"].tolist()) if i + 1 < len(rounds)
                             else entry["arm"] == halving.best)
    return MambaResult(configs[halving.best], list(configs), halving, log, time.perf_counter() - start)


def predictive_log_loss(draws, X_test, t_test) -> float:
    """-mean_i log p(t_i | x_i, draws), p = mean over draws of sigmoid((2t-1) x.theta); +inf if
    the draws are not finite."""
    X_test = float_array(X_test, "X_test")
    if X_test.ndim != 2:
        raise ValueError(f"X_test must be a matrix (n_test, d), got shape {X_test.shape}")
    t_test = float_array(t_test, "t_test")
    if t_test.shape != (X_test.shape[0],) or not np.all((t_test == 0) | (t_test == 1)):
        raise ValueError(f"t_test must hold one label 0 or 1 per row of X_test, shape ({X_test.shape[0]},), "
                         f"got shape {t_test.shape}")
    draws = _draws(draws, X_test.shape[1], "draws")
    if not np.all(np.isfinite(draws)):
        return math.inf
    signed = (X_test @ draws.T) * (2.0 * t_test[:, None] - 1.0)   # (n_test, M)
    log_p = -np.logaddexp(0.0, -signed)
    m = log_p.max(axis=1, keepdims=True)
    log_mean = m[:, 0] + np.log(np.mean(np.exp(log_p - m), axis=1))
    return float(-np.mean(log_mean))


def heuristic_config(sampler: str, n_data: int, n_leapfrog: int = 10, n_total: int | None = None) -> SGConfig:
    """h = 1/N, batch 10% of the N training data (L = 10 for SGHMC); ``n_total`` replaces N in h
    (the original code's logistic regression uses all 10^6 rows, training and test: h = 1e-6)."""
    require_str(sampler, "sampler", SAMPLERS)
    n_data = require_int(n_data, "n_data", minimum=1)
    n_h = n_data if n_total is None else require_int(n_total, "n_total", minimum=1)
    return SGConfig(sampler, 1.0 / n_h, max(1, n_data // 10),
                    n_leapfrog if sampler.startswith("sghmc") else 1)


def adam_iterate(target, x0, batch_size: int, n_steps: int, rng, learning_rate: float = 1e-2,
                 b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8) -> np.ndarray:
    """Adam ascent on log pi with minibatch gradients (eq-mamba-sg) from x0 (d,): the iterate the
    original code starts its tuning from (and centres its control variates on)."""
    rng = require_rng(rng)
    n_steps = require_int(n_steps, "n_steps", minimum=1)
    require_positive(learning_rate, "learning_rate")
    x = np.asarray(x0, dtype=float)[None].copy()
    if x.shape != (1, target.dim) or not np.all(np.isfinite(x)):
        raise ValueError(f"x0 must be a finite array of shape ({target.dim},), got {np.shape(x0)}")
    grad_fn = GradientEstimator(target, batch_size)
    m, v = np.zeros_like(x), np.zeros_like(x)
    for k in range(1, n_steps + 1):
        g = grad_fn(rng, x)
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        x = x + learning_rate * (m / (1 - b1**k)) / (np.sqrt(v / (1 - b2**k)) + eps)
    return x[0]


def sghmc_position_gain(h_lambda, n_leapfrog: int = 10, alpha: float = 0.01, stale_gradient: bool = True) -> float:
    """|x_L / x_0| of SGHMC's L steps (eq-mamba-sghmc) on the quadratic -lambda x^2 / 2 without noise,
    from a velocity of zero (the fresh velocity adds noise, not gain): the factor by which one stored
    sample multiplies the position along a direction of curvature lambda. stale_gradient: the
    gradient before the move (the original code), else after it (Chen et al.)."""
    hl = require_number(h_lambda, "h_lambda")
    alpha = require_number(alpha, "alpha")
    stale_gradient = require_bool(stale_gradient, "stale_gradient")
    if stale_gradient:          # (x, v) -> (x + v, v - hl x - alpha v)
        step = np.array([[1.0, 1.0], [-hl, 1.0 - alpha]])
    else:                       # (x, v) -> (x + v, v - hl (x + v) - alpha v)
        step = np.array([[1.0, 1.0], [-hl, 1.0 - alpha - hl]])
    return float(abs(np.linalg.matrix_power(step, require_int(n_leapfrog, "n_leapfrog", minimum=1))[0, 0]))


def grid_search(target, configs, x0, n_steps: int, rng, loss_fn, centre=None, thin: int = 10,
                shared_minibatch: bool = False, stale_gradient: bool = False):
    """Run every config for n_steps steps from x0 (d,) and keep the lowest loss_fn(draws (M, d)),
    draws thinned by ``thin``; configs sharing sampler, batch and L run as one batch of chains
    (with one minibatch for all of them if ``shared_minibatch``, as the authors' code does).
    ``stale_gradient``: SGHMC in the code's order (``SGMCMC``).
    Returns (best SGConfig, list of losses in config order)."""
    rng = require_rng(rng)
    stale_gradient = require_bool(stale_gradient, "stale_gradient")
    n_steps = require_int(n_steps, "n_steps", minimum=1)
    require_callable(loss_fn, "loss_fn")
    if not configs or not all(isinstance(c, SGConfig) for c in configs):
        raise ValueError("configs must be a non-empty list of SGConfig")
    groups: dict = {}
    for i, c in enumerate(configs):
        groups.setdefault((c.sampler, c.batch_size, c.n_leapfrog), []).append(i)
    losses = np.full(len(configs), np.inf)
    for (name, batch, leapfrog), members in groups.items():
        sampler = SGMCMC(target, name, [configs[i].step_size for i in members], batch, leapfrog, centre,
                         stale_gradient=stale_gradient, shared_minibatch=shared_minibatch)
        state = sampler.init(np.tile(np.asarray(x0, float), (len(members), 1)), rng)
        out = run_sgmcmc(sampler, state, rng, n_steps * sampler.cost_per_step, "gradients", thin)
        for j, i in enumerate(members):
            loss = loss_fn(out.samples[:, j])
            losses[i] = loss if np.isfinite(loss) else np.inf
    return configs[int(np.argmin(losses))], list(losses)


from scipy import optimize

from mcmc_lib.targets import Target


def _scatter_rows(rows, values, n_rows: int) -> np.ndarray:
    """Sum the rows of values (m, k) into n_rows rows by the row index rows (m,): (n_rows, k)."""
    return np.stack([np.bincount(rows, weights=values[:, j], minlength=n_rows)
                     for j in range(values.shape[1])], axis=1)


class FullDataTarget(Target):
    """A posterior over N data whose subclass gives ``_full(theta, want_logp)`` (log density and
    gradient over all the data) and ``minibatch_grads(theta, idx)`` (one estimate per chain)."""

    def _logp(self, theta):
        return self._full(theta, True)[0]

    def _grad(self, theta):
        return self._full(theta, False)[1]

    def _logp_and_grad(self, theta):
        return self._full(theta, True)

    def minibatch_grad(self, theta, indices) -> np.ndarray:
        """The same minibatch indices (n,) for every chain of theta (c, d)."""
        theta = np.atleast_2d(np.asarray(theta, dtype=float))
        indices = np.asarray(indices)
        return self.minibatch_grads(theta, np.broadcast_to(indices, (theta.shape[0], len(indices))))


class PMF(FullDataTarget):
    """Probabilistic matrix factorisation, eq. (eq-mamba-pmf), gradients eq. (eq-mamba-pmf-grad).

    theta = [U (n_users x D), V (n_items x D), mu_U, lam_U, mu_V, lam_V], flattened row by row.
    ``minibatch_grads(theta, idx)``: one unbiased estimate per chain from the ratings idx (c, n),
    the likelihood scaled by N/n and the prior exact; counted as n/N gradient evaluations per chain.
    """

    def __init__(self, users, items, ratings, n_users: int, n_items: int, latent_dim: int = 20,
                 alpha: float = 3.0, mu0: float = 0.0, a0: float = 4.0, b0: float = 5.0, name: str = "PMF"):
        users, items = np.asarray(users), np.asarray(items)
        ratings = np.asarray(ratings, dtype=float)
        n_users = require_int(n_users, "n_users", minimum=1)
        n_items = require_int(n_items, "n_items", minimum=1)
        self.D = require_int(latent_dim, "latent_dim", minimum=1)
        if users.ndim != 1 or users.shape != items.shape or users.shape != ratings.shape or len(users) == 0:
            raise ValueError("users, items and ratings must be non-empty 1-d arrays of the same length")
        if users.min() < 0 or users.max() >= n_users or items.min() < 0 or items.max() >= n_items:
            raise ValueError(f"users must lie in [0, {n_users}) and items in [0, {n_items})")
        if not np.all(np.isfinite(ratings)):
            raise ValueError("ratings must be finite")
        self.alpha = float(require_positive(alpha, "alpha"))
        self.a0, self.b0 = float(require_positive(a0, "a0")), float(require_positive(b0, "b0"))
        self.mu0 = float(mu0)
        self.users, self.items, self.ratings = users.astype(np.int64), items.astype(np.int64), ratings
        self.n_users, self.n_items, self.n_data = n_users, n_items, len(ratings)
        super().__init__((n_users + n_items) * self.D + 4 * self.D)
        self.name = name
        self.blocks = (n_users * self.D, n_items * self.D) + (self.D,) * 4   # U, V, mu_U, lam_U, mu_V, lam_V

    def unpack(self, theta):
        """Views U (c, n_users, D), V (c, n_items, D), mu_U, lam_U, mu_V, lam_V (c, D)."""
        c, D = theta.shape[0], self.D
        nu, ni = self.n_users * D, self.n_items * D
        rest = theta[:, nu + ni:].reshape(c, 4, D)
        return (theta[:, :nu].reshape(c, self.n_users, D), theta[:, nu:nu + ni].reshape(c, self.n_items, D),
                rest[:, 0], rest[:, 1], rest[:, 2], rest[:, 3])

    def _prior(self, theta, want_logp: bool = False):
        """Log prior (c,) (or None) and its gradient (c, dim)."""
        U, V, muU, lamU, muV, lamV = self.unpack(theta)
        grad = np.zeros_like(theta)
        gU, gV, gmuU, glamU, gmuV, glamV = self.unpack(grad)
        logp = np.zeros(theta.shape[0])
        for W, mu, lam, gW, gmu, glam in ((U, muU, lamU, gU, gmuU, glamU), (V, muV, lamV, gV, gmuV, glamV)):
            prec = np.exp(lam)                                      # (c, D)
            dev = W - mu[:, None, :]                                # (c, n_W, D)
            ss = np.sum(dev**2, axis=1) + (mu - self.mu0) ** 2      # S_W (c, D)
            shape = 0.5 * (W.shape[1] + 1) + self.a0
            gW[...] = -prec[:, None, :] * dev
            gmu[...] = prec * (np.sum(dev, axis=1) - (mu - self.mu0))
            glam[...] = shape - 0.5 * prec * ss - self.b0 * prec
            if want_logp:
                logp += np.sum(shape * lam - 0.5 * prec * ss - self.b0 * prec, axis=1)
        return (logp if want_logp else None), grad

    def _likelihood(self, theta, idx, scale: float, grad, want_logp: bool = False):
        """Add scale x the likelihood gradient of the ratings idx (c, n) to grad (in place);
        return scale x the log-likelihood (c,) when want_logp."""
        U, V = self.unpack(theta)[:2]
        gU, gV = self.unpack(grad)[:2]
        c, n = idx.shape
        u, i = self.users[idx], self.items[idx]                      # (c, n)
        chain = np.arange(c)[:, None]
        Uu, Vi = U[chain, u], V[chain, i]                            # (c, n, D)
        resid = self.ratings[idx] - np.einsum("cnd,cnd->cn", Uu, Vi)
        w = (scale * self.alpha) * resid[..., None]
        gU += _scatter_rows((chain * self.n_users + u).ravel(), (w * Vi).reshape(c * n, -1),
                            c * self.n_users).reshape(gU.shape)
        gV += _scatter_rows((chain * self.n_items + i).ravel(), (w * Uu).reshape(c * n, -1),
                            c * self.n_items).reshape(gV.shape)
        return -0.5 * scale * self.alpha * np.sum(resid**2, axis=1) if want_logp else None

    def _full(self, theta, want_logp: bool):
        logp, grad = self._prior(theta, want_logp)
        everything = np.arange(self.n_data)
        for start in range(0, theta.shape[0], 4):                    # 4 chains at a time (memory)
            part = slice(start, start + 4)
            g = grad[part]
            ll = self._likelihood(theta[part], np.broadcast_to(everything, (g.shape[0], self.n_data)), 1.0, g,
                                  want_logp)
            if want_logp:
                logp[part] += ll
        return logp, grad

    def minibatch_grads(self, theta, idx) -> np.ndarray:
        """(N/n) x the likelihood gradient of each chain's minibatch idx (c, n), plus the prior's."""
        theta = np.asarray(theta, dtype=float)
        idx = np.asarray(idx)
        self.n_grad_evals += idx.shape[0] * idx.shape[1] / self.n_data
        grad = self._prior(theta)[1]
        self._likelihood(theta, idx, self.n_data / idx.shape[1], grad)
        return grad

    def predict(self, theta, users, items) -> np.ndarray:
        """Predicted (centred) ratings U_u . V_i, (c, len(users))."""
        U, V = self.unpack(np.atleast_2d(theta))[:2]
        return np.einsum("cnd,cnd->cn", U[:, users], V[:, items])


def lbfgs_mode(target, x0, max_iter: int = 1000) -> np.ndarray:
    """The posterior mode by L-BFGS on -log pi from x0 (d,) (a dense BFGS does not fit in memory
    for tens of thousands of parameters); returns the last iterate if max_iter is reached."""
    require_target(target)
    x0 = np.asarray(x0, dtype=float)
    if x0.shape != (target.dim,) or not np.all(np.isfinite(x0)):
        raise ValueError(f"x0 must be a finite array of shape ({target.dim},), got {x0.shape}")
    max_iter = require_int(max_iter, "max_iter", minimum=1)

    def objective(w):
        logp, grad = target.logp_and_grad(w[None])
        return -float(logp[0]), -grad[0]

    return optimize.minimize(objective, x0, jac=True, method="L-BFGS-B",
                             options={"maxiter": max_iter, "maxcor": 20, "gtol": 1e-8}).x


def _softmax(z):
    z = z - z.max(axis=-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=-1, keepdims=True)


class BayesNN(FullDataTarget):
    """One hidden layer, softmax activations (eq-mamba-nn), N(0, prior_var) on every weight;
    backpropagation written out (eq-mamba-nn-grad). theta = [B (p x H), b (H), A (H x K), a (K)]."""

    def __init__(self, X, y, n_hidden: int = 100, n_classes: int = 10, prior_var: float = 1.0,
                 name: str = "Bayesian neural network"):
        X = np.asarray(X, dtype=float)
        y = np.asarray(y)
        if X.ndim != 2 or y.shape != (X.shape[0],) or X.shape[0] == 0 or not np.all(np.isfinite(X)):
            raise ValueError(f"X must be a finite (n, p) array and y (n,), got {X.shape} and {y.shape}")
        self.H = require_int(n_hidden, "n_hidden", minimum=1)
        self.K = require_int(n_classes, "n_classes", minimum=2)
        if not np.all((y >= 0) & (y < self.K) & (y == np.round(y))):
            raise ValueError(f"y must hold integer labels in [0, {self.K})")
        self.prior_var = float(require_positive(prior_var, "prior_var"))
        self.X, self.y = X, y.astype(np.int64)
        self.n_data, self.p = X.shape
        super().__init__(self.p * self.H + self.H + self.H * self.K + self.K)
        self.name = name
        self.blocks = (self.p * self.H, self.H, self.H * self.K, self.K)      # B, b, A, a

    def unpack(self, theta):
        """Views B (c, p, H), b (c, H), A (c, H, K), a (c, K)."""
        c, p, H, K = theta.shape[0], self.p, self.H, self.K
        return (theta[:, :p * H].reshape(c, p, H), theta[:, p * H:p * H + H],
                theta[:, p * H + H:p * H + H + H * K].reshape(c, H, K), theta[:, -K:])

    def forward(self, theta, X):
        """Hidden activations (c, n, H) and class log-probabilities (c, n, K); X (n, p) or (c, n, p)."""
        B, b, A, a = self.unpack(np.atleast_2d(theta))
        hidden = _softmax(X @ B + b[:, None, :])
        logits = hidden @ A + a[:, None, :]
        logits = logits - logits.max(axis=-1, keepdims=True)
        return hidden, logits - np.log(np.sum(np.exp(logits), axis=-1, keepdims=True))

    def predict_proba(self, theta, X) -> np.ndarray:
        """Class probabilities (c, n, K) of each chain's weights."""
        return np.exp(self.forward(theta, X)[1])

    def _loglik_grad(self, theta, Xb, yb, scale: float, want_logp: bool = False):
        """scale x (log-likelihood (c,) or None, its gradient (c, dim)); Xb (n, p) or (c, n, p)."""
        A = self.unpack(theta)[2]
        hidden, logprob = self.forward(theta, Xb)
        c, n, K = logprob.shape
        yb = np.broadcast_to(yb, (c, n))
        onehot = np.zeros((c, n, K))
        np.put_along_axis(onehot, yb[..., None], 1.0, axis=-1)
        delta2 = scale * (onehot - np.exp(logprob))                             # d loglik / d logits
        g_hidden = delta2 @ np.swapaxes(A, 1, 2)
        delta1 = hidden * (g_hidden - np.sum(g_hidden * hidden, axis=-1, keepdims=True))   # softmax Jacobian
        gB = (Xb.T @ delta1) if Xb.ndim == 2 else np.swapaxes(Xb, 1, 2) @ delta1
        grad = np.concatenate([gB.reshape(c, -1), delta1.sum(axis=1),
                               (np.swapaxes(hidden, 1, 2) @ delta2).reshape(c, -1), delta2.sum(axis=1)], axis=1)
        logp = scale * np.take_along_axis(logprob, yb[..., None], axis=-1).sum(axis=(1, 2)) if want_logp else None
        return logp, grad

    def _full(self, theta, want_logp: bool):
        parts = [self._loglik_grad(theta[s:s + 8], self.X, self.y, 1.0, want_logp)
                 for s in range(0, theta.shape[0], 8)]
        grad = np.concatenate([g for _, g in parts]) - theta / self.prior_var
        if not want_logp:
            return None, grad
        return np.concatenate([l for l, _ in parts]) - 0.5 * np.sum(theta**2, axis=1) / self.prior_var, grad

    def minibatch_grads(self, theta, idx) -> np.ndarray:
        """(N/n) x the log-likelihood gradient of each chain's minibatch idx (c, n), plus the prior's."""
        theta = np.asarray(theta, dtype=float)
        idx = np.asarray(idx)
        self.n_grad_evals += idx.shape[0] * idx.shape[1] / self.n_data
        grad = self._loglik_grad(theta, self.X[idx], self.y[idx], self.n_data / idx.shape[1])[1]
        return grad - theta / self.prior_var


def calibration_errors(prob, labels, n_bins: int = 10) -> tuple:
    """(ECE, MCE) of eq. (eq-mamba-ece): prob (n, K) predictive probabilities, labels (n,);
    n_bins bins of equal width over [0, 1], the last one closed."""
    prob = np.asarray(prob, dtype=float)
    labels = np.asarray(labels)
    n_bins = require_int(n_bins, "n_bins", minimum=1)
    if prob.ndim != 2 or labels.shape != (prob.shape[0],) or not np.all(np.isfinite(prob)):
        raise ValueError(f"prob must be a finite (n, K) array and labels (n,), got {prob.shape} and {labels.shape}")
    conf = prob.max(axis=1)
    correct = (prob.argmax(axis=1) == labels).astype(float)
    bins = np.clip((conf * n_bins).astype(int), 0, n_bins - 1)
    count = np.bincount(bins, minlength=n_bins)
    gap = np.abs(np.bincount(bins, weights=correct, minlength=n_bins)
                 - np.bincount(bins, weights=conf, minlength=n_bins))       # |B_j| |acc_j - conf_j|
    filled = count > 0
    return float(gap.sum() / len(conf)), float(np.max(gap[filled] / count[filled]))


KSD_WAYS = ("full, all", "full, thinned", "stochastic, all", "stochastic, thinned")


def stochastic_scores(target, points, batch_size: int, rng, max_elements: int = 5_000_000) -> np.ndarray:
    """Unbiased minibatch estimates (eq-mamba-sg) of grad log pi at points (M, d): the prior's gradient plus
    N/n times the likelihood gradients of a fresh minibatch of batch_size rows per point, drawn uniformly
    without replacement with rng, independently across points; the full-data score (full_scores) when
    batch_size = N. Points are processed in chunks of about max_elements gathered values."""
    rng = require_rng(rng)
    points = np.asarray(points, dtype=float)
    if points.ndim != 2 or points.shape[1] != target.dim:
        raise ValueError(f"points must be an array (M, {target.dim}), got shape {points.shape}")
    estimator = GradientEstimator(target, batch_size)
    if estimator.full:
        return full_scores(target, points)
    n, n_data = estimator.batch_size, estimator.n_data
    width = target.X.shape[1] if hasattr(target, "X") else 1_000
    chunk = max(1, max_elements // (target.dim + n * width))
    out = np.empty_like(points)
    for start in range(0, len(points), chunk):
        part = points[start:start + chunk]
        idx = np.stack([rng.choice(n_data, n, replace=False) for _ in range(len(part))])
        out[start:start + len(part)] = estimator._minibatch([part], idx)[0]
    return out


def _ksd_or_inf(points, scores) -> float:
    """diagnostics.ksd in row blocks of at most ~2e6 kernel entries; +inf for fewer than two points or
    non-finite points or scores."""
    if len(points) < 2 or not (np.all(np.isfinite(points)) and np.all(np.isfinite(scores))):
        return math.inf
    value = diagnostics.ksd(points, scores, block_size=max(1, min(512, 2_000_000 // len(points))))
    return value if np.isfinite(value) else math.inf


def ksd_four_ways(target, draws, batch_size: int, rng, thin: int = 5) -> dict:
    """The KSD of draws (M, d) the four ways of the paper's appendix B.2 (keys KSD_WAYS): with full-data
    scores or stochastic ones (stochastic_scores at batch_size, one fresh minibatch per draw), on all draws
    or on every thin-th (from the first; the thinned stochastic KSD uses the same draws' stochastic scores).
    +inf for non-finite draws or scores (a diverged chain) or fewer than two draws."""
    draws = np.asarray(draws, dtype=float)
    thin = require_int(thin, "thin", minimum=1)
    if draws.ndim != 2 or draws.shape[1] != target.dim:
        raise ValueError(f"draws must be an array (M, {target.dim}), got shape {draws.shape}")
    if not np.all(np.isfinite(draws)):
        return dict.fromkeys(KSD_WAYS, math.inf)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        full = full_scores(target, draws)
        stochastic = stochastic_scores(target, draws, batch_size, rng)
        return {"full, all": _ksd_or_inf(draws, full), "full, thinned": _ksd_or_inf(draws[::thin], full[::thin]),
                "stochastic, all": _ksd_or_inf(draws, stochastic),
                "stochastic, thinned": _ksd_or_inf(draws[::thin], stochastic[::thin])}
