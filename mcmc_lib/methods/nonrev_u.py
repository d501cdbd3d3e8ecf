"""Generated from book/nonrev_u.md by `python -m mcmc_lib.literate export`.

Do not edit: change the chapter's cells tagged `export` and regenerate.
"""
from __future__ import annotations

from typing import NamedTuple, Optional

import numpy as np

from mcmc_lib.samplers.base import Sampler, StepInfo, finite_rows, metropolis_hastings_accept, per_chain
from mcmc_lib.samplers.classic import leapfrog, mala_proposal, rwm_proposal
from mcmc_lib.validation import require_positive


def wrap_v(v):
    """Wrap v into [-1, 1): the two while-loops of eq. (eq-nru-wrap) in one step."""
    _check_real(v, "v")
    return np.mod(v + 1.0, 2.0) - 1.0


def advance_v(rng, v, delta, noise):
    """Eq. (eq-nru-wrap): v <- v + noise U(-1, 1) + delta, wrapped into [-1, 1), per chain.

    noise = 1 makes the new v uniform on [-1, 1) whatever the old v was: the standard method, with
    u drawn independently for every decision. Noise is drawn only if some chain uses it.
    """
    _check_advance(rng, v, delta, noise)
    if np.any(noise > 0):
        v = v + noise * rng.uniform(-1.0, 1.0, size=v.shape)
    return wrap_v(v + delta)


# Argument checks of this module's functions (mcmc_lib.validation): a wrong call fails at the call, naming
# the argument, its value and what is expected. The samplers call wrap_v, advance_v, rescale_v and tanh at
# every update with their own arrays, which pass the first, cheap test of each check.
from mcmc_lib.validation import (float_array, require_callable, require_int, require_mapping, require_positive_scalar,
                                 require_rng, require_target, wrong_type)


def _check_real(value, name):
    """A real number or a numpy array of real numbers (the functions compute with it as given)."""
    if type(value) is np.ndarray and value.dtype.kind == "f":
        return
    if isinstance(value, np.ndarray):
        if value.dtype.kind not in "iu":
            raise wrong_type(name, "a numpy array of real numbers", value)
    elif not isinstance(value, (int, float, np.integer, np.floating)) or isinstance(value, (bool, np.bool_)):
        float_array(value, name)                  # a string, a ragged or non-numeric list: its own error
        raise wrong_type(name, "a number or a numpy array of real numbers", value)


def _check_advance(rng, v, delta, noise):
    """advance_v's: a Generator, v (n_chains,), delta and noise numbers or one per chain."""
    if (type(rng) is np.random.Generator and type(v) is np.ndarray and v.ndim == 1 and type(delta) is np.ndarray
            and delta.shape == v.shape and type(noise) is np.ndarray and noise.shape == v.shape):
        return
    require_rng(rng)
    _check_real(v, "v")
    if np.ndim(v) != 1:
        raise ValueError(f"v must have shape (n_chains,), got {np.shape(v)}")
    for name, value in (("delta", delta), ("noise", noise)):
        _check_real(value, name)
        if np.shape(value) not in ((), np.shape(v)):
            raise ValueError(f"{name} must be a number or one per chain, shape {np.shape(v)} as v, got "
                             f"{np.shape(value)}")


def _check_rescale(v, log_ratio, accepted):
    """rescale_v's: v and log_ratio arrays of one shape, accepted booleans of that shape."""
    if (type(v) is np.ndarray and type(log_ratio) is np.ndarray and type(accepted) is np.ndarray
            and accepted.dtype == bool and v.shape == log_ratio.shape == accepted.shape):
        return
    _check_real(v, "v")
    _check_real(log_ratio, "log_ratio")
    if not isinstance(accepted, np.ndarray) or accepted.dtype != bool:
        raise wrong_type("accepted", "a numpy array of booleans (the decisions)", accepted)
    for name, value in (("log_ratio", log_ratio), ("accepted", accepted)):
        if np.shape(value) != np.shape(v):
            raise ValueError(f"{name} must have the shape of v, {np.shape(v)}, got {np.shape(value)}")


