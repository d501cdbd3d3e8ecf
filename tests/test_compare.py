"""The combinations of the comparison chapter (book/compare.md): learned coordinates, and every combined
sampler targets the right distribution."""
import autograd
import autograd.numpy as anp
import numpy as np
import pytest

from mcmc_lib import targets as T
from mcmc_lib.harness import run
from mcmc_lib.methods import kmc as K
from mcmc_lib.methods.compare import (HistoryFiniteSurrogate, LearnedCoordinates, NonrevKMC, learned_factors,
                                      online_estimator_from_history)
from mcmc_lib.methods.gsm import gadMALAf, gadRWM
from mcmc_lib.methods.mcma import MCMA
from mcmc_lib.methods.nonrev_u import NonrevMALA, NonrevRWM, PersistentLangevin

from moments import assert_moments_match, correlated_target
from planted import assert_mutation_caught


def random_factors(rng, n_chains, dim):
    """Lower-triangular, well-conditioned, different per chain, with off-diagonal entries (so that
    L and L^T differ)."""
    factors = np.tril(rng.normal(0.0, 0.4, (n_chains, dim, dim)), -1)
    factors[:, np.arange(dim), np.arange(dim)] = rng.uniform(0.5, 1.5, (n_chains, dim))
    return factors


def test_learned_coordinates_log_density_and_gradient_match_autograd():
    rng = np.random.default_rng(1)
    base = T.TwistedGaussian(3, b=0.1, v=4.0)
    factors = random_factors(rng, 4, 3)
    mapped = LearnedCoordinates(base, factors)
    z = rng.normal(size=(4, 3))

    def composed(z_rows):
        x_rows = anp.einsum("nij,nj->ni", factors, z_rows)
        x1, x2, x3 = x_rows[:, 0], x_rows[:, 1], x_rows[:, 2]
        twisted = x2 + base.b * x1 ** 2 - base.b * base.v
        return -0.5 * (x1 ** 2 / base.v + twisted ** 2 + x3 ** 2)

    np.testing.assert_allclose(mapped.logp(z), composed(z), rtol=1e-12)
    np.testing.assert_allclose(mapped.grad_logp(z), autograd.grad(lambda w: anp.sum(composed(w)))(z),
                               rtol=1e-10, atol=1e-12)
    logp, grad = mapped.logp_and_grad(z)
    np.testing.assert_allclose(grad, mapped.grad_logp(z), rtol=1e-12)
    np.testing.assert_allclose(mapped.to_z(mapped.to_x(z)), z, rtol=1e-10, atol=1e-12)


def test_learned_coordinates_refuse_what_they_cannot_map():
    base = T.Gaussian(np.eye(2))
    with pytest.raises(ValueError, match=r"factors must have shape \(n_chains, 2, 2\)"):
        LearnedCoordinates(base, np.eye(2))
    with pytest.raises(ValueError, match="invertible"):
        LearnedCoordinates(base, np.zeros((3, 2, 2)))
    with pytest.raises(TypeError, match="target must be a mcmc_lib Target"):
        LearnedCoordinates(lambda x: x, np.ones((1, 2, 2)))
    mapped = LearnedCoordinates(base, np.broadcast_to(np.eye(2), (3, 2, 2)))
    with pytest.raises(ValueError, match="one row per chain"):
        mapped.logp(np.zeros((2, 2)))


def test_learned_factors_need_a_warm_up():
    target = correlated_target()
    with pytest.raises(ValueError, match="has learned no linear map"):
        learned_factors(gadRWM(target))


