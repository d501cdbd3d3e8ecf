"""Claims: what each paper states, the rule that decides it, the reproduced value with its interval, and
one of four outcomes. Every chapter records its paper's headline claims here; ``book/scoreboard.md``
gathers them from the same build.

A claim is made in two steps, so that its decision rule is fixed before the experiment runs::

    claims = ClaimsRegistry("gsm")
    claims.declare("beta-0.25", statement="gadRWM learns beta near 7.4 for alpha* = 0.25",
                   source="Sec. 4.1, Fig. 1", published="7.4",
                   rule=Rule.within("learned beta", 6.4, 8.4, why="..."), section="sec-gsm-beta")
    results, seeds = replicate(learn_beta, 10, seed=[SEED, 1], alpha=0.25)   # R independent units
    claims.decide("beta-0.25", Estimate.from_replicates([r["beta"] for r in results], seeds))

``decide`` applies the rule to the interval (never to the point estimate alone):

- reproduced: the interval lies on the paper's side of the threshold;
- not reproduced: it lies on the other side (the chapter must give the cause it found, or "none found");
- inconclusive: it straddles the threshold (the record says how many replicates would decide it);
- not run here: ``claims.not_run(...)`` with what is missing and what it would cost.

Claims recorded with the old ``add(id, statement, published, reproduced, holds)`` still render (as
"old form") until their chapter migrates.
"""
from __future__ import annotations

import html
import json
import math
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
from scipy import stats

from .profiles import PROFILES, active_profile

REPO_ROOT = Path(__file__).resolve().parent.parent
CLAIMS_DIR = REPO_ROOT / "_build" / "claims"

REPRODUCED = "reproduced"
NOT_REPRODUCED = "not reproduced"
INCONCLUSIVE = "inconclusive"
NOT_RUN = "not run here"
OUTCOMES = (REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE, NOT_RUN)
# Claims still in the old form (a bare holds / fails from one run); shown apart until migrated.
LEGACY_HOLDS = "old form: holds"
LEGACY_FAILS = "old form: fails"
ALL_OUTCOMES = OUTCOMES + (LEGACY_HOLDS, LEGACY_FAILS)


