"""Tests of the gsm chapter's samplers (mcmc_lib/methods/gsm.py, generated from book/gsm.md).

- the three lower-bound gradients (gadRWM, gadMALAf, gadMALAe) against autograd, on random
  lower-triangular L, for both branches of min{0, r};
- exactness of gadRWM, gadMALAf and gadMALAe after adaptation stops (moments within Monte Carlo
  error), frozen L and beta, and no gradient/Hessian work after burn-in where none is needed;
- NaN safety: a non-finite gradient at a proposal is a rejection and never reaches L (all three samplers);
- the HMC baseline's step rule (the authors' hmc.m) against its formula and direction;
- bad arguments raise ValueError naming them;
- a planted sign error in the gadMALAf gradient makes the gradient test fail.
"""
import zlib

import autograd
import autograd.numpy as anp
import numpy as np
import pytest

from mcmc_lib import targets as T
from mcmc_lib.harness import run
from mcmc_lib.methods.gsm import (AuthorsHMC, gadMALAe, gadMALAf, gadRWM, hessian_vector_product, mala_exact_bound_gradient,
                                  mala_fast_bound_gradient, rmsprop_step, rwm_bound_gradient, update_beta)

from moments import assert_moments_match
from planted import assert_mutation_caught

DIM = 4
BETA = 1.7


# ------------------------------------------------------------------------------------------------
# A non-Gaussian target written twice: in autograd.numpy (for F) and as the library's target
# ------------------------------------------------------------------------------------------------
def logistic_problem(seed=0, n_data=30):
    rng = np.random.default_rng(seed)
    X = np.hstack([rng.standard_normal((n_data, DIM - 1)), np.ones((n_data, 1))])
    t = (rng.uniform(size=n_data) < 0.5).astype(float)
    target = T.LogisticRegression(X, t, prior_var=1.0)

    def logp(w):
        eta = anp.dot(X, w)
        return anp.sum(t * eta - anp.logaddexp(0.0, eta)) - 0.5 * anp.sum(w**2)

    return target, logp, autograd.grad(logp)


def random_chol(rng, scale):
    """A random lower-triangular L with a positive diagonal."""
    L = np.tril(rng.normal(scale=scale, size=(DIM, DIM)), -1)
    return L + np.diag(rng.uniform(0.5, 1.5, DIM) * scale)


def lower_bound(kind, logp, grad, x, eps, beta, g_y_fixed=None):
    """F(L) for one state and one eps, written directly from the chapter's equations."""
    def F(L):
        if kind == "rwm":
            y = x + anp.dot(L, eps)
            r = logp(y) - logp(x)
        else:
            g_x = grad(x)
            y = x + 0.5 * anp.dot(L, anp.dot(L.T, g_x)) + anp.dot(L, eps)
            g_y = g_y_fixed if kind == "fast" else grad(y)      # the stop-gradient of gadMALAf
            d = 0.5 * anp.dot(L.T, g_x + g_y) + eps
            r = logp(y) - logp(x) - 0.5 * anp.sum(d**2) + 0.5 * anp.sum(eps**2)
        return anp.minimum(0.0, r) + beta * anp.sum(anp.log(anp.diag(L)))
    return F


def cases(kind, n_cases=12):
    """(x, eps, L) triples covering both signs of the log ratio r."""
    target, logp, grad = logistic_problem()
    rng = np.random.default_rng(zlib.crc32(kind.encode()))
    out = []
    for i in range(n_cases):
        scale = [0.05, 0.5, 2.0][i % 3]          # small L: r near 0, often positive; large L: r < 0
        out.append((rng.standard_normal(DIM), rng.standard_normal(DIM), random_chol(rng, scale)))
    return target, logp, grad, out


def log_ratio_of(kind, logp, grad, x, eps, L):
    if kind == "rwm":
        return logp(x + L @ eps) - logp(x)
    g_x = grad(x)
    y = x + 0.5 * L @ (L.T @ g_x) + L @ eps
    d = 0.5 * L.T @ (g_x + grad(y)) + eps
    return logp(y) - logp(x) - 0.5 * d @ d + 0.5 * eps @ eps


