"""Sample-quality diagnostics: effective sample size, autocorrelation time, Stein discrepancies, MMD.

Shapes follow the library: chains are arrays of shape ``(n_chains, n_draws, dim)``. A 2-D array
of draws is ambiguous (one chain ``(n_draws, dim)``, or chains of one coordinate ``(n_chains,
n_draws)``), so ``ess``, ``ess_summary`` and ``monte_carlo_standard_error`` refuse it unless its
``layout`` is named: ``layout="draws, dim"`` or ``layout="chains, draws"`` (``"draws"`` for one
scalar chain). Point sets for the kernel
discrepancies (KSD, FSSD, MMD) are ``(N, dim)``, with ``scores`` = ``grad log pi`` at the points;
a 1-D array of N numbers given to them is N scalar draws, shape ``(N, 1)`` (never one N-dimensional
point). Only the kernels themselves (``imq_kernel``, ``stein_kernel_imq``) read a 1-D array as
one point, since they are evaluated at pairs of points.

A chain that never moves carries no information about the spread of the target: its effective
sample size is 0 (not N), and its Monte Carlo standard error is nan (undefined).

Contents
--------
* ``ess``, ``ess_summary``, ``geyer_ess_1d``, ``monte_carlo_standard_error``: Geyer's initial
  monotone sequence estimator (through ArviZ, plus our own one-chain version to cross-check it).
* ``autocorrelation_time_neal``: Neal's ``series vsac`` estimator, with the true mean known.
* ``imq_kernel``, ``stein_kernel_imq``, ``ksd``: the Langevin kernel Stein discrepancy, IMQ base.
* ``fssd``, ``fssd_quadratic``, ``fssd_location_gradient``, ``initial_test_locations``,
  ``optimise_test_locations``, ``fssd_opt``: the finite-set Stein discrepancy (Jitkrittum et al.
  2017) as used by MAMBA.
* ``mmd_squared``: maximum mean discrepancy between two samples (Gaussian or polynomial kernel).
* ``confidence_region_fractions``, ``confidence_region_errors``: Haario et al.'s chi-square
  confidence-region metrics (reconstructed definitions).
"""
from __future__ import annotations

import warnings

import numpy as np
from scipy import stats
from scipy.fft import next_fast_len

from .validation import float_array, require_bool, require_int, require_positive, require_rng, require_str

with warnings.catch_warnings():
    # ArviZ 0.23 emits a once-a-day FutureWarning about its coming refactor at import time; it
    # says nothing about our use, and would fail runs made with -W error.
    warnings.filterwarnings("ignore", category=FutureWarning, module="arviz")
    import arviz

DEFAULT_LEVELS = (0.683, 0.90, 0.95, 0.99)


# ----------------------------------------------------------------------------------------------
# Input checks
# ----------------------------------------------------------------------------------------------
# The layouts of an array of draws, by the axes it has; the default for a 3-D array is the first.
LAYOUTS = {"chains, draws, dim": 3, "draws, dim": 2, "chains, draws": 2, "draws": 1}


def _as_chains(samples, name: str = "samples", min_draws: int = 4, layout: str | None = None):
    """Return (array of shape (n_chains, n_draws, dim), the layout of the input).

    A 3-D array is (n_chains, n_draws, dim). A 2-D array is ambiguous, one chain (n_draws, dim) or
    chains of one coordinate (n_chains, n_draws): it is refused unless ``layout`` names which."""
    arr = float_array(samples, name)
    if layout is None:
        if arr.ndim == 2:
            raise ValueError(
                f"{name} of shape {arr.shape} is ambiguous: pass layout='draws, dim' for one chain of "
                f"{arr.shape[0]} draws of {arr.shape[1]} coordinates, or layout='chains, draws' for "
                f"{arr.shape[0]} chains of {arr.shape[1]} draws of one coordinate (3-D arrays are "
                "(n_chains, n_draws, dim))")
        if arr.ndim != 3:
            raise ValueError(f"{name} must have shape (n_chains, n_draws, dim) (or name its layout: "
                             f"{', '.join(map(repr, LAYOUTS))}), got {np.shape(samples)}")
        layout = "chains, draws, dim"
    else:
        require_str(layout, "layout", tuple(LAYOUTS))
        if arr.ndim != LAYOUTS[layout]:
            raise ValueError(f"layout={layout!r} describes a {LAYOUTS[layout]}-D array, but {name} has "
                             f"shape {np.shape(samples)}")
    arr = {"chains, draws, dim": arr, "draws, dim": arr[None], "chains, draws": arr[..., None],
           "draws": arr[None, :, None]}[layout]
    if arr.size == 0:
        raise ValueError(f"{name} must not be empty, got shape {np.shape(samples)}")
    if arr.shape[1] < min_draws:
        raise ValueError(f"{name} needs at least {min_draws} draws per chain, got {arr.shape[1]}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite")
    return arr, layout


