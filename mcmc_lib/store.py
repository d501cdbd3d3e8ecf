"""The committed stores of paper- and default-profile results, and the largest-scale results available.

A paper-profile run takes hours, so its results are committed: ``results/paper/<chapter>/<name>.json``
holds every unit's parameters, seed, compute time and result (a summary), and the run's provenance
(commit, profile, machine, cores and jobs, date, wall time, a hash of the code). A chapter asks for an
experiment's results through one call, at every profile::

    STORED = Experiments("kmc", ["fig2", "banana"], SIZES)   # the store read once
    SIZES = STORED.sizes                  # the stored run's sizes when every experiment is stored
    units = [Unit(trial, dict(n=n, dim=dim), seed=[SEED, i, r])
             for i, (n, dim) in enumerate(SIZES["grid"]) for r in range(SIZES["repeats"])]
    fig2 = STORED.values("fig2", units, "Figure 2")    # fig2[k]: the result of units[k]
    STORED.show_provenance("fig2")        # which scale, which commit, whether the code changed since

(``largest_scale`` is the same for one experiment on its own, with the results' ``params``.)

- at the ``paper`` profile it runs the units (cached and resumable: ``mcmc_lib.units``) and writes
  the store, unless the store already holds exactly these units run by unchanged code (a resumed
  run; ``MCMC_BOOK_STORE=refresh`` runs them anyway); until it does, each finished unit is also kept in ``results/paper/<chapter>/checkpoint/``
  (``checkpoint_directory``), which is committed, so that a run longer than a machine's life resumes
  on another from a clone;
- at ``default`` it returns the stored paper-profile results when they exist; the provenance line says
  so, and whether the code (mcmc_lib and the unit functions) has changed since the stored run;
- at ``default``, where no paper-profile results are stored, it takes the committed default-profile
  results (``results/default/<chapter>/<name>.json``) when they hold exactly these units and the code
  they ran is unchanged, which is what the build would compute (timings aside); else it runs the
  units. ``MCMC_BOOK_STORE=refresh`` (``make default-store``) runs them and rewrites that store,
  taking the units it repeats by unchanged code from the store it rewrites (through the unit cache:
  a fresh clone recomputes only what is new or changed); a record whose units all came that way is
  left as it is, not rewritten with a new commit and date;
- at ``smoke`` it always runs the units, so that CI exercises the code and the regression references
  stay smoke-size. ``MCMC_BOOK_STORE=on`` or ``off`` overrides this for default and smoke.

The results come back with their parameters (``params``, ``seeds``) and the ``sizes`` they were run
at, so a chapter builds its tables from what was run, not from the active profile's sizes.

``python -m mcmc_lib.store [chapter ...]`` (``make paper``) executes chapters at the paper profile,
which fills the store: by default every chapter that uses ``Experiments`` or ``largest_scale``;
``--profile default`` (``make default-store``) fills the default store the same way; ``--check``
(``make store-check``) runs no unit and lists the experiments a default build would compute rather
than take from the stores, and why (``MCMC_BOOK_STORE=check``: each such experiment is reported and
the chapter goes on with the stored results). ``--verify-code`` (``make verify-code``) executes chapters
at the default profile with ``MCMC_BOOK_STORE=verify``: for each stored record whose code changed since
its run, a sample of its units is rerun under the current code (``verify_record``) and, when every result
is the stored one, a ``verified`` entry in its provenance makes ``code_changes`` take the record as
current while the code is that entry's (``--dry-run``: the sample and its projected time, from the stores).
"""
from __future__ import annotations

import argparse
import datetime
import hashlib
import heapq
import json
import os
import platform
import re
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from . import portable
from . import units as unit_runner
from .profiles import PROFILES, active_profile
from .validation import (require_bool, require_int, require_mapping, require_number, require_path, require_sequence,
                         require_str, wrong_type)

STORE_ENV = "MCMC_BOOK_STORE"
CHECK_PREFIX = "store check:"
STORED_PROFILES = ("paper", "default")
STORE_FORMAT = 2                     # 2: large numeric arrays in results as base64 (1: decimals)
READABLE_FORMATS = (1, 2)
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*\Z")


def _name(value, label: str) -> str:
    """A chapter's or an experiment's name: a file-name-safe string."""
    if not isinstance(value, str) or not _NAME.match(value):
        if isinstance(value, (list, tuple)):
            raise ValueError(f"{label} must be one file-name-safe string, got a {type(value).__name__}: {value!r}")
        raise ValueError(f"{label} must be a file-name-safe string (letters, digits, _ . -), got {value!r}")
    return value


def _record(record, name: str = "record") -> dict:
    """A stored record as ``read_store`` returns it: a dict with its ``provenance`` and its ``units`` rows."""
    require_mapping(record, name)
    for key, kind in (("provenance", dict), ("units", list)):
        if not isinstance(record.get(key), kind):
            raise ValueError(f"{name} must be a stored record (read_store) with {key!r} a {kind.__name__}, got "
                             f"{type(record.get(key)).__name__} for {key!r}")
    return record


def _provenance_of(stored, name: str = "stored") -> dict:
    """A stored run's provenance: a dict with ``library_hash`` and ``functions``."""
    require_mapping(stored, name)
    for key in ("library_hash", "functions"):
        if key not in stored:
            raise ValueError(f"{name} must be a stored run's provenance (with {key!r}), got the keys {sorted(stored)}")
    return stored


def _times(values, name: str, none_allowed: bool = False) -> list:
    """A list of seconds (None allowed where a time may be unrecorded), not one number."""
    if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__") or isinstance(values, dict):
        if isinstance(values, (int, float)):
            raise ValueError(f"{name} must be a list of seconds, got one number {values!r} (write [{values!r}])")
        raise wrong_type(name, "a list of seconds", values)
    values = list(values)
    for i, value in enumerate(values):
        if not (none_allowed and value is None):
            require_number(value, f"{name}[{i}]")
    return values


def _finish_list(finished, name: str = "finished") -> list:
    """Recorded finish times: a list of ISO 8601 strings or None (not one string)."""
    if isinstance(finished, str):
        raise ValueError(f"{name} must be a list of finish times, got one string {finished!r} (write [{finished!r}])")
    if not hasattr(finished, "__iter__") or isinstance(finished, dict):
        raise wrong_type(name, "a list of finish times (ISO 8601 strings or None)", finished)
    finished = list(finished)
    for i, value in enumerate(finished):
        if value is not None and not isinstance(value, str):
            raise wrong_type(f"{name}[{i}]", "an ISO 8601 time (str) or None", value)
    return finished


def store_directory(store_dir=None, profile: str = "paper") -> Path:
    """The store of ``profile``'s results: ``results/<profile>`` at the repository root. ``store_dir``,
    when given, is the paper store; the other profiles' stores are beside it (``<store_dir>/../default``)."""
    if store_dir is not None:
        require_path(store_dir, "store_dir")
    if not isinstance(profile, str) or profile not in STORED_PROFILES:
        raise ValueError(f"profile must be one of {STORED_PROFILES}, got {profile!r}")
    paper = Path(store_dir) if store_dir is not None else unit_runner.repository_root() / "results" / "paper"
    return paper if profile == "paper" else paper.parent / profile


def store_path(chapter: str, name: str, store_dir=None, profile: str = "paper") -> Path:
    for label, value in (("chapter", chapter), ("name", name)):
        if not isinstance(value, str) or not _NAME.match(value):
            raise ValueError(f"{label} must be a file-name-safe string (letters, digits, _ . -), got {value!r}")
    return store_directory(store_dir, profile) / chapter / f"{name}.json"


def checkpoint_directory(chapter: str, store_dir=None) -> Path:
    """Where a chapter's unfinished paper run keeps its finished units (``mcmc_lib.units.UnitCheckpoint``):
    ``results/paper/<chapter>/checkpoint/``, committed with the store so that the run resumes from a
    clone on another machine; emptied of each experiment's units once its results are stored."""
    return store_path(chapter, "checkpoint", store_dir).with_suffix("")


# ---------------------------------------------------------------- provenance


def experiment_code(units) -> dict:
    """What code an experiment's units run: a fingerprint of each function (with the notebook-level code
    it reaches), the mcmc_lib modules they run (those they reach and those imported from them; None
    for all), and the hash of those modules' sources."""
    functions, reached = {}, frozenset()
    for unit in unit_runner._units_list(units):
        name = unit_runner.function_name(unit.fn)
        if name not in functions:
            functions[name], modules = unit_runner.function_fingerprint(unit.fn)
            reached = None if reached is None or modules is None else reached | modules
    library = unit_runner.library_code_hash(reached)
    code = hashlib.sha256(json.dumps([sorted(functions.items()), library]).encode()).hexdigest()
    return {"code_hash": code, "functions": functions, "library_hash": library,
            "library_modules": None if reached is None else unit_runner.library_closure(reached)}


def code_changes(stored: dict, units, code: dict | None = None) -> list[str]:
    """What changed since a stored run: "mcmc_lib" (the sources of the modules the stored run ran; all
    of mcmc_lib for a record that does not list them) and/or "the experiment's functions" (a unit
    function now in use whose fingerprint differs from the stored one, or that the stored run lacked).
    ``code``: ``experiment_code(units)`` when the caller has it already. Nothing when the current code
    is the stored run's, or the code of one of its ``verified`` entries (``verify_record``: a sample of
    its units rerun under that code gave the stored results)."""
    _provenance_of(stored)
    if units is not None:
        units = unit_runner._units_list(units)
    if code is not None:
        require_mapping(code, "code")
    return code_state(stored, units, code)[0]


def code_state(stored: dict, units, code: dict | None = None) -> tuple[list[str], list[str], dict | None]:
    """(``code_changes``, what changed since the stored run's own code, the ``verified`` entry whose
    code is the current code when the stored run's is not, else None)."""
    _provenance_of(stored)
    if units is not None:
        units = unit_runner._units_list(units)
    if code is not None:
        require_mapping(code, "code")
    functions = {} if not units else (code or experiment_code(units))["functions"]
    own = _changes_from(stored, functions)
    if not own:
        return [], [], None
    for entry in reversed(stored.get("verified") or []):
        if not _changes_from(entry, functions):
            return [], own, entry
    return own, own, None


def _changes_from(recorded: dict, functions: dict) -> list[str]:
    """What differs between the current code and a recorded one (a stored run's provenance, or a
    ``verified`` entry): the sources of the mcmc_lib modules it lists, the fingerprints of ``functions``."""
    library = unit_runner.library_code_hash(recorded.get("library_modules"))
    changes = ["mcmc_lib"] if library != recorded["library_hash"] else []
    if any(recorded["functions"].get(name) != digest for name, digest in functions.items()):
        changes.append("the experiment's functions")
    return changes


def git_commit() -> tuple[str, bool]:
    """(HEAD's abbreviated hash, whether mcmc_lib/ or book/ has uncommitted changes); ("unknown", False)
    outside a git checkout."""
    root = unit_runner.repository_root()

    def git(*args):
        return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True,
                              check=True, timeout=30).stdout.strip()
    try:
        commit = git("rev-parse", "--short=12", "HEAD")
        dirty = bool(git("status", "--porcelain", "--untracked-files=no", "--", "mcmc_lib", "book"))
    except (OSError, subprocess.SubprocessError):
        return "unknown", False
    return commit, dirty


def machine() -> dict:
    """The machine a run came from: platform, CPU model, cores, Python, NumPy and SciPy, and the kernels
    they compute with (mcmc_lib.portable)."""
    return {"platform": platform.platform(), "cpu": unit_runner.cpu_model(), "cores": os.cpu_count(),
            **unit_runner.environment(), "floating_point": portable.describe()}


