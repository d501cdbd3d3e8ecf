"""Generated from book/kmc.md by `python -m mcmc_lib.literate export`.

Do not edit: change the chapter's cells tagged `export` and regenerate.
"""
from __future__ import annotations

from typing import Callable

import numpy as np
from scipy import linalg
from scipy.special import expit, log_expit, logsumexp

from mcmc_lib.diagnostics import sq_distances
from mcmc_lib.samplers.base import (ChainState, Sampler, StepInfo, accept_proposals, finite_rows,
                                    metropolis_hastings_accept, per_chain)
from mcmc_lib.targets import Target
from mcmc_lib.validation import float_array, require_array_shape, require_int, require_positive, require_rng, require_str


def check_points(X, name: str, dim: int | None = None, min_points: int = 1) -> np.ndarray:
    """X as a finite float array (n, d); ValueError naming the argument otherwise."""
    X = float_array(X, name)
    if X.ndim != 2 or X.shape[0] < min_points or (dim is not None and X.shape[1] != dim):
        want = f"(n >= {min_points}, {dim if dim is not None else 'd'})"
        raise ValueError(f"{name} must have shape {want}, got {X.shape}")
    if not np.all(np.isfinite(X)):
        raise ValueError(f"{name} must be finite")
    return X


def gaussian_kernel(X, Y, sigma: float) -> np.ndarray:
    """k(x, y) = exp(-||x - y||^2 / sigma) for all pairs, (n_X, n_Y)."""
    _check_kernel_arguments(X, Y, sigma, ("X", "Y"))
    return np.exp(-sq_distances(X, Y) / sigma)


def lite_b_C(Z, X, sigma: float):
    """b (n,) and C (n, n) of eq. (eq-kmc-lite-objective): the model f = sum_i alpha_i k(z_i, .) with
    basis Z (n, d), scored on points X (N, d). Costs O(d n^2 N)."""
    _check_kernel_arguments(Z, X, sigma, ("Z", "X"))
    K = gaussian_kernel(Z, X, sigma)
    d = Z.shape[1]
    b = np.sum(K * ((2.0 / sigma) * sq_distances(Z, X) - d), axis=1)
    M = np.concatenate([K * (Z[:, [l]] - X[None, :, l]) for l in range(d)], axis=1)   # (n, N d)
    return b, M @ M.T


def lite_objective(alpha, b, C, sigma: float, n_points: int) -> float:
    """The empirical score-matching objective (eq-kmc-lite-objective), without the ridge."""
    _check_quadratic_form(alpha, b, C, "alpha")
    require_positive_scalar(sigma, "sigma")
    require_int(n_points, "n_points", minimum=1)
    return float(2.0 / (n_points * sigma) * alpha @ b + 2.0 / (n_points * sigma**2) * alpha @ C @ alpha)


def fit_lite(Z, sigma: float, lam: float, regulariser: str = "code") -> np.ndarray:
    """alpha of eq. (eq-kmc-lite-solution): -(sigma/2) (C + lam R)^{-1} b with R = K + I ("code",
    the authors' code) or R = I ("paper", Proposition 1)."""
    Z = check_points(Z, "Z")
    require_positive(sigma, "sigma")
    require_positive(lam, "lam")
    require_str(regulariser, "regulariser", ("code", "paper"))
    b, C = lite_b_C(Z, Z, sigma)
    R = np.eye(len(Z)) if regulariser == "paper" else gaussian_kernel(Z, Z, sigma) + np.eye(len(Z))
    A = C + lam * R
    try:
        solution = linalg.solve(A, b, assume_a="pos")
    except (linalg.LinAlgError, ValueError):
        solution = linalg.lstsq(A, b)[0]
    return -0.5 * sigma * solution


def lite_log_density(x, Z, alpha, sigma: float) -> np.ndarray:
    """f(x) = sum_i alpha_i k(z_i, x) at points x (N, d)."""
    _check_lite_model(x, Z, alpha, sigma)
    return gaussian_kernel(np.atleast_2d(x), Z, sigma) @ alpha


def lite_grad(x, Z, alpha, sigma: float) -> np.ndarray:
    """grad f(x) of eq. (eq-kmc-lite-model) at points x (N, d); O(n d) per point."""
    _check_lite_model(x, Z, alpha, sigma)
    x = np.atleast_2d(x)
    Kw = gaussian_kernel(x, Z, sigma) * alpha
    return (2.0 / sigma) * (Kw @ Z - Kw.sum(axis=1)[:, None] * x)


# Argument checks of this module's functions (mcmc_lib.validation): a wrong call fails at the call, naming
# the argument, its value and what is expected. The fits and the samplers call the kernel, the models'
# gradients, the leapfrog, the rank-one update and the schedule many times with their own arrays, which pass
# the first, cheap test of each check; only another caller's arguments get the rest. No check converts or
# copies an argument: each function computes with its arguments as it always did.
from collections.abc import Iterable, Mapping

from mcmc_lib.validation import (require_bool, require_callable, require_positive_scalar, require_probability,
                                 require_sequence, require_target, wrong_type)


def _float_arrays(*values) -> bool:
    """Whether every value is a numpy array of floats (the fast paths' test)."""
    return all(type(value) is np.ndarray and value.dtype.kind == "f" for value in values)


def _is_width(sigma) -> bool:
    """Whether sigma is a positive finite float (numpy's too), as the fits pass a kernel width."""
    return isinstance(sigma, float) and 0.0 < sigma < np.inf


def _points(value, name, dim=None, anchor=None):
    """The shape (n, d) of the points ``value``; d = ``dim``, the coordinates of ``anchor``, when given."""
    shape = float_array(value, name).shape
    if dim is None and len(shape) != 2:
        raise ValueError(f"{name} must have shape (n, d), one point per row, got {shape}")
    if dim is not None and (len(shape) != 2 or shape[1] != dim):
        raise ValueError(f"{name} must have shape (n, {dim}), one point per row with as many coordinates as "
                         f"{anchor}, got {shape}")
    return shape


def _point_or_points(value, name, dim, anchor):
    """x of a fitted model: points (N, d) or one point (d,), with as many coordinates as ``anchor``."""
    shape = np.atleast_2d(float_array(value, name)).shape
    if len(shape) != 2 or shape[1] != dim:
        raise ValueError(f"{name} must be points (N, {dim}) or one point ({dim},), with as many coordinates as "
                         f"{anchor}, got shape {np.shape(value)}")


def _check_kernel_arguments(first, second, sigma, names):
    """gaussian_kernel's and lite_b_C's: two sets of points with one d, and a kernel width."""
    if (_float_arrays(first, second) and first.ndim == second.ndim == 2 and first.shape[1] == second.shape[1]
            and _is_width(sigma)):
        return
    dim = _points(first, names[0])[1]
    _points(second, names[1], dim, names[0])
    require_positive_scalar(sigma, "sigma")


def _check_lite_model(x, Z, alpha, sigma):
    """lite_log_density's and lite_grad's: x (N, d) or (d,), the basis Z (n, d), its weights alpha (n,) and
    the kernel width."""
    if (_float_arrays(x, Z, alpha) and Z.ndim == 2 and 1 <= x.ndim <= 2 and x.shape[-1] == Z.shape[1]
            and alpha.shape == Z.shape[:1] and _is_width(sigma)):
        return
    n, dim = _points(Z, "Z")
    _point_or_points(x, "x", dim, "Z")
    require_array_shape(alpha, "alpha", (n,), "one weight per point of Z", numpy_only=False)
    require_positive_scalar(sigma, "sigma")


