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


# --- the one-pass logistic regression: one exp shared by softplus and sigmoid -------------------
@pytest.mark.parametrize("scale", [0.0, 0.3, 3.0, 300.0])
def test_logistic_one_pass_matches_separate_calls_and_autograd(scale):
    """logp_and_grad = (logp, grad_logp) = autograd's, from eta = 0 to |eta| in the hundreds,
    where the naive log(1 + exp(eta)) and 1 / (1 + exp(-eta)) overflow; no floating-point warning."""
    rng = np.random.default_rng(11)
    target = _logistic_target(rng, n=2500, d=5)          # 2500 > 1000: several product chunks in _sum_log
    w = scale * rng.standard_normal((4, target.dim))
    w[0] = 0.0
    reference = logistic_logp_autograd(target)
    with np.errstate(over="raise", divide="raise", invalid="raise"):
        logp, grad = target.logp_and_grad(w)
        separate = (target.logp(w), target.grad_logp(w))
    if scale == 300.0:
        assert np.abs(w @ target.X.T).max() > 710        # exp(eta) overflows beyond 709.8
    np.testing.assert_array_equal(logp, separate[0])
    np.testing.assert_array_equal(grad, separate[1])
    np.testing.assert_allclose(logp, reference(w), rtol=1e-12)
    expected = autograd_grad(reference, w)
    scale_of_terms = np.abs(target.X).sum(axis=0) + np.abs(w) / target.prior_var   # |grad| before cancellation
    assert np.all(np.abs(grad - expected) <= 1e-12 * scale_of_terms)


def test_logistic_extreme_eta_per_datum():
    """With eta = +-800 the log density and gradient are exact: t eta - softplus(eta) is 0 or -800
    per datum, and the residual t - sigmoid(eta) is 0 or +-1."""
    X = np.array([[1.0], [1.0], [-1.0], [-1.0]])
    target = T.LogisticRegression(X, np.array([1.0, 0.0, 1.0, 0.0]), prior_var=1e6)
    w = np.array([[800.0], [-800.0]])
    with np.errstate(over="raise", divide="raise", invalid="raise"):
        logp, grad = target.logp_and_grad(w)
    prior = 0.5 * 800.0**2 / 1e6
    np.testing.assert_allclose(logp, [-1600.0 - prior, -1600.0 - prior], rtol=1e-15)
    np.testing.assert_allclose(grad, [[-2.0 - 800 / 1e6], [2.0 + 800 / 1e6]], rtol=1e-15)


def test_sigmoid_is_exact_and_silent_for_every_eta():
    from scipy.special import expit

    z = np.array([-1000.0, -800.0, -745.0, -40.0, -1e-3, -0.0, 0.0, 1e-3, 40.0, 800.0, np.inf, -np.inf])
    with np.errstate(over="raise", divide="raise", invalid="raise"):
        np.testing.assert_allclose(T._sigmoid(z), expit(z), rtol=2e-16, atol=0)
    assert np.isnan(T._sigmoid(np.array([np.nan])))[0]


def test_sum_log_by_chunked_products_cannot_overflow():
    """2**2500 overflows a float; products of at most 1000 factors of 2 do not."""
    u = np.full((2, 2500), 2.0)
    u[1, ::7] = 1.0 + 1e-12
    np.testing.assert_allclose(T._sum_log(u, np.arange(0, 2500, T._PRODUCT_CHUNK)), np.log(u).sum(axis=1),
                               rtol=1e-14)


def test_logistic_nonfinite_weights_give_nonfinite_results():
    target = _logistic_target(np.random.default_rng(12))
    w = np.zeros((3, target.dim))
    w[0, 0], w[1, 1], w[2, 2] = np.nan, np.inf, -np.inf
    with np.errstate(invalid="ignore", over="ignore"):
        logp, grad = target.logp_and_grad(w)
    assert not np.any(np.isfinite(logp))
    assert not np.any(np.all(np.isfinite(grad), axis=1))


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