def _require_text(value, name: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{name} must be a non-empty string, got {value!r}")
    return value.strip()


# --------------------------------------------------------------------------------------------------
# The reproduced value: an estimate with an interval from independent replicates
# --------------------------------------------------------------------------------------------------

@dataclass
class Estimate:
    """A reproduced value with a two-sided interval (``level``, 95% by default) and the replicates it came from."""
    value: float
    low: float
    high: float
    n_replicates: int
    level: float = 0.95
    method: str = ""
    replicates: list = field(default_factory=list)
    seeds: list = field(default_factory=list)
    spread: float = float("nan")     # sd of one replicate, for the replicates an inconclusive claim needs

    def __post_init__(self):
        for name in ("value", "low", "high"):
            setattr(self, name, float(getattr(self, name)))
        if not (self.low <= self.value <= self.high) and not any(map(math.isnan, (self.low, self.value, self.high))):
            raise ValueError(f"the interval [{self.low}, {self.high}] must contain the value {self.value}")
        if not 0 < self.level < 1:
            raise ValueError(f"level must lie in (0, 1), got {self.level!r}")

    @classmethod
    def from_replicates(cls, values, seeds=None, level: float = 0.95, log_scale: bool = False) -> "Estimate":
        """Mean and Student-t interval over R >= 2 independent replicates.

        ``log_scale=True`` averages log(values) and maps the interval back (a geometric mean), which
        suits ratios such as "1.25x faster": their spread is multiplicative.
        """
        values = np.asarray(values, dtype=float).ravel()
        if values.size < 2:
            raise ValueError(f"values must hold at least 2 replicates for an interval, got {values.size}")
        if not np.all(np.isfinite(values)):
            raise ValueError(f"values must be finite, got {values.tolist()}")
        if log_scale and np.any(values <= 0):
            raise ValueError("values must be positive with log_scale=True")
        work = np.log(values) if log_scale else values
        n = work.size
        mean, sd = float(work.mean()), float(work.std(ddof=1))
        half = float(stats.t.ppf(0.5 + level / 2, n - 1)) * sd / math.sqrt(n)
        low, high = mean - half, mean + half
        if log_scale:
            mean, low, high = math.exp(mean), math.exp(low), math.exp(high)
        method = (f"{'geometric ' if log_scale else ''}mean of {n} independent replicates, "
                  f"{100 * level:.0f}% Student-t interval")
        return cls(mean, low, high, n, level, method, values.tolist(),
                   [] if seeds is None else [_plain(s) for s in seeds], sd)

    @classmethod
    def from_interval(cls, value, low, high, n_replicates: int, method: str, level: float = 0.95,
                      replicates=(), seeds=()) -> "Estimate":
        """An interval computed another way (a binomial interval, a delta method); ``method`` says how."""
        if int(n_replicates) < 1:
            raise ValueError(f"n_replicates must be at least 1, got {n_replicates!r}")
        return cls(value, low, high, int(n_replicates), level, _require_text(method, "method"),
                   [float(v) for v in replicates], [_plain(s) for s in seeds])

    @classmethod
    def win_fraction(cls, winners, claimed: str, seeds=None, level: float = 0.95) -> "Estimate":
        """The fraction of replicates in which ``claimed`` ranked first, with a Wilson score interval."""
        winners = [str(w) for w in winners]
        if not winners:
            raise ValueError("winners must name the winner of at least one replicate")
        n, k = len(winners), sum(w == claimed for w in winners)
        z = float(stats.norm.ppf(0.5 + level / 2))
        p = k / n
        centre = (p + z * z / (2 * n)) / (1 + z * z / n)
        half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
        return cls(p, min(p, centre - half), max(p, centre + half), n, level,
                   f"fraction of {n} replicates won by {claimed}, Wilson score interval",
                   [float(w == claimed) for w in winners], [] if seeds is None else [_plain(s) for s in seeds])

    def text(self, digits: int = 3) -> str:
        fmt = _number_format(digits)
        return f"{fmt(self.value)} [{fmt(self.low)}, {fmt(self.high)}]"


def _plain(seed):
    """A seed as JSON: an int or a list of ints."""
    if isinstance(seed, (list, tuple, np.ndarray)):
        return [int(s) for s in seed]
    return int(seed)


def _number_format(digits):
    def fmt(x):
        x = float(x)
        if math.isnan(x):
            return "nan"
        if math.isinf(x):
            return "inf" if x > 0 else "-inf"
        return f"{x:.{digits}g}"
    return fmt


def replicate(experiment, n_replicates: int, seed, label: str | None = None, **params):
    """Run ``experiment(seed=[*seed, r], **params)`` for r = 0, ..., R-1: R independent replicates as
    units of ``mcmc_lib.units`` (in parallel, cached, resumable). Returns ``(results, seeds)``, results in
    replicate order, ready for ``Estimate.from_replicates([f(res) for res in results], seeds=seeds)``."""
    from .units import Unit, run_units
    if isinstance(n_replicates, bool) or not isinstance(n_replicates, (int, np.integer)) or n_replicates < 1:
        raise ValueError(f"n_replicates must be a positive int, got {n_replicates!r}")
    base = [int(s) for s in seed] if isinstance(seed, (list, tuple)) else [int(seed)]
    seeds = [base + [r] for r in range(int(n_replicates))]
    results = run_units([Unit(experiment, params, s) for s in seeds], label=label)
    return results, seeds


# --------------------------------------------------------------------------------------------------
# The decision rule, fixed before the run
# --------------------------------------------------------------------------------------------------

@dataclass
class Rule:
    """How a claim is decided: a quantity, a threshold taken from the paper, and the side the paper is on.

    kind ``greater``: the paper's side is quantity > threshold; ``less``: quantity < threshold;
    ``within``: low <= quantity <= high (a band the paper states, e.g. its own spread).
    """
    kind: str
    quantity: str
    threshold: float = float("nan")
    low: float = float("nan")
    high: float = float("nan")
    why: str = ""            # where the threshold comes from in the paper

    @classmethod
    def greater(cls, quantity: str, threshold: float, why: str) -> "Rule":
        return cls("greater", _require_text(quantity, "quantity"), _finite(threshold, "threshold"),
                   why=_require_text(why, "why"))

    @classmethod
    def less(cls, quantity: str, threshold: float, why: str) -> "Rule":
        return cls("less", _require_text(quantity, "quantity"), _finite(threshold, "threshold"),
                   why=_require_text(why, "why"))

    @classmethod
    def within(cls, quantity: str, low: float, high: float, why: str) -> "Rule":
        low, high = _finite(low, "low"), _finite(high, "high")
        if not low < high:
            raise ValueError(f"low must be below high, got [{low}, {high}]")
        return cls("within", _require_text(quantity, "quantity"), low=low, high=high, why=_require_text(why, "why"))

    def text(self) -> str:
        if self.kind == "within":
            side = f"{self.quantity} in [{self.low:g}, {self.high:g}]"
        else:
            side = f"{self.quantity} {'>' if self.kind == 'greater' else '<'} {self.threshold:g}"
        return f"{side} ({self.why})"

    def decide(self, estimate: Estimate) -> str:
        """The outcome for an interval: on the paper's side, on the other side, or straddling."""
        low, high = estimate.low, estimate.high
        if math.isnan(low) or math.isnan(high):
            return INCONCLUSIVE
        if self.kind == "greater":
            inside, outside = low > self.threshold, high < self.threshold
        elif self.kind == "less":
            inside, outside = high < self.threshold, low > self.threshold
        elif self.kind == "within":
            inside = self.low <= low and high <= self.high
            outside = high < self.low or low > self.high
        else:
            raise ValueError(f"kind must be 'greater', 'less' or 'within', got {self.kind!r}")
        return REPRODUCED if inside else NOT_REPRODUCED if outside else INCONCLUSIVE

    def replicates_to_decide(self, estimate: Estimate, rule_at=None) -> int | None:
        """How many replicates would make the interval clear the nearest threshold if the mean and the spread
        of one replicate stayed as observed: the smallest n whose Student-t half-width, t(n - 1) sd / sqrt(n),
        is below the gap (on the log scale for a geometric mean). None when the spread is unknown, the mean
        sits on the threshold, or a geometric mean faces a threshold <= 0.

        ``rule_at``: for a rule whose threshold moves with the number of replicates (a band of joint
        standard errors of ours and the paper's narrows as ours grow), n -> the rule as declared for n
        replicates; the count then lets the band move with n as well as the interval (None if no n up to
        ``MAX_REPLICATES_TO_DECIDE`` would do)."""
        sd = estimate.spread
        if not math.isfinite(sd) or sd <= 0:
            return None
        quantile = 0.5 + estimate.level / 2
        first = max(estimate.n_replicates + 1, 2)
        if rule_at is not None:
            return _first_deciding_count(estimate, rule_at, first, quantile)
        gap = self.gap(estimate)
        if gap is None:
            return None
        # t > z, so the normal approximation (z sd / gap)^2 is a lower bound: step up from it.
        n = max(first, math.ceil((stats.norm.ppf(quantile) * sd / gap) ** 2))
        while stats.t.ppf(quantile, n - 1) * sd / math.sqrt(n) >= gap:
            n += 1
        return n

    def gap(self, estimate: Estimate) -> float | None:
        """Distance from the estimate's value to the rule's nearest threshold, on the log scale for a
        geometric mean; None where it is zero or undefined (a geometric mean against a threshold <= 0)."""
        edges = [self.threshold] if self.kind != "within" else [self.low, self.high]
        value = estimate.value
        if estimate.method.startswith("geometric"):
            if value <= 0 or min(edges) <= 0:
                return None
            value, edges = math.log(value), [math.log(edge) for edge in edges]
        gap = min(abs(value - edge) for edge in edges)
        return gap if gap > 0 else None


MAX_REPLICATES_TO_DECIDE = 100_000


def _gap_at(rule_at, n: int, estimate: Estimate) -> float:
    rule = rule_at(n)
    if not isinstance(rule, Rule):
        raise ValueError(f"rule_at must return a mcmc_lib.claims.Rule for a number of replicates, got {rule!r} for {n}")
    gap = rule.gap(estimate)
    return np.nan if gap is None else gap


def _first_deciding_count(estimate: Estimate, rule_at, first: int, quantile: float) -> int | None:
    """The smallest n >= first at which the interval's half-width falls below the gap to the rule at n.
    A moving threshold need not make that condition monotone in n, so every n is checked, in blocks."""
    block = 1_000
    for start in range(first, MAX_REPLICATES_TO_DECIDE + 1, block):
        counts = np.arange(start, min(start + block, MAX_REPLICATES_TO_DECIDE + 1))
        gaps = np.array([_gap_at(rule_at, int(n), estimate) for n in counts])
        half_widths = stats.t.ppf(quantile, counts - 1) * estimate.spread / np.sqrt(counts)
        deciding = np.flatnonzero(half_widths < gaps)
        if deciding.size:
            return int(counts[deciding[0]])
    return None


def _finite(value, name):
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value!r}")
    return value