def _check_quadratic_form(weights, b, C, weights_name):
    """The score-matching objectives': b (n,), C (n, n) and the weights (n,) (alpha or theta), a numpy array
    (the objective multiplies them by a number, which would repeat a list)."""
    b_shape = float_array(b, "b").shape
    if len(b_shape) != 1:
        raise ValueError(f"b must have shape (n,), got {b_shape}")
    require_array_shape(C, "C", 2 * b_shape, "square, one row and column per entry of b", numpy_only=False)
    require_array_shape(weights, weights_name, b_shape, "one weight per entry of b")


def _check_grid(grid, name):
    """A grid of the cross-validation: a non-empty list of finite log values."""
    arr = float_array(grid, name)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"{name} must be a non-empty list of log values, got shape {arr.shape}: {grid!r}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must hold finite log values, got {grid!r}")


class RandomFeatures:
    """phi(x) = sqrt(2/m) cos(Omega^T x + u), Omega (d, m), u (m,)."""

    def __init__(self, omega, phases):
        self.omega = float_array(omega, "omega")
        self.phases = float_array(phases, "phases")
        if self.omega.ndim != 2:
            raise ValueError(f"omega must have shape (d, m), one frequency per column, got {self.omega.shape}")
        if self.phases.shape != (self.omega.shape[1],):
            raise ValueError(f"phases must have shape (m,) = ({self.omega.shape[1]},), one per column of omega, "
                             f"got {self.phases.shape}")
        self.dim, self.m = self.omega.shape
        self.c = np.sum(self.omega**2, axis=0)           # ||omega_j||^2

    @classmethod
    def gaussian(cls, rng, dim: int, m: int, sigma: float):
        """Features of k(x, y) = exp(-||x - y||^2 / sigma): omega ~ N(0, (2 / sigma) I), eq. (eq-kmc-frequency-scale)."""
        require_rng(rng)
        dim = require_int(dim, "dim", minimum=1)
        require_positive_scalar(sigma, "sigma")
        m = require_int(m, "m", minimum=1)
        return cls(np.sqrt(2.0 / sigma) * rng.standard_normal((dim, m)), rng.uniform(0, 2 * np.pi, m))

    @classmethod
    def rational_quadratic(cls, rng, dim: int, m: int, shape: float = 0.6, coded: bool = True):
        """Rational-quadratic features as a Gamma scale mixture of Gaussian features: tau_j ~ Gamma(shape,
        scale 1/shape). coded=True is the authors' construction omega_j = (tau_j / 2) N(0, I); coded=False
        the textbook omega_j ~ N(0, tau_j I), the features of (1 + r^2 / (2 shape))^(-shape)."""
        require_rng(rng)
        dim = require_int(dim, "dim", minimum=1)
        m = require_int(m, "m", minimum=1)
        require_positive_scalar(shape, "shape")
        require_bool(coded, "coded")
        tau = rng.gamma(shape, 1.0 / shape, size=m)
        z = rng.standard_normal((dim, m))
        omega = z * (tau / 2.0) if coded else z * np.sqrt(tau)
        return cls(omega, rng.uniform(0, 2 * np.pi, m))

    def phi(self, X):
        return np.sqrt(2.0 / self.m) * np.cos(X @ self.omega + self.phases)

    def sin_part(self, X):
        return np.sin(X @ self.omega + self.phases)


def finite_b_C(features: RandomFeatures, X):
    """b (m,) and C (m, m) of eq. (eq-kmc-finite) on points X (N, d); O(N m^2 + d m^2)."""
    _require_features(features)
    X = check_points(X, "X", features.dim)
    # At n = m = 16,000 (Figure 2) every (N, m) or (m, m) array is 2 GB, and allocating and filling one
    # costs seconds: the arguments Omega^T x + u are computed once for the cos of b and the sin of C,
    # and each array is worked on in place. The values are those of phi(X) and sin_part(X), bit for bit.
    Z = X @ features.omega + features.phases
    phi = np.cos(Z)
    phi *= np.sqrt(2.0 / features.m)
    b = phi.mean(axis=0) * features.c
    del phi
    S = np.sin(Z, out=Z)
    C = S.T @ S                                   # NumPy computes S^T S with BLAS syrk (half a product)
    C *= 2.0 / (features.m * len(X))
    C *= features.omega.T @ features.omega
    return b, C


def finite_objective(theta, b, C) -> float:
    """J(theta) = theta^T C theta / 2 - theta^T b (eq-kmc-finite), without the ridge."""
    _check_quadratic_form(theta, b, C, "theta")
    return float(0.5 * theta @ C @ theta - theta @ b)


def fit_finite(features: RandomFeatures, X, lam: float) -> np.ndarray:
    """theta = (C + lam I)^{-1} b, eq. (eq-kmc-finite)."""
    require_positive(lam, "lam")
    b, A = finite_b_C(features, X)
    A[np.diag_indices_from(A)] += lam               # C + lam I, in place (C is ours and finite)
    return linalg.solve(A, b, assume_a="pos", overwrite_a=True, check_finite=False)


def finite_grad(x, features: RandomFeatures, theta) -> np.ndarray:
    """grad f(x) = -sqrt(2/m) Omega (sin(Omega^T x + u) * theta) at points x (N, d); O(d m) per point."""
    _check_finite_model(x, features, theta)
    x = np.atleast_2d(x)
    return -np.sqrt(2.0 / features.m) * (features.sin_part(x) * theta) @ features.omega.T


def cholesky_rank_one_update(L, v):
    """In place: L L^T + v v^T = L' L'^T for lower-triangular L (m, m); O(m^2). v is overwritten."""
    _check_rank_one_update(L, v)
    m = L.shape[0]
    for k in range(m):
        r = np.hypot(L[k, k], v[k])
        c, s = r / L[k, k], v[k] / L[k, k]
        L[k, k] = r
        if k + 1 < m:
            L[k + 1:, k] = (L[k + 1:, k] + s * v[k + 1:]) / c
            v[k + 1:] = c * v[k + 1:] - s * L[k + 1:, k]
    return L


