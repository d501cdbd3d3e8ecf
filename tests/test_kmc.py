"""Kernel HMC (book/kmc.md): the lite and finite score-matching estimators against brute force, the
fitted gradient against a Gaussian's score, the online Cholesky updates against a batch fit,
exactness of KMC and KAMH with adaptation stopped, recycling of pseudo-marginal estimates (a planted
re-estimation is caught), the GP importance-sampling estimator, the ABC simulator, bad input."""
import re

import autograd
import autograd.numpy as anp
import numpy as np
import pytest
from scipy import linalg, stats

from mcmc_lib import targets as T
from mcmc_lib.harness import run
from mcmc_lib.methods import kmc as K
from mcmc_lib.samplers import StepInfo

from moments import assert_moments_match
from planted import assert_mutation_caught, leapfrog_momenta


# --------------------------------------------------------------------------------------------
# estimators against brute-force score matching
# --------------------------------------------------------------------------------------------
def brute_force_J(f, X):
    """(1/N) sum_i sum_l [d^2_l f(x_i) + (d_l f(x_i))^2 / 2] by autograd, point by point."""
    grad, hess = autograd.grad(f), autograd.hessian(f)
    total = 0.0
    for x in X:
        g, H = grad(x), hess(x)
        total += np.sum(np.diag(H)) + 0.5 * np.sum(g**2)
    return total / len(X)


def lite_function(Z, alpha, sigma):
    return lambda x: anp.sum(alpha * anp.exp(-anp.sum((Z - x) ** 2, axis=1) / sigma))


def test_lite_objective_matches_brute_force_score_matching():
    rng = np.random.default_rng(1)
    Z, X = rng.normal(size=(5, 2)), rng.normal(size=(4, 2))
    sigma = 1.3
    for _ in range(3):
        alpha = rng.normal(size=5)
        b, C = K.lite_b_C(Z, X, sigma)
        assert K.lite_objective(alpha, b, C, sigma, len(X)) == pytest.approx(
            brute_force_J(lite_function(Z, alpha, sigma), X), rel=1e-10)


@pytest.mark.parametrize("regulariser", ["code", "paper"])
def test_lite_solution_minimises_the_regularised_objective(regulariser):
    rng = np.random.default_rng(2)
    Z = rng.normal(size=(6, 2))
    sigma, lam = 0.9, 0.05
    alpha = K.fit_lite(Z, sigma, lam, regulariser)
    R = np.eye(6) if regulariser == "paper" else K.gaussian_kernel(Z, Z, sigma) + np.eye(6)

    def penalised(a):  # brute-force J on the basis points plus the ridge (2 lam / (n sigma^2)) a^T R a
        return brute_force_J(lite_function(Z, a, sigma), Z) + 2 * lam / (6 * sigma**2) * a @ R @ a

    gradient = np.array([(penalised(alpha + 1e-5 * e) - penalised(alpha - 1e-5 * e)) / 2e-5 for e in np.eye(6)])
    assert np.max(np.abs(gradient)) < 1e-6
    for _ in range(3):   # and it is a minimum
        assert penalised(alpha + 0.01 * rng.normal(size=6)) > penalised(alpha)


def test_finite_fit_in_place_equals_the_formulas_bit_for_bit():
    """finite_b_C and fit_finite work in place (the arrays are 2 GB at Figure 2's largest cells); their
    values must stay those of the plain formulas exactly, so that results stored before stay valid."""
    rng = np.random.default_rng(11)
    feats = K.RandomFeatures.rational_quadratic(rng, 3, 40)
    X = rng.normal(size=(60, 3))
    b, C = K.finite_b_C(feats, X)
    S = feats.sin_part(X)
    np.testing.assert_array_equal(b, feats.phi(X).mean(axis=0) * feats.c)
    np.testing.assert_array_equal(C, (2.0 / (feats.m * len(X))) * (S.T @ S) * (feats.omega.T @ feats.omega))
    np.testing.assert_array_equal(K.fit_finite(feats, X, 0.1),
                                  linalg.solve(C + 0.1 * np.eye(feats.m), b, assume_a="pos"))


def test_finite_objective_and_solution_match_brute_force():
    rng = np.random.default_rng(3)
    feats = K.RandomFeatures.gaussian(rng, 2, 7, sigma=1.5)
    X = rng.normal(size=(5, 2))
    b, C = K.finite_b_C(feats, X)
    omega, u, m = feats.omega, feats.phases, feats.m

    def f_of(theta):
        return lambda x: anp.sum(theta * anp.sqrt(2.0 / m) * anp.cos(anp.dot(x, omega) + u))

    theta = rng.normal(size=7)
    assert K.finite_objective(theta, b, C) == pytest.approx(brute_force_J(f_of(theta), X), rel=1e-10)
    lam = 0.1
    theta_hat = K.fit_finite(feats, X, lam)

    def penalised(t):
        return brute_force_J(f_of(t), X) + 0.5 * lam * t @ t

    gradient = np.array([(penalised(theta_hat + 1e-5 * e) - penalised(theta_hat - 1e-5 * e)) / 2e-5 for e in np.eye(7)])
    assert np.max(np.abs(gradient)) < 1e-6


