"""Planted bugs must make the tests fail, whatever the seed.

Each mutation edits one line of a copy of mcmc_lib in a temporary directory (a wrong sign, a missing
Hastings term, a wrong constant in an adaptation rule) and runs a selection of tests against the
copy in a subprocess (tests/planted.py). The test passes only if those tests FAIL on the mutant, so
a check that cannot fail would be caught here.

Every selection is a deterministic test: a formula checked on one step with known inputs (an
acceptance probability recomputed at the recorded proposal, one step of an adaptation rule, the
U-turn criterion on hand-made momenta), parametrised over several seeds where randomness enters.
So a planted bug is caught by every seed, not by a lucky random path; moment tests (the exactness
tests of each sampler) catch most of these bugs too, but only with some probability.

This file plants bugs in the shared library (samplers, adaptation rules, diagnostics). Each
chapter's own planted bugs live beside its other tests, in tests/test_<chapter>.py (gsm, kmc, mamba,
mcma, nonrev_u): `pytest tests/test_mamba.py -k planted` runs MAMBA's, for example.
"""
import os
from concurrent.futures import ThreadPoolExecutor

import pytest

from planted import assert_caught, run_mutant

SAMPLERS = "mcmc_lib/samplers/classic.py"
AM = "mcmc_lib/samplers/adaptive_metropolis.py"
NUTS = "mcmc_lib/samplers/nuts.py"
BASE = "mcmc_lib/samplers/base.py"
DIAG = "mcmc_lib/diagnostics.py"

