"""Speed of the targets and the baseline samplers, measured (not asserted): `make bench`.

Two tables go to benchmarks/results/baselines.json, with the machine and versions.

**Targets against their floor.** For each hot target, with 1 and 10 chains, the time of one
batched ``logp_and_grad`` call next to the time of the arithmetic it cannot avoid, its *floor*:
for logistic regression the two matrix products X w and X^T r (r of shape (n_chains, N)); for a
dense Gaussian the product (x - m) S^{-1}; for a diagonal Gaussian the one elementwise division
(x - m) / v. For logistic regression a second floor adds the one exp per datum that the log
density and the gradient share (``floor_with_exp_ratio``): NumPy cannot fuse it into the products,
and on Caravan it alone costs about 0.3 of the products, so it bounds what NumPy code can reach
there. Both are timed the same way, in CPU time of this thread and in alternating blocks,
so that both see the same machine; ``floor_ratio`` is the median of the per-block ratios (1.0 is
the floor). On the cheap Gaussians the floor is one NumPy call: the ratio there counts NumPy
calls, not arithmetic.

**Samplers.** For RWM, MALA, HMC-10, NUTS and gadMALAf (the gsm chapter's sampler) on Neal's
100-d Gaussian and on Caravan logistic regression (d = 86, N = 5822), with 1 and with 10 chains:

- iterations per second per chain and microseconds per chain-iteration (sampling phase, adaptation
  off, in CPU time of this thread, which equals the wall time on an idle machine and, unlike it,
  stays steady when other processes share the cores; the JSON keeps the wall time too), at a
  working operating point: chains start in the typical set (exact draws for Neal's
  Gaussian, the posterior mode plus a little noise for Caravan) and a warm-up of 1,000 iterations
  (NUTS: 200) tunes the step size to the sampler's target acceptance, which the JSON records;
- for HMC, microseconds per leapfrog step (all chains together: one batched gradient and the
  integrator's updates);
- gradient (or, for RWM, density) evaluations per second;
- the overhead ratio: the sampler's time divided by the time of the same number of target
  evaluations alone, made in batches of the same shape (n_chains, d). 1.0 is the floor; NUTS
  evaluates one chain at a time, so its baseline is batches of (1, d).

Neal's Gaussian is cheap (a few microseconds a call), so its runs are repeated (REPEATS) and long
enough to last about a second in all; the JSON gives the median and the range over the repeats.
"""
from __future__ import annotations

import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

from mcmc_lib import portable, targets
from mcmc_lib.reference import find_mode
from mcmc_lib.datasets import load_logistic_dataset, load_mnist_subset
from mcmc_lib.harness import run
from mcmc_lib.methods.gsm import gadMALAf
from mcmc_lib.methods.mamba import BayesNN
from mcmc_lib.methods.nonrev_u import BNNConditional
from mcmc_lib.samplers import HMC, MALA, NUTS, RWM

RESULTS = Path(__file__).resolve().parent / "results"
DATA = Path(__file__).resolve().parent.parent / "data"
SEED = 2026


def make_targets():
    X, t = load_logistic_dataset("caravan")
    return {"neal100": targets.neal_gaussian(100),
            "caravan": targets.LogisticRegression(X, t, prior_var=1.0, name="Caravan")}