@pytest.mark.parametrize("kind", ["rwm", "fast", "exact"])
def test_bound_gradient_matches_autograd(kind):
    target, logp, grad, triples = cases(kind)
    signs = set()
    for x, eps, L in triples:
        g_x = grad(x)
        y = x + L @ eps if kind == "rwm" else x + 0.5 * L @ (L.T @ g_x) + L @ eps
        g_y = grad(y)
        r = log_ratio_of(kind, logp, grad, x, eps, L)
        signs.add(bool(r < 0))
        F = lower_bound(kind, logp, grad, x, eps, BETA, g_y_fixed=g_y)
        expected = np.tril(autograd.grad(F)(L))
        batch = lambda v: np.asarray(v, dtype=float)[None]
        if kind == "rwm":
            ours = rwm_bound_gradient(batch(L), batch(eps), batch(g_y), batch([r])[0], batch([BETA])[0])
        elif kind == "fast":
            ours = mala_fast_bound_gradient(batch(L), batch(eps), batch(g_x), batch(g_y), np.array([r]),
                                            np.array([BETA]))
        else:
            def hessian_vector(v, rows):
                return hessian_vector_product(target, y[None][rows], v)
            ours = mala_exact_bound_gradient(batch(L), batch(eps), batch(g_x), batch(g_y), hessian_vector,
                                             np.array([r]), np.array([BETA]))
        np.testing.assert_allclose(ours[0], expected, rtol=1e-7, atol=1e-9)
        assert np.all(np.triu(ours[0], 1) == 0)
    assert signs == {True, False}, "the cases must cover both branches of min{0, r}"


