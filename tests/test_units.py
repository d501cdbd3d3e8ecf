"""Experiments as units (mcmc_lib.units) and the paper-profile store (mcmc_lib.store).

Unit functions here are made the way a Jupyter cell makes them (module ``__main__``, source in
linecache), because the chapters define their experiment code in cells.
"""
import datetime
import hashlib
import json
import linecache
import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from mcmc_lib import portable, store, units
from mcmc_lib.units import Unit, run_units
from mcmc_lib.units import run_with_stats as run

ROOT = Path(__file__).resolve().parent.parent

TRIAL = '''
def trial(seed, n, scale, counter=None):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((n, n))
    if counter is not None:                       # one line per call: counts what really ran
        with open(counter, "a") as file:
            file.write("x\\n")
    return {"mean": float(a.mean()), "eig": np.linalg.eigvalsh(a @ a.T) * scale,
            "pair": (n, np.float32(scale))}
'''


def cell(source, namespace=None):
    """Run ``source`` as a notebook cell would: functions get module ``__main__`` and a source that
    ``inspect.getsource`` finds through linecache (IPython registers every cell there)."""
    filename = f"<cell-{hashlib.sha1(source.encode()).hexdigest()[:12]}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace = {"__name__": "__main__", "np": np} if namespace is None else namespace
    exec(compile(source, filename, "exec"), namespace)
    return namespace


def make_units(fn, count=6, **extra):
    return [Unit(fn, dict(n=20, scale=1.5, **extra), seed=[7, i]) for i in range(count)]


def serial_loop(unit_list):
    return [unit.fn(seed=unit.seed, **unit.params) for unit in unit_list]


def assert_identical(a, b):
    """Equal bit for bit, with the same types and dtypes, all the way down."""
    assert type(a) is type(b), (type(a), type(b))
    if isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and a.shape == b.shape
        assert a.tobytes() == b.tobytes()
    elif isinstance(a, dict):
        assert list(a) == list(b)
        for key in a:
            assert_identical(a[key], b[key])
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            assert_identical(x, y)
    elif isinstance(a, float) and np.isnan(a):
        assert np.isnan(b)
    else:
        assert a == b


def calls(counter):
    return len(counter.read_text().splitlines()) if counter.exists() else 0


@pytest.fixture(autouse=True)
def computing_portably(monkeypatch):
    """The paper-profile tests run as under make, whatever this process's kernels: a native process on a
    CPU that can compute portably refuses float parameters at the paper profile (tested on its own)."""
    monkeypatch.setattr(portable, "is_portable", lambda: True)


@pytest.fixture
def cache_dir(tmp_path):
    return tmp_path / "cache"


# ---------------------------------------------------------------- backends give the serial loop's results


def test_loky_matches_serial_loop():
    trial = cell(TRIAL)["trial"]
    unit_list = make_units(trial)
    results, stats = run(unit_list, jobs=2, cache="off")
    assert stats.backend == "loky" and stats.jobs == 2
    assert_identical(results, serial_loop(unit_list))


def test_dask_local_cluster_matches_serial_loop(monkeypatch):
    # Workers as threads of this process start in a fraction of a second (worker processes take
    # seconds); the loky test above covers shipping a notebook function to other processes.
    distributed = pytest.importorskip("distributed")
    trial = cell(TRIAL)["trial"]
    unit_list = make_units(trial)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as cluster:
        monkeypatch.setenv(units.SCHEDULER_ENV, cluster.scheduler_address)
        results, stats = run(unit_list, cache="off")
    assert stats.backend.startswith("dask") and stats.jobs == 2
    assert_identical(results, serial_loop(unit_list))


def test_one_job_runs_in_this_process():
    namespace = cell("import os\ndef pid(seed):\n    return os.getpid()\n")
    results, stats = run([Unit(namespace["pid"], {}, seed=i) for i in range(3)], jobs=1, cache="off")
    assert stats.backend == "serial" and results == [os.getpid()] * 3


# ---------------------------------------------------------------- the cache key


def test_unchanged_source_is_loaded_and_changed_source_recomputed(cache_dir):
    unit_list = make_units(cell(TRIAL)["trial"])
    first, stats = run(unit_list, jobs=1, cache=cache_dir)
    assert stats.n_cached == 0
    again = make_units(cell(TRIAL)["trial"])               # the same cell run again: a new function object
    second, stats = run(again, jobs=1, cache=cache_dir)
    assert stats.n_cached == len(unit_list)
    assert_identical(second, first)
    changed = cell(TRIAL.replace("* scale", "* scale * 2"))["trial"]
    third, stats = run(make_units(changed), jobs=1, cache=cache_dir)
    assert stats.n_cached == 0
    assert not np.array_equal(third[0]["eig"], first[0]["eig"])


def test_parameters_and_seed_are_in_the_key(cache_dir):
    trial = cell(TRIAL)["trial"]
    run(make_units(trial), jobs=1, cache=cache_dir)
    other_scale = Unit(trial, dict(n=20, scale=2.5), seed=[7, 0])
    other_seed = Unit(trial, dict(n=20, scale=1.5), seed=[8, 0])
    _, stats = run([other_scale, other_seed], jobs=1, cache=cache_dir)
    assert stats.n_cached == 0


HELPERS = '''
OFFSET = 1.0
def shift(x):
    return x + OFFSET
def unit(seed):
    return shift(np.random.default_rng(seed).standard_normal())
'''


def test_helpers_and_globals_reached_through_the_unit_invalidate(cache_dir):
    namespace = cell(HELPERS)
    run([Unit(namespace["unit"], {}, seed=1)], cache=cache_dir)
    assert run([Unit(cell(HELPERS)["unit"], {}, seed=1)], cache=cache_dir)[1].n_cached == 1
    helper_changed = cell(HELPERS.replace("x + OFFSET", "x - OFFSET"))
    assert run([Unit(helper_changed["unit"], {}, seed=1)], cache=cache_dir)[1].n_cached == 0
    namespace["OFFSET"] = 2.0                              # a global the helper reads, changed in place
    assert run([Unit(namespace["unit"], {}, seed=1)], cache=cache_dir)[1].n_cached == 0


DECORATED = '''
import functools
@functools.lru_cache(maxsize=None)
def table(n):
    return tuple(range(n))
def unit(seed):
    return sum(table(4)) + seed
'''


WRAPPED = '''
import functools
def doubled(f):
    @functools.wraps(f)
    def wrapper(*args, **kwargs):
        return 2 * f(*args, **kwargs)
    return wrapper
@doubled
def unit(seed):
    return seed
'''


def test_decorated_helpers_are_hashed_by_their_source(cache_dir):
    run([Unit(cell(DECORATED)["unit"], {}, seed=1)], cache=cache_dir)
    assert run([Unit(cell(DECORATED)["unit"], {}, seed=1)], cache=cache_dir)[1].n_cached == 1
    changed = cell(DECORATED.replace("range(n)", "range(1, n)"))
    assert run([Unit(changed["unit"], {}, seed=1)], cache=cache_dir)[0] == [7]
    assert run([Unit(cell(WRAPPED)["unit"], {}, seed=5)], cache=cache_dir)[0] == [10]
    wrapper_changed = cell(WRAPPED.replace("2 * f", "3 * f"))
    assert run([Unit(wrapper_changed["unit"], {}, seed=5)], cache=cache_dir)[0] == [15]


CLASS_CELL = '''
from dataclasses import dataclass
@dataclass
class Model:
    rate: float = 2.0
    def draw(self, rng):
        return rng.exponential(1 / self.rate)
def unit(seed):
    return Model().draw(np.random.default_rng(seed))
'''


def test_notebook_classes_are_part_of_the_key(cache_dir):
    first = run([Unit(cell(CLASS_CELL)["unit"], {}, seed=3)], cache=cache_dir)
    assert run([Unit(cell(CLASS_CELL)["unit"], {}, seed=3)], cache=cache_dir)[1].n_cached == 1
    changed = cell(CLASS_CELL.replace("rate: float = 2.0", "rate: float = 3.0"))
    second = run([Unit(changed["unit"], {}, seed=3)], cache=cache_dir)
    assert second[1].n_cached == 0 and second[0] != first[0]


def test_a_change_in_mcmc_lib_invalidates(cache_dir, monkeypatch):
    unit_list = make_units(cell(TRIAL)["trial"], count=2)
    run(unit_list, cache=cache_dir)
    assert run(unit_list, cache=cache_dir)[1].n_cached == 2
    monkeypatch.setattr(units, "library_code_hash", lambda *args, **kwargs: "another mcmc_lib")
    assert run(unit_list, cache=cache_dir)[1].n_cached == 0


