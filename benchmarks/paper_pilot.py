"""Measure a sample of a chapter's paper-profile units, for a run too long to make here.

mamba's paper run is hundreds of CPU-hours; what it would cost on more cores is projected from unit
times, and this measures some of them at the paper's scale on this machine. It executes the chapter at
``MCMC_BOOK_PROFILE=paper`` with the chapter's ``experiment`` replaced, so that each experiment is
    run whole          (``--run``: small ones that later cells need, e.g. a MAP fit),
    sampled            (``--sample``: the first unit of each distinct parameter set, i.e. one replicate
                        of each sampler, run on the local cores as a paper run would),
    or only counted    (every other experiment: its number of units, nothing run),
and the cell stops there: later cells that need the missing results fail, and execution goes on (so an
experiment whose unit list needs results that were not computed is not counted either: the JSON has no
entry for it). Nothing is written to the stores; finished units go to the unit cache, so a pilot stopped
part-way resumes. The JSON written to ``--out`` holds, per experiment, the number of units and each
sampled unit's seconds, CPU seconds and when it finished, with the machine, commit and date.

    python benchmarks/paper_pilot.py mamba --run pmf-map nn-map --sample pmf nn \\
        --like pmf:sghmc-cv=sghmc nn:sgld-cv=sgld nn:sgnht=sgld nn:sgnht-cv=sgld \\
        --out benchmarks/results/mamba_paper_pilot.json
    python benchmarks/paper_pilot.py --project benchmarks/results/mamba_paper_pilot.json [more pilots' JSON]
"""
import argparse
import datetime
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


class PilotStop(Exception):
    """Raised where the chapter would use an experiment's results that the pilot did not compute."""


def first_of_each(units, like=None) -> dict[int, int]:
    """{index of the first unit of each distinct (function, parameters): how many units share them}: one
    replicate of each sampler, and how many replicates it stands for. ``like`` ({sampler: sampler})
    lets one sampler's unit stand for another's too (a unit's ``name`` parameter is read through it)."""
    from mcmc_lib import store
    from mcmc_lib import units as unit_runner

    like = like or {}
    first, counts = {}, {}
    for i, unit in enumerate(units):
        params = dict(unit.params)
        if params.get("name") in like:
            params["name"] = like[params["name"]]
        key = store.unit_signature(unit_runner.function_name(unit.fn), params, seed=None)
        first.setdefault(key, i)
        counts[key] = counts.get(key, 0) + 1
    return {first[key]: counts[key] for key in first}


def sample_of(units, like=None, part=(1, 1)) -> dict[int, int]:
    """``first_of_each``, only the k-th of every n of them for ``part`` (k, n)."""
    k, n = part
    if not 1 <= k <= n:
        raise ValueError(f"part must be (k, n) with 1 <= k <= n, got {part!r}")
    groups = list(first_of_each(units, like).items())
    return dict(groups[k - 1::n])


def install(out_path: str, run_whole, sampled, cache, like=None, part=(1, 1)) -> None:
    """Replace ``Experiments.values`` (what a chapter's ``experiment`` is) by the pilot's; called in the
    chapter's kernel before its first cell. ``like``: {experiment: {sampler: sampler}} (``first_of_each``);
    ``part`` (k, n): sample only the k-th of every n parameter sets, so that n pilots share the work."""
    from mcmc_lib import store
    from mcmc_lib import units as unit_runner

    out = Path(out_path)
    report = json.loads(out.read_text()) if out.exists() else {"experiments": {}}
    report.update(pilot_provenance(), like=like or {}, part=list(part))

    def save():
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(report, indent=1) + "\n")

    def values(self, name, units, label=None, **_):
        units = list(units)
        entry = report["experiments"].setdefault(name, {})
        entry["n_units"] = len(units)
        if name not in run_whole and name not in sampled:
            entry["mode"] = "counted"
            save()
            raise PilotStop(f"{name}: counted ({len(units)} units), not run")
        chosen = (dict.fromkeys(range(len(units)), 1) if name in run_whole
                  else sample_of(units, (like or {}).get(name), part))
        results, stats = unit_runner.run_with_stats([units[i] for i in chosen], label=f"pilot {name}", cache=cache)
        entry["mode"] = "run" if name in run_whole else "sampled"
        entry["sampled"] = [{"index": i, "params": unit_runner.encode(units[i].params, "params"),
                             "seed": unit_runner.canonical_seed(units[i].seed), "seconds": stats.unit_seconds[k],
                             "cpu_seconds": stats.unit_cpu_seconds[k], "finished": stats.unit_finished[k],
                             "stands_for": chosen[i]}
                            for k, i in enumerate(chosen)]
        save()
        if name in run_whole:
            return results
        raise PilotStop(f"{name}: {len(chosen)} of {len(units)} units sampled")

    store.Experiments.values = values
    store.Experiments.wall_seconds = lambda self, name: float("nan")
    store.Experiments.show_provenance = lambda self, *names: None
    save()


