"""Hand-derived gradients against autograd, exact draws against known moments, bad input."""
import autograd
import autograd.numpy as anp
import numpy as np
import pytest

from mcmc_lib import targets as T


def autograd_grad(logp_fn, x):
    return autograd.grad(lambda z: anp.sum(logp_fn(z)))(x)


def gaussian_logp_autograd(target):
    return lambda x: -0.5 * anp.sum((x - target.mean) @ target.precision * (x - target.mean), axis=1)


def twisted_logp_autograd(target):
    def logp(x):
        y2 = x[:, 1] + target.b * x[:, 0] ** 2 - target.v * target.b
        return -0.5 * (x[:, 0] ** 2 / target.v + y2**2 + anp.sum(x[:, 2:] ** 2, axis=1))
    return logp


def logistic_logp_autograd(target):
    def logp(w):
        eta = anp.dot(w, target.X.T)
        return anp.sum(eta * target.t - anp.logaddexp(0.0, eta), axis=1) - 0.5 * anp.sum(w**2, axis=1) / target.prior_var
    return logp


GAUSSIANS = [T.neal_gaussian(100), T.correlated_gaussian_2d(0.99), T.squared_exponential_gaussian(),
             T.paired_gaussian(16, 0.99), T.haario_target(1, 4), T.haario_target(2, 8),
             T.Gaussian(np.array([[2.0, 0.3], [0.3, 0.5]]), mean=np.array([1.0, -2.0]))]


@pytest.mark.parametrize("target", GAUSSIANS, ids=lambda t: t.name)
def test_gaussian_gradient_matches_autograd(target):
    x = np.random.default_rng(0).standard_normal((5, target.dim))
    logp, grad = target.logp_and_grad(x)
    np.testing.assert_allclose(grad, autograd_grad(gaussian_logp_autograd(target), x), rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(logp, gaussian_logp_autograd(target)(x), rtol=1e-10)
    np.testing.assert_allclose(target.grad_logp(x), grad)
    np.testing.assert_allclose(target.logp(x), logp)


@pytest.mark.parametrize("index,dim", [(3, 2), (3, 8), (4, 4), (4, 8)])
def test_twisted_gradient_matches_autograd(index, dim):
    target = T.haario_target(index, dim)
    x = 5 * np.random.default_rng(1).standard_normal((6, dim))
    logp, grad = target.logp_and_grad(x)
    reference = twisted_logp_autograd(target)
    np.testing.assert_allclose(logp, reference(x), rtol=1e-12)
    np.testing.assert_allclose(grad, autograd_grad(reference, x), rtol=1e-10, atol=1e-10)


def _logistic_target(rng, n=60, d=4):
    X = np.column_stack([rng.standard_normal((n, d - 1)), np.ones(n)])
    t = (rng.uniform(size=n) < 0.4).astype(float)
    return T.LogisticRegression(X, t, prior_var=2.0)


def test_logistic_gradient_hessian_and_minibatch():
    rng = np.random.default_rng(2)
    target = _logistic_target(rng)
    w = rng.standard_normal((3, target.dim))
    reference = logistic_logp_autograd(target)
    logp, grad = target.logp_and_grad(w)
    np.testing.assert_allclose(logp, reference(w), rtol=1e-12)
    np.testing.assert_allclose(grad, autograd_grad(reference, w), rtol=1e-10, atol=1e-10)
    hess = autograd.hessian(lambda v: reference(v[None, :])[0])(w[0])
    np.testing.assert_allclose(target.hessian(w)[0], hess, rtol=1e-9, atol=1e-9)
    # The full "minibatch" is the exact gradient; random minibatches average to it.
    np.testing.assert_allclose(target.minibatch_grad(w, np.arange(target.n_data)), grad, rtol=1e-10)
    estimates = [target.minibatch_grad(w, rng.choice(target.n_data, 10, replace=False)) for _ in range(4000)]
    np.testing.assert_allclose(np.mean(estimates, axis=0), grad, atol=0.5)


def test_autograd_target_and_counters():
    target = T.AutogradTarget(lambda x: -0.5 * anp.sum(x**2, axis=1) - anp.sum(anp.sin(x), axis=1), dim=3)
    x = np.random.default_rng(3).standard_normal((4, 3))
    np.testing.assert_allclose(target.grad_logp(x), -x - np.cos(x), rtol=1e-12)
    target.logp_and_grad(x)
    assert (target.n_logp_evals, target.n_grad_evals) == (4, 8)


@pytest.mark.parametrize("index", [3, 4])
def test_twisted_exact_draws_have_known_moments(index):
    target = T.haario_target(index, 4)
    x = target.sample(np.random.default_rng(4), 400_000)
    se_mean = np.sqrt(np.diag(target.cov) / len(x))
    assert np.all(np.abs(x.mean(axis=0)) < 5 * se_mean)
    np.testing.assert_allclose(np.var(x, axis=0), np.diag(target.cov), rtol=0.03)
    # phi_b(x) is N(0, diag(v, 1, ...)): its squared Mahalanobis norm is chi^2_d with mean d.
    assert abs(target.mahalanobis_sq(x).mean() - 4) < 0.03


def test_gaussian_sample_moments():
    target = T.paired_gaussian(3, 0.9)
    x = target.sample(np.random.default_rng(5), 200_000)
    np.testing.assert_allclose(np.cov(x.T), target.cov, atol=0.02)


@pytest.mark.parametrize("build,message", [
    (lambda: T.Gaussian(np.array([[1.0, 2.0], [2.0, 1.0]])), "cov"),
    (lambda: T.Gaussian(np.array([1.0, -1.0])), "cov"),
    (lambda: T.Gaussian(np.eye(2), mean=np.zeros(3)), "mean"),
    (lambda: T.correlated_gaussian_2d(1.0), "rho"),
    (lambda: T.haario_target(5, 2), "index"),
    (lambda: T.TwistedGaussian(1, 0.1), "dim"),
    (lambda: T.LogisticRegression(np.ones((3, 2)), np.array([0, 1, 2])), "t"),
    (lambda: T.LogisticRegression(np.ones((3, 2)), np.array([0, 1, 1]), prior_var=-1), "prior_var"),
])
def test_bad_arguments_raise_value_error_naming_them(build, message):
    with pytest.raises(ValueError, match=message):
        build()


def test_wrong_shape_raises():
    with pytest.raises(ValueError, match="x must have shape"):
        T.neal_gaussian(10).logp(np.zeros((2, 9)))