def test_gradients_match_autograd_and_random_features_approximate_the_kernel():
    rng = np.random.default_rng(4)
    Z, x = rng.normal(size=(8, 3)), rng.normal(size=(4, 3))
    alpha, sigma = rng.normal(size=8), 2.0
    g = autograd.elementwise_grad(lambda y: anp.sum(
        anp.exp(-anp.sum((y[:, None, :] - Z[None]) ** 2, axis=2) / sigma) * alpha, axis=1))(x)
    np.testing.assert_allclose(K.lite_grad(x, Z, alpha, sigma), g, rtol=1e-10, atol=1e-12)
    feats = K.RandomFeatures.gaussian(rng, 3, 20, sigma)
    theta = rng.normal(size=20)
    fd = np.stack([(feats.phi(x + 1e-6 * e) @ theta - feats.phi(x - 1e-6 * e) @ theta) / 2e-6 for e in np.eye(3)], 1)
    np.testing.assert_allclose(K.finite_grad(x, feats, theta), fd, rtol=1e-6, atol=1e-8)
    # the frequency scale (eq-kmc-frequency-scale): phi(x).phi(y) -> exp(-|x - y|^2 / sigma)
    big = K.RandomFeatures.gaussian(np.random.default_rng(5), 3, 200_000, sigma)
    a, c = np.zeros((1, 3)), np.full((1, 3), 0.6)
    assert (big.phi(a) @ big.phi(c).T).item() == pytest.approx(np.exp(-3 * 0.36 / sigma), abs=0.01)
    # the surrogate classes compute the same gradients, batched over chains
    lite = K.LiteSurrogate(1, 3, 8, sigma, 0.1)
    lite.Z[0], lite.alpha[0] = Z, alpha
    np.testing.assert_allclose(lite.grad(x[:1]), K.lite_grad(x[:1], Z, alpha, sigma), rtol=1e-12)
    fin = K.FiniteSurrogate([feats], 0.1)
    fin.theta[0] = theta
    np.testing.assert_allclose(fin.grad(x[:1]), K.finite_grad(x[:1], feats, theta), rtol=1e-12)


def test_fitted_gradients_recover_a_gaussian_score():
    rng = np.random.default_rng(6)
    cov = np.array([[1.0, 0.6], [0.6, 2.0]])
    target = T.Gaussian(cov)
    X = target.sample(rng, 600)
    inner = X[target.mahalanobis_sq(X) < 2.0][:50]           # points in the bulk
    true = target.grad_logp(inner)
    sigma = 2 * K.median_sq_distance(X[:300])
    g_lite = K.lite_grad(inner, X[:300], K.fit_lite(X[:300], sigma, 1e-3), sigma)
    feats = K.RandomFeatures.gaussian(rng, 2, 300, sigma)
    g_fin = K.finite_grad(inner, feats, K.fit_finite(feats, X, 1e-3))
    for g in (g_lite, g_fin):
        rel = np.linalg.norm(g - true, axis=1) / np.linalg.norm(true, axis=1).clip(0.5)
        assert np.median(rel) < 0.25, np.median(rel)
        cosine = np.sum(g * true, axis=1) / np.linalg.norm(g, axis=1) / np.linalg.norm(true, axis=1)
        assert np.median(cosine) > 0.95


def test_cv_objective_tracks_the_held_out_score_error():
    """The held-out score-matching objective is (1/2) E|grad f - grad log pi|^2 minus a constant
    (1 for the 2-d standard normal): CV chooses a fit whose gradient error on new points is small."""
    rng = np.random.default_rng(7)
    X = rng.normal(size=(150, 2))
    Z, Y = X[:120], X[120:]
    held_out = {}
    for sigma, lam in [(0.5, 1e-2), (5.0, 1.0), (20.0, 1.0)]:
        alpha = K.fit_lite(Z, sigma, lam)
        held_out[sigma] = K.lite_objective(alpha, *K.lite_b_C(Z, Y, sigma), sigma, len(Y))
        error = np.mean(np.sum((K.lite_grad(Y, Z, alpha, sigma) + Y) ** 2, axis=1))
        if sigma > 1:      # (the identity holds in expectation; an overfitted f is too noisy for 30 points)
            assert held_out[sigma] == pytest.approx(0.5 * error - 1.0, abs=0.35)
    assert held_out[0.5] > held_out[5.0] + 1 and held_out[0.5] > held_out[20.0] + 1
    objective = lambda s, l: K.cv_objective_lite(X, s, l, np.random.default_rng(0))  # noqa: E731
    sigma, lam, best = K.select_sigma_lambda(objective, np.linspace(-1, 4, 4), np.log([1e-2, 1.0, 10.0]),
                                             n_nelder_mead=5)
    assert best <= objective(0.5, 1e-2) and best < -0.7
    new = rng.normal(size=(500, 2))
    error = np.mean(np.sum((K.lite_grad(new, X, K.fit_lite(X, sigma, lam), sigma) + new) ** 2, axis=1))
    assert error < 0.6      # against 2.0 for a zero gradient