def pilot_provenance() -> dict:
    from mcmc_lib import store

    commit, dirty = store.git_commit()
    return {"commit": commit, "uncommitted_changes": dirty, "machine": store.machine(),
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "profile": os.environ.get("MCMC_BOOK_PROFILE")}


def execute(chapter: Path, out: str, run_whole, sampled, cache, like=None, part=(1, 1), profile="paper") -> int:
    """Execute a chapter (book/<name>.md) at ``profile`` (the paper's, unless a smaller one is to be timed)
    with the pilot installed, going on past errors; returns how many cells stopped at an experiment the
    pilot did not compute."""
    import jupytext
    import nbformat
    from nbclient import NotebookClient

    from mcmc_lib import portable

    notebook = jupytext.read(chapter, fmt="md:myst")
    setup = (f"import sys; sys.path.insert(0, {str(ROOT / 'benchmarks')!r}); import paper_pilot\n"
             f"paper_pilot.install({str(Path(out).resolve())!r}, {sorted(run_whole)!r}, {sorted(sampled)!r}, "
             f"{cache!r}, {like or {}!r}, {tuple(part)!r})")
    notebook.cells.insert(0, nbformat.v4.new_code_cell(setup))
    client = NotebookClient(notebook, timeout=None, kernel_name="python3", allow_errors=True,
                            resources={"metadata": {"path": str(chapter.parent)}})
    saved = dict(os.environ)             # the kernel inherits these; this process keeps its own
    try:
        os.environ["MCMC_BOOK_PROFILE"] = profile
        portable.apply()                 # the paper runs' floating point, BLAS on one thread (as make does)
        client.execute()
    finally:
        os.environ.clear()
        os.environ.update(saved)
    stopped = [i for i, cell in enumerate(notebook.cells) if cell.cell_type == "code"
               and any(o.get("output_type") == "error" and o.get("ename") == "PilotStop" for o in cell.outputs)]
    print(f"{chapter.stem}: executed; {len(stopped)} cells stopped at an experiment the pilot did not compute")
    return len(stopped)


def projection(report: dict) -> list[dict]:
    """Per experiment of a pilot's report: its units, and for the timed ones each sampled unit's CPU time
    standing for the units with its parameters: CPU-hours of all of them, the longest, and the wall time
    on 2, 16 and 64 workers (``mcmc_lib.store.projected_wall_seconds``)."""
    from mcmc_lib import store

    rows = []
    for name, entry in report["experiments"].items():
        row = {"experiment": name, "units": entry["n_units"], "mode": entry["mode"]}
        sampled = entry.get("sampled", [])
        if sampled:
            seconds = [t for s in sampled for t in [store.unit_compute_seconds(s)] * s["stands_for"]]
            row.update(sampled=len(sampled), unit_minutes=[store.unit_compute_seconds(s) / 60 for s in sampled],
                       cpu_hours=sum(seconds) / 3600, longest_minutes=max(seconds) / 60,
                       **{f"wall_{w}_hours": store.projected_wall_seconds(seconds, w) / 3600
                          for w in store.WORKER_COUNTS})
        rows.append(row)
    return rows


def merged(paths) -> dict:
    """The reports of several pilots of one chapter as one: the sampled units of an experiment that
    several sampled (``--part``) together; else a later pilot's entry replaces an earlier one's, except
    that one only counted does not replace one measured."""
    report = {"experiments": {}, "pilots": []}
    for path in paths:
        one = json.loads(Path(path).read_text())
        report["pilots"].append({key: value for key, value in one.items() if key != "experiments"})
        for name, entry in one["experiments"].items():
            known = report["experiments"].get(name)
            if known is not None and known["mode"] == entry["mode"] == "sampled":   # parts of one sample
                indices = {s["index"] for s in entry["sampled"]}
                entry = {**entry, "sampled": sorted([s for s in known["sampled"] if s["index"] not in indices]
                                                    + entry["sampled"], key=lambda s: s["index"])}
            if entry["mode"] != "counted" or known is None:
                report["experiments"][name] = entry
    return report


# What a chapter's paper run must cost (CPU-hours, measured by pilots at the paper profile): no unit
# longer than an hour on one core, named experiments within their share, the whole chapter within a day
# on 16 cores with room.
PAPER_TARGETS = {"mamba": {"unit": 1.0, "experiments": {"lr": 25.0}, "chapter": 70.0}}


