"""Argument checks shared by the library: each raises ValueError naming the argument and its value.

A value of the wrong kind (a string, None or a boolean where a number is expected, a number where a
path or a function is) raises ``ArgumentTypeError``, which is a TypeError and also a ValueError, so
that code catching the ValueError these checks have always raised still catches it. Booleans are not
numbers here: ``step_size=True`` is refused, not read as 1.0.

The checks run where a public function or class receives its arguments, so that a wrong call fails at
the call, naming the argument, its value and what is expected (``tests/test_public_api.py`` calls every
public name of mcmc_lib with wrong arguments). They never change a valid value: a number or array that
passes is returned as the code before them used it.
"""
from __future__ import annotations

import numbers
import os
from collections.abc import Mapping
from pathlib import Path

import numpy as np
from scipy import linalg


class ArgumentTypeError(TypeError, ValueError):
    """An argument of the wrong kind. A TypeError, and a ValueError as the library's checks raised before."""


class InsufficientMemoryError(MemoryError, ValueError):
    """What a call would allocate exceeds the memory available: refused before allocating anything."""


_FLOAT = np.dtype(float)


def _shown(value, limit: int = 80) -> str:
    """A value as an error message shows it: its repr, cut to ``limit`` characters."""
    try:
        text = repr(value)
    except Exception:                    # a repr that fails says nothing useful: its type does
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def wrong_type(name: str, expected: str, value) -> ArgumentTypeError:
    """The error for ``name`` holding a value of the wrong kind (to raise)."""
    require_str(name, "name")
    require_str(expected, "expected")
    return ArgumentTypeError(f"{name} must be {expected}, got {type(value).__name__} {_shown(value)}")


def _is_bool(value) -> bool:
    return isinstance(value, (bool, np.bool_))


def _is_real_scalar(value) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and not _is_bool(value)


def float_array(value, name: str) -> np.ndarray:
    """``value`` as a float array, as ``np.asarray(value, dtype=float)`` makes it, for numbers only: a
    boolean, complex, string or other non-numeric value (or a ragged list) raises ArgumentTypeError."""
    if type(value) is np.ndarray and value.dtype is _FLOAT:
        return value
    if _is_real_scalar(value):
        return np.asarray(value, dtype=float)
    try:
        arr = value if isinstance(value, np.ndarray) else np.asarray(value)
    except (TypeError, ValueError):
        raise wrong_type(name, "an array of real numbers", value) from None
    kind = arr.dtype.kind
    if kind in "iuf":
        return np.asarray(arr, dtype=float)
    if kind == "O" and all(isinstance(item, numbers.Real) and not _is_bool(item) for item in arr.flat):
        try:
            return np.asarray(value, dtype=float)
        except (TypeError, ValueError):
            pass
    raise wrong_type(name, "real numbers (not booleans, strings or complex numbers)", value)


def as_batch(x, dim: int, name: str = "x", min_rows: int = 0) -> np.ndarray:
    """Return x as a float array of shape (n_chains, dim); a single state (dim,) becomes (1, dim).
    min_rows=1 refuses an empty batch (starting states: zero chains would divide by zero later)."""
    if type(x) is not np.ndarray or x.dtype is not _FLOAT:   # a float array (the samplers' own) passes as it is
        x = float_array(x, name)
    if x.ndim == 1:
        x = x[None, :]
    if x.ndim != 2 or x.shape[1] != dim:
        raise ValueError(f"{name} must have shape (n_chains, {dim}), got {x.shape}")
    if x.shape[0] < min_rows:
        raise ValueError(f"{name} must hold at least {min_rows} chain(s), shape (n_chains >= {min_rows}, "
                         f"{dim}), got {x.shape}")
    return x


def require_array_shape(value, name: str, shape, what: str, numpy_only: bool = True) -> np.ndarray:
    """``value`` as a float array of ``shape`` (``what`` says what its axes hold, for the error), a numpy
    array unless ``numpy_only=False`` (then a list of numbers too)."""
    arr = float_array(value, name)
    shape = tuple(shape)
    if numpy_only and not isinstance(value, np.ndarray):
        raise wrong_type(name, f"a numpy array of shape {shape} ({what})", value)
    if arr.shape != shape:
        raise ValueError(f"{name} must have shape {shape} ({what}), got {arr.shape}")
    return arr


