"""Verifying a stored record under changed code (mcmc_lib.store.verify_record, --verify-code).

A code edit that cannot change a number (an argument check, a message) would otherwise leave every
stored record saying "changed since" and the default store stale. A verification reruns a sample of a
record's units under the current code (a unit per function and per value of each string or boolean
parameter, the cheapest of each) and, only when every result is the stored one, appends a ``verified``
entry to its provenance, after which the record reads as current for exactly that code.

Unit functions are made as a Jupyter cell makes them (module ``__main__``, source in linecache). The
planted bugs at the end must make these tests fail (tests/planted.py).
"""
import hashlib
import json
import linecache
import os

import numpy as np
import pytest

from mcmc_lib import portable, store, units
from mcmc_lib.units import Unit

from planted import assert_mutation_caught

TRIAL = '''
def trial(seed, n, scale, method, counter):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((n, n))
    with open(counter, "a") as file:              # one line per call: counts what really ran
        file.write(method + "\\n")
    return {"mean": float(a.mean()), "eig": np.linalg.eigvalsh(a @ a.T) * scale, "method": method}
'''
# an argument check: the same numbers
CHECKED = TRIAL.replace("    rng = np.random",
                        "    if n < 1:\n        raise ValueError(f'n must be positive, got {n}')\n    rng = np.random")
# a change of one code path only (method "b"): the same numbers for "a", others for "b"
CHANGED_B = TRIAL.replace("    rng = np.random", "    if method == 'b':\n        scale = scale * (1 + 1e-15)\n"
                                                "    rng = np.random")


def cell(source):
    """Run ``source`` as a notebook cell would: functions get module ``__main__`` and a source that
    ``inspect.getsource`` finds through linecache."""
    filename = f"<cell-{hashlib.sha1(source.encode()).hexdigest()[:12]}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace = {"__name__": "__main__", "np": np}
    exec(compile(source, filename, "exec"), namespace)
    return namespace


def make_units(source, counter, methods=("a", "b", "a", "b")):
    fn = cell(source)["trial"]
    return [Unit(fn, dict(n=6, scale=1.5, method=method, counter=str(counter)), seed=[7, i])
            for i, method in enumerate(methods)]


def calls(counter):
    return counter.read_text().splitlines() if counter.exists() else []


def units_text(path):
    """The units' lines of a stored file, which a verification must leave byte for byte."""
    text = path.read_text()
    return text[text.index('\n "units": [\n'):]              # the top-level key (indented one space)


@pytest.fixture
def paper_record(tmp_path, monkeypatch):
    """A paper-profile record of four units (methods a, b, a, b), written as make paper writes it."""
    counter = tmp_path / "calls.txt"
    monkeypatch.setenv("MCMC_BOOK_PROFILE", "paper")
    monkeypatch.delenv("MCMC_BOOK_STORE", raising=False)
    options = dict(store_dir=tmp_path / "paper", cache="off", jobs=1)
    ran = store.largest_scale("demo", "exp", make_units(TRIAL, counter), sizes={"n": 6}, **options)
    counter.unlink()
    path = tmp_path / "paper" / "demo" / "exp.json"
    raw = json.loads(path.read_text())
    for i, row in enumerate(raw["units"]):       # unit i took i + 1 s: the sample is then known, [0, 1]
        row["seconds"] = row["cpu_seconds"] = float(i + 1)
    store._dump(path, {key: value for key, value in raw.items() if key != "units"}, raw["units"])
    monkeypatch.setenv("MCMC_BOOK_PROFILE", "default")
    return tmp_path / "paper" / "demo" / "exp.json", counter, options, ran


