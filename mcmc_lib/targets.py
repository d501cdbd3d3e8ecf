"""Target distributions with batched log densities and gradients.

Every target works on a batch of states, an array of shape ``(n_chains, dim)``, and returns
``logp`` of shape ``(n_chains,)`` and ``grad_logp`` of shape ``(n_chains, dim)``. A target counts
the rows it evaluates (``n_logp_evals``, ``n_grad_evals``) so that runs can report their cost in
gradient evaluations, which unlike seconds do not depend on the machine.

Subclasses implement ``_logp`` and ``_grad`` (and may override ``_logp_and_grad`` when the two
share work). ``AutogradTarget`` derives the gradient of any ``autograd.numpy`` log density; the
hot targets here have hand-derived gradients that the tests check against autograd.
"""
from __future__ import annotations

import numpy as np
import autograd
import autograd.numpy as anp
from scipy import linalg

from .validation import (as_batch, float_array, require_int, require_number, require_positive_definite,
                         require_positive_scalar, require_str, wrong_type)


class Target:
    """Base class: batched log density and gradient, with evaluation counters."""

    name = "target"

    def __init__(self, dim: int):
        self.dim = require_int(dim, "dim", minimum=1)
        self.reset_counters()

    # --- public, counted -------------------------------------------------------------
    def logp(self, x):
        x = as_batch(x, self.dim)
        self.n_logp_evals += x.shape[0]
        return self._checked_logp(self._logp(x), x.shape[0])

    def grad_logp(self, x):
        x = as_batch(x, self.dim)
        self.n_grad_evals += x.shape[0]
        return self._checked_grad(self._grad(x), x.shape[0])

    def logp_and_grad(self, x):
        x = as_batch(x, self.dim)
        self.n_logp_evals += x.shape[0]
        self.n_grad_evals += x.shape[0]
        logp, grad = self._logp_and_grad(x)
        return self._checked_logp(logp, x.shape[0]), self._checked_grad(grad, x.shape[0])

    # --- output checks: a wrong shape fails here, naming the culprit, not deep in a sampler ----
    _logp_source = "logp"          # what to blame in the messages (AutogradTarget: its logp_fn)

    def _checked_logp(self, value, n):
        if np.shape(value) != (n,):
            raise ValueError(f"{self._logp_source} of {self.name!r} must return one log density per row: "
                             f"shape ({n},) for x of shape ({n}, {self.dim}), got shape {np.shape(value)}")
        return value

    def _checked_grad(self, value, n):
        if np.shape(value) != (n, self.dim):
            raise ValueError(f"the gradient of {self._logp_source} of {self.name!r} must have shape "
                             f"({n}, {self.dim}) for x of shape ({n}, {self.dim}), got shape {np.shape(value)}")
        return value

    def reset_counters(self):
        self.n_logp_evals = 0
        self.n_grad_evals = 0

    # --- to implement ----------------------------------------------------------------
    def _logp(self, x):
        raise NotImplementedError

    def _grad(self, x):
        raise NotImplementedError

    def _logp_and_grad(self, x):
        return self._logp(x), self._grad(x)

    def __repr__(self):
        return f"{type(self).__name__}(name={self.name!r}, dim={self.dim})"


class AutogradTarget(Target):
    """Any log density written with ``autograd.numpy``; the gradient comes from autograd.

    ``logp_fn`` maps a batch ``(n, dim)`` to ``(n,)`` and must treat rows independently (then the
    gradient of the sum is the batch of per-row gradients). A ``logp_fn`` that returns anything
    but one value per row (a scalar, the sum over rows, shape ``(n, 1)``) raises ValueError at the
    first evaluation, instead of giving every chain the same log density.
    """

    _logp_source = "logp_fn"

    def __init__(self, logp_fn, dim: int, name: str = "autograd target"):
        if not callable(logp_fn):
            raise wrong_type("logp_fn", "callable (a function of a batch (n, dim))", logp_fn)
        super().__init__(dim)
        self.name = require_str(name, "name")
        self._fn = logp_fn
        self._value_and_grad = autograd.value_and_grad(lambda x: anp.sum(logp_fn(x)))

    def _logp(self, x):
        return np.asarray(self._fn(x), dtype=float)

    def _grad(self, x):
        return self._value_and_grad(x)[1]

    def _logp_and_grad(self, x):
        return self._logp(x), self._grad(x)

    def hessian_vector_product(self, x, v):
        """H(x) v per row for x, v of shape (m, dim), by autograd (a gradient of the gradient)."""
        grad_sum = autograd.grad(lambda z: anp.sum(self._fn(z)))
        return autograd.grad(lambda z: anp.sum(grad_sum(z) * v))(np.asarray(x, dtype=float))


