"""Speed of the baseline samplers, measured (not asserted): `make bench`.

For RWM, MALA, HMC-10, NUTS and gadMALAf (the gsm chapter's sampler) on Neal's 100-d Gaussian and on Caravan logistic regression
(d = 86, N = 5822), with 1 and with 10 chains, it records:

- iterations per second per chain (sampling phase, adaptation off), at a working operating point:
  chains start in the typical set (exact draws for Neal's Gaussian, the posterior mode plus a little
  noise for Caravan) and a warm-up of 1,000 iterations tunes the step size to the sampler's target
  acceptance, which the JSON records next to the speed;
- gradient (or, for RWM, density) evaluations per second;
- the overhead ratio: the sampler's wall time divided by the time of the same number of target
  evaluations alone, made in batches of the same shape (n_chains, d). 1.0 is the floor; NUTS
  evaluates one chain at a time, so its baseline is batches of (1, d).

Results go to benchmarks/results/baselines.json with the machine and versions.
"""
from __future__ import annotations

import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

from mcmc_lib import targets
from mcmc_lib.reference import find_mode
from mcmc_lib.datasets import load_logistic_dataset
from mcmc_lib.harness import run
from mcmc_lib.methods.gsm import gadMALAf
from mcmc_lib.samplers import HMC, MALA, NUTS, RWM

RESULTS = Path(__file__).resolve().parent / "results"
SEED = 2026


def make_targets():
    X, t = load_logistic_dataset("caravan")
    return {"neal100": targets.neal_gaussian(100),
            "caravan": targets.LogisticRegression(X, t, prior_var=1.0, name="Caravan")}


WARMUP = {"NUTS": 200}          # the others: 1,000 iterations, enough for the step size to settle
ADAPT_RATE = 0.05               # per-iteration rate of the step-size rule (the library's default is 0.01)


def make_sampler(name, target, n_warmup):
    d = target.dim
    if name == "RWM":
        return RWM(target, step_size=0.5 / np.sqrt(d), adapt_rate=ADAPT_RATE)
    if name == "MALA":
        return MALA(target, step_size=0.5 / d**0.25, adapt_rate=ADAPT_RATE)
    if name == "HMC-10":
        return HMC(target, step_size=0.05, n_leapfrog=10, adapt_rate=ADAPT_RATE)
    if name == "NUTS":
        return NUTS(target, n_warmup=n_warmup, metric="diagonal")
    if name == "gadMALAf":
        return gadMALAf(target)
    raise ValueError(f"unknown sampler {name!r}")


_MODES = {}                     # target name -> posterior mode, found once


def typical_starts(target, n_chains, rng):
    """Starting points in the typical set, so that warm-up time goes to tuning, not to travelling:
    exact draws where the target has them, else the mode plus N(0, 0.01^2) noise."""
    if hasattr(target, "sample"):
        return target.sample(rng, n_chains)
    if target.name not in _MODES:
        _MODES[target.name] = find_mode(target)
    return _MODES[target.name] + 0.01 * rng.standard_normal((n_chains, target.dim))


def evaluation_time(target, uses_gradient, n_calls, states):
    """Seconds for n_calls evaluations of the target on the (batch, d) array ``states`` (the
    sampler's last states, so that the floor is measured where the sampler spent its time)."""
    x = np.array(states)
    evaluate = target.logp_and_grad if uses_gradient else target.logp
    start = time.perf_counter()
    for _ in range(n_calls):
        evaluate(x)
    return time.perf_counter() - start


def benchmark(sampler_name, target, n_chains, n_iter, rng):
    n_warmup = WARMUP.get(sampler_name, 1000)
    sampler = make_sampler(sampler_name, target, n_warmup)
    x0 = typical_starts(target, n_chains, rng)
    target.reset_counters()
    result = run(sampler, x0, n_warmup, n_iter, rng, progress=False)
    uses_gradient = sampler.uses_gradient
    evals_per_chain = result.grad_evals["sampling"] if uses_gradient else result.logp_evals["sampling"]
    batch = 1 if sampler_name == "NUTS" else n_chains
    n_calls = int(round(evals_per_chain * n_chains / batch))
    floor = evaluation_time(target, uses_gradient, n_calls, result.samples[:batch, -1, :])
    return {
        "sampler": sampler_name, "target": target.name, "dim": target.dim, "n_chains": n_chains,
        "n_iter": n_iter, "sampling_seconds": result.sampling_time,
        "iterations_per_second_per_chain": n_iter / result.sampling_time,
        "evaluations_per_chain": evals_per_chain,
        "evaluation_kind": "gradient" if uses_gradient else "density",
        "evaluations_per_second": evals_per_chain * n_chains / result.sampling_time,
        "evaluation_floor_seconds": floor,
        "overhead_ratio": result.sampling_time / floor,
        "acceptance": float(result.accept_prob.mean()),
    }


def main(quick=False):
    rng = np.random.default_rng(SEED)
    rows = []
    # gadMALAf's sampling phase has its adaptation off, so it costs a fixed-L MALA step plus the
    # O(d^2) products with L; the gsm chapter reports its 20,000 + 20,000 run against the paper's 8.7 s.
    iterations = {"RWM": 4000, "MALA": 4000, "HMC-10": 1000, "NUTS": 300, "gadMALAf": 4000}
    for target_name, target in make_targets().items():
        for sampler_name, n_iter in iterations.items():
            if target_name == "caravan" and sampler_name == "NUTS":
                n_iter = 100   # trees of ~100-1000 leapfrog steps on Caravan: 10 chains x 300 would take minutes
            for n_chains in (1, 10):
                n = max(50, n_iter // 10) if quick else n_iter
                row = benchmark(sampler_name, target, n_chains, n, rng)
                rows.append(row)
                print(f"{target_name:8s} {sampler_name:7s} chains={n_chains:2d}  "
                      f"{row['iterations_per_second_per_chain']:9.1f} it/s/chain  "
                      f"{row['evaluations_per_second']:10.0f} {row['evaluation_kind']} evals/s  "
                      f"overhead x{row['overhead_ratio']:.2f}", flush=True)
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / "baselines.json"
    out.write_text(json.dumps({
        "machine": {"platform": platform.platform(), "processor": platform.processor(),
                    "cpu_count": os.cpu_count(), "python": platform.python_version(),
                    "numpy": np.__version__,
                    "threads": {k: os.environ.get(k) for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS")}},
        "seed": SEED, "quick": quick, "results": rows}, indent=1))
    print(f"wrote {out}")


if __name__ == "__main__":
    main(quick="--quick" in sys.argv)