# --------------------------------------------------------------------------------------------------
# The claim record and the registry a chapter keeps
# --------------------------------------------------------------------------------------------------

@dataclass
class Claim:
    id: str
    statement: str           # the paper's statement, quoted or closely paraphrased
    source: str              # where it stands: "Table 3", "Fig. 2", "Sec. 4.2"
    published: str           # the published number(s), as text
    rule: str                # the decision rule, as text ("" for old-form claims)
    outcome: str = ""
    reproduced: str = ""     # ours, with its interval, as text
    estimate: dict | None = None
    note: str = ""           # the cause found, what would decide it, what is missing and its cost
    section: str = ""        # the label of the chapter section that decides it
    wins: dict = field(default_factory=dict)   # for ranking claims: replicates won by each competitor
    profile: str = ""
    rule_spec: dict | None = None
    short: str = ""          # the claim in a few words, for the verdict table at the top of its chapter

    @property
    def holds(self) -> bool:
        """Kept for old callers: a claim 'holds' when it was reproduced."""
        return self.outcome in (REPRODUCED, LEGACY_HOLDS)


class ClaimsRegistry:
    """Collects a chapter's claims; ``write()`` saves them, ``table()`` renders them."""

    def __init__(self, stem: str, directory: Path | None = None, profile: str | None = None):
        """``profile``: the profile whose scale the chapter's evidence has, shown with each claim: the
        active profile unless given (a chapter that shows stored paper-profile results passes "paper";
        ``decide(..., profile=...)`` sets it for one claim)."""
        if not stem or "/" in stem:
            raise ValueError(f"stem must be a chapter file stem such as 'gsm', got {stem!r}")
        if profile is not None and profile not in PROFILES:
            raise ValueError(f"profile must be one of {', '.join(PROFILES)}, got {profile!r}")
        self.stem = stem
        self.profile = profile
        self.directory = CLAIMS_DIR if directory is None else Path(directory)
        self.claims: list[Claim] = []
        self._declared: dict[str, tuple[Claim, Rule]] = {}

    # The new form -----------------------------------------------------------------------------------

    def declare(self, id: str, *, statement: str, source: str, published, rule: Rule, section: str = "",
                short: str = "") -> str:
        """Fix a claim and its decision rule before the experiment runs; returns the rule as Markdown
        (a chapter may show it above the experiment). ``short``: the claim in a few words, as the verdict
        table at the top of the chapter shows it (the statement, cut, when not given)."""
        self._check_new_id(id)
        if not isinstance(rule, Rule):
            raise ValueError(f"rule must be a mcmc_lib.claims.Rule (Rule.greater / less / within), got {rule!r}")
        claim = Claim(id, _require_text(statement, "statement"), _require_text(source, "source"),
                      _require_text(_text(published), "published"), rule.text(), section=section,
                      profile=self.scale(), rule_spec=asdict(rule), short=_short_text(short))
        self._declared[id] = (claim, rule)
        return f"**Claim `{id}`** ({source}): {statement} *Decided by:* {rule.text()}."

    def scale(self) -> str:
        """The profile recorded with a claim (see ``__init__``)."""
        return self.profile or active_profile()

    def decide(self, id: str, estimate: Estimate, *, note: str = "", cause: str = "", wins: dict | None = None,
               profile: str | None = None, planned: int | None = None, rule_at=None) -> str:
        """Apply the declared rule to ``estimate`` and record the claim; returns its outcome.

        A claim that is not reproduced needs ``cause`` (what was found, or "none found"; shown only for that
        outcome, so a chapter may pass it before it knows the outcome); ``note`` says
        anything else the reader needs (an inconclusive claim's note gets how many replicates would
        decide it, computed from the observed spread; once every planned replicate has run, as a new set of
        repeats). ``planned``: the number of replicates fixed before
        the run to decide the claim; with fewer, the claim stays inconclusive (deciding at whichever count
        first clears the threshold would bias the verdict) and its note says how many remain and what the
        rule reads on those run so far. ``rule_at``: for a rule whose threshold moves with the number of
        replicates, n -> the rule as it would be declared for n; the count of replicates that would decide an
        inconclusive claim then lets the threshold move too (``Rule.replicates_to_decide``)."""
        if id not in self._declared:
            raise ValueError(f"claim {id!r} was not declared: call declare() with its rule before the experiment")
        if not isinstance(estimate, Estimate):
            raise ValueError(f"estimate must be a mcmc_lib.claims.Estimate, got {type(estimate).__name__}")
        if profile is not None and profile not in PROFILES:
            raise ValueError(f"profile must be one of {', '.join(PROFILES)}, got {profile!r}")
        if planned is not None and (isinstance(planned, bool) or not isinstance(planned, int)
                                    or planned < estimate.n_replicates):
            raise ValueError(f"planned must be an int of at least the estimate's {estimate.n_replicates} "
                             f"replicates, got {planned!r}")
        if rule_at is not None and not callable(rule_at):
            raise ValueError(f"rule_at must be a function of the number of replicates returning a Rule, got {rule_at!r}")
        pending = planned is not None and estimate.n_replicates < planned     # replicates still to run
        claim, rule = self._declared[id]       # kept declared until recorded, so a refused call can be retried
        claim.profile = profile or claim.profile
        claim.outcome = rule.decide(estimate)
        if pending:
            note = (f"Decided at the {planned} replicates fixed before the run; {estimate.n_replicates} have run, "
                    f"the other {planned - estimate.n_replicates} decide it (on those run so far the rule reads "
                    f"{claim.outcome}). " + note.strip())
            claim.outcome = INCONCLUSIVE
        claim.estimate = asdict(estimate)
        claim.reproduced = f"{estimate.text()} (R = {estimate.n_replicates})"
        claim.wins = {str(k): int(v) for k, v in (wins or {}).items()}
        parts = [note.strip()] if note.strip() else []
        if claim.outcome == NOT_REPRODUCED:
            parts.append("Cause: " + _require_text(cause, "cause (for a claim that is not reproduced; "
                                                           "say 'none found' if none was)"))
        if claim.outcome == INCONCLUSIVE and not pending:
            needed = rule.replicates_to_decide(estimate, rule_at)
            moving = ", the band narrowing with them as the rule states" if rule_at is not None else ""
            decides = (f"About {needed} replicates at this spread would decide it{moving}" if needed else
                       "More replicates or longer runs would decide it")
            if planned is not None:
                # every planned replicate has run; growing the count until the interval clears the threshold
                # would bias the verdict, so what decides it is a new set with its count fixed in advance
                decides = (f"Still undecided at the {planned} replicates fixed before the run. {decides}, as a new "
                           "set of repeats whose count is fixed before they run")
            parts.append(decides + ".")
        claim.note = " ".join(parts)
        del self._declared[id]
        self.claims.append(claim)
        return claim.outcome

    def not_run(self, id: str, *, statement: str, source: str, published, missing: str, cost: str,
                section: str = "", short: str = "") -> None:
        """A claim this book cannot test here: what is missing and what running it would cost."""
        self._check_new_id(id)
        self._declared.pop(id, None)
        self.claims.append(Claim(id, _require_text(statement, "statement"), _require_text(source, "source"),
                                 _require_text(_text(published), "published"), "", NOT_RUN, "not run",
                                 note=f"Missing: {_require_text(missing, 'missing')} Cost: {_require_text(cost, 'cost')}",
                                 section=section, profile=self.scale(), short=_short_text(short)))

    # The old form, kept until every chapter migrates -------------------------------------------------

    def add(self, id: str, statement: str, published, reproduced, holds, note: str = "") -> None:
        """Old form (one run, holds or not): rendered as 'old form' on the scoreboard."""
        self._check_new_id(id)
        self.claims.append(Claim(id, statement, "", _text(published), "", LEGACY_HOLDS if holds else LEGACY_FAILS,
                                 _text(reproduced), note=note, profile=self.scale()))

    # Output ----------------------------------------------------------------------------------------

    def write(self) -> Path:
        if self._declared:
            raise ValueError(f"claims declared but never decided in chapter {self.stem!r}: {sorted(self._declared)}")
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.directory / f"{self.stem}.json"
        path.write_text(json.dumps({"chapter": self.stem, "claims": [asdict(c) for c in self.claims]}, indent=2))
        return path

    def table(self):
        """The chapter's claims in the scoreboard's compact form (HTML)."""
        from IPython.display import HTML
        return HTML(claims_html(self.stem, [asdict(c) for c in self.claims], link_prefix=""))

    def glue_verdicts(self) -> None:
        """Glue what the top of the chapter shows, computed at its end: ``verdict_counts`` (the outcome
        counts as a sentence fragment, "11 claims: 7 reproduced, ..."), ``verdicts`` (the compact verdict
        table, each claim linked to the section that decides it) and ``claims_full`` (the detailed
        table with statement, rule and note, for the audit page)."""
        from IPython.display import HTML
        from myst_nb import glue

        records = [asdict(c) for c in self.claims]
        glue("verdict_counts", counts_text(records), display=False)
        glue("verdicts", HTML(verdict_html(self.stem, records)), display=False)
        glue("claims_full", HTML(claims_html(self.stem, records, link_prefix="")), display=False)

    def _check_new_id(self, id):
        _require_text(id, "id")
        if any(c.id == id for c in self.claims) or id in self._declared:
            raise ValueError(f"id {id!r} is already recorded in chapter {self.stem!r}")