# =====================================================================================
# Gaussians
# =====================================================================================
class Gaussian(Target):
    """N(mean, cov) with any positive-definite covariance; log density up to its constant.

    logp(x) = -1/2 (x - m)^T S^{-1} (x - m),   grad = -S^{-1} (x - m).
    A diagonal covariance (1-d ``cov``) is handled without matrices.
    """

    def __init__(self, cov, mean=None, name: str = "gaussian"):
        cov = float_array(cov, "cov")
        if cov.ndim not in (1, 2) or cov.size == 0:
            raise ValueError(f"cov must be a covariance matrix (dim, dim) or its diagonal (dim,), got shape {cov.shape}")
        diagonal = cov.ndim == 1
        dim = cov.shape[0]
        super().__init__(dim)
        self.name = require_str(name, "name")
        self.mean = np.zeros(dim) if mean is None else float_array(mean, "mean")
        if self.mean.shape != (dim,):
            raise ValueError(f"mean must have shape ({dim},), got {self.mean.shape}")
        self.diagonal = diagonal
        if diagonal:
            if not np.all(np.isfinite(cov)) or np.any(cov <= 0):
                raise ValueError("cov (diagonal) must hold positive finite variances")
            self.variances = cov
            self.cov = np.diag(cov)
            self.precision = np.diag(1.0 / cov)
            self.chol = np.diag(np.sqrt(cov))
        else:
            self.chol = require_positive_definite(cov, "cov")
            self.cov = cov
            eye = np.eye(dim)
            chol_inv = linalg.solve_triangular(self.chol, eye, lower=True)
            self.precision = chol_inv.T @ chol_inv
        self._neg_variances = -self.variances if diagonal else None     # for _logp_and_grad
        self._neg_precision = None if diagonal else -self.precision

    @property
    def std(self):
        return np.sqrt(np.diag(self.cov))

    def _logp(self, x):
        return self._logp_and_grad(x)[0]

    def _grad(self, x):
        centred = x - self.mean
        return centred / self._neg_variances if self.diagonal else centred @ self._neg_precision

    def _logp_and_grad(self, x):
        # Cheap targets are dominated by NumPy's per-call overhead (about 1 us a call at d = 100):
        # the minus sign lives in the stored -v or -S^{-1}, and vecdot is a third of einsum's cost.
        centred = x - self.mean
        grad = centred / self._neg_variances if self.diagonal else centred @ self._neg_precision
        logp = np.vecdot(centred, grad)          # -c^T S^{-1} c = c . grad
        logp *= 0.5
        return logp, grad

    def mahalanobis_sq(self, x):
        """(x - m)^T S^{-1} (x - m) per row: chi^2_d distributed under the target."""
        return -2.0 * self._logp(as_batch(x, self.dim))

    def hessian(self):
        """The constant Hessian -S^{-1}."""
        return -self.precision

    def hessian_vector_product(self, x, v):
        """H v = -S^{-1} v per row of v (m, dim); x does not matter."""
        return -v / self.variances if self.diagonal else -(v @ self.precision)

    def sample(self, rng, n):
        """n exact i.i.d. draws, shape (n, dim)."""
        z = rng.standard_normal((n, self.dim))
        return self.mean + z @ self.chol.T


