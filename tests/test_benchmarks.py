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
