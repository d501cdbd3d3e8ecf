"""The benchmark script measures samplers at a working operating point (not a test of speed:
speed is measured by `make bench`, never asserted)."""
import importlib.util
from pathlib import Path

import numpy as np
import pytest

from mcmc_lib import targets
from mcmc_lib.methods.mamba import BayesNN
from mcmc_lib.methods.nonrev_u import BNNConditional

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
    (lambda rng: small_bnn(rng, n_chains=3), "X W, X^T D, h w_o and h^T r"),
    (lambda rng: small_network(rng), "X B, h A, D A^T, X^T D', h^T D"),
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
    has_exps = not isinstance(target, targets.Gaussian)
    assert ("floor_with_exp_ratio" in row) == has_exps
    if has_exps:
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


def small_bnn(rng, n_chains):
    """nonrev_u's BNN on 20 random cases with 3 inputs and 4 hidden units."""
    return BNNConditional(rng.standard_normal((20, 3)), (rng.uniform(size=20) < 0.5).astype(float), n_chains,
                          n_hidden=4)


def small_network(rng):
    """mamba's network on 15 random points with 6 inputs, 4 hidden units and 3 classes."""
    return BayesNN(rng.standard_normal((15, 6)), rng.integers(0, 3, 15), n_hidden=4, n_classes=3)


def test_network_floors_are_the_products_their_gradients_make():
    """The floor of each network holds products of the shapes its logp_and_grad multiplies (the data
    with every chain's first-layer weights, and the layers' residuals back), and the exp floor adds one
    exp per activation: per case, a tanh per hidden unit and a sigmoid (BNN), a softmax over the hidden
    units and one over the classes (mamba's network)."""
    bench = _load_script()
    rng = np.random.default_rng(3)
    bnn = small_bnn(rng, n_chains=2)
    theta = bench.typical_starts(bnn, 2, rng)
    first, back, output, output_back = bench.floor_kernel(bnn, theta, rng)[1]()
    assert first.shape == (20, 2 * 4) and back.shape == (3, 2 * 4)
    assert output.shape == (2, 20, 1) and output_back.shape == (2, 1, 4)
    _, exps = bench.exp_floor_kernel(bnn, theta, rng)()
    assert [e.shape for e in exps] == [(20, 2 * 4), (20, 2)] and all(np.all((e > 0) & (e <= 1)) for e in exps)

    network = small_network(rng)
    theta = bench.typical_starts(network, 2, rng)
    shapes = [a.shape for a in bench.floor_kernel(network, theta, rng)[1]()]
    assert shapes == [(2, 15, 4), (2, 15, 3), (2, 15, 4), (2, 6, 4), (2, 4, 3)]
    _, exps = bench.exp_floor_kernel(network, theta, rng)()
    assert [e.shape for e in exps] == [(15, 2 * 4), (15, 2 * 3)]
    assert np.all(np.abs(theta) < 1) and theta.shape == (2, network.dim)   # small weights, as the chapters start


PILOT_CHAPTER = '''```{code-cell} ipython3
import time
from mcmc_lib.store import Experiments
from mcmc_lib.units import Unit

STORED = Experiments("pilot-demo", ("fit", "reps", "later"), {})
experiment = STORED.values


def fit_unit(seed, x):
    return {"x": x}


def rep_unit(seed, name):
    time.sleep(0.2 if name == "slow" else 0.0)
    return {"name": name}
```

```{code-cell} ipython3
(fit,) = experiment("fit", [Unit(fit_unit, {"x": 3}, seed=[0])])
```

```{code-cell} ipython3
reps = experiment("reps", [Unit(rep_unit, {"name": name}, seed=[1, i, r])
                           for i, name in enumerate(("fast", "slow", "fast-too")) for r in range(3)])
```

```{code-cell} ipython3
later = experiment("later", [Unit(fit_unit, {"x": fit["x"] + k}, seed=[2, k]) for k in range(4)])
```

```{code-cell} ipython3
after = experiment("after", [Unit(fit_unit, {"x": len(reps)}, seed=[3])])
```
'''


