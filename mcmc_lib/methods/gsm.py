"""Generated from book/gsm.md by `python -m mcmc_lib.literate export`.

Do not edit: change the chapter's cells tagged `export` and regenerate.
"""
import functools

import numpy as np

from mcmc_lib.samplers.base import ChainState, Sampler, StepInfo, accept_proposals, metropolis_hastings_accept
from mcmc_lib.validation import require_positive, require_probability

__all__ = ["gadRWM", "gadMALAf", "gadMALAe", "AuthorsHMC", "rwm_bound_gradient", "mala_fast_bound_gradient",
           "mala_exact_bound_gradient", "rmsprop_step", "update_beta", "hessian_vector_product",
           "supports_hessian_vector_product"]

RMSPROP_DECAY = 0.1      # kappa
MIN_DIAG = 1e-3          # diag(L) floor
BETA_RATE = 0.02         # rho_beta
BETA_FLOOR = 1e-4


def matvec(L, v):
    """L v for stacks L (n, d, d), v (n, d)."""
    return np.matmul(L, v[:, :, None])[:, :, 0]


def rmatvec(L, v):
    """L^T v for stacks L (n, d, d), v (n, d)."""
    return np.matmul(v[:, None, :], L)[:, 0, :]


@functools.lru_cache(maxsize=8)
def tril_mask(d):
    """The (d, d) lower-triangular mask of ones, cached (read-only)."""
    mask = np.tri(d)
    mask.setflags(write=False)
    return mask


def tril_outer(left, right, active):
    """tril(sum_k left_k right_k^T) per chain for the chains where ``active`` is True, zero elsewhere.
    left, right: (n, d) for one rank-1 term or (n, d, K) for K terms."""
    if left.ndim == 2:
        left, right = left[:, :, None], right[:, :, None]
    # Both factors are masked with np.where (not multiplied by 0): a NaN or inf in either factor of an
    # inactive chain (a non-finite gradient at a rejected proposal) must not reach L, as 0 * NaN = NaN.
    left = np.where(active[:, None, None], left, 0.0)
    right = np.where(active[:, None, None], right, 0.0)
    out = np.matmul(left, np.swapaxes(right, 1, 2))
    out *= tril_mask(out.shape[-1])
    return out


def add_entropy_gradient(G, L, beta):
    """G + beta diag(1/L_11, ..., 1/L_dd): the gradient of beta sum_i log L_ii (in place)."""
    idx = np.arange(L.shape[-1])
    G[:, idx, idx] += beta[:, None] / L[:, idx, idx]
    return G


def rmsprop_step(L, S, G, learning_rate, first, decay=RMSPROP_DECAY, min_diag=MIN_DIAG):
    """One RMSProp ascent step on L, in place, as the authors' code does it:
    S <- kappa G^2 + (1 - kappa) S (kappa = 1 on the first step), L <- L + eta G / (1 + sqrt(S)),
    then diag(L) >= min_diag."""
    _check_rmsprop_arguments(L, S, G, learning_rate, first, decay, min_diag)
    kappa = 1.0 if first else decay
    S *= 1.0 - kappa
    step = np.square(G)
    step *= kappa
    S += step
    np.sqrt(S, out=step)
    step += 1.0
    np.divide(G, step, out=step)
    step *= learning_rate
    L += step
    idx = np.arange(L.shape[-1])
    L[:, idx, idx] = np.maximum(L[:, idx, idx], min_diag)
    return L, S


def update_beta(beta, accepted, target_accept, rate=BETA_RATE, floor=BETA_FLOOR):
    """beta <- max(floor, beta (1 + rate (a - alpha*))), with a the 0/1 accept indicator."""
    _check_beta_arguments(beta, accepted, target_accept, rate, floor)
    return np.maximum(beta * (1.0 + rate * (accepted.astype(float) - target_accept)), floor)


# Argument checks of this module's functions (mcmc_lib.validation): a wrong call fails at the call, naming
# the argument, its value and what is expected. The samplers call these at every adaptation step with their
# own arrays, which pass the first, cheap test of each check; only another caller's arguments get the rest.
from mcmc_lib.validation import (float_array, require_array_shape, require_bool, require_callable,
                                 require_positive_scalar, wrong_type)