class OnlineFiniteEstimator:
    """KMC finite with online rank-d updates of the Cholesky factor of C (the authors' update_fit):
    the ridge lam I is the first, fake observation of the running average, so after t points the
    system is (lam I + sum_{i >= 2} c(x_i)) / t, with b the plain running average of b(x_i)."""

    def __init__(self, features: RandomFeatures, lam: float):
        _require_features(features)
        self.features, self.lam = features, require_positive_scalar(lam, "lam")
        self.L = np.sqrt(self.lam) * np.eye(features.m)
        self.b = np.zeros(features.m)
        self.n = 0
        self.theta = np.zeros(features.m)

    def _b_term(self, x):
        return self.features.phi(x[None, :])[0] * self.features.c

    def update(self, x):
        """Add one point x (d,): O(d m^2)."""
        x = np.asarray(x, dtype=float).reshape(-1)
        if x.shape != (self.features.dim,) or not np.all(np.isfinite(x)):
            raise ValueError(f"x must be a finite vector of length {self.features.dim}")
        if self.n == 0:                              # the first point gives b; lam I stands in for its C-term
            self.b = self._b_term(x)
        else:
            rho = np.clip(1.0 / (self.n + 1), 1e-5, 1 - 1e-5)
            self.L *= np.sqrt(1.0 - rho)
            S = np.sin(x @ self.features.omega + self.features.phases)
            for ell in range(self.features.dim):
                v = np.sqrt(rho) * np.sqrt(2.0 / self.features.m) * S * self.features.omega[ell]
                cholesky_rank_one_update(self.L, v)
            self.b = (1.0 - rho) * self.b + rho * self._b_term(x)
        self.n += 1
        self.theta = linalg.cho_solve((self.L, True), self.b)
        return self

    def system(self):
        """The (C + ridge) matrix and b that theta solves, for checking against a batch fit."""
        return self.L @ self.L.T, self.b


# Argument checks of the random-feature functions (as above). The online estimator calls
# cholesky_rank_one_update d times per point with its own arrays, which pass the first test.
def _require_features(features, name="features"):
    """A RandomFeatures (RandomFeatures.gaussian or RandomFeatures.rational_quadratic makes one)."""
    if not isinstance(features, RandomFeatures):
        if isinstance(features, (list, tuple)):
            raise ValueError(f"{name} must be one RandomFeatures, got a {type(features).__name__} of {len(features)}")
        raise wrong_type(name, "RandomFeatures (RandomFeatures.gaussian or .rational_quadratic)", features)
    return features


def _check_finite_model(x, features, theta):
    """finite_grad's: x (N, d) or (d,) and the weights theta (m,), for features of shape (d, m)."""
    _require_features(features)
    if (_float_arrays(x, theta) and 1 <= x.ndim <= 2 and x.shape[-1] == features.dim
            and theta.shape == (features.m,)):
        return
    _point_or_points(x, "x", features.dim, "the features")
    require_array_shape(theta, "theta", (features.m,), "one weight per feature", numpy_only=False)


def _check_rank_one_update(L, v):
    """cholesky_rank_one_update's: L (m, m) and v (m,), writeable float64 numpy arrays (both are overwritten)."""
    if (type(L) is np.ndarray and type(v) is np.ndarray and L.dtype == v.dtype == np.float64 and v.ndim == 1
            and L.shape == 2 * v.shape and L.flags.writeable and v.flags.writeable):
        return
    for name, value in (("L", L), ("v", v)):
        if not isinstance(value, np.ndarray) or value.dtype != np.float64:
            raise wrong_type(name, "a numpy array of float64 (it is updated in place)", value)
        if not value.flags.writeable:
            raise ValueError(f"{name} must be writeable: it is updated in place")
    if L.ndim != 2 or L.shape[0] != L.shape[1]:
        raise ValueError(f"L must be a square lower-triangular factor, shape (m, m), got {L.shape}")
    if v.shape != L.shape[:1]:
        raise ValueError(f"v must have shape (m,) = {L.shape[:1]}, as L, got {v.shape}")


def cv_folds(n: int, n_folds: int, rng=None, blocked: bool = False) -> list:
    """Index sets of n_folds folds of n points: contiguous blocks in order (blocked), else a random partition."""
    n, n_folds = require_int(n, "n", minimum=1), require_int(n_folds, "n_folds", minimum=2)
    if n < n_folds:
        raise ValueError(f"n must be at least n_folds = {n_folds} to make the folds, got {n}")
    if blocked:
        return np.array_split(np.arange(n), n_folds)
    return np.array_split(require_rng(rng).permutation(n), n_folds)


def cv_objective_lite(X, sigma: float, lam: float, rng, n_folds: int = 5, regulariser: str = "code",
                      blocked: bool = False) -> float:
    """Mean held-out score-matching objective of KMC lite over n_folds folds (cv_folds; lower is better)."""
    n_folds = require_int(n_folds, "n_folds", minimum=2)
    X = check_points(X, "X", min_points=n_folds)
    folds = cv_folds(len(X), n_folds, rng, blocked)
    values = []
    for k in range(n_folds):
        train = np.concatenate([f for j, f in enumerate(folds) if j != k])
        Z, Y = X[train], X[folds[k]]
        alpha = fit_lite(Z, sigma, lam, regulariser)
        b, C = lite_b_C(Z, Y, sigma)
        values.append(lite_objective(alpha, b, C, sigma, len(Y)))
    return float(np.mean(values))


def cv_objective_finite(X, features: RandomFeatures, lam: float, rng, n_folds: int = 5,
                        blocked: bool = False) -> float:
    """Mean held-out objective of KMC finite: b and C on the test fold (the [KEF] objective(X) bug,
    which scores the training statistics, is not reproduced)."""
    _require_features(features)
    n_folds = require_int(n_folds, "n_folds", minimum=2)
    X = check_points(X, "X", features.dim, min_points=n_folds)
    folds = cv_folds(len(X), n_folds, rng, blocked)
    values = []
    for k in range(n_folds):
        train = np.concatenate([f for j, f in enumerate(folds) if j != k])
        theta = fit_finite(features, X[train], lam)
        b, C = finite_b_C(features, X[folds[k]])
        values.append(finite_objective(theta, b, C))
    return float(np.mean(values))


def select_sigma_lambda(objective: Callable[[float, float], float], log_sigma_grid, log_lambda_grid,
                        n_nelder_mead: int = 10):
    """Minimise objective(sigma, lam) over a grid in (log sigma, log lambda), then refine with a few
    Nelder-Mead iterations from the best grid point, within the grid's bounds. Returns (sigma, lam,
    best value)."""
    from scipy.optimize import minimize

    require_callable(objective, "objective")
    _check_grid(log_sigma_grid, "log_sigma_grid")
    _check_grid(log_lambda_grid, "log_lambda_grid")
    require_int(n_nelder_mead, "n_nelder_mead")

    def f(z):
        value = objective(float(np.exp(z[0])), float(np.exp(z[1])))
        return value if np.isfinite(value) else 1e300

    grid = [(ls, ll) for ls in log_sigma_grid for ll in log_lambda_grid]
    values = [f(z) for z in grid]
    z0 = np.array(grid[int(np.argmin(values))])
    best_z, best_v = z0, min(values)
    if n_nelder_mead > 0:
        bounds = [(min(log_sigma_grid), max(log_sigma_grid)), (min(log_lambda_grid), max(log_lambda_grid))]
        simplex = z0 + np.array([[0, 0], [0.5, 0], [0, 1.0]]) * np.where(z0 + [0.5, 1.0] > [b[1] for b in bounds], -1, 1)
        res = minimize(f, z0, method="Nelder-Mead", bounds=bounds,
                       options={"maxiter": n_nelder_mead, "initial_simplex": simplex})
        if res.fun < best_v:
            best_z, best_v = res.x, float(res.fun)
    return float(np.exp(best_z[0])), float(np.exp(best_z[1])), float(best_v)