# --------------------------------------------------------------------------------------------
# online rank-d updates
# --------------------------------------------------------------------------------------------
def test_cholesky_rank_one_update():
    rng = np.random.default_rng(8)
    A = rng.normal(size=(6, 6))
    A = A @ A.T + np.eye(6)
    v = rng.normal(size=6)
    L = K.cholesky_rank_one_update(np.linalg.cholesky(A), v.copy())
    np.testing.assert_allclose(L, np.linalg.cholesky(A + np.outer(v, v)), atol=1e-12)


def test_online_finite_estimator_equals_batch_fit():
    rng = np.random.default_rng(9)
    feats = K.RandomFeatures.gaussian(rng, 3, 12, 2.0)
    X = rng.normal(size=(9, 3))
    lam = 0.3
    est = K.OnlineFiniteEstimator(feats, lam)
    for x in X:
        est.update(x)
    n = len(X)
    b_all, _ = K.finite_b_C(feats, X)
    _, C_rest = K.finite_b_C(feats, X[1:])
    system, b = est.system()
    np.testing.assert_allclose(system, (lam * np.eye(12) + (n - 1) * C_rest) / n, atol=1e-12)
    np.testing.assert_allclose(b, b_all, atol=1e-12)
    np.testing.assert_allclose(est.theta, np.linalg.solve(system, b_all), rtol=1e-9)


# --------------------------------------------------------------------------------------------
# exactness (adaptation stopped)
# --------------------------------------------------------------------------------------------
def gaussian_and_fitted_lite(n_chains, seed=10):
    rng = np.random.default_rng(seed)
    target = T.Gaussian(np.array([[1.0, 0.5], [0.5, 1.5]]))
    data = target.sample(rng, 40)      # a poor surrogate (40 points) must not matter for exactness
    surrogate = K.LiteSurrogate(n_chains, 2, 40, 2.0, 0.1)
    for c in range(n_chains):
        surrogate.set_basis(c, data)
    return target, surrogate, rng


@pytest.mark.parametrize("kind", ["lite", "hmc"])
def test_kmc_is_exact_on_a_gaussian(kind):
    target, surrogate, rng = gaussian_and_fitted_lite(8)
    if kind == "hmc":
        surrogate = K.TrueGradient(target)
    sampler = K.KMC(target, surrogate, (0.2, 0.5), (3, 12), adapt_rng=np.random.default_rng(1))
    result = run(sampler, target.sample(rng, 8), n_warmup=0, n_samples=2500, rng=rng)
    assert 0.3 < result.accept_rate.mean() < 1.0
    assert_moments_match(result.samples, target.mean, target.cov)


def test_kamh_with_hastings_correction_is_exact():
    rng = np.random.default_rng(11)
    target = T.TwistedGaussian(2, 0.1, 4.0)
    basis = target.sample(rng, 100)
    sampler = K.KAMH(target, gamma2=0.2, nu2=1.0, n_basis=100, basis=basis, adapt_rng=np.random.default_rng(2))
    result = run(sampler, target.sample(rng, 8), n_warmup=0, n_samples=4000, rng=rng)
    assert_moments_match(result.samples, target.mean, target.cov)


def test_adaptive_kmc_learns_and_keeps_running():
    rng = np.random.default_rng(12)
    target = T.Gaussian(np.array([1.0, 4.0]))
    surrogate = K.LiteSurrogate(2, 2, 60, 1.0, 0.1, min_history=20,
                                learn_grid=(np.array([0.0, 1.5]), np.log([1e-2])))
    sampler = K.KMC(target, surrogate, (0.1, 0.3), (2, 8), adapt_rng=np.random.default_rng(3),
                    adapt_step_size=True, learn_at=(40,))
    out = K.run_chains(sampler, np.zeros((2, 2)), 120, rng)
    assert np.all(surrogate.n_fits >= 1) and np.all(np.isfinite(out["samples"]))
    assert sampler.log_range.shape == (2, 2) and not np.allclose(sampler.log_range, sampler.initial_log_range)