def test_library_hash_covers_the_modules_a_unit_reaches_and_their_imports(tmp_path):
    package = tmp_path / "mcmc_lib"
    (package / "methods").mkdir(parents=True)
    files = {"__init__.py": "", "core.py": "X = 1\n", "report.py": "from .core import X\n",
             "methods/__init__.py": "", "methods/a.py": "from mcmc_lib.core import X\n",
             "methods/b.py": "B = 1\n", "methods/c.py": "def f():\n    from mcmc_lib.methods.b import B\n"}
    for name, text in files.items():
        (package / name).write_text(text)
    chosen = (None, frozenset({"mcmc_lib.methods.a"}), frozenset({"mcmc_lib.methods.c"}))
    assert units.library_closure(chosen[2], package) == ["mcmc_lib.methods.b", "mcmc_lib.methods.c"]
    before = {m: units.library_code_hash(m, package) for m in chosen}
    (package / "methods/b.py").write_text("B = 2\n")
    after = {m: units.library_code_hash(m, package) for m in chosen}
    assert after[chosen[1]] == before[chosen[1]]             # a does not reach b
    assert after[chosen[2]] != before[chosen[2]]             # c imports b (inside a function)
    assert after[None] != before[None]
    (package / "report.py").write_text("from .core import X\nY = 2\n")    # a module no unit runs
    assert units.library_code_hash(chosen[1], package) == after[chosen[1]]
    (package / "core.py").write_text("X = 2\n")                           # a imports core
    assert units.library_code_hash(chosen[1], package) != after[chosen[1]]


def test_the_real_library_hash_leaves_out_the_reporting_modules():
    reached = units.library_closure({"mcmc_lib.methods.gsm"})
    assert {"mcmc_lib.methods.gsm", "mcmc_lib.samplers.base", "mcmc_lib.validation"} <= set(reached)
    assert not {"mcmc_lib.store", "mcmc_lib.claims", "mcmc_lib.regression", "mcmc_lib.book",
                "mcmc_lib.literate", "mcmc_lib.units", "mcmc_lib.methods.kmc"} & set(reached)


def test_a_unit_reaches_the_modules_it_uses():
    namespace = cell("import mcmc_lib.methods.gsm as gsm\ndef unit(seed):\n    return gsm.__name__\n")
    assert units.function_fingerprint(namespace["unit"])[1] == {"mcmc_lib.methods.gsm"}
    inside = cell("def unit(seed):\n    from mcmc_lib.diagnostics import ess\n    return ess\n")
    assert units.function_fingerprint(inside["unit"])[1] == {"mcmc_lib.diagnostics", "mcmc_lib.diagnostics.ess"}
    target = cell("from mcmc_lib.targets import Gaussian\nTARGET = Gaussian(np.ones(2))\n"
                  "def unit(seed):\n    return TARGET.dim\n")
    assert "mcmc_lib.targets" in units.function_fingerprint(target["unit"])[1]   # the class of a global
    whole = cell("import mcmc_lib\ndef unit(seed):\n    return mcmc_lib.__name__\n")
    assert units.function_fingerprint(whole["unit"])[1] is None
    plain = cell("def unit(seed):\n    return seed\n")
    assert units.function_fingerprint(plain["unit"])[1] == frozenset()


def test_shared_data_is_hashed_by_its_contents():
    digest = lambda value: units.Fingerprint().value(value, "a global")
    array = np.arange(6.0)
    assert digest({"a": array, "b": array}) == digest({"a": array, "b": array.copy()})   # sharing is not content
    assert digest([array, 1]) != digest([array + 1, 1])
    assert digest((1, 2)) != digest([1, 2]) and digest(1) != digest(1.0) != digest(True)
    loop = [1]
    loop.append(loop)
    assert digest(loop) == digest(loop)                         # a cycle ends, deterministically


def test_a_set_hashes_the_same_in_every_process():
    """A set's order (and so its pickle) depends on the process's string-hash seed; its digest must not."""
    script = ("from mcmc_lib.units import Fingerprint; "
              "print(Fingerprint().value({'alpha', 'beta', 'gamma', 'delta', 'epsilon', 'zeta'}, 'a set'))")
    digests = {subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True,
                              cwd=ROOT, env={**os.environ, "PYTHONHASHSEED": str(seed)}).stdout
               for seed in (1, 2, 3)}
    assert len(digests) == 1


# ---------------------------------------------------------------- interrupted runs resume


def test_interrupted_run_resumes_without_recomputing(tmp_path, cache_dir):
    namespace = cell(TRIAL + '''
import os
import subprocess
import sys
def fragile(seed, n, scale, counter, flag, fail_at):
    if seed[1] == fail_at and os.path.exists(flag):
        raise RuntimeError("interrupted")
    return trial(seed, n, scale, counter)
''')
    counter, flag = tmp_path / "calls", tmp_path / "flag"
    flag.touch()
    unit_list = make_units(namespace["fragile"], count=6, counter=str(counter), flag=str(flag), fail_at=3)
    with pytest.raises(RuntimeError, match="interrupted"):
        run_units(unit_list, jobs=1, cache=cache_dir)
    assert calls(counter) == 3                             # units 0, 1, 2 finished before unit 3 failed
    flag.unlink()
    results, stats = run(unit_list, jobs=1, cache=cache_dir)
    assert stats.n_cached == 3 and calls(counter) == 6    # only units 3, 4, 5 ran again
    assert_identical(results, [namespace["trial"](u.seed, 20, 1.5) for u in unit_list])


def test_parallel_results_are_cached_as_they_arrive(tmp_path, cache_dir):
    namespace = cell(TRIAL + '''
import os, time
def fragile(seed, n, scale, counter, flag):
    if seed[1] == 5 and os.path.exists(flag):
        time.sleep(0.5)
        raise RuntimeError("interrupted")
    return trial(seed, n, scale, counter)
''')
    counter, flag = tmp_path / "calls", tmp_path / "flag"
    flag.touch()
    unit_list = make_units(namespace["fragile"], count=6, counter=str(counter), flag=str(flag))
    with pytest.raises(RuntimeError, match="interrupted"):
        run_units(unit_list, jobs=2, cache=cache_dir)
    finished = len(list(cache_dir.rglob("*.pkl")))
    assert finished >= 1
    flag.unlink()
    before = calls(counter)
    _, stats = run(unit_list, jobs=2, cache=cache_dir)
    assert stats.n_cached == finished and calls(counter) - before == 6 - finished


def test_cache_off_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv(units.CACHE_ENV, "off")
    monkeypatch.chdir(tmp_path)
    assert units.cache_directory() is None
    _, stats = run(make_units(cell(TRIAL)["trial"], count=2), jobs=1)
    assert stats.n_cached == 0 and not any(tmp_path.iterdir())
    monkeypatch.setenv(units.CACHE_ENV, str(tmp_path / "elsewhere"))
    run(make_units(cell(TRIAL)["trial"], count=2), jobs=1)
    assert len(list((tmp_path / "elsewhere").rglob("*.pkl"))) == 2


# ---------------------------------------------------------------- bad input


def test_bad_parameters_and_seeds_are_named():
    fn = cell(TRIAL)["trial"]
    with pytest.raises(ValueError, match="parameter 'target'"):
        Unit(fn, {"target": object()}, seed=1)
    with pytest.raises(ValueError, match=r"parameter 'grid'\[1\]"):
        Unit(fn, {"grid": [1, {2}]}, seed=1)
    with pytest.raises(ValueError, match="key 1"):
        Unit(fn, {"table": {1: 2.0}}, seed=1)
    with pytest.raises(ValueError, match="complex"):
        Unit(fn, {"z": np.array([1 + 2j])}, seed=1)
    with pytest.raises(ValueError, match="'seed'"):
        Unit(fn, {"seed": 3}, seed=1)
    for seed in (-1, 1.5, True, None, [], [1, -2], "7"):
        with pytest.raises(ValueError, match="seed"):
            Unit(fn, {}, seed=seed)
    with pytest.raises(ValueError, match="units\\[0\\]"):
        run_units([fn], cache="off")


def test_bad_results_settings_and_globals_are_named(monkeypatch):
    namespace = cell("def unit(seed):\n    return {'sampler': object()}\n")
    with pytest.raises(ValueError, match=r"result of units\[0\].*\['sampler'\]"):
        run_units([Unit(namespace["unit"], {}, seed=1)], jobs=1, cache="off")
    monkeypatch.setenv(units.JOBS_ENV, "two")
    with pytest.raises(ValueError, match=units.JOBS_ENV):
        units.job_count()
    locked = cell("def unit(seed):\n    with LOCK:\n        return seed\n",
                  {"__name__": "__main__", "LOCK": threading.Lock()})
    with pytest.raises(ValueError, match="global 'LOCK'"):
        units.unit_keys([Unit(locked["unit"], {}, seed=1)])
    with pytest.raises(ValueError, match="chapter"):
        store.store_path("../up", "fig2")


def test_json_like_values_round_trip_exactly():
    value = {"f64": np.linspace(0, 1, 7), "f32": np.arange(6, dtype=np.float32).reshape(2, 3) / 3,
             "int": np.arange(4, dtype=np.int16), "bool": np.array([True, False]), "str": np.array(["a", "bc"]),
             "empty": np.zeros((0, 3)),
             "scalars": [np.float64(0.1), np.float32(1 / 3), np.int64(-4), np.bool_(True)],
             "tuple": (1, (2.5, "x"), None), "special": [float("nan"), float("inf"), -0.0, 10 ** 30]}
    text = json.dumps(units.encode(value))
    assert_identical(units.decode(json.loads(text)), value)