def _in_layout(values: np.ndarray, layout: str, per_chain: bool):
    """Per-chain (n_chains, dim) or pooled (dim,) values, with the axes the input lacked removed:
    (dim,) for one chain "draws, dim", (n_chains,) or a scalar for "chains, draws", a scalar for "draws"."""
    if per_chain and layout in ("draws, dim", "draws"):
        values = values[0]
    if layout in ("chains, draws", "draws"):
        values = values[..., 0]
    return values


def _as_points(x, name: str, dim: int | None = None, min_points: int = 1,
               one_d: str = "draws") -> np.ndarray:
    """Return x as a finite float array (N, dim) with N >= min_points.

    A 1-D x of length N is N scalar draws, (N, 1), with one_d="draws" (samples, scores, test
    locations); it is one point, (1, N), with one_d="point" (the kernels' arguments x, y)."""
    arr = float_array(x, name)
    if arr.ndim == 1:
        arr = arr[None, :] if one_d == "point" else arr[:, None]
    if arr.ndim != 2 or arr.shape[1] == 0 or (dim is not None and arr.shape[1] != dim):
        want = "(N, dim)" if dim is None else f"(N, {dim})"
        raise ValueError(f"{name} must have shape {want}, got {np.shape(x)}")
    if arr.shape[0] < min_points:
        raise ValueError(f"{name} needs at least {min_points} points, got {arr.shape[0]}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite")
    return arr


def _points_and_scores(samples, scores, min_points: int = 1):
    x = _as_points(samples, "samples", min_points=min_points)
    s = _as_points(scores, "scores", dim=x.shape[1])
    if s.shape[0] != x.shape[0]:
        raise ValueError(f"scores must have the shape of samples {x.shape}, got {s.shape}")
    return x, s


def _is_finite_scalar(value) -> bool:
    try:
        return np.ndim(value) == 0 and bool(np.isfinite(float(value)))
    except (TypeError, ValueError):
        return False


def _check_imq(c, beta):
    if np.ndim(c) != 0:
        raise ValueError(f"c must be a positive scalar, got {c!r}")
    require_positive(c, "c")
    # beta < 0 makes (c^2 + r^2)^beta an inverse multiquadric, a positive-definite kernel.
    if not (_is_finite_scalar(beta) and beta < 0):
        raise ValueError(f"beta must be a negative finite scalar, got {beta!r}")
    return float(c), float(beta)


# ----------------------------------------------------------------------------------------------
# Effective sample size and autocorrelation time
# ----------------------------------------------------------------------------------------------
def _arviz_ess(chains_2d: np.ndarray) -> float:
    """ArviZ's ``identity`` ESS of an array (n_chains, n_draws) for one coordinate; 0 if constant.

    ArviZ returns N for an array whose range is below 2.2e-16 (absolute): a chain that never
    moved would get the largest ESS possible, and a coordinate on a tiny scale would too. Here an
    exactly constant array gets 0 (no information about the spread), and the draws are
    standardised first (ESS does not change under x -> (x - a) / b), so ArviZ's check never
    fires on a coordinate that does move.
    """
    first = chains_2d.flat[0]
    if np.all(chains_2d == first):
        return 0.0
    centred = chains_2d - chains_2d.mean()
    return float(arviz.ess(centred / centred.std(), method="identity"))


def ess(samples, per_chain: bool = True, *, layout: str | None = None) -> np.ndarray:
    r"""Per-coordinate effective sample size by Geyer's initial monotone sequence (through ArviZ).

    ESS = M N / tau,  tau = -1 + 2 sum_{m=0}^{K} Gamma_m,  Gamma_m = rho_{2m} + rho_{2m+1},
    summed while Gamma_m > 0 (initial positive sequence) and with the Gamma_m made non-increasing
    (initial monotone sequence) -- Geyer (1992), the estimator the papers report.

    We call ``arviz.ess(..., method="identity")``: in ArviZ 0.23 that is this estimator applied to
    the raw draws (Stan's multi-chain form: rho_t = 1 - (W - mean_chains acov_t) / var_plus, which
    for one chain is acov_t / acov_0 - 1/(N-1)). The other methods add something the papers do
    not do: ``"mean"`` (ArviZ's "old ess") first splits each chain in two halves, so one run is
    scored as two chains and the between-half variance enters; ``"bulk"`` also rank-normalises
    (Vehtari et al. 2021), which estimates the ESS of the ranks, not of the mean. Small ArviZ
    details: it adds rho_{2K+2} when positive, and floors tau at 1/log10(MN) rather than 1, so
    antithetic chains may get ESS > MN (``geyer_ess_1d`` caps ESS at N).

    A coordinate whose draws are all equal (a chain that never moved, or a constant) has ESS 0:
    it says nothing about the target's spread. ArviZ itself would return N there; summaries that
    average or minimise ESS over chains (``harness.summarise``) then show 0 for a stuck chain,
    never a winning score. (Chains pooled with ``per_chain=False`` get 0 only if every draw of
    every chain is the same number; chains stuck at different points get an ESS near 1-2, from
    their between-chain variance.)

    samples: (n_chains, n_draws, dim). A 2-D array needs its ``layout`` named (it is refused
    otherwise: read as one chain, 8 chains of 1,000 draws would give 1,000 ESS values of a
    "coordinate" each): ``layout="draws, dim"``: one chain (n_draws, dim);
    ``layout="chains, draws"``: chains of one coordinate (n_chains, n_draws); ``layout="draws"``:
    one scalar chain (n_draws,).
    per_chain=True: each chain is treated as an independent run (one ESS per run, as in the
    papers' tables) -> (n_chains, dim); (dim,) for "draws, dim", (n_chains,) for "chains, draws".
    per_chain=False: the chains are pooled as ArviZ pools them (between-chain variance included)
    -> (dim,); a scalar for "chains, draws".
    """
    per_chain = require_bool(per_chain, "per_chain")
    chains, layout = _as_chains(samples, layout=layout)
    return _in_layout(_ess(chains, per_chain), layout, per_chain)