class DiagonalGaussian(Gaussian):
    """N(mean, diag(variances)) in O(dim) memory and time per row: no dim x dim matrix is built.

    logp(x) = -1/2 sum_i (x_i - m_i)^2 / v_i,   grad = -(x - m) / v,   Hessian = -diag(1 / v).
    The same interface as ``Gaussian`` (``mean``, ``variances``, ``std``, ``sample``,
    ``mahalanobis_sq``, ``hessian_vector_product``); the dense matrices ``cov``, ``precision``,
    ``chol`` and ``hessian()`` are built on request only (dim^2 floats: 320 GB at dim = 200,000).
    """

    diagonal = True

    def __init__(self, variances, mean=None, name: str = "diagonal gaussian"):
        variances = float_array(variances, "variances")
        if variances.ndim != 1 or variances.size == 0:
            raise ValueError(f"variances must be a non-empty 1-d array, got shape {variances.shape}")
        if not np.all(np.isfinite(variances)) or np.any(variances <= 0):
            raise ValueError("variances must be positive and finite")
        Target.__init__(self, variances.size)
        self.name = require_str(name, "name")
        self.variances = variances
        self.mean = np.zeros(self.dim) if mean is None else float_array(mean, "mean")
        if self.mean.shape != (self.dim,):
            raise ValueError(f"mean must have shape ({self.dim},), got {self.mean.shape}")
        self._inverse_variances = 1.0 / variances
        self._neg_variances = -variances         # for Gaussian._logp_and_grad

    @property
    def std(self):
        return np.sqrt(self.variances)

    @property
    def cov(self):
        return np.diag(self.variances)

    @property
    def precision(self):
        return np.diag(self._inverse_variances)

    @property
    def chol(self):
        return np.diag(self.std)

    # _logp, _grad and _logp_and_grad are Gaussian's diagonal case (divisions by -v, not products
    # with -1/v): the same floating-point numbers whichever class holds a diagonal Gaussian.

    def mahalanobis_sq(self, x):
        return -2.0 * self._logp(as_batch(x, self.dim))

    def hessian(self):
        return -self.precision

    def hessian_vector_product(self, x, v):
        return -np.asarray(v, dtype=float) / self.variances

    def sample(self, rng, n):
        return self.mean + rng.standard_normal((n, self.dim)) * self.std


def neal_gaussian(dim: int = 100) -> DiagonalGaussian:
    """Neal's ill-conditioned diagonal Gaussian: independent coordinates with sds 1/dim, 2/dim, ..., 1
    (0.01, ..., 1 for dim = 100). O(dim) memory: neal_gaussian(200_000) needs no dense matrix."""
    if isinstance(dim, (bool, np.bool_)) or not isinstance(dim, (int, np.integer)) or dim < 1:
        raise ValueError(f"dim must be a positive integer, got {dim!r}")
    dim = int(dim)
    sds = np.arange(1, dim + 1) / dim
    return DiagonalGaussian(sds**2, name=f"Neal's {dim}-d Gaussian")


def correlated_gaussian_2d(rho: float = 0.99) -> Gaussian:
    """Unit variances and correlation rho (the gsm paper's Figure 1 target)."""
    if not -1 < require_number(rho, "rho") < 1:
        raise ValueError(f"rho must lie in (-1, 1), got {rho}")
    return Gaussian(np.array([[1.0, rho], [rho, 1.0]]), name=f"2-d Gaussian, rho={rho}")


def squared_exponential_gaussian(n_points: int = 51, spacing: float = 0.08,
                                 lengthscale: float = 0.4, jitter: float = 0.01) -> Gaussian:
    """The gsm paper's 51-d GP-kernel Gaussian: K_ij = exp(-(t_i-t_j)^2 / (2 l^2)) + jitter d_ij,
    with inputs t = 0, 0.08, ..., 4."""
    require_int(n_points, "n_points", minimum=1)
    require_positive_scalar(spacing, "spacing")
    require_positive_scalar(lengthscale, "lengthscale")
    if require_number(jitter, "jitter") < 0:
        raise ValueError(f"jitter must be >= 0, got {jitter!r}")
    t = np.arange(n_points) * spacing
    cov = np.exp(-0.5 * (t[:, None] - t[None, :]) ** 2 / lengthscale**2) + jitter * np.eye(n_points)
    return Gaussian(cov, name=f"{n_points}-d squared-exponential Gaussian")


