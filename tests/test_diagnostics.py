"""Tests of mcmc_lib.diagnostics: every estimator against an independent computation or a known value."""
import autograd
import autograd.numpy as anp
import numpy as np
import pytest
from scipy import signal

from mcmc_lib import diagnostics as dg


def ar1(rng, phi, n_chains, n_draws):
    """Stationary AR(1) chains x_t = phi x_{t-1} + sqrt(1 - phi^2) e_t, unit variance.

    Integrated autocorrelation time (1 + phi) / (1 - phi).
    """
    e = rng.standard_normal((n_chains, n_draws)) * np.sqrt(1 - phi**2)
    x0 = rng.standard_normal((n_chains, 1))  # stationary start: no burn-in needed
    return signal.lfilter([1.0], [1.0, -phi], e, axis=1, zi=phi * x0)[0]


# --- ESS and autocorrelation time ---------------------------------------------------------------
@pytest.mark.parametrize("phi", [0.0, 0.5, 0.9])
def test_arviz_ess_agrees_with_own_geyer(phi):
    x = ar1(np.random.default_rng(1), phi, 1, 20_000)[0]
    ours = dg.geyer_ess_1d(x)
    theirs = dg.ess(x[:, None])[0]
    assert ours == pytest.approx(theirs, rel=0.03)
    # and both near the truth N (1 - phi) / (1 + phi)
    assert ours == pytest.approx(x.size * (1 - phi) / (1 + phi), rel=0.15)


def test_ess_shapes_and_summary():
    rng = np.random.default_rng(2)
    samples = np.stack([ar1(rng, 0.5, 3, 2000) for _ in range(4)], axis=-1)  # (3, 2000, 4)
    per_chain = dg.ess(samples)
    assert per_chain.shape == (3, 4)
    assert dg.ess(samples, per_chain=False).shape == (4,)
    assert dg.ess(samples[0]).shape == (4,)
    np.testing.assert_allclose(dg.ess(samples[0]), per_chain[0])
    # pooled ESS of 3 independent chains is about the sum of the per-chain ESS
    np.testing.assert_allclose(dg.ess(samples, per_chain=False), per_chain.sum(0), rtol=0.25)
    summary = dg.ess_summary(samples)
    np.testing.assert_allclose(summary["min"], per_chain.min(1))
    np.testing.assert_allclose(summary["max"], per_chain.max(1))
    assert summary["median"].shape == (3,)


def test_mcse_of_iid_draws():
    x = np.random.default_rng(3).standard_normal((4, 2500, 3))
    np.testing.assert_allclose(dg.monte_carlo_standard_error(x), 1 / np.sqrt(1e4), rtol=0.1)


@pytest.mark.parametrize("phi, max_lag", [(0.5, 40), (0.9, 150)])
def test_neal_autocorrelation_time_ar1(phi, max_lag):
    x = ar1(np.random.default_rng(4), phi, 20, 100_000)
    tau = dg.autocorrelation_time_neal(x, 0.0, max_lag)
    assert tau == pytest.approx((1 + phi) / (1 - phi), rel=0.04)
    # a single chain is accepted as well
    assert dg.autocorrelation_time_neal(x[0], 0.0, max_lag) == pytest.approx(tau, rel=0.2)


def test_neal_matches_direct_sum():
    rng = np.random.default_rng(5)
    x, mu, lag = rng.standard_normal((3, 50)) + 0.3, 0.1, 7
    y = x - mu
    gamma = [np.sum(y[:, :-k] * y[:, k:]) / (3 * (50 - k)) for k in range(1, lag + 1)]
    expected = 1 + 2 * np.sum(gamma) / np.mean(y**2)
    assert dg.autocorrelation_time_neal(x, mu, lag) == pytest.approx(expected, rel=1e-10)


