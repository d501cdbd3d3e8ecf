"""Tests of the MAMBA chapter's method (mcmc_lib.methods.mamba, generated from book/mamba.md).

Successive halving against synthetic arms with known rewards; minibatches without replacement;
unbiased gradient estimators; the SG samplers' variance bias shrinking with the step size on a
conjugate Gaussian model; a diverging arm pruned; the PMF and network gradients against autograd;
ECE/MCE by hand; bad arguments; planted bugs caught.
"""
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import autograd
import autograd.numpy as anp
import numpy as np
import pytest

from mcmc_lib import targets
from mcmc_lib.methods import mamba as mb
from mcmc_lib.reference import find_mode

ROOT = Path(__file__).resolve().parent.parent


# ---------------------------------------------------------------------------------------------
# Successive halving
# ---------------------------------------------------------------------------------------------
def test_n_rounds_integer_arithmetic():
    assert mb.n_rounds(243, 3) == 5          # int(log(243)/log(3)) would give 4
    assert mb.n_rounds(56, 3) == 3
    assert mb.n_rounds(112, 3) == 4
    assert mb.n_rounds(2, 3) == 1
    assert mb.n_rounds(8, 2) == 3


@pytest.mark.parametrize("seed", range(10))
def test_successive_halving_finds_best_arm(seed):
    rng = np.random.default_rng([7, seed])
    n_arms = 27
    means = rng.permutation(np.linspace(1.0, 3.6, n_arms))   # gap 0.1 between neighbours
    best = int(np.argmin(means))

    def pull(arms, budget, round_):
        # a metric whose noise shrinks like 1/sqrt(budget), as a Monte Carlo estimate's does
        return means[arms] + 0.1 / np.sqrt(budget) * rng.standard_normal(len(arms))

    result = mb.successive_halving(n_arms, pull, budget=26.0, eta=3)
    assert result.best == best
    assert [len(r["arms"]) for r in result.rounds] == [27, 9, 3]
    budgets = [r["budget"] for r in result.rounds]
    assert np.allclose(budgets, [2.0, 6.0, 18.0])             # r0 = 26 / 13, r_i = 3^i r0
    assert np.isclose(sum(budgets), 26.0)                     # a surviving arm runs for R


def test_successive_halving_nonfinite_metric_ranks_last():
    def pull(arms, budget, round_):
        return np.where(arms == 0, np.nan, arms.astype(float))   # arm 0 "diverged"
    result = mb.successive_halving(9, pull, budget=4.0, eta=3)
    assert result.best == 1
    assert 0 not in result.rounds[1]["arms"]


# ---------------------------------------------------------------------------------------------
# Minibatches and gradient estimators
# ---------------------------------------------------------------------------------------------
def _stream_batches(n_data, batch_size, n_chains, n_batches, seed=3):
    rng = np.random.default_rng(seed)
    stream = mb.MinibatchStream(n_data, batch_size, n_chains)
    return np.stack([stream.next(rng) for _ in range(n_batches)], axis=1), stream   # (c, steps, n)


@pytest.mark.parametrize("n_data,batch_size", [(50, 3), (50, 20), (50, 50), (60, 20), (10_000, 30),
                                               (200, 199), (7, 4)])