def sqrt_schedule(t: int) -> float:
    """a_t = 1 / sqrt(t + 1): a_t -> 0 and sum a_t = infinity (vanishing adaptation)."""
    if type(t) is not int or t < 0:            # the samplers pass an int: only another caller's t is checked
        require_int(t, "t", minimum=0)
    return 1.0 / np.sqrt(t + 1.0)


class TrueGradient:
    """The target's own gradient as the 'surrogate': KMC with it is HMC (random step size and L)."""

    def __init__(self, target: Target):
        self.target = require_target(target)
        if not callable(getattr(target, "grad_logp", None)):
            raise wrong_type("target", "a target with a gradient (grad_logp)", target)

    def grad(self, x):
        return self.target.grad_logp(x)

    def adapt(self, c, history, x, rng):
        pass

    def learn(self, c, history, rng):
        pass


class LiteSurrogate:
    """One KMC-lite model per chain: basis Z (n_chains, n_basis, d) (rows beyond a chain's n_c have
    alpha = 0), alpha (n_chains, n_basis), sigma and lambda per chain. Before the first fit grad = 0,
    so KMC is a random walk with steps eps L p (n_fits counts each chain's fits)."""

    def __init__(self, n_chains: int, dim: int, n_basis: int, sigma, lam, regulariser: str = "code",
                 min_history: int = 20, learn_grid=None, learn_size: int = 200):
        self.n_chains = require_int(n_chains, "n_chains", minimum=1)
        require_int(dim, "dim", minimum=1)
        self.n_basis = require_int(n_basis, "n_basis", minimum=2)
        self.sigma = per_chain(_positive_or_per_chain(sigma, "sigma"), n_chains, "sigma")
        self.lam = per_chain(_positive_or_per_chain(lam, "lam"), n_chains, "lam")
        self.regulariser = require_str(regulariser, "regulariser", ("code", "paper"))
        self.min_history = require_int(min_history, "min_history")
        _check_learn_grid(learn_grid)
        self.learn_grid = learn_grid or (np.linspace(-1.0, 5.0, 5), np.log([1e-2, 1.0, 1e2]))
        self.learn_size = require_int(learn_size, "learn_size", minimum=10)
        self.Z = np.zeros((n_chains, self.n_basis, dim))
        self.alpha = np.zeros((n_chains, self.n_basis))
        self.n_fits = np.zeros(n_chains, dtype=int)

    def set_basis(self, c: int, Z):
        Z = check_points(Z, "Z", self.Z.shape[2])[: self.n_basis]
        self.Z[c] = 0.0
        self.alpha[c] = 0.0
        self.Z[c, : len(Z)] = Z
        self.alpha[c, : len(Z)] = fit_lite(Z, self.sigma[c], self.lam[c], self.regulariser)
        self.n_fits[c] += 1

    def _subsample(self, history, rng):
        size = min(self.n_basis, len(history))
        return history[rng.choice(len(history), size=size, replace=False)]

    def adapt(self, c, history, x, rng):
        """Refit chain c on a uniform subsample (without replacement) of its whole history."""
        if len(history) >= self.min_history:
            self.set_basis(c, self._subsample(history, rng))

    def learn(self, c, history, rng):
        """Choose (sigma, lambda) for chain c by 5-fold CV, blocked folds, on learn_size states taken evenly
        through its history in time order; then refit on a fresh subsample of n_basis."""
        if len(history) < self.min_history:
            return
        data = history[np.unique(np.linspace(0, len(history) - 1, min(self.learn_size, len(history))).astype(int))]
        objective = lambda s, l: cv_objective_lite(data, s, l, None, 5, self.regulariser, blocked=True)  # noqa: E731
        self.sigma[c], self.lam[c], _ = select_sigma_lambda(objective, *self.learn_grid, n_nelder_mead=8)
        self.set_basis(c, self._subsample(history, rng))

    def grad(self, x):
        diff = self.Z - x[:, None, :]                                   # (C, n, d)
        Kw = np.exp(-np.sum(diff**2, axis=2) / self.sigma[:, None]) * self.alpha
        return (2.0 / self.sigma)[:, None] * np.einsum("cn,cnd->cd", Kw, diff)


class FiniteSurrogate:
    """One KMC-finite model per chain, with online updates (OnlineFiniteEstimator) or batch fits."""

    def __init__(self, features_list, lam):
        self.features = _features_per_chain(features_list)
        self.lam = per_chain(_positive_or_per_chain(lam, "lam"), len(self.features), "lam")
        self.omega = np.stack([f.omega for f in self.features])         # (C, d, m)
        self.phases = np.stack([f.phases for f in self.features])       # (C, m)
        self.theta = np.zeros_like(self.phases)
        self.online = [OnlineFiniteEstimator(f, l) for f, l in zip(self.features, self.lam)]
        self.n_chains = len(self.features)
        self.n_fits = np.zeros(self.n_chains, dtype=int)

    def fit(self, c: int, X):
        self.theta[c] = fit_finite(self.features[c], X, self.lam[c])
        self.n_fits[c] += 1

    def adapt(self, c, history, x, rng):
        self.theta[c] = self.online[c].update(x).theta
        self.n_fits[c] += 1

    def learn(self, c, history, rng):
        pass

    def grad(self, x):
        S = np.sin((x[:, None, :] @ self.omega)[:, 0] + self.phases)                       # (C, m)
        return -np.sqrt(2.0 / self.omega.shape[2]) * (self.omega @ (S * self.theta)[:, :, None])[:, :, 0]


def range_pair(value, name: str, labels=("min", "max"), integer: bool = False):
    """(low, high), 0 < low <= high, from a pair of numbers (of ints with integer=True); else ValueError."""
    ok = np.ndim(value) == 1 and len(value) == 2 and all(
        isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, (bool, np.bool_))
        and np.isfinite(v) and v > 0 and (not integer or int(v) == v) for v in value)
    if not ok or value[0] > value[1]:
        raise ValueError(f"{name} must be a pair ({labels[0]}, {labels[1]}) of positive {'ints' if integer else 'numbers'}"
                         f", the first at most the second, got {value!r} (one fixed value: give it twice)")
    return (int(value[0]), int(value[1])) if integer else (float(value[0]), float(value[1]))


def surrogate_leapfrog(grad, q, p, step_size, n_steps):
    """Eq. (eq-kmc-leapfrog) for every chain, with per-chain step sizes (C,) and numbers of steps (C,):
    chains whose trajectory has ended are frozen while the others continue."""
    _check_leapfrog_arguments(grad, q, p, step_size, n_steps)
    h = step_size[:, None]
    p = p + 0.5 * h * grad(q)
    for i in range(int(n_steps.max())):
        active = (i < n_steps)[:, None]
        q = np.where(active, q + h * p, q)
        g = grad(q)
        weight = np.where(i == n_steps - 1, 0.5, 1.0)[:, None]
        p = np.where(active, p + weight * h * g, p)
    return q, p