def _provenance(units, stats, profile: str, code: dict | None = None) -> dict:
    commit, dirty = git_commit()
    seconds = stats.unit_seconds
    cpu = [c for c in stats.unit_cpu_seconds if c is not None]
    return {"profile": profile, "commit": commit, "uncommitted_changes": dirty,
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "machine": machine(), "backend": stats.backend, "jobs": stats.jobs,
            "n_units": stats.n_units, "n_from_cache": stats.n_cached,
            "wall_seconds": round(stats.wall_seconds, 3),
            # what the whole experiment takes to compute, units from the cache counted at their recorded
            # times (this build's wall time is about 0 when they all came from it)
            "compute_wall_seconds": round(projected_wall_seconds(
                stats.unit_seconds, max(stats.jobs, 1) if stats.n_cached < stats.n_units
                else unit_runner.job_count()), 3),
            "unit_seconds_total": round(sum(seconds), 3), "unit_seconds_max": round(max(seconds, default=0), 3),
            "unit_cpu_seconds_total": round(sum(cpu), 3) if cpu else None,
            "unit_cpu_seconds_max": round(max(cpu), 3) if cpu else None,
            # where the units were computed: a resumed run takes some from earlier sittings, maybe on other
            # machines, so "machine" (above) is the one that wrote this file, not necessarily theirs
            "unit_machines": unit_machine_counts(stats.unit_machines),
            "n_units_sharing_a_core": units_sharing_a_core(stats.unit_seconds, stats.unit_cpu_seconds),
            "units_finished": finish_span(stats.unit_finished),
            **(experiment_code(units) if code is None else code)}


RERUN_SHARED_ENV = "MCMC_BOOK_RERUN_SHARED"
RERUN_BEFORE_ENV = "MCMC_BOOK_RERUN_BEFORE"
SHARED_CORE_RATIO = 1.05        # wall time over CPU time above which a unit did not have a core to itself
SHARED_CORE_MIN_SECONDS = 1.0   # below this the ratio is start-up noise


def units_sharing_a_core(unit_seconds, unit_cpu_seconds) -> int | None:
    """How many units ran without a core to themselves: wall time more than 5% over their CPU time. Their
    CPU seconds read high as well (gsm's samplers about 1.3x on a 2-core machine running other jobs,
    2026-11-26), so an experiment that reports times should rerun them on an otherwise idle machine.
    None when no unit recorded its CPU time (cache entries older than that field)."""
    unit_seconds = _times(unit_seconds, "unit_seconds")
    unit_cpu_seconds = _times(unit_cpu_seconds, "unit_cpu_seconds", none_allowed=True)
    if len(unit_cpu_seconds) != len(unit_seconds):
        raise ValueError(f"unit_cpu_seconds must have one entry per unit ({len(unit_seconds)}), got "
                         f"{len(unit_cpu_seconds)}")
    if all(cpu is None for cpu in unit_cpu_seconds):
        return None
    return sum(shared_a_core(wall, cpu) for wall, cpu in zip(unit_seconds, unit_cpu_seconds))


def _rows_sharing_a_core(rows) -> int | None:
    """``units_sharing_a_core`` over a stored record's unit rows."""
    return units_sharing_a_core([row["seconds"] for row in rows], [row.get("cpu_seconds") for row in rows])


def shared_a_core(seconds: float, cpu_seconds: float | None) -> bool:
    """Whether one unit's measurement was made without a core to itself (see ``units_sharing_a_core``);
    False when its CPU time was not recorded."""
    require_number(seconds, "seconds")
    if cpu_seconds is not None:
        require_number(cpu_seconds, "cpu_seconds")
    return (cpu_seconds is not None and seconds >= SHARED_CORE_MIN_SECONDS
            and seconds > SHARED_CORE_RATIO * cpu_seconds)


def finish_span(finished) -> dict:
    """When a set of units finished: the first and last recorded time and how many have none (entries
    older than that record). The span says whether a timed comparison was measured in one sitting."""
    finished = _finish_list(finished)
    recorded = sorted(_instant(f).isoformat(timespec="seconds") for f in finished if f is not None)
    return {"first": recorded[0] if recorded else None, "last": recorded[-1] if recorded else None,
            "not_recorded": len(finished) - len(recorded)}


def minutes_apart(finished) -> float | None:
    """How many minutes apart a set of units finished (the last finish time less the first); None when
    any of them has no recorded time, since then the sitting cannot be shown."""
    finished = _finish_list(finished)
    if not finished or None in finished:
        return None
    instants = [_instant(f) for f in finished]
    return (max(instants) - min(instants)).total_seconds() / 60


def _instant(finished: str) -> datetime.datetime:
    """A recorded finish time as an aware UTC datetime (older entries wrote the offset as +0000)."""
    return datetime.datetime.fromisoformat(finished).astimezone(datetime.timezone.utc)


def needs_remeasuring(seconds, cpu_seconds, finished, before) -> bool:
    """Whether a rerun (``rerun_shared``) recomputes a stored unit: it had no core to itself, or
    ``before`` (``rerun_before``) is set and it finished earlier or has no recorded finish time."""
    if finished is not None:
        _finish_list([finished], "finished")
    if before is not None and not isinstance(before, datetime.datetime):
        raise wrong_type("before", "a datetime (rerun_before()) or None", before)
    return shared_a_core(seconds, cpu_seconds) or (
        before is not None and (finished is None or _instant(finished) < before))


def _needs_remeasuring(entry, before) -> bool:
    """``needs_remeasuring`` of a stored row or a cache or checkpoint entry."""
    return needs_remeasuring(entry["seconds"], entry.get("cpu_seconds"), entry.get("finished"), before)


def rerun_before() -> datetime.datetime | None:
    """``MCMC_BOOK_RERUN_BEFORE`` (``make paper RERUN_BEFORE=...``, an ISO 8601 time, UTC unless it says):
    with ``rerun_shared``, also recompute the named experiments' units that finished before it, so that
    every unit of a timed comparison is measured in one sitting. None when unset."""
    setting = os.environ.get(RERUN_BEFORE_ENV, "").strip()
    if not setting:
        return None
    try:
        moment = datetime.datetime.fromisoformat(setting)
    except ValueError:
        raise ValueError(f"RERUN_BEFORE ({RERUN_BEFORE_ENV}) must be an ISO 8601 time such as "
                         f"2026-11-26T18:00, got {setting!r}") from None
    return moment.replace(tzinfo=datetime.timezone.utc) if moment.tzinfo is None else moment


def _has_units_to_remeasure(record, before) -> bool:
    # from the rows, not the provenance's count: the rows are what a rerun recomputes
    return any(_needs_remeasuring(row, before) for row in record["units"])


def rerun_shared(chapter: str, name: str) -> bool:
    """Whether this paper run recomputes the stored units of ``chapter/name`` that had no core to
    themselves: ``MCMC_BOOK_RERUN_SHARED`` lists such experiments as ``chapter/name`` (``make paper
    RERUN_SHARED=...``). Their other units are carried as usual."""
    _name(chapter, "chapter")
    _name(name, "name")
    return f"{chapter}/{name}" in os.environ.get(RERUN_SHARED_ENV, "").replace(",", " ").split()


def drop_measurements_to_redo(units, places, keys=None, before=None) -> int:
    """Delete from ``places`` (a checkpoint, the unit cache) the entries of ``units`` that a rerun
    recomputes (``needs_remeasuring``: measured without a core to themselves, or finished before
    ``before``), so that it does not take them back; how many. ``keys``: the units' ``unit_keys`` when
    the caller has them already."""
    units = unit_runner._units_list(units)
    if not isinstance(places, (list, tuple)):
        raise wrong_type("places", "a list of places (UnitCheckpoint, UnitCache)", places)
    for i, kept in enumerate(places):
        if not all(callable(getattr(kept, method, None)) for method in ("load", "forget")):
            raise wrong_type(f"places[{i}]", "a UnitCheckpoint or UnitCache", kept)
    dropped = 0
    for unit, key in zip(units, unit_runner.unit_keys(units) if keys is None else keys):
        for kept in places:
            entry = kept.load(unit, key)
            if entry is not None and _needs_remeasuring(entry, before):
                kept.forget(unit, key)
                dropped += 1
    return dropped


def shared_core_warnings(chapter: str, since: str, store_dir=None, profile: str = "paper") -> list[str]:
    """One line per experiment of ``chapter`` stored at or after ``since`` (an ISO date) with units that
    did not have a core to themselves (``units_sharing_a_core``): what ``make paper`` says at the end."""
    _name(chapter, "chapter")
    require_str(since, "since")
    lines = []
    for path in sorted((store_directory(store_dir, profile) / chapter).glob("*.json")):
        provenance = json.loads(path.read_text())["provenance"]
        shared = provenance.get("n_units_sharing_a_core")
        if shared and provenance["date"] >= since:
            lines.append(f"{chapter}/{path.stem}: {shared} of {_units(provenance['n_units'])} ran without a core to "
                         f"themselves (wall time over {SHARED_CORE_RATIO:g} x CPU time), so their times read high; "
                         "if the experiment reports times, rerun them on an otherwise idle machine")
    return lines


def unit_machine_counts(machines) -> dict:
    """How many units each machine computed ("not recorded" for entries older than that record)."""
    if isinstance(machines, str) or not hasattr(machines, "__iter__") or isinstance(machines, dict):
        if isinstance(machines, str):
            raise ValueError(f"machines must be a list of machine labels, got one string {machines!r}")
        raise wrong_type("machines", "a list of machine labels (str or None)", machines)
    machines = list(machines)
    for i, label in enumerate(machines):
        if label is not None and not isinstance(label, str):
            raise wrong_type(f"machines[{i}]", "a machine label (str) or None", label)
    return dict(Counter(label or "not recorded" for label in machines).most_common())


# ---------------------------------------------------------------- the store on disk


def write_store(chapter: str, name: str, units, results, stats, sizes=None, profile: str = "paper",
                store_dir=None) -> Path:
    """Write an experiment's unit results and provenance to ``results/<profile>/<chapter>/<name>.json``."""
    units = unit_runner._units_list(units)
    if isinstance(results, (str, bytes, dict)) or not isinstance(results, (list, tuple)):
        raise wrong_type("results", "a list of unit results, one per unit", results)
    if len(results) != len(units):
        raise ValueError(f"results must hold one result per unit ({len(units)}), got {len(results)}")
    if not all(isinstance(getattr(stats, field_, None), list) for field_ in ("unit_seconds", "unit_cpu_seconds",
                                                                            "unit_finished")):
        raise wrong_type("stats", "the RunStats of the run (units.run_with_stats)", stats)
    if not len(stats.unit_seconds) == len(stats.unit_cpu_seconds) == len(stats.unit_finished) == len(units):
        raise ValueError(f"stats must describe the {len(units)} units, got {len(stats.unit_seconds)} unit times")
    return _write(store_path(chapter, name, store_dir, profile), _provenance(units, stats, profile), units,
                  results, stats, sizes)


def _write(path: Path, provenance: dict, units, results, stats, sizes) -> Path:
    """One line per unit, so that a refresh shows in a diff as the units that changed."""
    chapter, name = path.parent.name, path.stem
    header = {"experiment": f"{chapter}/{name}", "format": STORE_FORMAT, "provenance": provenance,
              "sizes": unit_runner.encode(sizes, "sizes")}
    rows = [_row(i, unit, result, unit_seconds, cpu_seconds, finished)
            for i, (unit, result, unit_seconds, cpu_seconds, finished)
            in enumerate(zip(units, results, stats.unit_seconds, stats.unit_cpu_seconds, stats.unit_finished))]
    path.parent.mkdir(parents=True, exist_ok=True)
    _dump(path, header, rows)
    return path