def _stack(L, name="L"):
    """(n_chains, d) of a stack of Cholesky factors L (n_chains, d, d)."""
    arr = float_array(L, name)
    if not isinstance(L, np.ndarray) or arr.ndim != 3 or arr.shape[1] != arr.shape[2]:
        raise ValueError(f"{name} must be a numpy array of lower-triangular factors, shape (n_chains, d, d), got "
                         f"{type(L).__name__} of shape {arr.shape}")
    return arr.shape[:2]


def _check_bound_arguments(L, log_ratio, beta, **vectors):
    """The bound gradients': L (n_chains, d, d); each of ``vectors`` (n_chains, d) (or None where optional);
    log_ratio and beta (n_chains,)."""
    if (type(L) is np.ndarray and L.ndim == 3 and L.shape[1] == L.shape[2] and type(beta) is np.ndarray
            and beta.shape == L.shape[:1] and np.shape(log_ratio) == beta.shape
            and all(v is None or (type(v) is np.ndarray and v.shape == L.shape[:2]) for v in vectors.values())):
        return
    n, d = _stack(L)
    for name, value in vectors.items():
        if value is not None:
            require_array_shape(value, name, (n, d), "n_chains x d")
    if float_array(log_ratio, "log_ratio").shape != (n,):
        raise ValueError(f"log_ratio must have shape (n_chains,) = ({n},), got {np.shape(log_ratio)}")
    require_array_shape(beta, "beta", (n,), "one per chain")


def _check_rmsprop_arguments(L, S, G, learning_rate, first, decay, min_diag):
    if not (type(L) is np.ndarray and type(S) is np.ndarray and type(G) is np.ndarray and L.ndim == 3
            and L.shape == S.shape == G.shape and L.dtype == S.dtype == np.float64 and type(first) is bool
            and type(learning_rate) is float and type(decay) is float and type(min_diag) is float):
        shape = (*_stack(L), L.shape[-1])
        for name, value in (("S", S), ("G", G)):
            require_array_shape(value, name, shape, "n_chains x d x d, as L")
        for name, value in (("L", L), ("S", S)):            # updated in place
            if value.dtype != np.float64 or not value.flags.writeable:
                raise ValueError(f"{name} must be a writeable float64 array (rmsprop_step updates it in place), "
                                 f"got dtype {value.dtype}")
        require_positive_scalar(learning_rate, "learning_rate")
        require_bool(first, "first")
        if not 0 < require_positive_scalar(decay, "decay") <= 1:
            raise ValueError(f"decay must lie in (0, 1], got {decay!r}")
        require_positive_scalar(min_diag, "min_diag")


def _check_beta_arguments(beta, accepted, target_accept, rate, floor):
    if not (type(beta) is np.ndarray and type(accepted) is np.ndarray and accepted.dtype == bool
            and accepted.shape == beta.shape and beta.ndim == 1
            and type(target_accept) is float and type(rate) is float and type(floor) is float):
        beta = float_array(beta, "beta")
        if not isinstance(accepted, np.ndarray) or accepted.dtype != bool:
            raise wrong_type("accepted", "a numpy array of booleans (the accept indicators), shape (n_chains,)",
                             accepted)
        if beta.ndim != 1 or accepted.shape != beta.shape:
            raise ValueError(f"beta and accepted must have one shape (n_chains,), got {beta.shape} and "
                             f"{accepted.shape}")
        require_probability(target_accept, "target_accept")
        require_positive_scalar(rate, "rate")
        require_positive_scalar(floor, "floor")


def rwm_bound_gradient(L, eps, grad_y, log_ratio, beta):
    """Unbiased gradient of the gadRWM lower bound F_L with respect to L, per chain:
    tril(grad_y eps^T) where log_ratio < 0, plus beta diag(1/L_ii). Shapes: L (n, d, d), eps and
    grad_y (n, d), log_ratio and beta (n,). A NaN log ratio (non-finite proposal) counts as inactive."""
    _check_bound_arguments(L, log_ratio, beta, eps=eps, grad_y=grad_y)
    active = np.asarray(log_ratio) < 0
    G = tril_outer(grad_y, eps, active)
    return add_entropy_gradient(G, L, beta)