def test_compact_encoding_round_trips_exactly_and_is_shorter():
    rng = np.random.default_rng(3)
    value = {"f64": rng.normal(size=(40, 3)), "big_endian": rng.normal(size=20).astype(">f8"),
             "strided": rng.normal(size=(8, 8))[:, ::2], "int": np.arange(-20, 20), "bool": rng.random(30) < 0.5,
             "small": np.linspace(0, 1, 5), "str": np.array(["a"] * 20), "special": np.array([np.nan, np.inf] * 10)}
    compact = json.dumps(units.encode(value, compact=True))
    decoded = units.decode(json.loads(compact))
    for key, array in value.items():
        assert decoded[key].shape == array.shape and decoded[key].dtype.kind == array.dtype.kind
        np.testing.assert_array_equal(decoded[key], array)
        assert decoded[key].flags.writeable
    assert isinstance(json.loads(compact)["f64"]["__ndarray__"], str)            # base64
    assert isinstance(json.loads(compact)["small"]["__ndarray__"], list)         # few values stay readable
    assert len(compact) < 0.7 * len(json.dumps(units.encode(value)))


def test_trial_chunks_split_a_cell_into_independent_seeded_units():
    trial = cell(TRIAL)["trial"]
    whole = units.trial_chunks(trial, {"scale": 1.5}, [7, 2], 25, trials_param="n")
    assert len(whole) == 1 and whole[0].params == {"scale": 1.5, "n": 25} and whole[0].seed == [7, 2]
    chunks = units.trial_chunks(trial, {"scale": 1.5}, [7, 2], 25, chunk_trials=10, trials_param="n")
    assert [u.params["n"] for u in chunks] == [10, 10, 5]
    assert [u.seed for u in chunks] == [[7, 2, 0], [7, 2, 1], [7, 2, 2]]
    assert all(u.params["scale"] == 1.5 for u in chunks)
    assert units.trial_chunks(trial, {}, 3, 4, chunk_trials=10, trials_param="n")[0].seed == [3, 0]
    for bad in (0, 2.5, True):
        with pytest.raises(ValueError, match="n_trials"):
            units.trial_chunks(trial, {}, 3, bad)
        with pytest.raises(ValueError, match="chunk_trials"):
            units.trial_chunks(trial, {}, 3, 4, chunk_trials=bad)


# ---------------------------------------------------------------- the checkpoint of a paper run


# Unit 2 fails until a flag file exists: a path, not a global's value, so the units' keys stay the same
FAILING_TRIAL = TRIAL.replace("    rng = np.random.default_rng(seed)",
                              "    if seed[1] == 2 and not os.path.exists(flag):\n"
                              "        raise RuntimeError('the machine went away')\n"
                              "    rng = np.random.default_rng(seed)")


def failing_units(tmp_path, counter):
    namespace = {"__name__": "__main__", "np": np, "os": os, "flag": str(tmp_path / "fixed")}
    return make_units(cell(FAILING_TRIAL, namespace)["trial"], count=4, counter=str(counter))


def test_a_checkpoint_keeps_finished_units_as_json_and_resumes_without_the_cache(tmp_path):
    """A paper run carried to another machine: the finished units come back from the committed JSON
    checkpoint alone (an empty cache there), identical, and only the unfinished ones run."""
    counter, checkpoint = tmp_path / "calls.txt", tmp_path / "checkpoint"
    unit_list = failing_units(tmp_path, counter)
    with pytest.raises(RuntimeError, match="went away"):
        run(unit_list, jobs=1, cache=tmp_path / "cache-of-machine-1", checkpoint=checkpoint)
    kept = sorted(checkpoint.glob("*/*.json"))
    assert len(kept) == 2 and calls(counter) == 2           # units 0 and 1 finished before unit 2 failed
    entry = json.loads(kept[0].read_text())
    assert entry["function"] == "__main__.trial" and entry["seed"] in ([7, 0], [7, 1])

    (tmp_path / "fixed").touch()
    results, stats = run(unit_list, jobs=1, cache=tmp_path / "cache-of-machine-2", checkpoint=checkpoint)
    assert stats.n_cached == 2 and calls(counter) == 4      # on machine 2: units 0 and 1 from the checkpoint
    assert_identical(results, serial_loop(unit_list))
    assert len(list(checkpoint.glob("*/*.json"))) == 4


def test_a_cached_unit_is_added_to_the_checkpoint(tmp_path):
    """A run begun before it had a checkpoint (its units only in one machine's cache) carries over."""
    unit_list = make_units(cell(TRIAL)["trial"], count=3)
    run(unit_list, jobs=1, cache=tmp_path / "cache")
    checkpoint = tmp_path / "checkpoint"
    _, stats = run(unit_list, jobs=1, cache=tmp_path / "cache", checkpoint=checkpoint)
    assert stats.n_cached == 3 and len(list(checkpoint.glob("*/*.json"))) == 3
    results, stats = run(unit_list, jobs=1, cache="off", checkpoint=checkpoint)
    assert stats.n_cached == 3
    assert_identical(results, serial_loop(unit_list))


def test_a_checkpointed_unit_keeps_its_own_time_over_another_runs_cache_entry(tmp_path):
    """Same key, same result, but the time is the sitting's: a cache entry left by another run (one
    stopped early) must not replace the time this run checkpointed or carried from the store."""
    unit_list = make_units(cell(TRIAL)["trial"], count=2)
    checkpoint, cache = tmp_path / "checkpoint", tmp_path / "cache"
    _, first = run(unit_list, jobs=1, cache="off", checkpoint=checkpoint)
    key = first.keys[0]
    units.UnitCache(cache).save(unit_list[0], key, units.UnitCheckpoint(checkpoint).load(unit_list[0], key)["result"],
                                seconds=999.0, cpu_seconds=999.0, finished="2026-01-01T00:00:00+00:00")
    _, again = run(unit_list, jobs=1, cache=cache, checkpoint=checkpoint)
    assert again.n_cached == 2 and again.unit_seconds == first.unit_seconds
    assert again.unit_finished == first.unit_finished


KEY_OF_A_NOTEBOOK_UNIT = """
import json, linecache, sys
import numpy as np
from mcmc_lib import targets, units
source = "def unit(seed, n):\\n    return float(targets.neal_gaussian(n).logp(np.zeros((1, n)))[0])\\n"
filename = "<ipython-input-" + sys.argv[1] + ">"          # a kernel names its cells after its process
linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
namespace = {"__name__": "__main__", "np": np, "targets": targets}
exec(compile(source, filename, "exec"), namespace)
print(json.dumps([units.unit_keys([units.Unit(namespace["unit"], {"n": 3}, seed=[1, 2])])[0],
                  units.__file__]))
"""


def test_a_units_key_does_not_depend_on_where_the_clone_is(tmp_path):
    """A checkpoint made in one clone serves another: the key is the same from a copy of mcmc_lib at
    another path, in another process with other cell file names."""
    import shutil
    answers = []
    for place in ("machine-1/clone", "elsewhere/another-clone"):
        root = tmp_path / place
        shutil.copytree(ROOT / "mcmc_lib", root / "mcmc_lib", ignore=shutil.ignore_patterns("__pycache__"))
        environment = {**os.environ, "PYTHONPATH": str(root)}
        out = subprocess.run([sys.executable, "-c", KEY_OF_A_NOTEBOOK_UNIT, place.replace("/", "-")],
                             capture_output=True, text=True, env=environment, cwd=root, check=True).stdout
        answers.append(json.loads(out))
    assert answers[0][1].startswith(str(tmp_path / "machine-1")) and answers[1][1].startswith(str(tmp_path / "elsewhere"))
    assert answers[0][0] == answers[1][0]


def test_the_paper_profile_checkpoints_an_experiment_until_it_is_stored(tmp_path, monkeypatch):
    counter = tmp_path / "calls.txt"
    monkeypatch.setenv("MCMC_BOOK_PROFILE", "paper")
    options = dict(store_dir=tmp_path / "paper", jobs=1)
    checkpoint = store.checkpoint_directory("demo", tmp_path / "paper")
    assert checkpoint == tmp_path / "paper" / "demo" / "checkpoint"
    failing = failing_units(tmp_path, counter)
    with pytest.raises(RuntimeError):
        store.largest_scale("demo", "exp", failing, cache=tmp_path / "cache-1", **options)
    assert len(list(checkpoint.glob("*/*.json"))) == 2 and not (tmp_path / "paper" / "demo" / "exp.json").exists()

    assert [len(s) for s in store.checkpoint_costs(tmp_path / "paper")["demo"]] == [2]
    (tmp_path / "fixed").touch()
    counter.unlink()
    ran = store.largest_scale("demo", "exp", failing, cache=tmp_path / "cache-2", **options)
    assert calls(counter) == 2 and ran.record["n_from_cache"] == 2
    assert (tmp_path / "paper" / "demo" / "exp.json").exists() and not checkpoint.exists()

    # Resumed on a third machine (no cache, the checkpoint emptied): the stored experiment is not redone,
    # unless MCMC_BOOK_STORE=refresh; other units (here: one more) are run.
    resumed = store.largest_scale("demo", "exp", failing, cache=tmp_path / "cache-3", **options)
    assert calls(counter) == 2 and resumed.source == "store" and "the code is unchanged since" in resumed.provenance
    assert_identical(resumed.values, ran.values)
    more = failing_units(tmp_path, counter)[:3] + make_units(cell(TRIAL)["trial"], count=1)
    assert store.largest_scale("demo", "exp", more, cache=tmp_path / "cache-3", **options).source == "run"
    monkeypatch.setenv("MCMC_BOOK_STORE", "refresh")
    counter.unlink()
    assert store.largest_scale("demo", "exp", failing, cache="off", **options).source == "run" and calls(counter) == 4


# ---------------------------------------------------------------- the paper-profile store