def _check_per_chain(value, name):
    """A tuning parameter: a number or one per chain (n_chains,)."""
    if np.ndim(value) > 1:
        raise ValueError(f"{name} must be a number or one per chain (n_chains,), got shape {np.shape(value)}")
    return value


def rescale_v(v, log_ratio, accepted):
    """Eq. (eq-nru-rescale): on acceptance v <- v pi(x)/pi(x*) = v exp(-log ratio), which keeps the
    slice level s = |v| pi(x) fixed; where the proposal was rejected v is unchanged. v = 0 (u = 0, which
    accepts any finite ratio) stays 0: exp(-log ratio) may overflow there, and 0 x inf is not a state."""
    _check_rescale(v, log_ratio, accepted)
    moved = accepted & (v != 0)
    return np.where(moved, v * np.exp(-np.where(moved, log_ratio, 0.0)), v)


class NonrevState(NamedTuple):
    """x (n_chains, dim), logp (n_chains,), grad (n_chains, dim) or None, v (n_chains,) in [-1, 1),
    and the momentum p (n_chains, dim) for persistent Langevin (None otherwise)."""
    x: np.ndarray
    logp: np.ndarray
    grad: Optional[np.ndarray]
    v: np.ndarray
    p: Optional[np.ndarray] = None


def _check_range(value, name, low, high):
    arr = float_array(_check_per_chain(value, name), name)
    if arr.size == 0 or not np.all(np.isfinite(arr)) or np.any(arr < low) or np.any(arr > high):
        raise ValueError(f"{name} must lie in [{low}, {high}], got {value!r}")
    return value


def _refuse_frozen_level(delta, noise):
    """delta = 0 with no noise never moves v between decisions: only the rescaling on acceptance changes
    it, and that keeps the slice level s = |v| pi(x) fixed, so the chain is confined to {x: pi(x) > s}
    for ever (not ergodic). Refused, per chain; shapes that do not match are left to init to refuse."""
    try:
        delta_arr, noise_arr = np.broadcast_arrays(np.asarray(delta, dtype=float), np.asarray(noise, dtype=float))
    except ValueError:
        return
    frozen = (delta_arr == 0) & (noise_arr == 0)
    if np.any(frozen):
        chains = f" (chains {np.flatnonzero(frozen).tolist()})" if frozen.ndim else ""
        raise ValueError(f"delta must not be 0 when noise is 0{chains}, got delta={delta!r}, noise={noise!r}: with "
                         "neither drift nor noise v changes only by the rescaling on acceptance, which keeps the "
                         "slice level |v| pi(x) fixed, so the chain can never leave the region above its starting "
                         "level (not ergodic). Give a nonzero delta or noise, or delta=None for the standard method")