def test_minibatch_stream_uses_every_row_once_per_epoch_without_replacement(n_data, batch_size):
    """Each chain's minibatches, end to end, are consecutive permutations of the rows (one per epoch),
    and no minibatch repeats a row, not even one that straddles two epochs."""
    n_epochs = 5
    n_batches = -(-n_epochs * n_data // batch_size)
    idx, stream = _stream_batches(n_data, batch_size, 40, n_batches)
    assert idx.shape == (40, n_batches, batch_size)
    assert np.all((idx >= 0) & (idx < n_data))
    flat = idx.reshape(40, -1)[:, :n_epochs * n_data].reshape(40, n_epochs, n_data)
    assert np.all(np.sort(flat, axis=2) == np.arange(n_data)), "an epoch does not use every row exactly once"
    srt = np.sort(idx, axis=2)
    assert not np.any(srt[..., 1:] == srt[..., :-1]), "a minibatch holds a repeated index"
    assert stream.epochs >= n_epochs
    if n_data < 1000:     # the epochs' permutations differ (fresh per epoch, and per chain)
        assert not np.all(flat[:, 0] == flat[:, 1]) and not np.all(flat[0] == flat[1])


@pytest.mark.parametrize("n_data,batch_size,step", [(50, 20, 2), (50, 20, 3), (200, 200, 1), (60, 7, 8)])
def test_every_minibatch_is_a_uniform_sample(n_data, batch_size, step):
    """The minibatch at a given step (for (50, 20) step 2 straddles the first two epochs, step 3 is the
    first whole one of the second) holds each row with probability n/N, over independent chains."""
    idx, _ = _stream_batches(n_data, batch_size, 4000, step + 1, seed=[3, step])
    counts = np.bincount(idx[:, step].ravel(), minlength=n_data)
    expected = 4000 * batch_size / n_data
    sd = np.sqrt(expected * (1 - batch_size / n_data)) + 1e-9
    assert np.max(np.abs(counts - expected)) < 5 * sd


def _small_logistic(n=300, d=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    t = (rng.uniform(size=n) < 1 / (1 + np.exp(-X @ np.array([1.0, -0.5, 0.3])[:d]))).astype(float)
    return targets.LogisticRegression(X, t, prior_var=10.0)


@pytest.mark.parametrize("cv", [False, True])
def test_gradient_estimators_unbiased(cv):
    target = _small_logistic()
    w = np.array([0.7, -0.2, 0.4])
    centre = np.array([0.9, -0.4, 0.2]) if cv else None
    est = mb.GradientEstimator(target, 15, centre)
    g = est(np.random.default_rng(1), np.tile(w, (40_000, 1)))
    exact = target.grad_logp(w[None])[0]
    se = g.std(axis=0) / np.sqrt(len(g))
    assert np.all(np.abs(g.mean(axis=0) - exact) < 5 * se + 1e-12)
    assert np.isclose(est.cost, (2 if cv else 1) * 15 / 300)
    full = mb.GradientEstimator(target, 300, centre)
    assert np.allclose(full(np.random.default_rng(2), w[None])[0], exact) and full.cost == 1.0
    # the 21st minibatch of 15 of 300 rows begins the second epoch; the 3rd of 140 straddles two
    for batch, calls in ((15, 21), (140, 3)):
        est = mb.GradientEstimator(target, batch, centre)
        rng = np.random.default_rng([1, batch])
        for _ in range(calls):
            g = est(rng, np.tile(w, (20_000, 1)))
        se = g.std(axis=0) / np.sqrt(len(g))
        assert np.all(np.abs(g.mean(axis=0) - exact) < 5 * se + 1e-12), batch


@pytest.mark.parametrize("cv", [False, True])
def test_gradient_over_an_epoch_is_the_exact_score(cv):
    """Every row once per epoch: the mean of the N/n estimates of an epoch at a fixed point is the
    full-data score exactly (eq-mamba-sg, and eq-mamba-cv with the centre's terms)."""
    target = _small_logistic()
    w = np.array([[0.7, -0.2, 0.4], [0.1, 0.3, -0.9]])
    est = mb.GradientEstimator(target, 20, np.array([0.9, -0.4, 0.2]) if cv else None)
    rng = np.random.default_rng(4)
    for _ in range(3):                                   # three epochs of 15 minibatches
        mean = np.mean([est(rng, w) for _ in range(15)], axis=0)
        assert np.allclose(mean, target.grad_logp(w), rtol=1e-10, atol=1e-10)


# ---------------------------------------------------------------------------------------------
# Samplers on a conjugate Gaussian model: y_i ~ N(theta, I), theta ~ N(0, 10 I)
# ---------------------------------------------------------------------------------------------
class GaussianMean(targets.Target):
    """Posterior N(sum y / (N + 0.1), I / (N + 0.1)); minibatch gradients vectorised over chains."""

    def __init__(self, y):
        super().__init__(y.shape[1])
        self.y, self.n_data = y, y.shape[0]
        self.precision = self.n_data + 0.1
        self.mean = y.sum(axis=0) / self.precision

    def _logp(self, x):
        return -0.5 * np.sum((self.y[None] - x[:, None]) ** 2, axis=(1, 2)) - 0.05 * np.sum(x**2, axis=1)

    def _grad(self, x):
        return self.y.sum(axis=0)[None] - self.n_data * x - 0.1 * x

    def minibatch_grad(self, w, indices):
        return self.minibatch_grads(np.atleast_2d(w), np.asarray(indices)[None])

    def minibatch_grads(self, w, idx):
        self.n_grad_evals += w.shape[0] * idx.shape[1] / self.n_data
        ysum = self.y[idx].sum(axis=1)                               # (c, d)
        return (self.n_data / idx.shape[1]) * (ysum - idx.shape[1] * w) - 0.1 * w


def _variance_ratio(sampler_name, c, seed, n_leapfrog=5, steps_per_c=60):
    """Sample variance / posterior variance (worst coordinate) with h = c / posterior precision.
    The data are tightly clustered (spread 0.1), so the minibatch noise is small and the bias is
    mostly the discretisation's; minibatches of 10 out of 500 use the vectorised draw."""
    rng = np.random.default_rng(seed)
    target = GaussianMean(1.0 + 0.1 * rng.standard_normal((500, 2)))
    sampler = mb.SGMCMC(target, sampler_name, c / target.precision, 10, n_leapfrog=n_leapfrog,
                        centre=target.mean)
    state = sampler.init(np.tile(target.mean, (200, 1)), rng)
    n_steps = int(steps_per_c / c)
    run = mb.run_sgmcmc(sampler, state, rng, n_steps * sampler.cost_per_step)
    draws = run.samples[n_steps // 5:]                                # drop the first 20%
    if not np.all(np.isfinite(draws)):
        return np.inf
    ratio = draws.reshape(-1, 2).var(axis=0) * target.precision
    return float(ratio[np.argmax(np.abs(ratio - 1))])


@pytest.mark.parametrize("sampler_name", ["sgld", "sgld-cv", "sgnht", "sgnht-cv"])
def test_sampler_variance_bias_shrinks_with_step_size(sampler_name):
    big = abs(_variance_ratio(sampler_name, 0.3, 11) - 1)
    small = abs(_variance_ratio(sampler_name, 0.03, 12) - 1)
    assert small < 0.1, f"{sampler_name}: relative variance error {small:.3f} at the small step"
    assert small < 0.6 * big, f"{sampler_name}: bias {big:.3f} -> {small:.3f} does not shrink"


@pytest.mark.parametrize("sampler_name", ["sghmc", "sghmc-cv"])
def test_sghmc_variance_bias_tends_to_one_over_L_minus_1(sampler_name):
    """With a fresh velocity for every stored sample and the position moved before the first kick,
    L steps give a drift of L(L-1)/2 h g against a noise of variance L^2 h: as h -> 0 the chain is a
    Langevin walk with temperature L/(L-1), so the variance is inflated by 1/(L-1), not by O(h)."""
    n_leapfrog = 4
    ratio = _variance_ratio(sampler_name, 0.01, 13, n_leapfrog, steps_per_c=20)
    assert abs(ratio - (1 + 1 / (n_leapfrog - 1))) < 0.08, f"L={n_leapfrog}: ratio {ratio:.3f}"


# ---------------------------------------------------------------------------------------------
# Divergence and MAMBA end to end
# ---------------------------------------------------------------------------------------------
def test_diverging_arm_is_pruned_without_warnings():
    target = _small_logistic(n=400)
    mode = np.zeros(3)
    configs = [mb.SGConfig("sgld", h, 40) for h in (1e8, 1e-3, 1e-4, 1e-5)]   # h = 1e8 overflows
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = mb.mamba(target, configs, mode, 20.0, np.random.default_rng(5), metric="ksd", eta=2)
    first = [row for row in result.log if row["round"] == 0]
    assert first[0]["diverged"] and first[0]["metric"] == np.inf
    assert result.best != configs[0]
    assert 0 not in result.halving.rounds[1]["arms"]


def test_mamba_with_fssd_and_seconds_budget_runs():
    target = _small_logistic(n=400)
    configs = mb.make_grid("sgld-cv", [-2, -3, -4], [40, 400])
    result = mb.mamba(target, configs, np.zeros(3), 0.05, np.random.default_rng(6), metric="fssd",
                      centre=np.zeros(3), budget_kind="seconds")
    assert result.best in configs and len(result.halving.rounds) == 1


# ---------------------------------------------------------------------------------------------
# PMF and the Bayesian network: hand-derived gradients against autograd; calibration errors
# ---------------------------------------------------------------------------------------------
def _small_pmf(seed=0, n_users=5, n_items=7, D=3, n=40):
    rng = np.random.default_rng(seed)
    u, i = rng.integers(0, n_users, n), rng.integers(0, n_items, n)
    r = rng.normal(size=n)
    target = mb.PMF(u, i, r, n_users, n_items, latent_dim=D, alpha=3.0, mu0=0.2, a0=4.0, b0=5.0)

    def loglik(theta, rows):
        U = anp.reshape(theta[:n_users * D], (n_users, D))
        V = anp.reshape(theta[n_users * D:(n_users + n_items) * D], (n_items, D))
        return -1.5 * anp.sum((r[rows] - anp.sum(U[u[rows]] * V[i[rows]], axis=1)) ** 2)

    def logprior(theta):
        U = anp.reshape(theta[:n_users * D], (n_users, D))
        V = anp.reshape(theta[n_users * D:(n_users + n_items) * D], (n_items, D))
        h = theta[(n_users + n_items) * D:]
        out = 0.0
        for W, mu, lam in ((U, h[:D], h[D:2 * D]), (V, h[2 * D:3 * D], h[3 * D:])):
            prec = anp.exp(lam)   # N(W_j | mu, 1/prec), N(mu | 0.2, 1/prec), Gamma(4, 5) on prec, Jacobian
            out = out + anp.sum(0.5 * W.shape[0] * lam - 0.5 * prec * anp.sum((W - mu) ** 2, axis=0))
            out = out + anp.sum(0.5 * lam - 0.5 * prec * (mu - 0.2) ** 2) + anp.sum(4.0 * lam - 5.0 * prec)
        return out

    return target, loglik, logprior, n


def _assert_matches_autograd(target, loglik, logprior, n, theta, batch_size, rng):
    """Full-data log density and gradient, and one minibatch estimate per chain, against autograd."""
    everything = np.arange(n)
    full = lambda th: loglik(th, everything) + logprior(th)
    logp, grad = target.logp_and_grad(theta)
    assert np.allclose(logp, [full(t) for t in theta], rtol=1e-12, atol=1e-9)
    assert np.allclose(grad, [autograd.grad(full)(t) for t in theta], rtol=1e-12, atol=1e-9)
    idx = np.stack([rng.choice(n, batch_size, replace=False) for _ in range(len(theta))])
    estimate = lambda th, rows: (n / len(rows)) * loglik(th, rows) + logprior(th)
    expected = [autograd.grad(estimate)(t, rows) for t, rows in zip(theta, idx)]
    assert np.allclose(target.minibatch_grads(theta, idx), expected, rtol=1e-12, atol=1e-9)
    assert np.allclose(target.minibatch_grad(theta, idx[0]), target.minibatch_grads(theta, np.stack([idx[0]] * len(theta))))


def test_pmf_logp_and_gradients_match_autograd():
    target, loglik, logprior, n = _small_pmf()
    rng = np.random.default_rng(1)
    _assert_matches_autograd(target, loglik, logprior, n, 0.7 * rng.standard_normal((3, target.dim)), 6, rng)


def test_pmf_minibatch_gradient_unbiased_in_samplers_estimator():
    target = _small_pmf(seed=2, n=60)[0]
    theta = 0.5 * np.random.default_rng(3).standard_normal(target.dim)
    est = mb.GradientEstimator(target, 6)
    g = est(np.random.default_rng(4), np.tile(theta, (20_000, 1)))
    exact = target.grad_logp(theta[None])[0]
    se = g.std(axis=0) / np.sqrt(len(g))
    assert np.all(np.abs(g.mean(axis=0) - exact) < 5 * se + 1e-9)


def _small_nn(seed=0, n=25, p=6, H=5, K=4):
    rng = np.random.default_rng(seed)
    X, y = rng.uniform(size=(n, p)), rng.integers(0, K, n)
    target = mb.BayesNN(X, y, n_hidden=H, n_classes=K, prior_var=2.0)

    def loglik(theta, rows):
        B = anp.reshape(theta[:p * H], (p, H))
        b = theta[p * H:p * H + H]
        A = anp.reshape(theta[p * H + H:p * H + H + H * K], (H, K))
        a = theta[-K:]
        z = anp.dot(X[rows], B) + b
        s = anp.exp(z - anp.max(z, axis=1, keepdims=True))
        s = s / anp.sum(s, axis=1, keepdims=True)
        logits = anp.dot(s, A) + a
        lse = anp.log(anp.sum(anp.exp(logits), axis=1))
        return anp.sum(logits[anp.arange(len(rows)), y[rows]] - lse)

    return target, loglik, (lambda theta: -0.25 * anp.sum(theta**2)), n


def test_nn_logp_and_backprop_match_autograd():
    target, loglik, logprior, n = _small_nn()
    rng = np.random.default_rng(1)
    theta = rng.standard_normal((3, target.dim))
    _assert_matches_autograd(target, loglik, logprior, n, theta, 7, rng)
    assert np.allclose(target.predict_proba(theta, target.X).sum(axis=-1), 1.0)


@pytest.mark.parametrize("sampler_name", mb.SAMPLERS)
@pytest.mark.parametrize("make_target", [_small_pmf, _small_nn], ids=["pmf", "nn"])
def test_every_sampler_runs_on_pmf_and_the_network(sampler_name, make_target):
    """The default profile runs four samplers on PMF and the network, the paper profile all six:
    each one runs there, with finite draws, and charges its gradient evaluations."""
    target = make_target()[0]
    rng = np.random.default_rng(7)
    centre = 0.1 * rng.standard_normal(target.dim)
    sampler = mb.SGMCMC(target, sampler_name, 1e-4, 5, n_leapfrog=3, centre=centre)
    state = sampler.init(np.tile(centre, (3, 1)), rng)
    before = target.n_grad_evals
    run = mb.run_sgmcmc(sampler, state, rng, 20 * sampler.cost_per_step)
    assert run.samples.shape[-1] == target.dim and np.all(np.isfinite(run.samples))
    assert target.n_grad_evals > before


def test_calibration_errors_by_hand():
    # confidences 0.95 (bin 10, correct), 0.95 (bin 10, wrong), 0.55 (bin 6, correct), 1.0 (bin 10, wrong)
    prob = np.array([[0.95, 0.05], [0.95, 0.05], [0.45, 0.55], [1.0, 0.0]])
    labels = np.array([0, 1, 1, 1])
    ece, mce = mb.calibration_errors(prob, labels)
    top = abs(1 / 3 - (0.95 + 0.95 + 1.0) / 3)          # bin [0.9, 1] (closed): 3 images, 1 correct
    low = abs(1.0 - 0.55)                                 # bin [0.5, 0.6): 1 image, correct
    assert np.isclose(ece, (3 * top + 1 * low) / 4)
    assert np.isclose(mce, max(top, low))
    perfect = np.eye(3)[[0, 1, 2]]
    assert mb.calibration_errors(perfect, np.array([0, 1, 2])) == (0.0, 0.0)


def test_lbfgs_mode_finds_gaussian_mode():
    rng = np.random.default_rng(8)
    target = GaussianMean(1.0 + rng.standard_normal((50, 3)))
    assert np.allclose(mb.lbfgs_mode(target, np.zeros(3)), target.mean, atol=1e-6)


def test_pmf_nn_bad_arguments_raise_value_error_naming_them():
    cases = [
        (lambda: mb.PMF([0, 1], [0, 5], [1.0, 2.0], 2, 3), "items"),
        (lambda: mb.PMF([0, 1], [0, 1], [1.0, 2.0], 2, 3, latent_dim=0), "latent_dim"),
        (lambda: mb.PMF([0, 1], [0, 1], [1.0, 2.0], 2, 3, alpha=-1.0), "alpha"),
        (lambda: mb.BayesNN(np.zeros((3, 2)), np.array([0, 1, 12])), "y"),
        (lambda: mb.BayesNN(np.zeros((3, 2)), np.array([0, 1, 1]), n_hidden=0), "n_hidden"),
        (lambda: mb.calibration_errors(np.ones((3, 2)), np.zeros(4)), "prob"),
        (lambda: mb.calibration_errors(np.ones((3, 2)) / 2, np.zeros(3), n_bins=0), "n_bins"),
        (lambda: mb.lbfgs_mode(_small_logistic(), np.zeros(5)), "x0"),
    ]
    for call, name in cases:
        with pytest.raises(ValueError, match=name):
            call()


# ---------------------------------------------------------------------------------------------
# Bad arguments
# ---------------------------------------------------------------------------------------------
def test_bad_arguments_raise_value_error_naming_them():
    target = _small_logistic()
    rng = np.random.default_rng(0)
    cases = [
        (lambda: mb.SGConfig("sgld", -1.0, 10), "step_size"),
        (lambda: mb.SGConfig("sgmala", 1e-3, 10), "sampler"),
        (lambda: mb.SGConfig("sghmc", 1e-3, 10, 0), "n_leapfrog"),
        (lambda: mb.GradientEstimator(target, 301), "batch_size"),
        (lambda: mb.MinibatchStream(10, 11, 2), "batch_size"),
        (lambda: mb.SGMCMC(target, "sgld-cv", 1e-3, 10), "centre"),
        (lambda: mb.successive_halving(9, lambda a, b, i: np.zeros(len(a)), 1.0, eta=1), "eta"),
        (lambda: mb.successive_halving(9, lambda a, b, i: np.zeros(len(a)), 0.0), "budget"),
        (lambda: mb.mamba(target, [mb.SGConfig("sgld", 1e-3, 10)], np.zeros(3), 1.0, rng, metric="mmd"), "metric"),
        (lambda: mb.mamba(target, [mb.SGConfig("sgld", 1e-3, 10)], np.zeros(3), 1.0, rng,
                          budget_kind="steps"), "budget_kind"),
        (lambda: mb.mamba(target, [mb.SGConfig("sgld", 1e-3, 10)], np.zeros(4), 1.0, rng), "x0"),
        (lambda: mb.stein_discrepancy(target, np.zeros((5, 3)), "l2", rng), "metric"),
    ]
    for call, name in cases:
        with pytest.raises(ValueError, match=name):
            call()


# ---------------------------------------------------------------------------------------------
# The stochastic-gradient KSD of appendix B.2
# ---------------------------------------------------------------------------------------------
def test_stochastic_ksd_with_the_full_batch_is_the_full_batch_ksd():
    target = _small_logistic()
    draws = np.array([0.7, -0.2, 0.4]) + 0.3 * np.random.default_rng(5).standard_normal((40, 3))
    rng = np.random.default_rng(6)
    assert np.array_equal(mb.stochastic_scores(target, draws, target.n_data, rng), mb.full_scores(target, draws))
    ways = mb.ksd_four_ways(target, draws, target.n_data, rng, thin=5)
    assert list(ways) == list(mb.KSD_WAYS)
    assert ways["stochastic, all"] == ways["full, all"] == mb.stein_discrepancy(target, draws, "ksd", rng)
    assert ways["stochastic, thinned"] == ways["full, thinned"] == mb.stein_discrepancy(target, draws[::5], "ksd", rng)
    diverged = draws.copy()
    diverged[3, 1] = np.nan
    assert all(np.isinf(v) for v in mb.ksd_four_ways(target, diverged, 10, rng).values())


def test_stochastic_scores_unbiased():
    """The mean over many fresh minibatches at one point is the full-data score (logistic regression, PMF)."""
    w = np.array([0.7, -0.2, 0.4])
    for target, theta, batch in ((_small_logistic(), w, 15),
                                 (_small_pmf(seed=2, n=60)[0], None, 6)):
        if theta is None:
            theta = 0.5 * np.random.default_rng(3).standard_normal(target.dim)
        g = mb.stochastic_scores(target, np.tile(theta, (20_000, 1)), batch, np.random.default_rng(7))
        exact = target.grad_logp(theta[None])[0]
        se = g.std(axis=0) / np.sqrt(len(g))
        assert np.all(np.abs(g.mean(axis=0) - exact) < 5 * se + 1e-9)


def test_stochastic_ksd_excess_is_the_gradient_noise_over_m():
    """E KSD_stoch^2 = KSD_full^2 + sum_m tr Cov(g_m) / M^2 (eq-mamba-sksd-bias): independent minibatches
    across draws leave the off-diagonal terms unbiased; the exact covariance of a sample without replacement."""
    target = _small_logistic()
    n_data, batch, M = target.n_data, 10, 15
    draws = np.array([0.7, -0.2, 0.4]) + 0.3 * np.random.default_rng(8).standard_normal((M, 3))
    per_datum = (target.t[None, :] - 1 / (1 + np.exp(-draws @ target.X.T)))[..., None] * target.X[None]
    trace = n_data**2 / batch * (n_data - batch) / (n_data - 1) * per_datum.var(axis=1).sum(axis=1)   # (M,)
    expected = mb.ksd_four_ways(target, draws, n_data, np.random.default_rng(0))["full, all"] ** 2 \
        + trace.sum() / M**2
    rng = np.random.default_rng(9)
    values = np.array([mb.ksd_four_ways(target, draws, batch, rng)["stochastic, all"] ** 2 for _ in range(3000)])
    se = values.std() / np.sqrt(len(values))
    assert abs(values.mean() - expected) < 5 * se, (values.mean(), expected, se)


# ---------------------------------------------------------------------------------------------
# Planted bugs must make the tests above fail
# ---------------------------------------------------------------------------------------------
MUTATIONS = {
    "sgld-drift-sign": ("x = x + h[:, None] * grad_fn(rng, x)", "x = x - h[:, None] * grad_fn(rng, x)",
                        "variance_bias_shrinks and sgld"),
    "missing-N-over-n": ("scale = self.n_data / idx.shape[1]", "scale = 1.0", "unbiased"),
    "minibatch-straddle-repeats": ("if len(taken) == 0 or head == 0:", "if True:", "without_replacement"),
    "minibatch-epoch-overlap": ("            self.pos += n\n", "            self.pos += n - 1\n", "once_per_epoch"),
    "sgnht-one-thermostat": ("xi = xi + np.add.reduceat(v**2, starts, axis=1) / sizes - h[:, None]",
                             "xi = xi + np.mean(v**2, axis=1, keepdims=True) - h[:, None]", "thermostat"),
    "round-budget-carried-over": (
        "n_steps = steps_for_budget(sampler, per_arm, budget_kind)",
        "n_steps = steps_for_budget(sampler, sum(halving_budgets(len(configs), budget, eta)[:i + 1]) - spent[arms[0]], "
        "budget_kind)", "spends_more_than_its_round_budget"),
    "priced-out-given-min-steps": (
        "n_steps = steps_for_budget(sampler, per_arm, budget_kind)",
        "n_steps = max(min_steps, steps_for_budget(sampler, per_arm, budget_kind))", "priced_out"),
    "unscored-ranked-first": ("metrics = np.where(np.isfinite(metrics), metrics, np.inf)",
                              "metrics = np.where(np.isfinite(metrics), metrics, -np.inf)", "scored_one"),
    "pmf-missing-scale": ("w = (scale * self.alpha) * resid[..., None]", "w = self.alpha * resid[..., None]",
                          "pmf_logp_and_gradients"),
    "nn-softmax-jacobian": ("delta1 = hidden * (g_hidden - np.sum(g_hidden * hidden, axis=-1, keepdims=True))",
                            "delta1 = hidden * g_hidden", "nn_logp_and_backprop"),
    "ece-bins": ("bins = np.clip((conf * n_bins).astype(int), 0, n_bins - 1)",
                 "bins = np.clip((conf * n_bins).astype(int), 0, n_bins)", "calibration_errors_by_hand"),
    "stochastic-ksd-missing-N-over-n": (
        "out[start:start + len(part)] = estimator._minibatch([part], idx)[0]",
        "out[start:start + len(part)] = (estimator._minibatch([part], idx)[0] + part / target.prior_var) "
        "* idx.shape[1] / n_data - part / target.prior_var", "stochastic_scores_unbiased"),
    "stochastic-ksd-shared-minibatch": (
        "idx = np.stack([rng.choice(n_data, n, replace=False) for _ in range(len(part))])",
        "idx = np.tile(rng.choice(n_data, n, replace=False), (len(part), 1))", "excess_is_the_gradient_noise"),
    "halving-keeps-worst": ("keep = order[:max(1, len(active) // eta)]",
                            "keep = order[::-1][:max(1, len(active) // eta)]",
                            "finds_best_arm"),
}


@pytest.mark.parametrize("name", MUTATIONS)
def test_planted_bug_is_caught(name, tmp_path):
    original, mutant, selection = MUTATIONS[name]
    shutil.copytree(ROOT / "mcmc_lib", tmp_path / "mcmc_lib")
    (tmp_path / "tests").mkdir()
    shutil.copy(Path(__file__), tmp_path / "tests" / "test_mamba.py")
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    module = tmp_path / "mcmc_lib" / "methods" / "mamba.py"
    source = module.read_text()
    assert source.count(original) == 1, f"mutation {name}: the original code was not found once"
    module.write_text(source.replace(original, mutant))
    completed = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "-k",
         f"({selection}) and not planted", "tests/test_mamba.py"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert completed.returncode == 1, f"mutation {name} was not caught:\n{completed.stdout[-2000:]}"
    assert "failed" in completed.stdout


# ---------------------------------------------------------------------------------------------
# Issue 15: every arm scored in every round; no forced choice; a large batch wins when it is better
# ---------------------------------------------------------------------------------------------
def test_round_without_finite_score_raises():
    with pytest.raises(mb.NoFiniteScoreError, match="round 0"):
        mb.successive_halving(9, lambda arms, b, i: np.full(len(arms), np.nan), budget=4.0, eta=3)


def test_adaptive_thinning_keeps_enough_draws():
    target = _small_logistic(n=400)
    rng = np.random.default_rng(3)
    sampler = mb.SGMCMC(target, "sgld", 1e-3, 400)                   # full batch: 1 gradient per step
    run = mb.run_sgmcmc(sampler, sampler.init(np.zeros((2, 3)), rng), rng, 30.0, thin=10, min_kept=10)
    assert run.n_steps == 30 and run.thin == 3 and len(run.samples) == 10
    run = mb.run_sgmcmc(sampler, sampler.init(np.zeros((2, 3)), rng), rng, 500.0, thin=10, min_kept=10)
    assert run.thin == 10 and len(run.samples) == 50                  # enough steps: the usual thinning
    run = mb.run_sgmcmc(sampler, sampler.init(np.zeros((2, 3)), rng), rng, 0.5, thin=10, min_kept=10, min_steps=2)
    assert run.n_steps == 2 and len(run.samples) == 2                 # a budget below one step: the minimum
    run = mb.run_sgmcmc(sampler, sampler.init(np.zeros((2, 3)), rng), rng, 0.02, "seconds", thin=10, min_kept=5)
    assert run.thin in (1, 2, 10) and len(run.samples) >= min(5, run.n_steps)
    assert len(run.samples) == len(range(0, run.n_steps, run.thin))  # the kept draws are every thin-th


class NoisyGaussianMean(targets.Target):
    """y_i ~ N(theta, 1), theta ~ N(0, 100): data with a large spread make minibatch gradients very
    noisy, so SGLD's stationary variance is inflated by about h N^2 s^2 / (2n) relative to 1/N."""

    def __init__(self, y):
        super().__init__(1)
        self.y, self.n_data = y[:, None], len(y)
        self.precision = self.n_data + 0.01
        self.mean = np.array([y.sum() / self.precision])

    def _logp(self, x):
        return -0.5 * self.precision * np.sum((x - self.mean) ** 2, axis=1)

    def _grad(self, x):
        return -self.precision * (x - self.mean)

    def minibatch_grad(self, w, indices):
        return self.minibatch_grads(np.atleast_2d(w), np.asarray(indices)[None])

    def minibatch_grads(self, w, idx):
        self.n_grad_evals += w.shape[0] * idx.shape[1] / self.n_data
        ysum = self.y[idx].sum(axis=1)
        return (self.n_data / idx.shape[1]) * (ysum - idx.shape[1] * w) - 0.01 * w


@pytest.mark.parametrize("budget_kind", ["model", "gradients"])
def test_mamba_picks_a_large_batch_when_it_is_better(budget_kind):
    """Small batches are far too noisy here; under either budget (modelled seconds with the paper's
    1 : 4 : 20 : 70 cost ratios, or a gradient count, where a 1% batch is 100x cheaper per step) the
    tuner must not be forced to the smallest batch, and must pick a large one."""
    rng = np.random.default_rng(8)
    target = NoisyGaussianMean(20.0 * rng.standard_normal(1000))
    cost = mb.CostModel([0.001, 0.01, 0.1, 1.0], 1e-4 * np.array([1.0, 4.0, 20.0, 70.0]))
    configs = mb.make_grid("sgld", np.log10(np.array([0.5, 0.2, 0.05]) / target.n_data), [1000, 100, 10])
    start = target.mean + 3.0 / np.sqrt(target.precision)             # off the mode
    budget = 0.2 if budget_kind == "model" else 20.0          # round 0: the full batch makes 5-7 steps
    for seed in range(3):
        result = mb.mamba(target, configs, start, budget, np.random.default_rng([9, seed]), metric="ksd",
                          budget_kind=budget_kind, cost_model=cost)
        assert result.best.batch_size == 1000, f"seed {seed}: chose batch {result.best.batch_size}"
        # with fixed thinning by 10 (one kept draw) the full batch would score +inf and lose
        fixed = mb.mamba(target, configs, start, budget, np.random.default_rng([9, seed]), metric="ksd",
                         budget_kind=budget_kind, cost_model=cost, min_kept=1, min_steps=1)
        assert fixed.best.batch_size != 1000


def test_cost_model_interpolates_log_linearly():
    cost = mb.CostModel([0.001, 0.01, 0.1, 1.0], [1.0, 4.0, 20.0, 70.0], cv_factor=1.2)
    assert np.isclose(cost(0.01), 4.0) and np.isclose(cost(0.01, cv=True), 4.8)
    assert np.isclose(cost(np.sqrt(0.001 * 0.01)), 2.0)              # geometric midpoint
    assert np.isclose(cost(1e-5), 1.0) and np.isclose(cost(2.0), 70.0)
    target = _small_logistic(n=1000)
    s = mb.SGMCMC(target, "sghmc-cv", 1e-3, 10, n_leapfrog=5, centre=np.zeros(3), cost_model=cost)
    assert np.isclose(s.model_cost_per_step, 5 * 4.8)
    with pytest.raises(ValueError, match="fractions"):
        mb.CostModel([0.1, 0.01], [1.0, 2.0])
    with pytest.raises(ValueError, match="cost_model"):
        mb.mamba(target, [mb.SGConfig("sgld", 1e-3, 10)], np.zeros(3), 1.0, np.random.default_rng(0),
                 budget_kind="model")


def test_sghmc_gain_threshold_of_the_code_order():
    """Explicit Euler (the code's order), L = 10, alpha = 0.01: gain above 1 once h lambda > ~0.063;
    Chen et al.'s order stays below 1 there."""
    assert mb.sghmc_position_gain(0.062, 10, 0.01, True) < 1 < mb.sghmc_position_gain(0.064, 10, 0.01, True)
    assert mb.sghmc_position_gain(0.064, 10, 0.01, False) < 1
    assert np.isclose(mb.sghmc_position_gain(0.0, 10, 0.0, True), 1.0)


def test_adam_iterate_reaches_the_mode():
    rng = np.random.default_rng(2)
    target = _small_logistic(n=2000)
    mode = find_mode(target, np.zeros(3))
    x = mb.adam_iterate(target, np.zeros(3), 200, 3000, rng, learning_rate=1e-2)
    assert np.all(np.abs(x - mode) < 0.1), (x, mode)


# ---------------------------------------------------------------------------------------------
# Issue 15: SGNHT keeps one thermostat per parameter block
# ---------------------------------------------------------------------------------------------
def test_sgnht_thermostat_per_block_matches_the_update_formula():
    """One step of eq. (eq-mamba-sgnht) with blocks of 2 and 3 coordinates, against the formula
    written out with the same normal draws."""
    rng = np.random.default_rng(11)
    c, blocks, a = 4, (2, 3), 0.01
    x, v = rng.standard_normal((c, 5)), 0.1 * rng.standard_normal((c, 5))
    xi = rng.uniform(0.0, 0.05, (c, 2))
    h = np.array([1e-3, 2e-3, 5e-3, 1e-2])
    g = rng.standard_normal((c, 5))
    step_rng, noise_rng = np.random.default_rng(5), np.random.default_rng(5)
    out = mb.sgnht_step(step_rng, mb.SGState(x, v, xi), h, lambda r, w: g, a, blocks)
    noise = noise_rng.standard_normal((c, 5))
    friction = np.concatenate([np.repeat(xi[:, :1], 2, axis=1), np.repeat(xi[:, 1:], 3, axis=1)], axis=1)
    v_new = v + h[:, None] * g - friction * v + np.sqrt(2 * a * h)[:, None] * noise
    xi_new = np.stack([xi[:, 0] + np.mean(v_new[:, :2] ** 2, axis=1) - h,
                       xi[:, 1] + np.mean(v_new[:, 2:] ** 2, axis=1) - h], axis=1)
    assert np.allclose(out.v, v_new) and np.allclose(out.x, x + v_new) and np.allclose(out.xi, xi_new)
    one = mb.sgnht_step(np.random.default_rng(5), mb.SGState(x, v, xi[:, :1]), h, lambda r, w: g, a)
    assert one.xi.shape == (c, 1)                                    # no blocks: one thermostat
    assert np.allclose(one.xi[:, 0], xi[:, 0] + np.mean((one.v) ** 2, axis=1) - h)


def test_sgnht_thermostat_rises_with_kinetic_energy_above_its_target():
    """A block whose kinetic energy per coordinate exceeds h raises its thermostat (more friction);
    a block below h lowers its own, whatever the other block does."""
    h = np.array([1e-2])
    v = np.concatenate([np.full(3, 0.5), np.full(4, 1e-3)])[None]      # hot block, cold block
    state = mb.SGState(np.zeros((1, 7)), v, np.full((1, 2), 0.01))
    out = mb.sgnht_step(np.random.default_rng(0), state, h, lambda r, w: np.zeros_like(w), 1e-8, (3, 4))
    assert out.xi[0, 0] > 0.01 > out.xi[0, 1]
    assert np.mean(out.v[0, :3] ** 2) > h[0] > np.mean(out.v[0, 3:] ** 2)


@pytest.mark.parametrize("make_target,n_blocks", [(_small_pmf, 6), (_small_nn, 4)], ids=["pmf", "nn"])
def test_pmf_and_network_thermostat_blocks(make_target, n_blocks):
    """PMF: U, V, mu_U, lam_U, mu_V, lam_V; the network: two weight matrices and two biases; the
    blocks tile the parameter vector in the order of unpack."""
    target = make_target()[0]
    assert len(target.blocks) == n_blocks and sum(target.blocks) == target.dim
    parts = target.unpack(np.zeros((1, target.dim)))
    assert [int(np.prod(p.shape[1:])) for p in parts] == list(target.blocks)
    sampler = mb.SGMCMC(target, "sgnht", 1e-4, 5)
    assert sampler.init(np.zeros((2, target.dim)), np.random.default_rng(0)).xi.shape == (2, n_blocks)
    assert mb.block_sizes(_small_logistic()) == (3,)


# ---------------------------------------------------------------------------------------------
# Issue 15: MAMBA follows the paper's clock: each round's budget r_i, never more, nothing carried over
# ---------------------------------------------------------------------------------------------
def _step_cost(target, c, budget_kind, cost_model):
    s = mb.SGMCMC(target, c.sampler, c.step_size, c.batch_size, c.n_leapfrog, cost_model=cost_model)
    return s.cost_per_step if budget_kind == "gradients" else s.model_cost_per_step


@pytest.mark.parametrize("sampler,budget_kind,budget,n_arms_per_batch",
                         [("sghmc", "gradients", 3.0, 3), ("sghmc", "gradients", 0.7, 3), ("sghmc", "model", 0.05, 3),
                          ("sghmc", "gradients", 40.0, 9), ("sgld", "gradients", 6.0, 9), ("sgnht", "model", 0.01, 3)])
def test_mamba_never_spends_more_than_its_round_budget(sampler, budget_kind, budget, n_arms_per_batch):
    """Cheap and expensive arms (the full batch, and SGHMC's L = 10, whose step costs more than r_0 at R = 3):
    in round i each arm takes exactly the floor(r_i / step) steps that r_i buys, or none when that is fewer
    than two, so it never spends more than r_i in a round, nor more than the sum of the r_i in all (R when
    the arm count is a power of eta)."""
    target = _small_logistic(n=400)
    cost = mb.CostModel([0.001, 0.01, 0.1, 1.0], 1e-4 * np.array([1.0, 4.0, 20.0, 70.0]))
    configs = mb.make_grid(sampler, np.linspace(-2, -3, n_arms_per_batch), [400, 40, 4], (5, 10))
    result = mb.mamba(target, configs, np.zeros(3), budget, np.random.default_rng(12), metric="ksd",
                      budget_kind=budget_kind, cost_model=cost)
    budgets = mb.halving_budgets(len(configs), budget, 3)
    if len(configs) in (27, 81):
        assert np.isclose(sum(budgets), budget)
    for row in result.log:
        step = _step_cost(target, configs[row["arm"]], budget_kind, cost)
        affordable = int(np.floor(budgets[row["round"]] / step + 1e-9))
        assert row["budget"] == budgets[row["round"]]
        assert row["steps"] == (affordable if affordable >= 2 else 0), (row, affordable)
        assert np.isclose(row["round_spent"], row["steps"] * step)
        assert row["round_spent"] <= row["budget"] * (1 + 1e-12), row
    for arm in range(len(configs)):
        rows = [row for row in result.log if row["arm"] == arm]
        assert np.isclose(rows[-1]["spent"], sum(row["round_spent"] for row in rows))
        assert rows[-1]["spent"] <= sum(budgets) * (1 + 1e-12)
    best = [row for row in result.log if configs[row["arm"]] == result.best]
    assert len(best) == len(result.halving.rounds) and not best[-1]["priced_out"]   # ran every round, scored
    if sampler == "sghmc" and budget_kind == "gradients" and budget == 3.0:      # L = 10 at 10%: 1 > r_0 / 2
        assert any(row["priced_out"] and row["n_leapfrog"] == 10 and row["batch_size"] == 40 for row in result.log)


def test_priced_out_arm_takes_no_step_and_is_scored_once_affordable():
    """One cheap arm (a batch of 40: 0.1 per step) and eight full-batch arms (1 per step) with R = 4: r_0 = 1
    buys the full batch one step, so it takes none and is priced out (ranked after the cheap arm); two of
    them fill the survivors' places in grid order (advanced_unscored = 2); r_1 = 3 buys them three steps,
    and they are scored there."""
    target = _small_logistic(n=400)
    configs = [mb.SGConfig("sgld", 1e-3, 40)] + [mb.SGConfig("sgld", h, 400) for h in np.logspace(-2.5, -4.5, 8)]
    result = mb.mamba(target, configs, np.zeros(3), 4.0, np.random.default_rng(14), metric="ksd")
    assert [r["budget"] for r in result.halving.rounds] == [1.0, 3.0]
    first = {row["arm"]: row for row in result.log if row["round"] == 0}
    assert first[0]["steps"] == 10 and np.isfinite(first[0]["metric"]) and not first[0]["priced_out"]
    for arm in range(1, 9):
        assert first[arm]["priced_out"] and first[arm]["steps"] == 0 and first[arm]["kept"] == 0
        assert first[arm]["metric"] == np.inf and first[arm]["round_spent"] == 0.0
    assert result.halving.rounds[1]["arms"].tolist() == [0, 1, 2]          # the scored arm first, then grid order
    assert result.halving.rounds[0]["advanced_unscored"] == 2
    assert [first[a]["advanced"] for a in range(9)] == [True, True, True] + [False] * 6
    second = {row["arm"]: row for row in result.log if row["round"] == 1}
    for arm in (1, 2):
        assert second[arm]["steps"] == 3 and not second[arm]["priced_out"]
        assert np.isfinite(second[arm]["metric"]) and second[arm]["spent"] == 3.0
    assert result.halving.rounds[1]["advanced_unscored"] == 0


@pytest.mark.parametrize("metric", ["ksd", "fssd"])
def test_every_arm_not_priced_out_nor_diverged_is_scored(metric):
    """Issue 15's requirement: an arm that is not priced out and has not diverged has a finite score in
    every round it runs, and is priced out exactly when r_i buys it fewer than two steps (SGHMC's L = 5 at a
    10% batch costs 0.5 a step: scored in both rounds, r_0 = 0.75 and r_1 = 2.25; L = 10 costs 1: priced out
    in round 0 only; the full batch, 5 and 10 a step: priced out in every round). An arm scored in round 0
    is scored in every later round it runs (r_i grows with i)."""
    target = _small_logistic(n=400)
    configs = mb.make_grid("sghmc", [-2, -2.5, -3], [400, 40, 4], (5, 10))
    result = mb.mamba(target, configs, np.zeros(3), 3.0, np.random.default_rng(4), metric=metric)
    budgets = [r["budget"] for r in result.halving.rounds]
    for row in result.log:
        step = row["n_leapfrog"] * row["batch_size"] / 400
        assert row["priced_out"] == (np.floor(budgets[row["round"]] / step + 1e-9) < 2), row
        if not row["priced_out"] and not row["diverged"]:
            assert np.isfinite(row["metric"]) and row["kept"] >= 2, row
        if row["priced_out"]:
            assert row["steps"] == 0 and row["metric"] == np.inf
        if row["round"] > 0 and not row["priced_out"]:
            assert row["steps"] >= 2
    scored0 = {row["arm"] for row in result.log if row["round"] == 0 and not row["priced_out"]}
    assert not any(row["priced_out"] for row in result.log if row["arm"] in scored0)
    assert result.best.batch_size != 400


def _check_scored_first(result):
    """A priced-out (or otherwise unscored) arm never goes on while a scored arm of its round is eliminated,
    and advanced_unscored counts the unscored arms that went on."""
    rounds = result.halving.rounds
    for i, rd in enumerate(rounds[:-1]):
        finite = np.isfinite(rd["metrics"])
        survivors = np.isin(rd["arms"], rounds[i + 1]["arms"])
        if np.any(survivors & ~finite):
            assert np.all(survivors[finite]), i
        assert rd["advanced_unscored"] == int(np.sum(survivors & ~finite))
        for row in result.log:
            if row["round"] == i:
                assert row["advanced"] == (row["arm"] in rounds[i + 1]["arms"])


@pytest.mark.parametrize("budget", [0.7, 3.0, 12.0])
def test_priced_out_arm_never_survives_ahead_of_a_scored_one(budget):
    target = _small_logistic(n=400)
    configs = mb.make_grid("sghmc", [-2, -2.5, -3], [400, 40, 4], (5, 10))
    result = mb.mamba(target, configs, np.zeros(3), budget, np.random.default_rng(15), metric="ksd")
    _check_scored_first(result)
    if budget == 0.7:          # 3 arms scored in round 0 (a batch of 4, L = 5), 6 survive
        assert result.halving.rounds[0]["advanced_unscored"] == 3


def test_successive_halving_ranks_unscored_arms_after_scored_ones_in_grid_order():
    scores = np.array([np.inf, np.nan, 5.0, np.inf, 1.0, np.inf, np.inf, np.inf, np.inf])
    result = mb.successive_halving(9, lambda arms, b, i: scores[arms], budget=4.0, eta=3)
    assert result.rounds[1]["arms"].tolist() == [0, 2, 4]     # 4 and 2 scored; 0 the first unscored
    assert result.rounds[0]["advanced_unscored"] == 1 and result.best == 4


class TickingClock:
    """A perf_counter that advances by ``tick`` seconds at every reading: the wall-clock budget's logic
    without the machine's load (a loaded machine made a test of real time fail by 0.6 ms)."""

    def __init__(self, tick=1e-4):
        self.now, self.tick = 0.0, tick

    def __call__(self):
        self.now += self.tick
        return self.now


def test_mamba_seconds_budget_follows_the_round_clock(monkeypatch):
    """With a wall-clock budget a step starts only while the arm's clock is below r_i: no arm runs for more
    than r_i plus one step in a round, and an arm with fewer than two steps is priced out. The clock ticks
    0.1 ms per reading, so a step costs a few ticks whatever the machine's load."""
    clock = TickingClock()
    monkeypatch.setattr(mb.time, "perf_counter", clock)
    target = _small_logistic(n=400)
    configs = mb.make_grid("sgld", [-2, -3, -4], [40, 400, 4])
    result = mb.mamba(target, configs, np.zeros(3), 0.09, np.random.default_rng(13), metric="ksd",
                      budget_kind="seconds")
    assert clock.now > 0.09                        # the budget was spent on this clock
    for row in result.log:
        assert row["round_spent"] < row["budget"] + 10 * clock.tick, row
        assert row["priced_out"] == (row["steps"] < 2)
        if not row["priced_out"] and not row["diverged"]:
            assert np.isfinite(row["metric"])
    assert max(row["spent"] for row in result.log) < sum(mb.halving_budgets(len(configs), 0.09, 3)) + 0.04
    _check_scored_first(result)


# ---------------------------------------------------------------------------------------------
# Issue 15: no two random streams of the chapter coincide
# ---------------------------------------------------------------------------------------------
def _chapter_source():
    return (ROOT / "book" / "mamba.md").read_text()


def _paper_sizes(source):
    """The chapter's SIZE_TABLE at the paper profile (the largest index ranges)."""
    import ast
    import re
    text = source[source.index("SIZE_TABLE = {") + len("SIZE_TABLE = "):]
    text = text[:text.index("\n}") + 2]
    table = ast.literal_eval(re.sub(r"#.*", "", text))
    return {k: v[2] for k, v in table.items()}


def _chapter_streams(source):
    """Every seed the chapter hands to np.random.default_rng, at the paper profile's sizes, with its use:
    notebook-level keys [SEED, purpose, ...] and each unit's own streams (its key plus indices)."""
    import re
    sizes = _paper_sizes(source)
    SEED = int(re.search(r"^SEED = (\d+)", source, re.M).group(1))
    n_methods = len(re.search(r"^METHODS = \((.*)\)", source, re.M).group(1).split(","))
    streams = [("lr data", [SEED, 1]), ("lr reference: importance", [SEED, 2]), ("lr reference: Adam", [SEED, 8])]
    for i in range(len(mb.SAMPLERS)):
        for r in range(sizes["n_reps"]):
            unit = [SEED, 3, i, r]
            streams += [(f"lr {i} {r} mamba {k}", unit + [k]) for k in (0, 1, 2, 5)]   # LR_MAMBA_RUNS, LR_COMPARE_RUNS
            streams += [(f"lr {i} {r} grid", unit + [3])]
            streams += [(f"lr {i} {r} eval {j}", unit + [4, j]) for j in range(n_methods)]
    streams += [(f"wallclock {i}", [SEED, 6, i]) for i in range(sizes["wallclock_samplers"])]
    for problem, split, fit, key in (("pmf", 20, 21, 22), ("nn", 30, 31, 32)):
        streams += [(f"{problem} split", [SEED, split]), (f"{problem} map", [SEED, fit])]
        for i in range(len(sizes[f"{problem}_samplers"])):
            for r in range(sizes[f"{problem}_n_reps"]):
                unit = [SEED, key, i, r]
                streams += [(f"{problem} {i} {r} mamba", unit + [0]), (f"{problem} {i} {r} grid", unit + [1])]
                streams += [(f"{problem} {i} {r} eval {j}", unit + [2, j]) for j in range(3)]
    for r in range(sizes["nn_n_reps"]):             # the network's SGNHT on the smaller grid (no heuristic)
        unit = [SEED, 35, r]
        streams += [(f"nn small grid {r} mamba", unit + [0]), (f"nn small grid {r} grid", unit + [1])]
        streams += [(f"nn small grid {r} eval {j}", unit + [2, j]) for j in range(2)]
    for p in range(len(sizes["b2_problems"])):      # appendix B.2: [SEED, 36, problem, r]
        for r in range(sizes["b2_n_reps"]):
            unit = [SEED, 36, p, r]
            streams += [(f"b2 {p} {r} figure 4", unit + [1])]
            streams += [(f"b2 {p} {r} figure 5 {j}", unit + [2, j]) for j in range(4)]
    for i in range(len(sizes["sgnht_scale_n"])):    # SGNHT-CV against N: [SEED, 37, N index, batch index]
        streams += [(f"sgnht scale {i} {j}", [SEED, 37, i, j, 1]) for j in range(2)]
    streams += [(f"heuristic data {k}", [SEED, 33, k]) for k in range(sizes["n_data_draws"])]
    streams += [(f"blow-up {s}", [SEED, 34, s]) for s in (0, 1)]
    return streams


def test_chapter_random_streams_are_distinct():
    """No two uses share a stream: numpy's SeedSequence ignores trailing zeros, so [SEED, 31] (the
    network's MAP) and [SEED, 31, 0] (once the blow-up's key) were one stream. The streams are listed by
    the chapter's keying rule; the chapter's keys are read from its source, so a new key fails here until
    the rule above lists it."""
    import re
    source = _chapter_source()
    streams = _chapter_streams(source)
    states = {}
    for use, seed in streams:
        state = tuple(np.random.SeedSequence(seed).generate_state(4))
        assert state not in states, f"{use} {seed} shares its stream with {states[state]}"
        states[state] = (use, seed)
    assert np.random.SeedSequence([1, 31]).generate_state(4).tolist() == \
        np.random.SeedSequence([1, 31, 0]).generate_state(4).tolist()          # why the rule is needed
    # the keys as the chapter writes them: each must be one the list above enumerates (or a label)
    code = "\n".join(line for line in source.splitlines() if not line.lstrip().startswith("#"))
    written = {k.strip() for k in re.findall(r"\[SEED(?:, ([^\]\[]*))?\]", code)}
    assert written == {"", "1", "3, i, r", "3, r", "3, sampler, r", "6, i", "20", "21", "key, i, r", "22, mb.SAMPLERS.index(n), r", "30",
                       "31", "32, r", "33, k", "33, k_cross", "34, int(stale)", "35, r",
                       "36, p, r", "36, 0, r", "37, i, j", "3, sgnht_index, r"}, written
    keys = {int(k) for k in re.findall(r"run_problem\(\"\w+\", \w+, (\d+)\)", source)}
    # [SEED, 32, r] labels the network claims' replicates, not a stream; PMF's claim records each
    # sampler-replicate's own unit seed [SEED, 22, i, r]
    assert keys == {22, 32}, keys
    unit_streams = set(re.findall(r"default_rng\(\[\*seed, ([^\]]+)\]\)", source))
    assert unit_streams <= {"1", "2", "8", "stream", "3", "4, j", "0", "2, j"}, unit_streams


# ---------------------------------------------------------------------------------------------
# make_grid: what it is given is what it builds, or it says why not (issue 47, case 7)
# ---------------------------------------------------------------------------------------------
def test_make_grid_builds_step_size_fastest_and_keeps_integral_batches():
    configs = mb.make_grid("sghmc", [-2.0, -3.0], [400, 40.0], (5, 10))
    assert [(c.step_size, c.batch_size, c.n_leapfrog) for c in configs[:3]] == [(1e-2, 400, 5), (1e-3, 400, 5),
                                                                               (1e-2, 40, 5)]
    assert len(configs) == 8 and {c.n_leapfrog for c in mb.make_grid("sgld", [-2.0], [10], (5, 10))} == {1}


@pytest.mark.parametrize("log10_h, batches, message", [
    ([0.01, 0.001], [10], "log10 of the step sizes"),        # step sizes passed for their logarithms
    ([-2.0], [10.7], r"batch_sizes\[0\] must be an integer"),
    ([-2.0], [0], r"batch_sizes\[0\] must be an integer >= 1"),
    ([-2.0, np.nan], [10], "finite"),
    ([], [10], "non-empty"),
    (-2.0, [10], "log10_step_sizes must be a list"),
])
def test_make_grid_refuses_what_it_would_have_changed_silently(log10_h, batches, message):
    with pytest.raises(ValueError, match=message):
        mb.make_grid("sgld", log10_h, batches)


def test_make_grid_accepts_steps_of_one_and_more_given_as_logarithms():
    """A grid moved with N (the chapter's smoke profile) reaches log10 h > 0; only a grid wholly inside (0, 1)
    reads as step sizes passed for their logarithms."""
    assert [c.step_size for c in mb.make_grid("sgld", [1.5, 0.5], [10])] == [10.0**1.5, 10.0**0.5]


# ---------------------------------------------------------------------------------------------
# Budgets that price out a whole batch size (issue 46): found, sized, refused on request
# ---------------------------------------------------------------------------------------------
def _priced_grid(sampler="sghmc-cv"):
    return mb.make_grid(sampler, [-2.0, -3.0, -4.0], [400, 40, 4], (5, 10))


def test_priced_out_batches_are_those_round_zero_prices_out():
    target, budget = _small_logistic(n=400), 3.0
    grid = _priced_grid()
    priced_out = mb.priced_out_batches(target, grid, budget, "gradients", centre=np.zeros(3))
    result = mb.mamba(target, grid, np.zeros(3), budget, np.random.default_rng(1), centre=np.zeros(3))
    round0 = [row for row in result.log if row["round"] == 0]
    by_batch = {n: [row["priced_out"] for row in round0 if row["batch_size"] == n] for n in (400, 40, 4)}
    assert priced_out == sorted(n for n, flags in by_batch.items() if all(flags))
    assert priced_out and set(priced_out) != set(by_batch)      # the test means something: some, not all


@pytest.mark.parametrize("sampler", ["sgld", "sghmc", "sgnht-cv"])
def test_budget_scoring_every_batch_is_the_least_that_does(sampler):
    target, centre = _small_logistic(n=400), np.zeros(3)
    grid = _priced_grid(sampler)
    needed = mb.budget_scoring_every_batch(target, grid, "gradients", centre)
    assert mb.priced_out_batches(target, grid, needed, "gradients", centre) == []
    assert mb.priced_out_batches(target, grid, 0.99 * needed, "gradients", centre) != []
    # r_0 = R / (1 + 3 + ... + 3^(K-1)), K = floor(log_3 arms): 9 arms (18 for SGHMC) give K = 2, r_0 = R / 4;
    # the full batch's cheapest step is the dearest: L = 5 gradients for SGHMC, one otherwise
    assert mb.n_rounds(len(grid), 3) == 2
    assert needed == pytest.approx(4 * 2 * (5.0 if sampler == "sghmc" else 1.0))


def test_mamba_can_refuse_a_budget_that_prices_out_a_batch_size():
    target, centre = _small_logistic(n=400), np.zeros(3)
    grid = _priced_grid("sgld")
    with pytest.raises(ValueError, match=r"budget 3 .* batch size\(s\) \[400\].* at least 8"):
        mb.mamba(target, grid, np.zeros(3), 3.0, np.random.default_rng(2), require_every_batch=True)
    result = mb.mamba(target, grid, np.zeros(3), 8.0, np.random.default_rng(2), require_every_batch=True)
    assert not all(row["priced_out"] for row in result.log if row["round"] == 0 and row["batch_size"] == 400)


def test_the_codes_fssd_is_fssd_opt_at_one_location():
    """The authors' code repeats one test location J times; identical locations stay identical under the
    optimisation and give the FSSD of one, so 'fssd-code' is FSSD-opt with a single location."""
    from mcmc_lib import diagnostics
    rng = np.random.default_rng(3)
    x = rng.standard_normal((60, 3))
    scores = -x
    v = diagnostics.initial_test_locations(x, 1, np.random.default_rng(4))
    repeated = diagnostics.optimise_test_locations(x, scores, np.repeat(v, 10, axis=0), 20)
    single = diagnostics.optimise_test_locations(x, scores, v, 20)
    assert np.all(repeated == repeated[0])
    # the gradient of each of J identical locations is 1/J of one location's, which Adam's normalisation
    # undoes up to its epsilon: the same locations and FSSD to about 1e-6
    np.testing.assert_allclose(repeated[0], single[0], rtol=1e-5)
    assert diagnostics.fssd(x, scores, repeated) == pytest.approx(diagnostics.fssd(x, scores, single), rel=1e-5)
    target = _small_logistic(n=400)
    draws = 0.1 * rng.standard_normal((40, 3))
    located = diagnostics.initial_test_locations(draws, 1, np.random.default_rng(5))
    scores = mb.full_scores(target, draws)
    code_locations = diagnostics.optimise_test_locations(draws, scores, np.repeat(located, 10, axis=0), 100, 1e-3)
    assert mb.stein_discrepancy(target, draws, "fssd-code", np.random.default_rng(5)) == diagnostics.fssd(
        draws, scores, code_locations)


# ---------------------------------------------------------------------------------------------
# One gather for both control-variate terms; one minibatch shared by a grid-search group (issue 46)
# ---------------------------------------------------------------------------------------------
def _two_gathers(target, w, centre, centre_grad, idx):
    """The control-variate estimate as two separate vectorised minibatch gradients (the earlier code)."""
    def one(points):
        Xb, tb = target.X[idx], target.t[idx]
        resid = tb - mb._sigmoid(np.einsum("cnd,cd->cn", Xb, points))
        return (target.n_data / idx.shape[1]) * np.einsum("cn,cnd->cd", resid, Xb) - points / target.prior_var
    return one(w) + centre_grad - one(np.broadcast_to(centre, w.shape))


def test_control_variate_estimate_gathers_once_and_is_bitwise_the_same():
    target = _small_logistic(n=500)
    centre = np.array([0.5, -0.2, 0.1])
    estimator = mb.GradientEstimator(target, 50, centre)
    w = np.random.default_rng(7).standard_normal((4, 3))
    rng = np.random.default_rng(8)
    g = estimator(rng, w)
    idx = estimator.stream.perm[:, :50]                          # the minibatch that call took
    np.testing.assert_array_equal(g, _two_gathers(target, w, centre, estimator.centre_grad, idx))


@pytest.mark.parametrize("cv", [False, True])
def test_shared_minibatch_gives_every_chain_the_same_rows_and_stays_unbiased(cv):
    target = _small_logistic(n=300)
    centre = np.array([0.3, 0.1, -0.2]) if cv else None
    shared = mb.GradientEstimator(target, 30, centre, shared=True)
    w = np.tile(np.array([0.7, -0.2, 0.4]), (3, 1))
    rng = np.random.default_rng(9)
    draws = np.stack([shared(rng, w) for _ in range(2000)])       # (draws, chains, d)
    assert shared.stream.n_chains == 1
    np.testing.assert_allclose(draws[:, 0], draws[:, 2], rtol=1e-12)   # same point, same rows: same estimate
    exact = target.grad_logp(w[:1])[0]
    se = draws[:, 0].std(axis=0) / np.sqrt(len(draws))
    assert np.all(np.abs(draws[:, 0].mean(axis=0) - exact) < 4 * se)
    # one call: every chain's estimate is the minibatch gradient on the stream's first rows
    fresh = mb.GradientEstimator(target, 30, centre, shared=True)
    points = np.random.default_rng(11).standard_normal((3, 3))
    g = fresh(np.random.default_rng(12), points)
    rows = fresh.stream.perm[0, :30]
    expected = target.minibatch_grad(points, rows)
    if cv:
        expected = expected + fresh.centre_grad - target.minibatch_grad(np.tile(centre, (3, 1)), rows)
    np.testing.assert_allclose(g, expected, rtol=1e-10)


def test_grid_search_can_share_a_minibatch_per_group():
    target = _small_logistic(n=400)
    configs = mb.make_grid("sgld", [-2.0, -3.0, -4.0], [40])
    best, losses = mb.grid_search(target, configs, np.zeros(3), 50, np.random.default_rng(10),
                                  lambda d: float(np.mean(d ** 2)), shared_minibatch=True)
    assert best in configs and np.all(np.isfinite(losses))


# ---------------------------------------------------------------------------------------------
# Issue 46: SGHMC in the authors' order (the gradient before the move) through every entry point
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("stale", [False, True])
def test_sghmc_step_matches_its_formula_in_either_order(stale):
    """Two leapfrog steps written out with the same normal draws: the code's order (stale) takes the
    gradient at the point before each move, Chen et al.'s at the point after it."""
    h, alpha, L = np.array([0.01, 0.02]), 0.05, 2
    x0 = np.array([[1.0, -2.0], [0.5, 0.3]])
    grad = lambda rng, x: -3.0 * x                       # deterministic: no draw of its own
    state = mb.SGState(x0.copy(), np.zeros_like(x0), np.zeros((2, 1)))
    out = mb.sghmc_step(np.random.default_rng(4), state, h, grad, L, alpha, stale_gradient=stale)
    rng = np.random.default_rng(4)
    x, v = x0.copy(), np.sqrt(h)[:, None] * rng.standard_normal(x0.shape)
    for _ in range(L):
        g = -3.0 * x if stale else -3.0 * (x + v)
        x = x + v
        v = v + h[:, None] * g - alpha * v + np.sqrt(2 * alpha * h)[:, None] * rng.standard_normal(x.shape)
    np.testing.assert_allclose(out.x, x, rtol=1e-14)
    np.testing.assert_allclose(out.v, v, rtol=1e-14)


@pytest.mark.parametrize("entry", ["mamba", "grid_search"])
def test_mamba_and_grid_search_run_sghmc_in_the_order_asked(monkeypatch, entry):
    """stale_gradient reaches every SGMCMC that MAMBA and grid search build, and changes the run."""
    seen = []
    original = mb.SGMCMC.__init__

    def recording(self, *args, **kwargs):
        seen.append(kwargs.get("stale_gradient", False))
        original(self, *args, **kwargs)

    monkeypatch.setattr(mb.SGMCMC, "__init__", recording)
    target = _small_logistic(n=400)
    configs = mb.make_grid("sghmc", [-2.0, -3.0], [40, 400], (5,))
    results = []
    for stale in (False, True):
        seen.clear()
        rng = np.random.default_rng(12)
        if entry == "mamba":
            out = mb.mamba(target, configs, np.zeros(3), 200.0, rng, stale_gradient=stale)
            results.append([r["metric"] for r in out.log])
        else:
            results.append(mb.grid_search(target, configs, np.zeros(3), 30, rng, lambda d: float(np.mean(d ** 2)),
                                          stale_gradient=stale)[1])
        assert seen and all(s is stale for s in seen)
    assert results[0] != results[1]
    with pytest.raises(ValueError, match="stale_gradient"):
        (mb.mamba(target, configs, np.zeros(3), 200.0, np.random.default_rng(1), stale_gradient="yes")
         if entry == "mamba" else
         mb.grid_search(target, configs, np.zeros(3), 30, np.random.default_rng(1), np.mean, stale_gradient="yes"))