class KMC(Sampler):
    """Kernel HMC: leapfrog on a surrogate gradient (eq-kmc-leapfrog), accepted with the true or
    unbiasedly estimated Hamiltonian (eq-kmc-accept); the current state's estimate is recycled.

    surrogate: TrueGradient (HMC), LiteSurrogate or FiniteSurrogate. step_size_range = (eps_min,
    eps_max) and n_steps_range = (L_min, L_max), drawn afresh for every proposal. adapt() (called by
    mcmc_lib.harness.run during warm-up only, or every iteration for vanishing adaptation) updates the
    surrogate with probability a_t, optionally the step-size range, and learns (sigma, lambda) at
    the iterations in learn_at.

    A kernel surrogate never fitted (zero gradient: a random walk under KMC's name) is refused, at init
    when nothing adapts it, else at a second step without adapt() in between.
    """

    name = "KMC"
    uses_gradient = False

    def __init__(self, target, surrogate, step_size_range, n_steps_range, adapt_rng=None,
                 schedule=sqrt_schedule, adapt_surrogate: bool = True, adapt_step_size: bool = False,
                 target_accept: float = 0.6, learn_at=()):
        super().__init__(target)
        lo, hi = range_pair(step_size_range, "step_size_range", ("eps_min", "eps_max"))
        l_lo, l_hi = range_pair(n_steps_range, "n_steps_range", ("L_min", "L_max"), integer=True)
        self.surrogate = _require_surrogate(surrogate)
        self.initial_log_range = np.log([lo, hi])
        self.n_steps_range = (l_lo, l_hi)
        self.adapt_rng = np.random.default_rng(0) if adapt_rng is None else require_rng(adapt_rng)
        self.schedule = require_callable(schedule, "schedule")
        self.adapt_surrogate = require_bool(adapt_surrogate, "adapt_surrogate")
        self.adapt_step_size = require_bool(adapt_step_size, "adapt_step_size")
        self.target_accept = require_probability(target_accept, "target_accept")
        self.learn_at = _iterations(learn_at, "learn_at")
        self.name = "HMC" if isinstance(surrogate, TrueGradient) else "KMC"

    def init(self, x0):
        n_surrogate = getattr(self.surrogate, "n_chains", None)
        n_x0 = np.shape(x0)[0] if np.ndim(x0) == 2 else 1
        if n_surrogate is not None and n_x0 != n_surrogate:
            raise ValueError(f"x0 must have one row per chain: the {type(self.surrogate).__name__} was built for "
                             f"n_chains = {n_surrogate}, x0 has {n_x0} rows")
        state = super().init(x0)
        self.log_range = np.tile(self.initial_log_range, (state.x.shape[0], 1))
        self.history = [state.x.copy()]
        self._steps_since_adapt = 0
        if not self.adapt_surrogate:
            self._refuse_unfitted("adapt_surrogate=False")
        return state

    def _refuse_unfitted(self, why: str):
        unfitted = np.flatnonzero(np.asarray(getattr(self.surrogate, "n_fits", 1)) == 0).tolist()
        if unfitted:
            raise ValueError(f"the surrogate ({type(self.surrogate).__name__}) was never fitted for chains {unfitted} "
                             f"and {why}: KMC would run as a random walk under KMC's name. Fit it first "
                             "(set_basis, fit) or warm up with adaptation")

    def _current_logp(self, state):
        """The cached estimate of log pi at the current states: recycled, never recomputed."""
        return state.logp

    def propose(self, rng, state):
        """The proposal of every chain: a surrogate trajectory from fresh momentum (eq-kmc-leapfrog).
        Returns its end points (the current state where it diverged), log pi there (NaN where it
        diverged) and the log acceptance ratio (eq-kmc-accept; NaN, a rejection, where it diverged).
        step decides with a fresh uniform; a non-reversible u can decide instead (chapter compare)."""
        if self._steps_since_adapt:
            self._refuse_unfitted("adapt() was not called after the last step")
        self._steps_since_adapt += 1
        n_chains, dim = state.x.shape
        p0 = rng.standard_normal((n_chains, dim))
        bounds = np.exp(self.log_range)
        eps = rng.uniform(bounds[:, 0], bounds[:, 1])
        n_steps = rng.integers(self.n_steps_range[0], self.n_steps_range[1] + 1, size=n_chains)
        with np.errstate(over="ignore", invalid="ignore"):
            q, p = surrogate_leapfrog(self.surrogate.grad, state.x, p0, eps, n_steps)
            ok = finite_rows(np.sum(q, axis=1) + np.sum(p, axis=1))
            logp_q = np.full(n_chains, np.nan)
            if np.any(ok):
                logp_q[ok] = self.target.logp(q[ok])
            log_ratio = (logp_q - self._current_logp(state)
                         - 0.5 * np.sum(p**2, axis=1) + 0.5 * np.sum(p0**2, axis=1))
        return np.where(ok[:, None], q, state.x), logp_q, log_ratio

    def step(self, rng, state):
        q, logp_q, log_ratio = self.propose(rng, state)
        accepted, prob, nonfinite = metropolis_hastings_accept(log_ratio, rng.uniform(size=len(q)))
        new_state = accept_proposals(state, ChainState(q, logp_q), accepted)
        return new_state, StepInfo(accepted, prob, nonfinite)

    def adapt(self, state, info, iteration):
        t = int(iteration)
        self._steps_since_adapt = 0
        self.history.append(state.x.copy())
        a_t = self.schedule(t)
        if self.adapt_step_size:
            self.log_range += a_t * (info.accept_prob - self.target_accept)[:, None]
        history = None
        if t in self.learn_at:
            history = np.stack(self.history)
            for c in range(state.x.shape[0]):
                self.surrogate.learn(c, history[:, c], self.adapt_rng)
        if self.adapt_surrogate:
            update = self.adapt_rng.uniform(size=state.x.shape[0]) < a_t
            if np.any(update):
                history = np.stack(self.history) if history is None else history
                for c in np.flatnonzero(update):
                    self.surrogate.adapt(c, history[:, c], state.x[c], self.adapt_rng)

    def tuning(self):
        return {"step_size_range": np.exp(self.log_range)}


# Argument checks of the sampler and its parts (as above). KMC calls surrogate_leapfrog at every step and
# the schedule at every adaptation with its own arrays and an int, which pass the first test.
def _check_leapfrog_arguments(grad, q, p, step_size, n_steps):
    """surrogate_leapfrog's: a gradient function, q and p (n_chains, d), step_size and n_steps (n_chains,)."""
    if (callable(grad) and _float_arrays(q, p, step_size) and q.ndim == 2 and p.shape == q.shape
            and step_size.shape == q.shape[:1] and type(n_steps) is np.ndarray and n_steps.dtype.kind in "iu"
            and n_steps.shape == step_size.shape):
        return
    require_callable(grad, "grad")
    q_shape = float_array(q, "q").shape
    if len(q_shape) != 2:
        raise ValueError(f"q must have shape (n_chains, d), one state per chain, got {q_shape}")
    require_array_shape(p, "p", q_shape, "the shape of q", numpy_only=False)
    require_array_shape(step_size, "step_size", q_shape[:1], "one per chain (row of q)")
    steps = require_array_shape(n_steps, "n_steps", q_shape[:1], "one per chain (row of q)")
    not_counts = steps[(steps < 0) | (steps != np.round(steps))]
    if not_counts.size:
        raise ValueError(f"n_steps must be whole numbers >= 0 (leapfrog steps per chain), got {not_counts[:3]}")