def test_the_frozen_gadmalaf_proposal_is_mala_with_step_one_in_learned_coordinates():
    """Eq. (eq-cmp-coordinates): from one state and one noise draw, MALA with step 1 on the mapped target
    proposes L^{-1} of gadMALAf's proposal, with the same log Hastings ratio."""
    rng = np.random.default_rng(3)
    target = correlated_target()
    n = 5
    adaptive = gadMALAf(target)
    state = adaptive.init(target.mean + rng.normal(size=(n, 2)))
    adaptive.L = random_factors(rng, n, 2)
    adaptive._cache(state.x, None)             # forget the cached L^T g: L changed
    adaptive._cached_x = None
    mapped = LearnedCoordinates(target, adaptive.L)
    combined = NonrevMALA(mapped, 1.0)          # delta=None: the standard decision, u drawn afresh
    z_state = combined.init(mapped.to_z(state.x))
    # the same eps drives both: draw it from equal generators
    seed = 11
    adaptive.step(np.random.default_rng(seed), state)
    eps, _, _, y, _, _, log_ratio = adaptive._last
    from mcmc_lib.samplers.classic import mala_proposal
    z_y, _, _, z_log_ratio = mala_proposal(np.random.default_rng(seed), mapped, z_state, combined.step_size)
    np.testing.assert_allclose(mapped.to_x(z_y), y, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(z_log_ratio, log_ratio, rtol=1e-9, atol=1e-10)


def fixed_factor_runs(make_sampler, seed, n_chains=4, n_warmup=1000, n_samples=8000):
    target = correlated_target()
    rng = np.random.default_rng(seed)
    mapped = LearnedCoordinates(target, random_factors(rng, n_chains, 2))
    x0 = target.mean + rng.normal(size=(n_chains, 2))
    result = run(make_sampler(mapped), mapped.to_z(x0), n_warmup, n_samples, rng)
    x = np.stack([mapped.to_x(result.samples[:, t]) for t in range(result.samples.shape[1])], axis=1)
    return target, result, x


COMBINED = {
    "RWM, non-reversible u": lambda t: NonrevRWM(t, 1.0, delta=0.3),
    "MALA, non-reversible u": lambda t: NonrevMALA(t, 0.3, delta=0.5),
    "persistent Langevin, non-reversible u": lambda t: PersistentLangevin(t, 0.3, alpha=0.9, delta=0.05),
    "persistent Langevin, standard u": lambda t: PersistentLangevin(t, 0.3, alpha=0.9),
}


@pytest.mark.parametrize("name", COMBINED)
def test_combined_samplers_in_learned_coordinates_are_exact(name):
    target, result, x = fixed_factor_runs(COMBINED[name], seed=[7, len(name), ord(name[0])])
    # every chain moves (a chain stuck at its start would pass a moments test only by its variance)
    assert np.all((0.2 < result.accept_rate) & (result.accept_rate < 0.99)), result.accept_rate
    assert_moments_match(x, target.mean, target.cov)


WARM_UPS = {
    "gadRWM then RWM, non-reversible u": (lambda t: gadRWM(t), lambda m: NonrevRWM(m, 1.0, delta=0.3)),
    "gadMALAf then MALA, non-reversible u": (lambda t: gadMALAf(t), lambda m: NonrevMALA(m, 1.0, delta=0.5)),
    "gadMALAf then persistent Langevin": (lambda t: gadMALAf(t),
                                          lambda m: PersistentLangevin(m, 0.3, alpha=0.9, delta=0.05)),
    "M-CMA then RWM, non-reversible u": (lambda t: MCMA(t), lambda m: NonrevRWM(m, 1.0, delta=0.3)),
    # the controls the chapter pairs them with: the frozen proposals with the standard decision
    "gadRWM then RWM, standard u": (lambda t: gadRWM(t), lambda m: NonrevRWM(m, 1.0)),
    "M-CMA then RWM, standard u": (lambda t: MCMA(t), lambda m: NonrevRWM(m, 1.0)),
    "gadMALAf then MALA, standard u": (lambda t: gadMALAf(t), lambda m: NonrevMALA(m, 1.0)),
    "gadMALAf then persistent Langevin, standard u": (lambda t: gadMALAf(t),
                                                      lambda m: PersistentLangevin(m, 0.5, alpha=0.95)),
}


@pytest.mark.parametrize("name", WARM_UPS)
def test_adaptation_then_a_combined_sampler_is_exact(name):
    """The whole pipeline: the adaptive sampler's warm-up learns L per chain, then the combined sampler runs
    in those coordinates and its draws, mapped back, have the target's moments."""
    make_adaptive, make_combined = WARM_UPS[name]
    target = correlated_target()
    rng = np.random.default_rng([8, len(name)])
    adaptive = make_adaptive(target)
    warm = run(adaptive, target.mean + rng.normal(size=(4, 2)), 3000, 1, rng)
    mapped = LearnedCoordinates(target, learned_factors(adaptive))
    result = run(make_combined(mapped), mapped.to_z(warm.samples[:, -1]), 500, 8000, rng)
    x = np.stack([mapped.to_x(result.samples[:, t]) for t in range(result.samples.shape[1])], axis=1)
    assert_moments_match(x, target.mean, target.cov)


# ------------------------------------------------------------------ KMC finite on the chain's history

def test_online_estimator_from_history_is_the_online_estimator_after_every_point():
    """Eq. (eq-cmp-finite-history): the batch state equals feeding the points one by one."""
    rng = np.random.default_rng(5)
    features = K.RandomFeatures.gaussian(rng, 3, 20, 2.0)
    X = rng.normal(size=(30, 3))
    online = K.OnlineFiniteEstimator(features, 0.3)
    for x in X:
        online.update(x)
    batch = online_estimator_from_history(features, X, 0.3)
    np.testing.assert_allclose(batch.L @ batch.L.T, online.L @ online.L.T, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(batch.b, online.b, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(batch.theta, online.theta, rtol=1e-8, atol=1e-10)
    assert batch.n == online.n == 30
    # and the online updates continue from it as from the online one
    x = rng.normal(size=3)
    np.testing.assert_allclose(batch.update(x).theta, online.update(x).theta, rtol=1e-8, atol=1e-10)
    with pytest.raises(ValueError, match="at least one point of dimension 3"):
        online_estimator_from_history(features, np.zeros((0, 3)), 0.3)


def test_history_finite_surrogate_is_a_random_walk_until_it_learns_then_fits_the_target():
    rng = np.random.default_rng(6)
    target = T.Gaussian(np.array([1.0, 4.0]))
    surrogate = HistoryFiniteSurrogate(2, 2, 50, np.linspace(-1, 3, 3), np.log([1e-3, 1e-1]))
    np.testing.assert_array_equal(surrogate.grad(rng.normal(size=(2, 2))), 0.0)
    history = target.sample(rng, 400)
    surrogate.learn(0, history, rng)
    assert np.isfinite(surrogate.sigma[0]) and np.isnan(surrogate.sigma[1])       # chain 1 has not learned
    points = target.sample(rng, 200)
    both = [surrogate.grad(np.stack([p, p])) for p in points]         # one row per chain: chain 0, chain 1
    np.testing.assert_array_equal([g[1] for g in both], 0.0)
    learned, true = np.array([g[0] for g in both]), target.grad_logp(points)
    # the learned gradient points the way the true one does over most of the target's bulk
    cosine = np.sum(learned * true, axis=1) / (np.linalg.norm(learned, axis=1) * np.linalg.norm(true, axis=1))
    assert np.median(cosine) > 0.8
    with pytest.raises(ValueError, match="n_features"):
        HistoryFiniteSurrogate(1, 2, 0, [0.0], [0.0])
    with pytest.raises(ValueError, match="non-empty and finite"):
        HistoryFiniteSurrogate(1, 2, 5, [], [0.0])


def test_kmc_finite_learned_from_its_history_keeps_the_target_after_its_warm_up():
    """KMC with the history-learned finite surrogate, as the chapter runs it: learning at two points of the
    warm-up, online updates, step sizes adapted; then everything is frozen. The frozen kernel must leave the
    target invariant: 4,000 chains started from exact draws, with chain 0's learned surrogate and step sizes,
    still have the target's moments after 10 steps (independent draws, so mixing between the surrogate's
    wells, which is slow, does not enter)."""
    target = correlated_target()
    rng = np.random.default_rng(9)
    grids = (np.linspace(-1, 3, 3), np.log([1e-3, 1e-1]))
    learned = HistoryFiniteSurrogate(2, 2, 40, *grids)
    warm = K.KMC(target, learned, (0.2, 0.4), (3, 8), adapt_rng=np.random.default_rng(10), adapt_step_size=True,
                 learn_at=(100, 400))
    run(warm, target.mean + rng.normal(size=(2, 2)), 800, 1, rng)
    assert np.all(np.isfinite(learned.sigma))                     # both chains learned
    n = 4000
    frozen = HistoryFiniteSurrogate(n, 2, 40, *grids)
    frozen.omega[:], frozen.phases[:], frozen.theta[:] = learned.omega[0], learned.phases[0], learned.theta[0]
    assert np.any(frozen.grad(target.sample(rng, n)) != 0)
    sampler = K.KMC(target, frozen, tuple(np.exp(warm.log_range[0])), (3, 8))
    result = run(sampler, target.sample(rng, n), 0, 10, rng)
    assert 0.3 < result.accept_rate.mean() < 1.0
    assert_moments_match(result.samples[:, -1][None], target.mean, target.cov)


def warmed_kmc_finite(target, rng):
    """KMC finite warmed up on its own history (two chains), as the chapter runs it."""
    learned = HistoryFiniteSurrogate(2, 2, 40, np.linspace(-1, 3, 3), np.log([1e-3, 1e-1]))
    warm = K.KMC(target, learned, (0.2, 0.4), (3, 8), adapt_rng=np.random.default_rng(10), adapt_step_size=True,
                 learn_at=(100, 400))
    run(warm, target.mean + rng.normal(size=(2, 2)), 800, 1, rng)
    return warm, learned


def frozen_copies(warm, learned, n):
    """n chains of chain 0's learned surrogate and step-size range, nothing adapting."""
    frozen = HistoryFiniteSurrogate(n, 2, 40, *learned.grid)
    frozen.omega[:], frozen.phases[:], frozen.theta[:] = learned.omega[0], learned.phases[0], learned.theta[0]
    return K.KMC(warm.target, frozen, tuple(np.exp(warm.log_range[0])), (3, 8))


def test_kmc_step_is_its_proposal_then_a_metropolis_decision():
    """KMC.step = propose, then the Metropolis decision with the next uniform of the same generator: the
    split leaves KMC's own runs as they were (the same random numbers in the same order)."""
    target = correlated_target()
    warm, learned = warmed_kmc_finite(target, np.random.default_rng(9))
    kmc = frozen_copies(warm, learned, 50)
    state = kmc.init(target.sample(np.random.default_rng(3), 50))
    stepped, info = kmc.step(np.random.default_rng(4), state)
    rng = np.random.default_rng(4)
    y, logp_y, log_ratio = kmc.propose(rng, state)
    accept = np.log(rng.uniform(size=50)) < log_ratio
    np.testing.assert_array_equal(info.accepted, accept)
    np.testing.assert_array_equal(stepped.x, np.where(accept[:, None], y, state.x))
    assert 0 < accept.sum() < 50


def test_kmc_with_non_reversible_u_keeps_the_target():
    """The chapter's pipeline: KMC finite's warm-up on its own history, then its frozen kernel decided by
    non-reversible u (delta 0.7), which leaves pi(x) x uniform(v) invariant: 4,000 chains started from exact
    draws of x and uniform v, with chain 0's learned surrogate and step sizes, still have the target's moments
    after 10 steps, and v stays uniform (independent draws, so the slow mixing between the surrogate's wells
    does not enter)."""
    target = correlated_target()
    rng = np.random.default_rng(11)
    warm, learned = warmed_kmc_finite(target, rng)
    n = 4000
    sampler = NonrevKMC(frozen_copies(warm, learned, n), delta=0.7)
    result_state = sampler.init(target.sample(rng, n), v0=rng.uniform(-1, 1, n))
    accepted = 0
    for _ in range(10):
        result_state, info = sampler.step(rng, result_state)
        accepted += info.accepted.mean() / 10
    assert 0.3 < accepted < 1.0
    # the state's log density is that of its x, accepted or not (KMC's ratio recycles it)
    np.testing.assert_allclose(result_state.logp, target.logp(result_state.x), rtol=1e-12)
    assert_moments_match(result_state.x[None], target.mean, target.cov)
    assert abs(np.mean(result_state.v)) < 0.05 and abs(np.mean(np.abs(result_state.v)) - 0.5) < 0.03


def test_non_reversible_kmc_refuses_what_it_cannot_run():
    target = correlated_target()
    with pytest.raises(TypeError, match="kmc must be a KMC sampler"):
        NonrevKMC(NonrevRWM(target, 1.0))
    kmc = K.KMC(target, K.TrueGradient(target), (0.1, 0.2), (3, 5))
    with pytest.raises(ValueError, match="delta"):
        NonrevKMC(kmc, delta=2.0)
    started = NonrevKMC(kmc)
    started.init(np.zeros((2, 2)))                          # starts the KMC sampler: 2 chains
    np.testing.assert_allclose(started.tuning()["step_size_range"], [[0.1, 0.2]] * 2)
    assert started.step_size is None and "step_size" not in started.tuning()     # KMC's ranges, no placeholder
    with pytest.raises(ValueError, match="one row per chain of the KMC sampler"):
        NonrevKMC(kmc).init(np.zeros((3, 2)))


MUTATIONS = {
    # grad_z = L^T grad_x: with L instead of L^T the MALA proposal's ratio is wrong (caught by the autograd
    # check and by the one-step identity with gadMALAf)
    "gradient-not-transposed": ("return rmatvec(self.factors, self.target.grad_logp(self.to_x(z)))",
                                "return matvec(self.factors, self.target.grad_logp(self.to_x(z)))",
                                "match_autograd"),
    "joint-gradient-not-transposed": ("return logp, rmatvec(self.factors, grad)",
                                      "return logp, matvec(self.factors, grad)",
                                      "match_autograd or step_one"),
    # eq. (eq-cmp-finite-history): the ridge stands in for the first point's C-term, so C is summed over the
    # points after the first; summing over all of them gives another system than the online estimator's
    "history-c-includes-first-point": ("A += (n - 1) * finite_b_C(features, X[1:])[1]",
                                       "A += n * finite_b_C(features, X)[1]",
                                       "online_estimator_from_history"),
    "history-ridge-not-averaged": ("    A /= n\n", "    A /= 1\n", "online_estimator_from_history"),
    # a non-reversible KMC that keeps the proposal's log density after a rejection misjudges every later
    # ratio; one that moves whatever the decision is a different kernel
    "nonrev-kmc-keeps-proposed-logp": ("np.where(accepted, logp_y, state.logp), None, v)",
                                       "np.where(accepted, logp_y, logp_y), None, v)", "non_reversible_u"),
    "nonrev-kmc-always-moves": ("NonrevState(np.where(accepted[:, None], y, state.x),",
                                "NonrevState(np.where(True, y, state.x),", "non_reversible_u"),
}


@pytest.mark.parametrize("name", MUTATIONS)
def test_planted_bug_is_caught(name, tmp_path):
    original, mutant, selection = MUTATIONS[name]
    assert_mutation_caught(tmp_path, "mcmc_lib/methods/compare.py", original, mutant, "test_compare.py", selection)