def test_batched_gradients_equal_per_chain_gradients():
    """Vectorised over chains: each chain's gradient equals the one computed alone."""
    target, logp, grad, triples = cases("exact", n_cases=6)
    x = np.stack([c[0] for c in triples]); eps = np.stack([c[1] for c in triples]); L = np.stack([c[2] for c in triples])
    g_x = target.grad_logp(x)
    y = x + 0.5 * np.einsum("nij,nkj,nk->ni", L, L, g_x) + np.einsum("nij,nj->ni", L, eps)
    g_y = target.grad_logp(y)
    r = np.array([log_ratio_of("exact", logp, grad, *c) for c in triples])
    beta = np.linspace(0.5, 2.0, len(triples))
    hv = lambda v, rows: hessian_vector_product(target, y[rows], v)
    all_chains = mala_exact_bound_gradient(L, eps, g_x, g_y, hv, r, beta)
    for c in range(len(triples)):
        one = mala_exact_bound_gradient(L[c:c + 1], eps[c:c + 1], g_x[c:c + 1], g_y[c:c + 1],
                                        lambda v, rows: hessian_vector_product(target, y[c:c + 1][rows], v),
                                        r[c:c + 1], beta[c:c + 1])
        np.testing.assert_allclose(all_chains[c], one[0], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("make", [lambda: T.Gaussian(np.array([[2.0, 0.6, 0.1], [0.6, 1.0, 0.3], [0.1, 0.3, 0.5]])),
                                  lambda: T.neal_gaussian(3), lambda: logistic_problem()[0]])
def test_hessian_vector_product(make):
    target = make()
    rng = np.random.default_rng(1)
    x, v = rng.standard_normal((2, target.dim)), rng.standard_normal((2, target.dim))
    H = target.hessian(x) if isinstance(target, T.LogisticRegression) else np.stack([target.hessian()] * 2)
    np.testing.assert_allclose(hessian_vector_product(target, x, v), np.einsum("nij,nj->ni", H, v), rtol=1e-10)


def test_hessian_vector_product_of_an_autograd_target():
    precision = np.array([[2.0, 0.5], [0.5, 1.0]])
    target = T.AutogradTarget(lambda x: -0.5 * anp.sum(anp.dot(x, precision) * x, axis=1) + anp.sum(x**3, axis=1), 2)
    rng = np.random.default_rng(2)
    x, v = rng.standard_normal((3, 2)), rng.standard_normal((3, 2))
    expected = -(v @ precision) + 6.0 * x * v            # H = -P + diag(6 x) for each row
    np.testing.assert_allclose(hessian_vector_product(target, x, v), expected, rtol=1e-10)
    assert target.n_grad_evals == 3


def test_rmsprop_step_and_beta_update():
    L = np.tile(np.eye(2), (1, 1, 1)) * 0.5
    S = np.zeros_like(L)
    G = np.array([[[3.0, 0.0], [-4.0, -2.0]]])
    rmsprop_step(L, S, G, 0.1, first=True)
    # First step: S = G^2, so the step is eta G / (1 + |G|)
    np.testing.assert_allclose(L[0], [[0.5 + 0.1 * 3 / 4, 0], [-0.1 * 4 / 5, 0.5 - 0.1 * 2 / 3]])
    np.testing.assert_allclose(S[0], G[0] ** 2)
    rmsprop_step(L, S, np.zeros_like(G), 0.1, first=False)
    np.testing.assert_allclose(S[0], 0.9 * G[0] ** 2)
    L[0, 1, 1] = -5.0
    rmsprop_step(L, S, np.zeros_like(G), 0.1, first=False)
    assert L[0, 1, 1] == 1e-3          # the clamp
    beta = update_beta(np.array([1.0, 1.0, 1e-4]), np.array([True, False, False]), 0.25)
    np.testing.assert_allclose(beta, [1.015, 0.995, 1e-4])


# ------------------------------------------------------------------------------------------------
# Exactness after adaptation stops
# ------------------------------------------------------------------------------------------------
def correlated_target():
    return T.Gaussian(np.array([[1.0, 0.9], [0.9, 1.0]]), mean=np.array([1.0, -2.0]), name="rho=0.9")


def scaled_target():
    return T.Gaussian(np.array([0.3, 1.0, 2.0]) ** 2, mean=np.array([0.5, 0.0, -1.0]), name="sds 0.3..2")


SAMPLERS = {
    "gadRWM": lambda t: gadRWM(t, learning_rate=2e-3),
    "gadMALAf": lambda t: gadMALAf(t, learning_rate=2e-3),
    "gadMALAe": lambda t: gadMALAe(t, learning_rate=2e-3),
}
TARGETS = {"correlated": correlated_target, "scaled": scaled_target}


@pytest.mark.parametrize("target_name", TARGETS)
@pytest.mark.parametrize("sampler_name", SAMPLERS)
def test_exact_after_adaptation_stops(sampler_name, target_name):
    target = TARGETS[target_name]()
    rng = np.random.default_rng(zlib.crc32(f"{sampler_name}-{target_name}".encode()))
    sampler = SAMPLERS[sampler_name](target)
    x0 = target.mean + rng.standard_normal((4, target.dim))
    result = run(sampler, x0, 2000, 8000, rng)
    # Adaptation did something, and was frozen afterwards (the kernel of the sampling phase is fixed).
    assert not np.allclose(result.tuning["L"], sampler.initial_chol)
    assert 0.1 < result.accept_rate.mean() < 0.9
    assert_moments_match(result.samples, target.mean, target.cov)


def test_frozen_after_warmup_and_no_wasted_gradients():
    target = T.neal_gaussian(5)
    rng = np.random.default_rng(3)
    x0 = rng.standard_normal((3, 5))
    for make, grads_per_sampling_iteration in ((gadRWM, 0), (gadMALAf, 1), (gadMALAe, 1)):
        sampler = make(target)
        result = run(sampler, x0, 300, 200, rng)
        assert result.grad_evals["sampling"] == grads_per_sampling_iteration * 200
        L, beta = sampler.L.copy(), sampler.beta.copy()
        state = sampler.init(x0)
        sampler.L, sampler.beta = L.copy(), beta.copy()
        for _ in range(50):
            state, _ = sampler.step(rng, state)
        np.testing.assert_array_equal(sampler.L, L)
        np.testing.assert_array_equal(sampler.beta, beta)


def test_cached_Ltg_is_not_used_for_a_state_it_does_not_belong_to():
    """gadMALAf caches L^T grad of the states it produced; a state given from outside must not use it."""
    target = correlated_target()
    sampler = gadMALAf(target)
    rng = np.random.default_rng(4)
    state = sampler.init(np.zeros((2, 2)))
    sampler._Ltg = np.full((2, 2), 1e6)                      # poison the cache of `state`
    copy = type(state)(state.x.copy(), state.logp.copy(), state.grad.copy())
    sampler.step(rng, copy)                                  # a different array: L^T g is recomputed
    assert np.all(np.abs(sampler._last[4]) < 1e3)          # Ltg_x used for the proposal was recomputed


# ------------------------------------------------------------------------------------------------
# The HMC baseline's step rule (the authors' hmc.m): eps <- eps (1 + 0.01 (a - 0.7) / 0.7)
# ------------------------------------------------------------------------------------------------
def test_authors_hmc_step_rule_formula_and_direction():
    from mcmc_lib.samplers import HMC, StepInfo
    target = correlated_target()
    sampler = AuthorsHMC(target, step_size=0.2, n_leapfrog=5, target_accept=0.7)
    state = sampler.init(np.zeros((2, 2)))
    info = StepInfo(np.array([True, False]), np.array([1.0, 0.0]), np.array([False, False]))
    sampler.adapt(state, info, 0)
    # Formula: an acceptance multiplies eps by 1 + 0.01 * 0.3 / 0.7 (up), a rejection by 1 - 0.01 (down).
    np.testing.assert_allclose(sampler.step_size, [0.2 * (1 + 0.01 * 0.3 / 0.7), 0.2 * 0.99], rtol=1e-14)
    # The library's HMC scales eps^2 by that factor instead: half the rate on eps, so they differ.
    library = HMC(target, step_size=0.2, n_leapfrog=5, target_accept=0.7)
    library.init(np.zeros((2, 2)))
    library.adapt(state, info, 0)
    assert abs(library.step_size[1] - 0.2 * np.sqrt(0.99)) < 1e-14
    assert not np.allclose(library.step_size, sampler.step_size)


def test_authors_hmc_drives_acceptance_to_its_target():
    target = correlated_target()
    rng = np.random.default_rng(11)
    for start in (1e-3, 1.5):        # from far too small and far too large a step
        result = run(AuthorsHMC(target, step_size=start, n_leapfrog=5, target_accept=0.7),
                     target.mean + rng.standard_normal((4, 2)), 3000, 2000, rng)
        assert abs(result.accept_rate.mean() - 0.7) < 0.06
        assert_moments_match(result.samples, target.mean, target.cov)


# ------------------------------------------------------------------------------------------------
# NaN safety: a non-finite gradient at a proposal is a rejection and never reaches L
# ------------------------------------------------------------------------------------------------
class NaNGradientGaussian(T.Target):
    """N(0, I) whose log density is finite everywhere but whose gradient is NaN wherever some
    |x_i| > 4 (a stand-in for an overflowing gradient far in the tails)."""

    name = "N(0, I) with NaN gradients beyond |x_i| > 4"

    def _logp(self, x):
        return -0.5 * np.sum(x**2, axis=1)

    def _grad(self, x):
        return np.where(np.any(np.abs(x) > 4, axis=1, keepdims=True), np.nan, -x)

    def hessian_vector_product(self, x, v):
        return -np.asarray(v, dtype=float)


@pytest.mark.parametrize("make", [gadRWM, gadMALAf, gadMALAe])
def test_nan_gradient_at_a_proposal_never_reaches_L(make):
    target = NaNGradientGaussian(3)
    rng = np.random.default_rng(zlib.crc32(make.__name__.encode()))
    # A wide initial L sends many proposals beyond |x_i| > 4, where the gradient is NaN.
    sampler = make(target, initial_chol=2.5, learning_rate=1e-2)
    result = run(sampler, np.zeros((6, 3)), 1500, 3000, rng)
    nan_at_proposals = int(np.sum(result.n_nonfinite))
    if make is not gadRWM:        # gadMALA rejects such proposals in step (their log ratio is NaN)
        assert nan_at_proposals > 0, "the test must actually meet NaN gradients"
    assert np.all(np.isfinite(sampler.L)), "a NaN gradient at a rejected proposal made L NaN"
    assert np.all(np.isfinite(sampler.beta))
    assert np.all(result.accept_rate > 0.1)
    assert np.all(np.isfinite(result.samples))
    np.testing.assert_allclose(result.samples.reshape(-1, 3).var(axis=0), 1.0, atol=0.25)


def test_nan_gradient_reaches_gadRWM_adapt_and_is_masked():
    """gadRWM needs grad log pi(y) only in adapt (r < 0): a NaN there is masked out of the update."""
    target = NaNGradientGaussian(3)
    sampler = gadRWM(target, initial_chol=2.5)
    rng = np.random.default_rng(5)
    state = sampler.init(np.zeros((200, 3)))
    state, info = sampler.step(rng, state)
    y = sampler._last[0]
    surely_rejectable = (sampler._last[2] < 0) & np.any(np.abs(y) > 4, axis=1)
    assert surely_rejectable.any()                 # some chains do evaluate a NaN gradient in adapt
    sampler.adapt(state, info, 0)
    assert np.all(np.isfinite(sampler.L))


def test_tril_outer_masks_both_factors():
    from mcmc_lib.methods.gsm import tril_outer
    left = np.array([[1.0, 2.0], [np.nan, 1.0]])
    right = np.array([[np.inf, 1.0], [1.0, np.nan]])
    out = tril_outer(left, right, np.array([False, False]))
    np.testing.assert_array_equal(out, 0.0)
    out = tril_outer(np.array([[1.0, 2.0]]), np.array([[3.0, 4.0]]), np.array([True]))
    np.testing.assert_array_equal(out[0], [[3.0, 0.0], [6.0, 8.0]])


# ------------------------------------------------------------------------------------------------
# Bad arguments
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kwargs, name", [
    ({"learning_rate": -1.0}, "learning_rate"), ({"learning_rate": 0.0}, "learning_rate"),
    ({"target_accept": 1.2}, "target_accept"), ({"target_accept": 0.0}, "target_accept"),
    ({"beta0": -1.0}, "beta0"), ({"beta0": [1.0, 2.0]}, "beta0"), ({"beta_rate": 0.0}, "beta_rate"),
    ({"beta_floor": -1e-4}, "beta_floor"), ({"rmsprop_decay": 0.0}, "rmsprop_decay"),
    ({"rmsprop_decay": 1.5}, "rmsprop_decay"), ({"min_diag": 0.0}, "min_diag"),
    ({"initial_chol": -0.1}, "initial_chol"), ({"initial_chol": np.ones((2, 2))}, "initial_chol"),
    ({"initial_chol": np.eye(3)}, "initial_chol"), ({"initial_chol": np.diag([1.0, -1.0])}, "initial_chol"),
])
@pytest.mark.parametrize("make", [gadRWM, gadMALAf, gadMALAe])
def test_bad_arguments_raise_value_error_naming_them(make, kwargs, name):
    with pytest.raises(ValueError, match=name):
        make(correlated_target(), **kwargs)