def require_number(value, name: str, finite: bool = True) -> float:
    """A real scalar (not a boolean), finite unless ``finite=False``, as a float."""
    if not _is_real_scalar(value):
        if isinstance(value, np.ndarray) and value.ndim == 0 and value.dtype.kind in "iuf":
            value = value[()]
        elif isinstance(value, (np.ndarray, list, tuple)):
            raise ValueError(f"{name} must be a single number, got shape {np.shape(value)}: {_shown(value)}")
        else:
            raise wrong_type(name, "a real number", value)
    number = float(value)
    if finite and not np.isfinite(number):
        raise ValueError(f"{name} must be finite, got {value!r}")
    return number


def require_positive(value, name: str):
    """A positive finite scalar or array (step sizes, variances); returned as given."""
    arr = float_array(value, name)
    if arr.size == 0 or not np.all(np.isfinite(arr)) or np.any(arr <= 0):
        raise ValueError(f"{name} must be positive and finite, got {_shown(value)}")
    return value


def require_positive_scalar(value, name: str) -> float:
    """A positive finite real scalar (not a boolean, not an array), as a float."""
    number = require_number(value, name)
    if number <= 0:
        raise ValueError(f"{name} must be positive and finite, got {value!r}")
    return number


def require_int(value, name: str, minimum: int = 0) -> int:
    """An integer >= minimum (a float with an integral value is accepted; a boolean is not)."""
    if isinstance(value, np.ndarray) and value.ndim == 0 and value.dtype.kind in "iuf":
        value = value[()]
    if not _is_real_scalar(value):
        if isinstance(value, (np.ndarray, list, tuple)):
            raise ValueError(f"{name} must be a single integer >= {minimum}, got shape {np.shape(value)}: "
                             f"{_shown(value)}")
        raise wrong_type(name, f"an integer >= {minimum}", value)
    if not np.isfinite(value) or int(value) != value or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def require_probability(value, name: str, open_interval: bool = True) -> float:
    value = require_number(value, name, finite=False)
    ok = 0 < value < 1 if open_interval else 0 <= value <= 1
    if not ok:
        raise ValueError(f"{name} must lie in {'(0, 1)' if open_interval else '[0, 1]'}, got {value!r}")
    return value


def require_positive_definite(matrix, name: str) -> np.ndarray:
    """Check a symmetric positive-definite matrix and return its lower Cholesky factor."""
    matrix = float_array(matrix, name)
    if matrix.ndim != 2 or matrix.shape[0] != matrix.shape[1]:
        raise ValueError(f"{name} must be a square matrix, got shape {matrix.shape}")
    if not np.all(np.isfinite(matrix)) or not np.allclose(matrix, matrix.T, rtol=1e-10, atol=1e-12):
        raise ValueError(f"{name} must be a finite symmetric matrix")
    try:
        return linalg.cholesky(matrix, lower=True)
    except linalg.LinAlgError:
        raise ValueError(f"{name} must be positive definite (its Cholesky factorisation failed)") from None


def require_rng(rng, name: str = "rng") -> np.random.Generator:
    if not isinstance(rng, np.random.Generator):
        raise wrong_type(name, "a numpy.random.Generator (np.random.default_rng(seed))", rng)
    return rng


def require_bool(value, name: str) -> bool:
    """True or False (numpy's too); not 0, 1 or a string."""
    if not _is_bool(value):
        if isinstance(value, (np.ndarray, list, tuple)):
            raise ValueError(f"{name} must be a single True or False, got shape {np.shape(value)}")
        raise wrong_type(name, "True or False", value)
    return bool(value)


def require_str(value, name: str, choices=None) -> str:
    """A string; one of ``choices`` when given."""
    if not isinstance(value, str):
        if isinstance(value, (list, tuple, set, frozenset)):
            raise ValueError(f"{name} must be one string, got a {type(value).__name__} of "
                             f"{len(value)}: {_shown(value)}")
        raise wrong_type(name, "a string" if choices is None else f"one of {tuple(choices)}", value)
    if choices is not None and value not in choices:
        raise ValueError(f"{name} must be one of {tuple(choices)}, got {value!r}")
    return value


def require_callable(value, name: str):
    if not callable(value):
        if isinstance(value, (list, tuple)):
            raise ValueError(f"{name} must be one function, got a {type(value).__name__} of {len(value)}")
        raise wrong_type(name, "callable (a function)", value)
    return value