# --------------------------------------------------------------------------------------------
# the adaptation rules and the acceptance probability against their formulas (deterministic)
# --------------------------------------------------------------------------------------------
def test_kmc_step_size_adaptation_formula_and_direction():
    """log [eps_min, eps_max] <- log [eps_min, eps_max] + a_t (alpha - alpha*), a_t = 1/sqrt(t + 1):
    the range grows when the acceptance probability is above its target and shrinks below it."""
    target = T.Gaussian(np.array([1.0, 4.0]))
    sampler = K.KMC(target, K.TrueGradient(target), (0.1, 0.3), (2, 5), adapt_surrogate=False,
                    adapt_step_size=True, target_accept=0.6)
    state = sampler.init(np.zeros((3, 2)))
    prob = np.array([0.9, 0.2, 0.6])
    sampler.adapt(state, StepInfo(prob > 0.5, prob, np.zeros(3, dtype=bool)), 3)
    a_t = 1 / np.sqrt(4.0)
    expected = np.log([0.1, 0.3])[None, :] + a_t * (prob - 0.6)[:, None]
    np.testing.assert_allclose(sampler.log_range, expected, rtol=1e-14)
    ranges = sampler.tuning()["step_size_range"]
    assert np.all(ranges[0] > [0.1, 0.3]) and np.all(ranges[1] < [0.1, 0.3])
    np.testing.assert_allclose(ranges[2], [0.1, 0.3], rtol=1e-14)


def test_kamh_scale_adaptation_formula_and_direction():
    """nu^2 <- nu^2 exp(a_t (alpha - alpha*)), alpha* = 0.234 by default."""
    target = T.Gaussian(np.array([1.0, 4.0]))
    sampler = K.KAMH(target, gamma2=0.2, nu2=1.0, n_basis=10, adapt_basis=False)
    state = sampler.init(np.zeros((2, 2)))
    prob = np.array([0.5, 0.1])
    sampler.adapt(state, StepInfo(prob > 0.3, prob, np.zeros(2, dtype=bool)), 8)
    np.testing.assert_allclose(sampler.nu2, np.exp((prob - 0.234) / 3.0), rtol=1e-14)
    assert sampler.nu2[0] > 1.0 > sampler.nu2[1]


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("kind", ["hmc", "lite"])
def test_kmc_accept_prob_formula(kind, seed):
    """alpha = min(1, exp(H(x, p) - H(x*, p*))) with the true log density and H's kinetic energy
    |p|^2/2, the momenta recovered from the positions at which the surrogate gradient was taken."""
    target, surrogate, rng = gaussian_and_fitted_lite(40)
    inner = surrogate if kind == "lite" else K.TrueGradient(target)
    positions = []

    class Recording:
        def grad(self, x):
            positions.append(x.copy())
            return inner.grad(x)

    h, n_steps = 0.35, 4
    sampler = K.KMC(target, Recording(), (h, h), (n_steps, n_steps))
    rng = np.random.default_rng(seed)
    state = sampler.init(target.sample(rng, 40) * 1.5)
    new_state, info = sampler.step(rng, state)
    assert len(positions) == n_steps + 1                       # x_0, ..., x_L
    p0, p_end = leapfrog_momenta(positions, [inner.grad(positions[0]), inner.grad(positions[-1])],
                                 np.full(40, h))
    y = positions[-1]
    log_ratio = (target.logp(y) - 0.5 * np.sum(p_end**2, axis=1)) - (state.logp - 0.5 * np.sum(p0**2, axis=1))
    expected = np.exp(np.minimum(log_ratio, 0.0))
    assert 0 < np.mean(expected < 1) < 1
    np.testing.assert_allclose(info.accept_prob, expected, rtol=1e-8, atol=1e-10)
    np.testing.assert_array_equal(new_state.x, np.where(info.accepted[:, None], y, state.x))


# --------------------------------------------------------------------------------------------
# pseudo-marginal: the current estimate is recycled
# --------------------------------------------------------------------------------------------
class NoisyGaussian(T.Target):
    """N(0, I) in 2-d observed through an unbiased estimate pi(x) W, log W ~ N(-s^2/2, s^2), with
    noise that grows away from the mode, s(x) = 0.3 + |x_1|."""

    def __init__(self, rng):
        super().__init__(2)
        self.rng = rng

    def _logp(self, x):
        s = 0.3 + np.abs(x[:, 0])
        return -0.5 * np.sum(x**2, axis=1) + s * self.rng.standard_normal(len(x)) - 0.5 * s**2


def pseudo_marginal_samples():
    rng = np.random.default_rng(13)
    target = NoisyGaussian(np.random.default_rng(14))
    data = rng.standard_normal((200, 2))
    surrogate = K.LiteSurrogate(16, 2, 200, 2.0, 0.1)
    for c in range(16):
        surrogate.set_basis(c, data)
    sampler = K.KMC(target, surrogate, (0.2, 0.4), (2, 6), adapt_rng=np.random.default_rng(4))
    result = run(sampler, 0.3 * rng.standard_normal((16, 2)), n_warmup=200, n_samples=3000, rng=rng)
    return result.samples


def test_pseudo_marginal_kmc_recycles_and_is_exact():
    assert_moments_match(pseudo_marginal_samples(), np.zeros(2), np.eye(2))