def make_floor_targets(chain_counts):
    """The targets whose cost is set against its floor, {key: {n_chains: target}}: the two above, the gsm
    chapter's German credit (d = 49, N = 1000) and MNIST (5 vs 6, d = 785) logistic regressions and
    its 51-d squared-exponential Gaussian (dense), and the two networks: nonrev_u's BNN (5 inputs, 12
    tanh units, 300 cases; it holds per-chain precisions, hence one per chain count) and mamba's
    (784 inputs, 100 softmax units, 10 classes, the chapter's 4,000 training images). Each data set
    is loaded once; every target but the BNN serves every chain count."""
    images, labels = load_mnist_subset()
    rows = np.flatnonzero((labels == 5) | (labels == 6))
    mnist = targets.LogisticRegression(np.hstack([images[rows], np.ones((rows.size, 1))]),
                                       (labels[rows] == 5).astype(float), prior_var=1.0, name="MNIST 5 vs 6")
    X_german, t_german = load_logistic_dataset("german")
    bnn_data = np.loadtxt(DATA / "nonrev_u_bnn_train.csv", delimiter=",", skiprows=1)
    train = np.random.default_rng(SEED).permutation(len(labels))[:4000]
    shared = {**make_targets(),
              "german": targets.LogisticRegression(X_german, t_german, prior_var=1.0, name="German credit"),
              "mnist": mnist, "se51": targets.squared_exponential_gaussian()}
    by_count = {key: dict.fromkeys(chain_counts, target) for key, target in shared.items()}
    by_count["bnn"] = {n: BNNConditional(bnn_data[:, :5], bnn_data[:, 5], n) for n in chain_counts}
    by_count["mnist-nn"] = dict.fromkeys(chain_counts, BayesNN(images[train], labels[train], n_hidden=100,
                                                               n_classes=10, name="MNIST network"))
    return by_count


WARMUP = {"NUTS": 200}          # the others: 1,000 iterations, enough for the step size to settle
ADAPT_RATE = 0.05               # per-iteration rate of the step-size rule (the library's default is 0.01)
N_LEAPFROG = 10
# Sampling iterations. On Caravan one run lasts seconds; on Neal's Gaussian each run is repeated
# REPEATS times and lasts 0.3-2 s, so that the median is steady (0.1 s runs moved by +-50%).
ITERATIONS = {"neal100": {"RWM": 20000, "MALA": 20000, "HMC-10": 5000, "NUTS": 1000, "gadMALAf": 20000},
              "caravan": {"RWM": 4000, "MALA": 4000, "HMC-10": 1000, "NUTS": 100, "gadMALAf": 4000}}
# (Caravan NUTS: trees of ~100-1000 leapfrog steps; 10 chains x 300 iterations would take minutes.)
REPEATS = {"neal100": 3, "caravan": 1}


def make_sampler(name, target, n_warmup):
    d = target.dim
    if name == "RWM":
        return RWM(target, step_size=0.5 / np.sqrt(d), adapt_rate=ADAPT_RATE)
    if name == "MALA":
        return MALA(target, step_size=0.5 / d**0.25, adapt_rate=ADAPT_RATE)
    if name == "HMC-10":
        return HMC(target, step_size=0.05, n_leapfrog=N_LEAPFROG, adapt_rate=ADAPT_RATE)
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
    if isinstance(target, (BNNConditional, BayesNN)):     # small weights, where the chapters start
        return 0.1 * rng.standard_normal((n_chains, target.dim))
    if target.name not in _MODES:
        _MODES[target.name] = find_mode(target)
    return _MODES[target.name] + 0.01 * rng.standard_normal((n_chains, target.dim))


def evaluation_time(target, uses_gradient, n_calls, states):
    """CPU seconds for n_calls evaluations of the target on the (batch, d) array ``states`` (the
    sampler's last states, so that the floor is measured where the sampler spent its time)."""
    x = np.array(states)
    evaluate = target.logp_and_grad if uses_gradient else target.logp
    start = time.thread_time()
    for _ in range(n_calls):
        evaluate(x)
    return time.thread_time() - start


class SamplingClock:
    """The sampler, unchanged, except that it reads this thread's CPU clock when the run harness
    starts the sampling phase (its first step after the n_warmup warm-up steps)."""

    def __init__(self, sampler, n_warmup):
        self._sampler, self._n_warmup, self._steps, self.start = sampler, n_warmup, 0, None

    def __getattr__(self, name):
        return getattr(self._sampler, name)

    def step(self, rng, state):
        if self._steps == self._n_warmup:
            self.start = time.thread_time()
        self._steps += 1
        return self._sampler.step(rng, state)