def paired_gaussian(n_pairs: int = 16, rho: float = 0.99) -> Gaussian:
    """Neal (2020)'s 32-d target: 16 independent pairs of unit-variance coordinates with correlation rho."""
    require_int(n_pairs, "n_pairs", minimum=1)
    if not -1 < require_number(rho, "rho") < 1:
        raise ValueError(f"rho must lie in (-1, 1), got {rho}")
    block = np.array([[1.0, rho], [rho, 1.0]])
    cov = linalg.block_diag(*([block] * n_pairs))
    return Gaussian(cov, name=f"{n_pairs} pairs with rho={rho}")


# =====================================================================================
# Haario's test suite: pi_1 .. pi_4
# =====================================================================================
class TwistedGaussian(Target):
    """Haario et al.'s twisted ("banana") Gaussian: density g(phi_b(x)) with g = N(0, diag(v, 1, ..., 1))
    and phi_b(x) = (x_1, x_2 + b x_1^2 - v b, x_3, ..., x_d). The Jacobian of phi_b is 1, so

        logp(x) = -1/2 [ y_1^2 / v + y_2^2 + ... + y_d^2 ],   y = phi_b(x),
        d logp / dx_1 = -y_1 / v - 2 b x_1 y_2,   d logp / dx_2 = -y_2,   d logp / dx_i = -x_i (i > 2).

    Exact draws: y ~ N(0, diag(v, 1, ...)), x = phi_b^{-1}(y) = (y_1, y_2 - b y_1^2 + v b, y_3, ...).
    The mean is 0 and the covariance diag(v, 1 + 2 b^2 v^2, 1, ..., 1).
    """

    def __init__(self, dim: int, b: float, v: float = 100.0, name: str | None = None):
        require_int(dim, "dim", minimum=2)
        super().__init__(dim)
        if require_number(b, "b") < 0:
            raise ValueError(f"b must be a finite non-negative twist, got {b!r}")
        if require_number(v, "v") <= 0:
            raise ValueError(f"v must be a positive variance, got {v!r}")
        if name is not None:
            require_str(name, "name")
        self.b, self.v = float(b), float(v)
        self.name = name or f"twisted Gaussian (d={dim}, b={b})"
        self.mean = np.zeros(dim)
        self.cov = np.diag([self.v, 1 + 2 * self.b**2 * self.v**2] + [1.0] * (dim - 2))

    def untwist(self, x):
        """phi_b(x), which is N(0, diag(v, 1, ...)) distributed under the target."""
        y = np.array(x, dtype=float, copy=True)
        y[:, 1] += self.b * x[:, 0] ** 2 - self.v * self.b
        return y

    def mahalanobis_sq(self, x):
        """phi_b(x)^T C^{-1} phi_b(x): chi^2_d under the target (for the confidence-region metrics)."""
        return -2.0 * self._logp(as_batch(x, self.dim))

    def _logp(self, x):
        y = self.untwist(x)
        return -0.5 * (y[:, 0] ** 2 / self.v + np.sum(y[:, 1:] ** 2, axis=1))

    def _grad(self, x):
        return self._logp_and_grad(x)[1]

    def _logp_and_grad(self, x):
        y = self.untwist(x)
        grad = -y
        grad[:, 0] = -y[:, 0] / self.v - 2 * self.b * x[:, 0] * y[:, 1]
        logp = -0.5 * (y[:, 0] ** 2 / self.v + np.sum(y[:, 1:] ** 2, axis=1))
        return logp, grad

    def sample(self, rng, n):
        y = rng.standard_normal((n, self.dim))
        y[:, 0] *= np.sqrt(self.v)
        y[:, 1] -= self.b * y[:, 0] ** 2 - self.v * self.b
        return y