def test_an_edit_that_changes_no_result_is_verified_and_the_record_then_reads_current(paper_record):
    path, counter, options, ran = paper_record
    checked = make_units(CHECKED, counter)
    before = store.largest_scale("demo", "exp", checked, **options)
    assert before.code_changed and "the experiment's functions changed since, so a rerun" in before.provenance
    lines = units_text(path)

    outcome = store.verify_record(path, checked)
    assert outcome.status == "verified", outcome.message
    assert outcome.units == [0, 1] and sorted(calls(counter)) == ["a", "b"]   # one unit of each method
    assert units_text(path) == lines                                           # the units untouched
    entry = json.loads(path.read_text())["provenance"]["verified"][0]
    code = store.experiment_code(checked)
    assert entry["functions"] == code["functions"] and entry["library_hash"] == code["library_hash"]
    assert entry["units"] == [0, 1] and entry["changed"] == ["the experiment's functions"]
    assert {"commit", "date", "machine", "seconds", "unit_seconds"} <= entry.keys() and not entry["timings_aside"]

    after = store.largest_scale("demo", "exp", checked, **options)
    assert not after.code_changed and after.verified == entry and after.source == "store"
    assert after.values[1]["eig"].tobytes() == ran.values[1]["eig"].tobytes()
    assert ("the experiment's functions changed since; 2 of its 4 units rerun under commit "
            in after.provenance and ": identical results." in after.provenance)
    record = store.read_store("demo", "exp", options["store_dir"])
    assert store.code_changes(record["provenance"], checked) == [] and store.store_mismatch(record, checked) == ""
    assert store.verify_record(path, checked).status == "current" and len(calls(counter)) == 2

    from mcmc_lib.book import experiments_table

    class Stored:
        chapter, results = "demo", {"exp": after}
    table = experiments_table(Stored)
    assert "verified under " in table and "(2 units rerun, identical)" in table and "code changed" not in table


def test_a_verified_default_record_is_taken_until_the_code_changes_again(tmp_path, monkeypatch, capsys):
    """The default store: a build computes an experiment whose code changed, takes it again once verified
    for that code (code A), and computes it again after a further edit (code B) until verified for B."""
    counter = tmp_path / "calls.txt"
    unit_list = make_units(TRIAL, counter)
    options = dict(store_dir=tmp_path / "paper", cache="off", jobs=1)
    path = tmp_path / "default" / "demo" / "exp.json"
    monkeypatch.setenv("MCMC_BOOK_PROFILE", "default")
    monkeypatch.setenv("MCMC_BOOK_STORE", "refresh")
    store.largest_scale("demo", "exp", unit_list, sizes={"n": 6}, **options)
    monkeypatch.delenv("MCMC_BOOK_STORE")
    assert len(calls(counter)) == 4 and store.largest_scale("demo", "exp", unit_list, **options).source == "store"

    monkeypatch.setattr(units, "library_code_hash", lambda *args, **kwargs: "mcmc_lib A")
    assert store.largest_scale("demo", "exp", unit_list, **options).source == "run"    # stale: computed
    assert len(calls(counter)) == 8
    monkeypatch.setenv("MCMC_BOOK_STORE", "verify")
    shown = store.largest_scale("demo", "exp", unit_list, **options)                  # verifies, then goes on
    assert shown.source == "store" and not shown.code_changed and len(calls(counter)) == 10
    assert "store verify: default/demo/exp.json: verified: mcmc_lib changed since its run" in capsys.readouterr().out
    monkeypatch.delenv("MCMC_BOOK_STORE")
    taken = store.largest_scale("demo", "exp", unit_list, **options)
    assert taken.source == "store" and len(calls(counter)) == 10
    assert "so this build takes them rather than recompute them" in taken.provenance
    assert "mcmc_lib changed since; 2 of its 4 units rerun under commit " in taken.provenance

    monkeypatch.setattr(units, "library_code_hash", lambda *args, **kwargs: "mcmc_lib B")
    assert store.largest_scale("demo", "exp", unit_list, **options).source == "run"    # stale again
    assert len(calls(counter)) == 14
    assert store.verify_record(path, unit_list).status == "verified"
    assert store.largest_scale("demo", "exp", unit_list, **options).source == "store"
    assert len(calls(counter)) == 16
    entries = json.loads(path.read_text())["provenance"]["verified"]
    assert [entry["library_hash"] for entry in entries] == ["mcmc_lib A", "mcmc_lib B"]
    monkeypatch.setattr(units, "library_code_hash", lambda *args, **kwargs: "mcmc_lib A")   # A again: its entry
    assert store.largest_scale("demo", "exp", unit_list, **options).source == "store"


