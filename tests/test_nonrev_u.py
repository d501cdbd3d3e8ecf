"""Non-reversible updates of u (book/nonrev_u.md): v stays uniform, (x, v) keeps its joint
distribution, the samplers are exact, the rejection rate is unchanged, bad arguments are refused,
and planted bugs are caught."""

import copy

import numpy as np
import pytest
from scipy import stats

from mcmc_lib import targets as T
from mcmc_lib.harness import run
from mcmc_lib.methods.nonrev_u import (BNNConditional, NonrevMALA, NonrevRWM, PersistentLangevin,
                                       StepScaledTarget, advance_v, fbm_net_stepsizes, rescale_v, run_groups,
                                       wrap_v)

from moments import assert_moments_match, correlated_target
from planted import RecordingTarget, assert_mutation_caught, leapfrog_momenta

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


def test_a_zero_v_stays_a_finite_state():
    """v = 0 exactly (v0 = 0.5 with delta = 0.5 and no noise cycles 0.5, -1, -0.5, 0): u = 0 accepts any
    finite ratio, and the rescaled v must stay 0, not 0 x exp(800) = NaN."""
    with np.errstate(all="raise"):
        out = rescale_v(np.array([0.0, 0.3]), np.array([-800.0, -0.1]), np.array([True, True]))
    np.testing.assert_allclose(out, [0.0, 0.3 * np.exp(0.1)])


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


# ------------------------------------------------------------------------------------------------
# One decision against its formula (deterministic, for several seeds)
# ------------------------------------------------------------------------------------------------
def expected_decision(v0, delta, log_ratio):
    """v <- v0 + delta wrapped into [-1, 1); accept iff |v| < pi(x*)/pi(x); on acceptance v <- v pi(x)/pi(x*)."""
    v = np.mod(v0 + delta + 1.0, 2.0) - 1.0
    accepted = np.abs(v) < np.exp(log_ratio)
    return np.where(accepted, v * np.exp(-np.where(accepted, log_ratio, 0.0)), v), accepted


@pytest.mark.parametrize("seed", range(5))
def test_decision_formula_RWM(seed):
    inner = T.Gaussian(np.array([1.0, 2.0]), mean=np.array([0.5, -1.0]))
    target = RecordingTarget(inner)
    rng = np.random.default_rng(seed)
    n = 60
    v0 = rng.uniform(-1, 1, n)
    sampler = NonrevRWM(target, 1.5, delta=0.45)
    state = sampler.init(inner.mean + rng.standard_normal((n, 2)), v0=v0)
    n_init = len(target.calls)
    new, info = sampler.step(rng, state)
    (y,) = target.calls[n_init:]
    v, accepted = expected_decision(v0, 0.45, inner.logp(y) - inner.logp(state.x))
    assert np.any(v0 + 0.45 >= 1) and 0 < accepted.mean() < 1 and np.any(accepted & (v != v0 + 0.45))
    np.testing.assert_array_equal(info.accepted, accepted)
    np.testing.assert_allclose(new.v, v, rtol=1e-12)
    np.testing.assert_array_equal(new.x, np.where(accepted[:, None], y, state.x))