def assert_estimate_recycled(seed, plant_re_estimation=None):
    """One KMC step on the noisy target: the estimate of log pi at the current states is the one the
    state carries. The target is evaluated only at the proposals (one row per chain), the log ratio
    uses the carried estimate, and a rejected chain keeps it."""
    rng = np.random.default_rng(seed)
    target = NoisyGaussian(np.random.default_rng(seed + 100))
    sampler = K.KMC(target, K.TrueGradient(T.Gaussian(np.ones(2))), (0.3, 0.3), (3, 3))
    if plant_re_estimation is not None:    # the planted bug: re-estimate pi(x_t) at every iteration (MCWM)
        plant_re_estimation.setattr(sampler, "_current_logp", lambda state: target.logp(state.x))
    state = sampler.init(rng.standard_normal((30, 2)))
    before = target.n_logp_evals
    new, info = sampler.step(rng, state)
    assert target.n_logp_evals - before == 30
    np.testing.assert_array_equal(new.logp[~info.accepted], state.logp[~info.accepted])


@pytest.mark.parametrize("seed", range(5))
def test_current_estimate_is_recycled(seed):
    assert_estimate_recycled(seed)


@pytest.mark.parametrize("seed", range(5))
def test_planted_re_estimation_is_caught(monkeypatch, seed):
    with pytest.raises(AssertionError):
        assert_estimate_recycled(seed, monkeypatch)


def test_planted_kinetic_sign_bug_is_caught(tmp_path):
    """Flip the kinetic-energy sign in a copy of the generated module: the acceptance-probability
    formula test must fail (for every seed; the exactness test catches it too, statistically)."""
    assert_mutation_caught(tmp_path, "mcmc_lib/methods/kmc.py",
                           "- 0.5 * np.sum(p**2, axis=1) + 0.5 * np.sum(p0**2, axis=1))",
                           "+ 0.5 * np.sum(p**2, axis=1) - 0.5 * np.sum(p0**2, axis=1))",
                           "test_kmc.py", "kmc_accept_prob_formula")


# --------------------------------------------------------------------------------------------
# the pseudo-marginal targets
# --------------------------------------------------------------------------------------------
def test_gp_importance_estimate_is_unbiased_on_a_tiny_problem():
    X = np.array([[0.0], [0.7]])
    y = np.array([1.0, -1.0])
    target = K.GPClassificationPosterior(X, y, np.random.default_rng(15), n_importance=5, jitter=1e-3)
    theta = np.array([0.3])
    Kmat = target.kernel(theta)
    # brute force: p(y | theta) = E_{f ~ N(0, K)} prod sigmoid(y f), by 2-d Gauss-Hermite quadrature
    nodes, weights = np.polynomial.hermite_e.hermegauss(80)
    L = np.linalg.cholesky(Kmat)
    F = np.stack(np.meshgrid(nodes, nodes, indexing="ij"), -1).reshape(-1, 2) @ L.T
    W = np.outer(weights, weights).ravel() / (2 * np.pi)
    exact = np.sum(W * np.prod(1 / (1 + np.exp(-y * F)), axis=1))
    rng = np.random.default_rng(16)
    est = np.exp([target.log_marginal_estimate(theta, rng) for _ in range(4000)])
    assert abs(est.mean() - exact) < 4 * est.std() / np.sqrt(len(est))
    assert est.std() > 0          # it is an estimate, not the exact value


def test_skew_normal_simulator_moments():
    model = K.SkewNormalABC(np.zeros(3), np.random.default_rng(17), alpha=np.array([2.0, -1.0, 0.5]), n_obs=1)
    theta = np.array([[1.0, 2.0, 3.0]])
    s = model.summaries(theta, model.draw_noise(np.random.default_rng(18), (1, 200_000)))[0]
    delta = model.delta
    mean = theta[0] + np.sqrt(2 / np.pi) * delta
    cov = np.eye(3) - 2 / np.pi * np.outer(delta, delta)
    np.testing.assert_allclose(s.mean(axis=0), mean, atol=0.01)
    np.testing.assert_allclose(np.cov(s.T), cov, atol=0.015)
    # the first coordinate's density 2 phi(z) Phi(alpha_1* z), alpha_1* = delta_1 / sqrt(1 - delta_1^2)
    a1 = delta[0] / np.sqrt(1 - delta[0] ** 2)
    assert stats.kstest(s[:, 0] - 1.0, stats.skewnorm(a1).cdf).pvalue > 1e-4


def test_abc_likelihood_estimate_and_habc_run():
    model = K.SkewNormalABC(np.full(2, 1.0), np.random.default_rng(19), alpha=np.full(2, 3.0))
    logp = model.logp(np.array([[1.0, 1.0], [30.0, 30.0]]))
    assert np.isfinite(logp[0]) and logp[1] < logp[0] - 1000     # log-sum-exp: no underflow to -inf
    habc = K.HABC(model, (0.01, 0.1), 5)
    before = model.n_simulations
    out = K.run_chains(habc, np.zeros((3, 2)), 4, np.random.default_rng(20), adapt=False)
    assert np.all(np.isfinite(out["samples"]))
    # init estimates the 3 starting points once (10 simulations each); then 2 (L + 1) S per proposal
    assert model.n_simulations - before == 3 * 10 + 4 * 3 * 2 * (5 + 1) * 10
    with pytest.raises(TypeError, match="model must be an ABC model.*lacks summaries, s_obs, eps, prior_var"):
        K.HABC(T.Gaussian(np.ones(2)), (0.01, 0.1), 5)                 # a target without simulations