def test_store_round_trip_with_provenance_and_code_changes(tmp_path, cache_dir, monkeypatch):
    trial = cell(TRIAL)["trial"]
    unit_list = make_units(trial, count=3)
    options = dict(store_dir=tmp_path / "paper", cache=cache_dir, jobs=1)

    monkeypatch.setenv("MCMC_BOOK_PROFILE", "default")
    fresh = store.largest_scale("demo", "exp", unit_list, sizes={"n": 20}, **options)
    assert fresh.source == "run" and "no paper-profile results are stored" in fresh.provenance

    monkeypatch.setenv("MCMC_BOOK_PROFILE", "paper")
    ran = store.largest_scale("demo", "exp", unit_list, sizes={"n": 20}, **options)
    path = tmp_path / "paper" / "demo" / "exp.json"
    assert ran.source == "run" and path.exists() and "written to the store" in ran.provenance
    record = json.loads(path.read_text())
    for key in ("commit", "profile", "machine", "jobs", "backend", "date", "wall_seconds", "unit_seconds_total",
                "code_hash", "n_units"):
        assert key in record["provenance"]
    assert record["provenance"]["profile"] == "paper" and len(record["units"]) == 3

    monkeypatch.setenv("MCMC_BOOK_PROFILE", "default")
    shown = store.largest_scale("demo", "exp", make_units(trial, count=1), **options)
    assert shown.source == "store" and shown.profile == "paper" and not shown.code_changed
    assert_identical(shown.values, ran.values)
    assert shown.params == [u.params for u in unit_list] and shown.sizes == {"n": 20}
    assert "Paper-profile results from the committed store" in shown.provenance
    assert "unchanged since" in shown.provenance

    changed = cell(TRIAL.replace("* scale", "* scale * 2"))["trial"]
    edited = store.largest_scale("demo", "exp", make_units(changed), **options)
    assert edited.code_changed and "the experiment's functions changed" in edited.provenance

    monkeypatch.setattr(units, "library_code_hash", lambda *args, **kwargs: "another mcmc_lib")
    later = store.largest_scale("demo", "exp", unit_list, **options)
    assert later.code_changed and "mcmc_lib changed since" in later.provenance

    monkeypatch.setenv("MCMC_BOOK_PROFILE", "smoke")
    smoke = store.largest_scale("demo", "exp", unit_list[:1], **options)
    assert smoke.source == "run" and "not used at the smoke profile" in smoke.provenance


def test_a_default_build_takes_its_own_stored_results_only_for_the_same_units_and_code(tmp_path, monkeypatch):
    """The default store is a committed record of what a default build computes: read only when it holds
    exactly the build's units and their code is unchanged (else the units run), written only by
    MCMC_BOOK_STORE=refresh (make default-store), and never preferred to paper-profile results."""
    trial = cell(TRIAL)["trial"]
    counter = tmp_path / "calls.txt"
    unit_list = make_units(trial, count=3, counter=str(counter))
    options = dict(store_dir=tmp_path / "paper", cache="off", jobs=1)
    default_path = tmp_path / "default" / "demo" / "exp.json"

    monkeypatch.setenv("MCMC_BOOK_PROFILE", "default")
    built = store.largest_scale("demo", "exp", unit_list, sizes={"n": 20}, **options)
    assert built.source == "run" and calls(counter) == 3 and not default_path.exists()   # a build writes nothing

    monkeypatch.setenv("MCMC_BOOK_STORE", "refresh")
    refreshed = store.largest_scale("demo", "exp", unit_list, sizes={"n": 20}, **options)
    assert calls(counter) == 6 and default_path.exists()
    assert "written to the store (default/demo/exp.json)" in refreshed.provenance
    assert json.loads(default_path.read_text())["provenance"]["profile"] == "default"
    store.largest_scale("demo", "exp", unit_list, sizes={"n": 20}, **options)            # refresh never reads it
    assert calls(counter) == 9
    monkeypatch.delenv("MCMC_BOOK_STORE")

    shown = store.largest_scale("demo", "exp", unit_list, **options)
    assert calls(counter) == 9 and shown.source == "store" and shown.profile == "default"
    assert_identical(shown.values, refreshed.values)
    assert shown.sizes == {"n": 20} and not shown.code_changed
    assert "Default-profile results from the committed store (default/demo/exp.json" in shown.provenance
    assert "unchanged since" in shown.provenance

    # other units, changed code, or another profile: the units run
    other = store.largest_scale("demo", "exp", unit_list[:2], **options)
    assert other.source == "run" and calls(counter) == 11
    assert "the committed ones (default/demo/exp.json) are of other units or other code" in other.provenance
    changed = cell(TRIAL.replace("* scale", "* scale * 2"))["trial"]
    assert store.largest_scale("demo", "exp", make_units(changed, count=3, counter=str(counter)),
                               **options).source == "run"
    assert calls(counter) == 14
    with monkeypatch.context() as patched:
        patched.setattr(units, "library_code_hash", lambda *args, **kwargs: "another mcmc_lib")
        assert store.largest_scale("demo", "exp", unit_list, **options).source == "run"
    assert calls(counter) == 17
    monkeypatch.setenv("MCMC_BOOK_PROFILE", "smoke")
    assert store.largest_scale("demo", "exp", unit_list, **options).source == "run"
    monkeypatch.setenv("MCMC_BOOK_PROFILE", "default")
    monkeypatch.setenv("MCMC_BOOK_STORE", "off")
    assert store.largest_scale("demo", "exp", unit_list, **options).source == "run"
    monkeypatch.delenv("MCMC_BOOK_STORE")
    assert calls(counter) == 23

    # paper-profile results, where they exist, come first
    monkeypatch.setenv("MCMC_BOOK_PROFILE", "paper")
    store.largest_scale("demo", "exp", make_units(trial, count=4), **options)
    monkeypatch.setenv("MCMC_BOOK_PROFILE", "default")
    assert store.largest_scale("demo", "exp", unit_list, **options).profile == "paper"
    assert store.store_costs(tmp_path / "paper", profile="default")["demo"][0] == \
        [row["cpu_seconds"] for row in json.loads(default_path.read_text())["units"]]
    with pytest.raises(ValueError, match="MCMC_BOOK_STORE"):
        monkeypatch.setenv("MCMC_BOOK_STORE", "sometimes")
        store.largest_scale("demo", "exp", unit_list, **options)
    with pytest.raises(ValueError, match="profile"):
        store.store_path("demo", "exp", profile="smoke")


def test_a_store_check_runs_nothing_and_says_why_a_build_would_compute(tmp_path, monkeypatch, capsys):
    """MCMC_BOOK_STORE=check (make store-check): no unit runs; an experiment the default store holds
    takes its stored results silently, any other is reported with the first difference (a parameter, a
    seed, the number of units, the code) and goes on with the stored results."""
    trial = cell(TRIAL)["trial"]
    counter = tmp_path / "calls.txt"
    unit_list = make_units(trial, count=3, counter=str(counter))
    options = dict(store_dir=tmp_path / "paper", cache="off", jobs=1)
    monkeypatch.setenv("MCMC_BOOK_PROFILE", "default")
    monkeypatch.setenv("MCMC_BOOK_STORE", "check")
    with pytest.raises(RuntimeError, match="nothing stored to go on with"):
        store.largest_scale("demo", "exp", unit_list, **options)
    assert "demo/exp: a build would compute it (nothing is stored)" in capsys.readouterr().out
    monkeypatch.setenv("MCMC_BOOK_STORE", "refresh")
    stored = store.largest_scale("demo", "exp", unit_list, sizes={"n": 20}, **options)
    assert calls(counter) == 3
    monkeypatch.setenv("MCMC_BOOK_STORE", "check")

    same = store.largest_scale("demo", "exp", unit_list, **options)
    assert same.source == "store" and store.CHECK_PREFIX not in capsys.readouterr().out

    def reported(units_now):
        result = store.largest_scale("demo", "exp", units_now, **options)
        assert result.source == "store" and calls(counter) == 3      # nothing ran
        assert_identical(result.values, stored.values)
        return capsys.readouterr().out

    other_scale = [Unit(trial, dict(n=20, scale=1.25, counter=str(counter)), seed=[7, i]) for i in range(3)]
    assert "unit 0 (__main__.trial): params/scale 1.5 stored, 1.25 now" in reported(other_scale)
    other_seed = unit_list[:2] + [Unit(trial, unit_list[2].params, seed=[8, 2])]
    assert "unit 2 (__main__.trial): seed" in reported(other_seed)
    assert "3 units are stored, 2 run now" in reported(unit_list[:2])
    changed = cell(TRIAL.replace("* scale", "* scale * 2"))["trial"]
    assert "the experiment's functions (their code, or a notebook value they read) changed" in \
        reported(make_units(changed, count=3, counter=str(counter)))