def _short_text(short) -> str:
    if not isinstance(short, str):
        raise ValueError(f"short must be a string (the claim in a few words), got {short!r}")
    if len(short) > 80:
        raise ValueError(f"short must be a few words (at most 80 characters), got {len(short)}: {short!r}")
    return short.strip()


def _text(value) -> str:
    if isinstance(value, (float, np.floating)):
        return _number_format(4)(value)
    return str(value)


# --------------------------------------------------------------------------------------------------
# Reading and rendering (chapters and the scoreboard)
# --------------------------------------------------------------------------------------------------

def load_claims(directory: Path | None = None) -> dict:
    """{chapter stem: [claim dicts]} from ``_build/claims/*.json``."""
    directory = CLAIMS_DIR if directory is None else Path(directory)
    return {data["chapter"]: data["claims"]
            for data in (json.loads(p.read_text()) for p in sorted(directory.glob("*.json")))}


def outcome_counts(claims_by_chapter: dict, order=None):
    """A DataFrame chapter x outcome of claim counts, chapters in ``order`` (e.g. the table of contents)."""
    import pandas as pd
    order = list(claims_by_chapter) if order is None else [c for c in order if c in claims_by_chapter]
    rows = {stem: {o: sum(c["outcome"] == o for c in claims_by_chapter[stem]) for o in ALL_OUTCOMES}
            for stem in order}
    frame = pd.DataFrame.from_dict(rows, orient="index", columns=list(ALL_OUTCOMES)).fillna(0).astype(int)
    return frame.loc[:, (frame.sum(axis=0) > 0) | frame.columns.isin(OUTCOMES)]