def test_median_heuristic_ignores_repeated_points():
    # a history with repeated states (rejections): the median over distinct pairs, never 0
    Z = np.array([[0.0, 0.0]] * 6 + [[1.0, 0.0], [0.0, 2.0]])
    assert K.median_sq_distance(Z) == 4.0          # six 1s, six 4s and one 5 among the distinct pairs
    assert K.median_sq_distance(np.zeros((3, 2))) == 1.0


# --------------------------------------------------------------------------------------------
# bad input and non-finite densities
# --------------------------------------------------------------------------------------------
def test_bad_arguments_are_refused():
    rng = np.random.default_rng(21)
    Z = rng.normal(size=(5, 2))
    with pytest.raises(ValueError, match="sigma"):
        K.fit_lite(Z, -1.0, 0.1)
    with pytest.raises(ValueError, match="lam"):
        K.fit_lite(Z, 1.0, 0.0)
    with pytest.raises(ValueError, match="regulariser"):
        K.fit_lite(Z, 1.0, 0.1, regulariser="ridge")
    with pytest.raises(ValueError, match="Z"):
        K.fit_lite(np.array([1.0, np.nan]).reshape(1, 2), 1.0, 0.1)
    target = T.Gaussian(np.eye(2))
    with pytest.raises(ValueError, match="step_size_range"):
        K.KMC(target, K.TrueGradient(target), (0.5, 0.1), (1, 5))
    with pytest.raises(ValueError, match="n_steps_range"):
        K.KMC(target, K.TrueGradient(target), (0.1, 0.5), (5, 1))
    with pytest.raises(ValueError, match="y"):
        K.GPClassificationPosterior(Z, np.array([0, 1, 1, 0, 1.0]), rng)
    with pytest.raises(ValueError, match="x"):
        K.OnlineFiniteEstimator(K.RandomFeatures.gaussian(rng, 2, 3, 1.0), 0.1).update(np.ones(3))


def test_non_finite_densities_are_rejections():
    class HalfPlane(T.Target):
        def _logp(self, x):
            return np.where(x[:, 0] > 0, -0.5 * np.sum(x**2, axis=1), np.nan)

    rng = np.random.default_rng(22)
    target = HalfPlane(2)
    surrogate = K.LiteSurrogate(4, 2, 30, 1.0, 0.1)
    for c in range(4):                                # fitted to a Gaussian that straddles the edge x_1 = 0
        surrogate.set_basis(c, 0.5 + rng.standard_normal((30, 2)))
    sampler = K.KMC(target, surrogate, (0.3, 0.6), (1, 3))
    result = run(sampler, np.full((4, 2), 0.5), n_warmup=0, n_samples=500, rng=rng)
    assert np.all(result.samples[..., 0] > 0) and np.all(np.isfinite(result.logp))
    assert result.n_nonfinite.sum() > 0


def test_surrogate_fitted_to_a_narrow_history_is_steep_and_rejects_more():
    """The Glass diagnosis (sec-kmc-glass-diagnosis) at small size: with the same (sigma, lambda), chosen by CV
    on benchmark samples as for the oracle surrogate, a lite surrogate fitted to a history drawn from a narrower
    region (a chain that moved in small steps) has steeper gradients at benchmark points than one fitted to
    benchmark samples, and its trajectories, started at benchmark points, are accepted less often at the same
    step size: the loop in which the step-size adaptation then shrinks the steps."""
    rng = np.random.default_rng(16)
    d, n, width = 9, 200, 0.3                       # Glass's dimension; the history spans 0.3 of the benchmark
    target = T.Gaussian(np.eye(d))
    bench, history = rng.standard_normal((n, d)), width * rng.standard_normal((n, d))
    points = rng.standard_normal((100, d))          # held-out benchmark points
    sigmas = 2.0 ** np.arange(-2, 8)
    sigma = sigmas[int(np.argmin([K.cv_objective_lite(bench, s, 1e-3, np.random.default_rng(1)) for s in sigmas]))]
    lam = 1e-3
    alpha_bench, alpha_narrow = K.fit_lite(bench, sigma, lam), K.fit_lite(history, sigma, lam)
    g_bench = K.lite_grad(points, bench, alpha_bench, sigma)
    g_narrow = K.lite_grad(points, history, alpha_narrow, sigma)
    ratio = np.linalg.norm(g_narrow, axis=1) / np.linalg.norm(g_bench, axis=1)
    assert np.median(ratio) > 3.0, np.median(ratio)      # the exact scores differ by 1 / width^2 = 11
    assert np.mean(ratio > 1.0) > 0.9
    # the same trajectories (start, momentum, steps) under each surrogate, accepted with the true target
    p0 = rng.standard_normal((100, d))
    steps, n_steps = np.full(100, 0.3), np.full(100, 10)
    accept = {}
    for name, Z, alpha in (("bench", bench, alpha_bench), ("narrow", history, alpha_narrow)):
        q, p = K.surrogate_leapfrog(lambda x: K.lite_grad(x, Z, alpha, sigma), points, p0, steps, n_steps)
        log_ratio = (target.logp(q) - 0.5 * np.sum(p**2, axis=1)) - (target.logp(points) - 0.5 * np.sum(p0**2, axis=1))
        accept[name] = np.minimum(1.0, np.exp(log_ratio))
    assert accept["narrow"].mean() < accept["bench"].mean() - 0.3, accept