def mala_fast_bound_gradient(L, eps, grad_x, grad_y, log_ratio, beta, Ltg_x=None, Ltg_y=None):
    """gadMALAf's gradient of the lower bound with respect to L (grad log pi(y) held fixed inside d):
    tril(-1/2 (g_x - g_y) (1/2 L^T (g_x - g_y) + eps)^T) where log_ratio < 0, plus beta diag(1/L_ii).
    Ltg_x = L^T g_x and Ltg_y = L^T g_y may be passed when already computed."""
    _check_bound_arguments(L, log_ratio, beta, eps=eps, grad_x=grad_x, grad_y=grad_y, Ltg_x=Ltg_x, Ltg_y=Ltg_y)
    Ltg_x = rmatvec(L, grad_x) if Ltg_x is None else Ltg_x
    Ltg_y = rmatvec(L, grad_y) if Ltg_y is None else Ltg_y
    active = np.asarray(log_ratio) < 0
    G = tril_outer(0.5 * (grad_y - grad_x), 0.5 * (Ltg_x - Ltg_y) + eps, active)
    return add_entropy_gradient(G, L, beta)


def mala_exact_bound_gradient(L, eps, grad_x, grad_y, hessian_vector, log_ratio, beta, Ltg_x=None, Ltg_y=None):
    """gadMALAe's exact gradient of the lower bound with respect to L. ``hessian_vector(v, rows)``
    returns H(y) v for the chains ``rows`` (an index array) and v of shape (len(rows), d); it is
    called only for the chains with log_ratio < 0."""
    _check_bound_arguments(L, log_ratio, beta, eps=eps, grad_x=grad_x, grad_y=grad_y, Ltg_x=Ltg_x, Ltg_y=Ltg_y)
    require_callable(hessian_vector, "hessian_vector")
    Ltg_x = rmatvec(L, grad_x) if Ltg_x is None else Ltg_x
    Ltg_y = rmatvec(L, grad_y) if Ltg_y is None else Ltg_y
    active = np.asarray(log_ratio) < 0
    u = 0.5 * Ltg_x + eps
    d = u + 0.5 * Ltg_y
    k = np.zeros_like(eps)
    rows = np.flatnonzero(active)
    if rows.size:
        k[rows] = hessian_vector(matvec(L[rows], d[rows]), rows)
    Ltk = rmatvec(L, k)
    # Grouped by left vector: g_y (u - d/2)^T + g_x (L^T g_y / 2 - d / 2 - L^T k / 4)^T + k (-L^T g_x / 4 - eps / 2)^T
    left = np.stack([grad_y, grad_x, k], axis=2)
    right = np.stack([u - 0.5 * d, 0.5 * Ltg_y - 0.5 * d - 0.25 * Ltk, -0.25 * Ltg_x - 0.5 * eps], axis=2)
    G = tril_outer(left, right, active)
    return add_entropy_gradient(G, L, beta)


def supports_hessian_vector_product(target):
    return callable(getattr(target, "hessian_vector_product", None))


def hessian_vector_product(target, x, v):
    """H(x) v per row, for x and v of shape (m, d), counted as m gradient evaluations of the target:
    the target's ``hessian_vector_product(x, v)`` (closed forms for the Gaussian and logistic-regression
    targets of mcmc_lib.targets, autograd for an AutogradTarget)."""
    if not supports_hessian_vector_product(target):
        raise ValueError(f"target {target!r} offers no Hessian-vector product")
    if not (type(x) is np.ndarray and type(v) is np.ndarray and x.ndim == 2 and v.shape == x.shape
            and x.shape[1] == target.dim):
        x = require_array_shape(x, "x", (len(np.atleast_2d(x)), target.dim), "m x target.dim")
        require_array_shape(v, "v", x.shape, "as x")
    target.n_grad_evals += x.shape[0]
    return target.hessian_vector_product(x, v)