# --- Stein kernel and KSD -----------------------------------------------------------------------
def test_stein_kernel_matches_autograd():
    rng = np.random.default_rng(6)
    d, c, beta = 4, 1.3, -0.7
    x, y, sx, sy = rng.standard_normal((4, d))

    def k(a, b):
        return (c**2 + anp.sum((a - b) ** 2)) ** beta

    grad_x, grad_y = autograd.grad(k, 0), autograd.grad(k, 1)
    # div_x div_y k = trace of the mixed second derivative d^2 k / dx dy
    trace = np.trace(autograd.jacobian(grad_y, 0)(x, y))
    expected = trace + grad_x(x, y) @ sy + grad_y(x, y) @ sx + k(x, y) * sx @ sy
    assert dg.stein_kernel_imq(x, y, sx, sy, c, beta) == pytest.approx(expected, rel=1e-10)
    assert dg.imq_kernel(x, y, c, beta) == pytest.approx(k(x, y), rel=1e-12)
    gram = dg.stein_kernel_imq(np.stack([x, y]), np.stack([y, x]), np.stack([sx, sy]),
                               np.stack([sy, sx]), c, beta)
    assert gram[0, 0] == pytest.approx(expected, rel=1e-10)
    assert gram[1, 1] == pytest.approx(expected, rel=1e-10)  # k0 is symmetric


def test_ksd_small_for_exact_draws_and_large_for_shifted():
    rng = np.random.default_rng(7)
    x = rng.standard_normal((2000, 5))
    exact = dg.ksd(x, -x)  # standard Gaussian: score -x
    shifted = dg.ksd(x + 0.5, -(x + 0.5))
    # For exact draws the V-statistic is dominated by its diagonal, KSD^2 ~ E k0(x, x) / N, and
    # with c = 1, beta = -1/2: k0(x, x) = ||s(x)||^2 + d, mean 2d.
    assert exact < 1.2 * np.sqrt(2 * 5 / 2000)
    assert shifted > 5 * exact
    # blocking does not change the value
    assert dg.ksd(x, -x, block_size=333) == pytest.approx(exact, rel=1e-10)


# --- FSSD ---------------------------------------------------------------------------------------
def fssd_problem(seed=8, n=60, d=3, j=4):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, d)) * 1.2 + 0.3
    return x, -x, rng.standard_normal((j, d))


def test_fssd_u_statistic_equals_quadratic_form():
    x, s, v = fssd_problem()
    for c, beta in [(1.0, -0.5), (0.7, -1.5)]:
        assert dg.fssd(x, s, v, c, beta) == pytest.approx(dg.fssd_quadratic(x, s, v, c, beta),
                                                          rel=1e-10)


def test_fssd_location_gradient_finite_differences():
    x, s, v = fssd_problem()
    c, beta, h = 1.4, -0.6, 1e-6
    value, grad = dg.fssd_location_gradient(x, s, v, c, beta)
    assert value == pytest.approx(dg.fssd(x, s, v, c, beta), rel=1e-12)
    numeric = np.zeros_like(v)
    for idx in np.ndindex(*v.shape):
        step = np.zeros_like(v)
        step[idx] = h
        numeric[idx] = (dg.fssd(x, s, v + step, c, beta) - dg.fssd(x, s, v - step, c, beta)) / (2 * h)
    np.testing.assert_allclose(grad, numeric, rtol=1e-5, atol=1e-9 * np.abs(grad).max())


def test_test_locations_distinct_and_optimisation_increases_fssd():
    rng = np.random.default_rng(9)
    x, s, _ = fssd_problem()
    v0 = dg.initial_test_locations(x, 5, rng)
    assert v0.shape == (5, 3)
    assert len(np.unique(v0, axis=0)) == 5
    v1 = dg.optimise_test_locations(x, s, v0, n_steps=200, learning_rate=1e-2)
    assert dg.fssd(x, s, v1) > dg.fssd(x, s, v0)
    assert np.isfinite(dg.fssd_opt(x, s, np.random.default_rng(9), n_locations=3, n_steps=5))


# --- MMD ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("kernel", ["gaussian", "polynomial"])
def test_mmd_same_vs_different(kernel):
    rng = np.random.default_rng(10)
    x, y = rng.standard_normal((2, 1500, 2))
    z = rng.standard_normal((1500, 2)) * np.array([1.0, 2.0]) + 0.5
    same = dg.mmd_squared(x, y, kernel=kernel, unbiased=True)
    different = dg.mmd_squared(x, z, kernel=kernel, unbiased=True)
    assert abs(same) < 0.1 * different
    # the biased estimator exceeds the unbiased one by a positive O(1/n) term
    assert dg.mmd_squared(x, y, kernel=kernel) > same