def _row(i, unit, result, seconds, cpu_seconds, finished) -> dict:
    """A unit's line in the store; ``finished`` only when recorded (entries older than it have none)."""
    row = {"function": unit_runner.function_name(unit.fn), "params": unit_runner.encode(unit.params, "params"),
           "seed": unit.seed, "seconds": round(seconds, 3),
           "cpu_seconds": None if cpu_seconds is None else round(cpu_seconds, 3)}
    if finished is not None:
        row["finished"] = finished
    row["result"] = unit_runner.encode(result, f"the result of units[{i}]", compact=True)
    return row


def _dump(path: Path, header: dict, rows: list) -> None:
    """The header indented, then one line per unit; written beside and renamed (never half a file)."""
    head = json.dumps(header, indent=1, sort_keys=True)
    lines = ",\n".join("  " + json.dumps(row) for row in rows)   # a result's keys keep their order
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temporary.write_text(head[:-2] + ',\n "units": [\n' + lines + "\n ]\n}\n")
    os.replace(temporary, path)


def _record_sizes(path: Path, sizes) -> bool:
    """Re-record a stored run's ``sizes`` when a run at other sizes repeats exactly its units by unchanged
    code (a paper run that changed a size only other experiments use): its units are what these sizes
    run, and a chapter adopts its stores' sizes only when they all agree (``Experiments``). The units,
    results and provenance stay; ``sizes_recorded`` says by which commit and when. Returns whether the
    sizes changed."""
    raw = json.loads(path.read_text())
    encoded = unit_runner.encode(sizes, "sizes")
    if raw["sizes"] == json.loads(json.dumps(encoded)):
        return False
    raw["sizes"] = encoded
    raw["provenance"]["sizes_recorded"] = {
        "commit": git_commit()[0], "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}
    _dump(path, {key: value for key, value in raw.items() if key != "units"}, raw["units"])
    return True


def read_store(chapter: str, name: str, store_dir=None, profile: str = "paper") -> dict | None:
    """The stored record with values decoded (arrays, numpy scalars and tuples restored), or None."""
    path = store_path(chapter, name, store_dir, profile)
    if not path.exists():
        return None
    record = json.loads(path.read_text())
    if record.get("format") not in READABLE_FORMATS:
        raise ValueError(f"{path} has store format {record.get('format')!r}; this mcmc_lib reads "
                         f"{' and '.join(map(str, READABLE_FORMATS))}")
    record["sizes"] = unit_runner.decode(record["sizes"])
    for row in record["units"]:
        row["params"], row["result"] = unit_runner.decode(row["params"]), unit_runner.decode(row["result"])
    if "n_units_sharing_a_core" not in record["provenance"]:     # a record older than the count: from its units
        record["provenance"]["n_units_sharing_a_core"] = _rows_sharing_a_core(record["units"])
    if "units_finished" not in record["provenance"]:             # older still: none recorded
        record["provenance"]["units_finished"] = finish_span(row.get("finished") for row in record["units"])
    return record


# ---------------------------------------------------------------- the largest scale available


@dataclass
class ExperimentResults:
    """An experiment's unit results with where they came from."""
    values: list                     # unit results, in the order of the units that produced them
    params: list                     # those units' parameters
    seeds: list
    sizes: object                    # the sizes they were run at (as given to largest_scale)
    profile: str                     # the profile whose scale they have
    source: str                      # "store" (committed paper-profile results) or "run" (this build)
    code_changed: bool               # store: the code differs from the stored run's; run: False
    provenance: str                  # one line for the page
    record: dict = field(default_factory=dict)   # the full provenance
    finished: list = field(default_factory=list)  # when each unit finished (ISO, UTC; None: not recorded)
    # store: the provenance's ``verified`` entry that vouches for the current code (verify_record), if any
    verified: dict | None = None


def _shows_store(profile: str) -> bool:
    """Whether this build reads the store rather than running (never at the paper profile, which fills it)."""
    return profile != "paper" and use_store(profile)


def store_setting() -> str:
    """``MCMC_BOOK_STORE``: auto (the default), on, off, refresh, check or verify (see the module
    docstring)."""
    setting = os.environ.get(STORE_ENV, "auto").strip().lower() or "auto"
    if setting not in ("auto", "on", "off", "refresh", "check", "verify"):
        raise ValueError(f"{STORE_ENV} must be auto, on, off, refresh, check or verify, got {setting!r}")
    return setting


def use_store(profile: str) -> bool:
    """Whether a default or smoke build shows stored paper-profile results (see the module docstring)."""
    require_str(profile, "profile", PROFILES)
    setting = store_setting()
    return setting == "on" or (setting in ("auto", "refresh", "check", "verify") and profile == "default")


def _reads_own_store(profile: str) -> bool:
    """Whether a build may take its own profile's results from its store when they hold exactly its
    units and their code is unchanged, rather than compute them again: at the default profile (unless it
    refreshes that store or ``MCMC_BOOK_STORE=off``), and at the paper profile, so that a paper run
    resumed on another machine does not redo the experiments it stored before (unless
    ``MCMC_BOOK_STORE=refresh``)."""
    setting = store_setting()
    return ((profile == "default" and setting in ("auto", "on", "check", "verify"))
            or (profile == "paper" and setting != "refresh"))


def _writes_own_store(profile: str) -> bool:
    """Whether a run writes its results to its profile's store: always at the paper profile, and at the
    default profile when ``MCMC_BOOK_STORE=refresh`` (``make default-store``)."""
    return profile == "paper" or (profile == "default" and store_setting() == "refresh")


def largest_scale(chapter: str, name: str, units, sizes=None, store_dir=None, same_units: bool = False,
                  **run_options) -> ExperimentResults:
    """The largest-scale results available for experiment ``chapter/name``: at the paper profile, run
    ``units`` and write the store; otherwise the stored paper-profile results if there are any (and the
    profile uses them), else ``units`` run now. ``same_units=True`` uses the store only when it holds
    exactly these units (same functions, parameters and seeds, in order): for a chapter that pairs the
    results with its own units rather than reading ``params`` (see ``Experiments``). ``run_options``
    go to ``mcmc_lib.units.run_units`` (label, jobs, scheduler, cache, progress)."""
    _name(chapter, "chapter")
    _name(name, "name")
    units = unit_runner._units_list(units)
    require_bool(same_units, "same_units")
    if not units:
        raise ValueError(f"units must list the experiment's units, got none for {chapter}/{name}")
    return _largest_scale(chapter, name, units, sizes, store_dir, same_units,
                          lambda: read_store(chapter, name, store_dir), run_options)


def _largest_scale(chapter, name, units, sizes, store_dir, same_units, read_record, run_options):
    profile = active_profile()
    path = store_path(chapter, name, store_dir)
    if store_setting() == "verify":          # python -m mcmc_lib.store --verify-code: no unit runs but a sample
        return _verified_instead_of_run(chapter, name, units, store_dir, read_record, profile)
    if _shows_store(profile):
        record = read_record()
        if record is not None and (not same_units or _same_units(record, units)):
            return _from_store(record, units, path)
    own_path = store_path(chapter, name, store_dir, profile) if profile in STORED_PROFILES else None
    outdated = own = None                    # the build's own stored record, when it is of other units or code
    code = experiment_code(units)            # before running: a unit run here may change what its code reads
    rerun = profile == "paper" and rerun_shared(chapter, name)
    before = rerun_before() if rerun else None
    if _reads_own_store(profile):
        own = read_store(chapter, name, store_dir, profile)
        if _current_record(own, units, code) is not None and not (rerun and _has_units_to_remeasure(own, before)):
            if _writes_own_store(profile) and sizes is not None and _record_sizes(own_path, sizes):
                own = read_store(chapter, name, store_dir, profile)
            return _from_store(own, units, own_path, code)
        outdated = own_path if own is not None else None
    if store_setting() == "check":
        paper = read_record() if _shows_store(profile) else None
        return _checked_instead_of_run(chapter, name, units, (own, own_path), (paper, path), code)
    run_options.setdefault("label", f"{chapter}/{name}")
    if profile == "paper":                   # hours of work: kept in the repository as it finishes
        _refuse_native_floats(chapter, name, units)
        run_options.setdefault("checkpoint", checkpoint_directory(chapter, store_dir))
        if own is not None:
            keys = run_options["keys"] = unit_runner.unit_keys(units)    # once for the drop, carry and run
            if rerun:
                places = [unit_runner.UnitCheckpoint(run_options["checkpoint"]),
                          unit_runner.UnitCache(unit_runner.cache_directory(run_options.get("cache")))]
                drop_measurements_to_redo(units, places, keys, before)
            carry_stored_units(own, units, run_options["checkpoint"], code, rerun, keys, before)
    elif _writes_own_store(profile):         # make default-store: rewrite the store, recompute what changed
        own = read_store(chapter, name, store_dir, profile)
        if _refresh_would_only_restamp(own, units, code, run_options.get("cache")):
            return _from_store(own, units, own_path, code)
        if own is not None:
            _carry(own, units, unit_runner.UnitCache(unit_runner.cache_directory(run_options.get("cache"))), code)
    results, stats = unit_runner.run_with_stats(units, **run_options)
    provenance = _provenance(units, stats, profile, code)
    written = (_write(own_path, provenance, units, results, stats, sizes) if _writes_own_store(profile)
               else None)
    if written is not None and run_options.get("checkpoint") is not None:
        unit_runner.UnitCheckpoint(run_options["checkpoint"]).remove(units, stats.keys)   # stored now
    return ExperimentResults(results, [u.params for u in units], [u.seed for u in units], sizes, profile, "run",
                             False, _describe_run(provenance, path, written, outdated), provenance,
                             stats.unit_finished)


def _refresh_would_only_restamp(own, units, code, cache) -> bool:
    """Whether ``make default-store`` would take every unit of a stored record from the cache (the record
    holds exactly these units by unchanged code, and the cache is on, so ``_carry`` would put them all
    there): rewriting it would change only its commit and date, so it is left as it is, its provenance
    and sizes those of the run that computed it (a default build reads the sizes of paper-profile
    records only). With the cache off the units are computed again, and the record rewritten."""
    return unit_runner.cache_directory(cache) is not None and _current_record(own, units, code) is not None


def carry_stored_units(record, units, checkpoint, code=None, skip_remeasured: bool = False, keys=None,
                       before=None) -> int:
    """Put in the checkpoint the units of a stored paper run that ``units`` repeat (same function,
    parameters and seed) when their code is unchanged since (``code_changes``; ``code``: as there).
    A paper run at changed sizes (a cell added, more trials in some) then computes only the units that
    are new, however long ago and wherever the stored ones ran. Returns how many it carried. A unit
    keeps its machine when the stored run names a single one. ``skip_remeasured``: not those a rerun
    recomputes (``rerun_shared``, ``needs_remeasuring``: measured without a core to themselves, or,
    given ``before``, finished earlier). ``keys``: the units' ``unit_keys`` when the caller has them. A carried unit
    keeps its recorded finish time."""
    _record(record)
    units = unit_runner._units_list(units)
    checkpoint = require_path(checkpoint, "checkpoint")
    return _carry(record, units, unit_runner.UnitCheckpoint(checkpoint), code, skip_remeasured, keys, before)


def _carry(record, units, kept, code=None, skip_remeasured: bool = False, keys=None, before=None) -> int:
    """``carry_stored_units`` into ``kept``: a paper run's checkpoint, or the unit cache when ``make
    default-store`` rewrites the default store (so that it recomputes only the units that are new or whose
    code changed, not every unit a fresh clone's cache lacks). Nothing when the cache is off."""
    if kept.directory is None or code_changes(record["provenance"], units, code):
        return 0
    stored = {unit_signature(row["function"], row["params"], row["seed"]): row for row in record["units"]}
    machine = _single_machine(record["provenance"])
    carried = 0
    for unit, key in zip(units, unit_runner.unit_keys(units) if keys is None else keys):
        row = stored.get(unit_signature(unit_runner.function_name(unit.fn), unit.params, unit.seed))
        if row is not None and not kept.has(unit, key) and not (skip_remeasured and _needs_remeasuring(row, before)):
            kept.save(unit, key, row["result"], row["seconds"], row.get("cpu_seconds"), machine, row.get("finished"))
            carried += 1
    return carried


def _single_machine(provenance) -> str | None:
    """The machine that computed every unit of a stored run, when one did: the only label of its
    ``unit_machines``, or, in a record older than that field, the machine that wrote it when no unit
    came from a cache (its floating-point setting may be unrecorded); else None."""
    labels = provenance.get("unit_machines")
    if labels:
        return next(iter(labels)) if len(labels) == 1 and "not recorded" not in labels else None
    if provenance.get("n_from_cache") != 0:
        return None
    writer = provenance["machine"]
    return unit_runner.label_of(writer["cpu"], writer.get("floating_point") or "floating point not recorded")


def _refuse_native_floats(chapter: str, name: str, units) -> None:
    """A paper run computing natively on a CPU that can compute portably (``MCMC_BOOK_FLOAT=native``, to
    save time on AVX-512) may run only units whose parameters hold no floating-point number: a float the
    notebook computed would have other last bits than in a portable build, which would then see other
    units and could not show the stored results. Any other experiment stops the run with a ValueError."""
    if not portable.portable_environment(environ={}) or portable.is_portable():   # environ={}: whatever the setting
        return
    first = next((i for i, unit in enumerate(units) if _holds_float(unit.params)), None)
    if first is not None:
        params = _short(unit_runner.encode(units[first].params, "params"))
        raise ValueError(f"{chapter}/{name}: MCMC_BOOK_FLOAT=native, but this experiment's units have "
                         f"floating-point parameters (unit {first}: {params}), whose last bits would differ "
                         "from a portable build's; resume the paper run without MCMC_BOOK_FLOAT=native "
                         "(what it stored so far stays)")


def _holds_float(value) -> bool:
    """Whether a parameter holds a float (or a float array) anywhere inside it."""
    if isinstance(value, dict):
        return any(_holds_float(item) for item in value.values())
    if isinstance(value, (list, tuple)):
        return any(_holds_float(item) for item in value)
    if hasattr(value, "dtype"):                  # a NumPy array or scalar
        return value.dtype.kind in "fc"
    return isinstance(value, (float, complex))


def _current_record(record, units, code=None):
    """A record of the build's own profile when it holds exactly ``units`` and their code is unchanged
    since (so it is what this build would compute, timings aside), else None: unlike paper-profile
    results, which no build can recompute, a stale record of the build's own profile is recomputed."""
    if record is None or not _same_units(record, units) or code_changes(record["provenance"], units, code):
        return None
    return record


def store_mismatch(record, units, code=None) -> str:
    """Why a stored record is not what ``units`` would compute: the first unit whose function, seed or
    parameters differ (and where in the parameters), or the code that changed; "" when it is."""
    units = unit_runner._units_list(units)
    if record is None:
        return "nothing is stored"
    _record(record)
    if len(record["units"]) != len(units):
        return f"{len(record['units'])} units are stored, {len(units)} run now"
    for i, (row, unit) in enumerate(zip(record["units"], units)):
        stored = json.loads(unit_signature(row["function"], row["params"], row["seed"]))
        now = json.loads(unit_signature(unit_runner.function_name(unit.fn), unit.params, unit.seed))
        if stored != now:
            where, was, is_now = _first_difference(stored, now, "")
            part = {"[0]": "function", "[2]": "seed"}.get(where[:3], "params" + where[3:])
            return f"unit {i} ({now[0]}): {part} {_short(was)} stored, {_short(is_now)} now"
    changes = code_changes(record["provenance"], units, code)
    if "the experiment's functions" in changes:      # their fingerprint covers the notebook values they read
        changes[changes.index("the experiment's functions")] = ("the experiment's functions (their code, or "
                                                                "a notebook value they read)")
    return f"{' and '.join(changes)} changed since the stored run" if changes else ""


def _first_difference(a, b, where: str):
    """(path, a's value, b's value) of the first place two JSON-like values differ."""
    if isinstance(a, dict) and isinstance(b, dict) and a.keys() == b.keys():
        for key in a:
            if a[key] != b[key]:
                return _first_difference(a[key], b[key], f"{where}/{key}")
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b)):
            if x != y:
                return _first_difference(x, y, f"{where}[{i}]")
    return where, a, b