@pytest.mark.parametrize("seed", range(5))
def test_decision_formula_PL(seed):
    """Persistent Langevin: the Hamiltonian ratio of one leapfrog step (momenta recovered from the
    positions), the same decision on v, and the momentum kept on acceptance, reversed on rejection."""
    inner = T.Gaussian(np.array([1.0, 2.0]), mean=np.array([0.5, -1.0]))
    target = RecordingTarget(inner)
    rng = np.random.default_rng(seed)
    n, h = 60, 1.1
    v0 = rng.uniform(-1, 1, n)
    sampler = PersistentLangevin(target, h, alpha=0.7, delta=0.45)
    state = sampler.init(inner.mean + rng.standard_normal((n, 2)), v0=v0, p0=rng.standard_normal((n, 2)))
    n_init = len(target.calls)
    new, info = sampler.step(rng, state)
    (y,) = target.calls[n_init:]
    p, p_star = leapfrog_momenta([state.x, y], [inner.grad_logp(state.x), inner.grad_logp(y)], np.full(n, h))
    log_ratio = inner.logp(y) - 0.5 * np.sum(p_star**2, 1) - inner.logp(state.x) + 0.5 * np.sum(p**2, 1)
    v, accepted = expected_decision(v0, 0.45, log_ratio)
    assert 0 < accepted.mean() < 1
    np.testing.assert_array_equal(info.accepted, accepted)
    np.testing.assert_allclose(new.v, v, rtol=1e-9)
    np.testing.assert_allclose(new.p, np.where(accepted[:, None], p_star, -p), rtol=1e-9, atol=1e-12)


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


@pytest.mark.parametrize("make,pattern", [
    (lambda t: NonrevRWM(t, 0.5, delta=0.0), r"delta must not be 0 when noise is 0.*not ergodic"),
    (lambda t: NonrevRWM(t, 0.5, delta=0.0, noise=0.0), r"delta=0.0, noise=0.0"),
    (lambda t: NonrevMALA(t, 0.5, delta=np.array([0.1, 0.0, 0.2])), r"\(chains \[1\]\).*not ergodic"),
    (lambda t: NonrevRWM(t, 0.5, delta=np.array([0.0, 0.3]), noise=np.array([0.0, 0.0])), r"chains \[0\]"),
    (lambda t: PersistentLangevin(t, 0.1, alpha=0.9, delta=0.0), r"delta must not be 0 when noise is 0"),
    (lambda t: PersistentLangevin(t, 0.1, alpha=1.0, delta=0.1), r"alpha must be below 1, got 1.0.*not ergodic"),
    (lambda t: PersistentLangevin(t, 0.1, alpha=1.0), r"alpha must be below 1"),
    (lambda t: PersistentLangevin(t, 0.1, alpha=np.array([0.5, 1.0]), delta=0.1), r"alpha must be below 1"),
])
def test_non_ergodic_settings_are_refused_with_the_reason(make, pattern):
    """Issue 47: settings under which a chain cannot reach the whole distribution are refused, naming the
    argument, its value and why (delta 0 without noise freezes the slice level; alpha 1 never refreshes p)."""
    with pytest.raises(ValueError, match=pattern):
        make(T.Gaussian(np.ones(2)))


def test_frozen_slice_level_is_what_the_refusal_says():
    """Why delta = 0 with no noise is refused: run the update without the check (delta 0, noise 0, set past
    __init__) and the slice level |v| pi(x) never changes, so log pi never drops below its starting level."""
    rng = np.random.default_rng(13)
    target = T.Gaussian(np.ones(3))
    sampler = NonrevRWM(target, 0.8, delta=0.1)
    state = sampler.init(np.zeros((4, 3)), v0=np.array([0.3, -0.6, 0.9, 0.05]))
    sampler.delta = np.zeros(4)                        # the refused setting, forced for the demonstration
    level = np.log(np.abs(state.v)) + state.logp
    lowest = np.full(4, np.inf)
    for _ in range(500):
        state, info = sampler.step(rng, state)
        np.testing.assert_allclose(np.log(np.abs(state.v)) + state.logp, level, atol=1e-9)
        lowest = np.minimum(lowest, state.logp)
    assert np.all(lowest >= level - 1e-9)             # pi(x) > s: never below the starting slice level
    # the standard method, from the same start, goes far below it
    free = NonrevRWM(target, 0.8)
    x = free.init(np.zeros((4, 3))).x
    state = free.init(x)
    low = np.full(4, np.inf)
    for _ in range(500):
        state, _ = free.step(rng, state)
        low = np.minimum(low, state.logp)
    assert np.all(low < level.max())


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


