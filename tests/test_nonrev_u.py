"""Non-reversible updates of u (book/nonrev_u.md): v stays uniform, (x, v) keeps its joint
distribution, the samplers are exact, the rejection rate is unchanged, bad arguments are refused,
and planted bugs are caught."""

import numpy as np
import pytest
from scipy import stats

from mcmc_lib import targets as T
from mcmc_lib.harness import run
from mcmc_lib.methods.nonrev_u import (NonrevMALA, NonrevRWM, PersistentLangevin, advance_v, rescale_v,
                                       run_groups, wrap_v)

from moments import assert_moments_match, correlated_target
from planted import assert_mutation_caught

P_MIN = 1e-4      # KS / chi-square p-values below this fail (each test is a single, fixed-seed check)


def test_wrap_maps_into_the_interval():
    v = np.array([-3.5, -1.2, -1.0, 0.3, 0.99, 1.0, 1.7, 5.25])
    w = wrap_v(v)
    assert np.all((w >= -1) & (w < 1))
    np.testing.assert_allclose(np.mod(w - v, 2.0) * (np.abs(np.mod(w - v, 2.0) - 2) > 1e-12), 0.0, atol=1e-12)


@pytest.mark.parametrize("delta,noise", [(0.3, 0.0), (0.03, 0.2), (-0.7, 0.0), (0.0, 1.0)])
def test_wrapped_translation_keeps_v_uniform(delta, noise):
    rng = np.random.default_rng([1, int(1000 * abs(delta)), int(10 * noise)])
    n = 100_000
    v = rng.uniform(-1, 1, n)
    for _ in range(7):
        v = advance_v(rng, v, np.full(n, delta), np.full(n, noise))
    assert np.all((v >= -1) & (v < 1))
    assert stats.kstest(v, stats.uniform(-1, 2).cdf).pvalue > P_MIN


def test_noise_one_makes_u_independent_of_the_old_v():
    rng = np.random.default_rng(2)
    n = 100_000
    v = rng.uniform(-1, 1, n)
    w = advance_v(rng, v, np.full(n, 0.3), np.ones(n))
    assert abs(stats.spearmanr(v, w).statistic) < 4 / np.sqrt(n)


def test_rescaling_keeps_the_slice_level():
    v = np.array([0.5, -0.2, 0.9])
    log_ratio = np.array([0.0, np.log(0.5), np.log(2.0)])
    out = rescale_v(v, log_ratio, np.array([True, True, False]))
    np.testing.assert_allclose(out, [0.5, -0.4, 0.9])


NORMAL_EDGES = stats.norm.ppf(np.linspace(0, 1, 7)[1:-1])


def joint_chi2_pvalue(x, v, v_is_normal=False):
    """Chi-square test that x ~ N(0, 1) and v ~ U(-1, 1) (or N(0, 1)) are independent: 6 x 6 bins of
    equal probability under the claimed joint distribution."""
    xb = np.digitize(x, NORMAL_EDGES)
    vb = np.digitize(v, NORMAL_EDGES) if v_is_normal else np.minimum(((v + 1) / 2 * 6).astype(int), 5)
    counts = np.bincount(xb * 6 + vb, minlength=36)
    return stats.chisquare(counts).pvalue


@pytest.mark.parametrize("sampler_name", ["RWM", "MALA", "PL"])
def test_joint_distribution_of_x_and_v_is_invariant(sampler_name):
    """Start 200,000 chains of a 1-d N(0, 1) target exactly at (x, v) ~ N(0, 1) x U(-1, 1) and take a few
    steps: (x, v) must keep that joint law. Without the rescaling of v on acceptance it does not."""
    rng = np.random.default_rng([3, len(sampler_name)])
    n = 200_000
    target = T.Gaussian(np.ones(1))
    sampler = {"RWM": lambda: NonrevRWM(target, 2.5, delta=0.1),
               "MALA": lambda: NonrevMALA(target, 1.6, delta=0.1),
               "PL": lambda: PersistentLangevin(target, 1.2, alpha=0.8, delta=0.1)}[sampler_name]()
    x0, v0 = rng.standard_normal((n, 1)), rng.uniform(-1, 1, n)
    if sampler_name == "PL":
        state = sampler.init(x0, v0=v0, p0=rng.standard_normal((n, 1)))
    else:
        state = sampler.init(x0, v0=v0)
    for _ in range(4):
        state, info = sampler.step(rng, state)
    assert 0.2 < info.accepted.mean() < 0.9
    x, v = state.x[:, 0], state.v
    assert stats.kstest(v, stats.uniform(-1, 2).cdf).pvalue > P_MIN
    assert stats.kstest(x, stats.norm.cdf).pvalue > P_MIN
    assert joint_chi2_pvalue(x, v) > P_MIN
    if sampler_name == "PL":      # the momentum too: (x, p, v) ~ N(0, 1) x N(0, 1) x U(-1, 1)
        assert joint_chi2_pvalue(x, state.p[:, 0], v_is_normal=True) > P_MIN
        assert joint_chi2_pvalue(state.p[:, 0], v) > P_MIN


