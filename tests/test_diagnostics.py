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
    """The textbook estimator differs from ArviZ's only by the O(1/N) details listed in
    geyer_ess_1d (rho - 1/(N-1), the tail term, the floor); both are near N (1 - phi) / (1 + phi)."""
    x = ar1(np.random.default_rng(1), phi, 1, 20_000)[0]
    ours = dg.geyer_ess_1d(x)
    theirs = dg.ess(x[:, None], layout="draws, dim")[0]
    assert ours == pytest.approx(theirs, rel=0.03)
    assert ours == pytest.approx(x.size * (1 - phi) / (1 + phi), rel=0.15)


@pytest.mark.parametrize("n", [4, 5, 9, 40, 1001, 20_000])
@pytest.mark.parametrize("phi", [-0.7, -0.2, 0.0, 0.5, 0.9, 0.99])
def test_geyer_truncation_equals_arviz_to_rounding(phi, n):
    """Our implementation of the same estimator (convention="arviz": Stan's rho, the initial positive
    sequence with its tail term, the monotone sequence, the 1/log10 N floor) against arviz.ess to
    1e-10, on chains short and long, positively and negatively correlated."""
    rng = np.random.default_rng(abs(hash((phi, n))) % 2**32)
    for _ in range(5):
        x = ar1(rng, phi, 1, n)[0]
        assert dg.geyer_ess_1d(x, convention="arviz") == pytest.approx(dg.ess(x[:, None], layout="draws, dim")[0], rel=1e-10)