def test_a_skipped_experiment_runs_nothing_and_goes_on_with_its_stored_record(tmp_path, monkeypatch, capsys):
    """MCMC_BOOK_VERIFY_SKIP names records about to be recomputed: a verify run reruns none of their units,
    says so, leaves the record as it was and goes on with the stored results."""
    counter = tmp_path / "calls.txt"
    unit_list = make_units(TRIAL, counter)
    options = dict(store_dir=tmp_path / "paper", cache="off", jobs=1)
    monkeypatch.setenv("MCMC_BOOK_PROFILE", "default")
    monkeypatch.setenv("MCMC_BOOK_STORE", "refresh")
    store.largest_scale("demo", "exp", unit_list, sizes={"n": 6}, **options)
    path = tmp_path / "default" / "demo" / "exp.json"
    before = path.read_text()
    monkeypatch.setattr(units, "library_code_hash", lambda *args, **kwargs: "mcmc_lib A")
    monkeypatch.setenv("MCMC_BOOK_STORE", "verify")
    monkeypatch.setenv(store.VERIFY_SKIP_ENV, "other, exp")
    shown = store.largest_scale("demo", "exp", unit_list, **options)
    assert shown.source == "store" and len(calls(counter)) == 4          # the 4 of the first run only
    assert "default/demo/exp.json: skipped: named in MCMC_BOOK_VERIFY_SKIP" in capsys.readouterr().out
    assert path.read_text() == before
    monkeypatch.setenv(store.VERIFY_SKIP_ENV, "other")
    store.largest_scale("demo", "exp", unit_list, **options)
    assert len(calls(counter)) == 6 and "verified" in capsys.readouterr().out

def test_a_result_that_changes_is_refused_with_the_unit_named_and_the_record_left_as_it_was(paper_record):
    """Only method "b" computes another number: the sample holds a "b" unit, so the edit is caught."""
    path, counter, options, _ = paper_record
    text, modified = path.read_text(), path.stat().st_mtime_ns
    edited = make_units(CHANGED_B, counter)
    outcome = store.verify_record(path, edited)
    assert outcome.status == "differs"
    assert 'unit 1 (__main__.trial, {"n": 6, "scale": 1.5, "method": "b"' in outcome.message
    assert "differs at /eig[" in outcome.message and "stored" in outcome.message
    assert "the record is left as it was" in outcome.message
    assert path.read_text() == text and path.stat().st_mtime_ns == modified
    shown = store.largest_scale("demo", "exp", edited, **options)
    assert shown.code_changed and shown.verified is None and "so a rerun (make paper) may differ" in shown.provenance

    # a new argument check that refuses a stored parameter: reported, not raised, and nothing changes
    refusing = make_units(TRIAL.replace("    rng = np.random", "    if n > 5:\n        raise ValueError('n too big')\n"
                                                              "    rng = np.random"), counter)
    raised = store.verify_record(path, refusing)
    assert raised.status == "differs" and "unit 0 (__main__.trial" in raised.message
    assert "raised ValueError: n too big" in raised.message and path.read_text() == text


def test_the_sample_is_the_cheapest_unit_of_each_function_and_each_string_or_boolean_value():
    def row(function, seconds, cpu=None, **params):
        return {"function": function, "params": params, "seconds": seconds, "cpu_seconds": cpu}
    rows = [row("f", 9.0, sampler="rwm", trace=False, n=1),       # 0
            row("f", 3.0, sampler="rwm", trace=True, n=2),        # 1: cheapest rwm, cheapest trace=True
            row("f", 5.0, 1.0, sampler="mala", trace=False, n=3),  # 2: cheapest f, mala, trace=False (CPU time)
            row("f", 4.0, sampler="mala", trace=False, n=4),      # 3
            row("f", 8.0, sampler="hmc", trace=False, n=5),       # 4: the only hmc
            row("g", 7.0, kind="x"),                               # 5
            row("g", 6.0, kind="x"),                               # 6: cheapest g, x
            row("g", 2.0, kind="y")]                               # 7: cheapest y
    assert store.verification_sample(rows) == [1, 2, 4, 6, 7]
    assert store.verification_sample(rows[:1]) == [0]