EXACT = {
    "RWM": lambda t: NonrevRWM(t, 1.2, delta=0.2),
    "RWM-noise": lambda t: NonrevRWM(t, 1.2, delta=0.05, noise=0.1),
    "MALA": lambda t: NonrevMALA(t, 0.6, delta=0.5),
    "PL": lambda t: PersistentLangevin(t, 0.2, alpha=0.9, delta=0.05),
    "PL-standard": lambda t: PersistentLangevin(t, 0.2, alpha=0.9),
}


@pytest.mark.parametrize("name", EXACT)
def test_nonreversible_u_samplers_are_exact(name):
    target = correlated_target()
    rng = np.random.default_rng([4, len(name), ord(name[-1])])
    x0 = target.mean + rng.standard_normal((4, 2))
    result = run(EXACT[name](target), x0, 1000, 8000, rng)
    assert 0.2 < result.accept_rate.mean() < 0.99
    assert_moments_match(result.samples, target.mean, target.cov)


def test_rejection_rate_equals_that_of_the_standard_method():
    """Same rejection rate with u drawn afresh and with u updated non-reversibly (delta 0.3), 40-d
    Gaussian, step 1.8 / sqrt(40) as in the paper; chains independent, so the se is from their spread."""
    target = T.Gaussian(np.ones(40))
    rng = np.random.default_rng(5)
    n = 200
    delta = np.repeat([0.0, 0.3], n)
    noise = np.repeat([1.0, 0.0], n)
    sampler = NonrevRWM(target, 1.8 / np.sqrt(40), delta=delta, noise=noise)
    state = sampler.init(target.sample(rng, 2 * n), v0=rng.uniform(-1, 1, 2 * n))
    _, _, rejection = run_groups(sampler, state, rng, 10, 40, lambda s: s.logp, burn_groups=1)
    standard, nonrev = rejection[:n], rejection[n:]
    se = np.hypot(standard.std(ddof=1), nonrev.std(ddof=1)) / np.sqrt(n)
    assert abs(standard.mean() - nonrev.mean()) < 4 * se
    assert abs(standard.mean() - 0.6266) < 0.02      # the paper's 0.626588


def test_gibbs_refresh_keeps_v_and_p():
    target = T.Gaussian(np.ones(3))
    rng = np.random.default_rng(6)
    sampler = PersistentLangevin(target, 0.3, alpha=0.9, delta=0.1)
    state = sampler.init(rng.standard_normal((5, 3)), v0=rng.uniform(-1, 1, 5), p0=rng.standard_normal((5, 3)))
    state, _ = sampler.step(rng, state)
    target.mean = np.ones(3)            # "another variable changed": the conditional target moved
    refreshed = sampler.refresh(state)
    np.testing.assert_array_equal(refreshed.v, state.v)
    np.testing.assert_array_equal(refreshed.p, state.p)
    np.testing.assert_allclose(refreshed.logp, target.logp(state.x))


@pytest.mark.parametrize("make,name", [
    (lambda t: NonrevRWM(t, -0.1, delta=0.1), "step_size"),
    (lambda t: NonrevRWM(t, 0.1, delta=1.5), "delta"),
    (lambda t: NonrevRWM(t, 0.1, delta=np.nan), "delta"),
    (lambda t: NonrevRWM(t, 0.1, delta=0.1, noise=-0.1), "noise"),
    (lambda t: NonrevMALA(t, 0.1, delta=0.1, noise=2.0), "noise"),
    (lambda t: PersistentLangevin(t, 0.1, alpha=1.2), "alpha"),
    (lambda t: PersistentLangevin(t, 0.1, alpha=-0.1, delta=0.1), "alpha"),
])
def test_bad_arguments_raise(make, name):
    with pytest.raises(ValueError, match=name):
        make(T.Gaussian(np.ones(2)))


def test_bad_init_arguments_raise():
    target = T.Gaussian(np.ones(2))
    with pytest.raises(ValueError, match="v0"):
        NonrevRWM(target, 0.1, delta=0.1).init(np.zeros((3, 2)), v0=1.5)
    with pytest.raises(ValueError, match="step_size"):
        NonrevRWM(target, np.array([0.1, 0.2]), delta=0.1).init(np.zeros((3, 2)))
    with pytest.raises(ValueError, match="delta"):
        NonrevRWM(target, 0.1, delta=np.array([0.1, 0.2])).init(np.zeros((3, 2)))
    with pytest.raises(ValueError, match="p0"):
        PersistentLangevin(target, 0.1, alpha=0.5).init(np.zeros((3, 2)), p0=np.zeros((2, 2)))
    with pytest.raises(ValueError, match="x0"):
        NonrevRWM(target, 0.1).init(np.zeros((3, 4)))


MUTATIONS = {
    "no-rescaling-on-acceptance": ("return rescale_v(v, log_ratio, accepted), accepted, prob, nonfinite",
                                   "return v, accepted, prob, nonfinite", "joint"),
    "no-wrapping": ("return wrap_v(v + delta)", "return np.clip(v + delta, -1.0, 1.0)", "joint or uniform"),
    "langevin-no-reversal": ("np.where(keep, p_star, -p))", "np.where(keep, p_star, p))", "joint and PL"),
}


@pytest.mark.parametrize("name", MUTATIONS)
def test_planted_bug_is_caught(name, tmp_path):
    original, mutant, selection = MUTATIONS[name]
    assert_mutation_caught(tmp_path, "mcmc_lib/methods/nonrev_u.py", original, mutant, "test_nonrev_u.py", selection)