MUTATIONS = {      # caught by the deterministic decision tests (and by the joint-law tests)
    "no-rescaling-on-acceptance": ("return rescale_v(v, log_ratio, accepted), accepted, prob, nonfinite",
                                   "return v, accepted, prob, nonfinite", "decision_formula_RWM"),
    "no-wrapping": ("return wrap_v(v + delta)", "return np.clip(v + delta, -1.0, 1.0)", "decision_formula_RWM"),
    "langevin-no-reversal": ("np.where(keep, p_star, -p))", "np.where(keep, p_star, p))", "decision_formula_PL"),
    # the network's per-parameter step sizes (section 6)
    "rescale-forgets-the-parameters": ("        return x / self.scale\n", "        return z\n",
                                       "rescale_keeps or gibbs_hyperparameter"),
    "fbm-steps-without-likelihood-term": ("d_bh = (1.0 / sd_bh**2 + n_cases * hidden)[:, None] * ones",
                                          "d_bh = (1.0 / sd_bh**2 + 0 * hidden)[:, None] * ones", "fbm_stepsizes_match"),
    "steps-not-per-parameter": ("return logp, self.scale * grad", "return logp, self.scale.mean() * grad",
                                "per_parameter_steps"),
}


@pytest.mark.parametrize("name", MUTATIONS)
def test_planted_bug_is_caught(name, tmp_path):
    original, mutant, selection = MUTATIONS[name]
    assert_mutation_caught(tmp_path, "mcmc_lib/methods/nonrev_u.py", original, mutant, "test_nonrev_u.py", selection)


# --- The neural network of section 6: FBM's per-parameter step sizes, the network, the Gibbs update ---------

def test_fbm_stepsizes_match_the_formula_on_known_inputs():
    """Eq. (eq-nru-fbm-steps) worked by hand: 2 cases, 2 inputs with sums of squares 10 and 4, 3 hidden
    units, tau_in = (4, 1), tau_out = 4 (sigma_o^2 / 4 = 1/16), prior sds 2 for the biases."""
    X = np.array([[1.0, 2.0], [3.0, 0.0]])
    eps = fbm_net_stepsizes(X, np.array([[4.0, 1.0]]), np.array([4.0]), n_hidden=3, sd_bh=2.0, sd_bo=2.0)
    d = np.array([4 + 10 / 16] * 3 + [1 + 4 / 16] * 3      # W, input-major: tau_i + S_i sigma_o^2 / 4
                 + [0.25 + 2 / 16] * 3                       # hidden biases: 1/2^2 + N sigma_o^2 / 4
                 + [4 + 2 / 4] * 3                           # output weights: tau_o + N / 4
                 + [0.25 + 2 / 4])                           # output bias: 1/2^2 + N / 4
    np.testing.assert_allclose(eps, 1 / np.sqrt(d[None, :]), rtol=1e-14)


def test_fbm_stepsizes_per_chain_and_bad_input():
    rng = np.random.default_rng(10)
    X = rng.standard_normal((7, 3))
    tau_in, tau_out = rng.gamma(2.0, 1.0, (4, 3)), rng.gamma(2.0, 1.0, 4)
    eps = fbm_net_stepsizes(X, tau_in, tau_out, n_hidden=2, sd_bh=1.0, sd_bo=3.0)
    assert eps.shape == (4, 3 * 2 + 2 + 2 + 1)
    for c in range(4):                                 # each chain uses only its own precisions
        np.testing.assert_allclose(eps[c], fbm_net_stepsizes(X, tau_in[c:c + 1], tau_out[c:c + 1], 2, 1.0, 3.0)[0])
    with pytest.raises(ValueError, match="tau_in"):
        fbm_net_stepsizes(X, -tau_in, tau_out, 2, 1.0, 3.0)
    with pytest.raises(ValueError, match="tau_in"):
        fbm_net_stepsizes(X, tau_in[:, :2], tau_out, 2, 1.0, 3.0)


