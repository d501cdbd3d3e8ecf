"""Argument checks shared by the library: each raises ValueError naming the argument and its value."""
from __future__ import annotations

import numpy as np
from scipy import linalg


def as_batch(x, dim: int, name: str = "x", min_rows: int = 0) -> np.ndarray:
    """Return x as a float array of shape (n_chains, dim); a single state (dim,) becomes (1, dim).
    min_rows=1 refuses an empty batch (starting states: zero chains would divide by zero later)."""
    x = np.asarray(x, dtype=float)
    if x.ndim == 1:
        x = x[None, :]
    if x.ndim != 2 or x.shape[1] != dim:
        raise ValueError(f"{name} must have shape (n_chains, {dim}), got {x.shape}")
    if x.shape[0] < min_rows:
        raise ValueError(f"{name} must hold at least {min_rows} chain(s), shape (n_chains >= {min_rows}, "
                         f"{dim}), got {x.shape}")
    return x


def require_positive(value, name: str):
    """A positive finite scalar or array (step sizes, variances)."""
    arr = np.asarray(value, dtype=float)
    if arr.size == 0 or not np.all(np.isfinite(arr)) or np.any(arr <= 0):
        raise ValueError(f"{name} must be positive and finite, got {value!r}")
    return value


def require_int(value, name: str, minimum: int = 0) -> int:
    if isinstance(value, bool) or int(value) != value or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def require_probability(value, name: str, open_interval: bool = True) -> float:
    value = float(value)
    ok = 0 < value < 1 if open_interval else 0 <= value <= 1
    if not ok:
        raise ValueError(f"{name} must lie in {'(0, 1)' if open_interval else '[0, 1]'}, got {value!r}")
    return value


def require_positive_definite(matrix, name: str) -> np.ndarray:
    """Check a symmetric positive-definite matrix and return its lower Cholesky factor."""
    matrix = np.asarray(matrix, dtype=float)
    if matrix.ndim != 2 or matrix.shape[0] != matrix.shape[1]:
        raise ValueError(f"{name} must be a square matrix, got shape {matrix.shape}")
    if not np.all(np.isfinite(matrix)) or not np.allclose(matrix, matrix.T, rtol=1e-10, atol=1e-12):
        raise ValueError(f"{name} must be a finite symmetric matrix")
    try:
        return linalg.cholesky(matrix, lower=True)
    except linalg.LinAlgError:
        raise ValueError(f"{name} must be positive definite (its Cholesky factorisation failed)") from None


def require_rng(rng) -> np.random.Generator:
    if not isinstance(rng, np.random.Generator):
        raise ValueError(f"rng must be a numpy.random.Generator (np.random.default_rng(seed)), got {type(rng).__name__}")
    return rng