# name: (module, original line, planted bug, test file, test selection)
MUTATIONS = {
    # --- acceptance probabilities, against the Metropolis-Hastings formula at the recorded proposal
    "mala-drift-sign": (SAMPLERS, "y = state.x + 0.5 * h[:, None] ** 2 * state.grad",
                        "y = state.x - 0.5 * h[:, None] ** 2 * state.grad",
                        "test_samplers.py", "accept_prob_formula_MALA"),
    "mala-no-hastings": (SAMPLERS, "+ mala_log_proposal(state.x, y, grad_y, h)\n"
                                   "                 + 0.5 * np.einsum(\"ij,ij->i\", noise, noise))", ")",
                         "test_samplers.py", "accept_prob_formula_MALA"),
    "hmc-kinetic-sign": (SAMPLERS, "- 0.5 * (np.vecdot(p, p) - np.vecdot(p0, p0))",
                         "+ 0.5 * (np.vecdot(p, p) - np.vecdot(p0, p0))",
                         "test_samplers.py", "accept_prob_formula_HMC"),
    "leapfrog-inner-half-kick": (SAMPLERS, "h_squared = h * h", "h_squared = 0.5 * h * h",
                                 "test_samplers.py", "leapfrog_is_the_textbook_scheme"),
    "leapfrog-momentum-unscaled": (SAMPLERS, "p = scaled_momentum / h", "p = scaled_momentum",
                                   "test_samplers.py", "leapfrog_is_the_textbook_scheme"),
    "leapfrog-uncounted-gradient": (SAMPLERS, "target.n_grad_evals += x.shape[0]", "pass",
                                    "test_samplers.py", "leapfrog_is_the_textbook_scheme"),
    "am-wrong-acceptance-ratio": (AM, "logp_y - state.logp", "logp_y - 0.9 * state.logp",
                                  "test_samplers.py", "accept_prob_formula_random_walk and not RWM"),
    # --- adaptation rules, one step against their formula
    "am-scale-constant": (AM, "self.scale = 2.38**2 / d", "self.scale = 2.4**2 / d",
                          "test_samplers.py", "haario_am_recursive_covariance"),
    "am-scale-dimension": (AM, "self.scale = 2.38**2 / d", "self.scale = 2.38**2 / d**0.5",
                           "test_samplers.py", "haario_am_recursive_covariance"),
    "am-covariance-update": (AM, 'self.scatter += np.einsum("ni,nj->nij", delta, state.x - self.mean)',
                             'self.scatter += np.einsum("ni,nj->nij", delta, delta)',
                             "test_samplers.py", "haario_am_recursive_covariance"),
    "cholesky-am-schedule": (AM, "rho = self.rho0 / (1.0 + iteration / self.schedule_t0)",
                             "rho = self.rho0 / (1.0 + iteration * self.schedule_t0)",
                             "test_samplers.py", "cholesky_am_one_step"),
    "robbins-monro-direction": (BASE, "(accepted.astype(float) - target_rate) / target_rate",
                                "(target_rate - accepted.astype(float)) / target_rate",
                                "test_samplers.py", "robbins_monro or step_size_adaptation_formula"),
    "dual-averaging-direction": (NUTS, "(self.target_accept - np.minimum(accept_stat, 1.0))",
                                 "(np.minimum(accept_stat, 1.0) - self.target_accept)",
                                 "test_nuts.py", "dual_averaging"),
    "dual-averaging-kappa": (NUTS, "weight = self.t ** -self.kappa", "weight = 1.0 / self.t",
                             "test_nuts.py", "dual_averaging"),
    "mcma-damping-formula": ("mcmc_lib/methods/mcma.py", "/ (damping * (1 - target_success)))",
                             "/ damping)", "test_mcma.py", "success_rule_and_damping"),
    "mcma-damping-constant": ("mcmc_lib/methods/mcma.py", '"damping": 1 + dim / 2,', '"damping": 1 + dim,',
                              "test_mcma.py", "success_rule_and_damping"),
    "kmc-step-size-direction": ("mcmc_lib/methods/kmc.py",
                                "self.log_range += a_t * (info.accept_prob - self.target_accept)[:, None]",
                                "self.log_range += a_t * (self.target_accept - info.accept_prob)[:, None]",
                                "test_kmc.py", "kmc_step_size_adaptation"),
    "kamh-scale-direction": ("mcmc_lib/methods/kmc.py",
                             "self.nu2 *= np.exp(a_t * (info.accept_prob - self.target_accept))",
                             "self.nu2 *= np.exp(a_t * (self.target_accept - info.accept_prob))",
                             "test_kmc.py", "kamh_scale_adaptation"),
    "gsm-beta-direction": ("mcmc_lib/methods/gsm.py", "(accepted.astype(float) - target_accept)",
                           "(target_accept - accepted.astype(float))", "test_gsm.py", "rmsprop_step_and_beta"),
    "gsm-rmsprop-decay": ("mcmc_lib/methods/gsm.py", "S *= 1.0 - kappa", "S *= kappa",
                          "test_gsm.py", "rmsprop_step_and_beta"),
    # --- NUTS's no-U-turn criterion on hand-made momenta
    "u-turn-or": (NUTS, "return np.dot(p_sharp_minus, rho) > 0 and np.dot(p_sharp_plus, rho) > 0",
                  "return np.dot(p_sharp_minus, rho) > 0 or np.dot(p_sharp_plus, rho) > 0",
                  "test_nuts.py", "u_turn"),
    "u-turn-no-cross-check": (NUTS, "\n                and no_u_turn(sharp * first.begin.p, sharp * second.begin.p, "
                                    "first.rho + second.begin.p)", "",
                              "test_nuts.py", "u_turn"),
    "u-turn-without-metric": (NUTS, "sharp = self.inv_metric", "sharp = 1.0", "test_nuts.py", "u_turn"),
    "divergence-counted-as-nonfinite": (NUTS, "                self.divergent = True",
                                        "                self.nonfinite = True", "test_nuts.py", "divergences"),
    # --- the committed default store: read only for the same units and unchanged code
    "default-store-ignores-code": ("mcmc_lib/store.py",
                                   'if record is None or not _same_units(record, units) or code_changes(record["provenance"], units, code):',
                                   "if record is None or not _same_units(record, units):",
                                   "test_units.py", "default_build_takes_its_own"),
    "default-store-ignores-units": ("mcmc_lib/store.py",
                                    'if record is None or not _same_units(record, units) or code_changes(record["provenance"], units, code):',
                                    'if record is None or code_changes(record["provenance"], units, code):',
                                    "test_units.py", "default_build_takes_its_own"),
    "store-check-runs-the-units": ("mcmc_lib/store.py", '    if store_setting() == "check":', "    if False:",
                                   "test_units.py", "store_check_runs_nothing"),
    "native-paper-run-stores-floats": ("mcmc_lib/store.py", "        _refuse_native_floats(chapter, name, units)",
                                       "        pass", "test_units.py", "native_paper_run_runs_only"),
    # --- the checkpoint of a paper run: read back on another machine, emptied once stored
    "checkpoint-not-read": ("mcmc_lib/units.py", "    entry = kept.load(unit, key) if kept is not None else None",
                            "    entry = None", "test_units.py", "checkpoint_keeps_finished_units"),
    "cache-time-over-checkpoint": ("mcmc_lib/units.py",
                                   "    if entry is not None:\n        return entry\n    entry = store.load(unit, key)",
                                   "    entry = store.load(unit, key) or entry", "test_units.py",
                                   "keeps_its_own_time_over"),
    # --- each unit keeps the machine it ran on (a resumed run's units can come from other machines)
    "unit-machine-not-kept": ("mcmc_lib/units.py",
                              "            cpu_seconds[i], machines[i] = entry.get(\"cpu_seconds\"), entry.get(\"machine\")",
                              "            cpu_seconds[i] = entry.get(\"cpu_seconds\")", "test_units.py",
                              "keeps_the_machine"),
    "checkpoint-kept-after-store": ("mcmc_lib/store.py",
                                    "        unit_runner.UnitCheckpoint(run_options[\"checkpoint\"]).remove(units, stats.keys)   # stored now",
                                    "        pass", "test_units.py", "paper_profile_checkpoints"),
    "resumed-paper-run-redoes-stored": ("mcmc_lib/store.py", 'or (profile == "paper" and setting != "refresh")',
                                        "or False", "test_units.py", "paper_profile_checkpoints"),
    "stored-units-carried-across-code-change": ("mcmc_lib/store.py",
                                                " or code_changes(record[\"provenance\"], units, code):\n        return 0",
                                                ":\n        return 0", "test_units.py",
                                                "changed_sizes_computes_only_the_new_units or default_store_refresh"),
    "stored-units-not-carried": ("mcmc_lib/store.py", "            carry_stored_units(own, units, run_options[\"checkpoint\"], code, rerun, keys, before)",
                                 "            pass", "test_units.py", "changed_sizes_computes_only_the_new_units"),
    "default-refresh-recomputes-stored": ("mcmc_lib/store.py",
                                          "            _carry(own, units, unit_runner.UnitCache(unit_runner.cache_directory(run_options.get(\"cache\"))), code)",
                                          "            pass", "test_units.py", "default_store_refresh_computes_only"),
    "default-store-rewrites-unchanged-records": ("mcmc_lib/store.py",
                                                 "    return unit_runner.cache_directory(cache) is not None and _current_record(",
                                                 "    return False and _current_record(",
                                                 "test_units.py", "default_store_refresh_computes_only"),
    "shared-core-never-counted": ("mcmc_lib/store.py", "            and seconds > SHARED_CORE_RATIO * cpu_seconds)",
                                  "            and seconds > 2 * SHARED_CORE_RATIO * cpu_seconds)",
                                  "test_units.py", "core_to_themselves"),
    "rerun-carries-shared-stored-units": ("mcmc_lib/store.py",
                                          'skip_remeasured and _needs_remeasuring(row, before)):',
                                          "False):", "test_units.py", "reruns_the_named"),
    "rerun-takes-shared-cache-back": ("mcmc_lib/store.py",
                                      "                drop_measurements_to_redo(units, places, keys, before)",
                                      "                pass", "test_units.py", "reruns_the_named"),
    "shared-core-warning-of-old-runs": ("mcmc_lib/store.py", 'if shared and provenance["date"] >= since:',
                                        "if shared:", "test_units.py", "core_to_themselves"),
    "shared-core-not-counted-for-old-records": ("mcmc_lib/store.py",
                                                '    if "n_units_sharing_a_core" not in record["provenance"]:',
                                                "    if False:", "test_units.py", "core_to_themselves"),
    "finish-time-not-recorded": ("mcmc_lib/units.py", "            finished[index] = finished_now()",
                                 "            finished[index] = None", "test_units.py", "records_when_it_finished"),
    "carried-finish-time-reset": ("mcmc_lib/store.py",
                                  'row.get("cpu_seconds"), machine, row.get("finished"))',
                                  'row.get("cpu_seconds"), machine)', "test_units.py", "records_when_it_finished"),
    "rerun-before-ignored": ("mcmc_lib/store.py",
                             "        before is not None and (finished is None or _instant(finished) < before))",
                             "        False)", "test_units.py", "finished_before_a_time"),
    "sizes-not-re-recorded": ("mcmc_lib/store.py",
                              "            if _writes_own_store(profile) and sizes is not None and _record_sizes(own_path, sizes):",
                              "            if False:", "test_units.py", "changes_one_experiments_size"),
    # --- portable floating point: the settings an x86-64 with AVX2 and FMA gets
    "portable-sets-nothing": ("mcmc_lib/portable.py", "    return dict(PORTABLE_VARIABLES)", "    return {}",
                              "test_portable.py", "haswell_kernels_and_no_avx512"),
    # --- claims: how many replicates an inconclusive claim needs
    "planned-replicates-ignored": ("mcmc_lib/claims.py", "            claim.outcome = INCONCLUSIVE",
                                   "            pass", "test_claims.py", "planned"),
    "replicates-to-decide-by-z": ("mcmc_lib/claims.py", "        while stats.t.ppf(quantile, n - 1) * sd / math.sqrt(n) >= gap:",
                                  "        while False:", "test_claims.py", "replicates"),
    "replicates-to-decide-geometric-not-logged": ("mcmc_lib/claims.py",
                                                  "            value, edges = math.log(value), [math.log(edge) for edge in edges]",
                                                  "            pass", "test_claims.py", "replicates"),
    "replicates-to-decide-band-fixed": ("mcmc_lib/claims.py",
                                        "            return _first_deciding_count(estimate, rule_at, first, quantile)",
                                        "            pass", "test_claims.py", "replicates"),
    # --- diagnostics
    "ess-of-stuck-chain-is-N": (DIAG, "if np.all(chains_2d == first):\n        return 0.0",
                                "if np.all(chains_2d == first):\n        return float(chains_2d.size)",
                                "test_diagnostics.py", "never_moves"),
    "geyer-no-tail-term": (DIAG, "        tau += rho[2 * last]", "        tau += 0.0",
                           "test_diagnostics.py", "geyer_truncation_equals_arviz"),
    "geyer-not-monotone": (DIAG, "tau = -1.0 + 2.0 * np.minimum.accumulate(pairs[:last]).sum()",
                           "tau = -1.0 + 2.0 * pairs[:last].sum()",
                           "test_diagnostics.py", "geyer_truncation_equals_arviz"),
    "mmd-mean-distance-bandwidth": (DIAG, "bandwidth = float(np.median(d))", "bandwidth = float(np.mean(d))",
                                    "test_diagnostics.py", "median_pairwise"),
    "mmd-bandwidth-not-squared": (DIAG, "np.exp(-sq_distances(a, b) / (2.0 * bw**2))",
                                  "np.exp(-sq_distances(a, b) / (2.0 * bw))",
                                  "test_diagnostics.py", "median_pairwise"),
}


@pytest.fixture(scope="module")
def mutant_runs(request, tmp_path_factory):
    """Run the selected mutants concurrently, one subprocess per core (each is mostly start-up and
    imports), and hand each test its future."""
    selected = [item.callspec.params["name"] for item in request.session.items
                if item.module is request.module and hasattr(item, "callspec")]
    pool = ThreadPoolExecutor(max_workers=os.cpu_count() or 1)
    futures = {name: pool.submit(run_mutant, tmp_path_factory.mktemp(name), *MUTATIONS[name])
               for name in selected}
    yield futures
    pool.shutdown(cancel_futures=True)


@pytest.mark.parametrize("name", MUTATIONS)
def test_planted_bug_is_caught(name, mutant_runs):
    assert_caught(mutant_runs[name].result(), MUTATIONS[name][0])