def haario_target(index: int, dim: int, v: float = 100.0) -> Target:
    """Haario's suite: pi_1 = N(0, diag(v, 1, ...)); pi_2 = pi_1 rotated so its long axis lies along
    (1, ..., 1), i.e. cov = I + (v - 1) u u^T with u = (1, ..., 1)/sqrt(d); pi_3 and pi_4 twisted
    with b = 0.03 and b = 0.1."""
    if require_int(index, "index", minimum=1) not in (1, 2, 3, 4):
        raise ValueError(f"index must be 1, 2, 3 or 4, got {index!r}")
    require_int(dim, "dim", minimum=1)
    require_positive_scalar(v, "v")
    if index == 1:
        return Gaussian(np.array([v] + [1.0] * (dim - 1)), name=f"pi_1 (d={dim})")
    if index == 2:
        u = np.ones(dim) / np.sqrt(dim)
        return Gaussian(np.eye(dim) + (v - 1) * np.outer(u, u), name=f"pi_2 (d={dim})")
    if index in (3, 4):
        return TwistedGaussian(dim, {3: 0.03, 4: 0.1}[index], v, name=f"pi_{index} (d={dim})")
    raise ValueError(f"index must be 1, 2, 3 or 4, got {index!r}")


# =====================================================================================
# Bayesian logistic regression
# =====================================================================================
def _sigmoid(z):
    """1 / (1 + e^{-z}) to full relative precision for every z: e^{-z} overflows to inf only where
    sigmoid(z) < 1e-308, and there 1 / (1 + inf) = 0 is the right answer."""
    with np.errstate(over="ignore"):
        e = np.exp(-z)
    e += 1.0
    return np.divide(1.0, e, out=e)


# A product of at most this many factors in [1, 2] stays below 2**1000 < 1.8e308 (see _sum_log).
_PRODUCT_CHUNK = 1000


def _sum_log(u, chunk_starts):
    """sum_i log(u_i) per row, for u_i in [1, 2], as the log of products of chunks of at most
    _PRODUCT_CHUNK factors. NumPy's log costs as much as its exp (about 5 ns a value on a CPU without
    AVX-512), a product 1 ns. The product of a chunk cannot overflow, and it carries a relative
    rounding error below 1000 eps / 2 = 1.1e-13, so its log is off by less than 1.1e-13."""
    return np.log(np.multiply.reduceat(u, chunk_starts, axis=1)).sum(axis=1)