def test_mmd_matches_direct_formula():
    rng = np.random.default_rng(11)
    x, y = rng.standard_normal((20, 2)), rng.standard_normal((15, 2)) + 1
    k = lambda a, b: np.exp(-np.sum((a[:, None] - b[None]) ** 2, -1) / (2 * 0.8**2))  # noqa: E731
    kxx, kyy, kxy = k(x, x), k(y, y), k(x, y)
    biased = kxx.mean() + kyy.mean() - 2 * kxy.mean()
    unbiased = ((kxx.sum() - 20) / 380 + (kyy.sum() - 15) / 210 - 2 * kxy.mean())
    assert dg.mmd_squared(x, y, bandwidth=0.8) == pytest.approx(biased, rel=1e-10)
    assert dg.mmd_squared(x, y, bandwidth=0.8, unbiased=True) == pytest.approx(unbiased, rel=1e-10)


# --- Confidence regions -------------------------------------------------------------------------
def test_confidence_regions_on_exact_gaussian_draws():
    rng = np.random.default_rng(12)
    dim, runs, n = 8, 20, 10_000
    sq_norms = np.sum(rng.standard_normal((runs, n, dim)) ** 2, axis=-1)
    fractions = dg.confidence_region_fractions(sq_norms, dim)
    assert fractions.shape == (runs, 4)
    np.testing.assert_allclose(fractions.mean(0), dg.DEFAULT_LEVELS, atol=0.005)
    np.testing.assert_allclose(dg.confidence_region_fractions(sq_norms[0], dim), fractions[0])
    errors = dg.confidence_region_errors(fractions)
    # percentage points; the sd of 100 f_68 is about 0.47 per run, 0.1 for the mean of 20 runs
    assert errors["err68"] < 0.5 and errors["err68_mean_abs"] < 1.0
    assert abs(errors["diff99"]) < 0.1
    biased = dg.confidence_region_errors(np.clip(fractions + 0.05, 0, 1))   # 5 points too many inside
    assert abs(biased["err68"] - 5.0) < 0.5 and biased["diff99"] > 0.5
    assert errors["err68_sd"] > 0 and errors["diff99_sd"] > 0
    assert np.isnan(dg.confidence_region_errors(fractions[:1])["err68_sd"])


# --- Invalid input ------------------------------------------------------------------------------
def test_invalid_input_raises():
    x = np.random.default_rng(13).standard_normal((10, 2))
    with pytest.raises(ValueError, match="samples"):
        dg.ess(np.zeros(10))
    with pytest.raises(ValueError, match="samples"):
        dg.ess(np.zeros((2, 2, 2)))  # fewer than 4 draws
    with pytest.raises(ValueError, match="scores"):
        dg.ksd(x, x[:, :1])
    with pytest.raises(ValueError, match="samples"):
        dg.fssd(x[:1], -x[:1], x[:2])  # N < 2
    with pytest.raises(ValueError, match="test_locations"):
        dg.fssd(x, -x, np.zeros((2, 3)))
    with pytest.raises(ValueError, match="bandwidth"):
        dg.mmd_squared(x, x, bandwidth=-1.0)
    with pytest.raises(ValueError, match="kernel"):
        dg.mmd_squared(x, x, kernel="laplace")
    with pytest.raises(ValueError, match="beta"):
        dg.ksd(x, -x, beta=0.5)
    with pytest.raises(ValueError, match="c must"):
        dg.imq_kernel(x, x, c=0.0)
    with pytest.raises(ValueError, match="max_lag"):
        dg.autocorrelation_time_neal(x[:, 0], 0.0, 10)
    with pytest.raises(ValueError, match="rng"):
        dg.initial_test_locations(x, 3, rng=0)
    with pytest.raises(ValueError, match="dim"):
        dg.confidence_region_fractions(np.ones(5), 0)
    with pytest.raises(ValueError, match="levels"):
        dg.confidence_region_errors(np.ones((3, 2)), levels=(0.5, 0.9))