class _GradientAdaptive(Sampler):
    """Shared parts of gadRWM, gadMALAf and gadMALAe: per-chain L (n, d, d), beta (n,), the RMSProp
    accumulator, and ``adapt`` (gradient step on L, clamp of diag(L), beta update)."""

    default_learning_rate = 5e-5
    default_target_accept = 0.25

    def __init__(self, target, learning_rate=None, target_accept=None, initial_chol=None, beta0=1.0,
                 beta_rate=BETA_RATE, beta_floor=BETA_FLOOR, rmsprop_decay=RMSPROP_DECAY, min_diag=MIN_DIAG):
        super().__init__(target)
        d = target.dim
        self.learning_rate = float(require_positive(self.default_learning_rate if learning_rate is None
                                                    else learning_rate, "learning_rate"))
        self.target_accept = require_probability(self.default_target_accept if target_accept is None
                                                 else target_accept, "target_accept")
        if np.ndim(beta0) != 0:
            raise ValueError(f"beta0 must be a positive scalar, got {beta0!r}")
        self.beta0 = float(require_positive(beta0, "beta0"))
        self.beta_rate = float(require_positive(beta_rate, "beta_rate"))
        self.beta_floor = float(require_positive(beta_floor, "beta_floor"))
        self.rmsprop_decay = float(require_probability(rmsprop_decay, "rmsprop_decay", open_interval=False))
        if self.rmsprop_decay == 0:
            raise ValueError(f"rmsprop_decay must lie in (0, 1], got {rmsprop_decay!r}")
        self.min_diag = float(require_positive(min_diag, "min_diag"))
        if initial_chol is None:
            initial_chol = 0.1 / np.sqrt(d)
        initial_chol = np.asarray(initial_chol, dtype=float)
        if initial_chol.ndim == 0:
            require_positive(initial_chol, "initial_chol")
            initial_chol = float(initial_chol) * np.eye(d)
        if (initial_chol.shape != (d, d) or not np.all(np.isfinite(initial_chol))
                or np.any(np.triu(initial_chol, 1) != 0) or np.any(np.diag(initial_chol) <= 0)):
            raise ValueError(f"initial_chol must be a positive scalar or a ({d}, {d}) lower-triangular matrix "
                             f"with a positive diagonal, got shape {initial_chol.shape}")
        self.initial_chol = initial_chol
        self.L = self.beta = self.S = None

    def init(self, x0):
        state = super().init(x0)
        n, d = state.x.shape
        self.L = np.broadcast_to(self.initial_chol, (n, d, d)).copy()
        self.S = np.zeros((n, d, d))
        self.beta = np.full(n, self.beta0)
        self.n_adapt = 0
        self._last = None
        return state

    def _bound_gradient(self, state, info):
        raise NotImplementedError

    def adapt(self, state, info, iteration):
        """One burn-in update: gradient of the lower bound for the last proposal, RMSProp step on L,
        diag(L) >= min_diag, then beta toward the target acceptance rate."""
        G = self._bound_gradient(state, info)
        rmsprop_step(self.L, self.S, G, self.learning_rate, self.n_adapt == 0, self.rmsprop_decay, self.min_diag)
        self.beta = update_beta(self.beta, info.accepted, self.target_accept, self.beta_rate, self.beta_floor)
        self.n_adapt += 1
        self._after_adapt(state)

    def _after_adapt(self, state):
        pass

    def _require_started(self, what):
        if self.L is None:
            raise RuntimeError(f"{self.name}.{what}() has nothing to report before the sampler has started: run it "
                               "first (mcmc_lib.harness.run, or init(x0)), which sets L and beta")

    def proposal_cov(self):
        self._require_started("proposal_cov")
        return np.matmul(self.L, np.swapaxes(self.L, 1, 2))

    def tuning(self):
        self._require_started("tuning")
        return {"L": self.L.copy(), "beta": self.beta.copy()}


class gadRWM(_GradientAdaptive):
    """Gradient-based adaptive random-walk Metropolis: y = x + L eps, L learned during burn-in."""

    name = "gadRWM"
    uses_gradient = False

    def step(self, rng, state):
        n, d = state.x.shape
        eps = rng.standard_normal((n, d))
        y = state.x + matvec(self.L, eps)
        with np.errstate(over="ignore", invalid="ignore"):
            logp_y = self.target.logp(y)
            log_ratio = logp_y - state.logp
        accepted, prob, nonfinite = metropolis_hastings_accept(log_ratio, rng.uniform(size=n))
        self._last = (y, eps, np.where(nonfinite, np.nan, log_ratio))
        return accept_proposals(state, ChainState(y, logp_y), accepted), StepInfo(accepted, prob, nonfinite)

    def _bound_gradient(self, state, info):
        y, eps, log_ratio = self._last
        active = log_ratio < 0
        grad_y = np.zeros_like(y)
        if active.any():        # the gradient at y only where the proposal was not surely accepted
            with np.errstate(over="ignore", invalid="ignore"):
                grad_y[active] = self.target.grad_logp(y[active])
            log_ratio = np.where(np.all(np.isfinite(grad_y), axis=1), log_ratio, np.nan)
        return rwm_bound_gradient(self.L, eps, grad_y, log_ratio, self.beta)