def test_store_check_lists_what_the_chapters_printed(tmp_path, monkeypatch, capsys):
    """python -m mcmc_lib.store --check: the chapters run at default with the check setting, and the
    command lists the lines they printed, failing when there are any."""
    import nbformat
    seen = []

    def execute(chapter, out_dir):
        seen.append((os.environ["MCMC_BOOK_PROFILE"], os.environ["MCMC_BOOK_STORE"]))
        notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x")])
        notebook.cells[0].outputs = [nbformat.v4.new_output(
            "stream", name="stdout", text="a progress line\nstore check: kmc/abc: a build would compute it (why)\n")]
        out_dir.mkdir(parents=True, exist_ok=True)
        nbformat.write(notebook, out_dir / f"{chapter.stem}.ipynb")
        return True
    monkeypatch.setattr(store, "execute_chapter", execute)
    monkeypatch.setattr(units, "repository_root", lambda: tmp_path)
    without_float_settings(monkeypatch)
    (tmp_path / "book").mkdir()
    (tmp_path / "book" / "kmc.md").write_text("STORED = Experiments(...)")
    monkeypatch.setenv("MCMC_BOOK_PROFILE", "smoke")
    monkeypatch.setenv("MCMC_BOOK_STORE", "auto")
    assert store.main(["--check", "kmc"]) == 1
    assert seen == [("default", "check")]
    assert "kmc: 1 computed\n  kmc/abc: a build would compute it (why)" in capsys.readouterr().out
    monkeypatch.setattr(store, "execute_chapter", lambda chapter, out_dir: execute(chapter, out_dir) and False)
    assert store.main(["--check", "kmc"]) == 2
    assert "(the chapter stopped early" in capsys.readouterr().out


def test_a_native_paper_run_runs_only_units_without_float_parameters(tmp_path, monkeypatch):
    """MCMC_BOOK_FLOAT=native on a CPU that can compute portably: a paper run may go on natively with
    units whose parameters are integers (kmc's Figure 2), and stops, storing nothing, at an experiment
    whose parameters hold a float (which a portable build would see with other last bits)."""
    monkeypatch.setattr(portable, "cpu_flags", lambda *args: frozenset({"avx2", "fma"}))   # a CPU that can
    monkeypatch.setattr(portable.platform, "machine", lambda: "x86_64")
    monkeypatch.setenv("MCMC_BOOK_FLOAT", "native")                                        # but does not
    monkeypatch.setattr(portable, "is_portable", lambda: False)
    monkeypatch.setenv("MCMC_BOOK_PROFILE", "paper")
    trial = cell(TRIAL)["trial"]
    options = dict(store_dir=tmp_path / "paper", cache="off", jobs=1)
    with pytest.raises(ValueError, match="MCMC_BOOK_FLOAT=native.*unit 0"):
        store.largest_scale("demo", "floats", make_units(trial, count=2), **options)       # scale=1.5
    assert not (tmp_path / "paper" / "demo" / "floats.json").exists()
    arrays = [Unit(trial, dict(n=20, scale=2, grid=np.linspace(0, 1, 3)), seed=[7, 0])]
    with pytest.raises(ValueError, match="floating-point parameters"):
        store.largest_scale("demo", "arrays", arrays, **options)
    integers = [Unit(trial, dict(n=20, scale=2), seed=[7, i]) for i in range(2)]
    assert store.largest_scale("demo", "integers", integers, **options).source == "run"
    assert not store._holds_float({"sizes": [1, (2, "a")], "flag": True, "grid": np.arange(3)})
    assert store._holds_float({"sizes": [1, (2, np.float64(0.5))]})
    monkeypatch.setattr(portable, "is_portable", lambda: True)
    assert store.largest_scale("demo", "floats", make_units(trial, count=2), **options).source == "run"


def without_float_settings(monkeypatch):
    """Clear the portable settings for one test, so that what store.main puts there (portable.apply) is
    seen, and is undone afterwards (setenv first records the variable's absence)."""
    for name in (*portable.PORTABLE_VARIABLES, portable.FLOAT_ENV):
        monkeypatch.setenv(name, "placeholder")
        monkeypatch.delenv(name)


def test_store_command_runs_chapters_at_the_profile_it_fills(monkeypatch, capsys):
    """make paper and make default-store: the chapters' kernels inherit the profile, and at default the
    refresh setting that rewrites the default store (a plain default build never writes it)."""
    seen = []
    monkeypatch.setattr(store, "execute_chapter", lambda chapter, out_dir: seen.append(
        (chapter.stem, out_dir.name, os.environ["MCMC_BOOK_PROFILE"], os.environ.get("MCMC_BOOK_STORE"))) or True)
    without_float_settings(monkeypatch)
    monkeypatch.setenv("MCMC_BOOK_PROFILE", "smoke")             # main sets both: restored after the test
    monkeypatch.setenv("MCMC_BOOK_STORE", "auto")
    monkeypatch.delenv("MCMC_BOOK_STORE")
    assert store.main(["kmc"]) == 0
    assert seen[-1] == ("kmc", "paper", "paper", None)
    assert os.environ.get("OPENBLAS_CORETYPE") == portable.portable_environment(environ={}).get("OPENBLAS_CORETYPE")
    assert store.main(["--profile", "default", "kmc", "mamba"]) == 0
    assert seen[-2:] == [("kmc", "default", "default", "refresh"), ("mamba", "default", "default", "refresh")]
    assert "results/default" in capsys.readouterr().out
    assert store.main(["no-such-chapter"]) == 1
    with pytest.raises(SystemExit):
        store.main(["--profile", "smoke"])


def test_write_store_and_read_store(tmp_path, cache_dir):
    unit_list = make_units(cell(TRIAL)["trial"], count=2)
    results, stats = run(unit_list, jobs=1, cache=cache_dir)
    path = store.write_store("demo", "direct", unit_list, results, stats, sizes=(2, 3.0), store_dir=tmp_path)
    assert path == tmp_path / "demo" / "direct.json"
    record = store.read_store("demo", "direct", store_dir=tmp_path)
    assert_identical([row["result"] for row in record["units"]], results)
    assert record["sizes"] == (2, 3.0) and [row["seed"] for row in record["units"]] == [[7, 0], [7, 1]]
    assert store.read_store("demo", "absent", store_dir=tmp_path) is None


def test_chapters_using_the_store_are_found(tmp_path):
    (tmp_path / "a.md").write_text("fig = largest_scale('a', 'fig', units)\n")
    (tmp_path / "b.md").write_text("no experiments here\n")
    (tmp_path / "c.md").write_text("STORED = Experiments('c', ['fig'], SIZES)\n")
    assert store.chapters_using_store(tmp_path) == ["a", "c"]
    real = store.chapters_using_store(Path(__file__).resolve().parent.parent / "book")
    assert {"gsm", "kmc", "mamba", "mcma", "nonrev_u"} <= set(real)


def test_make_help_lists_every_target():
    from pathlib import Path
    import re
    makefile = (Path(__file__).resolve().parent.parent / "Makefile").read_text()
    targets = set(re.findall(r"^([a-z][a-z-]*):", makefile, flags=re.M))
    listed = set(re.findall(r'^\t@echo "make ([a-z-]+) ', makefile, flags=re.M))
    assert "paper" in targets and targets <= listed, sorted(targets - listed)


def test_a_chapter_adopts_the_stored_sizes_only_when_every_experiment_is_stored(tmp_path, cache_dir, monkeypatch):
    """chapter_sizes + largest_scale(same_units=True): a default build shows the paper-profile run when
    the store holds all of the chapter's experiments at one size, and never pairs the chapter's units
    with stored results of other units."""
    trial = cell(TRIAL)["trial"]
    options = dict(store_dir=tmp_path / "paper", cache=cache_dir, jobs=1)
    paper_sizes, default_sizes = {"count": 3}, {"count": 2}

    def experiment(name, sizes, **extra):
        return store.largest_scale("demo", name, make_units(trial, count=sizes["count"], **extra), sizes=sizes,
                                   same_units=True, **options)

    monkeypatch.setenv("MCMC_BOOK_PROFILE", "paper")
    stored = experiment("first", paper_sizes)
    monkeypatch.setenv("MCMC_BOOK_PROFILE", "default")
    # one of two experiments stored: the chapter keeps its own sizes
    assert store.chapter_sizes("demo", ["first", "second"], default_sizes, store_dir=options["store_dir"]) == \
        (default_sizes, "default")
    monkeypatch.setenv("MCMC_BOOK_PROFILE", "paper")
    experiment("second", paper_sizes)
    monkeypatch.setenv("MCMC_BOOK_PROFILE", "default")
    sizes, scale = store.chapter_sizes("demo", ["first", "second"], default_sizes, store_dir=options["store_dir"])
    assert (sizes, scale) == (paper_sizes, "paper")
    shown = experiment("first", sizes)
    assert shown.source == "store"
    assert_identical(shown.values, stored.values)
    # units other than the stored ones run (here: default sizes, and a changed parameter)
    assert experiment("first", default_sizes).source == "run"
    assert experiment("first", paper_sizes, counter=None).source == "run"
    # smoke and MCMC_BOOK_STORE=off keep the chapter's own sizes
    monkeypatch.setenv("MCMC_BOOK_STORE", "off")
    assert store.chapter_sizes("demo", ["first", "second"], default_sizes, store_dir=options["store_dir"]) == \
        (default_sizes, "default")
    monkeypatch.delenv("MCMC_BOOK_STORE")
    monkeypatch.setenv("MCMC_BOOK_PROFILE", "smoke")
    assert store.chapter_sizes("demo", ["first"], default_sizes, store_dir=options["store_dir"])[1] == "smoke"
    with pytest.raises(ValueError, match="names"):
        store.chapter_sizes("demo", [], default_sizes)