def target_rows(report: dict, chapter: str) -> list[dict]:
    """``PAPER_TARGETS[chapter]`` against a (merged) pilot report at the paper profile: per target its
    limit, the measured CPU-hours and the verdict "met", "missed" or "not measured" (with what is missing).
    An experiment only counted leaves the chapter's total a lower bound: missed if that bound passes the
    limit, else not measured."""
    targets = PAPER_TARGETS[chapter]
    profiles = {pilot.get("profile") for pilot in report.get("pilots", [report])}
    if profiles != {"paper"}:
        raise ValueError(f"paper targets are for pilots at the paper profile, got profiles {sorted(map(str, profiles))}")
    rows = {row["experiment"]: row for row in projection(report)}
    untimed = sorted(name for name, row in rows.items() if "cpu_hours" not in row)
    timed = {name: row for name, row in rows.items() if "cpu_hours" in row}

    def verdict(value, limit, complete, missing):
        if value > limit:
            return "missed"
        return "met" if complete else f"not measured ({missing})"

    longest = max((row["longest_minutes"] / 60 for row in timed.values()), default=0.0)
    out = [{"target": "longest unit", "limit": targets["unit"], "cpu_hours": longest,
            "verdict": verdict(longest, targets["unit"], not untimed, "not timed: " + ", ".join(untimed))}]
    for name, limit in targets["experiments"].items():
        hours = timed[name]["cpu_hours"] if name in timed else 0.0
        out.append({"target": f"experiment {name}", "limit": limit, "cpu_hours": hours,
                    "verdict": verdict(hours, limit, name in timed, f"{name} not timed")})
    total = sum(row["cpu_hours"] for row in timed.values())
    out.append({"target": "chapter", "limit": targets["chapter"], "cpu_hours": total,
                "verdict": verdict(total, targets["chapter"], not untimed,
                                   "at least this; not timed: " + ", ".join(untimed))})
    return out


def print_targets(rows: list[dict], chapter: str) -> None:
    print(f"{chapter}: paper-run targets (CPU-hours)")
    for row in rows:
        print(f"  {row['target']:22s} limit {row['limit']:6.1f}  measured {row['cpu_hours']:7.2f}  {row['verdict']}")


def project(paths) -> None:
    """Print ``projection`` of the pilots' JSON files at ``paths`` (``merged``)."""
    report = merged(paths)
    for pilot in report["pilots"]:
        print(f"pilot of {pilot['commit']} on {pilot['machine']['cpu']} ({pilot['date']}), profile "
              f"{pilot['profile']}, samplers standing for others: {pilot.get('like') or 'none'}")
    rows = projection(report)
    for row in rows:
        if "cpu_hours" not in row:
            print(f"  {row['experiment']:14s} {row['units']:4d} units  {row['mode']}, not timed")
            continue
        minutes = row["unit_minutes"]
        print(f"  {row['experiment']:14s} {row['units']:4d} units  {row['mode']} ({row['sampled']}): "
              f"{min(minutes):.1f}-{max(minutes):.1f} CPU-min a unit, {row['cpu_hours']:.2f} CPU-h; wall "
              + ", ".join(f"{row[f'wall_{w}_hours']:.2f} h on {w}" for w in (2, 16, 64)))
    timed = [row for row in rows if "cpu_hours" in row]
    print(f"  timed experiments: {sum(row['units'] for row in timed)} units, "
          f"{sum(row['cpu_hours'] for row in timed):.1f} CPU-h")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("chapter", nargs="?")
    parser.add_argument("--run", nargs="*", default=[], help="experiments to run whole")
    parser.add_argument("--sample", nargs="*", default=[], help="experiments to sample (one unit per sampler)")
    parser.add_argument("--like", nargs="*", default=[], metavar="EXPERIMENT:SAMPLER=SAMPLER",
                        help="in a sampled experiment, let the second sampler's unit stand for the first's "
                             "too (nn:sgld-cv=sgld)")
    parser.add_argument("--part", default="1/1", metavar="K/N",
                        help="sample only the K-th of every N parameter sets (N pilots side by side)")
    parser.add_argument("--out", default=None, help="the pilot's JSON")
    parser.add_argument("--profile", default="paper", choices=("smoke", "default", "paper"),
                        help="the profile whose units are timed (default: paper)")
    parser.add_argument("--cache", default=None, help="unit cache directory (default: MCMC_BOOK_CACHE)")
    parser.add_argument("--project", nargs="+", metavar="JSON", help="print the projection from pilots' JSON")
    parser.add_argument("--targets", nargs="+", metavar="JSON",
                        help="check the chapter's PAPER_TARGETS against pilots' JSON (give the chapter too)")
    args = parser.parse_args()
    if args.project:
        project(args.project)
    elif args.targets:
        if args.chapter not in PAPER_TARGETS:
            parser.error(f"--targets needs a chapter with targets: {sorted(PAPER_TARGETS)}")
        print_targets(target_rows(merged(args.targets), args.chapter), args.chapter)
    elif not args.chapter or not args.out:
        parser.error("give a chapter and --out (or --project JSON)")
    else:
        like = {}
        for entry in args.like:
            experiment, _, pair = entry.partition(":")
            sampler, _, standing_in = pair.partition("=")
            if not (experiment and sampler and standing_in):
                parser.error(f"--like takes EXPERIMENT:SAMPLER=SAMPLER, got {entry!r}")
            like.setdefault(experiment, {})[sampler] = standing_in
        k, _, n = args.part.partition("/")
        if not (k.isdigit() and n.isdigit() and 1 <= int(k) <= int(n)):
            parser.error(f"--part takes K/N with 1 <= K <= N, got {args.part!r}")
        execute(ROOT / "book" / f"{args.chapter}.md", args.out, set(args.run), set(args.sample), args.cache, like,
                (int(k), int(n)), args.profile)


if __name__ == "__main__":
    main()