def test_one_persistent_langevin_step_uses_per_parameter_steps():
    """One update of persistent Langevin on the step-scaled target is FBM's leapfrog with step eta * eps_k
    per parameter, eq. (eq-nru-scaled), worked by hand on a Gaussian with known gradient. The partial
    refresh is replayed from a copy of the generator, and v0 = -delta makes u = 0, so the proposal is
    accepted."""
    rng = np.random.default_rng(11)
    prec = np.array([1.0, 25.0, 400.0])
    base = T.Gaussian(1.0 / prec)                      # grad log pi(x) = -prec * x
    eps, eta, alpha = np.array([[1.0, 0.2, 0.05], [0.8, 0.15, 0.04]]), 0.3, 0.6
    theta, p0 = rng.standard_normal((2, 3)), rng.standard_normal((2, 3))
    target = StepScaledTarget(base, eps)
    sampler = PersistentLangevin(target, eta, alpha=alpha, delta=0.25)
    state = sampler.init(theta / eps, v0=-0.25, p0=p0)
    replay = copy.deepcopy(rng)
    new, info = sampler.step(rng, state)
    assert info.accepted.all() and np.all(sampler.last_u == 0.0)
    p = alpha * p0 + np.sqrt(1 - alpha**2) * replay.standard_normal((2, 3))     # step 1, eq. (eq-nru-horowitz)
    p_half = p + 0.5 * eta * eps * (-prec * theta)
    theta_new = theta + eta * eps * p_half
    p_new = p_half + 0.5 * eta * eps * (-prec * theta_new)
    np.testing.assert_allclose(target.to_x(new.x), theta_new, rtol=1e-12)
    np.testing.assert_allclose(new.p, p_new, rtol=1e-12)
    np.testing.assert_allclose(new.logp, base.logp(theta_new), rtol=1e-12)


def test_rescale_keeps_the_parameters():
    rng = np.random.default_rng(12)
    base = T.Gaussian(np.ones(4))
    old, new = rng.uniform(0.1, 2.0, (3, 4)), rng.uniform(0.1, 2.0, (3, 4))
    target = StepScaledTarget(base, old)
    z = rng.standard_normal((3, 4))
    z_new = target.rescale(z, new)
    np.testing.assert_allclose(new * z_new, old * z, rtol=1e-14)
    np.testing.assert_array_equal(target.scale, new)
    with pytest.raises(ValueError, match="scale"):
        target.rescale(z, -new)


def test_network_gradient_matches_finite_differences():
    rng = np.random.default_rng(13)
    X, y = rng.standard_normal((20, 3)), (rng.uniform(size=20) < 0.5).astype(float)
    model = BNNConditional(X, y, n_chains=2, n_hidden=4)
    model.tau_in, model.tau_out = rng.gamma(2.0, 1.0, (2, 3)), rng.gamma(2.0, 1.0, 2)
    theta = rng.standard_normal((2, model.dim))
    logp, grad = model.logp_and_grad(theta)
    h = 1e-6
    numeric = np.array([(model.logp(theta + h * e) - model.logp(theta - h * e)) / (2 * h)
                        for e in np.eye(model.dim)]).T
    np.testing.assert_allclose(grad, numeric, rtol=1e-6, atol=1e-6)
    W, bh, wo, bo = model.unpack(theta)          # and the log density itself, written out for chain 0
    f = np.tanh(X @ W[0] + bh[0]) @ wo[0] + bo[0]
    direct = (np.sum(y * f - np.log1p(np.exp(f))) - 0.5 * np.sum(model.tau_in[0][:, None] * W[0] ** 2)
              - 0.5 * np.sum(bh[0] ** 2) / 4 - 0.5 * model.tau_out[0] * np.sum(wo[0] ** 2) - 0.5 * bo[0] ** 2 / 4)
    np.testing.assert_allclose(logp[0], direct, rtol=1e-12)