class NonreversibleUSampler(Sampler):
    """Shared parts: per-chain step size, delta and noise; v in the state; the decision (eqs.
    eq-nru-wrap, eq-nru-accept, eq-nru-rescale). delta=None gives the standard method: noise 1,
    i.e. u independent for every decision. No warm-up adaptation: the paper tunes by grid search.
    step_size=None: the proposal keeps its own (another chapter's sampler whose decision this replaces)."""

    def __init__(self, target, step_size, delta=None, noise=0.0):
        super().__init__(target)
        self.initial = {}
        if step_size is not None:
            self.initial["step_size"] = _check_per_chain(require_positive(step_size, "step_size"), "step_size")
        noise = _check_range(noise, "noise", 0.0, 1.0)          # checked also where delta=None replaces it
        if delta is None:
            delta, noise = 0.0, 1.0
        self.initial.update(delta=_check_range(delta, "delta", -1.0, 1.0), noise=noise)
        _refuse_frozen_level(delta, noise)
        self.step_size = self.delta = self.noise = None
        self.last_u = None

    def init(self, x0, v0=0.5, p0=None):
        """Start every chain at x0 with v = v0 (FBM's default 0.5; pass uniform draws for a stationary
        start). Parameters given per chain are checked against the number of chains here."""
        state = super().init(x0)
        n_chains = state.x.shape[0]
        for name, value in self.initial.items():
            setattr(self, name, per_chain(value, n_chains, name))
        v = per_chain(_check_range(v0, "v0", -1.0, 1.0), n_chains, "v0")
        return NonrevState(state.x, state.logp, state.grad, v, None)

    def refresh(self, state):
        """Re-evaluate log pi (and its gradient) at the current x after a Gibbs (or any other) update of
        other variables changed the conditional target. v and p are independent of x and stay valid."""
        if self.uses_gradient:
            logp, grad = self.target.logp_and_grad(state.x)
        else:
            logp, grad = self.target.logp(state.x), None
        return state._replace(logp=np.asarray(logp, dtype=float), grad=grad)

    def decide(self, rng, v, log_ratio):
        """Advance v (eq-nru-wrap), decide with u = |v| (eq-nru-accept), rescale v (eq-nru-rescale).
        Returns (v, accepted, accept_prob, nonfinite); the u used is kept in ``last_u``."""
        v = advance_v(rng, v, self.delta, self.noise)
        self.last_u = np.abs(v)
        accepted, prob, nonfinite = metropolis_hastings_accept(log_ratio, self.last_u)
        return rescale_v(v, log_ratio, accepted), accepted, prob, nonfinite

    def tuning(self):
        return {"step_size": self.step_size.copy(), "delta": self.delta.copy(), "noise": self.noise.copy()}


class NonrevRWM(NonreversibleUSampler):
    """Random-walk Metropolis, x* = x + eta eps, with u = |v| carried in the state."""

    name = "RWM (non-reversible u)"
    uses_gradient = False

    def step(self, rng, state):
        y, logp_y = rwm_proposal(rng, self.target, state.x, self.step_size)     # as the foundations' RWM
        v, accepted, prob, nonfinite = self.decide(rng, state.v, logp_y - state.logp)
        x = np.where(accepted[:, None], y, state.x)
        logp = np.where(accepted, logp_y, state.logp)
        return NonrevState(x, logp, None, v), StepInfo(accepted, prob, nonfinite)


class NonrevMALA(NonreversibleUSampler):
    """MALA (one leapfrog step with fresh momentum), with u = |v| carried in the state."""

    name = "MALA (non-reversible u)"
    uses_gradient = True

    def step(self, rng, state):
        # the foundations' MALA proposal and Hastings ratio; only the decision differs
        y, logp_y, grad_y, log_ratio = mala_proposal(rng, self.target, state, self.step_size)
        v, accepted, prob, nonfinite = self.decide(rng, state.v, log_ratio)
        keep = accepted[:, None]
        new = NonrevState(np.where(keep, y, state.x), np.where(accepted, logp_y, state.logp),
                          np.where(keep, grad_y, state.grad), v)
        return new, StepInfo(accepted, prob, nonfinite)