def _short(value) -> str:
    text = json.dumps(value) if not isinstance(value, float) else repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _checked_instead_of_run(chapter, name, units, own, paper, code) -> ExperimentResults:
    """``MCMC_BOOK_STORE=check``: say why this experiment would be computed, run nothing, and go on with
    the stored results (of other units, so later cells may fail) so that the rest of the chapter is checked.
    ``own`` and ``paper``: (record or None, its path) of the build's own store and of the paper store."""
    reason = store_mismatch(own[0], units, code)
    if paper[0] is not None:
        reason += f"; the paper store's: {store_mismatch(paper[0], units, code) or 'the same units'}"
    print(f"{CHECK_PREFIX} {chapter}/{name}: a build would compute it ({reason})", flush=True)
    record, path = own if own[0] is not None else paper
    if record is None:
        raise RuntimeError(f"{CHECK_PREFIX} {chapter}/{name}: nothing stored to go on with")
    return _from_store(record, units, path, code)


# ---------------------------------------------------------------- verifying a record under changed code

VERIFY_PREFIX = "store verify:"
VERIFY_PROFILES_ENV = "MCMC_BOOK_VERIFY_PROFILES"      # which stores' records a verify run checks ("paper,default")
VERIFY_MAX_SECONDS_ENV = "MCMC_BOOK_VERIFY_MAX_SECONDS"
VERIFY_SKIP_ENV = "MCMC_BOOK_VERIFY_SKIP"          # experiments a verify run leaves alone ("pmf,pmf-map")
VERIFY_MAX_SECONDS = 1800.0                            # per record: the sample's projected compute time
# Keys of unit results whose values are measured times, or computed from them: no rerun gives them again,
# so a verification compares their presence, not their values, and lists where it set them aside. Named
# one by one (not by a pattern: in MCMC a "time" can be a deterministic integration time); a timing under
# another name (gsm's "bare") makes its units differ, so that their records cannot be verified.
TIMING_KEYS = frozenset({"seconds", "grad_seconds", "time_s", "warmup_time", "sampling_time",
                         "min_ess_per_s", "min_ess_per_s_sd", "warm_seconds", "per_second"})


@dataclass
class Verification:
    """What ``verify_record`` did with one stored record."""
    status: str      # "current", "verified", "differs", "refused" (too long, or the code moved) or "skipped"
    message: str     # one line for the report
    units: list = field(default_factory=list)     # the indices of the units it reran (or would)
    projected_seconds: float = 0.0


def verification_sample(rows) -> list[int]:
    """The units (indices into a record's rows) a verification reruns: for each unit function, and for
    each value of each of its string or boolean parameters (which select code paths: a sampler's name,
    a variant), the cheapest stored unit of that class (``unit_compute_seconds``; the first of equals).
    ``rows``: a stored record's ``units``, each with its ``function``, ``params`` and ``seconds``."""
    rows = require_sequence(rows, "rows", of=dict, what="a stored record's unit rows (dicts)")
    cheapest = {}
    for i, row in enumerate(rows):
        if not isinstance(row.get("function"), str) or not isinstance(row.get("params"), dict):
            raise ValueError(f"rows[{i}] must be a stored unit's row with its 'function' (str) and 'params' (dict), "
                             f"got the keys {sorted(row)}")
        cost = unit_compute_seconds(row)
        classes = [(row["function"],)] + [(row["function"], name, value) for name, value in row["params"].items()
                                          if isinstance(value, (str, bool))]
        for kind in classes:
            if kind not in cheapest or cost < cheapest[kind][0]:
                cheapest[kind] = (cost, i)
    return sorted({i for _, i in cheapest.values()})


def _unrecorded(label: str) -> bool:
    return label == "not recorded" or label.endswith("floating point not recorded")


def floating_point_mismatch(provenance: dict, here: str | None = None) -> str:
    """Why a record's units cannot be compared with units computed here: some of them were computed with
    other kernels than this process's (``portable.describe``; the labels of ``unit_machines``, or for a
    record older than them the writer's when no unit came from a cache). "" when none was; units whose
    floating point was not recorded do not stop a verification (a difference would refuse it)."""
    require_mapping(provenance, "provenance")
    here = portable.describe() if here is None else require_str(here, "here")
    labels = provenance.get("unit_machines")
    if labels and not isinstance(labels, dict):
        raise ValueError(f"provenance['unit_machines'] must be a dict (label: number of units), got {labels!r}")
    if not labels and provenance.get("n_from_cache") == 0 and not isinstance(provenance.get("machine"), dict):
        raise ValueError(f"provenance must be a stored run's provenance with its 'machine' (a dict), got the keys "
                         f"{sorted(provenance)}")
    if not labels and provenance.get("n_from_cache") == 0 and provenance["machine"].get("floating_point"):
        writer = provenance["machine"]
        labels = {unit_runner.label_of(writer["cpu"], writer["floating_point"]): provenance["n_units"]}
    other = {label: count for label, count in (labels or {}).items()
             if not _unrecorded(label) and not label.endswith(f", {here}")}
    if not other:
        return ""
    return (f"{'; '.join(f'{count} of its units ran on {label}' for label, count in other.items())}, and this "
            f"process computes with {here}: it cannot be verified here")


def _floating_point_unrecorded(provenance: dict) -> bool:
    """Whether some of a record's units have no recorded floating point (computed before it was recorded)."""
    labels = provenance.get("unit_machines")
    if labels:
        return any(_unrecorded(label) for label in labels)
    return provenance.get("n_from_cache") != 0 or not provenance["machine"].get("floating_point")


def _process_started() -> float:
    """When this process started (seconds since the epoch; Linux), else when this module was loaded."""
    try:
        with open("/proc/self/stat") as file:
            ticks = int(file.read().rsplit(")", 1)[1].split()[19])        # field 22, starttime
        with open("/proc/stat") as file:
            boot = next(float(line.split()[1]) for line in file if line.startswith("btime "))
        return boot + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return _LOADED_AT


_LOADED_AT = time.time()


def _edited_since_loaded(modules) -> list[str]:
    """The mcmc_lib modules among ``modules`` (all when None) that this process has loaded and whose source
    file changed after it started: the code that runs is then not the code whose hash would be recorded."""
    started = _process_started() - 1.0                   # the start time is known to a clock tick
    names = unit_runner.library_closure(modules)
    files = [getattr(sys.modules.get(name), "__file__", None) for name in names]
    return [_relative_to_root(Path(file)) for file in files
            if file is not None and Path(file).exists() and Path(file).stat().st_mtime > started]


def _relative_to_root(path: Path) -> str:
    try:
        return path.resolve().relative_to(unit_runner.repository_root().resolve()).as_posix()
    except ValueError:
        return str(path)


def _verify_profiles() -> list[str]:
    setting = os.environ.get(VERIFY_PROFILES_ENV, "").replace(",", " ").split() or list(STORED_PROFILES)
    unknown = [profile for profile in setting if profile not in STORED_PROFILES]
    if unknown:
        raise ValueError(f"{VERIFY_PROFILES_ENV} must name stored profiles ({', '.join(STORED_PROFILES)}), "
                         f"got {unknown}")
    return setting