def test_experiments_read_the_store_once_and_show_where_results_came_from(tmp_path, cache_dir, monkeypatch):
    trial = cell(TRIAL)["trial"]
    store_dir = tmp_path / "paper"
    paper_sizes, default_sizes = {"count": 3}, {"count": 2}

    def units_at(sizes):
        return make_units(trial, count=sizes["count"])

    monkeypatch.setenv("MCMC_BOOK_PROFILE", "paper")
    at_paper = store.Experiments("demo", ["first", "second"], paper_sizes, store_dir=store_dir)
    assert (at_paper.sizes, at_paper.scale) == (paper_sizes, "paper")
    stored = {name: at_paper.values(name, units_at(paper_sizes), cache=cache_dir, jobs=1)
              for name in ("first", "second")}
    assert "written to the store" in at_paper.provenance("first")

    monkeypatch.setenv("MCMC_BOOK_PROFILE", "default")
    reads = []
    original = store.read_store
    monkeypatch.setattr(store, "read_store", lambda *args, **kwargs: reads.append(args) or original(*args, **kwargs))
    chapter = store.Experiments("demo", ["first", "second"], default_sizes, store_dir=store_dir)
    assert (chapter.sizes, chapter.scale) == (paper_sizes, "paper")
    shown = chapter.values("first", units_at(chapter.sizes), "the first experiment")
    assert_identical(shown, stored["first"])
    assert chapter.results["first"].source == "store" and len(reads) == 2       # each record read once
    assert chapter.wall_seconds("first") == chapter.results["first"].record["wall_seconds"]
    first_units = store.read_store("demo", "first", store_dir)["units"]
    assert chapter.stored_unit_seconds("first") == [row["cpu_seconds"] for row in first_units]
    # a build whose units all come from the cache reports the time they took, not its own ~0 s
    monkeypatch.setenv("MCMC_BOOK_STORE", "off")
    warm = store.Experiments("demo", ["first"], paper_sizes, store_dir=store_dir)
    warm.values("first", units_at(paper_sizes), cache=cache_dir, jobs=1)
    record = warm.results["first"].record
    assert record["n_from_cache"] == 3
    assert record["unit_seconds_max"] <= record["compute_wall_seconds"] <= record["unit_seconds_total"] + 0.002
    assert warm.wall_seconds("first") == record["compute_wall_seconds"]
    monkeypatch.delenv("MCMC_BOOK_STORE")
    assert chapter.provenance("first").startswith("*Source: Paper-profile results from the committed store")
    chapter.values("second", units_at(chapter.sizes))
    assert "*Source (first):" in chapter.provenance("first", "second")
    with pytest.raises(ValueError, match="not run"):
        chapter.provenance("third")
    chapter.values("second", units_at(default_sizes), cache=cache_dir, jobs=1)
    assert chapter.results["second"].source == "run"                          # other units never take stored results
    with pytest.raises(ValueError, match="names"):
        store.Experiments("demo", [], default_sizes)

    (store_dir / "demo" / "second.json").unlink()
    partial = store.Experiments("demo", ["first", "second"], default_sizes, store_dir=store_dir)
    assert (partial.sizes, partial.scale) == (default_sizes, "default")
    assert partial.stored_unit_seconds("second") is None
    assert partial.stored_sizes(["first"], default_sizes) == (paper_sizes, "paper")


def test_a_paper_run_that_changes_one_experiments_size_keeps_the_chapter_at_the_paper_scale(tmp_path, monkeypatch):
    """Two experiments store the chapter's sizes; a paper run that grows one re-records the other's
    sizes (its units, results and provenance unchanged, nothing run), so that a default build still
    finds the stores agreeing and shows the chapter at the paper's scale."""
    trial = cell(TRIAL)["trial"]
    counter, store_dir = tmp_path / "calls", tmp_path / "paper"

    def paper_run(sizes):
        at_paper = store.Experiments("demo", ["first", "second"], sizes, store_dir=store_dir)
        for name in ("first", "second"):
            at_paper.values(name, make_units(trial, count=sizes[name], counter=str(counter)), cache=False, jobs=1)

    monkeypatch.setenv("MCMC_BOOK_PROFILE", "paper")
    monkeypatch.delenv("MCMC_BOOK_STORE", raising=False)
    paper_run({"first": 2, "second": 3})
    before = (store_dir / "demo" / "first.json").read_text()
    paper_run({"first": 2, "second": 5})
    assert calls(counter) == 5 + 2                               # the second's two new units alone ran
    first = store.read_store("demo", "first", store_dir)
    assert first["sizes"] == {"first": 2, "second": 5} and "sizes_recorded" in first["provenance"]
    old = json.loads(before)
    assert json.loads((store_dir / "demo" / "first.json").read_text())["units"] == old["units"]
    assert {k: v for k, v in first["provenance"].items() if k != "sizes_recorded"} == old["provenance"]
    recorded = (store_dir / "demo" / "first.json").read_text()
    paper_run({"first": 2, "second": 5})                         # nothing to re-record: the file stays
    assert calls(counter) == 7 and (store_dir / "demo" / "first.json").read_text() == recorded

    monkeypatch.setenv("MCMC_BOOK_PROFILE", "default")
    chapter = store.Experiments("demo", ["first", "second"], {"first": 1, "second": 1}, store_dir=store_dir)
    assert (chapter.sizes, chapter.scale) == ({"first": 2, "second": 5}, "paper")


def test_a_paper_run_at_changed_sizes_computes_only_the_new_units(tmp_path, monkeypatch):
    """A stored paper run's units that a re-run repeats (same code) come from the store, whatever cache
    the machine has: only the units that are new run; after a code change, all of them do."""
    namespace = {"__name__": "__main__", "np": np}
    trial = cell(TRIAL, namespace)["trial"]
    counter, store_dir = tmp_path / "calls", tmp_path / "paper"
    monkeypatch.setenv("MCMC_BOOK_PROFILE", "paper")
    monkeypatch.delenv("MCMC_BOOK_STORE", raising=False)

    def run(count, cache):                                      # the trial function of the latest cell
        units = make_units(namespace["trial"], count=count, counter=str(counter))
        return store.largest_scale("demo", "grid", units, store_dir=store_dir, cache=cache, jobs=1)

    run(3, tmp_path / "cache-1")
    assert calls(counter) == 3
    grown = run(5, tmp_path / "cache-2")                # another machine, an empty cache
    assert calls(counter) == 5                                  # units 3 and 4 alone ran
    assert_identical(grown.values, serial_loop(make_units(trial, count=5)))
    assert grown.record["n_from_cache"] == 3
    assert not store.checkpoint_directory("demo", store_dir).exists()    # emptied once stored
    assert list(grown.record["unit_machines"].values()) == [5]          # the carried units keep their machine
    cell(TRIAL.replace("rng.standard_normal((n, n))", "rng.standard_normal((n, n)) * 1.0"), namespace)
    changed = make_units(namespace["trial"], count=5, counter=str(counter))
    assert store.carry_stored_units(store.read_store("demo", "grid", store_dir), changed, tmp_path / "kept") == 0
    redone = run(5, tmp_path / "cache-3")
    assert calls(counter) == 10 and redone.record["n_from_cache"] == 0


def test_carried_units_keep_the_machine_that_computed_them():
    """Which machine computed a stored run's units: its only unit label; in a record older than those
    labels, the machine that wrote it when no unit came from a cache; else none."""
    writer = {"cpu": "AMD EPYC", "floating_point": "portable (x)"}
    assert store._single_machine({"unit_machines": {"Xeon, native (y)": 4}}) == "Xeon, native (y)"
    assert store._single_machine({"unit_machines": {"Xeon, native (y)": 4, "AMD EPYC, portable (x)": 1}}) is None
    assert store._single_machine({"n_from_cache": 0, "machine": writer}) == "AMD EPYC, portable (x)"
    assert store._single_machine({"n_from_cache": 0, "machine": {"cpu": "AMD EPYC"}}) == (
        "AMD EPYC, floating point not recorded")
    assert store._single_machine({"n_from_cache": 2, "machine": writer}) is None


def test_a_default_store_refresh_computes_only_the_new_units(tmp_path, monkeypatch):
    """make default-store on a clone whose cache is empty takes the units it repeats (same code) from the
    default store it rewrites: only the new units run; after a code change all of them do. A record whose
    units all came from the cache is left as it is (no new commit and date for unchanged results)."""
    namespace = {"__name__": "__main__", "np": np}
    trial = cell(TRIAL, namespace)["trial"]
    counter, store_dir = tmp_path / "calls", tmp_path / "stores"
    monkeypatch.setenv("MCMC_BOOK_PROFILE", "default")
    monkeypatch.setenv("MCMC_BOOK_STORE", "refresh")

    def refresh(count, cache, sizes=None):
        units = make_units(namespace["trial"], count=count, counter=str(counter))
        return store.largest_scale("demo", "grid", units, sizes=sizes, store_dir=store_dir, cache=cache, jobs=1)

    refresh(3, tmp_path / "cache-1")
    assert calls(counter) == 3
    grown = refresh(5, tmp_path / "cache-2")                    # a fresh clone: an empty cache
    assert calls(counter) == 5                                  # units 3 and 4 alone ran
    assert_identical(grown.values, serial_loop(make_units(trial, count=5)))
    assert grown.record["n_from_cache"] == 3 and grown.record["n_units"] == 5
    assert_identical(store.read_store("demo", "grid", store_dir, "default")["units"][4]["result"], grown.values[4])
    record = store_dir.parent / "default" / "demo" / "grid.json"
    written = record.read_text()
    for cache in ("cache-2", "cache-4"):                        # all from the cache (warm, or carried into it)
        again = refresh(5, tmp_path / cache, sizes={"other_experiments_reps": 9})   # a size these units ignore
        assert calls(counter) == 5 and record.read_text() == written      # left as it is: no new commit or date
        assert again.source == "store" and not again.code_changed
        assert_identical(again.values, grown.values)
    refresh(5, False)                                           # no cache: nothing to carry into, all run
    assert calls(counter) == 10
    cell(TRIAL.replace("rng.standard_normal((n, n))", "rng.standard_normal((n, n)) * 1.0"), namespace)
    redone = refresh(5, tmp_path / "cache-3")
    assert calls(counter) == 15 and redone.record["n_from_cache"] == 0