class gadMALAf(_GradientAdaptive):
    """Gradient-based adaptive MALA, fast variant: y = x + L L^T g_x / 2 + L eps; the gradient of the
    bound holds grad log pi(y) fixed (no Hessian). L^T g_x of the current states is cached."""

    name = "gadMALAf"
    uses_gradient = True
    default_learning_rate = 1.5e-4
    default_target_accept = 0.55

    def init(self, x0):
        state = super().init(x0)
        self._cache(state.x, rmatvec(self.L, state.grad))
        return state

    def _cache(self, x, Ltg):
        self._cached_x, self._Ltg = x, Ltg

    def step(self, rng, state):
        n, d = state.x.shape
        Ltg_x = self._Ltg if state.x is self._cached_x else rmatvec(self.L, state.grad)
        eps = rng.standard_normal((n, d))
        u = 0.5 * Ltg_x + eps
        y = state.x + matvec(self.L, u)
        with np.errstate(over="ignore", invalid="ignore"):
            logp_y, grad_y = self.target.logp_and_grad(y)
            Ltg_y = rmatvec(self.L, grad_y)
            dvec = u + 0.5 * Ltg_y
            log_ratio = (logp_y - state.logp - 0.5 * np.einsum("ij,ij->i", dvec, dvec)
                         + 0.5 * np.einsum("ij,ij->i", eps, eps))
        log_ratio = np.where(np.all(np.isfinite(grad_y), axis=1), log_ratio, np.nan)
        accepted, prob, nonfinite = metropolis_hastings_accept(log_ratio, rng.uniform(size=n))
        new_state = accept_proposals(state, ChainState(y, logp_y, grad_y), accepted)
        # After an acceptance L^T g of the new state is L^T g_y (exact while L is fixed; adapt recomputes it).
        self._cache(new_state.x, np.where(accepted[:, None], Ltg_y, Ltg_x))
        self._last = (eps, state.grad, grad_y, y, Ltg_x, Ltg_y, np.where(nonfinite, np.nan, log_ratio))
        return new_state, StepInfo(accepted, prob, nonfinite)

    def _bound_gradient(self, state, info):
        eps, grad_x, grad_y, _, Ltg_x, Ltg_y, log_ratio = self._last
        return mala_fast_bound_gradient(self.L, eps, grad_x, grad_y, log_ratio, self.beta, Ltg_x, Ltg_y)

    def _after_adapt(self, state):
        self._cache(state.x, rmatvec(self.L, state.grad))     # L changed: refresh L^T g_x


class gadMALAe(gadMALAf):
    """Gradient-based adaptive MALA, exact variant: the gradient of the bound differentiates
    grad log pi(y) through y with Hessian-vector products (only during burn-in, only where r < 0)."""

    name = "gadMALAe"

    def __init__(self, target, **kwargs):
        if not supports_hessian_vector_product(target):
            raise ValueError(f"target {target!r} offers no Hessian-vector product, which gadMALAe needs")
        super().__init__(target, **kwargs)

    def _bound_gradient(self, state, info):
        eps, grad_x, grad_y, y, Ltg_x, Ltg_y, log_ratio = self._last
        def hessian_vector(v, rows):
            return hessian_vector_product(self.target, y[rows], v)
        return mala_exact_bound_gradient(self.L, eps, grad_x, grad_y, hessian_vector, log_ratio, self.beta,
                                         Ltg_x, Ltg_y)


from mcmc_lib.samplers import HMC


class AuthorsHMC(HMC):
    """HMC (identity mass, fixed number of leapfrog steps) whose step size adapts during warm-up by the
    rule of the authors' hmc.m: eps <- eps (1 + rate (a - alpha*) / alpha*), a the 0/1 accept indicator
    (mcmc_lib's HMC applies this factor to eps^2, i.e. half the rate on eps)."""

    def adapt(self, state, info, iteration):
        self.step_size = self.step_size * (1.0 + self.adapt_rate * (info.accepted.astype(float) - self.target_accept)
                                           / self.target_accept)