def _require_surrogate(surrogate):
    """KMC's: an object whose grad(x) is a gradient at the states x (n_chains, d)."""
    if isinstance(surrogate, type) or not callable(getattr(surrogate, "grad", None)):
        if isinstance(surrogate, (list, tuple)):
            raise ValueError(f"surrogate must be one surrogate, got a {type(surrogate).__name__} of {len(surrogate)}")
        raise wrong_type("surrogate", "a surrogate with a grad(x) method (TrueGradient, LiteSurrogate or "
                                      "FiniteSurrogate)", surrogate)
    return surrogate


def _positive_or_per_chain(value, name):
    """A positive number or one per chain (n_chains,) (per_chain then checks the count); returned as given."""
    require_positive(value, name)
    if np.ndim(value) > 1:
        raise ValueError(f"{name} must be a number or one per chain, shape (n_chains,), got shape {np.shape(value)}")
    return value


def _features_per_chain(features_list):
    """FiniteSurrogate's: a non-empty list of RandomFeatures of one shape (d, m), one per chain."""
    if isinstance(features_list, RandomFeatures):
        raise ValueError("features_list must be a list of RandomFeatures, one per chain, got one RandomFeatures "
                         "(write [features] for one chain)")
    features = require_sequence(features_list, "features_list", of=RandomFeatures,
                                what="RandomFeatures, one per chain")
    if len(features) < 1:
        raise ValueError("features_list must hold one RandomFeatures per chain")
    shapes = sorted({f.omega.shape for f in features})
    if len(shapes) > 1:
        raise ValueError(f"features_list must hold features of one shape (d, m), got shapes {shapes}")
    return features


def _check_learn_grid(learn_grid):
    """LiteSurrogate's: None (the default grid) or a pair (log_sigma_grid, log_lambda_grid)."""
    if learn_grid is None:
        return
    if not isinstance(learn_grid, (list, tuple)):
        raise wrong_type("learn_grid", "a pair (log_sigma_grid, log_lambda_grid), or None", learn_grid)
    if len(learn_grid) != 2:
        raise ValueError(f"learn_grid must be a pair (log_sigma_grid, log_lambda_grid), got {len(learn_grid)} items")
    _check_grid(learn_grid[0], "learn_grid[0]")
    _check_grid(learn_grid[1], "learn_grid[1]")


def _require_sampler(sampler):
    """run_chains's: an object with init, step and adapt. Not mcmc_lib.harness.require_sampler: importing the
    harness would add it and mcmc_lib.units to the code every stored result of this chapter depends on."""
    if isinstance(sampler, type) or not all(callable(getattr(sampler, method, None))
                                            for method in ("init", "step", "adapt")):
        if isinstance(sampler, (list, tuple)):
            raise ValueError(f"sampler must be one sampler, got a {type(sampler).__name__} of {len(sampler)}")
        raise wrong_type("sampler", "a sampler (init, step, adapt: mcmc_lib.samplers.base.Sampler)", sampler)
    return sampler


def _iterations(value, name):
    """Iteration numbers (ints >= 0) as a set."""
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Iterable):
        raise wrong_type(name, "a list of iteration numbers", value)
    if isinstance(value, np.ndarray) and value.ndim != 1:
        raise ValueError(f"{name} must be a list of iteration numbers, got an array of shape {value.shape}")
    return {require_int(t, f"{name}[{i}]") for i, t in enumerate(value)}


def median_sq_distance(Z) -> float:
    """Median squared distance over the pairs of distinct points (as the authors' median heuristic):
    a history with repeated states (rejections) would otherwise give 0. 1.0 if all points coincide."""
    check_points(Z, "Z")                       # checked only: the distances are of Z as given
    sq = sq_distances(Z, Z)[np.triu_indices(len(Z), 1)]
    sq = sq[sq > 0]
    return float(np.median(sq)) if sq.size else 1.0


def _log_gaussian_batch(r, cov):
    """log N(r; 0, cov) up to the 2 pi term for batches r (C, d), cov (C, d, d)."""
    L = np.linalg.cholesky(cov)
    w = np.linalg.solve(L, r[..., None])[..., 0]
    return -0.5 * np.sum(w**2, axis=1) - np.sum(np.log(np.diagonal(L, axis1=1, axis2=2)), axis=1)


class KAMH(Sampler):
    """Kernel adaptive Metropolis-Hastings (eq-kmc-kamh) with the Hastings correction. One basis per
    chain; basis=None starts as a random walk N(y, gamma2 I) until the first draw from the history."""

    name = "KAMH"
    uses_gradient = False

    def __init__(self, target, gamma2: float, nu2, n_basis: int, adapt_rng=None, basis=None,
                 median_factor: float = 1.0, schedule=sqrt_schedule, target_accept: float = 0.234,
                 adapt_basis: bool = True, adapt_scale: bool = True, min_history: int = 20):
        super().__init__(target)
        self.gamma2 = require_positive_scalar(gamma2, "gamma2")
        _positive_or_per_chain(nu2, "nu2")
        self.initial_nu2 = nu2 if np.ndim(nu2) else float(nu2)
        self.n_basis = require_int(n_basis, "n_basis", minimum=2)
        self.adapt_rng = np.random.default_rng(0) if adapt_rng is None else require_rng(adapt_rng)
        self.fixed_basis = None if basis is None else check_points(basis, "basis", target.dim, 2)
        self.median_factor = require_positive_scalar(median_factor, "median_factor")
        self.schedule = require_callable(schedule, "schedule")
        self.target_accept = require_probability(target_accept, "target_accept")
        self.adapt_basis = require_bool(adapt_basis, "adapt_basis")
        self.adapt_scale = require_bool(adapt_scale, "adapt_scale")
        self.min_history = require_int(min_history, "min_history")

    def init(self, x0):
        state = super().init(x0)
        C, d = state.x.shape
        self.nu2 = per_chain(self.initial_nu2, C, "nu2")
        n = self.n_basis if self.fixed_basis is None else len(self.fixed_basis)
        self.Z = np.zeros((C, n, d))
        self.w = np.zeros((C, n))
        self.sigma = np.ones(C)
        if self.fixed_basis is not None:
            for c in range(C):
                self.set_basis(c, self.fixed_basis)
        self.history = [state.x.copy()]
        return state

    def set_basis(self, c, Z):
        self.Z[c] = 0.0
        self.w[c] = 0.0
        self.Z[c, : len(Z)] = Z
        self.w[c, : len(Z)] = 1.0
        self.sigma[c] = self.median_factor * median_sq_distance(Z)

    def covariance(self, y):
        """gamma^2 I + nu^2 M_y H M_y^T for every chain (C, d, d)."""
        diff = self.Z - y[:, None, :]                                            # (C, n, d)
        K = np.exp(-np.sum(diff**2, axis=2) / self.sigma[:, None]) * self.w
        M = (4.0 / self.sigma)[:, None, None] * K[:, :, None] * diff            # rows: 2 grad_x k(x, z_i)
        n = np.maximum(self.w.sum(axis=1), 1.0)
        Mc = (M - (M.sum(axis=1) / n[:, None])[:, None, :]) * self.w[:, :, None]
        d = y.shape[1]
        return self.gamma2 * np.eye(d) + self.nu2[:, None, None] * np.einsum("cnd,cne->cde", Mc, Mc)

    def step(self, rng, state):
        C, d = state.x.shape
        cov_x = self.covariance(state.x)
        y = state.x + np.einsum("cij,cj->ci", np.linalg.cholesky(cov_x), rng.standard_normal((C, d)))
        logp_y = self.target.logp(y)
        with np.errstate(over="ignore", invalid="ignore"):
            log_ratio = (logp_y - state.logp + _log_gaussian_batch(state.x - y, self.covariance(y))
                         - _log_gaussian_batch(y - state.x, cov_x))
        accepted, prob, nonfinite = metropolis_hastings_accept(log_ratio, rng.uniform(size=C))
        return accept_proposals(state, ChainState(y, logp_y), accepted), StepInfo(accepted, prob, nonfinite)

    def adapt(self, state, info, iteration):
        a_t = self.schedule(int(iteration))
        self.history.append(state.x.copy())
        if self.adapt_scale:
            self.nu2 *= np.exp(a_t * (info.accept_prob - self.target_accept))
        if self.adapt_basis and len(self.history) >= self.min_history:
            update = self.adapt_rng.uniform(size=state.x.shape[0]) < a_t
            if np.any(update):
                history = np.stack(self.history)
                for c in np.flatnonzero(update):
                    size = min(self.n_basis, len(history))
                    self.set_basis(c, history[self.adapt_rng.choice(len(history), size, replace=False), c])

    def tuning(self):
        return {"nu2": self.nu2.copy(), "sigma": self.sigma.copy()}