def test_projected_wall_time_shares_units_over_workers():
    # longest first to the least-loaded worker: {3, 2, 2} / {3, 2} (greedy, within 4/3 of the best split)
    assert store.projected_wall_seconds([3, 3, 2, 2, 2], 2) == 7
    assert store.projected_wall_seconds([10, 1, 1], 16) == 10               # the longest unit bounds it
    assert store.projected_wall_seconds([1.0] * 64, 16) == 4
    assert store.projected_wall_seconds([], 4) == 0
    with pytest.raises(ValueError, match="workers"):
        store.projected_wall_seconds([1.0], 0)
    rows = store.cost_rows({"demo": [[3, 3, 2, 2, 2], [5]]})                 # two sets, one after the other
    assert rows[0]["units"] == 6 and rows[0]["wall_2_hours"] * 3600 == 12 and rows[0]["longest_min"] * 60 == 5


def test_units_record_their_cpu_time_apart_from_waiting(tmp_path, cache_dir, monkeypatch):
    """A unit's CPU time is its compute time even on a busy machine: a unit that waits has wall time
    and almost no CPU time; both reach the cache, the run's stats and the store, and costs use CPU."""
    napper = cell('''
def napper(seed, pause):
    import time
    time.sleep(pause)
    return {"pause": pause}
''')["napper"]
    unit_list = [Unit(napper, dict(pause=0.2), seed=[1, i]) for i in range(2)]
    results, stats = run(unit_list, jobs=1, cache=cache_dir)
    assert all(wall >= 0.2 for wall in stats.unit_seconds)
    assert all(cpu is not None and cpu < 0.05 for cpu in stats.unit_cpu_seconds)
    _, again = run(unit_list, jobs=1, cache=cache_dir)                  # from the cache
    assert again.n_cached == 2 and again.unit_cpu_seconds == stats.unit_cpu_seconds
    monkeypatch.setenv("MCMC_BOOK_PROFILE", "paper")
    store.largest_scale("demo", "naps", unit_list, store_dir=tmp_path, cache=cache_dir, jobs=1)
    record = json.loads((tmp_path / "demo" / "naps.json").read_text())
    assert all(row["cpu_seconds"] < 0.05 <= 0.2 <= row["seconds"] for row in record["units"])
    assert record["provenance"]["unit_cpu_seconds_total"] < 0.1
    assert max(store.store_costs(tmp_path)["demo"][0]) < 0.05


def test_each_unit_keeps_the_machine_it_ran_on(tmp_path, monkeypatch):
    """A paper run resumed over several sittings takes units computed elsewhere: each unit's machine is
    kept in the cache and the checkpoint, and the store counts them, with entries that lack it as "not
    recorded", and says so on the page when they are not all the writer's."""
    unit_list = make_units(cell(TRIAL)["trial"], count=3)
    checkpoint = store.checkpoint_directory("demo", tmp_path / "paper")
    results, stats = run(unit_list, jobs=1, cache=tmp_path / "cache", checkpoint=checkpoint)
    here = units.machine_label()
    assert here.startswith(units.cpu_model() + ", ") and ("portable" in here or "native" in here)
    assert stats.unit_machines == [here] * 3
    paths = sorted(checkpoint.glob("*/*.json"))
    entries = [json.loads(path.read_text()) for path in paths]
    assert [entry["machine"] for entry in entries] == [here] * 3
    _, cached = run(unit_list, jobs=1, cache=tmp_path / "cache")
    assert cached.n_cached == 3 and cached.unit_machines == [here] * 3
    # as if one unit came from a sitting that did not record it and one from another machine
    other = "Another CPU, native (OpenBLAS SkylakeX kernels, NumPy with AVX512F)"
    del entries[0]["machine"]
    entries[1]["machine"] = other
    for path, entry in zip(paths, entries):
        path.write_text(json.dumps(entry))
    monkeypatch.setenv("MCMC_BOOK_PROFILE", "paper")
    ran = store.largest_scale("demo", "exp", unit_list, store_dir=tmp_path / "paper", cache="off", jobs=1)
    assert ran.record["n_from_cache"] == 3
    assert ran.record["unit_machines"] == {here: 1, other: 1, "not recorded": 1}
    shown = store.largest_scale("demo", "exp", unit_list, store_dir=tmp_path / "paper", cache="off", jobs=1)
    assert shown.source == "store" and "units computed on" in shown.provenance
    assert f"{other} (1)" in shown.provenance and "not recorded (1)" in shown.provenance
    assert_identical(shown.values, results)
    # a file whose units were all computed by the machine that wrote it says nothing more
    alone = store.largest_scale("demo", "alone", make_units(cell(TRIAL)["trial"], count=2),
                                store_dir=tmp_path / "paper", cache="off", jobs=1)
    assert alone.record["unit_machines"] == {here: 2}
    again = store.largest_scale("demo", "alone", make_units(cell(TRIAL)["trial"], count=2),
                                store_dir=tmp_path / "paper", cache="off", jobs=1)
    assert again.source == "store" and "units computed on" not in again.provenance


def test_units_without_a_core_to_themselves_are_counted_shown_and_warned_of(tmp_path, monkeypatch):
    """A unit whose wall time is more than 5% over its CPU time shared a core (its CPU seconds read high
    too): the stored run counts such units, its source line on the page says so, and make paper warns."""
    assert store.units_sharing_a_core([10.0, 10.6, 0.5, 12.0], [10.0, 10.0, 0.1, None]) == 1
    assert store.units_sharing_a_core([10.0, 10.4], [10.0, 10.0]) == 0           # within 5%: a core of its own
    assert store.units_sharing_a_core([10.0], [None]) is None                    # CPU time not recorded
    namespace = {"__name__": "__main__", "np": np}
    cell(TRIAL, namespace)
    monkeypatch.setenv("MCMC_BOOK_PROFILE", "paper")
    monkeypatch.delenv("MCMC_BOOK_STORE", raising=False)
    store_dir = tmp_path / "paper"
    run_start = "2000-01-01T00:00:00+00:00"
    result = store.largest_scale("demo", "grid", make_units(namespace["trial"], count=3, counter=str(tmp_path / "c")),
                                 store_dir=store_dir, cache=False, jobs=1)
    assert result.record["n_units_sharing_a_core"] == 0                          # short units, a core each
    assert store.shared_core_warnings("demo", run_start, store_dir) == []
    path = store.store_path("demo", "grid", store_dir)
    raw = json.loads(path.read_text())
    raw["provenance"]["n_units_sharing_a_core"] = 2
    path.write_text(json.dumps(raw))
    (warning,) = store.shared_core_warnings("demo", run_start, store_dir)
    assert warning.startswith("demo/grid: 2 of 3 units ran without a core to themselves")
    assert store.shared_core_warnings("demo", "2999-01-01T00:00:00+00:00", store_dir) == []   # stored before
    stored = store.read_store("demo", "grid", store_dir)["provenance"]
    assert "2 of them without a core to themselves" in store._describe_store(stored, path, [])
    del raw["provenance"]["n_units_sharing_a_core"]                  # a record older than the count:
    raw["units"][1]["seconds"], raw["units"][1]["cpu_seconds"] = 3.0, 1.0    # counted from its units
    path.write_text(json.dumps(raw))
    assert store.read_store("demo", "grid", store_dir)["provenance"]["n_units_sharing_a_core"] == 1


def test_a_paper_run_reruns_the_named_experiments_units_that_shared_a_core(tmp_path, monkeypatch):
    """make paper RERUN_SHARED=demo/grid recomputes the stored units measured without a core to themselves,
    whether the store or the unit cache would hand them back, and carries the others; without it, or for
    another experiment, the stored run stands."""
    namespace = {"__name__": "__main__", "np": np}
    cell(TRIAL, namespace)
    counter, store_dir, cache = tmp_path / "calls", tmp_path / "paper", tmp_path / "cache"
    monkeypatch.setenv("MCMC_BOOK_PROFILE", "paper")
    monkeypatch.delenv("MCMC_BOOK_STORE", raising=False)
    monkeypatch.delenv("MCMC_BOOK_RERUN_SHARED", raising=False)
    trials = make_units(namespace["trial"], count=4, counter=str(counter))

    def run():
        return store.largest_scale("demo", "grid", trials, store_dir=store_dir, cache=cache, jobs=1)

    first = run()
    assert calls(counter) == 4
    path = store.store_path("demo", "grid", store_dir)
    raw = json.loads(path.read_text())
    raw["units"][1]["seconds"], raw["units"][1]["cpu_seconds"] = 3.0, 1.0    # unit 1 shared a core ...
    path.write_text(json.dumps(raw))
    unit_cache, key = units.UnitCache(cache), units.unit_keys(trials)[1]
    unit_cache.save(trials[1], key, unit_cache.load(trials[1], key)["result"], 3.0, 1.0)   # ... as cached
    run()
    assert calls(counter) == 4                                                 # not asked: the store stands
    monkeypatch.setenv("MCMC_BOOK_RERUN_SHARED", "demo/other")
    run()
    assert calls(counter) == 4
    monkeypatch.setenv("MCMC_BOOK_RERUN_SHARED", "demo/grid")
    rerun = run()
    assert calls(counter) == 5                                                 # unit 1 alone ran again
    assert_identical(rerun.values, first.values)
    assert rerun.record["n_units_sharing_a_core"] == 0
    assert run().record["n_units_sharing_a_core"] == 0 and calls(counter) == 5   # nothing left to rerun