def _load_pilot():
    spec = importlib.util.spec_from_file_location("paper_pilot", SCRIPT.parent / "paper_pilot.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_paper_pilot_runs_whole_samples_one_unit_per_parameter_set_and_counts_the_rest(tmp_path, monkeypatch):
    """The pilot runs the experiments named whole (later cells use their results), one unit of each
    distinct parameter set of the sampled ones, counts the others without running them, and goes on
    past the cells it stops; its projection scales each sampled unit by the units it stands for."""
    import json

    pilot = _load_pilot()
    chapter = tmp_path / "demo.md"
    chapter.write_text(PILOT_CHAPTER)
    monkeypatch.setenv("MCMC_BOOK_JOBS", "1")
    out = tmp_path / "pilot.json"
    stopped = pilot.execute(chapter, str(out), {"fit"}, {"reps"}, str(tmp_path / "cache"),
                            {"reps": {"fast-too": "fast"}})
    report = json.loads(out.read_text())
    experiments = report["experiments"]
    assert stopped == 2                                   # "reps" sampled, "later" counted; "after" needs reps
    assert list(experiments) == ["fit", "reps", "later"]
    assert experiments["fit"]["mode"] == "run" and experiments["fit"]["n_units"] == 1
    assert [s["params"]["name"] for s in experiments["reps"]["sampled"]] == ["fast", "slow"]
    assert [s["stands_for"] for s in experiments["reps"]["sampled"]] == [6, 3]     # fast for fast-too too
    assert all(s["finished"].startswith("20") for s in experiments["reps"]["sampled"])  # when it was measured
    assert experiments["later"] == {"n_units": 4, "mode": "counted"}   # fit's result reached it
    assert report["profile"] == "paper" and report["like"] == {"reps": {"fast-too": "fast"}}
    rows = {row["experiment"]: row for row in pilot.projection(report)}
    fast, slow = (s["cpu_seconds"] for s in experiments["reps"]["sampled"])
    assert rows["reps"]["cpu_hours"] == pytest.approx((6 * fast + 3 * slow) / 3600)
    assert slow < 0.1                                     # sleeping costs no CPU time: the projection counts CPU
    assert rows["reps"]["wall_2_hours"] >= rows["reps"]["wall_16_hours"] > 0
    assert "cpu_hours" not in rows["later"]


def test_pilots_merge_a_measured_experiment_over_one_only_counted_and_parts_of_one_sample(tmp_path):
    import json

    pilot = _load_pilot()
    unit = {"index": 0, "seconds": 2.0, "cpu_seconds": 1.5, "stands_for": 4}
    sampled = {"n_units": 4, "mode": "sampled", "sampled": [unit]}
    first = {"commit": "a", "experiments": {"x": sampled, "y": {"n_units": 2, "mode": "counted"},
                                            "z": {"n_units": 6, "mode": "sampled", "sampled": [{**unit, "stands_for": 3}]}}}
    second = {"commit": "b", "experiments": {"x": {"n_units": 4, "mode": "counted"},
                                             "y": {**sampled, "n_units": 2},
                                             "z": {"n_units": 6, "mode": "sampled",
                                                   "sampled": [{**unit, "index": 3, "cpu_seconds": 3.0, "stands_for": 3}]}}}
    paths = []
    for k, report in enumerate((first, second)):
        paths.append(tmp_path / f"{k}.json")
        paths[-1].write_text(json.dumps(report))
    report = pilot.merged(paths)
    assert report["experiments"]["x"] == sampled and report["experiments"]["y"]["mode"] == "sampled"
    assert [p["commit"] for p in report["pilots"]] == ["a", "b"]
    rows = {row["experiment"]: row for row in pilot.projection(report)}
    assert rows["x"]["cpu_hours"] == pytest.approx(4 * 1.5 / 3600)      # CPU time, not the wall time
    assert [s["index"] for s in report["experiments"]["z"]["sampled"]] == [0, 3]     # two --part pilots' halves
    assert rows["z"]["cpu_hours"] == pytest.approx((3 * 1.5 + 3 * 3.0) / 3600)


def test_a_pilot_part_samples_every_nth_parameter_set_and_like_merges_sets():
    from mcmc_lib.units import Unit

    pilot = _load_pilot()
    units = [Unit(_fit_unit, {"name": name}, seed=[1, r]) for name in "abcd" for r in range(2)]
    assert pilot.sample_of(units) == {0: 2, 2: 2, 4: 2, 6: 2}
    assert pilot.sample_of(units, part=(2, 2)) == {2: 2, 6: 2}                 # b and d
    assert pilot.sample_of(units, {"c": "a"}, part=(1, 2)) == {0: 4, 6: 2}     # a (for c too), then d
    with pytest.raises(ValueError):
        pilot.sample_of(units, part=(0, 2))


def _fit_unit(seed, name):
    return name


def test_paper_targets_are_met_missed_or_not_measured_from_the_pilots(monkeypatch):
    """A target is met only when every experiment it covers was timed; an untimed experiment leaves the
    chapter's total a lower bound, which misses the limit once it passes it; pilots at another profile
    are refused."""
    pilot = _load_pilot()
    monkeypatch.setattr(pilot, "PAPER_TARGETS", {"demo": {"unit": 1.0, "experiments": {"lr": 2.0}, "chapter": 5.0}})

    def unit(minutes, stands_for):
        return {"index": 0, "seconds": 60 * minutes, "cpu_seconds": 60 * minutes, "stands_for": stands_for}

    def report(experiments, profile="paper"):
        return {"pilots": [{"profile": profile}], "experiments": experiments}

    timed = {"lr": {"n_units": 3, "mode": "sampled", "sampled": [unit(30, 3)]},          # 1.5 CPU-h
             "nn": {"n_units": 2, "mode": "sampled", "sampled": [unit(45, 2)]}}          # 1.5 CPU-h
    verdicts = {row["target"]: row["verdict"] for row in pilot.target_rows(report(timed), "demo")}
    assert verdicts == {"longest unit": "met", "experiment lr": "met", "chapter": "met"}
    slow = {**timed, "nn": {"n_units": 2, "mode": "sampled", "sampled": [unit(90, 2)]}}   # a 1.5-hour unit
    rows = {row["target"]: row for row in pilot.target_rows(report(slow), "demo")}
    assert rows["longest unit"]["verdict"] == "missed" and rows["longest unit"]["cpu_hours"] == pytest.approx(1.5)
    partial = {"lr": {"n_units": 60, "mode": "counted"}, "nn": timed["nn"]}
    rows = {row["target"]: row["verdict"] for row in pilot.target_rows(report(partial), "demo")}
    assert rows["experiment lr"].startswith("not measured") and rows["chapter"].startswith("not measured")
    over = {**partial, "nn": {"n_units": 8, "mode": "sampled", "sampled": [unit(45, 8)]}}   # 6 CPU-h, lr untimed
    assert pilot.target_rows(report(over), "demo")[-1]["verdict"] == "missed"
    with pytest.raises(ValueError, match="paper profile"):
        pilot.target_rows(report(timed, profile="default"), "demo")