class RandomWalk(Sampler):
    """Random-walk Metropolis N(y, s2 I); with adapt_scale, log s2 follows a_t (alpha_t - target_accept)."""

    name = "RW"

    def __init__(self, target, s2: float, schedule=sqrt_schedule, target_accept: float = 0.234,
                 adapt_scale: bool = True):
        super().__init__(target)
        self.initial_s2 = require_positive_scalar(s2, "s2")
        self.schedule = require_callable(schedule, "schedule")
        self.target_accept = require_probability(target_accept, "target_accept")
        self.adapt_scale = require_bool(adapt_scale, "adapt_scale")

    def init(self, x0):
        state = super().init(x0)
        self.s2 = np.full(state.x.shape[0], self.initial_s2)
        return state

    def step(self, rng, state):
        C, d = state.x.shape
        y = state.x + np.sqrt(self.s2)[:, None] * rng.standard_normal((C, d))
        logp_y = self.target.logp(y)
        with np.errstate(over="ignore", invalid="ignore"):
            log_ratio = logp_y - state.logp
        accepted, prob, nonfinite = metropolis_hastings_accept(log_ratio, rng.uniform(size=C))
        return accept_proposals(state, ChainState(y, logp_y), accepted), StepInfo(accepted, prob, nonfinite)

    def adapt(self, state, info, iteration):
        if self.adapt_scale:
            self.s2 *= np.exp(self.schedule(int(iteration)) * (info.accept_prob - self.target_accept))

    def tuning(self):
        return {"s2": self.s2.copy()}


def run_chains(sampler, x0, n_iter: int, rng, adapt: bool = True):
    """Run n_iter iterations from x0 (C, d), calling sampler.adapt after every step when adapt=True
    (vanishing adaptation never stops); returns samples (C, n_iter, d), log densities (C, n_iter),
    acceptance indicators and probabilities (C, n_iter)."""
    _require_sampler(sampler)
    require_rng(rng)
    n_iter = require_int(n_iter, "n_iter", minimum=1)
    require_bool(adapt, "adapt")
    state = sampler.init(x0)
    C, d = state.x.shape
    out = {"samples": np.empty((C, n_iter, d)), "logp": np.empty((C, n_iter)),
           "accepted": np.zeros((C, n_iter), dtype=bool), "accept_prob": np.zeros((C, n_iter))}
    for t in range(n_iter):
        state, info = sampler.step(rng, state)
        out["samples"][:, t], out["logp"][:, t] = state.x, state.logp
        out["accepted"][:, t], out["accept_prob"][:, t] = info.accepted, info.accept_prob
        if adapt:
            sampler.adapt(state, info, t + 1)
    return out


class GPClassificationPosterior(Target):
    """Pseudo-marginal posterior of ARD log length-scales theta (theta_d = log l_d^2) of GP
    classification: logp returns log prior + log of the importance estimate (eq-kmc-importance), a
    fresh random estimate at every call, drawn from self.rng."""

    def __init__(self, X, y, rng, n_importance: int = 100, prior_var: float = 5.0, jitter: float = 1e-3,
                 name: str = "GP classification"):
        X = check_points(X, "X", min_points=2)
        y = float_array(y, "y")
        if y.shape != (len(X),) or not np.all(np.isin(y, (-1.0, 1.0))):
            raise ValueError("y must be a vector of -1/+1 labels, one per row of X")
        super().__init__(X.shape[1])
        self.X, self.y, self.rng = X, y, require_rng(rng)
        self.n_importance = require_int(n_importance, "n_importance", minimum=1)
        self.prior_var = require_positive_scalar(prior_var, "prior_var")
        self.jitter = require_positive_scalar(jitter, "jitter")
        self.name = require_str(name, "name")
        self._diff2 = (X[:, None, :] - X[None, :, :]) ** 2                    # (n, n, d)

    def kernel(self, theta):
        return np.exp(-0.5 * self._diff2 @ np.exp(-theta)) + self.jitter * np.eye(len(self.X))

    def laplace_mode(self, K, max_iter: int = 100, tol: float = 1e-8):
        """Newton's method for the mode of p(f | y, theta) (Rasmussen and Williams, Algorithm 3.1)."""
        f = np.zeros(len(self.y))
        t = 0.5 * (self.y + 1.0)
        objective = -np.inf
        for _ in range(max_iter):
            pi = expit(f)
            W = pi * (1.0 - pi)
            sW = np.sqrt(W)
            B = np.eye(len(f)) + sW[:, None] * K * sW[None, :]
            LB = linalg.cholesky(B, lower=True)
            b = W * f + (t - pi)
            a = b - sW * linalg.cho_solve((LB, True), sW * (K @ b))
            f = K @ a
            new_objective = -0.5 * a @ f + np.sum(log_expit(self.y * f))
            if abs(new_objective - objective) < tol:
                break
            objective = new_objective
        return f

    def log_marginal_estimate(self, theta, rng) -> float:
        """log of the importance-sampling estimate (eq-kmc-importance) at one theta (d,)."""
        K = self.kernel(theta)
        f_hat = self.laplace_mode(K)
        pi = expit(f_hat)
        W = pi * (1.0 - pi)
        LK = linalg.cholesky(K, lower=True)
        A = np.eye(len(K)) + (LK.T * W) @ LK
        LA = linalg.cholesky(A, lower=True)
        z = rng.standard_normal((len(K), self.n_importance))
        whitened = linalg.solve_triangular(LK, f_hat, lower=True)[:, None] \
            + linalg.solve_triangular(LA.T, z, lower=False)                   # L_K^{-1} f
        F = LK @ whitened
        log_w = (np.sum(log_expit(self.y[:, None] * F), axis=0) - 0.5 * np.sum(whitened**2, axis=0)
                 + 0.5 * np.sum(z**2, axis=0) - np.sum(np.log(np.diag(LA))))
        return float(logsumexp(log_w) - np.log(self.n_importance))

    def log_prior(self, theta):
        return -0.5 * np.sum(theta**2, axis=-1) / self.prior_var

    def _logp(self, theta):
        out = np.full(len(theta), -np.inf)
        for i, th in enumerate(theta):
            if np.all(np.isfinite(th)) and np.all(np.abs(th) < 50):
                try:
                    out[i] = self.log_marginal_estimate(th, self.rng) + self.log_prior(th)
                except (linalg.LinAlgError, ValueError):
                    out[i] = np.nan
        return out