def _verify_skipped() -> set[str]:
    """The experiments named in ``MCMC_BOOK_VERIFY_SKIP`` (comma- or space-separated): records about to be
    recomputed, whose sample would be rerun for nothing."""
    return set(os.environ.get(VERIFY_SKIP_ENV, "").replace(",", " ").split())


def _verify_max_seconds() -> float:
    setting = os.environ.get(VERIFY_MAX_SECONDS_ENV, "").strip()
    try:
        seconds = float(setting) if setting else VERIFY_MAX_SECONDS
    except ValueError:
        seconds = -1.0
    if not seconds >= 0:
        raise ValueError(f"{VERIFY_MAX_SECONDS_ENV} must be a number of seconds, got {setting!r}")
    return seconds


def _set_timings_aside(value, where: str, aside: list):
    """``value`` (a result as the store writes it) with the values of ``TIMING_KEYS`` replaced by a mark,
    their paths added to ``aside``."""
    if isinstance(value, dict) and not ({"__ndarray__", "__numpy__"} & value.keys()):
        marked = {}
        for key, item in value.items():
            if key in TIMING_KEYS:
                aside.append(f"{where}/{key}")
                marked[key] = "(a measured time)"
            else:
                marked[key] = _set_timings_aside(item, f"{where}/{key}", aside)
        return marked
    if isinstance(value, list):
        return [_set_timings_aside(item, f"{where}[{i}]", aside) for i, item in enumerate(value)]
    return value


def _compares_something(value) -> bool:
    """Whether a result, its timings set aside, still holds a value a rerun must give again."""
    if isinstance(value, dict) and not ({"__ndarray__", "__numpy__"} & value.keys()):
        return any(_compares_something(item) for item in value.values())
    if isinstance(value, list):
        return any(_compares_something(item) for item in value)
    return value != "(a measured time)"


def _first_json_difference(a, b, where: str = ""):
    """(path, a's value, b's value) of the first place two results as the store writes them differ, compared
    as their JSON text (so a NaN equals a NaN, and -0.0 differs from 0.0); numeric arrays element by element."""
    if isinstance(a, dict) and isinstance(b, dict):
        if "__ndarray__" in a and "__ndarray__" in b:
            x, y = unit_runner.decode(a), unit_runner.decode(b)
            if x.dtype == y.dtype and x.shape == y.shape and x.size:
                bits = (x.reshape(-1).view(np.uint8).reshape(x.size, -1)
                        != y.reshape(-1).view(np.uint8).reshape(y.size, -1)).any(axis=1)
                k = int(np.flatnonzero(bits)[0])
                index = ",".join(map(str, np.unravel_index(k, x.shape)))
                return f"{where}[{index}]", x.reshape(-1)[k].item(), y.reshape(-1)[k].item()
            return where, f"{x.dtype} {list(x.shape)}", f"{y.dtype} {list(y.shape)}"
        if list(a) == list(b):
            for key in a:
                if json.dumps(a[key]) != json.dumps(b[key]):
                    return _first_json_difference(a[key], b[key], f"{where}/{key}")
        return where, f"keys {list(a)}", f"keys {list(b)}"
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b)):
            if json.dumps(x) != json.dumps(y):
                return _first_json_difference(x, y, f"{where}[{i}]")
    return where or "the result", a, b


def verify_record(path: Path, units, max_seconds: float = VERIFY_MAX_SECONDS) -> Verification:
    """Rerun a sample of a stored record's units under the current code and, when every result is the
    stored one, say so in its provenance.

    For a record whose code changed (``code_changes``), the units of ``verification_sample`` are rebuilt
    from its rows (their function taken from ``units``, the experiment's units as the chapter builds them
    now, by name) and run one at a time, cheapest first, in this process (its floating-point mode, one
    BLAS thread, no cache, no cluster); each result, encoded as the store writes it, must equal the
    stored one exactly (``TIMING_KEYS`` set aside), and the first that does not (or that raises) stops it.
    Then a ``verified`` entry (the current code's hashes and fingerprints, commit, date, machine,
    the units rerun and how long they took) is appended to the record's provenance and the file rewritten,
    its units as they were; from then on ``code_changes`` takes the record as current while the code is
    that entry's. If any result differs, nothing changes and the message names the unit and the first
    difference. Refused without running anything when the sample's projected compute time (from the
    stored units' times) exceeds ``max_seconds``; skipped when the record's units were computed with
    other kernels than this process's (``floating_point_mismatch``) or by a function ``units`` lack."""
    path = require_path(path, "path")
    units = unit_runner._units_list(units)
    max_seconds = _max_seconds(max_seconds)
    if not path.is_file():
        raise ValueError(f"path must be a stored record's file (results/<profile>/<chapter>/<name>.json), got "
                         f"{str(path)!r}, which is not a file")
    text = path.read_text()
    raw = _record(json.loads(text), f"the record in path {_relative(path)}")
    provenance, rows = raw["provenance"], raw["units"]
    by_name = {unit_runner.function_name(unit.fn): unit.fn for unit in units}
    missing = sorted({row["function"] for row in rows} - by_name.keys())
    if missing:
        return Verification("skipped", f"its units' function {', '.join(missing)} is not among the units the chapter "
                                       "builds now, so they cannot be rerun")
    rebuilt = [unit_runner.Unit(by_name[row["function"]], unit_runner.decode(row["params"]), row["seed"])
               for row in rows]
    code = experiment_code(rebuilt)
    changed, since_run, verified = code_state(provenance, rebuilt, code)
    if not changed:
        return Verification("current", "the code is unchanged since its run" if verified is None else
                            f"its code changed since its run, but {verification_text(verified, len(rows))}")
    sample = verification_sample(rows)
    projected = sum(unit_compute_seconds(rows[i]) for i in sample)
    what = f"{' and '.join(changed)} changed since its run; {len(sample)} of {_units(len(rows))} to rerun"
    mismatch = floating_point_mismatch(provenance)
    if mismatch:
        return Verification("skipped", f"{what}, but {mismatch}", sample, projected)
    edited = _edited_since_loaded(code["library_modules"])
    if edited:
        return Verification("refused", f"{what}, but {', '.join(edited)} changed after this process loaded it, so "
                                       "the code that would run is not the code on disk: not verified (rerun it)",
                            sample, projected)
    if projected > max_seconds:
        return Verification("refused", f"{what}, projected {duration_text(projected)} of computing "
                                       f"({projected:.0f} s), over the limit of {max_seconds:.0f} s "
                                       "(--max-seconds): not verified", sample, projected)
    started = time.perf_counter()
    compact = raw.get("format", 1) >= 2
    aside, unit_seconds, unit_cpu_seconds = {}, {}, {}
    for done, i in enumerate(sorted(sample, key=lambda i: (unit_compute_seconds(rows[i]), i))):   # cheapest first:
        try:                                     # a difference stops it
            _, result, (unit_seconds[i], unit_cpu_seconds[i], _) = unit_runner.call_unit(
                i, rebuilt[i].fn, rebuilt[i].params, rebuilt[i].seed)
            rerun = json.loads(json.dumps(unit_runner.encode(result, f"the result of units[{i}]", compact=compact)))
        except Exception as error:   # noqa: BLE001  (a new argument check refusing a stored parameter, say)
            return Verification("differs", f"{what}: unit {i} ({rows[i]['function']}, {_short(rows[i]['params'])}, "
                                           f"seed {rows[i]['seed']}) raised {type(error).__name__}: {error}; the "
                                           "record is left as it was", sample, projected)
        stored_paths = []
        was, now = _set_timings_aside(rows[i]["result"], "", stored_paths), _set_timings_aside(rerun, "", [])
        if json.dumps(was) != json.dumps(now):
            where, before, after = _first_json_difference(was, now)
            unrecorded = ("; its units' floating point is not recorded, so a difference in the last bits may be "
                          "the kernels', not the code's" if _floating_point_unrecorded(provenance) else "")
            return Verification("differs", f"{what}: unit {i} ({rows[i]['function']}, {_short(rows[i]['params'])}, "
                                           f"seed {rows[i]['seed']}) differs at {where}: {_short(before)} stored, "
                                           f"{_short(after)} now (the {len(sample) - done - 1} dearer units not run)"
                                           f"{unrecorded}; the record is left as it was", sample, projected)
        if not _compares_something(was):
            return Verification("refused", f"{what}, but unit {i}'s result holds measured times alone, which no "
                                           "rerun gives again: not verified", sample, projected)
        aside[i] = [f"units[{i}]{where}" for where in stored_paths]
    seconds = time.perf_counter() - started
    if experiment_code(rebuilt)["code_hash"] != code["code_hash"] or _edited_since_loaded(code["library_modules"]):
        return Verification("refused", f"{what}, but the code changed while they ran (a source edited meanwhile, "
                                       "or a unit that changes a value it reads): not verified", sample, projected)
    commit, dirty = git_commit()
    entry = {"commit": commit, "uncommitted_changes": dirty,
             "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
             "machine": unit_runner.machine_label(), "changed": since_run,
             "code_hash": code["code_hash"], "functions": code["functions"], "library_hash": code["library_hash"],
             "library_modules": code["library_modules"], "units": sample,
             "unit_seconds": [round(unit_seconds[i], 3) for i in sample],
             "unit_cpu_seconds": [None if unit_cpu_seconds[i] is None else round(unit_cpu_seconds[i], 3)
                                  for i in sample],
             "seconds": round(seconds, 3), "timings_aside": [where for i in sample for where in aside[i]]}
    if path.read_text() != text:
        return Verification("refused", f"{what}, but {path} changed while they ran: not verified", sample, projected)
    provenance["verified"] = [*(provenance.get("verified") or []), entry]
    _dump(path, {key: value for key, value in raw.items() if key != "units"}, rows)
    return Verification("verified", f"{' and '.join(since_run)} changed since its run; "
                                    f"{verification_text(entry, len(rows))} ({duration_text(seconds)})",
                        sample, projected)


def _verified_instead_of_run(chapter, name, units, store_dir, read_record, profile) -> ExperimentResults:
    """``MCMC_BOOK_STORE=verify`` (``python -m mcmc_lib.store --verify-code``): ``verify_record`` on the
    stored records of this experiment in the profiles of ``MCMC_BOOK_VERIFY_PROFILES``, one line each,
    then go on with the stored results as ``make store-check`` does (no other unit runs)."""
    if profile != "default":
        raise ValueError(f"{STORE_ENV}=verify runs the chapters at the default profile, got {profile!r} "
                         "(python -m mcmc_lib.store --verify-code)")
    max_seconds = _verify_max_seconds()
    for stored_profile in _verify_profiles():
        path = store_path(chapter, name, store_dir, stored_profile)
        if path.exists() and name in _verify_skipped():
            print(f"{VERIFY_PREFIX} {_relative(path)}: skipped: named in {VERIFY_SKIP_ENV}", flush=True)
        elif path.exists():
            outcome = verify_record(path, units, max_seconds)
            print(f"{VERIFY_PREFIX} {_relative(path)}: {outcome.status}: {outcome.message}", flush=True)
    for stored_profile in STORED_PROFILES:                  # paper first, as a default build reads them
        record = read_store(chapter, name, store_dir, stored_profile)   # again: a verified record says so
        if record is not None:
            return _from_store(record, units, store_path(chapter, name, store_dir, stored_profile))
    raise RuntimeError(f"{VERIFY_PREFIX} {chapter}/{name}: nothing stored to go on with")