BADGE_CLASS = {REPRODUCED: "reproduced", NOT_REPRODUCED: "not-reproduced", INCONCLUSIVE: "inconclusive",
               NOT_RUN: "not-run", LEGACY_HOLDS: "legacy", LEGACY_FAILS: "legacy-fails"}


def badge(outcome: str) -> str:
    return f'<span class="claim-badge claim-{BADGE_CLASS.get(outcome, "legacy")}">{html.escape(outcome)}</span>'


def audit_stem(stem: str) -> str:
    """The stem of a chapter's audit page (protocol, per-cell tables, side investigations)."""
    return f"{stem}_audit"


def evidence_link(stem: str, section: str, link_prefix: str = "", book_dir: Path | None = None) -> str:
    """Where a claim is decided: ``#label`` on the chapter's page, or ``<stem>_audit.html#label`` when the
    label is defined on its audit page; with ``link_prefix`` (the scoreboard) always a page and anchor.
    "" when the claim names no section."""
    if not section:
        return f"{link_prefix}{stem}.html" if link_prefix else ""
    book_dir = REPO_ROOT / "book" if book_dir is None else Path(book_dir)
    audit = book_dir / f"{audit_stem(stem)}.md"
    on_audit = audit.exists() and f"({section})=" in audit.read_text()
    if on_audit:
        return f"{link_prefix or './'}{audit_stem(stem)}.html#{section}"
    return f"{link_prefix}{stem}.html#{section}" if link_prefix else f"#{section}"