def test_a_verification_that_would_take_too_long_or_cannot_compare_is_refused_or_skipped(paper_record, monkeypatch):
    path, counter, options, _ = paper_record
    text = path.read_text()
    checked = make_units(CHECKED, counter)
    too_long = store.verify_record(path, checked, max_seconds=0.0)
    assert too_long.status == "refused" and "over the limit of 0 s (--max-seconds)" in too_long.message
    assert f"projected {store.duration_text(too_long.projected_seconds)}" in too_long.message
    assert not calls(counter) and path.read_text() == text

    record = json.loads(text)
    record["provenance"]["unit_machines"] = {"Some CPU, native (OpenBLAS SkylakeX kernels, NumPy with AVX512F)": 4}
    path.write_text(json.dumps(record))
    elsewhere = store.verify_record(path, checked)
    assert elsewhere.status == "skipped" and "4 of its units ran on Some CPU, native" in elsewhere.message
    assert "cannot be verified here" in elsewhere.message and not calls(counter)
    record["provenance"]["unit_machines"] = {"not recorded": 4}       # unknown: the comparison decides
    path.write_text(json.dumps(record))
    assert store.floating_point_mismatch(record["provenance"]) == ""

    other = [Unit(cell(TRIAL.replace("def trial", "def other"))["other"], unit.params, unit.seed) for unit in checked]
    missing = store.verify_record(path, other)
    assert missing.status == "skipped" and "__main__.trial is not among the units" in missing.message


TIMED = '''
import time
def timed(seed, n, only_time=False):
    start = time.perf_counter()
    value = float(np.random.default_rng(seed).standard_normal(n).sum())
    seconds = time.perf_counter() - start + 1e-9 * seed[-1] + 1e-6 * np.random.default_rng().random()
    return {"seconds": seconds} if only_time else {"value": value, "summary": {"seconds": seconds, "n": n}}
'''
TIMED_CHECKED = TIMED.replace("    start = time", "    assert n > 0\n    start = time")


def test_measured_times_are_set_aside_listed_and_not_enough_alone(tmp_path, monkeypatch):
    monkeypatch.setenv("MCMC_BOOK_PROFILE", "paper")
    options = dict(store_dir=tmp_path / "paper", cache="off", jobs=1)
    timed = cell(TIMED)["timed"]
    store.largest_scale("demo", "timed", [Unit(timed, dict(n=5), seed=[1, i]) for i in range(2)], **options)
    store.largest_scale("demo", "alone", [Unit(timed, dict(n=5, only_time=True), seed=[1, 0])], **options)
    checked = cell(TIMED_CHECKED)["timed"]
    outcome = store.verify_record(tmp_path / "paper" / "demo" / "timed.json",
                                  [Unit(checked, dict(n=5), seed=[1, 0])])
    assert outcome.status == "verified", outcome.message
    entry = json.loads((tmp_path / "paper" / "demo" / "timed.json").read_text())["provenance"]["verified"][0]
    assert entry["timings_aside"] == [f"units[{i}]/summary/seconds" for i in outcome.units]
    assert "(times aside)" in outcome.message
    alone = store.verify_record(tmp_path / "paper" / "demo" / "alone.json",
                                [Unit(checked, dict(n=5, only_time=True), seed=[1, 0])])
    assert alone.status == "refused" and "measured times alone" in alone.message


def test_the_first_difference_is_found_in_json_text_and_in_arrays():
    encode = units.encode
    a = json.loads(json.dumps(encode({"x": float("nan"), "y": np.arange(20.0)}, compact=True)))
    b = json.loads(json.dumps(encode({"x": float("nan"), "y": np.arange(20.0) + (np.arange(20) == 13)}, compact=True)))
    assert store._first_json_difference(a, b) == ("/y[13]", 13.0, 14.0)
    assert store._first_json_difference({"x": 0.0}, {"x": -0.0}) == ("/x", 0.0, -0.0)
    assert store._first_json_difference([1, {"k": 2}], [1, {"k": 3}]) == ("[1]/k", 2, 3)