def verification_plan(store_dir=None, profiles=STORED_PROFILES, chapters=None) -> list[dict]:
    """What ``--verify-code`` would rerun, read from the stores alone (no chapter runs, no unit): one row
    per record of ``profiles`` (of ``chapters``, or all): its path, whether the sources of the mcmc_lib
    modules it ran changed since (its unit functions' fingerprints are known only when its chapter runs),
    the sample (``verification_sample``), its projected compute time, and why it cannot be verified here
    (``floating_point_mismatch``), if it cannot."""
    profiles = _stored_profiles(profiles, "profiles")
    if chapters is not None:
        chapters = require_sequence(chapters, "chapters", of=str, what="chapter stems (str)")
    here = portable.describe()
    plan = []
    for profile in profiles:
        for path in sorted(store_directory(store_dir, profile).glob("*/*.json")):
            if chapters and path.parent.name not in chapters:
                continue
            raw = json.loads(path.read_text())
            provenance, rows = raw["provenance"], raw["units"]
            sample = verification_sample(rows)
            library = unit_runner.library_code_hash(provenance.get("library_modules"))
            vouched = next((entry for entry in reversed(provenance.get("verified") or [])
                            if unit_runner.library_code_hash(entry.get("library_modules")) == entry["library_hash"]),
                           None)
            plan.append({"record": _relative(path), "units": len(rows), "sample": sample,
                         "projected_seconds": sum(unit_compute_seconds(rows[i]) for i in sample),
                         "library_changed": library != provenance["library_hash"],
                         "verified_for_this_library": vouched is not None and library != provenance["library_hash"],
                         "floating_point": floating_point_mismatch(provenance, here)})
    return plan


def print_verification_plan(plan, max_seconds: float) -> None:
    """``--verify-code --dry-run``: the plan, a line per record, and the totals."""
    plan = require_sequence(plan, "plan", of=dict, what="rows of verification_plan (dicts)")
    for i, row in enumerate(plan):
        missing = [key for key in PLAN_KEYS if key not in row]
        if missing:
            raise ValueError(f"plan[{i}] must be a row of verification_plan, with {missing}, got the keys "
                             f"{sorted(row)}")
    max_seconds = _max_seconds(max_seconds)
    print("What --verify-code would rerun (read from the stores; no unit runs). 'mcmc_lib': whether the sources "
          "of the modules a record ran changed since (its unit functions are checked when its chapter runs).")
    print(f"{'record':<36}{'units':>7}{'rerun':>7}{'projected':>11}  mcmc_lib")
    changed_total = every_total = 0.0
    for row in plan:
        state = ("changed, verified for the current sources" if row["verified_for_this_library"] else
                 "changed" if row["library_changed"] else "unchanged")
        notes = []
        if row["projected_seconds"] > max_seconds:
            notes.append(f"over --max-seconds {max_seconds:.0f}: would be refused")
        if row["floating_point"]:
            notes.append("other floating point: would be skipped")
        print(f"{row['record']:<36}{row['units']:>7}{len(row['sample']):>7}{row['projected_seconds']:>10.0f}s  "
              f"{state}{'; ' + '; '.join(notes) if notes else ''}")
        every_total += row["projected_seconds"]
        if row["library_changed"] and not row["verified_for_this_library"]:
            changed_total += row["projected_seconds"]
    print(f"Projected computing: {duration_text(changed_total)} ({changed_total:.0f} s) for the records whose "
          f"mcmc_lib changed; {duration_text(every_total)} ({every_total:.0f} s) were every record changed.")


def verify_stores(stems, book_dir: Path, out_dir: Path, profiles, max_seconds: float, skip=()) -> int:
    """``python -m mcmc_lib.store --verify-code``: execute chapters at the default profile with
    ``MCMC_BOOK_STORE=verify`` (each stored record of ``profiles`` whose code changed gets a sample of its
    units rerun: ``verify_record``), and list what each record's verification said. Exit status 0 when
    every record is current or verified, 1 when some is not (a difference, a refusal, a skip), 2 when a
    chapter stopped early. ``skip``: experiments left alone (their records are about to be recomputed)."""
    stems = require_sequence(stems, "stems", of=str, what="chapter stems (str)")
    skip = require_sequence(skip, "skip", of=str, what="experiment names (str)")
    book_dir, out_dir = require_path(book_dir, "book_dir"), require_path(out_dir, "out_dir")
    profiles, max_seconds = _stored_profiles(profiles, "profiles"), _max_seconds(max_seconds)
    os.environ.update({"MCMC_BOOK_PROFILE": "default", STORE_ENV: "verify",
                       VERIFY_PROFILES_ENV: ",".join(profiles), VERIFY_MAX_SECONDS_ENV: repr(float(max_seconds)),
                       VERIFY_SKIP_ENV: ",".join(skip)})
    portable.apply()
    statuses, failed = Counter(), []
    for stem in stems:
        start = time.perf_counter()
        print(f"[{time.strftime('%H:%M:%S')}] {stem}: verifying its stored records", flush=True)
        ran = execute_chapter(book_dir / f"{stem}.md", out_dir)
        lines = checked_lines(out_dir / f"{stem}.ipynb", VERIFY_PREFIX)
        failed += [] if ran else [stem]
        for line in lines:
            statuses[line.removeprefix(VERIFY_PREFIX).split(": ", 2)[1]] += 1
            print(f"  {line.removeprefix(VERIFY_PREFIX).strip()}", flush=True)
        print(f"{stem}: {len(lines)} records after {duration_text(time.perf_counter() - start)}"
              + ("" if ran else " (the chapter stopped early: a cell failed, see above)"), flush=True)
    print("Records: " + (", ".join(f"{count} {status}" for status, count in sorted(statuses.items())) or "none"))
    return 2 if failed else 0 if set(statuses) <= {"current", "verified"} else 1


PLAN_KEYS = ("record", "units", "sample", "projected_seconds", "library_changed", "verified_for_this_library",
             "floating_point")


def _stored_profiles(profiles, name: str) -> list:
    """A list of stored profiles (not one profile's name, which would be read one letter at a time)."""
    profiles = require_sequence(profiles, name, of=str, what=f"stored profiles ({', '.join(STORED_PROFILES)})")
    unknown = [profile for profile in profiles if profile not in STORED_PROFILES]
    if unknown:
        raise ValueError(f"{name} must name stored profiles ({', '.join(STORED_PROFILES)}), got {unknown}")
    return profiles


def _max_seconds(value) -> float:
    """A limit in seconds: a number >= 0 (inf for none)."""
    seconds = require_number(value, "max_seconds", finite=False)
    if not seconds >= 0:
        raise ValueError(f"max_seconds must be a number of seconds >= 0, got {value!r}")
    return seconds


def unit_signature(function: str, params, seed) -> str:
    """A unit as a comparable string: its function's name, its encoded parameters and its seed (None
    groups a unit's replicates together, as benchmarks/paper_pilot.py does)."""
    require_str(function, "function")
    if seed is not None:
        unit_runner.canonical_seed(seed)
    return json.dumps([function, unit_runner.encode(params, "params"), seed], sort_keys=True)


def _same_units(record: dict, units) -> bool:
    """Whether a stored record holds exactly ``units``, in order."""
    stored = [unit_signature(row["function"], row["params"], row["seed"]) for row in record["units"]]
    return stored == [unit_signature(unit_runner.function_name(u.fn), u.params, u.seed) for u in units]


def chapter_sizes(chapter: str, names, sizes: dict, store_dir=None) -> tuple[dict, str]:
    """The sizes a chapter runs at, and the profile whose scale they are: at a profile that shows the
    store (``use_store``), the sizes of the chapter's stored paper-profile run when every experiment in
    ``names`` is stored and they agree on every size they share (each may store only the sizes it
    uses; the others keep their values from ``sizes``); otherwise ``sizes`` and the active profile.
    ``Experiments`` does the same and keeps the records it read for the results."""
    experiments = Experiments(chapter, names, sizes, store_dir)
    return experiments.sizes, experiments.scale


def _adopted_sizes(records, sizes: dict, profile: str) -> tuple[dict, str]:
    """The stored runs' sizes over ``sizes`` when every record exists and they agree; else ``sizes``."""
    if any(record is None or not isinstance(record["sizes"], dict) for record in records):
        return sizes, profile
    stored = {}
    for record in records:                   # an experiment may store only the sizes it uses
        for key, value in record["sizes"].items():
            if key in stored and stored[key] != value:
                return sizes, profile
            stored[key] = value
    return {**sizes, **stored}, records[0]["provenance"]["profile"]


class Experiments:
    """A chapter's experiments at the largest scale available, its store read once.

    A chapter whose tables are built from its sizes (not from each result's ``params``) declares its
    stored experiments at the top and adopts their sizes; then each experiment's units are the stored
    ones and come from the store, and an experiment the store lacks, or holds at other sizes, runs
    instead of being paired with the wrong results::

        STORED = Experiments("gsm", ["neal", "table-german"], SIZES)
        SIZES, SCALE = STORED.sizes, STORED.scale      # the stored run's sizes when all are stored
        values = STORED.values("neal", units, "Neal's Gaussian")
        STORED.show_provenance("neal")                 # which scale, which commit, whether code changed

    At the paper profile every experiment runs and is written to the store; at ``smoke`` (unless
    ``MCMC_BOOK_STORE=on``) every experiment runs at the profile's own sizes.
    """

    def __init__(self, chapter: str, names, sizes: dict, store_dir=None):
        _name(chapter, "chapter")
        require_mapping(sizes, "sizes")
        if store_dir is not None:
            require_path(store_dir, "store_dir")
        if isinstance(names, str):
            raise ValueError(f"names must be a list of experiment names, got the string {names!r} "
                             f"(write [{names!r}] for one experiment)")
        self.chapter, self.names, self._store_dir = chapter, list(names), store_dir
        if not self.names:
            raise ValueError("names must list the chapter's stored experiments, got none")
        self._records = {}                   # name -> stored record (None: not stored), read once
        self.results = {}                    # name -> ExperimentResults of this build
        self.sizes, self.scale = self.stored_sizes(self.names, sizes)

    def _record(self, name: str):
        if name not in self._records:
            self._records[name] = read_store(self.chapter, name, self._store_dir)
        return self._records[name]

    def stored_sizes(self, names, sizes: dict) -> tuple[dict, str]:
        """(sizes, scale) adopted from the stored runs of ``names`` alone (see ``chapter_sizes``): for an
        experiment that may be stored before the others."""
        if not _shows_store(active_profile()):
            return sizes, active_profile()
        return _adopted_sizes([self._record(name) for name in names], sizes, active_profile())

    def run(self, name: str, units, label: str | None = None, same_units: bool = True, sizes=None,
            **run_options) -> ExperimentResults:
        """Experiment ``name``'s results at the largest scale available (``largest_scale``; its sizes are
        stored as ``sizes``, by default the chapter's), kept for ``show_provenance`` and ``wall_seconds``."""
        if label is not None:
            run_options["label"] = label
        units = list(units)
        if not units:
            raise ValueError(f"units must list experiment {name!r}'s units, got none")
        result = _largest_scale(self.chapter, name, units, self.sizes if sizes is None else sizes,
                                self._store_dir, same_units, lambda: self._record(name), run_options)
        self.results[name] = result
        return result

    def values(self, name: str, units, label: str | None = None, **run_options) -> list:
        """The unit results alone (``run(...).values``), in the order of ``units``."""
        return self.run(name, units, label, **run_options).values

    def wall_seconds(self, name: str) -> float:
        """Wall time of the run that produced ``name``'s results: the stored run's, or this build's when
        it computed every unit; when some came from the unit cache (a warm build, a resumed paper run),
        the time all of them took, at their recorded times, shared over the same workers."""
        record = self.results[name].record
        if record.get("n_from_cache") and "compute_wall_seconds" in record:
            return record["compute_wall_seconds"]
        return record["wall_seconds"]

    def require_one_machine(self, *names: str) -> None:
        """Refuse to compare the seconds of experiments timed on different machines. A ratio of times
        between two runs measures their machines as much as their samplers: this project's sittings ran on
        hosts whose CPU names are the same ("AMD EPYC") but whose speeds differ by up to about 2.6 times.
        A machine is the one that wrote the run, named by its platform string (which names the host), CPU
        and floating point; a run whose units were computed on several machines cannot be compared either.
        The remedy is to time them again in one sitting (``make paper RERUN_SHARED=... RERUN_BEFORE=...``)."""
        if len(names) < 2:
            raise ValueError(f"names must list at least two experiments run by this Experiments, got {list(names)}")
        missing = [name for name in names if name not in self.results]
        if missing:
            raise ValueError(f"names must be experiments run by this Experiments, got {missing} (not run yet)")
        machines = {name: timing_machine(self.results[name].record) for name in names}
        if len(set(machines.values())) > 1 or SEVERAL_MACHINES in machines.values():
            listed = "; ".join(f"{name}: {machine}" for name, machine in machines.items())
            joined = " ".join(f"{self.chapter}/{name}" for name in names)
            raise ValueError(f"experiments {list(names)} were timed on different machines ({listed}), so their "
                             f"seconds cannot be compared: time them again in one sitting, make paper "
                             f"RERUN_SHARED=\"{joined}\" RERUN_BEFORE=<now>")

    def stored_unit_seconds(self, name: str) -> list | None:
        """The compute time of each unit of ``name``'s stored paper-profile run (``unit_compute_seconds``),
        or None when it is not stored: what a page says its paper run cost, whatever this build ran."""
        record = self._record(name)
        return None if record is None else [unit_compute_seconds(row) for row in record["units"]]

    def provenance(self, *names: str) -> str:
        """One "Source" line per experiment, for the page (Markdown)."""
        missing = [name for name in names if name not in self.results]
        if missing or not names:
            raise ValueError(f"names must be experiments run by this Experiments, got {list(names)}"
                             f"{f' (not run: {missing})' if missing else ''}")
        return "\n\n".join(f"*Source{f' ({name})' if len(names) > 1 else ''}: {self.results[name].provenance}*"
                            for name in names)

    def show_provenance(self, *names: str) -> None:
        from IPython.display import Markdown, display
        display(Markdown(self.provenance(*names)))