def test_network_gibbs_draws_the_gamma_conditional():
    """tau_i | W ~ Gamma(0.5 + n_hidden / 2, rate 0.02 + sum_j W_ij^2 / 2): 100,000 draws given one W."""
    rng = np.random.default_rng(14)
    n = 100_000
    model = BNNConditional(np.ones((3, 2)), np.array([0.0, 1.0, 1.0]), n_chains=n, n_hidden=5)
    theta = np.tile(rng.standard_normal(model.dim), (n, 1))
    model.gibbs(rng, theta)
    W = model.unpack(theta[:1])[0][0]
    for i in range(2):
        rate = 0.02 + 0.5 * np.sum(W[i] ** 2)
        assert stats.kstest(model.tau_in[:, i], stats.gamma(0.5 + 2.5, scale=1 / rate).cdf).pvalue > P_MIN
    rate_out = 0.5 + 0.5 * np.sum(model.unpack(theta[:1])[2] ** 2)
    assert stats.kstest(model.tau_out, stats.gamma(0.5 + 2.5, scale=1 / rate_out).cdf).pvalue > P_MIN


class _Hierarchy(T.Target):
    """theta | tau ~ N(0, I / tau), one tau per chain: the conditional that per-parameter steps tau^(-1/2) suit."""

    def __init__(self, n_chains, dim):
        super().__init__(dim)
        self.tau = np.ones(n_chains)

    def _logp_and_grad(self, x):
        return -0.5 * self.tau * np.sum(x**2, axis=1), -self.tau[:, None] * x

    def _logp(self, x):
        return self._logp_and_grad(x)[0]

    def _grad(self, x):
        return self._logp_and_grad(x)[1]


def test_scaled_steps_with_gibbs_hyperparameter_are_exact():
    """tau ~ Gamma(3, rate 3), theta | tau ~ N(0, I/tau): Gibbs for tau between persistent-Langevin updates
    with non-reversible u whose step sizes tau^(-1/2) change with every Gibbs update (theta, p and v kept,
    z recomputed), as in the network experiment. From exact joint draws, the joint law must be kept:
    tau ~ Gamma(3, rate 3) and theta sqrt(tau) ~ N(0, I) independent of tau."""
    rng = np.random.default_rng(15)
    n, dim, a, b = 100_000, 3, 3.0, 3.0
    model = _Hierarchy(n, dim)
    model.tau = rng.gamma(a, 1 / b, n)
    theta = rng.standard_normal((n, dim)) / np.sqrt(model.tau)[:, None]
    scale = lambda: np.repeat(model.tau[:, None] ** -0.5, dim, axis=1)
    target = StepScaledTarget(model, scale())
    sampler = PersistentLangevin(target, 0.9, alpha=0.9, delta=0.05)
    state = sampler.init(theta / target.scale, v0=rng.uniform(-1, 1, n), p0=rng.standard_normal((n, dim)))
    for t in range(12):
        state, info = sampler.step(rng, state)
        if t % 3 == 2:
            x = target.to_x(state.x)
            model.tau = rng.gamma(a + dim / 2, 1 / (b + 0.5 * np.sum(x**2, axis=1)))
            z = target.rescale(state.x, scale())
            state = state._replace(x=z, **dict(zip(("logp", "grad"), target.logp_and_grad(z))))
    assert 0.05 < 1 - info.accepted.mean() < 0.5
    x = target.to_x(state.x)
    assert stats.kstest(model.tau, stats.gamma(a, scale=1 / b).cdf).pvalue > P_MIN
    standardised = x[:, 0] * np.sqrt(model.tau)
    assert stats.kstest(standardised, stats.norm.cdf).pvalue > P_MIN
    assert joint_chi2_pvalue(standardised, 2 * stats.gamma(a, scale=1 / b).cdf(model.tau) - 1) > P_MIN