# --- logp and gradients of the wrong shape are refused, naming the culprit ----------------------
@pytest.mark.parametrize("logp_fn, got", [
    (lambda x: -0.5 * anp.sum(x**2), r"\(\)"),                                # the sum over rows
    (lambda x: -0.5 * anp.sum(x**2, axis=1, keepdims=True), r"\(4, 1\)"),    # a column
    (lambda x: -0.5 * x**2, r"\(4, 3\)"),                                    # forgot to sum
])
def test_autograd_target_needs_one_value_per_row(logp_fn, got):
    """A logp_fn returning a scalar would give every chain the same log density; it must raise."""
    target = T.AutogradTarget(logp_fn, dim=3, name="mine")
    x = np.random.default_rng(6).standard_normal((4, 3))
    message = r"logp_fn of 'mine' must return one log density per row: shape \(4,\).*got shape " + got
    for evaluate in (target.logp, target.logp_and_grad):
        with pytest.raises(ValueError, match=message):
            evaluate(x)
    with pytest.raises(ValueError, match="logp_fn must be callable"):
        T.AutogradTarget(None, dim=3)


def test_hand_written_target_with_wrong_shapes_is_refused():
    class Bad(T.Target):
        name = "bad"

        def _logp(self, x):
            return -0.5 * np.sum(x**2, axis=1, keepdims=True)

        def _grad(self, x):
            return -x[:, :1]

    x = np.zeros((2, 3))
    with pytest.raises(ValueError, match=r"logp of 'bad' must return one log density per row.*\(2, 1\)"):
        Bad(3).logp(x)
    with pytest.raises(ValueError, match=r"gradient of logp of 'bad' must have shape \(2, 3\).*got shape \(2, 1\)"):
        Bad(3).grad_logp(x)


# --- Neal's Gaussian: diagonal, O(dim) memory ---------------------------------------------------
def test_neal_gaussian_is_diagonal_and_matches_the_dense_gaussian():
    neal = T.neal_gaussian(50)
    sds = np.arange(1, 51) / 50
    dense = T.Gaussian(sds**2)
    rng = np.random.default_rng(7)
    x, v = rng.standard_normal((6, 50)), rng.standard_normal((6, 50))
    for a, b in zip(neal.logp_and_grad(x), dense.logp_and_grad(x)):
        np.testing.assert_array_equal(a, b)            # the same floating-point numbers
    np.testing.assert_array_equal(neal.logp(x), dense.logp(x))
    np.testing.assert_array_equal(neal.grad_logp(x), dense.grad_logp(x))
    np.testing.assert_array_equal(neal.hessian_vector_product(x, v), dense.hessian_vector_product(x, v))
    np.testing.assert_array_equal(neal.mahalanobis_sq(x), dense.mahalanobis_sq(x))
    np.testing.assert_array_equal(neal.sample(np.random.default_rng(1), 5), dense.sample(np.random.default_rng(1), 5))
    # the dense views chapters and tests use are still there, built on request
    np.testing.assert_array_equal(neal.std, sds)
    np.testing.assert_array_equal(neal.cov, dense.cov)
    np.testing.assert_array_equal(neal.precision, dense.precision)
    np.testing.assert_array_equal(neal.hessian(), dense.hessian())
    np.testing.assert_array_equal(neal.chol, dense.chol)
    assert isinstance(neal, T.Gaussian) and neal.dim == 50 and np.all(neal.mean == 0)


def test_neal_gaussian_in_high_dimension_builds_no_matrix():
    """neal_gaussian(200_000) as a dense Gaussian would allocate dim^2 floats (320 GB)."""
    import tracemalloc

    tracemalloc.start()
    target = T.neal_gaussian(200_000)
    x = np.random.default_rng(8).standard_normal((2, 200_000))
    logp, grad = target.logp_and_grad(x)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 50e6                                   # a few vectors of 200,000 floats
    assert logp.shape == (2,) and grad.shape == (2, 200_000)
    np.testing.assert_allclose(grad, -x / target.variances)
    assert target.sample(np.random.default_rng(9), 3).shape == (3, 200_000)


@pytest.mark.parametrize("dim", [-3, 0, 2.5, True, "10"])
def test_neal_gaussian_reports_the_dim_it_was_given(dim):
    with pytest.raises(ValueError, match=f"dim must be a positive integer, got {dim!r}"):
        T.neal_gaussian(dim)