SEVERAL_MACHINES = "several machines"      # a run whose units were computed on more than one


def timing_machine(provenance: dict) -> str:
    """The machine whose clock a run's times read: the platform, CPU and floating point of the machine that
    wrote it, or "several machines" when its units were computed on more than one (``unit_machines``)."""
    require_mapping(provenance, "provenance")
    writer = provenance.get("machine")
    if not isinstance(writer, dict) or "platform" not in writer or "cpu" not in writer:
        raise ValueError("provenance must hold the machine that wrote the run ('machine' with its 'platform' and "
                         f"'cpu'), got {writer!r}")
    if len(provenance.get("unit_machines") or {}) > 1:
        return SEVERAL_MACHINES
    return f"{writer['platform']}, {unit_runner.label_of(writer['cpu'], writer.get('floating_point'))}"


def _from_store(record, units, path, code=None) -> ExperimentResults:
    stored = record["provenance"]
    changed, since_run, verified = code_state(stored, units, code)
    rows = record["units"]
    return ExperimentResults([r["result"] for r in rows], [r["params"] for r in rows], [r["seed"] for r in rows],
                             record["sizes"], stored["profile"], "store", bool(changed),
                             _describe_store(stored, path, changed, since_run, verified), stored,
                             [r.get("finished") for r in rows], verified)


def duration_text(seconds: float) -> str:
    """A time for a reader: seconds below 90 s, minutes below 90 min, else hours."""
    seconds = require_number(seconds, "seconds")
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _commit(provenance) -> str:
    return provenance["commit"] + (" with uncommitted changes" if provenance.get("uncommitted_changes") else "")


def _units(n: int) -> str:
    return f"{n} unit" + ("" if n == 1 else "s")


def _relative(path: Path) -> str:
    """A stored file as ``<profile>/<chapter>/<name>.json``."""
    return "/".join(path.parts[-3:])


def _describe_store(stored, path, changed, since_run=(), verified=None) -> str:
    if verified is not None:                 # the code changed, and a sample rerun under it gave the stored results
        since = f"{' and '.join(since_run)} changed since; {verification_text(verified, stored['n_units'])}"
        if stored["profile"] != "paper":
            since += ", so this build takes them rather than recompute them"
    elif stored["profile"] != "paper":       # read only while unchanged (_current_record)
        since = "the units and their code are unchanged since, so this build takes them rather than recompute them"
    elif not changed:
        since = "the code is unchanged since"
    else:
        since = f"{' and '.join(changed)} changed since, so a rerun (make paper) may differ"
    computing = duration_text(stored.get("unit_cpu_seconds_total") or stored["unit_seconds_total"])
    return (f"{stored['profile'].capitalize()}-profile results from the committed store "
            f"({_relative(path)}: {_units(stored['n_units'])}, commit {_commit(stored)}, "
            f"{stored['date'][:10]}, {computing} of computing on "
            f"{stored['machine']['cores']} cores{_computed_elsewhere(stored)}{_shared_cores(stored)}"
            f"{_finish_times(stored)}); {since}.")


def verification_text(verified: dict, n_units: int) -> str:
    """A ``verified`` entry for a reader: how many units were rerun, under which commit, with what outcome."""
    require_mapping(verified, "verified")
    n_units = require_int(n_units, "n_units")
    missing = [key for key in ("units", "commit", "date") if key not in verified]
    if missing:
        raise ValueError(f"verified must be a 'verified' entry of a record's provenance (verify_record), with "
                         f"{missing}, got the keys {sorted(verified)}")
    rerun = len(verified["units"])
    return (f"{rerun} of its {_units(n_units)} rerun under commit {_commit(verified)} "
            f"({verified['date'][:10]}): identical results"
            + (" (times aside)" if verified.get("timings_aside") else ""))


def _finish_times(stored) -> str:
    """", units finished <first> to <last> UTC" when some unit's finish time is recorded (``finish_span``):
    whether the units of a timed comparison were measured in one sitting."""
    span = stored.get("units_finished") or {}
    if not span.get("first"):
        return ""
    first, last = (_instant(span[end]).strftime("%Y-%m-%d %H:%M") for end in ("first", "last"))
    last = last[11:] if last[:10] == first[:10] else last
    missing = span.get("not_recorded")
    return (f", units finished {first} to {last} UTC"
            + (f" ({missing} carried from runs that did not record the time)" if missing else ""))


def _shared_cores(stored) -> str:
    """", N units without a core to themselves" when a stored run says so (``units_sharing_a_core``)."""
    shared = stored.get("n_units_sharing_a_core")
    return (f", {shared} of them without a core to themselves (wall time over {SHARED_CORE_RATIO:g} x CPU "
            "time), which can make their measured times read high" if shared else "")


def _computed_elsewhere(stored) -> str:
    """", units computed on ..." when not every unit was computed by the machine that wrote the file."""
    machines = stored.get("unit_machines") or {}
    writer = unit_runner.label_of(stored["machine"]["cpu"], stored["machine"].get("floating_point"))
    if not machines or set(machines) == {writer}:
        return ""
    return ", units computed on " + "; ".join(f"{label} ({count})" for label, count in machines.items())


def _describe_run(provenance, path, written, outdated=None) -> str:
    profile = provenance["profile"]
    head = (f"{profile.capitalize()}-profile results computed in this {'run' if written else 'build'} "
            f"({_units(provenance['n_units'])}, commit {_commit(provenance)})")
    if outdated is not None:
        head += (f"; the committed ones ({_relative(outdated)}) are of other units or other code "
                 "(make default-store refreshes them)")
        if not portable.is_portable():
            head += (" (this kernel computes with its CPU's own kernels, whose last bits can make the units "
                     "differ: start Jupyter through make, which sets the portable ones of mcmc_lib/portable.py)")
    if written is not None:
        return f"{head}, written to the store ({_relative(written)})."
    if path.exists():
        return f"{head}; the stored paper-profile results are not used at the {profile} profile."
    return f"{head}; no paper-profile results are stored for this experiment yet."


# ---------------------------------------------------------------- make paper


def chapters_using_store(book_dir: Path) -> list[str]:
    """Chapters whose source calls Experiments or largest_scale (and so fill the store at the paper profile)."""
    book_dir = require_path(book_dir, "book_dir")
    calls = re.compile(r"\b(Experiments|largest_scale)\(")
    return [p.stem for p in sorted(book_dir.glob("*.md")) if calls.search(p.read_text())]


def execute_chapter(chapter: Path, out_dir: Path) -> bool:
    """Execute a chapter (jupytext notebook) in book/ with nbclient; the executed notebook goes to
    ``out_dir``. True if every cell ran."""
    chapter, out_dir = require_path(chapter, "chapter"), require_path(out_dir, "out_dir")
    import jupytext
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    notebook = jupytext.read(chapter)
    started = {}

    def cell_started(cell, cell_index, **_):
        started[cell_index] = time.perf_counter()

    def cell_done(cell, cell_index, **_):
        seconds = time.perf_counter() - started.get(cell_index, time.perf_counter())
        if seconds >= 10:                         # long cells only: a heartbeat, not a log of every cell
            print(f"[{time.strftime('%H:%M:%S')}] {chapter.stem}: cell {cell_index + 1}/{len(notebook.cells)} "
                  f"took {duration_text(seconds)}", flush=True)

    client = NotebookClient(notebook, timeout=None, kernel_name="python3",
                            resources={"metadata": {"path": str(chapter.parent)}},
                            on_cell_start=cell_started, on_cell_executed=cell_done)
    try:
        client.execute()
        return True
    except CellExecutionError as error:
        print(f"{chapter.stem}: a cell failed (finished units stay cached; rerun to resume):\n{error}",
              file=sys.stderr)
        return False
    finally:
        out_dir.mkdir(parents=True, exist_ok=True)
        nbformat.write(notebook, out_dir / f"{chapter.stem}.ipynb")


def check_stores(stems, book_dir: Path, out_dir: Path) -> int:
    """``python -m mcmc_lib.store --check`` (``make store-check``): execute chapters at the default
    profile with ``MCMC_BOOK_STORE=check``, which runs no unit, and list the experiments a build would
    compute rather than take from the committed stores, each with the reason (the first parameter
    that differs, or the code that changed). Exit status 0 when there are none, 1 when there are, 2
    when a chapter stopped early (a cell failed: a fault of its own, not of the stores)."""
    stems = require_sequence(stems, "stems", of=str, what="chapter stems")
    book_dir, out_dir = require_path(book_dir, "book_dir"), require_path(out_dir, "out_dir")
    os.environ.update({"MCMC_BOOK_PROFILE": "default", STORE_ENV: "check"})
    portable.apply()
    found, failed = [], []
    for stem in stems:
        ran = execute_chapter(book_dir / f"{stem}.md", out_dir)
        lines = checked_lines(out_dir / f"{stem}.ipynb")
        found += lines
        failed += [] if ran else [stem]
        print(f"{stem}: " + ("every experiment from the stores" if not lines else f"{len(lines)} computed")
              + ("" if ran else " (the chapter stopped early: a cell failed, see above)"), flush=True)
        for line in lines:
            print(f"  {line.removeprefix(CHECK_PREFIX).strip()}", flush=True)
    return 2 if failed else 1 if found else 0