def _ess(chains: np.ndarray, per_chain: bool) -> np.ndarray:
    """``ess`` of chains (n_chains, n_draws, dim): (n_chains, dim) per chain, (dim,) pooled."""
    n_chains, _, dim = chains.shape
    if not per_chain:
        return np.array([_arviz_ess(chains[:, :, k]) for k in range(dim)])
    return np.array([[_arviz_ess(chains[c, None, :, k]) for k in range(dim)]
                     for c in range(n_chains)])


def ess_summary(samples, *, layout: str | None = None) -> dict:
    """Per-chain minimum, median and maximum over coordinates of ``ess(samples, per_chain=True)``.

    samples and ``layout`` as in ``ess``. Returns {"min", "median", "max"}, each an array
    (n_chains,) (shape (1,) for one chain, layout="draws, dim").
    """
    values = _ess(_as_chains(samples, layout=layout)[0], per_chain=True)
    return {"min": values.min(axis=1), "median": np.median(values, axis=1),
            "max": values.max(axis=1)}


def _fft_lag_sums(y: np.ndarray) -> np.ndarray:
    """sum_t y_t y_{t+k} for every lag k = 0..n-1 along the last axis (zero-padded FFT)."""
    n = y.shape[-1]
    # Padding to >= 2n makes the circular correlation of the FFT equal the linear one.
    f = np.fft.rfft(y, n=next_fast_len(2 * n), axis=-1)
    return np.fft.irfft(f * np.conj(f), n=next_fast_len(2 * n), axis=-1)[..., :n]


GEYER_CONVENTIONS = ("geyer", "arviz")