# --------------------------------------------------------------------------------------------
# issue 47: a surrogate never fitted, a chain count that does not match, a range that is not a pair
# --------------------------------------------------------------------------------------------
def test_a_surrogate_never_fitted_is_refused_not_run_as_kmc():
    """Without warm-up nothing fits a LiteSurrogate: its gradient is zero and KMC would be a random walk
    labelled KMC. The run is refused, naming the chains; with adaptation off it is refused at init."""
    target = T.Gaussian(np.eye(2))
    rng = np.random.default_rng(23)
    sampler = K.KMC(target, K.LiteSurrogate(2, 2, 30, 1.0, 0.1), (0.2, 0.4), (1, 3))
    with pytest.raises(ValueError, match=r"never fitted for chains \[0, 1\] and adapt\(\) was not called after the "
                                         r"last step: KMC would run as a random walk under KMC's name"):
        run(sampler, np.zeros((2, 2)), n_warmup=0, n_samples=10, rng=rng)
    with pytest.raises(ValueError, match="adapt_surrogate=False"):
        K.KMC(target, K.LiteSurrogate(2, 2, 30, 1.0, 0.1), (0.2, 0.4), (1, 3), adapt_surrogate=False).init(np.zeros((2, 2)))
    finite = K.FiniteSurrogate([K.RandomFeatures.gaussian(rng, 2, 10, 1.0)], 0.1)
    with pytest.raises(ValueError, match="FiniteSurrogate"):
        run(K.KMC(target, finite, (0.2, 0.4), (1, 3)), np.zeros((1, 2)), n_warmup=0, n_samples=5, rng=rng)
    # a warm-up that fits it: the run goes on after the warm-up, adaptation stopped
    surrogate = K.LiteSurrogate(2, 2, 30, 1.0, 0.1, min_history=5)
    sampler = K.KMC(target, surrogate, (0.2, 0.4), (1, 3), adapt_rng=np.random.default_rng(1))
    result = run(sampler, np.zeros((2, 2)), n_warmup=60, n_samples=20, rng=rng)
    assert np.all(surrogate.n_fits >= 1) and result.samples.shape[1] == 20
    # a surrogate fitted before the run needs no warm-up (and HMC's true gradient is never "unfitted")
    for c in range(2):
        surrogate.set_basis(c, rng.standard_normal((30, 2)))
    run(K.KMC(target, surrogate, (0.2, 0.4), (1, 3)), np.zeros((2, 2)), n_warmup=0, n_samples=5, rng=rng)
    run(K.KMC(target, K.TrueGradient(target), (0.2, 0.4), (1, 3)), np.zeros((3, 2)), n_warmup=0, n_samples=5, rng=rng)


def test_a_surrogate_built_for_other_chains_is_refused():
    target = T.Gaussian(np.eye(2))
    sampler = K.KMC(target, K.LiteSurrogate(2, 2, 30, 1.0, 0.1), (0.2, 0.4), (1, 3))
    with pytest.raises(ValueError, match=r"x0 must have one row per chain: the LiteSurrogate was built for n_chains = 2, "
                                         r"x0 has 3 rows"):
        sampler.init(np.zeros((3, 2)))
    finite = K.FiniteSurrogate([K.RandomFeatures.gaussian(np.random.default_rng(1), 2, 5, 1.0)] * 2, 0.1)
    with pytest.raises(ValueError, match="FiniteSurrogate was built for n_chains = 2, x0 has 1 rows"):
        K.KMC(target, finite, (0.2, 0.4), (1, 3)).init(np.zeros((1, 2)))


@pytest.mark.parametrize("bad", [0.1, (0.1, 0.2, 0.3), (0.0, 0.1), (np.inf, 0.1), ("a", 0.1), (True, 0.1), (0.5, 0.1)])
def test_step_size_range_must_be_a_pair_of_positive_numbers(bad):
    match = (r"step_size_range must be a pair \(eps_min, eps_max\) of positive numbers, the first at most the "
             rf"second, got {re.escape(repr(bad))} \(one fixed value: give it twice\)")
    target = T.Gaussian(np.eye(2))
    with pytest.raises(ValueError, match=match):
        K.KMC(target, K.TrueGradient(target), bad, (1, 5))
    with pytest.raises(ValueError, match=match):
        K.HABC(K.SkewNormalABC(np.zeros(2), np.random.default_rng(1)), bad, 5)