def test_each_unit_records_when_it_finished_and_keeps_it_when_carried(tmp_path, monkeypatch):
    """A computed unit's finish time (ISO, UTC) reaches the cache, the checkpoint, the stored row, the
    results and the page; a carried or cached unit keeps its own time, and one with none stays None."""
    namespace = {"__name__": "__main__", "np": np}
    cell(TRIAL, namespace)
    counter, store_dir, cache = tmp_path / "calls", tmp_path / "paper", tmp_path / "cache"
    monkeypatch.setenv("MCMC_BOOK_PROFILE", "paper")
    monkeypatch.delenv("MCMC_BOOK_STORE", raising=False)
    trials = make_units(namespace["trial"], count=3, counter=str(counter))
    before = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)
    first = store.largest_scale("demo", "grid", trials, store_dir=store_dir, cache=cache, jobs=1)
    after = datetime.datetime.now(datetime.timezone.utc)
    times = [datetime.datetime.fromisoformat(f) for f in first.finished]
    assert all(before <= t <= after and t.utcoffset() == datetime.timedelta(0) for t in times)
    rows = json.loads(store.store_path("demo", "grid", store_dir).read_text())["units"]
    assert [row["finished"] for row in rows] == first.finished
    assert first.record["units_finished"] == {"first": min(first.finished), "last": max(first.finished),
                                              "not_recorded": 0}
    monkeypatch.setenv("MCMC_BOOK_PROFILE", "default")                     # the page, from the store
    shown = store.largest_scale("demo", "grid", trials, store_dir=store_dir, cache=cache, jobs=1)
    assert shown.source == "store" and shown.finished == first.finished
    assert f"units finished {first.finished[0][:10]} {min(first.finished)[11:16]} to" in shown.provenance
    monkeypatch.setenv("MCMC_BOOK_PROFILE", "paper")
    key = units.unit_keys(trials)[0]
    assert units.UnitCache(cache).load(trials[0], key)["finished"] == first.finished[0]
    kept = units.UnitCheckpoint(tmp_path / "kept")
    record = store.read_store("demo", "grid", store_dir)
    record["units"][1].pop("finished")                       # a row older than the record
    assert store.carry_stored_units(record, trials, tmp_path / "kept") == 3
    assert kept.load(trials[0], key)["finished"] == first.finished[0]
    assert kept.load(trials[1], units.unit_keys(trials)[1])["finished"] is None
    _, stats = units.run_with_stats(trials, cache=False, checkpoint=tmp_path / "kept", jobs=1)
    assert stats.unit_finished == [first.finished[0], None, first.finished[2]] and calls(counter) == 3
    assert store.finish_span(stats.unit_finished)["not_recorded"] == 1


def test_minutes_apart_is_the_span_of_finish_times_and_none_when_one_is_missing():
    """A sitting's span: last finish less first, across UTC offsets and the older +0000 form."""
    times = ["2026-11-26T17:48:55+00:00", "2026-11-26T19:13:25+01:00", "2026-11-26T18:10:55+0000"]
    assert store.minutes_apart(times) == pytest.approx(24.5)
    assert store.minutes_apart(times[:1]) == 0.0
    assert store.minutes_apart(times + [None]) is None and store.minutes_apart([]) is None


def test_a_paper_run_reruns_the_named_experiments_units_that_finished_before_a_time(tmp_path, monkeypatch):
    """make paper RERUN_SHARED=demo/grid RERUN_BEFORE=<time> also recomputes the stored units that
    finished before that time or have no recorded time (from the store or the cache), so that a timed
    comparison comes from one sitting; those that finished later are carried; a malformed time is a
    ValueError naming RERUN_BEFORE."""
    namespace = {"__name__": "__main__", "np": np}
    cell(TRIAL, namespace)
    counter, store_dir, cache = tmp_path / "calls", tmp_path / "paper", tmp_path / "cache"
    monkeypatch.setenv("MCMC_BOOK_PROFILE", "paper")
    monkeypatch.delenv("MCMC_BOOK_STORE", raising=False)
    monkeypatch.setenv("MCMC_BOOK_RERUN_SHARED", "demo/grid")
    trials = make_units(namespace["trial"], count=4, counter=str(counter))

    def run():
        return store.largest_scale("demo", "grid", trials, store_dir=store_dir, cache=cache, jobs=1)

    first = run()
    path = store.store_path("demo", "grid", store_dir)
    raw = json.loads(path.read_text())
    raw["units"][0]["finished"] = "2026-11-24T10:00:00+00:00"              # an earlier sitting ...
    raw["units"][1].pop("finished")                                        # ... and no time recorded
    path.write_text(json.dumps(raw))
    unit_cache, keys = units.UnitCache(cache), units.unit_keys(trials)
    for i in (0, 1):                                                       # the cache says the same
        entry = unit_cache.load(trials[i], keys[i])
        unit_cache.save(trials[i], keys[i], entry["result"], entry["seconds"], entry["cpu_seconds"],
                        finished=raw["units"][i].get("finished"))
    run()
    assert calls(counter) == 4                                             # no time given: only shared units
    monkeypatch.setenv("MCMC_BOOK_RERUN_BEFORE", "2026-11-25")
    rerun = run()
    assert calls(counter) == 6                                             # units 0 and 1 ran again
    assert_identical(rerun.values, first.values)
    assert rerun.finished[2:] == first.finished[2:] and all(f > "2026-11-25" for f in rerun.finished)
    assert run().record["units_finished"]["not_recorded"] == 0 and calls(counter) == 6
    monkeypatch.setenv("MCMC_BOOK_RERUN_BEFORE", "yesterday")
    with pytest.raises(ValueError, match="RERUN_BEFORE"):
        run()


def test_experiments_refuse_a_string_of_names_and_runs_without_units(tmp_path):
    """Issue 47: Experiments("gsm", "fig1") split the name into 'f', 'i', 'g', '1'; an experiment of no units
    returned stored values for nothing."""
    with pytest.raises(ValueError, match=r"list of experiment names.*\['fig1'\]"):
        store.Experiments("demo", "fig1", {}, store_dir=tmp_path)
    experiments = store.Experiments("demo", ["fig1"], {}, store_dir=tmp_path)
    with pytest.raises(ValueError, match="units must list"):
        experiments.values("fig1", [])
    with pytest.raises(ValueError, match="units must list"):
        store.largest_scale("demo", "fig1", units=[], store_dir=tmp_path)


def _timed_run(platform_name, cpu="AMD EPYC", unit_machines=None):
    """An ExperimentResults whose provenance says which machine timed it."""
    record = {"machine": {"platform": platform_name, "cpu": cpu, "floating_point": "portable"}}
    if unit_machines is not None:
        record["unit_machines"] = unit_machines
    return store.ExperimentResults([], [], [], {}, "paper", "store", False, "", record)


def test_seconds_of_experiments_timed_on_different_machines_are_not_compared(tmp_path):
    """Experiments.require_one_machine passes runs written by one machine and refuses runs of two hosts
    (same CPU name, other platform), a run computed on several machines, and names not run, each with a
    ValueError naming the experiments and the remedy."""
    chapter = store.Experiments("demo", ["table", "extra"], {}, store_dir=tmp_path)
    chapter.results["table"] = _timed_run("Linux-6.18.44-fc-v595-x86_64")
    chapter.results["extra"] = _timed_run("Linux-6.18.44-fc-v595-x86_64")
    chapter.require_one_machine("table", "extra")
    chapter.results["extra"] = _timed_run("Linux-6.18.44-fc-v657-x86_64")
    with pytest.raises(ValueError, match=r"timed on different machines.*fc-v657.*RERUN_SHARED=\"demo/table demo/extra\""):
        chapter.require_one_machine("table", "extra")
    chapter.results["extra"] = _timed_run("Linux-6.18.44-fc-v595-x86_64",
                                          unit_machines={"AMD EPYC, portable": 3, "Intel Xeon, portable": 2})
    with pytest.raises(ValueError, match="several machines"):
        chapter.require_one_machine("table", "extra")
    chapter.results["table"] = chapter.results["extra"]            # two runs each of several machines
    with pytest.raises(ValueError, match="several machines"):
        chapter.require_one_machine("table", "extra")
    with pytest.raises(ValueError, match=r"not run yet"):
        chapter.require_one_machine("table", "missing")
    with pytest.raises(ValueError, match="at least two"):
        chapter.require_one_machine("table")
    with pytest.raises(ValueError, match="platform"):
        store.timing_machine({"machine": {"cpu": "AMD EPYC"}})