def benchmark(sampler_name, target, n_chains, n_iter, rng):
    n_warmup = WARMUP.get(sampler_name, 1000)
    sampler = make_sampler(sampler_name, target, n_warmup)
    x0 = typical_starts(target, n_chains, rng)
    target.reset_counters()
    clock = SamplingClock(sampler, n_warmup)
    result = run(clock, x0, n_warmup, n_iter, rng, progress=False)
    seconds = time.thread_time() - clock.start           # CPU time of the sampling phase
    uses_gradient = sampler.uses_gradient
    evals_per_chain = result.grad_evals["sampling"] if uses_gradient else result.logp_evals["sampling"]
    batch = 1 if sampler_name == "NUTS" else n_chains
    n_calls = int(round(evals_per_chain * n_chains / batch))
    floor = evaluation_time(target, uses_gradient, n_calls, result.samples[:batch, -1, :])
    row = {
        "sampler": sampler_name, "target": target.name, "dim": target.dim, "n_chains": n_chains,
        "n_iter": n_iter, "sampling_cpu_seconds": seconds, "sampling_wall_seconds": result.sampling_time,
        "iterations_per_second_per_chain": n_iter / seconds,
        "microseconds_per_chain_iteration": 1e6 * seconds / (n_iter * n_chains),
        "evaluations_per_chain": evals_per_chain,
        "evaluation_kind": "gradient" if uses_gradient else "density",
        "evaluations_per_second": evals_per_chain * n_chains / seconds,
        "evaluation_floor_cpu_seconds": floor,
        "overhead_ratio": seconds / floor,
        "acceptance": float(result.accept_prob.mean()),
    }
    if sampler_name.startswith("HMC"):
        # one leapfrog step = one batched gradient call of all chains (plus the accept step's share)
        row["microseconds_per_leapfrog_step"] = 1e6 * seconds / evals_per_chain
    return row