def test_n_steps_range_must_be_a_pair_of_positive_ints():
    target = T.Gaussian(np.eye(2))
    with pytest.raises(ValueError, match=r"n_steps_range must be a pair \(L_min, L_max\) of positive ints, .*got 5"):
        K.KMC(target, K.TrueGradient(target), (0.1, 0.2), 5)
    for bad in ((0, 5), (1.5, 5), (5, 1)):
        with pytest.raises(ValueError, match="n_steps_range"):
            K.KMC(target, K.TrueGradient(target), (0.1, 0.2), bad)
    assert K.range_pair(np.array([2, 7]), "n_steps_range", integer=True) == (2, 7)


# --------------------------------------------------------------------------------------------
# cross-validation on a chain's history: blocked folds
# --------------------------------------------------------------------------------------------
def test_cv_folds_blocked_and_random():
    blocked = K.cv_folds(11, 3, blocked=True)
    assert [f.tolist() for f in blocked] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10]]
    random = K.cv_folds(11, 3, np.random.default_rng(0))
    assert sorted(np.concatenate(random).tolist()) == list(range(11)) and random[0].tolist() != [0, 1, 2, 3]
    with pytest.raises(ValueError, match="n must be at least n_folds"):
        K.cv_folds(3, 5, blocked=True)


def test_blocked_folds_do_not_reward_a_kernel_that_interpolates_an_autocorrelated_history():
    """A slowly mixing chain's history (an AR(1) path with autocorrelation 0.99 whose stationary law is N(0, I)):
    random folds put each state's neighbours on both sides of the split, so the held-out objective favours a
    narrow kernel that interpolates between them; blocked folds score each block against the others, and the
    kernel they choose is wider."""
    rng = np.random.default_rng(24)
    rho, n = 0.99, 400
    x = np.zeros((n, 2))
    for t in range(1, n):
        x[t] = rho * x[t - 1] + np.sqrt(1 - rho**2) * rng.standard_normal(2)
    sigmas = 2.0 ** np.arange(-6, 6)

    def chosen(blocked):
        values = [K.cv_objective_lite(x, s, 1e-3, np.random.default_rng(1), blocked=blocked) for s in sigmas]
        return sigmas[int(np.argmin(values))]

    assert chosen(blocked=True) >= 8 * chosen(blocked=False), (chosen(True), chosen(False))


def test_lite_surrogate_learns_with_blocked_folds_in_time_order(monkeypatch):
    seen = []
    real = K.cv_objective_lite

    def spy(X, sigma, lam, rng, n_folds=5, regulariser="code", blocked=False):
        seen.append((X.copy(), blocked))
        return real(X, sigma, lam, rng, n_folds, regulariser, blocked)

    monkeypatch.setattr(K, "cv_objective_lite", spy)
    history = np.cumsum(np.random.default_rng(25).standard_normal((300, 2)), axis=0)   # in time order
    surrogate = K.LiteSurrogate(1, 2, 50, 1.0, 0.1, learn_size=60, learn_grid=(np.array([0.0, 2.0]), np.log([0.1])))
    surrogate.learn(0, history, np.random.default_rng(2))
    data, blocked = seen[0]
    assert blocked and len(data) == 60 and surrogate.n_fits[0] == 1
    rows = [int(np.flatnonzero(np.all(history == row, axis=1))[0]) for row in data]
    assert rows == sorted(rows) and rows[0] == 0 and rows[-1] == 299      # evenly through the whole history


# --------------------------------------------------------------------------------------------
# the random-walk baseline's scale rule
# --------------------------------------------------------------------------------------------
def test_random_walk_scale_rule_and_exactness():
    """log s2 <- log s2 + a_t (alpha - 0.234), as KAMH's nu^2; with the rule off it is plain random-walk
    Metropolis and samples its target."""
    target = T.Gaussian(np.array([[1.0, 0.3], [0.3, 2.0]]))
    sampler = K.RandomWalk(target, 1.0)
    state = sampler.init(np.zeros((2, 2)))
    prob = np.array([0.5, 0.1])
    sampler.adapt(state, StepInfo(prob > 0.3, prob, np.zeros(2, dtype=bool)), 8)
    np.testing.assert_allclose(sampler.s2, np.exp((prob - 0.234) / 3.0), rtol=1e-14)
    with pytest.raises(ValueError, match="s2"):
        K.RandomWalk(target, -1.0)
    rng = np.random.default_rng(26)
    result = run(K.RandomWalk(target, 2.0, adapt_scale=False), target.sample(rng, 8), n_warmup=0, n_samples=4000,
                 rng=rng)
    assert_moments_match(result.samples, target.mean, target.cov)