def glass_gp_data():
    """The Glass data as the GP experiment uses it: features centred and whitened (X <- L^{-1} X,
    L = chol(cov X)), labels +1 for window glass and -1 otherwise."""
    from mcmc_lib.datasets import load_glass

    X, y = load_glass()
    X = X - X.mean(axis=0)
    L = np.linalg.cholesky(np.cov(X.T))
    return linalg.solve_triangular(L, X.T, lower=True).T, 2.0 * y - 1.0


class SkewNormalABC(Target):
    """ABC posterior of theta for y ~ SN(theta, I, alpha) (n_obs draws; summary = their mean), prior
    N(0, prior_var I), Gaussian ABC kernel of width eps; logp is the log of the unbiased estimate of
    the ABC likelihood from n_lik simulations (a fresh random estimate at every call), plus the log prior.
    n_simulations counts simulated summaries."""

    def __init__(self, s_obs, rng, alpha=None, n_obs: int = 10, n_lik: int = 10, eps: float = 0.55,
                 prior_var: float = 25.0):
        s_obs = float_array(s_obs, "s_obs").reshape(-1)
        if s_obs.size == 0 or not np.all(np.isfinite(s_obs)):
            raise ValueError(f"s_obs must be the observed summary, finite numbers (d,) with d >= 1, got {s_obs}")
        super().__init__(len(s_obs))
        self.s_obs, self.rng = s_obs, require_rng(rng)
        self.alpha = (10.0 * np.ones(self.dim) if alpha is None
                      else require_array_shape(alpha, "alpha", (self.dim,), "one skewness per coordinate of s_obs",
                                               numpy_only=False))
        self.delta = self.alpha / np.sqrt(1.0 + self.alpha @ self.alpha)
        self.n_obs = require_int(n_obs, "n_obs", minimum=1)
        self.n_lik = require_int(n_lik, "n_lik", minimum=1)
        self.eps = require_positive_scalar(eps, "eps")
        self.prior_var = require_positive_scalar(prior_var, "prior_var")
        self.n_simulations = 0

    def draw_noise(self, rng, shape):
        """The random numbers of simulations: (u0 (*shape, n_obs), u (*shape, n_obs, d))."""
        return rng.standard_normal((*shape, self.n_obs)), rng.standard_normal((*shape, self.n_obs, self.dim))

    def summaries(self, theta, noise):
        """Summaries (mean of n_obs skew-normal draws) at theta (C, d) from noise of shape (C, S, ...)."""
        u0, u = noise
        dd = self.delta @ self.delta
        # (I - delta delta^T)^(1/2) u = u + (sqrt(1 - |delta|^2) - 1) delta (delta . u) / |delta|^2
        w = u + ((np.sqrt(1.0 - dd) - 1.0) / dd) * (u @ self.delta)[..., None] * self.delta
        y = np.abs(u0)[..., None] * self.delta + w
        self.n_simulations += u0.shape[0] * u0.shape[1]
        return theta[:, None, :] + y.mean(axis=2)

    def log_prior(self, theta):
        return -0.5 * np.sum(theta**2, axis=-1) / self.prior_var

    def _logp(self, theta):
        s = self.summaries(theta, self.draw_noise(self.rng, (len(theta), self.n_lik)))
        log_g = -0.5 * np.sum((s - self.s_obs) ** 2, axis=2) / self.eps**2
        return logsumexp(log_g, axis=1) - np.log(self.n_lik) + self.log_prior(theta)


class HABC(Sampler):
    """Hamiltonian ABC without friction and without an accept step (not exact; a baseline). A
    trajectory that leaves the box |theta_i| <= diverged (or overflows) is counted as diverged
    (StepInfo.nonfinite) and the chain stays where it was."""

    name = "HABC"
    uses_gradient = False

    def __init__(self, model: SkewNormalABC, step_size_range, n_steps: int, n_synthetic: int = 10,
                 spsa_c: float = 5.0, diverged: float = 1e4):
        missing = [name for name in ("summaries", "s_obs", "eps", "prior_var") if not hasattr(model, name)]
        if missing:
            raise wrong_type("model", f"an ABC model as SkewNormalABC (it lacks {', '.join(missing)})", model)
        super().__init__(model)
        self.step_size_range = range_pair(step_size_range, "step_size_range", ("eps_min", "eps_max"))
        self.n_steps = require_int(n_steps, "n_steps", minimum=1)
        self.n_synthetic = require_int(n_synthetic, "n_synthetic", minimum=2)
        self.spsa_c = float(require_positive(spsa_c, "spsa_c"))
        self.diverged = require_positive_scalar(diverged, "diverged")

    def synthetic_loglik(self, theta, noise):
        """log N(s_obs; mu_hat, Sigma_hat + eps^2 I) from the sticky simulations; NaN for diverged rows."""
        bad = ~np.all(np.isfinite(theta), axis=1) | (np.max(np.abs(theta), axis=1) > self.diverged)
        s = self.target.summaries(np.where(bad[:, None], 0.0, theta), noise)   # (C, S, d)
        mu = s.mean(axis=1)
        r = s - mu[:, None, :]
        cov = np.einsum("csd,cse->cde", r, r) / (s.shape[1] - 1) + self.target.eps**2 * np.eye(theta.shape[1])
        return np.where(bad, np.nan, _log_gaussian_batch(self.target.s_obs - mu, cov))

    def spsa_grad(self, rng, theta, noise):
        delta = rng.choice([-1.0, 1.0], size=theta.shape)
        up = self.synthetic_loglik(theta + self.spsa_c * delta, noise)
        down = self.synthetic_loglik(theta - self.spsa_c * delta, noise)
        return ((up - down) / (2 * self.spsa_c))[:, None] * delta - theta / self.target.prior_var

    def step(self, rng, state):
        C, d = state.x.shape
        noise = self.target.draw_noise(rng, (C, self.n_synthetic))        # sticky along the trajectory
        h = rng.uniform(*self.step_size_range, size=C)[:, None]
        q, p = state.x.copy(), rng.standard_normal((C, d))
        with np.errstate(over="ignore", invalid="ignore"):
            p = p + 0.5 * h * self.spsa_grad(rng, q, noise)
            for i in range(self.n_steps):
                q = q + h * p
                p = p + (0.5 if i == self.n_steps - 1 else 1.0) * h * self.spsa_grad(rng, q, noise)
            ok = np.all(np.isfinite(q), axis=1) & (np.max(np.abs(q), axis=1) <= self.diverged)
        new = ChainState(np.where(ok[:, None], q, state.x), np.zeros(C))   # a diverged trajectory stays put
        return new, StepInfo(ok, ok.astype(float), ~ok)
