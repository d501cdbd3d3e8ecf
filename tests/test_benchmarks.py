"""The benchmark script measures samplers at a working operating point (not a test of speed:
speed is measured by `make bench`, never asserted)."""
import importlib.util
from pathlib import Path

import numpy as np
import pytest

from mcmc_lib import targets

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "run_benchmarks.py"


def _load_script():
    spec = importlib.util.spec_from_file_location("run_benchmarks", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("sampler_name", ["RWM", "MALA", "HMC-10"])
def test_benchmark_rows_are_measured_where_the_sampler_accepts(sampler_name):
    bench = _load_script()
    row = bench.benchmark(sampler_name, targets.neal_gaussian(100), 3, 200, np.random.default_rng(0))
    assert 0.1 < row["acceptance"] < 0.95, f"{sampler_name} benchmarked at acceptance {row['acceptance']:.3g}"
    assert row["overhead_ratio"] > 0 and row["iterations_per_second_per_chain"] > 0
    assert row["evaluations_per_chain"] == pytest.approx(200 * (10 if sampler_name == "HMC-10" else 1))
    assert row["microseconds_per_chain_iteration"] == pytest.approx(1e6 * row["sampling_cpu_seconds"] / (200 * 3))
    assert ("microseconds_per_leapfrog_step" in row) == (sampler_name == "HMC-10")


@pytest.mark.parametrize("make_target,floor", [
    (lambda rng: targets.LogisticRegression(np.column_stack([rng.standard_normal((300, 4)), np.ones(300)]),
                                            (rng.uniform(size=300) < 0.3).astype(float)), "X w and X^T r"),
    (lambda rng: targets.squared_exponential_gaussian(12), "(x - m) S^-1"),
    (lambda rng: targets.neal_gaussian(30), "(x - m) / v"),
])
def test_target_floor_rows_hold_a_ratio_to_the_matrix_products(make_target, floor):
    """Each hot target is timed against its floor (the products alone, on arrays of the same
    shapes); the ratio is computed, never asserted against a speed."""
    bench = _load_script()
    rng = np.random.default_rng(1)
    target = make_target(rng)
    row = bench.target_floor("test", target, 3, rng, n_pairs=3, block_seconds=0.002)
    assert row["floor"] == floor and row["n_chains"] == 3 and row["dim"] == target.dim
    assert row["logp_and_grad_microseconds"] > 0 and row["floor_microseconds"] > 0
    assert np.isfinite(row["floor_ratio"]) and row["floor_ratio"] > 0
    is_regression = isinstance(target, targets.LogisticRegression)
    assert ("floor_with_exp_ratio" in row) == is_regression
    if is_regression:
        assert row["floor_with_exp_microseconds"] > 0 and np.isfinite(row["floor_with_exp_ratio"])


def small_regression(rng, n_data):
    """A 3-d logistic regression on n_data random rows, its design matrix, and two states."""
    X = rng.standard_normal((n_data, 3))
    target = targets.LogisticRegression(X, (rng.uniform(size=n_data) < 0.5).astype(float))
    return target, X, rng.standard_normal((2, 3))


def test_exp_floor_kernel_computes_the_shared_exp():
    bench = _load_script()
    rng = np.random.default_rng(4)
    target, X, w = small_regression(rng, n_data=40)
    e, product = bench.exp_floor_kernel(target, w, rng)()
    np.testing.assert_allclose(e, np.exp(-np.abs(w @ X.T)))
    assert product.shape == (2, 3) and bench.exp_floor_kernel(targets.neal_gaussian(5), w, rng) is None


def test_floor_kernel_computes_the_products_of_the_target():
    """The floor of logistic regression is the products X w and X^T r that logp_and_grad makes."""
    bench = _load_script()
    rng = np.random.default_rng(2)
    target, X, w = small_regression(rng, n_data=50)
    _, kernel = bench.floor_kernel(target, w, rng)
    eta, product = kernel()
    assert eta.shape == (2, 50) and product.shape == (2, 3)
    np.testing.assert_allclose(eta, w @ X.T)