class LogisticRegression(Target):
    """Bayesian logistic regression with prior w ~ N(0, prior_var I):

        logp(w) = sum_i [ t_i eta_i - log(1 + e^{eta_i}) ] - |w|^2 / (2 s^2),   eta = X w,
        grad    = X^T (t - sigmoid(X w)) - w / s^2,
        Hessian = -X^T diag(sigmoid (1 - sigmoid)) X - I / s^2.

    X (N, d) already holds the bias column; t in {0, 1}. ``minibatch_grad`` gives the unbiased
    estimate (N/n) sum over a minibatch of the likelihood gradient, plus the prior's.
    """

    def __init__(self, X, t, prior_var: float = 1.0, name: str = "logistic regression"):
        X = float_array(X, "X")
        t = float_array(t, "t")
        if X.ndim != 2:
            raise ValueError(f"X must be a 2-d array (n_data, dim), got shape {X.shape}")
        if t.shape != (X.shape[0],) or not np.all((t == 0) | (t == 1)):
            raise ValueError(f"t must hold {X.shape[0]} labels in {{0, 1}}")
        require_positive_scalar(prior_var, "prior_var")
        super().__init__(X.shape[1])
        self.X, self.t, self.prior_var, self.name = X, t, float(prior_var), require_str(name, "name")
        self.n_data = X.shape[0]
        # Constants of the one-pass evaluation below: t - 1/2, and X^T (t - 1/2), which turns the
        # sum of (t_i - 1/2) eta_i over the data into a product with w of length d.
        self._t_centred = t - 0.5
        self._Xt_t_centred = X.T @ self._t_centred
        self._chunk_starts = np.arange(0, self.n_data, _PRODUCT_CHUNK)

    def _logp(self, w):
        eta, abs_eta_sum, u = self._shared_exp(w)
        return self._log_density(w, abs_eta_sum, u)

    def _grad(self, w):
        eta, _, u = self._shared_exp(w)
        return self._residual(eta, u) @ self.X - w / self.prior_var

    def _logp_and_grad(self, w):
        # One pass over the data for both: eta = X w once, and one exp, shared by the softplus
        # log(1 + e^eta) of the log density and by sigmoid(eta) in the gradient.
        eta, abs_eta_sum, u = self._shared_exp(w)
        logp = self._log_density(w, abs_eta_sum, u)
        grad = self._residual(eta, u) @ self.X - w / self.prior_var   # X^T (t - sigmoid(X w)) - w / s^2
        return logp, grad

    # The two matrix products X w and X^T r are the floor of the cost; everything between them is
    # done in place on one (n_chains, N) array, with one exp per datum: e = exp(-|eta|) <= 1, which
    # cannot overflow however large |eta| is.
    def _shared_exp(self, w):
        """eta = X w per chain, sum_i |eta_i| per chain, and u = 1 + exp(-|eta|) in [1, 2]."""
        eta = w @ self.X.T
        u = np.abs(eta)
        abs_eta_sum = u.sum(axis=1)
        np.negative(u, out=u)
        np.exp(u, out=u)
        u += 1.0
        return eta, abs_eta_sum, u

    def _log_density(self, w, abs_eta_sum, u):
        """With softplus(eta) = max(eta, 0) + log(1 + e^{-|eta|}) and max(eta, 0) = (eta + |eta|)/2,
        t eta - softplus(eta) = (t - 1/2) eta - |eta|/2 - log u, summed over the data."""
        loglik = w @ self._Xt_t_centred - 0.5 * abs_eta_sum - _sum_log(u, self._chunk_starts)
        return loglik - (0.5 / self.prior_var) * np.vecdot(w, w)

    def _residual(self, eta, u):
        """t - sigmoid(eta), written over u: sigmoid(eta) is 1/u for eta >= 0 and e/u = 1 - 1/u for
        eta < 0, i.e. sigmoid(eta) - 1/2 = sign(eta) (1/u - 1/2)."""
        r = np.divide(1.0, u, out=u)
        r -= 0.5
        np.copysign(r, eta, out=r)
        return np.subtract(self._t_centred, r, out=r)

    def minibatch_grad(self, w, indices):
        """Unbiased gradient estimate from the data rows ``indices`` (counted as one gradient
        evaluation per chain times the fraction of the data used)."""
        w = as_batch(w, self.dim, "w")
        indices = np.asarray(indices)
        self.n_grad_evals += w.shape[0] * len(indices) / self.n_data
        Xb, tb = self.X[indices], self.t[indices]
        return (self.n_data / len(indices)) * ((tb - _sigmoid(w @ Xb.T)) @ Xb) - w / self.prior_var

    def hessian(self, w):
        """Per-chain Hessians, shape (n_chains, d, d)."""
        w = as_batch(w, self.dim, "w")
        s = _sigmoid(w @ self.X.T)
        weights = s * (1 - s)
        return -np.einsum("ni,ij,ik->njk", weights, self.X, self.X) - np.eye(self.dim) / self.prior_var

    def hessian_vector_product(self, w, v):
        """H(w) v per row for w, v of shape (m, d), in O(N d) per row without forming H."""
        s = _sigmoid(w @ self.X.T)
        return -((s * (1.0 - s)) * (v @ self.X.T)) @ self.X - v / self.prior_var