class PersistentLangevin(NonreversibleUSampler):
    """Horowitz's persistent-momentum Langevin update, eq. (eq-nru-horowitz), with u = |v| in the state
    (delta=None: standard, u drawn afresh). One gradient evaluation per update. alpha (per chain, in
    [0, 1)) is the momentum persistence: alpha = 0 is MALA, alpha near 1 keeps the direction."""

    name = "persistent Langevin"
    uses_gradient = True

    def __init__(self, target, step_size, alpha, delta=None, noise=0.0):
        super().__init__(target, step_size, delta, noise)
        self.initial["alpha"] = _check_range(alpha, "alpha", 0.0, 1.0)
        if np.any(np.asarray(alpha, dtype=float) == 1.0):
            # no refresh: from (x, p) the chain only steps along one leapfrog path or reverses on it,
            # a countable set of states whatever u does
            raise ValueError(f"alpha must be below 1, got {alpha!r}: alpha = 1 never refreshes the momentum, so "
                             "the chain only moves forward along one leapfrog path or back along it (not ergodic)")
        self.alpha = None

    def init(self, x0, v0=0.5, p0=None):
        """p0: the starting momenta (default zeros; pass N(0, I) draws for a stationary start)."""
        state = super().init(x0, v0)
        p = np.zeros_like(state.x) if p0 is None else np.array(p0, dtype=float)
        if p.shape != state.x.shape or not np.all(np.isfinite(p)):
            raise ValueError(f"p0 must be finite with shape {state.x.shape}, got {np.shape(p0)}")
        return state._replace(p=p)

    def step(self, rng, state):
        n_chains, dim = state.x.shape
        a = self.alpha[:, None]
        p = a * state.p + np.sqrt(1.0 - a**2) * rng.standard_normal((n_chains, dim))       # step 1
        with np.errstate(over="ignore", invalid="ignore"):
            y, p_star, logp_y, grad_y = leapfrog(self.target, state.x, p, state.grad, self.step_size, 1)
            log_ratio = (logp_y - state.logp - 0.5 * np.einsum("ij,ij->i", p_star, p_star)
                         + 0.5 * np.einsum("ij,ij->i", p, p))                                # step 2
        log_ratio = np.where(finite_rows(logp_y, grad_y), log_ratio, np.nan)
        v, accepted, prob, nonfinite = self.decide(rng, state.v, log_ratio)                 # step 3
        keep = accepted[:, None]
        # Accepted: (x*, -p*) then negated (step 4) = the leapfrog's own momentum; rejected: -p'.
        new = NonrevState(np.where(keep, y, state.x), np.where(accepted, logp_y, state.logp),
                          np.where(keep, grad_y, state.grad), v, np.where(keep, p_star, -p))
        return new, StepInfo(accepted, prob, nonfinite)

    def tuning(self):
        return super().tuning() | {"alpha": self.alpha.copy()}


def run_groups(sampler, state, rng, n_groups, group_size, record, between=None, burn_groups=0):
    """Neal's protocol: ``n_groups`` groups of ``group_size`` updates after ``burn_groups`` discarded
    groups; ``record(state)`` -> (n_chains, k) is stored once per group (FBM logs one record per
    iteration, i.e. per pass through its ``repeat`` loop). ``between(rng, state, t) -> state`` runs
    after update t (counted from 1), for Gibbs updates of other variables (it must call
    ``sampler.refresh`` when it changes the target).
    Returns (state, records (n_chains, n_groups, k), rejection rate per chain)."""
    if not callable(getattr(sampler, "step", None)):
        raise wrong_type("sampler", "a sampler (step(rng, state); mcmc_lib.samplers.base.Sampler)", sampler)
    if not isinstance(getattr(state, "x", None), np.ndarray) or state.x.ndim != 2:
        raise wrong_type("state", "a sampler's state (from its init(x0)), with x of shape (n_chains, dim)", state)
    require_rng(rng)
    n_groups = require_int(n_groups, "n_groups", minimum=1)
    group_size = require_int(group_size, "group_size", minimum=1)
    burn_groups = require_int(burn_groups, "burn_groups")
    require_callable(record, "record")
    if between is not None:
        require_callable(between, "between")
    n_chains = state.x.shape[0]
    records, rejections, t = None, np.zeros(n_chains), 0
    for g in range(burn_groups + n_groups):
        for _ in range(group_size):
            state, info = sampler.step(rng, state)
            t += 1
            if g >= burn_groups:
                rejections += ~info.accepted
            if between is not None:
                state = between(rng, state, t)
        if g >= burn_groups:
            value = np.asarray(record(state), dtype=float).reshape(n_chains, -1)
            if records is None:
                records = np.empty((n_chains, n_groups, value.shape[1]))
            records[:, g - burn_groups] = value
    return state, records, rejections / (n_groups * group_size)


from mcmc_lib.targets import Target


def tanh(a):
    """tanh through exp, which numpy vectorises for float64 (np.tanh does not, and dominated the network's
    cost); equal to np.tanh within 1e-15. The argument is clipped at |a| = 40, where tanh is +-1 in
    float64, so exp cannot overflow."""
    _check_real(a, "a")
    e = np.exp(np.clip(-2.0 * a, -80.0, 80.0))
    return (1.0 - e) / (1.0 + e)