def test_the_verify_command_dry_run_and_run(tmp_path, monkeypatch, capsys, paper_record):
    """--verify-code --dry-run lists each record's sample and projected seconds from the store alone;
    --verify-code executes the chapters at default with MCMC_BOOK_STORE=verify and lists their lines."""
    import nbformat
    path, _, _, _ = paper_record
    root = tmp_path / "repository"
    (root / "results" / "paper" / "demo").mkdir(parents=True)
    path = path.rename(root / "results" / "paper" / "demo" / "exp.json")
    (root / "book").mkdir()
    (root / "book" / "demo.md").write_text("STORED = Experiments('demo', ['exp'], SIZES)\n")
    monkeypatch.setattr(units, "repository_root", lambda: root)
    rows = json.loads(path.read_text())["units"]
    assert store.main(["--verify-code", "--dry-run", "--chapters", "demo"]) == 0
    out = capsys.readouterr().out
    projected = sum(store.unit_compute_seconds(rows[i]) for i in (0, 1))
    assert f"{'paper/demo/exp.json':<36}{4:>7}{2:>7}{projected:>10.0f}s  unchanged" in out
    with pytest.raises(SystemExit):
        store.main(["--dry-run"])

    seen = []

    def execute(chapter, out_dir, lines=("store verify: paper/demo/exp.json: verified: ...",)):
        seen.append((chapter.stem, os.environ["MCMC_BOOK_PROFILE"], os.environ["MCMC_BOOK_STORE"],
                     os.environ[store.VERIFY_PROFILES_ENV], os.environ[store.VERIFY_MAX_SECONDS_ENV],
                     os.environ[store.VERIFY_SKIP_ENV]))
        notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x")])
        notebook.cells[0].outputs = [nbformat.v4.new_output("stream", name="stdout", text="\n".join(lines) + "\n")]
        out_dir.mkdir(parents=True, exist_ok=True)
        nbformat.write(notebook, out_dir / f"{chapter.stem}.ipynb")
        return True
    monkeypatch.setattr(store, "execute_chapter", execute)
    for name in ("MCMC_BOOK_STORE", store.VERIFY_PROFILES_ENV, store.VERIFY_MAX_SECONDS_ENV, store.VERIFY_SKIP_ENV):
        monkeypatch.setenv(name, "placeholder")                 # main sets them: restored after the test
    for name in (*portable.PORTABLE_VARIABLES, portable.FLOAT_ENV):   # and these (portable.apply)
        monkeypatch.setenv(name, "placeholder")
        monkeypatch.delenv(name)
    assert store.main(["--verify-code", "--profile", "paper", "--max-seconds", "60", "--skip", "a, b"]) == 0
    assert seen == [("demo", "default", "verify", "paper", "60.0", "a,b")]
    assert "paper/demo/exp.json: verified: ..." in capsys.readouterr().out
    monkeypatch.setattr(store, "execute_chapter", lambda chapter, out_dir: execute(
        chapter, out_dir, ("store verify: paper/demo/exp.json: differs: unit 1 ...",)))
    assert store.main(["--verify-code"]) == 1
    assert "1 differs" in capsys.readouterr().out


# ---------------------------------------------------------------- planted bugs

PLANTED = {
    # a restamp that skips the comparison
    "restamp-without-comparison": ("        if json.dumps(was) != json.dumps(now):", "        if False:",
                                   "result_that_changes_is_refused"),
    # any verified entry taken as vouching for the current code, whatever code it was made for
    "verified-for-any-code": ("        if not _changes_from(entry, functions):", "        if True:",
                              "until_the_code_changes_again"),
    # a sample of one unit per function, blind to the values that select code paths
    "sample-ignores-string-values": ("if isinstance(value, (str, bool))]", "if False]",
                                     "result_that_changes_is_refused or cheapest_unit_of_each"),
}


@pytest.mark.parametrize("name", PLANTED)
def test_planted_verification_bug_is_caught(name, tmp_path):
    original, mutant, selection = PLANTED[name]
    assert_mutation_caught(tmp_path, "mcmc_lib/store.py", original, mutant, "test_store_verify.py", selection,
                           timeout=300)


def test_a_module_edited_after_the_process_loaded_it_is_named(monkeypatch):
    """The code that runs must be the code whose hash a verified entry records: a loaded mcmc_lib module
    whose file changed after the process started refuses the verification."""
    import time
    monkeypatch.setattr(store, "_process_started", lambda: time.time() + 10)
    assert store._edited_since_loaded(["mcmc_lib.store"]) == []
    monkeypatch.setattr(store, "_process_started", lambda: 0.0)
    assert "mcmc_lib/store.py" in store._edited_since_loaded(["mcmc_lib.store"])      # and what it imports