def test_geyer_truncation_on_a_hand_made_autocorrelation():
    """A chain with a known autocorrelation, x = (1, 1, -1, -1) repeated (N = 16, mean 0, gamma_0 = 1):
    gamma_1 = 1/16 (15 products alternating +1 -1), gamma_2 = -14/16, gamma_3 = -1/16, ... The
    initial positive sequence keeps only the first pair, rho_0 + rho_1, since rho_2 + rho_3 < 0."""
    n = 16
    x = np.tile([1.0, 1.0, -1.0, -1.0], n // 4)
    rho = np.array([np.sum(x[: n - j] * x[j:]) for j in range(n)]) / n
    np.testing.assert_allclose(rho[:4], [1.0, 1 / 16, -14 / 16, -1 / 16])
    # textbook: tau = -1 + 2 (rho_0 + rho_1), floored at 1
    assert dg.geyer_ess_1d(x) == pytest.approx(n / max(-1 + 2 * (1 + 1 / 16), 1.0), rel=1e-12)
    # ArviZ's convention: rho_k - 1/(N-1) for k >= 1; rho_2 < 0, so no tail term; floor 1/log10(N)
    r1 = 1 / 16 - 1 / 15
    assert (-14 / 16 - 1 / 15) + (-1 / 16 - 1 / 15) < 0
    expected = n / max(-1 + 2 * (1 + r1), 1 / np.log10(n))
    assert dg.geyer_ess_1d(x, convention="arviz") == pytest.approx(expected, rel=1e-12)
    assert dg.geyer_ess_1d(x, convention="arviz") == pytest.approx(dg.ess(x[:, None], layout="draws, dim")[0], rel=1e-10)


def test_ess_of_a_chain_that_never_moves_is_zero():
    """A stuck chain has no information about the spread: ESS 0 (ArviZ alone would return N), MCSE nan."""
    rng = np.random.default_rng(20)
    moving = ar1(rng, 0.5, 3, 1000)
    chains = np.stack([moving, moving + 1.0], axis=-1)       # (3, 1000, 2)
    chains[1] = [0.3, -2.0]                                  # chain 1 never moves
    per_chain = dg.ess(chains)
    assert np.all(per_chain[1] == 0) and np.all(per_chain[[0, 2]] > 100)
    assert np.all(dg.ess(np.full((500, 3), 2.5), layout="draws, dim") == 0)
    assert np.all(dg.ess(np.full((4, 500, 3), 2.5), per_chain=False) == 0)
    assert dg.geyer_ess_1d(np.full(100, -1.0)) == 0 and dg.geyer_ess_1d(np.full(100, 7.0), "arviz") == 0
    np.testing.assert_array_equal(dg.ess_summary(chains)["max"][1], 0.0)
    assert np.all(np.isnan(dg.monte_carlo_standard_error(np.full((2, 100, 2), 3.0))))
    # chains stuck at different points: the pooled ESS is about the number of chains, never N
    stuck_apart = np.repeat(np.arange(4.0)[:, None, None], 500, axis=1)
    assert dg.ess(stuck_apart, per_chain=False)[0] < 4
    # a coordinate that moves on a tiny scale is not mistaken for a constant (ESS is scale-free)
    x = ar1(rng, 0.9, 1, 2000)[0]
    assert dg.ess(1e-17 * x, layout="draws") == pytest.approx(dg.ess(x[:, None], layout="draws, dim")[0], rel=1e-8)
    assert dg.ess(1e-17 * x[:, None], layout="draws, dim")[0] == pytest.approx(dg.geyer_ess_1d(x, "arviz"), rel=1e-8)


def test_ess_shapes_and_summary():
    rng = np.random.default_rng(2)
    samples = np.stack([ar1(rng, 0.5, 3, 2000) for _ in range(4)], axis=-1)  # (3, 2000, 4)
    per_chain = dg.ess(samples)
    assert per_chain.shape == (3, 4)
    assert dg.ess(samples, per_chain=False).shape == (4,)
    assert dg.ess(samples[0], layout="draws, dim").shape == (4,)
    np.testing.assert_allclose(dg.ess(samples[0], layout="draws, dim"), per_chain[0])
    # pooled ESS of 3 independent chains is about the sum of the per-chain ESS
    np.testing.assert_allclose(dg.ess(samples, per_chain=False), per_chain.sum(0), rtol=0.25)
    summary = dg.ess_summary(samples)
    np.testing.assert_allclose(summary["min"], per_chain.min(1))
    np.testing.assert_allclose(summary["max"], per_chain.max(1))
    assert summary["median"].shape == (3,)



def test_a_2d_array_of_draws_needs_its_layout_named():
    """Issue 47: 8 chains of 1,000 draws, shaped (chains, draws), were read as one chain of 1,000
    coordinates (1,000 ESS values around 7). A 2-D array is refused unless its layout is named, and
    each named layout gives the numbers of the 3-D array it stands for."""
    chains = np.random.default_rng(21).standard_normal((8, 1000))
    for function in (dg.ess, dg.ess_summary, dg.monte_carlo_standard_error):
        with pytest.raises(ValueError, match="ambiguous.*layout='draws, dim'.*layout='chains, draws'"):
            function(chains)
    as_3d = chains[..., None]
    by_chain = dg.ess(chains, layout="chains, draws")
    assert by_chain.shape == (8,)
    np.testing.assert_array_equal(by_chain, dg.ess(as_3d)[:, 0])
    assert dg.ess(chains, per_chain=False, layout="chains, draws") == dg.ess(as_3d, per_chain=False)[0]
    assert dg.monte_carlo_standard_error(chains, layout="chains, draws") == dg.monte_carlo_standard_error(as_3d)[0]
    np.testing.assert_array_equal(dg.ess_summary(chains, layout="chains, draws")["min"], dg.ess(as_3d)[:, 0])
    one_chain = chains.T[:, :3]                                   # (1000 draws, 3 coordinates)
    np.testing.assert_array_equal(dg.ess(one_chain, layout="draws, dim"), dg.ess(one_chain[None])[0])
    assert dg.ess(chains[0], layout="draws") == dg.ess(chains[:1, :, None])[0, 0]
    with pytest.raises(ValueError, match="layout='draws, dim' describes a 2-D array"):
        dg.ess(as_3d, layout="draws, dim")
    with pytest.raises(ValueError, match="layout must be one of"):
        dg.ess(chains, layout="draws, chains")
    with pytest.raises(TypeError, match="per_chain"):
        dg.ess(as_3d, per_chain="no")

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


def test_mmd_default_bandwidth_is_the_median_pairwise_distance():
    """bw = median of ||z_i - z_j|| over pairs i < j of the pooled sample (over 1000 evenly spaced
    points when there are more), so the default equals passing that number explicitly."""
    from scipy.spatial.distance import pdist

    rng = np.random.default_rng(14)
    x, y = rng.standard_normal((30, 3)), rng.standard_normal((25, 3)) * 2 + 1
    bw = np.median(pdist(np.vstack([x, y])))
    assert dg._median_bandwidth(np.vstack([x, y])) == pytest.approx(bw, rel=1e-12)
    assert dg.mmd_squared(x, y) == pytest.approx(dg.mmd_squared(x, y, bandwidth=bw), rel=1e-12)
    assert dg.mmd_squared(x, y, unbiased=True) == pytest.approx(dg.mmd_squared(x, y, bandwidth=bw, unbiased=True),
                                                                rel=1e-12)
    # the direct formula with that bandwidth (not bw^2, not the mean distance)
    k = lambda a, b: np.exp(-np.sum((a[:, None] - b[None]) ** 2, -1) / (2 * bw**2))  # noqa: E731
    assert dg.mmd_squared(x, y) == pytest.approx(k(x, x).mean() + k(y, y).mean() - 2 * k(x, y).mean(), rel=1e-10)
    # more than 1000 points: the median over 1000 evenly spaced ones
    z = rng.standard_normal((2500, 2))
    subset = z[np.linspace(0, 2499, 1000).astype(int)]
    assert dg._median_bandwidth(z) == pytest.approx(np.median(pdist(subset)), rel=1e-12)
    with pytest.raises(ValueError, match="bandwidth"):
        dg.mmd_squared(np.zeros((5, 2)), np.zeros((5, 2)))


def test_one_dimensional_samples_are_scalar_draws():
    """A 1-D array of N numbers is N scalar draws, (N, 1), for KSD, FSSD and MMD; never one N-d point."""
    rng = np.random.default_rng(15)
    x = rng.standard_normal(100)
    y = rng.standard_normal(80) + 0.5
    assert dg.ksd(x, -x) == pytest.approx(dg.ksd(x[:, None], -x[:, None]), rel=1e-12)
    # N(0, 1) draws: KSD^2 ~ E k0(x, x) / N = 2 / N (d = 1), so KSD is about 0.14, not 0 (one point)
    assert 0.05 < dg.ksd(x, -x) < 0.3
    for kernel in ("gaussian", "polynomial"):
        assert dg.mmd_squared(x, y, kernel=kernel) == pytest.approx(
            dg.mmd_squared(x[:, None], y[:, None], kernel=kernel), rel=1e-12)
    assert dg.mmd_squared(x, y) > 0.01      # shifted by 0.5: not the 0 of two single points
    v = np.array([-1.0, 0.5])
    assert dg.fssd(x, -x, v) == pytest.approx(dg.fssd(x[:, None], -x[:, None], v[:, None]), rel=1e-12)
    assert dg.initial_test_locations(x, 3, np.random.default_rng(0)).shape == (3, 1)
    # the kernels, evaluated at pairs of points, still read a 1-D array as one point
    a, b = rng.standard_normal((2, 4))
    assert np.ndim(dg.imq_kernel(a, b)) == 0
    with pytest.raises(ValueError, match="scores"):
        dg.ksd(x, -x[:50])


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