def require_path(value, name: str) -> Path:
    """A file or directory name: a string or a path (os.PathLike)."""
    if isinstance(value, (list, tuple)):
        raise ValueError(f"{name} must be one path, got a {type(value).__name__} of {len(value)}: {_shown(value)}")
    if not isinstance(value, (str, os.PathLike)):
        raise wrong_type(name, "a path (str or pathlib.Path)", value)
    return Path(value)


def require_mapping(value, name: str) -> Mapping:
    """A dict (any Mapping)."""
    if not isinstance(value, Mapping):
        if isinstance(value, (list, tuple, set, frozenset)):
            raise ValueError(f"{name} must be a dict, got a {type(value).__name__} of {len(value)}: {_shown(value)}")
        raise wrong_type(name, "a dict", value)
    return value


def require_sequence(value, name: str, of=None, what: str | None = None) -> list:
    """A list or tuple (not a string, which would be read one character at a time, nor a dict); each
    item an instance of ``of`` when given. Returned as a list."""
    if isinstance(value, (str, bytes)):
        raise ValueError(f"{name} must be a list{f' of {what}' if what else ''}, got the string {value!r} "
                         f"(write [{value!r}] for one)")
    if isinstance(value, Mapping) or not isinstance(value, (list, tuple, np.ndarray)):
        raise wrong_type(name, f"a list{f' of {what}' if what else ''}", value)
    items = list(value)
    if of is not None:
        kinds = of if isinstance(of, tuple) else (of,)
        for i, item in enumerate(items):
            if not isinstance(item, of) or (_is_bool(item) and bool not in kinds and np.bool_ not in kinds):
                raise wrong_type(f"{name}[{i}]", what or " or ".join(k.__name__ for k in kinds), item)
    return items


def require_target(target, name: str = "target"):
    """A target: an object with a positive integer ``dim`` and a callable ``logp`` (mcmc_lib.targets.Target
    and its subclasses; any object of that shape)."""
    dim = getattr(target, "dim", None)
    if not callable(getattr(target, "logp", None)) or isinstance(target, type) or dim is None:
        if isinstance(target, (list, tuple)):
            raise ValueError(f"{name} must be one target, got a {type(target).__name__} of {len(target)}")
        raise wrong_type(name, "a target (mcmc_lib.targets.Target: a dim and a logp)", target)
    if _is_bool(dim) or not isinstance(dim, (int, np.integer)) or dim < 1:
        raise ValueError(f"{name}.dim must be a positive integer, got {dim!r}")
    return target


# --------------------------------------------------------------------------------------------------
# Memory: refuse what cannot fit before allocating it
# --------------------------------------------------------------------------------------------------
MEMORY_ENV = "MCMC_BOOK_MEMORY_LIMIT"


def available_memory() -> int | None:
    """Bytes a process may still allocate: MCMC_BOOK_MEMORY_LIMIT (bytes, a stated ceiling) when set, else
    Linux's MemAvailable, else the free physical pages; None when none of these can be read."""
    setting = os.environ.get(MEMORY_ENV, "").strip()
    if setting:
        try:
            return int(float(setting))
        except ValueError:
            raise ValueError(f"{MEMORY_ENV} must be a number of bytes, got {setting!r}") from None
    try:
        with open("/proc/meminfo") as file:
            for line in file:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def gigabytes(n_bytes: float) -> str:
    return f"{require_number(n_bytes, 'n_bytes') / 1e9:.3g} GB"


def require_memory(n_bytes: float, what: str, name: str) -> None:
    """Refuse (InsufficientMemoryError naming ``name``, what needs the memory, how much, and how much is
    available) when ``n_bytes`` exceed the memory available (``available_memory``)."""
    n_bytes = require_number(n_bytes, "n_bytes")
    require_str(what, "what")
    require_str(name, "name")
    available = available_memory()
    if available is not None and n_bytes > available:
        source = f"the ceiling {MEMORY_ENV}" if os.environ.get(MEMORY_ENV, "").strip() else "available on this machine"
        raise InsufficientMemoryError(
            f"{name}: {what} needs about {gigabytes(n_bytes)}, and {gigabytes(available)} is {source}; "
            "refused before allocating it")