class BNNConditional(Target):
    """log p(weights | precisions, data) of eq. (eq-nru-bnn), batched over chains: one layer of
    ``n_hidden`` tanh units and a logistic output for 0/1 targets. Each chain has its own input precisions
    ``tau_in`` (n_chains, n_inputs) and output-weight precision ``tau_out`` (n_chains,), which ``gibbs``
    redraws. Parameter order: W (input-major, n_inputs x n_hidden), hidden biases, output weights, output bias."""

    def __init__(self, X, y, n_chains, n_hidden=12, prior=None):
        X = float_array(X, "X")
        y = y.astype(float) if isinstance(y, np.ndarray) and y.dtype == bool else float_array(y, "y")
        n_chains, n_hidden = require_int(n_chains, "n_chains", minimum=1), require_int(n_hidden, "n_hidden", minimum=1)
        if prior is not None:
            require_mapping(prior, "prior")
        if X.ndim != 2 or y.shape != (X.shape[0],) or not np.all((y == 0) | (y == 1)):
            raise ValueError(f"X must be (n_cases, n_inputs) and y (n_cases,) of 0/1, got shapes {X.shape}, {y.shape}")
        self.n_in, self.n_hidden = X.shape[1], n_hidden
        super().__init__(self.n_in * self.n_hidden + 2 * self.n_hidden + 1)
        self.name = "BNN weights given the precisions"
        self.X, self.y = X, y
        self.prior = {"shape_in": 0.5, "rate_in": 0.02, "shape_out": 0.5, "rate_out": 0.5,
                      "sd_bh": 2.0, "sd_bo": 2.0} | (prior or {})
        self.tau_in, self.tau_out = np.ones((n_chains, self.n_in)), np.ones(n_chains)

    def unpack(self, theta):
        n, k, h = len(theta), self.n_in * self.n_hidden, self.n_hidden
        return theta[:, :k].reshape(n, self.n_in, h), theta[:, k:k + h], theta[:, k + h:k + 2 * h], theta[:, -1]

    def _logp_and_grad(self, theta):
        n, m, p = len(theta), self.n_hidden, self.prior
        W, bh, wo, bo = self.unpack(theta)
        h = tanh((self.X @ W.transpose(1, 0, 2).reshape(self.n_in, n * m)).reshape(-1, n, m) + bh)  # (cases, chains, m)
        f = np.einsum("cnj,nj->cn", h, wo) + bo                                                   # (cases, chains)
        r = self.y[:, None] - 1.0 / (1.0 + np.exp(-f))                                            # d loglik / d f
        da = (1.0 - h * h) * wo * r[:, :, None]                                                   # d loglik / d a
        logp = (np.sum(self.y[:, None] * f - np.logaddexp(0.0, f), axis=0)
                - 0.5 * np.einsum("nij,nij,ni->n", W, W, self.tau_in) - 0.5 * np.sum(bh**2, 1) / p["sd_bh"] ** 2
                - 0.5 * self.tau_out * np.sum(wo**2, 1) - 0.5 * bo**2 / p["sd_bo"] ** 2)
        grad_W = (self.X.T @ da.reshape(-1, n * m)).reshape(self.n_in, n, m).transpose(1, 0, 2)
        grad = np.concatenate([(grad_W - self.tau_in[:, :, None] * W).reshape(n, -1),
                               da.sum(axis=0) - bh / p["sd_bh"] ** 2,
                               np.einsum("cn,cnj->nj", r, h) - self.tau_out[:, None] * wo,
                               (r.sum(axis=0) - bo / p["sd_bo"] ** 2)[:, None]], axis=1)
        return logp, grad

    def _logp(self, theta):
        return self._logp_and_grad(theta)[0]

    def _grad(self, theta):
        return self._logp_and_grad(theta)[1]

    def gibbs(self, rng, theta):
        """Redraw the precisions from their Gamma conditionals given the weights."""
        W, _, wo, _ = self.unpack(theta)
        p, m = self.prior, self.n_hidden
        self.tau_in = rng.gamma(p["shape_in"] + m / 2, 1.0 / (p["rate_in"] + 0.5 * np.sum(W**2, axis=2)))
        self.tau_out = rng.gamma(p["shape_out"] + m / 2, 1.0 / (p["rate_out"] + 0.5 * np.sum(wo**2, axis=1)))


