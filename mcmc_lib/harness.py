"""The run harness: warm-up (with adaptation), then sampling (adaptation stopped), with timings,
evaluation counts, acceptance, and summaries over the chains, which the book treats as repeats.

    rng = np.random.default_rng(2019)
    result = run(MALA(target, step_size=0.1), x0, n_warmup=1000, n_samples=5000, rng=rng)
    row = summarise(result)          # time, acceptance, ESS min/median/max, min ESS/s, per 1000 grads
"""
from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass, field

import numpy as np

from .validation import require_bool, require_int, require_rng, wrong_type


@dataclass
class RunResult:
    """Everything a run reports. Arrays are per chain; counts are per chain (total / n_chains)."""
    sampler: str
    samples: np.ndarray              # (n_chains, n_kept, n_stored)
    logp: np.ndarray                 # (n_chains, n_kept)
    accept_rate: np.ndarray          # fraction of sampling iterations that moved, (n_chains,)
    accept_prob: np.ndarray          # mean acceptance probability (NUTS: mean acceptance statistic)
    warmup_accept_rate: np.ndarray   # (n_chains,)
    n_nonfinite: np.ndarray          # steps that met a NaN/inf log density or gradient, whole run, (n_chains,)
    warmup_time: float               # CPU seconds of this process, all chains together (see ``run``)
    sampling_time: float
    logp_evals: dict                 # {"warmup": per chain, "sampling": per chain}
    grad_evals: dict
    tuning: dict = field(default_factory=dict)
    thin: int = 1
    n_divergent: np.ndarray = None   # divergent trajectories (NUTS), whole run, (n_chains,); 0 for
                                     # samplers that report none. Counted apart from n_nonfinite.

    @property
    def n_chains(self) -> int:
        return self.samples.shape[0]

    @property
    def cpu_time(self) -> float:
        """CPU seconds of warm-up and sampling, all chains together."""
        return self.warmup_time + self.sampling_time

    @property
    def seconds_per_chain(self) -> float:
        """CPU time of warm-up and sampling divided by the number of chains run together."""
        return self.cpu_time / self.n_chains

    @property
    def total_grad_evals(self) -> float:
        return self.grad_evals["warmup"] + self.grad_evals["sampling"]

    def ess(self) -> np.ndarray:
        """ESS of every stored coordinate, one value per chain: shape (n_chains, n_stored)."""
        from .diagnostics import ess
        return ess(self.samples, per_chain=True, layout="chains, draws, dim")

    def to_inference_data(self):
        """The draws as ArviZ InferenceData (posterior 'x', sample_stats 'lp')."""
        from .diagnostics import arviz   # imported there with its import-time warning silenced
        return arviz.from_dict(posterior={"x": self.samples}, sample_stats={"lp": self.logp})


def spawn_rngs(seed: int, n: int):
    """n independent generators from one seed (numpy's SeedSequence spawning)."""
    from .units import canonical_seed
    n = require_int(n, "n")
    return np.random.default_rng(canonical_seed(seed)).spawn(n)


def _show_progress(progress):
    """Progress bars only on a terminal outside CI, unless asked: never in the rendered book or logs."""
    if progress is not None:
        return progress
    return sys.stderr.isatty() and not os.environ.get("CI")


def _kept(keep, x, n_chains, width):
    """keep(x), checked: a 2-d array (n_chains, width), width fixed by the first call."""
    kept = np.asarray(keep(x))
    if kept.ndim != 2 or kept.shape[0] != n_chains or (width is not None and kept.shape[1] != width):
        want = f"({n_chains}, n_stored)" if width is None else f"({n_chains}, {width})"
        raise ValueError(f"keep must map the states (n_chains, dim) = {x.shape} to an array of shape "
                         f"{want}, got shape {kept.shape}")
    return kept