def repeated_benchmark(sampler_name, target, n_chains, n_iter, rng, repeats):
    """The median row of ``repeats`` runs (by sampling time), with the range of the per
    chain-iteration time and of the overhead ratio over the runs."""
    rows = sorted((benchmark(sampler_name, target, n_chains, n_iter, rng) for _ in range(repeats)),
                  key=lambda r: r["sampling_cpu_seconds"])
    row = dict(rows[len(rows) // 2])
    if repeats > 1:
        row["repeats"] = repeats
        for key in ("microseconds_per_chain_iteration", "overhead_ratio"):
            values = [r[key] for r in rows]
            row[f"{key}_range"] = [min(values), max(values)]
    return row


# ----------------------------------------------------------------------------------------------
# Targets against their floor
# ----------------------------------------------------------------------------------------------
def floor_kernel(target, x, rng):
    """(description, function): the matrix products (or elementwise arithmetic) that one
    logp_and_grad call at the states x cannot avoid, on arrays of the same shapes."""
    if isinstance(target, targets.LogisticRegression):
        X = target.X
        r = rng.standard_normal((x.shape[0], target.n_data))
        return "X w and X^T r", lambda: (x @ X.T, r @ X)
    if isinstance(target, BNNConditional):
        return "X W, X^T D, h w_o and h^T r", _bnn_products(target, x.shape[0], rng)
    if isinstance(target, BayesNN):
        return "X B, h A, D A^T, X^T D', h^T D", _network_products(target, x.shape[0], rng)
    centred = x - target.mean
    if target.diagonal:
        variances = target.variances
        return "(x - m) / v", lambda: centred / variances
    precision = target.precision
    return "(x - m) S^-1", lambda: centred @ precision


def _bnn_products(target, n_chains, rng):
    """nonrev_u's BNN: the inputs times every chain's hidden weights, the data's transpose times the
    hidden units' residuals, and per chain the hidden units times the output weights and the output
    residuals times the hidden units."""
    X, m = target.X, target.n_hidden
    weights = rng.standard_normal((target.n_in, n_chains * m))
    residuals = rng.standard_normal((X.shape[0], n_chains * m))
    hidden = rng.standard_normal((n_chains, X.shape[0], m))
    output_weights = rng.standard_normal((n_chains, m, 1))
    output_residuals = rng.standard_normal((n_chains, 1, X.shape[0]))
    return lambda: (X @ weights, X.T @ residuals, hidden @ output_weights, output_residuals @ hidden)


def _network_products(target, n_chains, rng):
    """mamba's network, per chain: the forward products X B and h A, and the backward D A^T,
    X^T D' and h^T D (D, D': the residuals of the output and hidden layers)."""
    X, n, H, K = target.X, target.n_data, target.H, target.K
    B = rng.standard_normal((n_chains, target.p, H))
    A = rng.standard_normal((n_chains, H, K))
    hidden = rng.standard_normal((n_chains, n, H))
    output_residuals = rng.standard_normal((n_chains, n, K))
    return lambda: (X @ B, hidden @ A, output_residuals @ np.swapaxes(A, 1, 2), X.T @ hidden,
                    np.swapaxes(hidden, 1, 2) @ output_residuals)


def exp_floor_kernel(target, x, rng):
    """The products and the exps that the log density and the gradient cannot share further (numpy
    cannot fuse them into the products): the floor reachable without a compiled kernel. Logistic
    regression: one exp per datum; nonrev_u's BNN: one per hidden unit (tanh) and one per output
    (sigmoid) per case; mamba's network: one per hidden unit and one per class per datum (the two
    softmaxes). None for the Gaussians."""
    if isinstance(target, targets.LogisticRegression):
        X = target.X
        r = rng.standard_normal((x.shape[0], target.n_data))
        scratch = np.empty_like(r)
        return lambda: (np.exp(-np.abs(x @ X.T, out=scratch), out=scratch), r @ X)
    if isinstance(target, BNNConditional):
        activations = (x.shape[0] * target.n_hidden, x.shape[0])
    elif isinstance(target, BayesNN):
        activations = (x.shape[0] * target.H, x.shape[0] * target.K)
    else:
        return None
    products = floor_kernel(target, x, rng)[1]
    exponents = [-np.abs(rng.standard_normal((target.X.shape[0], width))) for width in activations]
    return lambda: (products(), [np.exp(a) for a in exponents])


def _seconds_per_call(fn, n_calls):
    start = time.thread_time()
    for _ in range(n_calls):
        fn()
    return (time.thread_time() - start) / n_calls


def paired_timing(first, second, n_pairs=15, block_seconds=0.02):
    """CPU seconds per call of two functions, timed in alternating blocks of about block_seconds
    each: (median of first, median of second, median of the per-block ratios first / second).
    CPU time of this thread, not wall time, so that other processes on the machine do not count."""
    first(), second()                                   # warm caches and allocator
    n_calls = max(1, int(block_seconds / max(_seconds_per_call(first, 3), 1e-7)))
    a, b = [], []
    for _ in range(n_pairs):
        a.append(_seconds_per_call(first, n_calls))
        b.append(_seconds_per_call(second, n_calls))
    a, b = np.array(a), np.array(b)
    return float(np.median(a)), float(np.median(b)), float(np.median(a / b))


def target_floor(key, target, n_chains, rng, **timing):
    """One row: logp_and_grad against its floor, at states in the typical set."""
    x = typical_starts(target, n_chains, rng)
    description, floor = floor_kernel(target, x, rng)
    target_s, floor_s, ratio = paired_timing(lambda: target.logp_and_grad(x), floor, **timing)
    row = {"target": target.name, "key": key, "dim": target.dim, "n_chains": n_chains,
           "n_data": getattr(target, "n_data", None), "floor": description,
           "logp_and_grad_microseconds": 1e6 * target_s, "floor_microseconds": 1e6 * floor_s,
           "floor_ratio": ratio}
    with_exp = exp_floor_kernel(target, x, rng)
    if with_exp is not None:
        _, exp_floor_s, exp_ratio = paired_timing(lambda: target.logp_and_grad(x), with_exp, **timing)
        row.update(floor_with_exp_microseconds=1e6 * exp_floor_s, floor_with_exp_ratio=exp_ratio)
    return row


def machine():
    model = ""
    try:
        model = next(line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                     if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return {"platform": platform.platform(), "processor": platform.processor() or model,
            "cpu_count": os.cpu_count(), "python": platform.python_version(), "numpy": np.__version__,
            "threads": {k: os.environ.get(k) for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS")},
            "floating_point": portable.describe(),
            # other processes on the cores inflate wall times (CPU times much less)
            "load_average_at_start": os.getloadavg()[0] if hasattr(os, "getloadavg") else None}


def main(quick=False):
    rng = np.random.default_rng(SEED)
    machine_info = machine()
    floors = []
    for key, by_count in make_floor_targets((1, 10)).items():
        for n_chains, target in by_count.items():
            row = target_floor(key, target, n_chains, rng)
            floors.append(row)
            with_exp = (f"  with its exps {row['floor_with_exp_microseconds']:9.1f} us  "
                        f"x{row['floor_with_exp_ratio']:.2f}" if "floor_with_exp_ratio" in row else "")
            print(f"{key:8s} chains={n_chains:2d}  logp_and_grad {row['logp_and_grad_microseconds']:9.1f} us  "
                  f"floor ({row['floor']}) {row['floor_microseconds']:9.1f} us  x{row['floor_ratio']:.2f}"
                  + with_exp, flush=True)
    rows = []
    # gadMALAf's sampling phase has its adaptation off, so it costs a fixed-L MALA step plus the
    # O(d^2) products with L; the gsm chapter reports its 20,000 + 20,000 run against the paper's 8.7 s.
    for target_name, target in make_targets().items():
        for sampler_name, n_iter in ITERATIONS[target_name].items():
            for n_chains in (1, 10):
                n = max(50, n_iter // 10) if quick else n_iter
                row = repeated_benchmark(sampler_name, target, n_chains, n, rng, REPEATS[target_name])
                rows.append(row)
                leapfrog = (f"  {row['microseconds_per_leapfrog_step']:6.1f} us/leapfrog step"
                            if "microseconds_per_leapfrog_step" in row else "")
                print(f"{target_name:8s} {sampler_name:8s} chains={n_chains:2d}  "
                      f"{row['microseconds_per_chain_iteration']:9.2f} us/chain-iteration  "
                      f"{row['evaluations_per_second']:10.0f} {row['evaluation_kind']} evals/s  "
                      f"overhead x{row['overhead_ratio']:.2f}  acceptance {row['acceptance']:.2f}{leapfrog}",
                      flush=True)
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / "baselines.json"
    out.write_text(json.dumps({"machine": machine_info, "seed": SEED, "quick": quick,
                               "target_floors": floors, "results": rows}, indent=1))
    print(f"wrote {out}")
    paper_targets()


def paper_targets():
    """The paper-run cost targets (paper_pilot.PAPER_TARGETS) against the committed pilots of each chapter
    (results/<chapter>_paper_pilot*.json), printed and written to results/paper_targets.json."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import paper_pilot

    checked = {}
    for chapter in paper_pilot.PAPER_TARGETS:
        pilots = sorted(RESULTS.glob(f"{chapter}_paper_pilot*.json"))
        if pilots:
            report = paper_pilot.merged(pilots)
            checked[chapter] = {"pilots": [p.name for p in pilots], "targets": paper_pilot.target_rows(report, chapter)}
            paper_pilot.print_targets(checked[chapter]["targets"], chapter)
    out = RESULTS / "paper_targets.json"
    out.write_text(json.dumps(checked, indent=1) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main(quick="--quick" in sys.argv)