def counts_text(claims: list) -> str:
    """"11 claims: 7 reproduced, 2 not reproduced, 1 inconclusive, 1 not run here" (outcomes with none
    left out)."""
    counts = [(o, sum(c["outcome"] == o for c in claims)) for o in ALL_OUTCOMES]
    parts = [f"{n} {o}" for o, n in counts if n]
    return f"{len(claims)} claim{'' if len(claims) == 1 else 's'}: " + ", ".join(parts)


def short_title(claim: dict) -> str:
    """The claim in a few words: its ``short``, else its statement cut at a word near 70 characters."""
    if claim.get("short"):
        return claim["short"]
    text = claim["statement"]
    return text if len(text) <= 70 else text[:67].rsplit(" ", 1)[0] + " ..."


def verdict_html(stem: str, claims: list, link_prefix: str = "") -> str:
    """The verdict table at the top of a chapter: the claim in a few words (linked to where it is decided),
    the paper's number, ours with its interval, the outcome. The full statement, rule and note are on
    the scoreboard and the chapter's audit page."""
    e = html.escape
    rows = []
    for c in claims:
        link = evidence_link(stem, c.get("section", ""), link_prefix)
        title = e(short_title(c))
        cell = f'<a href="{e(link)}">{title}</a>' if link else title
        rows.append(
            f'<tr><td class="claim-text" data-label="Claim">{cell}</td>'
            f'<td data-label="Paper">{e(c["published"])}</td>'
            f'<td data-label="Ours">{_replicates_on_own_line(e(c.get("reproduced", "")))}</td>'
            f'<td data-label="Outcome">{badge(c["outcome"])}</td></tr>')
    return ('<table class="claims-table verdict-table"><thead><tr><th>Claim</th><th>Paper</th>'
            "<th>Ours [95% interval]</th><th>Outcome</th></tr></thead><tbody>" + "".join(rows) + "</tbody></table>")