def _phase(sampler, state, rng, n_iter, adapt, keep, thin, progress, label, first_iteration=0):
    """Run n_iter steps; store every thin-th kept state.
    Returns (state, stored, logps, accept rate, mean acceptance probability, non-finite count,
    divergence count)."""
    n_chains = state.x.shape[0]
    n_kept = n_iter // thin if keep is not None else 0
    stored, logps = None, np.empty((n_chains, n_kept))
    accepts = np.zeros(n_chains)
    accept_probs = np.zeros(n_chains)
    nonfinite = np.zeros(n_chains, dtype=int)
    divergent = np.zeros(n_chains, dtype=int)
    iterator = range(n_iter)
    if _show_progress(progress):
        from tqdm.auto import tqdm
        iterator = tqdm(iterator, desc=f"{sampler.name} {label}", leave=False)
    for t in iterator:
        state, info = sampler.step(rng, state)
        accepts += info.accepted
        accept_probs += info.accept_prob
        nonfinite += info.nonfinite
        if info.divergent is not None:
            divergent += info.divergent
        if adapt:
            sampler.adapt(state, info, first_iteration + t + 1)
        if keep is not None and (t + 1) % thin == 0:
            kept = _kept(keep, state.x, n_chains, None if stored is None else stored.shape[2])
            if stored is None:
                stored = np.empty((n_chains, n_kept, kept.shape[1]))
            stored[:, (t + 1) // thin - 1] = kept
            logps[:, (t + 1) // thin - 1] = state.logp
    n = max(n_iter, 1)
    return state, stored, logps, accepts / n, accept_probs / n, nonfinite, divergent


def run(sampler, x0, n_warmup: int, n_samples: int, rng, thin: int = 1, keep=None,
        progress=None) -> RunResult:
    """Warm up ``sampler`` from ``x0`` (n_chains, dim) for n_warmup iterations with adaptation, then
    draw n_samples iterations with adaptation stopped, keeping every ``thin``-th state.

    ``keep`` maps the states (n_chains, dim) to what is stored, an array (n_chains, n_stored)
    (default: all coordinates), which keeps memory small for long runs in high dimension.
    At least one state is stored: thin <= n_samples.

    ``n_nonfinite`` counts the steps that met a NaN or infinite log density (rejected), and
    ``n_divergent`` the divergent trajectories of samplers that report them (NUTS), separately.

    Times are CPU seconds of this process (``time.process_time``), not wall-clock seconds: a sampler's
    cost then does not depend on what else the machine runs (other workers, a build), so that runs made
    side by side compare fairly. With BLAS on one thread (``mcmc_lib.units`` workers, the chapters) and
    a core to itself, the two agree.
    """
    require_sampler(sampler)
    require_rng(rng)
    n_warmup = require_int(n_warmup, "n_warmup")
    n_samples = require_int(n_samples, "n_samples", minimum=1)
    thin = require_int(thin, "thin", minimum=1)
    if thin > n_samples:
        raise ValueError(f"thin must be at most n_samples = {n_samples} (every thin-th of the n_samples "
                         f"states is stored), got {thin}")
    if keep is not None and not callable(keep):
        raise wrong_type("keep", "a function of the states (n_chains, dim)", keep)
    if progress is not None:
        require_bool(progress, "progress")
    keep = (lambda x: x) if keep is None else keep
    target = sampler.target
    counts = {"start": (target.n_logp_evals, target.n_grad_evals)}

    start = time.process_time()
    state = sampler.init(x0)
    n_chains = state.x.shape[0]
    if n_chains < 1:
        raise ValueError(f"x0 must hold at least one chain, got shape {np.shape(x0)}")
    state, _, _, warm_acc, _, warm_bad, warm_div = _phase(sampler, state, rng, n_warmup, True, None, 1,
                                                          progress, "warm-up")
    warmup_time = time.process_time() - start
    counts["warmup"] = (target.n_logp_evals, target.n_grad_evals)

    start = time.process_time()
    state, stored, logps, acc, acc_prob, bad, div = _phase(sampler, state, rng, n_samples, False, keep, thin,
                                                           progress, "sampling", first_iteration=n_warmup)
    sampling_time = time.process_time() - start
    counts["sampling"] = (target.n_logp_evals, target.n_grad_evals)

    def per_chain(phase_end, phase_start, which):
        return (counts[phase_end][which] - counts[phase_start][which]) / n_chains

    return RunResult(
        sampler=sampler.name, samples=stored, logp=logps, accept_rate=acc, accept_prob=acc_prob,
        warmup_accept_rate=warm_acc,
        n_nonfinite=warm_bad + bad, n_divergent=warm_div + div,
        warmup_time=warmup_time, sampling_time=sampling_time,
        logp_evals={"warmup": per_chain("warmup", "start", 0), "sampling": per_chain("sampling", "warmup", 0)},
        grad_evals={"warmup": per_chain("warmup", "start", 1), "sampling": per_chain("sampling", "warmup", 1)},
        tuning=sampler.tuning(), thin=thin)


def require_sampler(sampler, name: str = "sampler"):
    """A sampler of the protocol of mcmc_lib.samplers.base: init, step, adapt and tuning, and a target."""
    if isinstance(sampler, type) or not all(callable(getattr(sampler, method, None))
                                            for method in ("init", "step", "adapt", "tuning")):
        if isinstance(sampler, (list, tuple)):
            raise ValueError(f"{name} must be one sampler, got a {type(sampler).__name__} of {len(sampler)}")
        raise wrong_type(name, "a sampler (init, step, adapt, tuning: mcmc_lib.samplers.base.Sampler)", sampler)
    if getattr(sampler, "target", None) is None:
        raise ValueError(f"{name} has no target")
    return sampler


def summarise(result: RunResult) -> dict:
    """One table row, the gsm paper's columns plus cost per gradient: means over chains (repeats)
    of seconds per chain, acceptance, ESS min/median/max; mean and sd of min ESS per second; and
    min ESS per 1000 gradient evaluations (warm-up included, as the paper's times include it).

    ``min_ess_per_1000_grads`` is there only for a run that evaluated gradients: a gradient-free
    sampler (RWM, AM) has no gradient evaluations to divide by, so the row has no such key (rather
    than a nan with no note); its cost is in ``result.logp_evals``."""
    if not isinstance(result, RunResult):
        if isinstance(result, (list, tuple)):
            raise ValueError(f"result must be one RunResult, got a {type(result).__name__} of {len(result)}")
        raise wrong_type("result", "a RunResult (what harness.run returns)", result)
    ess = result.ess()
    min_ess = ess.min(axis=1)
    min_ess_per_s = min_ess / result.seconds_per_chain
    grads = result.total_grad_evals
    row = {
        "sampler": result.sampler,
        "time_s": result.seconds_per_chain,
        "accept": float(np.mean(result.accept_prob)),
        "ess_min": float(np.mean(min_ess)),
        "ess_median": float(np.mean(np.median(ess, axis=1))),
        "ess_max": float(np.mean(ess.max(axis=1))),
        "min_ess_per_s": float(np.mean(min_ess_per_s)),
        "min_ess_per_s_sd": float(np.std(min_ess_per_s, ddof=1)) if result.n_chains > 1 else float("nan"),
        "min_ess_per_1000_grads": float(np.mean(min_ess) / grads * 1000) if grads > 0 else None,
        "n_chains": result.n_chains,
    }
    if row["min_ess_per_1000_grads"] is None:        # no gradients: no such column (see the docstring)
        del row["min_ess_per_1000_grads"]
    return row