def test_bad_states_and_unsupported_targets():
    with pytest.raises(ValueError, match="x0"):
        gadMALAf(correlated_target()).init(np.zeros((2, 3)))
    banana = T.TwistedGaussian(2, b=0.1)
    with pytest.raises(ValueError, match="Hessian-vector"):
        gadMALAe(banana)


@pytest.mark.parametrize("make", [gadRWM, gadMALAf, gadMALAe])
def test_tuning_before_a_run_says_to_run_first(make):
    """Issue 47: tuning() (and proposal_cov()) before any run raised AttributeError on None; now a clear error."""
    sampler = make(logistic_problem()[0])
    for what in (sampler.tuning, sampler.proposal_cov):
        with pytest.raises(RuntimeError, match=r"run it first .*init\(x0\)"):
            what()
    sampler.init(np.zeros((2, DIM)))
    assert sampler.tuning()["L"].shape == (2, DIM, DIM) and sampler.proposal_cov().shape == (2, DIM, DIM)


def test_target_evaluations_the_chapter_counts():
    """The chapter's cost per repeat (book/gsm.md, evaluations_at_paper_length): RWM and AM evaluate the log
    density once per iteration (and once at the start) and no gradient; gadRWM the log density once per
    iteration plus gradients during burn-in only; gadMALAf one log density with its gradient per iteration."""
    from mcmc_lib.samplers import RWM, CholeskyAM

    target = logistic_problem()[0]
    n_warmup, n_samples = 300, 200
    for make in (lambda t: RWM(t, step_size=0.3), lambda t: CholeskyAM(t, n_warmup=n_warmup)):
        r = run(make(target), np.zeros((1, DIM)), n_warmup, n_samples, np.random.default_rng(1))
        assert r.logp_evals["warmup"] + r.logp_evals["sampling"] == n_warmup + n_samples + 1
        assert r.grad_evals["warmup"] + r.grad_evals["sampling"] == 0
    r = run(gadRWM(target), np.zeros((1, DIM)), n_warmup, n_samples, np.random.default_rng(2))
    assert r.logp_evals["warmup"] + r.logp_evals["sampling"] == n_warmup + n_samples + 1
    assert 0 < r.grad_evals["warmup"] <= n_warmup and r.grad_evals["sampling"] == 0
    r = run(gadMALAf(target), np.zeros((1, DIM)), n_warmup, n_samples, np.random.default_rng(3))
    assert r.grad_evals["warmup"] + r.grad_evals["sampling"] == n_warmup + n_samples + 1


# ------------------------------------------------------------------------------------------------
# A planted sign error in the gadMALAf gradient must make the gradient test fail
# ------------------------------------------------------------------------------------------------
MUTATION = ("G = tril_outer(0.5 * (grad_y - grad_x), 0.5 * (Ltg_x - Ltg_y) + eps, active)",
            "G = tril_outer(0.5 * (grad_x - grad_y), 0.5 * (Ltg_x - Ltg_y) + eps, active)")


def test_planted_sign_error_in_fast_gradient_is_caught(tmp_path):
    original, mutant = MUTATION
    assert_mutation_caught(tmp_path, "mcmc_lib/methods/gsm.py", original, mutant, "test_gsm.py",
                           "bound_gradient_matches_autograd and fast", timeout=300)