def claims_html(stem: str, claims: list, link_prefix: str = "") -> str:
    """A compact table (claim, paper, ours, outcome) whose rows open to the full statement, source, rule and
    note; the claim links to the section of its chapter that decides it. Narrow screens stack the cells
    (book/_static/claims.css)."""
    e = html.escape
    rows = []
    for c in claims:
        anchor = evidence_link(stem, c.get("section", ""), link_prefix)
        details = [f"<p>{e(c['statement'])}</p>"]
        if c.get("source"):
            details.append(f"<p><b>Source:</b> {e(c['source'])}</p>")
        if c.get("rule"):
            details.append(f"<p><b>Rule:</b> {e(c['rule'])}</p>")
        estimate = c.get("estimate") or {}
        if estimate.get("method"):
            details.append(f"<p><b>Estimate:</b> {e(estimate['method'])}</p>")
        if c.get("wins"):
            wins = ", ".join(f"{e(k)} {v}" for k, v in c["wins"].items())
            details.append(f"<p><b>Wins per replicate:</b> {wins}</p>")
        if c.get("note"):
            details.append(f"<p><b>Note:</b> {e(c['note'])}</p>")
        if anchor:
            details.append(f'<p><a href="{e(anchor)}">Where the chapter decides it</a></p>')
        details.append(f"<p class=\"claim-meta\">id <code>{e(c['id'])}</code>, profile <code>{e(c.get('profile', ''))}</code></p>")
        title = c["statement"] if len(c["statement"]) <= 110 else c["statement"][:107].rsplit(" ", 1)[0] + " ..."
        rows.append(
            "<tr>"
            f'<td class="claim-text" data-label="Claim"><details><summary>{e(title)}</summary>{"".join(details)}</details></td>'
            f'<td data-label="Paper">{e(c["published"])}</td>'
            f'<td data-label="Ours">{_replicates_on_own_line(e(c.get("reproduced", "")))}</td>'
            f'<td data-label="Outcome">{badge(c["outcome"])}</td>'
            "</tr>")
    return ('<table class="claims-table"><thead><tr><th>Claim (click for statement, rule and note)</th>'
            "<th>Paper</th><th>Ours [95% interval]</th><th>Outcome</th></tr></thead><tbody>"
            + "".join(rows) + "</tbody></table>")


def _replicates_on_own_line(text: str) -> str:
    """'2.65 [2.06, 3.24] (R = 4)' -> the interval, then 'R = 4' small on the next line."""
    return re.sub(r" \(R = (\d+)\)$", r'<br><span class="claim-meta">R = \1</span>', text)


def counts_html(counts, titles: dict | None = None) -> str:
    """The scoreboard's summary: one row per chapter, a column per outcome, badges as headers."""
    titles = titles or {}
    head = "".join(f"<th>{badge(o)}</th>" for o in counts.columns)
    body = "".join(
        f'<tr><td data-label="Chapter"><a href="#claims-{stem}">{html.escape(titles.get(stem, stem))}</a></td>'
        + "".join(f'<td data-label="{html.escape(o)}">{int(n)}</td>' for o, n in row.items()) + "</tr>"
        for stem, row in counts.iterrows())
    total = "".join(f"<td>{int(n)}</td>" for n in counts.sum(axis=0))
    return (f'<div class="claims-scroll"><table class="claims-counts"><thead><tr><th>Chapter</th>{head}</tr></thead>'
            f"<tbody>{body}<tr class=\"claims-total\"><td>All</td>{total}</tr></tbody></table></div>")