def checked_lines(notebook_path: Path, prefix: str = CHECK_PREFIX) -> list[str]:
    """The store-check lines (or others of ``prefix``) an executed notebook printed."""
    import nbformat

    notebook_path = require_path(notebook_path, "notebook_path")
    require_str(prefix, "prefix")
    if not notebook_path.exists():
        return []
    notebook = nbformat.read(notebook_path, as_version=4)
    return [line for cell in notebook.cells if cell.cell_type == "code" for output in cell.get("outputs", [])
            if output.get("output_type") == "stream" for line in output.get("text", "").splitlines()
            if line.startswith(prefix)]


# ---------------------------------------------------------------- what a run costs, and would on more cores


def projected_wall_seconds(unit_seconds, workers: int) -> float:
    """The wall time of independent units on ``workers`` processes, each unit (longest first) given to
    the least-loaded worker: never less than the longest unit, nor than the total over ``workers``."""
    unit_seconds = _times(unit_seconds, "unit_seconds")
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers must be a positive integer, got {workers!r}")
    loads = [0.0] * workers
    for seconds in sorted(unit_seconds, reverse=True):
        heapq.heapreplace(loads, loads[0] + float(seconds))
    return max(loads)


WORKER_COUNTS = (2, 16, 64)


def cost_rows(sets: dict) -> list[dict]:
    """One row per chapter from {chapter: [unit seconds of each set run one after another]}: units,
    computing time, the longest unit, and the wall time projected on 2, 16 and 64 workers (each set
    must finish before the next starts, as in a chapter)."""
    for chapter, chapter_sets in require_mapping(sets, "sets").items():
        if not isinstance(chapter_sets, (list, tuple)) or not all(isinstance(u, (list, tuple)) for u in chapter_sets):
            raise ValueError(f"sets[{chapter!r}] must be a list of sets of unit seconds (a list of lists), got "
                             f"{chapter_sets!r}"[:200])
    rows = []
    for chapter, chapter_sets in sets.items():
        flat = [s for unit_set in chapter_sets for s in unit_set]
        rows.append({"chapter": chapter, "units": len(flat), "unit_hours": sum(flat) / 3600,
                     "longest_min": max(flat, default=0) / 60,
                     **{f"wall_{w}_hours": sum(projected_wall_seconds(u, w) for u in chapter_sets) / 3600
                        for w in WORKER_COUNTS}})
    return rows


def unit_compute_seconds(entry: dict) -> float:
    """A unit's compute time: its CPU time where recorded (wall time on a busy machine counts waiting)."""
    require_mapping(entry, "entry")
    if "seconds" not in entry:
        raise ValueError(f"entry must be a unit's record with its 'seconds', got the keys {sorted(entry)}")
    cpu = entry.get("cpu_seconds")
    return float(entry["seconds"] if cpu is None else cpu)


def store_costs(store_dir=None, profile: str = "paper") -> dict:
    """{chapter: [unit seconds per stored experiment]} from the committed store of ``profile``."""
    sets = {}
    for path in sorted(store_directory(store_dir, profile).glob("*/*.json")):
        record = json.loads(path.read_text())
        sets.setdefault(path.parent.name, []).append([unit_compute_seconds(row) for row in record["units"]])
    return sets


def cache_costs(book_dir: Path, cache=None) -> dict:
    """{chapter: [unit seconds per unit function]} from the unit cache (whatever profiles filled it),
    a unit function's chapter being the page that defines it."""
    book_dir = require_path(book_dir, "book_dir")
    import pickle
    directory = unit_runner.cache_directory(cache)
    defined = {}
    for page in sorted(book_dir.glob("*.md")):
        for name in re.findall(r"^def (\w+)\(", page.read_text(), flags=re.M):
            defined.setdefault(name, page.stem)
    sets = {}
    for folder in sorted(directory.glob("*")) if directory is not None and directory.exists() else []:
        chapter = defined.get(folder.name.rsplit(".", 1)[-1], "(library)")
        seconds = []
        for entry in folder.glob("*.pkl"):
            with open(entry, "rb") as file:
                seconds.append(unit_compute_seconds(pickle.load(file)))
        sets.setdefault(chapter, []).append(seconds)
    return sets


def checkpoint_costs(store_dir=None) -> dict:
    """{chapter: [unit seconds per unit function]} of the units in the chapters' checkpoints: what their
    unfinished paper runs have done so far."""
    sets = {}
    for folder in sorted(store_directory(store_dir).glob("*/checkpoint/*")):
        seconds = [unit_compute_seconds(json.loads(entry.read_text())) for entry in sorted(folder.glob("*.json"))]
        sets.setdefault(folder.parent.parent.name, []).append(seconds)
    return sets


def print_costs(sets: dict, title: str) -> None:
    require_str(title, "title")
    require_mapping(sets, "sets")
    print(title)
    print(f"{'chapter':<12}{'units':>7}{'unit-hours':>12}{'longest':>10}" +
          "".join(f"{f'{w} workers':>12}" for w in WORKER_COUNTS))
    for row in cost_rows(sets):
        print(f"{row['chapter']:<12}{row['units']:>7}{row['unit_hours']:>12.2f}{row['longest_min']:>8.1f} m" +
              "".join(f"{row[f'wall_{w}_hours']:>10.2f} h" for w in WORKER_COUNTS))


def main(argv=None) -> int:
    """``python -m mcmc_lib.store [chapter ...]``: execute chapters at the paper profile (``--profile
    default``: at the default profile, rewriting the default store); ``--costs store|cache|checkpoint``:
    what the stored runs of that profile (or the units in the cache, or those checkpointed by unfinished
    paper runs) cost, and would cost on 16 and 64 workers; ``--check``: which experiments a default build
    would compute rather than take from the stores, and why (no unit runs); ``--verify-code``: for each
    stored record whose code changed since its run, rerun a sample of its units under the current code
    and, when they give the stored results, record so in its provenance (``verify_record``; ``--profile``
    limits it to one store, ``--dry-run`` lists what it would rerun and its projected time)."""
    parser = argparse.ArgumentParser(prog="python -m mcmc_lib.store", description=main.__doc__)
    parser.add_argument("chapters", nargs="*", help="chapters to run (default: every chapter calling largest_scale)")
    parser.add_argument("--chapters", dest="chapter_list", default="",
                        help="the same, comma-separated (a,b)")
    parser.add_argument("--profile", choices=STORED_PROFILES, default=None,
                        help="the profile to run or cost (default paper); with --verify-code the store to verify "
                             "(default both)")
    parser.add_argument("--costs", choices=("store", "cache", "checkpoint"), help="report costs instead of running")
    parser.add_argument("--check", action="store_true",
                        help="run no unit: execute the chapters at the default profile and report each experiment "
                             "a build would compute rather than take from the stores, and why")
    parser.add_argument("--verify-code", action="store_true",
                        help="rerun a sample of the units of each stored record whose code changed (a unit per "
                             "function and per value of each string or boolean parameter, the cheapest of each) "
                             "and record in its provenance that they gave the stored results, if they did")
    parser.add_argument("--max-seconds", type=float, default=VERIFY_MAX_SECONDS,
                        help="with --verify-code: refuse a record whose sample is projected to take longer "
                             f"(default {VERIFY_MAX_SECONDS:.0f})")
    parser.add_argument("--skip", default="",
                        help="with --verify-code: experiments to leave alone, comma-separated (records about to "
                             "be recomputed, whose sample would be rerun for nothing)")
    parser.add_argument("--dry-run", action="store_true",
                        help="with --verify-code: list per record what it would rerun and the projected seconds "
                             "(from the stored unit times); runs nothing")
    if argv is not None:
        require_sequence(argv, "argv", of=str, what="command-line arguments (str)")
    options = parser.parse_args(sys.argv[1:] if argv is None else argv)
    options.chapters += [stem for stem in options.chapter_list.split(",") if stem.strip()]
    if (options.dry_run or options.skip or options.max_seconds != VERIFY_MAX_SECONDS) and not options.verify_code:
        parser.error("--dry-run, --skip and --max-seconds go with --verify-code")
    if options.max_seconds < 0:
        parser.error("--max-seconds must not be negative")
    root = unit_runner.repository_root()
    if options.verify_code:
        return _verify_command(options, root)
    options.profile = options.profile or "paper"
    book_dir, out_dir = root / "book", root / "_build" / options.profile
    if options.costs:
        costs, source = {"store": (lambda: store_costs(profile=options.profile),
                                   f"the committed {options.profile} store"),
                         "cache": (lambda: cache_costs(book_dir), "the unit cache"),
                         "checkpoint": (checkpoint_costs, "the checkpoints of unfinished paper runs")}[options.costs]
        sets = costs()
        print_costs(sets, f"Unit costs ({source}); wall times projected with each experiment's units shared "
                          "over the workers:")
        return 0
    stems = options.chapters or chapters_using_store(book_dir)
    if not stems:
        print("No chapter calls largest_scale yet; name chapters to run them anyway.", file=sys.stderr)
        return 1
    missing = [stem for stem in stems if not (book_dir / f"{stem}.md").exists()]
    if missing:
        print(f"No chapter {', '.join(missing)} in {book_dir}", file=sys.stderr)
        return 1
    if options.check:
        return check_stores(stems, book_dir, root / "_build" / "store-check")
    os.environ["MCMC_BOOK_PROFILE"] = options.profile     # the kernels inherit these three
    portable.apply()                                     # as make does, when run without it
    if options.profile != "paper":
        os.environ[STORE_ENV] = "refresh"
    failed = []
    for stem in stems:
        start = time.perf_counter()
        print(f"[{time.strftime('%H:%M:%S')}] {stem}: executing at the {options.profile} profile", flush=True)
        since = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
        if not execute_chapter(book_dir / f"{stem}.md", out_dir):
            failed.append(stem)
        for line in shared_core_warnings(stem, since, profile=options.profile):
            print(f"warning: {line}", file=sys.stderr, flush=True)
        print(f"[{time.strftime('%H:%M:%S')}] {stem}: {'failed' if stem in failed else 'done'} after "
              f"{duration_text(time.perf_counter() - start)}", flush=True)
    print(f"Stored results: {store_directory(profile=options.profile)}; executed notebooks: {out_dir}")
    if failed:
        print(f"Failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


def _verify_command(options, root: Path) -> int:
    """``main``'s --verify-code: the dry run from the stores, or the chapters executed to verify them."""
    profiles = [options.profile] if options.profile else list(STORED_PROFILES)
    stems = [stem.strip() for stem in options.chapters]
    if options.dry_run:
        if not portable.is_portable():
            print(f"Note: this process computes with {portable.describe()}; run it as make does (make verify-code "
                  "DRY_RUN=1) to see which records the portable kernels could verify.")
        print_verification_plan(verification_plan(profiles=profiles, chapters=stems), options.max_seconds)
        return 0
    book_dir = root / "book"
    stored = {path.parent.name for profile in profiles for path in store_directory(profile=profile).glob("*/*.json")}
    stems = stems or [stem for stem in chapters_using_store(book_dir) if stem in stored]
    missing = [stem for stem in stems if not (book_dir / f"{stem}.md").exists()]
    if missing or not stems:
        print(f"No chapter {', '.join(missing)} in {book_dir}" if missing else "No stored records to verify",
              file=sys.stderr)
        return 1
    skip = [name.strip() for name in options.skip.split(",") if name.strip()]
    return verify_stores(stems, book_dir, root / "_build" / "verify-code", profiles, options.max_seconds, skip)


if __name__ == "__main__":
    sys.exit(main())