def fbm_net_stepsizes(X, tau_in, tau_out, n_hidden, sd_bh, sd_bo):
    """Eq. (eq-nru-fbm-steps): FBM's per-parameter step sizes eps_k = d_k^(-1/2) for a one-hidden-layer tanh
    network with a logistic output (net-mc.c, mc_app_stepsizes, release 2020-01-24), from the precisions only.
    X (n_cases, n_inputs), tau_in (n_chains, n_inputs), tau_out (n_chains,) -> (n_chains, n_params), in
    BNNConditional's parameter order."""
    X = float_array(X, "X")
    if X.ndim != 2:
        raise ValueError(f"X must be the inputs, shape (n_cases, n_inputs), got {X.shape}")
    tau_in, tau_out = np.atleast_2d(float_array(tau_in, "tau_in")), np.atleast_1d(float_array(tau_out, "tau_out"))
    n_hidden = require_int(n_hidden, "n_hidden", minimum=1)
    sd_bh, sd_bo = require_positive_scalar(sd_bh, "sd_bh"), require_positive_scalar(sd_bo, "sd_bo")
    if tau_in.shape != (len(tau_out), X.shape[1]) or np.any(tau_in <= 0) or np.any(tau_out <= 0):
        raise ValueError(f"tau_in must be positive with shape (n_chains, {X.shape[1]}) and tau_out positive "
                         f"(n_chains,), got shapes {tau_in.shape} and {tau_out.shape}")
    n_cases, n_chains, ones = X.shape[0], len(tau_out), np.ones(n_hidden)
    hidden = 0.25 / tau_out                       # per hidden unit: sigma_o^2 / 4
    d_W = (tau_in[:, :, None] + np.sum(X**2, axis=0)[None, :, None] * hidden[:, None, None]) * ones
    d_bh = (1.0 / sd_bh**2 + n_cases * hidden)[:, None] * ones
    d_wo = (tau_out + n_cases * 0.25)[:, None] * ones
    d_bo = np.full((n_chains, 1), 1.0 / sd_bo**2 + n_cases * 0.25)
    return 1.0 / np.sqrt(np.concatenate([d_W.reshape(n_chains, -1), d_bh, d_wo, d_bo], axis=1))


class StepScaledTarget(Target):
    """A target seen in the coordinates z = x / scale (scale > 0, shape (n_chains, dim)): log pi(scale z)
    and its gradient scale * grad log pi. Identity-mass leapfrog of step eta in z is leapfrog with the
    per-parameter steps eta * scale in x, eq. (eq-nru-scaled). ``rescale`` swaps the scale and returns
    the z of the same x (after a Gibbs update of the hyperparameters the scale depends on)."""

    def __init__(self, base, scale):
        super().__init__(require_target(base, "base").dim)
        self.base, self.name = base, f"{base.name}, per-parameter step sizes"
        self.scale = self._checked(scale)

    def _checked(self, scale):
        scale = np.asarray(scale, dtype=float)
        if scale.ndim != 2 or scale.shape[1] != self.dim or not np.all(np.isfinite(scale) & (scale > 0)):
            raise ValueError(f"scale must be positive and finite with shape (n_chains, {self.dim}), got {scale.shape}")
        return scale

    def to_x(self, z):
        return self.scale * z

    def rescale(self, z, new_scale):
        x = self.to_x(z)
        self.scale = self._checked(new_scale)
        return x / self.scale

    def _logp_and_grad(self, z):
        logp, grad = self.base.logp_and_grad(self.scale * z)
        return logp, self.scale * grad

    def _logp(self, z):
        return self.base.logp(self.scale * z)

    def _grad(self, z):
        return self._logp_and_grad(z)[1]