def geyer_ess_1d(x, convention: str = "geyer") -> float:
    r"""Effective sample size of one scalar chain by Geyer's initial monotone sequence.

    convention="geyer" (the textbook estimator, Geyer 1992):
      rho_k = gamma_k / gamma_0 with gamma_k = (1/N) sum_{t<N-k} (x_t - xbar)(x_{t+k} - xbar) (FFT);
      Gamma_m = rho_{2m} + rho_{2m+1} for m = 0, 1, ... up to the first negative or zero Gamma_m;
      Gamma_m <- min(Gamma_0, ..., Gamma_m) (running minimum); tau = -1 + 2 sum_m Gamma_m,
      floored at 1 so that ESS <= N; ESS = N / tau.
    convention="arviz" (what ``arviz.ess(method="identity")`` computes for one chain, ArviZ 0.23,
    which follows Stan), four differences, all O(1/N) or confined to the tail of the sum:
      1. rho_k = gamma_k / gamma_0 - 1/(N-1) (Stan's multi-chain form for one chain, with the
         unbiased within-chain variance N/(N-1) gamma_0);
      2. rho_0 stays 1, and pairs are formed only while 2m < N-2;
      3. the last pair formed (the first with Gamma_K <= 0, or the last one allowed by 2.) adds
         its even term rho_{2K} to tau once when rho_{2K} > 0 or Gamma_K >= 0;
      4. tau is floored at 1 / log10(N) instead of 1, so antithetic chains get ESS > N.
    Both return 0 for a constant chain (ArviZ would return N; see ``ess``).

    Our own implementation, to cross-check ``ess`` (ArviZ) in the tests: with
    convention="arviz" the two agree to rounding (1e-10).
    """
    x = float_array(x, "x")
    if x.ndim != 1 or x.size < 4 or not np.all(np.isfinite(x)):
        raise ValueError(f"x must be a finite 1-D chain with at least 4 draws, got shape {x.shape}")
    if convention not in GEYER_CONVENTIONS:
        raise ValueError(f"convention must be one of {GEYER_CONVENTIONS}, got {convention!r}")
    n = x.size
    acov = _fft_lag_sums(x - x.mean()) / n
    if acov[0] <= 0 or np.all(x == x[0]):
        return 0.0  # a chain that never moved: no information about the spread
    rho = acov / acov[0]
    if convention == "geyer":
        pairs = rho[: 2 * (n // 2)].reshape(-1, 2).sum(axis=1)
        non_positive = np.flatnonzero(pairs <= 0)
        pairs = pairs[: non_positive[0]] if non_positive.size else pairs
        tau = -1.0 + 2.0 * np.minimum.accumulate(pairs).sum()
        return n / max(tau, 1.0)
    rho = rho - 1.0 / (n - 1)
    rho[0] = 1.0                                    # ArviZ keeps rho_0 = 1
    m_max = max((n - 3) // 2, 0)                    # pairs m >= 1 are formed while 2m < n - 2
    pairs = rho[: 2 * m_max + 2].reshape(-1, 2).sum(axis=1)
    non_positive = np.flatnonzero(pairs <= 0)
    last = min(non_positive[0], m_max) if non_positive.size else m_max   # the last pair formed
    tau = -1.0 + 2.0 * np.minimum.accumulate(pairs[:last]).sum()
    if rho[2 * last] > 0 or pairs[last] >= 0:       # its even term, once
        tau += rho[2 * last]
    return n / max(tau, 1.0 / np.log10(n))


def autocorrelation_time_neal(x, mean, max_lag: int) -> float:
    r"""Neal's integrated autocorrelation time (his ``series vsac``), with the true mean known.

    With mu the true mean (it replaces the sample mean, so no bias from estimating it):
      gamma_0 = (1/n) sum (x_t - mu)^2 over all n draws of all chains;
      gamma_k = sum_chains sum_{t+k<n} (x_t - mu)(x_{t+k} - mu) / (n_chains (n - k))
                (divisor = number of pairs, n - k per chain, pooled over chains);
      rho_k = gamma_k / gamma_0;   tau = 1 + 2 sum_{k=1}^{L} rho_k,  L = max_lag.

    x: (n_draws,) or (n_chains, n_draws); the chains are pooled as independent realisations.
    Neal computes tau for the states recorded every g iterations ("groups" of iterations); pass
    the thinned series, ``autocorrelation_time_neal(x[..., ::g], mean, max_lag)``, and multiply
    by g to express tau in iterations.
    """
    x = float_array(x, "x")
    x = x[None, :] if x.ndim == 1 else x
    if x.ndim != 2 or not np.all(np.isfinite(x)):
        raise ValueError(f"x must be a finite array (n_draws,) or (n_chains, n_draws), got "
                         f"shape {np.shape(x)}")
    n = x.shape[1]
    max_lag = require_int(max_lag, "max_lag", minimum=0)
    if max_lag >= n:
        raise ValueError(f"max_lag must be smaller than n_draws = {n}, got {max_lag}")
    if not _is_finite_scalar(mean):
        raise ValueError(f"mean must be a finite scalar, got {mean!r}")
    y = x - mean
    gamma0 = np.mean(y**2)
    if gamma0 <= 0:
        raise ValueError("x equals mean everywhere: the autocorrelation is undefined")
    lags = np.arange(1, max_lag + 1)
    gamma = _fft_lag_sums(y).sum(axis=0)[1: max_lag + 1] / (x.shape[0] * (n - lags))
    return float(1.0 + 2.0 * np.sum(gamma / gamma0))


def monte_carlo_standard_error(samples, *, layout: str | None = None) -> np.ndarray:
    """Per-coordinate Monte Carlo standard error of the mean: MCSE = sd / sqrt(ESS).

    sd is the standard deviation of all draws pooled (ddof=1) and ESS = ``ess(samples,
    per_chain=False)``; nan for a coordinate whose draws are all equal (ESS 0).
    samples: (n_chains, n_draws, dim) -> (dim,); a 2-D array with its ``layout`` named as in
    ``ess`` ("draws, dim" -> (dim,); "chains, draws" -> a scalar).
    """
    chains, layout = _as_chains(samples, layout=layout)
    sd = chains.reshape(-1, chains.shape[2]).std(axis=0, ddof=1)
    n_eff = _ess(chains, per_chain=False)
    # ESS 0 (every draw the same number): the error of the mean is unknown, not 0.
    with np.errstate(divide="ignore", invalid="ignore"):
        return _in_layout(np.where(n_eff > 0, sd / np.sqrt(n_eff), np.nan), layout, per_chain=False)


# ----------------------------------------------------------------------------------------------
# Kernel Stein discrepancy, IMQ base kernel
# ----------------------------------------------------------------------------------------------
def sq_distances(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """||x_i - y_j||^2 as an (n, m) matrix, by the expansion |x|^2 + |y|^2 - 2 x.y (O(nm) memory).
    x: (n, d), y: (m, d)."""
    if not (type(x) is np.ndarray and type(y) is np.ndarray and x.ndim == 2 and y.ndim == 2
            and x.shape[1] == y.shape[1]):
        x, y = float_array(x, "x"), float_array(y, "y")
        if x.ndim != 2:
            raise ValueError(f"x must have shape (n, d), got {x.shape}")
        if y.ndim != 2 or y.shape[1] != x.shape[1]:
            raise ValueError(f"y must have shape (m, {x.shape[1]}) for x of shape {x.shape}, got {y.shape}")
    d2 = np.sum(x**2, 1)[:, None] + np.sum(y**2, 1)[None, :] - 2.0 * x @ y.T
    return np.maximum(d2, 0.0)  # the expansion can round to tiny negatives


def imq_kernel(x, y, c: float = 1.0, beta: float = -0.5) -> np.ndarray:
    """Inverse multiquadric kernel k(x, y) = (c^2 + ||x - y||^2)^beta.

    x: (n, d), y: (m, d) -> Gram matrix (n, m); two single points (d,) give a scalar.
    """
    c, beta = _check_imq(c, beta)
    scalar = np.ndim(x) == 1 and np.ndim(y) == 1
    x = _as_points(x, "x", one_d="point")
    y = _as_points(y, "y", dim=x.shape[1], one_d="point")
    k = (c**2 + sq_distances(x, y)) ** beta
    return k[0, 0] if scalar else k


def stein_kernel_imq(x, y, sx, sy, c: float = 1.0, beta: float = -0.5) -> np.ndarray:
    r"""Langevin Stein kernel with IMQ base kernel k(x, y) = (c^2 + ||x - y||^2)^beta.

    k0(x, y) = div_x div_y k + grad_x k . s(y) + grad_y k . s(x) + k s(x).s(y); with r = x - y,
    b = c^2 + ||r||^2 and d = dim this is
      k0 = s(x).s(y) b^beta - 2 beta s(x).r b^(beta-1) + 2 beta s(y).r b^(beta-1)
           - 2 d beta b^(beta-1) - 4 beta (beta-1) ||r||^2 b^(beta-2).
    x, sx: (n, d); y, sy: (m, d) -> (n, m); single points (d,) give a scalar.
    """
    c, beta = _check_imq(c, beta)
    scalar = all(np.ndim(a) == 1 for a in (x, y, sx, sy))
    x, sx = _as_points(x, "x", one_d="point"), _as_points(sx, "sx", one_d="point")
    y = _as_points(y, "y", dim=x.shape[1], one_d="point")
    sy = _as_points(sy, "sy", dim=x.shape[1], one_d="point")
    if sx.shape != x.shape or sy.shape != y.shape:
        raise ValueError(f"sx, sy must have the shapes of x, y {x.shape}, {y.shape}, got "
                         f"{sx.shape}, {sy.shape}")
    k0 = _stein_gram(x, y, sx, sy, c, beta)
    return k0[0, 0] if scalar else k0


def _stein_gram(x, y, sx, sy, c, beta):
    """k0 Gram matrix (n, m) from dot products only, so memory is O(nm), not O(nmd)."""
    r2 = sq_distances(x, y)
    b = c**2 + r2
    sx_r = np.sum(sx * x, 1)[:, None] - sx @ y.T  # s(x_i).(x_i - y_j)
    sy_r = x @ sy.T - np.sum(sy * y, 1)[None, :]  # s(y_j).(x_i - y_j)
    b1 = b ** (beta - 1.0)
    return (sx @ sy.T * b**beta + 2.0 * beta * (sy_r - sx_r) * b1
            - 2.0 * x.shape[1] * beta * b1 - 4.0 * beta * (beta - 1.0) * r2 * b1 / b)


def ksd(samples, scores, c: float = 1.0, beta: float = -0.5, block_size: int = 512) -> float:
    r"""Kernel Stein discrepancy (V-statistic) with the IMQ base kernel.

    KSD = sqrt( sum_{i,j} k0(x_i, x_j) ) / N, k0 = ``stein_kernel_imq``.
    samples, scores: (N, d), scores = grad log pi(samples). The double sum runs over row blocks
    of ``block_size`` points, so memory is O(block_size N) (N = 5000, d = 100 takes seconds).
    """
    x, s = _points_and_scores(samples, scores)
    c, beta = _check_imq(c, beta)
    block_size = require_int(block_size, "block_size", minimum=1)
    total = 0.0
    for start in range(0, x.shape[0], block_size):
        rows = slice(start, start + block_size)
        total += _stein_gram(x[rows], x, s[rows], s, c, beta).sum()
    # The V-statistic is >= 0 (k0 is positive definite); clip round-off before the root.
    return float(np.sqrt(max(total, 0.0)) / x.shape[0])


# ----------------------------------------------------------------------------------------------
# Finite-set Stein discrepancy (Jitkrittum et al. 2017), IMQ kernel
# ----------------------------------------------------------------------------------------------
def _fssd_features(x, s, v, c, beta):
    """Features xi(x_i, v_j) = s(x_i) k(x_i, v_j) + grad_x k(x_i, v_j) as an (N, J, d) tensor.

    Only ``fssd_quadratic`` builds this tensor: it is the plain definition the tests compare to.
    """
    r = x[:, None, :] - v[None, :, :]
    b = c**2 + np.sum(r**2, axis=2)
    return s[:, None, :] * (b**beta)[..., None] + 2.0 * beta * r * (b ** (beta - 1.0))[..., None]


def _fssd_inputs(samples, scores, locations, c, beta):
    x, s = _points_and_scores(samples, scores, min_points=2)
    v = _as_points(locations, "test_locations", dim=x.shape[1])
    return x, s, v, *_check_imq(c, beta)


def _r_sum(w, x, v):
    """sum_i w_ij (x_i - v_j) for every j, shape (J, d), without forming the (N, J, d) differences."""
    return w.T @ x - w.sum(axis=0)[:, None] * v


def _fssd_and_gradient(x, s, v, c, beta, gradient: bool):
    """FSSD^2 (and its gradient in v) from (N, J) matrices of scalars and (J, d) sums only.

    With r = x_i - v_j, b = c^2 + ||r||^2, p = b^beta, q = b^(beta-1):
    xi_ij = p s_i + 2 beta q r, so S_j = sum_i xi_ij and
    ||xi_ij||^2 = p^2 ||s_i||^2 + 4 beta p q s_i.r + 4 beta^2 q^2 ||r||^2.
    Memory and time O(N J + (N + J) d) per call (matrix products), not an (N, J, d) tensor:
    ``optimise_test_locations`` calls this at every step.
    """
    n, d = x.shape
    j = v.shape[0]
    z = d * j * n * (n - 1)
    r2 = sq_distances(x, v)
    b = c**2 + r2
    p, q = b**beta, b ** (beta - 1.0)
    ss = np.sum(s**2, axis=1)[:, None]
    sr = np.sum(s * x, axis=1)[:, None] - s @ v.T  # s_i.(x_i - v_j)
    total = p.T @ s + 2.0 * beta * _r_sum(q, x, v)  # S_j, (J, d)
    xi_s = p * ss + 2.0 * beta * q * sr  # xi_ij.s_i
    xi_r = p * sr + 2.0 * beta * q * r2  # xi_ij.r_ij
    value = (np.sum(total**2) - np.sum(p * xi_s + 2.0 * beta * q * xi_r)) / z
    if not gradient:
        return float(value), None
    # A_ij = S_j - xi_ij; see fssd_location_gradient for J^T A.
    a_s = s @ total.T - xi_s
    a_r = x @ total.T - np.sum(total * v, axis=1)[None, :] - xi_r
    w = -2.0 * beta * q * a_s - 4.0 * beta * (beta - 1.0) * q / b * a_r
    q_a = total * q.sum(axis=0)[:, None] - ((q * p).T @ s + 2.0 * beta * _r_sum(q**2, x, v))
    return float(value), 2.0 * (_r_sum(w, x, v) - 2.0 * beta * q_a) / z


def fssd(samples, scores, test_locations, c: float = 1.0, beta: float = -0.5) -> float:
    r"""Unbiased FSSD^2 estimate (U-statistic) with the IMQ kernel k(x, v) = (c^2 + ||x - v||^2)^beta.

    xi(x, v) = s(x) k(x, v) + grad_x k(x, v) (d-vector);
    FSSD^2 = sum_j sum_m [ (sum_i xi_m(x_i, v_j))^2 - sum_i xi_m(x_i, v_j)^2 ] / (d J N (N-1)),
    i.e. the mean over i != j of <xi(x_i, .), xi(x_j, .)> / (d J). Being unbiased it can be
    negative. samples, scores: (N, d) with N >= 2; test_locations: (J, d).
    We use c^2 in k, as Jitkrittum et al. do; the MAMBA code writes c, the same only for c = 1.
    """
    return _fssd_and_gradient(*_fssd_inputs(samples, scores, test_locations, c, beta), False)[0]


def fssd_quadratic(samples, scores, test_locations, c: float = 1.0, beta: float = -0.5) -> float:
    """FSSD^2 by its O(N^2) definition: mean over i != j of <xi(x_i), xi(x_j)> / (d J) (for tests)."""
    x, s, v, c, beta = _fssd_inputs(samples, scores, test_locations, c, beta)
    xi = _fssd_features(x, s, v, c, beta)
    n, j, d = xi.shape
    flat = xi.reshape(n, j * d)
    gram = flat @ flat.T
    return float((gram.sum() - np.trace(gram)) / (n * (n - 1) * d * j))


def fssd_location_gradient(samples, scores, test_locations, c: float = 1.0, beta: float = -0.5):
    r"""FSSD^2 and its gradient with respect to the test locations, shape (J, d).

    With S_j = sum_i xi(x_i, v_j), A_ij = S_j - xi(x_i, v_j), r = x_i - v_j, b = c^2 + ||r||^2,
    Z = d J N (N-1):  dFSSD^2/dv_j = (2/Z) sum_i J_ij^T A_ij, where J_ij = d xi(x_i, v_j)/d v_j, so
      J^T A = -2 beta b^(beta-1) (A.s) r - 2 beta b^(beta-1) A - 4 beta (beta-1) b^(beta-2) (A.r) r.
    (From d b^beta/dv = -2 beta r b^(beta-1) and d(r_m b^(beta-1))/dv_l =
    -delta_ml b^(beta-1) - 2 (beta-1) r_m r_l b^(beta-2).) The sums over i are done as matrix
    products (see ``_fssd_and_gradient``).
    """
    return _fssd_and_gradient(*_fssd_inputs(samples, scores, test_locations, c, beta), True)


def initial_test_locations(samples, n_locations: int, rng) -> np.ndarray:
    """J distinct draws from the Gaussian fitted to the samples: N(mean, cov + 1e-10 I), (J, d).

    The original MAMBA code drew one point and repeated it J times; independent draws here.
    The jitter keeps the covariance factorisable when the samples span less than d dimensions.
    """
    rng = require_rng(rng)
    x = _as_points(samples, "samples", min_points=2)
    n_locations = require_int(n_locations, "n_locations", minimum=1)
    cov = np.atleast_2d(np.cov(x, rowvar=False)) + 1e-10 * np.eye(x.shape[1])
    return rng.multivariate_normal(x.mean(axis=0), cov, size=n_locations, method="eigh")


def optimise_test_locations(samples, scores, locations, n_steps: int = 100,
                            learning_rate: float = 1e-3, c: float = 1.0, beta: float = -0.5):
    """Maximise FSSD^2 over the test locations V by Adam (Kingma & Ba 2015) ascent.

    g = dFSSD^2/dV; m <- b1 m + (1-b1) g; u <- b2 u + (1-b2) g^2;
    V <- V + lr (m / (1-b1^t)) / (sqrt(u / (1-b2^t)) + eps), with b1 = 0.9, b2 = 0.999,
    eps = 1e-8. Returns the final locations (J, d).
    """
    n_steps = require_int(n_steps, "n_steps", minimum=0)
    require_positive(learning_rate, "learning_rate")
    x, s, v, c, beta = _fssd_inputs(samples, scores, locations, c, beta)
    v = v.copy()
    m, u = np.zeros_like(v), np.zeros_like(v)
    b1, b2, eps = 0.9, 0.999, 1e-8
    for t in range(1, n_steps + 1):
        g = _fssd_and_gradient(x, s, v, c, beta, True)[1]
        m = b1 * m + (1 - b1) * g
        u = b2 * u + (1 - b2) * g**2
        v += learning_rate * (m / (1 - b1**t)) / (np.sqrt(u / (1 - b2**t)) + eps)
    return v


def fssd_opt(samples, scores, rng, n_locations: int = 10, n_steps: int = 100,
             learning_rate: float = 1e-3, c: float = 1.0, beta: float = -0.5) -> float:
    """FSSD-opt: FSSD^2 at test locations drawn by ``initial_test_locations`` then optimised by
    ``optimise_test_locations`` on the same samples (as MAMBA does)."""
    v = initial_test_locations(samples, n_locations, rng)
    v = optimise_test_locations(samples, scores, v, n_steps, learning_rate, c, beta)
    return fssd(samples, scores, v, c, beta)


# ----------------------------------------------------------------------------------------------
# Maximum mean discrepancy
# ----------------------------------------------------------------------------------------------
_MEDIAN_SUBSET = 1000  # points used for the median heuristic, to keep it O(1000^2)


def _median_bandwidth(z: np.ndarray) -> float:
    """Median of the pairwise distances of the pooled sample (over an evenly spaced subset)."""
    if z.shape[0] > _MEDIAN_SUBSET:
        # Evenly spaced rather than random indices: deterministic, and needs no rng.
        z = z[np.linspace(0, z.shape[0] - 1, _MEDIAN_SUBSET).astype(int)]
    d = np.sqrt(sq_distances(z, z))[np.triu_indices(z.shape[0], k=1)]
    bandwidth = float(np.median(d))
    if bandwidth <= 0:
        raise ValueError("median heuristic bandwidth is 0 (most points coincide); pass bandwidth")
    return bandwidth


def _kernel_sum(a, b, kernel, exclude_diagonal: bool, block_size: int = 1024) -> float:
    """sum_{i,j} k(a_i, b_j) by row blocks; exclude_diagonal drops i = j (a is b)."""
    total = 0.0
    for start in range(0, a.shape[0], block_size):
        gram = kernel(a[start: start + block_size], b)
        if exclude_diagonal:
            rows = np.arange(gram.shape[0])
            gram[rows, start + rows] = 0.0
        total += gram.sum()
    return total


def mmd_squared(x, y, kernel: str = "gaussian", bandwidth=None, degree: int = 3,
                offset: float = 1.0, unbiased: bool = False) -> float:
    r"""Squared maximum mean discrepancy between samples x (n, d) and y (m, d).

    Biased (V-statistic, the kmc paper's choice):
      MMD^2 = (1/n^2) sum_{i,j} k(x_i, x_j) + (1/m^2) sum_{i,j} k(y_i, y_j) - (2/nm) sum k(x_i, y_j);
    unbiased (U-statistic): the first two sums over i != j, divided by n(n-1) and m(m-1).
    kernel="gaussian": k = exp(-||x - y||^2 / (2 bw^2)), bw = median pairwise distance of the
    pooled sample if bandwidth is None; kernel="polynomial": k = (x.y + offset)^degree.
    """
    x = _as_points(x, "x", min_points=2 if unbiased else 1)
    y = _as_points(y, "y", dim=x.shape[1], min_points=2 if unbiased else 1)
    if kernel == "gaussian":
        bw = _median_bandwidth(np.vstack([x, y])) if bandwidth is None else \
            float(require_positive(bandwidth, "bandwidth"))
        k = lambda a, b: np.exp(-sq_distances(a, b) / (2.0 * bw**2))  # noqa: E731
    elif kernel == "polynomial":
        degree = require_int(degree, "degree", minimum=1)
        if not (_is_finite_scalar(offset) and offset >= 0):
            raise ValueError(f"offset must be a non-negative finite scalar, got {offset!r}")
        k = lambda a, b: (a @ b.T + offset) ** degree  # noqa: E731
    else:
        raise ValueError(f"kernel must be 'gaussian' or 'polynomial', got {kernel!r}")
    n, m = x.shape[0], y.shape[0]
    nx, ny = (n * (n - 1), m * (m - 1)) if unbiased else (n * n, m * m)
    return float(_kernel_sum(x, x, k, unbiased) / nx + _kernel_sum(y, y, k, unbiased) / ny
                 - 2.0 * _kernel_sum(x, y, k, False) / (n * m))


# ----------------------------------------------------------------------------------------------
# Confidence-region metrics (Haario et al.)
# ----------------------------------------------------------------------------------------------
def confidence_region_fractions(whitened_sq_norms, dim: int, levels=DEFAULT_LEVELS) -> np.ndarray:
    """Fraction of samples inside each chi-square confidence region of a d-dim Gaussian.

    f_q = #{ n : ||z_n||^2 <= chi2_d.ppf(q) } / N, with ||z_n||^2 the squared Mahalanobis norm of
    sample n (of the un-twisted point, for the twisted-Gaussian targets).
    whitened_sq_norms: (N,) -> (n_levels,), or (n_runs, N) -> (n_runs, n_levels).
    """
    q = float_array(whitened_sq_norms, "whitened_sq_norms")
    if q.ndim not in (1, 2) or q.shape[-1] == 0 or np.any(np.isnan(q)) or np.any(q < 0):
        raise ValueError(f"whitened_sq_norms must be non-negative, shape (N,) or (n_runs, N), "
                         f"got shape {np.shape(whitened_sq_norms)}")
    dim = require_int(dim, "dim", minimum=1)
    levels = float_array(levels, "levels")
    if levels.ndim != 1 or levels.size == 0 or np.any((levels <= 0) | (levels >= 1)):
        raise ValueError(f"levels must be probabilities in (0, 1), got {levels!r}")
    radii = stats.chi2.ppf(levels, dim)
    return np.mean(q[..., None] <= radii, axis=-2)


def confidence_region_errors(fractions_per_run, levels=DEFAULT_LEVELS) -> dict:
    """Haario et al.'s confidence-region errors, from ``confidence_region_fractions`` per run.

    With e68 = 100 f_68.3 - 68.3 and e99 = 100 f_99 - 99 per run (percentage points inside the
    region minus the nominal level; positive means too few samples in the tails):
    err68 = |mean over runs of e68|, err68_sd = sd of e68; diff99 = mean of e99, diff99_sd = sd of
    e99 (ddof=1; nan for one run); err68_mean_abs = mean of |e68|, the other reading of "err".
    These definitions are reconstructions (book/mcma.md explains why the published numbers
    force |mean| rather than mean |.|). fractions_per_run: (n_runs, n_levels), columns ordered as
    ``levels``, which must contain 0.683 and 0.99.
    """
    f = np.atleast_2d(float_array(fractions_per_run, "fractions_per_run"))
    levels = list(float_array(levels, "levels"))
    if f.ndim != 2 or f.shape[1] != len(levels):
        raise ValueError(f"fractions_per_run must have shape (n_runs, {len(levels)}), "
                         f"got {np.shape(fractions_per_run)}")
    missing = [q for q in (0.683, 0.99) if not np.any(np.isclose(levels, q))]
    if missing:
        raise ValueError(f"levels must contain 0.683 and 0.99, got {levels!r}")
    e68 = 100.0 * f[:, int(np.argmin(np.abs(np.array(levels) - 0.683)))] - 68.3
    e99 = 100.0 * f[:, int(np.argmin(np.abs(np.array(levels) - 0.99)))] - 99.0
    sd = (lambda a: float(np.std(a, ddof=1))) if f.shape[0] > 1 else (lambda a: float("nan"))
    return {"err68": abs(float(e68.mean())), "err68_sd": sd(e68),
            "diff99": float(e99.mean()), "diff99_sd": sd(e99),
            "err68_mean_abs": float(np.abs(e68).mean())}
