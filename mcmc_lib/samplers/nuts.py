"""The No-U-Turn sampler (NUTS) with multinomial trajectory sampling, as in Stan.

One transition from x, for one chain (Hoffman & Gelman 2014; Betancourt 2017, "A conceptual
introduction to Hamiltonian Monte Carlo", appendix A):

1. draw a momentum p ~ N(0, M), M = diag(1 / inv_metric); H(x, p) = -log pi(x) + p^T M^{-1} p / 2;
2. repeat, for depth j = 0, 1, ..., max_tree_depth - 1: pick a direction (forward or backward,
   probability 1/2 each) and integrate a new subtree of 2^j leapfrog steps from that end of the
   trajectory. Each point z gets the weight w(z) = exp(H0 - H(z)).
   - The new subtree is discarded, and the doubling stops, if the subtree is invalid: one of its
     points diverged (H(z) - H0 > max_energy_error, counted as a divergence; or a non-finite
     log density or gradient, counted as non-finite, not as a divergence), or one of its
     sub-subtrees made a U-turn. So a divergent point never becomes the state.
   - Otherwise the sample moves to the subtree's own proposal with probability
     min(1, W_new / W_old) (biased progressive sampling, W = sum of weights), and the two halves
     are merged. Inside a subtree the proposal is drawn by weight: the later half's proposal wins
     with probability W_later / (W_earlier + W_later).
   - The doubling stops when the merged trajectory makes a U-turn.
3. The generalised no-U-turn criterion (Betancourt 2017) on a (sub)trajectory from z- to z+, with
   rho = sum of its momenta, is

       rho . M^{-1} p-  > 0   and   rho . M^{-1} p+  > 0.

   As in Stan, when two halves A (earlier) and B (later) are merged the criterion is checked on A+B,
   and also on A plus the first point of B and on the last point of A plus B, which catches U-turns
   that fall between the two halves (e.g. on strongly correlated Gaussians).

The acceptance statistic reported (and used by the step-size adaptation) is the mean over the
leapfrog steps of the transition of min(1, w(z)) (Stan's "accept_stat").

Warm-up (``adapt``, called by the harness after each warm-up step):

- step size: dual averaging (Hoffman & Gelman 2014, Algorithm 5) of log eps toward the target
  acceptance statistic, restarted (mu = log(10 eps)) after every metric update; at the end of
  warm-up the step size is fixed at exp(log eps_bar);
- metric (``metric="diagonal"``): Stan's windows. A fast window of 75 iterations, slow windows of
  25, 50, 100, ... iterations (the last one stretched to end 50 iterations before the end of
  warm-up), and a final fast window of 50 iterations. At the end of each slow window the inverse
  metric becomes the regularised variance of that window's draws,
  (n/(n+5)) var + 1e-3 * 5/(n+5), and the step size is re-initialised by the heuristic below.
  With 20 <= n_warmup < 150 the windows are scaled as Stan does (15% fast / 75% slow / 10% fast,
  one slow window); with n_warmup < 20 the metric is not adapted (it stays the identity) and only
  the step size is.
- initial step size (``step_size=None``) and re-initialisation after a metric update: Hoffman &
  Gelman's heuristic (Algorithm 4), doubling or halving eps until the one-step acceptance ratio
  crosses 1/2. It needs random momenta, and ``adapt`` receives no generator, so the heuristic runs
  at the beginning of the next ``step``. Its leapfrog steps are counted in ``n_tuning_leapfrog``.

The sampler counts warm-up iterations itself (the number of ``adapt`` calls) and ends warm-up
after ``n_warmup`` of them. If the harness stops calling ``adapt`` earlier (a ``step`` follows a
``step``), warm-up ends at that point, with the step size exp(log eps_bar) reached so far; calls
to ``adapt`` after the end of warm-up are ignored. After warm-up NUTS is a fixed, pi-invariant
kernel.

NUTS trees cannot be vectorised over chains, so ``step`` loops over chains and evaluates the
target on one state at a time; every chain has its own step size, dual-averaging state and
metric, so chains are independent repeats.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..validation import (float_array, require_int, require_number, require_positive, require_positive_scalar,
                          require_probability, require_rng, require_str, require_target)
from .base import ChainState, Sampler, StepInfo, per_chain

METRICS = ("identity", "diagonal")
LOG_HALF = np.log(0.5)


# =====================================================================================
# One trajectory of one chain
# =====================================================================================
class _Point(NamedTuple):
    """A point of phase space, with the log density and gradient at x (so each costs one evaluation)."""
    x: np.ndarray
    p: np.ndarray
    logp: float
    grad: np.ndarray


class _Subtree(NamedTuple):
    """A run of consecutive leapfrog points.

    ``begin`` and ``end`` are its two end points (in integration order while it is being built, in
    time order once merged into the trajectory); ``proposal`` is a point drawn from it with
    probability proportional to its weight; ``rho`` is the sum of its momenta and ``log_weight``
    the log of the sum of its weights exp(H0 - H). ``valid`` is False if it diverged or U-turned.
    """
    begin: _Point
    end: _Point
    proposal: _Point
    rho: np.ndarray
    log_weight: float
    valid: bool


def no_u_turn(p_sharp_minus, p_sharp_plus, rho) -> bool:
    """The generalised criterion: rho . M^{-1}p- > 0 and rho . M^{-1}p+ > 0 (the ends still move apart)."""
    if not (type(rho) is np.ndarray and rho.ndim == 1 and getattr(p_sharp_minus, "shape", None) == rho.shape
            and getattr(p_sharp_plus, "shape", None) == rho.shape):
        arrays = [float_array(a, n) for a, n in ((p_sharp_minus, "p_sharp_minus"), (p_sharp_plus, "p_sharp_plus"),
                                                  (rho, "rho"))]
        if arrays[2].ndim != 1 or not arrays[0].shape == arrays[1].shape == arrays[2].shape:
            raise ValueError(f"p_sharp_minus, p_sharp_plus and rho must be vectors of one length (dim,), got shapes "
                             f"{arrays[0].shape}, {arrays[1].shape} and {arrays[2].shape}")
    return np.dot(p_sharp_minus, rho) > 0 and np.dot(p_sharp_plus, rho) > 0


class _Trajectory:
    """Builds the NUTS trajectory of one chain for one transition and keeps its running totals."""

    def __init__(self, target, step_size, inv_metric, max_energy_error, rng):
        self.target = target
        self.step_size = step_size
        self.inv_metric = inv_metric
        self.max_energy_error = max_energy_error
        self.rng = rng
        self.h0 = 0.0
        self.n_leapfrog = 0
        self.sum_accept = 0.0     # sum over leapfrog steps of min(1, exp(H0 - H))
        self.divergent = False    # a point with finite density had H - H0 > max_energy_error
        self.nonfinite = False    # a point had a NaN/inf log density or gradient

    def hamiltonian(self, point: _Point) -> float:
        """H = -log pi(x) + p^T M^{-1} p / 2, +inf if the log density or gradient is not finite."""
        if not (np.isfinite(point.logp) and np.all(np.isfinite(point.grad))):
            return np.inf
        h = -point.logp + 0.5 * np.dot(point.p, self.inv_metric * point.p)
        return h if np.isfinite(h) else np.inf

    def leapfrog(self, point: _Point, direction: int) -> _Point:
        """One leapfrog step of size h = direction * eps:
        p' = p + h/2 grad(x),  x' = x + h M^{-1} p',  p'' = p' + h/2 grad(x'). One gradient evaluation."""
        h = direction * self.step_size
        p = point.p + 0.5 * h * point.grad
        x = point.x + h * self.inv_metric * p
        logp, grad = self.target.logp_and_grad(x)
        grad = grad[0]
        return _Point(x, p + 0.5 * h * grad, float(logp[0]), grad)

    def leaf(self, point: _Point, direction: int) -> _Subtree:
        """A subtree of depth 0: one leapfrog step, with weight exp(H0 - H) and a divergence check."""
        new = self.leapfrog(point, direction)
        self.n_leapfrog += 1
        energy_error = self.hamiltonian(new) - self.h0
        valid = energy_error <= self.max_energy_error
        if not valid:
            # Both end the doubling; they are counted apart: the target's fault or the integrator's.
            if np.isfinite(new.logp) and np.all(np.isfinite(new.grad)):
                self.divergent = True
            else:
                self.nonfinite = True
        self.sum_accept += np.exp(min(0.0, -energy_error))
        return _Subtree(new, new, new, new.p, -energy_error, valid)

    def merge_ok(self, first: _Subtree, second: _Subtree) -> bool:
        """No U-turn on first+second, on first + second's first point, and on first's last point + second.

        The pairs are taken in the order the points were generated; the criterion is symmetric in
        its two ends, so a subtree built backward is checked on the same point sets as forward."""
        sharp = self.inv_metric
        return (no_u_turn(sharp * first.begin.p, sharp * second.end.p, first.rho + second.rho)
                and no_u_turn(sharp * first.begin.p, sharp * second.begin.p, first.rho + second.begin.p)
                and no_u_turn(sharp * first.end.p, sharp * second.end.p, first.end.p + second.rho))

    def build(self, point: _Point, depth: int, direction: int) -> _Subtree:
        """A subtree of 2^depth leapfrog steps from ``point`` (excluded), built as two halves.

        The second half's proposal is chosen with probability W_2 / (W_1 + W_2) (multinomial
        sampling within the subtree). An invalid half makes the whole subtree invalid, and the
        second half is not built when the first is invalid (saving its gradients)."""
        if depth == 0:
            return self.leaf(point, direction)
        first = self.build(point, depth - 1, direction)
        if not first.valid:
            return first
        second = self.build(first.end, depth - 1, direction)
        if not second.valid:
            return second
        log_weight = np.logaddexp(first.log_weight, second.log_weight)
        take_second = np.log(self.rng.random()) < second.log_weight - log_weight
        proposal = second.proposal if take_second else first.proposal
        return _Subtree(first.begin, second.end, proposal, first.rho + second.rho, log_weight,
                        self.merge_ok(first, second))


class _Transition(NamedTuple):
    """What one NUTS transition of one chain produced."""
    point: _Point
    moved: bool
    accept_stat: float
    depth: int
    n_leapfrog: int
    divergent: bool       # the energy error exceeded max_energy_error at finite densities
    nonfinite: bool       # the trajectory met a NaN/inf log density or gradient
    energy: float


def _check_one_chain(target, x, logp, grad, inv_metric, rng, step_size):
    """The arguments of ``nuts_transition`` and ``initial_step_size``: one chain's x, logp, grad (its slow path)."""
    require_target(target)
    require_rng(rng)
    x = float_array(x, "x")
    if x.shape != (target.dim,):
        raise ValueError(f"x must be one chain's state, shape ({target.dim},), got {x.shape}")
    for name, value in (("grad", grad), ("inv_metric", inv_metric)):
        if float_array(value, name).shape != x.shape:
            raise ValueError(f"{name} must have shape {x.shape}, got {np.shape(value)}")
    require_number(logp, "logp", finite=False)
    require_positive_scalar(step_size, "step_size")


def _one_chain_fast(target, x, grad, inv_metric, rng) -> bool:
    return (type(x) is np.ndarray and x.ndim == 1 and type(rng) is np.random.Generator
            and getattr(grad, "shape", None) == x.shape and getattr(inv_metric, "shape", None) == x.shape
            and getattr(target, "dim", None) == x.shape[0])


def nuts_transition(target, x, logp, grad, step_size, inv_metric, rng,
                    max_tree_depth=10, max_energy_error=1000.0) -> _Transition:
    """One NUTS transition of one chain from x (see the module docstring).

    The trajectory is doubled forward or backward until it U-turns, a new subtree is invalid, or
    the depth reaches max_tree_depth. Between the current trajectory (weight W_old) and a valid
    new subtree (W_new), the sample moves to the subtree's proposal with probability
    min(1, W_new / W_old): this biased progressive sampling favours points far from the start
    while leaving the distribution of the sample proportional to the weights."""
    if not (_one_chain_fast(target, x, grad, inv_metric, rng) and type(max_tree_depth) is int):
        _check_one_chain(target, x, logp, grad, inv_metric, rng, step_size)
        require_int(max_tree_depth, "max_tree_depth", minimum=1)
        require_positive_scalar(max_energy_error, "max_energy_error")
    traj = _Trajectory(target, step_size, inv_metric, max_energy_error, rng)
    start = _Point(x, rng.standard_normal(x.shape[0]) / np.sqrt(inv_metric), logp, grad)
    traj.h0 = traj.hamiltonian(start)
    tree = _Subtree(start, start, start, start.p, 0.0, True)   # begin/end in time order
    moved, depth = False, 0
    while depth < max_tree_depth:
        direction = 1 if rng.random() < 0.5 else -1
        new = traj.build(tree.end if direction > 0 else tree.begin, depth, direction)
        if not new.valid:
            break
        depth += 1
        take_new = np.log(rng.random()) < new.log_weight - tree.log_weight
        moved |= bool(take_new)
        proposal = new.proposal if take_new else tree.proposal
        if direction < 0:
            new = new._replace(begin=new.end, end=new.begin)    # time order: new comes first
        first, second = (tree, new) if direction > 0 else (new, tree)
        tree = _Subtree(first.begin, second.end, proposal, tree.rho + new.rho,
                        np.logaddexp(tree.log_weight, new.log_weight), True)
        if not traj.merge_ok(first, second):
            break
    sample = tree.proposal
    return _Transition(sample, moved, traj.sum_accept / traj.n_leapfrog, depth, traj.n_leapfrog,
                       traj.divergent, traj.nonfinite, traj.hamiltonian(sample))


def initial_step_size(target, x, logp, grad, inv_metric, rng, step_size=1.0, max_iter=100):
    """Hoffman & Gelman's (2014, Algorithm 4) heuristic for a first step size.

    With one momentum p ~ N(0, M), take one leapfrog step of size eps and let r = exp(H0 - H1).
    Set a = +1 if r > 1/2 and a = -1 otherwise, then multiply eps by 2^a while r^a > 2^-a, i.e. until
    the one-step acceptance ratio crosses 1/2. A non-finite log density or gradient counts as
    r = 0, so eps halves. Returns (eps, number of leapfrog steps taken)."""
    if not _one_chain_fast(target, x, grad, inv_metric, rng):
        _check_one_chain(target, x, logp, grad, inv_metric, rng, step_size)
    require_positive_scalar(step_size, "step_size")
    require_int(max_iter, "max_iter", minimum=1)
    traj = _Trajectory(target, step_size, inv_metric, np.inf, rng)
    start = _Point(x, rng.standard_normal(x.shape[0]) / np.sqrt(inv_metric), logp, grad)
    traj.h0 = traj.hamiltonian(start)

    def log_ratio():
        traj.n_leapfrog += 1
        return traj.h0 - traj.hamiltonian(traj.leapfrog(start, 1))

    ratio = log_ratio()
    a = 1 if ratio > LOG_HALF else -1
    # The cap only matters for flat targets, where every eps is accepted.
    for _ in range(max_iter):
        if not a * ratio > a * LOG_HALF:
            break
        traj.step_size *= 2.0**a
        ratio = log_ratio()
    return traj.step_size, traj.n_leapfrog


# =====================================================================================
# Warm-up: dual averaging and metric windows
# =====================================================================================
class DualAveraging:
    """Nesterov dual averaging of log step sizes (Hoffman & Gelman 2014, Algorithm 5), per chain:

        H_t = (1 - 1/(t + t0)) H_{t-1} + (delta - alpha_t) / (t + t0)
        log eps_t = mu - sqrt(t) / gamma * H_t
        log eps_bar_t = t^-kappa log eps_t + (1 - t^-kappa) log eps_bar_{t-1}

    with alpha_t the acceptance statistic of iteration t and mu = log(10 eps_0). eps_t is used
    during warm-up; eps_bar (which averages out its noise) is kept afterwards.
    """

    def __init__(self, n_chains, target_accept, gamma=0.05, t0=10.0, kappa=0.75):
        n_chains = require_int(n_chains, "n_chains", minimum=1)
        if np.ndim(target_accept) == 0:
            require_probability(target_accept, "target_accept")
        require_positive_scalar(gamma, "gamma")
        require_positive_scalar(t0, "t0")
        require_positive_scalar(kappa, "kappa")
        self.target_accept, self.gamma, self.t0, self.kappa = target_accept, gamma, t0, kappa
        self.mu = np.zeros(n_chains)
        self.t = np.zeros(n_chains)
        self.h_bar = np.zeros(n_chains)
        self.log_eps_bar = np.zeros(n_chains)

    def restart(self, step_size, chains=slice(None)):
        """Start again from step_size (for the given chains): mu = log(10 eps), t = 0."""
        self.mu[chains] = np.log(10.0 * np.asarray(step_size))
        self.t[chains] = 0.0
        self.h_bar[chains] = 0.0
        self.log_eps_bar[chains] = 0.0

    def update(self, accept_stat) -> np.ndarray:
        """One iteration of the recursion; returns the new step sizes eps_t."""
        self.t += 1.0
        eta = 1.0 / (self.t + self.t0)
        self.h_bar = (1.0 - eta) * self.h_bar + eta * (self.target_accept - np.minimum(accept_stat, 1.0))
        log_eps = self.mu - np.sqrt(self.t) / self.gamma * self.h_bar
        weight = self.t ** -self.kappa
        self.log_eps_bar = weight * log_eps + (1.0 - weight) * self.log_eps_bar
        return np.exp(log_eps)

    def final_step_size(self, current) -> np.ndarray:
        """exp(log eps_bar); the current step size for chains with no update since the last restart."""
        return np.where(self.t > 0, np.exp(self.log_eps_bar), current)


class MetricWindows(NamedTuple):
    """Warm-up iterations [slow_start, slow_end) feed the variance estimate; the metric is updated
    after the iterations listed in ``ends`` (counts of completed warm-up iterations)."""
    slow_start: int
    slow_end: int
    ends: tuple


def metric_windows(n_warmup, init_buffer=75, term_buffer=50, base_window=25) -> MetricWindows:
    """Stan's windowed adaptation schedule.

    Slow windows start after ``init_buffer`` iterations with length ``base_window`` and double;
    a window is stretched to the end of the slow phase (n_warmup - term_buffer) when the next,
    doubled one would not fit. If the three buffers do not fit, they become 15% / 75% / 10% of
    the warm-up (one slow window); below 20 iterations there is no metric adaptation.
    For n_warmup = 500: windows end after 100, 150, 250 and 450 iterations."""
    n_warmup = require_int(n_warmup, "n_warmup")
    init_buffer = require_int(init_buffer, "init_buffer")
    term_buffer = require_int(term_buffer, "term_buffer")
    base_window = require_int(base_window, "base_window", minimum=1)
    if n_warmup < 20:
        return MetricWindows(0, 0, ())
    if init_buffer + base_window + term_buffer > n_warmup:
        init_buffer, term_buffer = int(0.15 * n_warmup), int(0.1 * n_warmup)
        base_window = n_warmup - init_buffer - term_buffer
    slow_end = n_warmup - term_buffer
    ends, start, size = [], init_buffer, base_window
    while start < slow_end:
        end = start + size
        if end + 2 * size > slow_end:
            end = slow_end
        ends.append(end)
        start, size = end, 2 * size
    return MetricWindows(init_buffer, slow_end, tuple(ends))


class WindowVariance:
    """Running per-chain variance of the draws of one window (Welford), regularised as in Stan."""

    def __init__(self, n_chains, dim):
        self.n_chains, self.dim = require_int(n_chains, "n_chains", minimum=1), require_int(dim, "dim", minimum=1)
        self.reset()

    def reset(self):
        self.count = 0
        self.mean = np.zeros((self.n_chains, self.dim))
        self.m2 = np.zeros((self.n_chains, self.dim))

    def add(self, x):
        self.count += 1
        delta = x - self.mean
        self.mean += delta / self.count
        self.m2 += delta * (x - self.mean)

    def regularised(self) -> np.ndarray:
        """(n/(n+5)) s^2 + 1e-3 * 5/(n+5): shrinks the sample variance s^2 toward 1e-3 for small n."""
        n = self.count
        variance = self.m2 / (n - 1)
        return (n / (n + 5.0)) * variance + 1e-3 * (5.0 / (n + 5.0))


# =====================================================================================
# The sampler
# =====================================================================================
class NUTS(Sampler):
    """The No-U-Turn sampler with multinomial sampling, dual-averaging step size and an optional
    diagonal metric adapted in Stan's windows (see the module docstring).

    Parameters: ``step_size`` (scalar or one per chain; None = Hoffman & Gelman's heuristic),
    ``target_accept`` (delta of dual averaging), ``max_tree_depth`` (at most 2^depth - 1 leapfrog
    steps per transition), ``metric`` ("identity" or "diagonal"), ``max_energy_error`` (the
    divergence threshold on H - H0), ``n_warmup`` (the length of warm-up the windows are planned for).

    After each ``step`` the arrays over chains ``last_tree_depth``, ``last_n_leapfrog``,
    ``last_divergent``, ``last_nonfinite``, ``last_accept_stat`` and ``last_energy`` hold its
    diagnostics. A divergence (energy error above ``max_energy_error`` at finite densities) and a
    non-finite log density or gradient both end the doubling, but are reported apart: in the
    step's StepInfo as ``divergent`` and ``nonfinite``, and by the run harness as
    ``n_divergent`` and ``n_nonfinite``;
    ``n_tuning_leapfrog`` counts the leapfrog steps of the step-size heuristic, so that the
    target's gradient count is n_chains (init) + n_tuning_leapfrog.sum() + the sum of last_n_leapfrog.
    """

    name = "NUTS"
    uses_gradient = True

    def __init__(self, target, step_size=None, target_accept=0.8, max_tree_depth=10,
                 metric="identity", max_energy_error=1000.0, n_warmup=500):
        super().__init__(target)
        if step_size is not None:
            require_positive(step_size, "step_size")
            if np.ndim(step_size) > 1:
                raise ValueError(f"step_size must be a scalar or one per chain (n_chains,), got shape "
                                 f"{np.shape(step_size)}")
        require_str(metric, "metric", METRICS)
        self.initial_step_size = step_size
        self.target_accept = require_probability(target_accept, "target_accept")
        self.max_tree_depth = require_int(max_tree_depth, "max_tree_depth", minimum=1)
        self.metric = metric
        self.max_energy_error = require_positive_scalar(max_energy_error, "max_energy_error")
        self.n_warmup = require_int(n_warmup, "n_warmup", minimum=0)
        self.windows = metric_windows(self.n_warmup) if metric == "diagonal" else MetricWindows(0, 0, ())
        self.step_size = None

    def init(self, x0):
        state = super().init(x0)
        n, d = state.x.shape
        self.inv_metric = np.ones((n, d))
        self.dual_averaging = DualAveraging(n, self.target_accept)
        if self.initial_step_size is None:
            # The heuristic needs random momenta, so it runs in the first step (from eps = 1).
            self.step_size = np.ones(n)
            self._needs_step_size = np.ones(n, dtype=bool)
        else:
            self.step_size = per_chain(self.initial_step_size, n, "step_size")
            self._needs_step_size = np.zeros(n, dtype=bool)
            self.dual_averaging.restart(self.step_size)
        self._variance = WindowVariance(n, d)
        self.n_adapt = 0
        self.adapting = self.n_warmup > 0
        self._stepped_since_adapt = False
        self.n_tuning_leapfrog = np.zeros(n, dtype=int)
        self.last_tree_depth = np.zeros(n, dtype=int)
        self.last_n_leapfrog = np.zeros(n, dtype=int)
        self.last_divergent = np.zeros(n, dtype=bool)
        self.last_nonfinite = np.zeros(n, dtype=bool)
        self.last_accept_stat = np.zeros(n)
        self.last_energy = np.zeros(n)
        return state

    def step(self, rng, state):
        if self.adapting and self.n_adapt > 0 and self._stepped_since_adapt:
            self._end_warmup()      # the harness stopped calling adapt before n_warmup
        x, logp, grad = state.x.copy(), state.logp.copy(), state.grad.copy()
        moved = np.zeros(x.shape[0], dtype=bool)
        # Divergent trajectories overflow; they are detected and discarded, so silence numpy.
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            for c in range(x.shape[0]):
                if self._needs_step_size[c]:
                    self._initialise_step_size(rng, c, state)
                x[c], logp[c], grad[c], moved[c] = self._transition(rng, c, state)
        self._stepped_since_adapt = True
        info = StepInfo(moved, self.last_accept_stat.copy(), self.last_nonfinite.copy(),
                        self.last_divergent.copy())
        return ChainState(x, logp, grad), info

    def _transition(self, rng, c, state):
        """One transition of chain c from ``state``, recorded in the per-chain diagnostics: (x, logp, grad,
        moved). The one place a NUTS variant differs (``slice_nuts.SliceNUTS``)."""
        out = nuts_transition(self.target, state.x[c], state.logp[c], state.grad[c], self.step_size[c],
                              self.inv_metric[c], rng, self.max_tree_depth, self.max_energy_error)
        self._record(c, out)
        self.last_energy[c] = out.energy
        return out.point.x, out.point.logp, out.point.grad, out.moved

    def _record(self, c, out):
        """The diagnostics every NUTS transition reports (``out``: a transition record of either variant)."""
        self.last_tree_depth[c] = out.depth
        self.last_n_leapfrog[c] = out.n_leapfrog
        self.last_divergent[c] = out.divergent
        self.last_nonfinite[c] = out.nonfinite
        self.last_accept_stat[c] = out.accept_stat

    def _initialise_step_size(self, rng, c, state):
        """Run the heuristic from the chain's current step size and restart its dual averaging."""
        eps, n_leapfrog = initial_step_size(self.target, state.x[c], state.logp[c], state.grad[c],
                                            self.inv_metric[c], rng, self.step_size[c])
        self.n_tuning_leapfrog[c] += n_leapfrog
        self.step_size[c] = eps
        self.dual_averaging.restart(eps, chains=c)
        self._needs_step_size[c] = False

    def adapt(self, state, info, iteration):
        """One warm-up iteration: dual averaging on the acceptance statistic, variance windows.

        Warm-up iterations are counted here (``iteration`` is not used), and calls after
        ``n_warmup`` of them are ignored."""
        if not self.adapting:
            return
        self._stepped_since_adapt = False
        k = self.n_adapt
        self.step_size = self.dual_averaging.update(info.accept_prob)
        if self.windows.slow_start <= k < self.windows.slow_end:
            self._variance.add(state.x)
        self.n_adapt = k + 1
        if self.n_adapt in self.windows.ends:
            self.inv_metric = self._variance.regularised()
            self._variance.reset()
            # A new metric changes the scale of the step size: re-initialise it (Stan does too).
            self._needs_step_size[:] = True
        if self.n_adapt >= self.n_warmup:
            self._end_warmup()

    def _end_warmup(self):
        self.step_size = self.dual_averaging.final_step_size(self.step_size)
        self._needs_step_size[:] = False   # the sampling kernel must not depend on the state
        self.adapting = False

    def tuning(self):
        out = {"step_size": self.step_size.copy()}
        if self.metric == "diagonal":
            out["inv_metric"] = self.inv_metric.copy()
        return out
