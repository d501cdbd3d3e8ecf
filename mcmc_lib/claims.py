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
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
from scipy import stats

from .profiles import PROFILES, active_profile
from .validation import (float_array, require_bool, require_callable, require_int, require_mapping, require_number,
                         require_path, require_probability, require_sequence, require_str, wrong_type)

REPO_ROOT = Path(__file__).resolve().parent.parent
CLAIMS_DIR = REPO_ROOT / "_build" / "claims"   # where the book build writes claims and the scoreboard reads them


_NUMBER = r"(?:-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?|NaN|-?Infinity)"
_NUMBER_LIST = re.compile(rf"\[\s*{_NUMBER}(?:,\s*{_NUMBER})*\s*\]")


def _compact_json(data) -> str:
    """JSON indented by two spaces, with each list of numbers (replicates, seeds) on one line: indented a
    number a line, a claim with 36 comparisons of 1,000 replicates each took 4.5 MB."""
    text = json.dumps(data, indent=2)
    return _NUMBER_LIST.sub(lambda match: re.sub(r"\s+", " ", match.group(0)).replace("[ ", "[").replace(" ]", "]"),
                            text)


def claims_directory() -> Path:
    """Where a chapter writes its claims by default: CLAIMS_DIR when it runs inside the repository, else
    ``claims/`` of ``mcmc_lib.units.output_directory()`` (``./mcmc_book_output/claims``: a downloaded
    notebook run elsewhere does not add its claims to a clone's scoreboard)."""
    from .units import output_directory

    return output_directory() / "claims"      # inside the repository: _build/claims, i.e. CLAIMS_DIR


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
    # An unpaired comparison x vs y keeps x's replicates and seeds above and y's here
    # ({"replicates": [...], "seeds": [...]}); empty for every other estimate.
    second_sample: dict = field(default_factory=dict)
    # How the interval was built from the replicates, so that it can be stated at another level
    # (``at_level``): "student" or "student-log" (from_replicates, paired_*), "welch" or "welch-log"
    # (unpaired_*); "" for an interval given as numbers or a win fraction.
    interval: str = ""

    def __post_init__(self):
        for name in ("value", "low", "high"):
            setattr(self, name, require_number(getattr(self, name), name, finite=False))
        if not (self.low <= self.value <= self.high) and not any(map(math.isnan, (self.low, self.value, self.high))):
            raise ValueError(f"the interval [{self.low}, {self.high}] must contain the value {self.value}")
        self.n_replicates = require_int(self.n_replicates, "n_replicates", minimum=1)
        self.level = require_probability(self.level, "level")
        self.method = require_str(self.method, "method")
        self.replicates = require_sequence(self.replicates, "replicates")
        self.seeds = require_sequence(self.seeds, "seeds")
        self.spread = require_number(self.spread, "spread", finite=False)
        require_mapping(self.second_sample, "second_sample")
        if self.interval not in RESTATABLE_INTERVALS + ("",):
            raise ValueError(f"interval must be one of {RESTATABLE_INTERVALS} or \"\" (given as numbers), got "
                             f"{self.interval!r}")

    @classmethod
    def from_replicates(cls, values, seeds=None, level: float = 0.95, log_scale: bool = False) -> "Estimate":
        """Mean and Student-t interval over R >= 2 independent replicates.

        ``log_scale=True`` averages log(values) and maps the interval back (a geometric mean), which
        suits ratios such as "1.25x faster": their spread is multiplicative.
        """
        values = _replicate_values(values, "values")
        seeds = _seed_per_replicate(seeds, values.size, "seeds")
        level, log_scale = require_probability(level, "level"), require_bool(log_scale, "log_scale")
        if log_scale and np.any(values <= 0):
            raise ValueError("values must be positive with log_scale=True")
        work = np.log(values) if log_scale else values
        n = work.size
        mean, sd = float(work.mean()), float(work.std(ddof=1))
        # Replicates that all agree have no spread to build an interval from: a zero-width interval would read
        # as certainty from a few runs, so its ends are NaN (Rule.decide: inconclusive).
        half = float(stats.t.ppf(0.5 + level / 2, n - 1)) * sd / math.sqrt(n) if sd > 0 else math.nan
        low, high = mean - half, mean + half
        if log_scale:
            mean, low, high = math.exp(mean), math.exp(low), math.exp(high)
        method = (f"{'geometric ' if log_scale else ''}mean of {n} independent replicates, "
                  + (f"{_percent(level)} Student-t interval" if sd > 0 else "all equal, so no interval"))
        return cls(mean, low, high, n, level, method, values.tolist(), seeds, sd,
                   interval="student-log" if log_scale else "student")

    @classmethod
    def from_interval(cls, value, low, high, n_replicates: int, method: str, level: float = 0.95,
                      replicates=(), seeds=()) -> "Estimate":
        """An interval computed another way (a binomial interval, a delta method); ``method`` says how."""
        n_replicates = require_int(n_replicates, "n_replicates", minimum=1)
        replicates = float_array(require_sequence(replicates, "replicates"), "replicates")
        if replicates.ndim != 1:
            raise ValueError(f"replicates must hold one value per replicate (a 1-D sequence), got shape "
                             f"{replicates.shape}")
        replicates = replicates.tolist()
        return cls(value, low, high, n_replicates, level, _require_text(method, "method"), replicates,
                   [_plain(s, f"seeds[{i}]") for i, s in enumerate(require_sequence(seeds, "seeds"))])

    @classmethod
    def win_fraction(cls, winners, claimed: str, seeds=None, level: float = 0.95,
                     competitors=None) -> "Estimate":
        """The fraction of replicates in which ``claimed`` ranked first, with a Wilson score interval.

        ``competitors``: every name that could have won (the methods that ran, or the outcomes that could
        occur). A ``claimed`` that won no replicate must be among them: otherwise a misspelt name would read
        as a method that never wins. Given, it also refuses a winner outside it."""
        if isinstance(winners, str):
            raise TypeError(f"winners must be a sequence of names, one per replicate, got the string {winners!r}")
        winners = [str(w) for w in winners]
        if not winners:
            raise ValueError("winners must name the winner of at least one replicate")
        claimed = _require_text(claimed, "claimed")
        if competitors is not None:
            if isinstance(competitors, str):
                raise TypeError(f"competitors must be a sequence of names, got the string {competitors!r}")
            competitors = {str(c) for c in competitors}
            unknown = sorted({claimed, *winners} - competitors)
            if unknown:
                raise ValueError(f"claimed and winners must be among competitors {sorted(competitors)}, got "
                                 f"{unknown}")
        elif claimed not in winners:
            raise ValueError(f"claimed {claimed!r} won none of the {len(winners)} replicates (winners: "
                             f"{sorted(set(winners))}): pass competitors= (every name that could have won) so "
                             "that a name that never won is told from a misspelt one")
        level = require_probability(level, "level")
        n, k = len(winners), sum(w == claimed for w in winners)
        z = float(stats.norm.ppf(0.5 + level / 2))
        p = k / n
        centre = (p + z * z / (2 * n)) / (1 + z * z / n)
        half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
        return cls(p, min(p, centre - half), max(p, centre + half), n, level,
                   f"fraction of {n} replicates won by {claimed}, Wilson score interval",
                   [float(w == claimed) for w in winners], [] if seeds is None else [_plain(s) for s in seeds])

    # Comparisons of two methods: pair only what the design pairs ---------------------------------------

    @classmethod
    def paired_difference(cls, x, y, *, seeds, level: float = 0.95) -> "Estimate":
        """Mean of x - y over pairs the design made: x[i] and y[i] ran on the same ``seeds[i]`` (common
        random numbers, the same data draw). Chains run independently are not pairs (matching chain i of
        one method with chain i of another is arbitrary): use ``unpaired_difference`` for them."""
        x, y = _pairs(x, y, seeds)
        estimate = cls.from_replicates(x - y, seeds, level)
        estimate.method = (f"mean paired difference over {x.size} pairs sharing their seeds (common random "
                           f"numbers or data draw), {_percent(level)} Student-t interval")
        return estimate

    @classmethod
    def paired_ratio(cls, x, y, *, seeds, level: float = 0.95) -> "Estimate":
        """Geometric mean of x / y over pairs the design made (as ``paired_difference``), for ratios such as
        "1.25x faster": Student-t on log(x / y), mapped back."""
        x, y = _pairs(x, y, seeds)
        if np.any(x <= 0) or np.any(y <= 0):
            raise ValueError("x and y must be positive for a ratio")
        estimate = cls.from_replicates(x / y, seeds, level, log_scale=True)
        # "geometric" first: Rule.gap reads the method to project on the log scale
        estimate.method = (f"geometric mean of paired ratios over {x.size} pairs sharing their seeds (common "
                           f"random numbers or data draw), {_percent(level)} Student-t interval on log values")
        return estimate

    @classmethod
    def unpaired_difference(cls, x, y, *, seeds_x=None, seeds_y=None, level: float = 0.95) -> "Estimate":
        """mean(x) - mean(y) for independent runs (no common seeds or data draws): Welch's interval, whose
        Welch-Satterthwaite degrees of freedom allow the two spreads to differ. ``n_replicates`` is the
        smaller sample and ``spread`` sqrt(sd_x^2 + sd_y^2), so that ``Rule.replicates_to_decide`` counts
        replicates per method."""
        x, y = _replicate_values(x, "x"), _replicate_values(y, "y")
        level = require_probability(level, "level")
        difference, half, df = _welch(x, y, level)
        method = (f"difference of means of {x.size} and {y.size} independent replicates (unpaired), "
                  f"{_percent(level)} Welch interval (df {df:.1f})")
        return cls._unpaired(difference, half, x, y, seeds_x, seeds_y, level, method, "welch")

    @classmethod
    def unpaired_ratio(cls, x, y, *, seeds_x=None, seeds_y=None, level: float = 0.95) -> "Estimate":
        """The ratio of geometric means x / y for independent runs: Welch's interval on log values, mapped
        back (ratios spread multiplicatively). Replicate counts and spread as ``unpaired_difference``, on
        the log scale."""
        x, y = _replicate_values(x, "x"), _replicate_values(y, "y")
        level = require_probability(level, "level")
        if np.any(x <= 0) or np.any(y <= 0):
            raise ValueError("x and y must be positive for a ratio")
        log_x, log_y = np.log(x), np.log(y)
        difference, half, df = _welch(log_x, log_y, level)
        # "geometric" first: Rule.gap reads the method to project on the log scale
        method = (f"geometric mean ratio of {x.size} and {y.size} independent replicates (unpaired), "
                  f"{_percent(level)} Welch interval on log values (df {df:.1f}), mapped back")
        estimate = cls._unpaired(difference, half, log_x, log_y, seeds_x, seeds_y, level, method, "welch-log")
        estimate.value, estimate.low, estimate.high = (math.exp(v) for v in (estimate.value, estimate.low,
                                                                             estimate.high))
        estimate.replicates, estimate.second_sample["replicates"] = x.tolist(), y.tolist()
        return estimate

    @classmethod
    def _unpaired(cls, difference, half, x, y, seeds_x, seeds_y, level, method, interval) -> "Estimate":
        seeds_x = _seed_per_replicate(seeds_x, x.size, "seeds_x")
        seeds_y = _seed_per_replicate(seeds_y, y.size, "seeds_y")
        spread = math.sqrt(x.var(ddof=1) + y.var(ddof=1))
        return cls(difference, difference - half, difference + half, min(x.size, y.size), level, method,
                   x.tolist(), seeds_x, spread, {"replicates": y.tolist(), "seeds": seeds_y}, interval)

    def at_level(self, level: float) -> "Estimate":
        """The same estimate with its interval at another ``level``, rebuilt from its replicates as it was
        built (Student-t or Welch, on log values for a ratio); value, replicates and seeds unchanged. An
        interval given as numbers, or a win fraction, cannot be restated: ValueError."""
        level = require_probability(level, "level")
        if self.interval not in RESTATABLE_INTERVALS:
            raise ValueError(f"this estimate's interval ({self.method or 'given as numbers'}) was not built from "
                             "its replicates here, so it cannot be stated at another level: build it with "
                             "from_replicates, paired_difference, paired_ratio or unpaired_* to compare it at "
                             f"level {level}")
        log_scale = self.interval.endswith("-log")
        seeds = self.seeds or None
        if self.interval.startswith("student"):
            rebuilt = Estimate.from_replicates(self.replicates, seeds, level, log_scale=log_scale)
        else:
            build = Estimate.unpaired_ratio if log_scale else Estimate.unpaired_difference
            rebuilt = build(self.replicates, self.second_sample["replicates"], seeds_x=seeds,
                            seeds_y=self.second_sample.get("seeds") or None, level=level)
        method = self.method.replace(_percent(self.level), _percent(level), 1)
        return Estimate(self.value, min(rebuilt.low, self.value), max(rebuilt.high, self.value), self.n_replicates,
                        level, method, self.replicates, self.seeds, self.spread, self.second_sample, self.interval)

    def text(self, digits: int | None = None) -> str:
        """"value [low, high]". By default at the precision the interval supports: the narrower side of the
        interval to one significant digit (two when that digit is 1), the value and both ends to the same
        decimal place. ``digits``: that many significant digits for each number instead. Without an
        interval (NaN ends): "value (why)"."""
        if math.isnan(self.low) or math.isnan(self.high):
            fmt = _number_format(digits or 3)
            why = "replicates all equal, no interval" if self.spread == 0 else "no interval"
            return f"{fmt(self.value)} ({why})"
        if digits is not None:
            fmt = _number_format(digits)
            return f"{fmt(self.value)} [{fmt(self.low)}, {fmt(self.high)}]"
        fmt = _interval_format(self)
        return f"{fmt(self.value)} [{fmt(self.low, -1)}, {fmt(self.high, +1)}]"


def _plain(seed, name: str = "seed"):
    """A seed as JSON: an int or a list of them (nested for a replicate made of several runs, e.g. a ratio
    of two independent chains has the pair of their seeds). A seed that is not a whole number >= 0 (a
    string, None, 1.5) is refused, naming ``name``."""
    if isinstance(seed, (list, tuple, np.ndarray)):
        return [_plain(s, f"{name}[{i}]") for i, s in enumerate(seed)]
    return require_int(seed, name)


def _replicate_values(values, name: str) -> np.ndarray:
    """Replicate values as a float array: one value per replicate (a 2-D array is ambiguous, refused rather
    than flattened into more replicates than ran), at least 2 (for an interval), all finite. Numbers only
    (booleans count as 0 and 1: an indicator per replicate); a string or other non-number is refused."""
    try:
        raw = values if isinstance(values, np.ndarray) else np.asarray(values)
    except (TypeError, ValueError):                   # a ragged list
        raise wrong_type(name, "a list of numbers, one per replicate", values) from None
    values = raw.astype(float) if raw.dtype.kind == "b" else float_array(values, name)
    if values.ndim != 1:
        raise ValueError(f"{name} must hold one value per replicate (a 1-D sequence), got an array of shape "
                         f"{values.shape}: reduce each replicate to its value first")
    if values.size < 2:
        raise ValueError(f"{name} must hold at least 2 replicates for an interval, got {values.size}")
    if not np.all(np.isfinite(values)):
        raise ValueError(f"{name} must be finite, got {values.tolist()}")
    return values


def _seed_per_replicate(seeds, n_replicates: int, name: str) -> list:
    """The record lists each replicate's own seed: ``seeds`` (None for none) must have one per replicate."""
    if seeds is None:
        return []
    if isinstance(seeds, (str, bytes, Mapping)) or not isinstance(seeds, Iterable):
        raise wrong_type(name, "a list of seeds, one per replicate", seeds)
    seeds = list(seeds)
    if len(seeds) != n_replicates:
        raise ValueError(f"{name} must give one seed per replicate: {n_replicates} replicates, {len(seeds)} "
                         f"seeds (a replicate made of several runs takes the list of their seeds)")
    return [_plain(s, f"{name}[{i}]") for i, s in enumerate(seeds)]


def _pairs(x, y, seeds):
    """x and y as arrays of pairs: same length, and the seeds that made them pairs."""
    x, y = _replicate_values(x, "x"), _replicate_values(y, "y")
    if x.size != y.size:
        raise ValueError(f"x and y must have the same length to be paired, got {x.size} and {y.size}: a pair "
                         "is two runs on one seed, so unequal counts mean the runs are not paired (use the "
                         "unpaired_ constructors)")
    if seeds is None:
        raise ValueError("seeds must name the seed each pair shares: pair only what the design pairs (common "
                         "random numbers, the same data draw); independent runs take the unpaired_ constructors")
    return x, y


RESTATABLE_INTERVALS = ("student", "student-log", "welch", "welch-log")


def _percent(level: float) -> str:
    """A level as a percentage to one decimal, as a reader takes it in: 95%, 97.5%, 99.3%."""
    return f"{100 * level:.1f}".removesuffix(".0") + "%"


def _welch(x: np.ndarray, y: np.ndarray, level: float):
    """Welch's interval for mean(x) - mean(y) from independent samples: (difference, half-width, df), with
    the Welch-Satterthwaite degrees of freedom."""
    var_x, var_y = x.var(ddof=1) / x.size, y.var(ddof=1) / y.size
    difference = float(x.mean() - y.mean())
    if var_x + var_y == 0:                  # no spread in either: no interval (NaN ends), as from_replicates
        return difference, math.nan, float(x.size + y.size - 2)
    df = (var_x + var_y) ** 2 / (var_x ** 2 / (x.size - 1) + var_y ** 2 / (y.size - 1))
    half = float(stats.t.ppf(0.5 + level / 2, df)) * math.sqrt(var_x + var_y)
    return difference, half, float(df)


def _interval_format(estimate: "Estimate"):
    """A number formatter at the decimal place the estimate's interval supports (see ``Estimate.text``);
    three significant digits for a point (no interval) or a number too large or small for fixed notation."""
    half = min(estimate.value - estimate.low, estimate.high - estimate.value)
    numbers = [abs(v) for v in (estimate.value, estimate.low, estimate.high) if math.isfinite(v)]
    if not (math.isfinite(half) and half > 0) or not numbers:
        three = _number_format(3)
        return lambda x, direction=0: three(x)
    exponent = math.floor(math.log10(half))
    leading = int(half / 10 ** exponent)
    decimals = -exponent + (1 if leading == 1 else 0)
    largest = max(numbers)
    if largest >= 1e7 or (largest < 1e-4 and largest > 0) or decimals > 8:
        three = _number_format(3)
        return lambda x, direction=0: three(x)

    def fmt(x, direction=0):
        """``direction``: -1 rounds down, +1 up (an interval's ends round outwards, so that the interval
        shown contains the one computed), 0 to the nearest."""
        x = float(x)
        if not math.isfinite(x):
            return _number_format(3)(x)
        places = decimals
        while x != 0 and _rounded(x, places, direction) == 0 and places < decimals + 3:
            places += 1                  # an end near zero keeps its sign: 0.0004 is not shown as 0
        rounded = _rounded(x, places, direction)
        return f"{rounded + 0.0:,.{max(places, 0)}f}"        # + 0.0: no "-0"
    return fmt


def _rounded(x: float, places: int, direction: int) -> float:
    if direction == 0:
        return round(x, places)
    scale = 10.0 ** places
    return (math.floor if direction < 0 else math.ceil)(round(x * scale, 9)) / scale


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
    require_callable(experiment, "experiment")
    if isinstance(n_replicates, bool) or not isinstance(n_replicates, (int, np.integer)) or n_replicates < 1:
        raise ValueError(f"n_replicates must be a positive int, got {n_replicates!r}")
    if label is not None:
        require_str(label, "label")
    base = _plain(list(seed) if isinstance(seed, tuple) else seed)
    base = base if isinstance(base, list) else [base]
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

    def __post_init__(self):
        self.kind = require_str(self.kind, "kind", ("agreement",) if isinstance(self, AgreementRule) else RULE_KINDS)
        self.quantity = require_str(self.quantity, "quantity")
        for name in ("threshold", "low", "high"):       # NaN where the kind has none
            setattr(self, name, require_number(getattr(self, name), name, finite=False))
        self.why = require_str(self.why, "why")

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

    @classmethod
    def cells_agree(cls, quantity: str, why: str, *, alpha: float = 0.05, test: str = "bonferroni",
                    tolerance: float | None = None, power: float = 0.8) -> "AgreementRule":
        """The rule of a claim that a figure's (or table's) cells agree with the published values, decided as
        one claim by one test over the cells (``AgreementRule``; ``ClaimsRegistry.decide_figure``)."""
        alpha = require_probability(alpha, "alpha")
        require_str(test, "test", AGREEMENT_TESTS)
        if tolerance is not None and not _finite(tolerance, "tolerance") > 0:
            raise ValueError(f"tolerance must be positive, got {tolerance!r}")
        power = require_probability(power, "power")
        return AgreementRule("agreement", _require_text(quantity, "quantity"), why=_require_text(why, "why"),
                             alpha=float(alpha), test=test,
                             tolerance=float("nan") if tolerance is None else float(tolerance), power=float(power))

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
        sits on the threshold, a geometric mean faces a threshold <= 0, or more than
        ``MAX_REPLICATES_TO_DECIDE`` would be needed (``replicates_to_decide_text`` tells these apart).

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
        # t > z, so the normal approximation (z sd / gap)^2 is a lower bound: step up from it. An estimate a
        # rounding error from its threshold gives a count past any run (and past what scipy takes as degrees
        # of freedom), so the count is capped as the moving-band search is.
        normal_count = (stats.norm.ppf(quantile) * sd / gap) ** 2
        if normal_count > MAX_REPLICATES_TO_DECIDE:
            return None
        n = max(first, math.ceil(normal_count))
        while stats.t.ppf(quantile, n - 1) * sd / math.sqrt(n) >= gap:
            n += 1
            if n > MAX_REPLICATES_TO_DECIDE:
                return None
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

    def replicates_to_decide_text(self, estimate: Estimate, rule_at=None) -> str:
        """What would decide an inconclusive claim, for its note: "About N replicates at this spread would
        decide it", "More than N ..." when the count passes ``MAX_REPLICATES_TO_DECIDE``, or, with no spread
        or gap to project from, "More replicates or longer runs would decide it"."""
        needed = self.replicates_to_decide(estimate, rule_at)
        moving = ", the band narrowing with them as the rule states" if rule_at is not None else ""
        if needed:
            return f"About {needed} replicates at this spread would decide it{moving}"
        has_spread = math.isfinite(estimate.spread) and estimate.spread > 0
        if has_spread and (rule_at is not None or self.gap(estimate) is not None):
            return f"More than {MAX_REPLICATES_TO_DECIDE:,} replicates at this spread would decide it{moving}"
        return "More replicates or longer runs would decide it"


MAX_REPLICATES_TO_DECIDE = 100_000
RULE_KINDS = ("greater", "less", "within")


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
    """A finite real number (not a string, a boolean or a list), as a float."""
    return require_number(value, name)


# --------------------------------------------------------------------------------------------------
# "X beats each of the others": one comparison per competitor
# --------------------------------------------------------------------------------------------------

def against_each(values: dict, ours: str, *, common_seeds=None, seeds: dict | None = None, ratio: bool = False,
                 level: float = 0.95) -> dict:
    """The estimates ``ClaimsRegistry.decide_each`` takes for "``ours`` beats each of the others": one per
    competitor, ours - theirs (ours / theirs with ``ratio=True``). ``values``: method -> its replicate values.

    Paired only where the design pairs: ``common_seeds`` says that replicate i of every method ran on
    ``common_seeds[i]`` (common random numbers, the same data draw). Without it the runs are independent and
    each comparison is Welch's (on log values for a ratio); ``seeds`` (method -> its replicates' seeds) is
    then recorded with them."""
    require_mapping(values, "values")
    require_str(ours, "ours")
    if ours not in values or len(values) < 2:
        raise ValueError(f"values must hold {ours!r} (ours) and at least one competitor, got {sorted(values)}")
    seeds = {} if seeds is None else require_mapping(seeds, "seeds")
    require_bool(ratio, "ratio")
    level = require_probability(level, "level")
    estimates = {}
    for name, theirs in values.items():
        if name == ours:
            continue
        if common_seeds is not None:
            paired = Estimate.paired_ratio if ratio else Estimate.paired_difference
            estimates[name] = paired(values[ours], theirs, seeds=common_seeds, level=level)
        else:
            unpaired = Estimate.unpaired_ratio if ratio else Estimate.unpaired_difference
            estimates[name] = unpaired(values[ours], theirs, seeds_x=seeds.get(ours), seeds_y=seeds.get(name),
                                       level=level)
    return estimates


def each_must_pass(outcomes) -> str:
    """The outcome of "X beats each": reproduced only if every comparison is, not reproduced if any is not,
    else inconclusive. An intersection of one-sided tests, each at the rule's level, keeps the chance of
    "reproduced" for samplers that are in fact equal at most that of one test (2.5% for 95% intervals):
    deciding against "the best of the others" would not, as E[X - min(A, B)] > 0 even when X, A and B are
    identical. "Not reproduced" is a union: one failing comparison decides it, so each comparison's
    outcome should come from ``each_comparison`` (a failure counts at the family-wise level).
    ``outcomes``: any iterable of outcomes (a list, a generator, a dict's values), at least one."""
    if isinstance(outcomes, (str, bytes)):
        raise ValueError(f"outcomes must be a list of outcomes, one per comparison, got the string {outcomes!r} "
                         f"(write [{outcomes!r}] for one)")
    if isinstance(outcomes, Mapping) or not isinstance(outcomes, Iterable):
        raise wrong_type("outcomes", "a list of outcomes, one per comparison (a dict's .values())", outcomes)
    outcomes = list(outcomes)
    if not outcomes:
        raise ValueError("outcomes must hold the outcome of at least one comparison, got none: with no "
                         "comparison nothing has been beaten")
    unknown = [o for o in outcomes if not isinstance(o, str) or o not in OUTCOMES]
    if unknown:
        raise ValueError(f"outcomes must each be one of {OUTCOMES}, got {unknown!r}")
    if NOT_REPRODUCED in outcomes:
        return NOT_REPRODUCED
    return REPRODUCED if all(o == REPRODUCED for o in outcomes) else INCONCLUSIVE


def each_comparison(rule: "Rule", estimates: dict) -> tuple[dict, dict]:
    """Each comparison's outcome in a claim "X beats each of k others", and the estimate that decided it.

    The book's convention for such claims, both ways at 95%: a comparison passes at the rule's level (every
    one must pass, and an intersection of one-sided tests needs no correction: equal samplers come out
    "reproduced" at most 2.5% of the time), but a single comparison decides "not reproduced", so a failure
    counts only when it holds at the family-wise level 1 - (1 - level) / k (Bonferroni: equal samplers
    come out "not reproduced" at most 2.5% of the time, whatever k). A comparison that fails at the rule's
    level but not at the family-wise one is inconclusive, and its decided estimate is the wider one (what
    would decide it is counted at that level). Returns ({name: outcome}, {name: estimate})."""
    if not isinstance(rule, Rule):
        raise wrong_type("rule", "a mcmc_lib.claims.Rule (the claim's declared rule)", rule)
    if not isinstance(estimates, dict) or not estimates or not all(isinstance(e, Estimate) for e in estimates.values()):
        raise ValueError(f"estimates must map each competitor to a mcmc_lib.claims.Estimate, got {estimates!r}")
    k = len(estimates)
    outcomes, decided = {}, {}
    for name, estimate in estimates.items():
        outcome = rule.decide(estimate)
        if outcome == NOT_REPRODUCED and k > 1:
            wider = estimate.at_level(1 - (1 - estimate.level) / k)
            if rule.decide(wider) != NOT_REPRODUCED:
                outcome, estimate = INCONCLUSIVE, wider
        outcomes[str(name)], decided[str(name)] = outcome, estimate
    return outcomes, decided


def deciding_comparison(rule: "Rule", estimates: dict) -> str:
    """The competitor whose comparison decides "X beats each" under ``each_comparison``'s convention (what
    a verdict table shows beside such a claim): the first that fails, else the undecided one, or (all
    passing) the passing one, closest to the rule's threshold."""
    outcomes, decided = each_comparison(rule, estimates)
    return _deciding_comparison(rule, decided, outcomes)


# --------------------------------------------------------------------------------------------------
# "A figure's cells agree with the published values": one claim, one test over its cells
# --------------------------------------------------------------------------------------------------

@dataclass
class AgreementCell:
    """One cell of a published figure or table against ours, for a figure's agreement claim: our replicate
    values (independent runs) and the published value with its standard error. ``published_n``: the number
    of the authors' replicates behind the value, for Welch's degrees of freedom; None takes their standard
    error as known (e.g. read off error bars)."""
    name: str
    ours: list
    published: float
    published_se: float = 0.0
    published_n: int | None = None
    seeds: list = field(default_factory=list)

    def __post_init__(self):
        self.name = _require_text(self.name, "name")
        values = _replicate_values(self.ours, f"ours (cell {self.name!r})")
        self.ours = values.tolist()
        self.published = _finite(self.published, "published")
        self.published_se = _finite(self.published_se, "published_se")
        if self.published_se < 0:
            raise ValueError(f"published_se must be at least 0, got {self.published_se}")
        if self.published_n is not None and (isinstance(self.published_n, bool)
                                             or not isinstance(self.published_n, (int, np.integer))
                                             or self.published_n < 2):
            raise ValueError(f"published_n must be an int of at least 2 or None, got {self.published_n!r}")
        no_seeds = self.seeds is None or len(self.seeds) == 0
        self.seeds = _seed_per_replicate(None if no_seeds else self.seeds, values.size, "seeds")

    @classmethod
    def from_authors_replicates(cls, name: str, ours, authors, seeds=None) -> "AgreementCell":
        """A cell whose published value is the mean of the authors' own replicates (their spread known)."""
        authors = _replicate_values(authors, "authors")
        return cls(name, ours, float(authors.mean()), float(authors.std(ddof=1) / math.sqrt(authors.size)),
                   int(authors.size), seeds)


AGREEMENT_TESTS = ("bonferroni", "chi-squared")


@dataclass
class AgreementRule(Rule):
    """The rule of a figure's agreement claim: no cell departs from the published value at family-wise level
    ``alpha``. Each cell's z is (ours - published) / sqrt(our se^2 + published se^2), so each spread counts
    once (a band of joint standard errors around our interval counts ours twice). ``test``: "bonferroni"
    (max |z| over the k cells against the normal quantile at alpha / 2k; a departing cell is named) or
    "chi-squared" (the sum of z^2 against chi-squared with k degrees of freedom; more power against many
    small departures; it needs the cells independent). ``tolerance``: the departure in one cell the paper
    would count as disagreement; with it, "no cell departs" is reproduced only when the test had at least
    ``power`` to detect that departure in every cell, and inconclusive otherwise (too few replicates, or too
    wide a published error, to tell). Without it the outcome is never inconclusive, and a weak test passes
    easily: give one where the paper states a tolerance. Make it with ``Rule.cells_agree``."""
    alpha: float = 0.05
    test: str = "bonferroni"
    tolerance: float = float("nan")
    power: float = 0.8

    def __post_init__(self):
        self.alpha = require_probability(self.alpha, "alpha")
        self.test = require_str(self.test, "test", AGREEMENT_TESTS)
        self.tolerance = require_number(self.tolerance, "tolerance", finite=False)
        if not (math.isnan(self.tolerance) or 0 < self.tolerance < math.inf):
            raise ValueError(f"tolerance must be positive and finite (NaN for none), got {self.tolerance!r}")
        self.power = require_probability(self.power, "power")
        super().__post_init__()

    def text(self) -> str:
        test = ("max |z| over the cells against a Bonferroni bound" if self.test == "bonferroni"
                else "sum of z^2 over the cells against chi-squared")
        text = (f"every cell of {self.quantity} agrees with the published value: no departure at family-wise "
                f"level {self.alpha:g} ({test}; each z counts our spread and the published one once)")
        if math.isfinite(self.tolerance):
            text += (f", with power of at least {self.power:.0%} to detect a departure of {self.tolerance:g} in "
                     "any one cell, else inconclusive")
        return f"{text} ({self.why})"

    def decide(self, estimate) -> str:
        raise ValueError("an agreement rule decides a figure's cells, not one estimate: use rule.assess(cells) "
                         "and ClaimsRegistry.decide_figure")

    def assess(self, cells) -> "FigureAgreement":
        """The test over ``cells`` (AgreementCell, one per cell of the figure): statistic, bound, outcome, and
        the per-cell rows for the audit page."""
        cells = list(cells)
        if not cells or not all(isinstance(c, AgreementCell) for c in cells):
            raise ValueError("cells must be a non-empty list of mcmc_lib.claims.AgreementCell")
        if len({c.name for c in cells}) != len(cells):
            raise ValueError(f"cells must have distinct names, got {[c.name for c in cells]}")
        n = np.array([len(c.ours) for c in cells])
        sd = np.array([np.std(c.ours, ddof=1) for c in cells])
        published_se = np.array([c.published_se for c in cells])
        difference = np.array([np.mean(c.ours) - c.published for c in cells])
        our_var, published_var = sd ** 2 / n, published_se ** 2
        joint_se = np.sqrt(our_var + published_var)
        # Welch-Satterthwaite; a published se without its replicate count is taken as known (no df term)
        published_term = np.array([published_var[i] ** 2 / (c.published_n - 1) if c.published_n else 0.0
                                   for i, c in enumerate(cells)])
        with np.errstate(divide="ignore", invalid="ignore"):
            df = np.where(our_var + published_var > 0,
                          (our_var + published_var) ** 2 / (our_var ** 2 / (n - 1) + published_term), n - 1.0)
            t = np.where(joint_se > 0, difference / joint_se, np.where(difference == 0, 0.0, np.inf))
        p_cell = 2 * stats.t.sf(np.abs(t), np.nan_to_num(df, nan=np.inf, posinf=np.inf))
        # cells of different df compare on one scale: the normal deviate with the same two-sided p
        z = stats.norm.isf(p_cell / 2)
        statistic, bound, p_value = self._family(z)
        power = self._power(joint_se) if math.isfinite(self.tolerance) else float("nan")
        outcome = (NOT_REPRODUCED if p_value < self.alpha else
                   INCONCLUSIVE if power < self.power else REPRODUCED)
        cell_bound = self._bonferroni_bound(len(cells))
        rows = [{"cell": c.name, "R": int(n[i]), "ours": float(np.mean(c.ours)), "our se": float(sd[i] / math.sqrt(n[i])),
                 "published": c.published, "published se": c.published_se, "published R": c.published_n,
                 "difference": float(difference[i]), "joint se": float(joint_se[i]), "df": float(df[i]),
                 "z": float(math.copysign(z[i], difference[i])), "p": float(p_cell[i]),
                 "beyond Bonferroni bound": bool(z[i] > cell_bound), "replicates": c.ours, "seeds": c.seeds}
                for i, c in enumerate(cells)]
        agreement = FigureAgreement(self, rows, statistic, bound, p_value, power, outcome)
        if outcome == INCONCLUSIVE:
            agreement.to_decide = self._to_decide(difference, sd, published_se, int(n.min()))
        return agreement

    def _bonferroni_bound(self, k: int) -> float:
        return float(stats.norm.isf(self.alpha / (2 * k)))

    def _family(self, z: np.ndarray):
        """(statistic, its bound at level alpha, family-wise p-value) of the cells' z."""
        k = z.size
        if self.test == "bonferroni":
            statistic = float(np.max(z))
            p_value = min(1.0, k * 2 * float(stats.norm.sf(statistic)))
            return statistic, self._bonferroni_bound(k), p_value
        statistic = float(np.sum(z ** 2))
        return statistic, float(stats.chi2.isf(self.alpha, k)), float(stats.chi2.sf(statistic, k))

    def _power(self, joint_se: np.ndarray) -> float:
        """The chance the test flags a departure of ``tolerance`` in one cell (the others agreeing), for the
        cell where it is smallest; normal approximation (the se taken as known)."""
        k = joint_se.size
        with np.errstate(divide="ignore"):
            shift = self.tolerance / joint_se
        if self.test == "bonferroni":
            bound = self._bonferroni_bound(k)
            per_cell = stats.norm.sf(bound - shift) + stats.norm.cdf(-bound - shift)
        else:
            per_cell = stats.ncx2.sf(stats.chi2.isf(self.alpha, k), k, shift ** 2)
        per_cell = np.where(np.isinf(shift), 1.0, per_cell)      # a cell with no error at all sees any departure
        return float(np.min(per_cell))

    def _to_decide(self, difference, sd, published_se, n_now: int) -> str:
        """For an inconclusive figure: how many of our replicates per cell would give the power, with the
        authors' error in every joint se (it does not shrink as ours grow), and which way the test would then
        go at the observed differences."""
        joint_se_at = lambda n: np.sqrt(sd ** 2 / n + published_se ** 2)
        if self._power(published_se) < self.power:
            return (f"No number of our replicates would decide it: the published standard errors alone leave the "
                    f"test {self._power(published_se):.0%} power to detect a departure of {self.tolerance:g} "
                    f"(the authors' own replicates would have to grow).")
        if self._power(joint_se_at(MAX_REPLICATES_TO_DECIDE)) < self.power:
            return (f"More than {MAX_REPLICATES_TO_DECIDE:,} replicates per cell at this spread would decide it "
                    "(the published errors included).")
        low, high = n_now, MAX_REPLICATES_TO_DECIDE        # power rises with n: bisect for the first n with it
        while high - low > 1:
            middle = (low + high) // 2
            low, high = (low, middle) if self._power(joint_se_at(middle)) >= self.power else (middle, high)
        with np.errstate(divide="ignore", invalid="ignore"):
            z_then = np.abs(difference) / joint_se_at(high)
        z_then = np.where(np.isnan(z_then), 0.0, z_then)
        _, _, p_then = self._family(z_then)
        way = ("not reproduced: some cell would depart" if p_then < self.alpha
               else "reproduced: no cell would depart")
        return (f"About {high} replicates per cell at this spread would decide it (the published errors "
                f"included); at the differences observed, the test would then read {way}.")


@dataclass
class FigureAgreement:
    """A figure's agreement test, from ``AgreementRule.assess``: the statistic against its bound, the
    family-wise p-value, the power at the rule's tolerance, the outcome, and one row per cell."""
    rule: AgreementRule
    rows: list
    statistic: float
    bound: float
    p_value: float
    power: float
    outcome: str
    to_decide: str = ""      # for an inconclusive outcome: the count that would decide it, and which way

    def text(self, digits: int = 3) -> str:
        fmt = _number_format(digits)
        name = "max |z|" if self.rule.test == "bonferroni" else "sum of z^2"
        return (f"{name} {fmt(self.statistic)} (bound {fmt(self.bound)}, family p = {fmt(self.p_value)}) "
                f"over {len(self.rows)} cells")

    def table(self):
        """The per-cell table for the audit page (pandas DataFrame, one row per cell)."""
        import pandas as pd
        frame = pd.DataFrame([{k: v for k, v in row.items() if k not in ("replicates", "seeds")}
                              for row in self.rows])
        return frame.set_index("cell")

    def estimate(self) -> Estimate:
        """The statistic as the claim's estimate (a point: the test, not an interval, decides)."""
        n = min(row["R"] for row in self.rows)
        method = (f"{self.text()}: each cell's z = (ours - published) / sqrt(our se^2 + published se^2), as "
                  "the normal deviate of its Welch t with the same p; family-wise level "
                  f"{self.rule.alpha:g}")
        if math.isfinite(self.power):
            method += f"; power {self.power:.0%} to detect {self.rule.tolerance:g} in the weakest cell"
        return Estimate.from_interval(self.statistic, self.statistic, self.statistic, n, method,
                                      level=1 - self.rule.alpha)


# --------------------------------------------------------------------------------------------------
# The claim record and the registry a chapter keeps
# --------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Artefact:
    """What, in this run, decides a claim's estimate other than the method it tests: ``what`` (the
    artefact, as measured, e.g. 'round 0 priced out every 10% arm in 70 of 70 runs'), ``decides`` (the run
    that would decide the claim without it) and ``favours_claim`` (True when the artefact can only move
    the estimate towards the claim).

    A pass through an artefact is no pass: a claim the rule would call reproduced is inconclusive. A claim
    the rule calls not reproduced stays so when the artefact favours the claim (removing it can only move
    the estimate further from the claim), and is inconclusive otherwise."""
    what: str
    decides: str
    favours_claim: bool

    def __post_init__(self):
        _require_text(self.what, "what")
        _require_text(self.decides, "decides")
        require_bool(self.favours_claim, "favours_claim")

    def outcome(self, rule_outcome: str) -> str:
        """The claim's outcome, given what its rule reads on the estimate."""
        if rule_outcome == NOT_REPRODUCED and self.favours_claim:
            return NOT_REPRODUCED
        return INCONCLUSIVE

    def text(self, outcome: str) -> str:
        """What the claim's note says of the artefact."""
        if outcome == NOT_REPRODUCED:
            return (f"An artefact favours the claim here, so it cannot have caused this outcome: {self.what}. "
                    f"It waits for {self.decides} to be measured without it.")
        return f"Decided by an artefact, not by the method: {self.what}. It waits for {self.decides}."


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
    group: str = ""          # claims of one figure decided cell by cell: one row of the verdict table
    stages: list = field(default_factory=list)        # a staged design: the replicate count at each look
    comparisons: dict = field(default_factory=dict)   # "X beats each": competitor -> its outcome and estimate
    cells: list = field(default_factory=list)         # a figure's agreement: one row per cell

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
        if not require_str(stem, "stem") or "/" in stem:
            raise ValueError(f"stem must be a chapter file stem such as 'gsm', got {stem!r}")
        if profile is not None and require_str(profile, "profile") not in PROFILES:
            raise ValueError(f"profile must be one of {', '.join(PROFILES)}, got {profile!r}")
        self.stem = stem
        self.profile = profile
        self.directory = claims_directory() if directory is None else require_path(directory, "directory")
        self.claims: list[Claim] = []
        self._declared: dict[str, tuple[Claim, Rule]] = {}

    # The new form -----------------------------------------------------------------------------------

    def declare(self, id: str, *, statement: str, source: str, published, rule: Rule, section: str = "",
                short: str = "", group: str = "") -> str:
        """Fix a claim and its decision rule before the experiment runs; returns the rule as Markdown
        (a chapter may show it above the experiment). ``short``: the claim in a few words, as the verdict
        table at the top of the chapter shows it (the statement, cut, when not given); ``group``: the name of a
        set of claims decided cell by cell (the cells of one figure), which the verdict table shows as one row
        with the count of each outcome (every claim stays on the scoreboard and the audit page)."""
        self._check_new_id(id)
        if not isinstance(rule, Rule):
            raise ValueError(f"rule must be a mcmc_lib.claims.Rule (Rule.greater / less / within), got {rule!r}")
        claim = Claim(id, _require_text(statement, "statement"), _require_text(source, "source"),
                      _require_text(_text(published), "published"), rule.text(), section=section,
                      profile=self.scale(), rule_spec=asdict(rule), short=_short_text(short),
                      group=_short_text(group))
        self._declared[id] = (claim, rule)
        return f"**Claim `{id}`** ({source}): {statement} *Decided by:* {rule.text()}."

    def scale(self) -> str:
        """The profile recorded with a claim (see ``__init__``)."""
        return self.profile or active_profile()

    def decide(self, id: str, estimate: Estimate, *, note: str = "", cause: str = "", wins: dict | None = None,
               profile: str | None = None, planned: int | None = None, rule_at=None, stages=None,
               artefact: Artefact | None = None) -> str:
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
        inconclusive claim then lets the threshold move too (``Rule.replicates_to_decide``). ``stages``: for a
        design that added replicates after a first look, the replicate count at each look, e.g. (10, 25),
        ending at the count the claim is decided on (``planned`` when given); recorded on the claim and told in
        its note (the interval is not adjusted for the look; the note lets the reader weigh it). ``artefact``:
        what in this run, other than the method, decides the estimate (``Artefact``); a claim it could decide
        is inconclusive, and its note says what the artefact is and what run would decide the claim."""
        if artefact is not None and not isinstance(artefact, Artefact):
            raise wrong_type("artefact", "None or a mcmc_lib.claims.Artefact", artefact)
        if id not in self._declared:
            raise ValueError(f"claim {id!r} was not declared: call declare() with its rule before the experiment")
        if not isinstance(estimate, Estimate):
            raise ValueError(f"estimate must be a mcmc_lib.claims.Estimate, got {type(estimate).__name__}")
        if profile is not None and profile not in PROFILES:
            raise ValueError(f"profile must be one of {', '.join(PROFILES)}, got {profile!r}")
        _check_planned(planned, estimate.n_replicates)
        if rule_at is not None and not callable(rule_at):
            raise ValueError(f"rule_at must be a function of the number of replicates returning a Rule, got {rule_at!r}")
        stages = _stages(stages, planned if planned is not None else estimate.n_replicates)
        pending = planned is not None and estimate.n_replicates < planned     # replicates still to run
        claim, rule = self._declared[id]       # kept declared until recorded, so a refused call can be retried
        claim.profile = profile or claim.profile
        claim.outcome = rule.decide(estimate)
        if artefact is not None:
            claim.outcome = artefact.outcome(claim.outcome)
            note = note.strip() + " " + artefact.text(claim.outcome)
        if pending:
            note = _pending_text(planned, estimate.n_replicates, claim.outcome) + " " + note.strip()
            claim.outcome = INCONCLUSIVE
        claim.stages = stages
        if stages:
            note = _stages_text(stages) + " " + note.strip()
        claim.estimate = asdict(estimate)
        claim.reproduced = f"{estimate.text()} (R = {estimate.n_replicates})"
        claim.wins = {str(k): int(v) for k, v in (wins or {}).items()}
        parts = [note.strip()] if note.strip() else []
        if claim.outcome == NOT_REPRODUCED:
            parts.append("Cause: " + _require_text(cause, "cause (for a claim that is not reproduced; "
                                                           "say 'none found' if none was)"))
        if claim.outcome == INCONCLUSIVE and not pending and artefact is None:
            parts.append(_undecided_text(rule.replicates_to_decide_text(estimate, rule_at), planned))
        claim.note = " ".join(parts)
        del self._declared[id]
        self.claims.append(claim)
        return claim.outcome

    def decide_each(self, id: str, estimates: dict, *, note: str = "", cause: str = "",
                    profile: str | None = None, planned: int | None = None, stages=None) -> str:
        """For "X beats each of A, B, ..." (or "X is the lowest of all"): the declared rule applied to X
        against each competitor alone, ``estimates`` holding one per competitor (``against_each``: paired
        where the design pairs, else Welch). Reproduced only if every comparison is, not reproduced if any is
        not, else inconclusive (``each_must_pass``). The claim records each comparison's outcome and
        estimate (``comparisons``) and, as its estimate, the one that decides it (the first comparison that
        failed, else the closest undecided or closest reproduced one); ``note``, ``cause``, ``profile``,
        ``planned`` and ``stages`` as in ``decide``."""
        claim, rule = self._declared_for(id, profile)
        outcomes, decided = each_comparison(rule, estimates)        # checks the estimates
        rule_level = min(e.level for e in estimates.values())
        estimates = decided
        n = min(e.n_replicates for e in estimates.values())
        _check_planned(planned, n)
        stages = _stages(stages, planned if planned is not None else n)
        outcome = each_must_pass(outcomes.values())
        deciding = _deciding_comparison(rule, estimates, outcomes)
        parts = [_stages_text(stages)] if stages else []
        pending = planned is not None and n < planned
        if pending:
            parts.append(_pending_text(planned, n, outcome))
            outcome = INCONCLUSIVE
        parts.append(note.strip())
        parts.append(_each_text(outcomes, rule_level))
        if outcome == INCONCLUSIVE and not pending:
            undecided = [name for name, o in outcomes.items() if o == INCONCLUSIVE]
            counts = [rule.replicates_to_decide(estimates[name]) for name in undecided]
            if all(counts):
                decides = f"About {max(counts)} replicates at this spread would decide every comparison"
            else:
                decides = rule.replicates_to_decide_text(estimates[deciding])
            leaning = ", ".join(f"vs {name} {_leaning(rule, estimates[name])}" for name in undecided)
            parts.append(_undecided_text(f"{decides} (at the values observed: {leaning})", planned))
        claim.outcome = outcome
        claim.estimate = asdict(estimates[deciding])
        claim.comparisons = {name: {"outcome": outcomes[name], "estimate": asdict(e)} for name, e in estimates.items()}
        claim.reproduced = "; ".join(f"vs {name} {e.text()}" + (f" ({_percent(e.level)})" if e.level != rule_level else "")
                                     for name, e in estimates.items()) + f" (R = {n})"
        claim.stages = stages
        return self._record(id, claim, parts, cause)

    def decide_figure(self, id: str, agreement: FigureAgreement, *, note: str = "", cause: str = "",
                      profile: str | None = None, stages=None) -> str:
        """A figure's (or table's) agreement with the published values as one claim: ``agreement`` is the
        declared ``Rule.cells_agree`` rule's ``assess(cells)``. The claim records the statistic against its
        bound as its estimate and one row per cell (``cells``; ``agreement.table()`` shows them on the audit
        page); an inconclusive claim's note says how many replicates per cell would decide it, the published
        errors included, and which way it would then go. ``stages``: as in ``decide`` (the smallest cell's
        count ends it)."""
        claim, rule = self._declared_for(id, profile)
        if not isinstance(rule, AgreementRule):
            raise ValueError(f"claim {id!r} was declared with a {rule.kind!r} rule: decide it with decide(), or "
                             "declare it with Rule.cells_agree")
        if not isinstance(agreement, FigureAgreement) or not _same_rule(agreement.rule, rule):
            raise ValueError("agreement must be the declared rule's assess(cells), got "
                             f"{type(agreement).__name__} under another rule")
        estimate = agreement.estimate()
        stages = _stages(stages, estimate.n_replicates)
        parts = [_stages_text(stages)] if stages else []
        parts.append(note.strip())
        if agreement.outcome == INCONCLUSIVE:
            parts.append(f"No cell departs, but the test has {agreement.power:.0%} power to detect a departure of "
                         f"{rule.tolerance:g} (at least {rule.power:.0%} fixed before the run). {agreement.to_decide}")
        claim.outcome = agreement.outcome
        claim.estimate = asdict(estimate)
        claim.cells = agreement.rows
        claim.reproduced = f"{agreement.text()} (R = {estimate.n_replicates})"
        claim.stages = stages
        return self._record(id, claim, parts, cause)

    def _declared_for(self, id: str, profile: str | None):
        """The declared claim and its rule (left declared until recorded, so a refused call can be retried)."""
        if id not in self._declared:
            raise ValueError(f"claim {id!r} was not declared: call declare() with its rule before the experiment")
        if profile is not None and profile not in PROFILES:
            raise ValueError(f"profile must be one of {', '.join(PROFILES)}, got {profile!r}")
        claim, rule = self._declared[id]
        claim.profile = profile or claim.profile
        return claim, rule

    def _record(self, id: str, claim: Claim, parts: list, cause: str) -> str:
        """Finish a claim's note (a claim not reproduced needs its cause) and record it."""
        parts = [part for part in parts if part]
        if claim.outcome == NOT_REPRODUCED:
            parts.append("Cause: " + _require_text(cause, "cause (for a claim that is not reproduced; "
                                                           "say 'none found' if none was)"))
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
        path.write_text(_compact_json({"chapter": self.stem, "claims": [asdict(c) for c in self.claims]}))
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


def _check_planned(planned, n_replicates: int) -> None:
    if planned is not None and (isinstance(planned, bool) or not isinstance(planned, int) or planned < n_replicates):
        raise ValueError(f"planned must be an int of at least the estimate's {n_replicates} replicates, got {planned!r}")


def _pending_text(planned: int, n_replicates: int, outcome: str) -> str:
    return (f"Decided at the {planned} replicates fixed before the run; {n_replicates} have run, the other "
            f"{planned - n_replicates} decide it (on those run so far the rule reads {outcome}).")


def _same_rule(a: Rule, b: Rule) -> bool:
    """Two rules alike in every field (compared as JSON, so that unset thresholds, NaN, compare equal)."""
    return type(a) is type(b) and json.dumps(asdict(a)) == json.dumps(asdict(b))


def _each_text(outcomes: dict, rule_level: float) -> str:
    """The sentence of a "beats each" claim's note that says how it was decided, comparison by comparison."""
    k = len(outcomes)
    if k == 1:
        return f"Decided against {next(iter(outcomes))} alone: {next(iter(outcomes.values()))}."
    return (f"Decided against each competitor alone: every one must pass at {_percent(rule_level)}, and one that "
            f"fails counts against the claim only at the family-wise {_percent(1 - (1 - rule_level) / k)} "
            f"(Bonferroni, {k} comparisons): " + ", ".join(f"vs {name} {o}" for name, o in outcomes.items()) + ".")


def _deciding_comparison(rule: Rule, estimates: dict, outcomes: dict) -> str:
    """The competitor whose comparison decides "X beats each": the first that failed, else the undecided or
    (all reproduced) the reproduced one closest to the threshold."""
    failed = [name for name, o in outcomes.items() if o == NOT_REPRODUCED]
    if failed:
        return failed[0]
    undecided = [name for name, o in outcomes.items() if o == INCONCLUSIVE] or list(outcomes)
    return min(undecided, key=lambda name: rule.gap(estimates[name]) or 0.0)


def _leaning(rule: Rule, estimate: Estimate) -> str:
    """Which way an undecided comparison leans: the side of the threshold its value lies on."""
    point = Estimate(estimate.value, estimate.value, estimate.value, estimate.n_replicates, method=estimate.method)
    side = rule.decide(point)
    return {REPRODUCED: "leans reproduced", NOT_REPRODUCED: "leans not reproduced"}.get(side, "sits on the threshold")


def _undecided_text(decides: str, planned: int | None) -> str:
    """The sentence an inconclusive claim's note ends with: what would decide it."""
    if planned is not None:
        # every planned replicate has run; growing the count until the interval clears the threshold
        # would bias the verdict, so what decides it is a new set with its count fixed in advance
        decides = (f"Still undecided at the {planned} replicates fixed before the run. {decides}, as a new "
                   "set of repeats whose count is fixed before they run")
    return decides + "."


def _stages(stages, final: int) -> list:
    """A staged design's replicate count at each look, checked: increasing, ending at ``final``."""
    if stages is None:
        return []
    stages = list(stages)
    counts_ok = all(not isinstance(s, bool) and isinstance(s, (int, np.integer)) and s >= 2 for s in stages)
    if len(stages) < 2 or not counts_ok or any(b <= a for a, b in zip(stages, stages[1:])):
        raise ValueError(f"stages must be the increasing replicate counts at each look (at least two, each "
                         f"at least 2), e.g. (10, 25); got {stages!r}")
    if stages[-1] != final:
        raise ValueError(f"stages must end at the {final} replicates the claim is decided on, got {stages!r}")
    return [int(s) for s in stages]


def _stages_text(stages: list) -> str:
    """(10, 25) -> "Two-stage design: 10 replicates, then 15 more after a first look." """
    count = {2: "Two", 3: "Three", 4: "Four"}.get(len(stages), str(len(stages)))
    added = ", then ".join(f"{later - earlier} more" for earlier, later in zip(stages, stages[1:]))
    looks = "a first look" if len(stages) == 2 else "each look"
    return f"{count}-stage design: {stages[0]} replicates, then {added} after {looks}."


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
    directory = claims_directory() if directory is None else require_path(directory, "directory")
    return {data["chapter"]: data["claims"]
            for data in (json.loads(p.read_text()) for p in sorted(directory.glob("*.json")))}


def outcome_counts(claims_by_chapter: dict, order=None):
    """A DataFrame chapter x outcome of claim counts, chapters in ``order`` (e.g. the table of contents)."""
    import pandas as pd
    require_mapping(claims_by_chapter, "claims_by_chapter")
    for stem, claims in claims_by_chapter.items():
        _claim_records(claims, f"claims_by_chapter[{stem!r}]", ("outcome",))
    order = list(claims_by_chapter) if order is None else [c for c in require_sequence(order, "order")
                                                           if c in claims_by_chapter]
    rows = {stem: {o: sum(c["outcome"] == o for c in claims_by_chapter[stem]) for o in ALL_OUTCOMES}
            for stem in order}
    frame = pd.DataFrame.from_dict(rows, orient="index", columns=list(ALL_OUTCOMES)).fillna(0).astype(int)
    return frame.loc[:, (frame.sum(axis=0) > 0) | frame.columns.isin(OUTCOMES)]


BADGE_CLASS = {REPRODUCED: "reproduced", NOT_REPRODUCED: "not-reproduced", INCONCLUSIVE: "inconclusive",
               NOT_RUN: "not-run", LEGACY_HOLDS: "legacy", LEGACY_FAILS: "legacy-fails"}


def _claim_records(claims, name: str, keys=()) -> list:
    """A list of claim records (dicts, as ``load_claims`` reads them), each with ``keys``."""
    claims = require_sequence(claims, name, of=Mapping, what="claim records (dicts)")
    for i, claim in enumerate(claims):
        missing = [key for key in keys if key not in claim]
        if missing:
            raise ValueError(f"{name}[{i}] must be a claim record with {missing}, got the keys {sorted(claim)}")
    return claims


def badge(outcome: str) -> str:
    require_str(outcome, "outcome")
    return f'<span class="claim-badge claim-{BADGE_CLASS.get(outcome, "legacy")}">{html.escape(outcome)}</span>'


def audit_stem(stem: str) -> str:
    """The stem of a chapter's audit page (protocol, per-cell tables, side investigations)."""
    return f"{require_str(stem, 'stem')}_audit"


def evidence_link(stem: str, section: str, link_prefix: str = "", book_dir: Path | None = None) -> str:
    """Where a claim is decided: ``#label`` on the chapter's page, or ``<stem>_audit.html#label`` when the
    label is defined on its audit page; with ``link_prefix`` (the scoreboard) always a page and anchor.
    "" when the claim names no section."""
    require_str(stem, "stem")
    require_str(section, "section")
    require_str(link_prefix, "link_prefix")
    if not section:
        return f"{link_prefix}{stem}.html" if link_prefix else ""
    book_dir = REPO_ROOT / "book" if book_dir is None else require_path(book_dir, "book_dir")
    audit = book_dir / f"{audit_stem(stem)}.md"
    on_audit = audit.exists() and f"({section})=" in audit.read_text()
    if on_audit:
        return f"{link_prefix or './'}{audit_stem(stem)}.html#{section}"
    return f"{link_prefix}{stem}.html#{section}" if link_prefix else f"#{section}"


def counts_text(claims: list) -> str:
    """"11 claims: 7 reproduced, 2 not reproduced, 1 inconclusive, 1 not run here" (outcomes with none
    left out)."""
    claims = _claim_records(claims, "claims", ("outcome",))
    counts = [(o, sum(c["outcome"] == o for c in claims)) for o in ALL_OUTCOMES]
    parts = [f"{n} {o}" for o, n in counts if n]
    return f"{len(claims)} claim{'' if len(claims) == 1 else 's'}: " + ", ".join(parts)


def short_title(claim: dict) -> str:
    """The claim in a few words: its ``short``, else its statement cut at a word near 70 characters."""
    require_mapping(claim, "claim")
    if not claim.get("short") and "statement" not in claim:
        raise ValueError(f"claim must be a claim record with a 'statement' (or a 'short'), got the keys "
                         f"{sorted(claim)}")
    if claim.get("short"):
        return claim["short"]
    text = claim["statement"]
    return text if len(text) <= 70 else text[:67].rsplit(" ", 1)[0] + " ..."


HYPOTHESIS_PREFIX = "hypothesis: "     # the published value of a claim that is our own hypothesis


def verdict_html(stem: str, claims: list, link_prefix: str = "") -> str:
    """The verdict table at the top of a chapter: the claim in a few words (linked to where it is decided),
    the paper's number, ours with its interval, the outcome; a group of per-cell claims is one row with the
    count of each outcome. The full statement, rule and note are on the scoreboard and the chapter's audit
    page."""
    require_str(stem, "stem")
    require_str(link_prefix, "link_prefix")
    claims = _claim_records(claims, "claims", ("statement", "published", "outcome"))
    e = html.escape
    # A chapter of our own hypotheses (published "hypothesis: ...") has no paper's number to show
    hypotheses = [str(c["published"]).startswith(HYPOTHESIS_PREFIX) for c in claims]
    header = "Hypothesis" if claims and all(hypotheses) else "Paper or hypothesis" if any(hypotheses) else "Paper"
    rows = []
    for c in claims:
        group = [g for g in claims if g.get("group") and g.get("group") == c.get("group")]
        if group and c is not group[0]:
            continue                                   # the group's row stands where its first claim does
        link = evidence_link(stem, c.get("section", ""), link_prefix)
        title = e(f"{c['group']} ({len(group)} cells)" if group else short_title(c))
        cell = f'<a href="{e(link)}">{title}</a>' if link else title
        if group:
            paper, ours = "per cell", "one claim per cell"
            outcome = "<br>".join(f"{n}&nbsp;{badge(o)}" for o in ALL_OUTCOMES
                               if (n := sum(g["outcome"] == o for g in group)))
        else:
            published = str(c["published"])
            if header == "Hypothesis":
                published = published[len(HYPOTHESIS_PREFIX):]
            paper, ours = e(published), _replicates_on_own_line(e(_deciding_text(c)))
            outcome = badge(c["outcome"])
        rows.append(
            f'<tr><td class="claim-text" data-label="Claim">{cell}</td>'
            f'<td data-label="{header}">{paper}</td>'
            f'<td data-label="Ours">{ours}</td>'
            f'<td data-label="Outcome">{outcome}</td></tr>')
    return (f'<table class="claims-table verdict-table"><thead><tr><th>Claim</th><th>{header}</th>'
            "<th>Ours [95% interval]</th><th>Outcome</th></tr></thead><tbody>" + "".join(rows) + "</tbody></table>")


def _deciding_text(claim: dict) -> str:
    """What the verdict table shows as ours: the reproduced value; for "X beats each" only the comparison
    that decides it, and how many there are (all of them are in the detailed table)."""
    comparisons = claim.get("comparisons") or {}
    if len(comparisons) < 2:
        return claim.get("reproduced", "")
    deciding = next((name for name, c in comparisons.items() if c["estimate"] == claim.get("estimate")), None)
    if deciding is None:
        return claim.get("reproduced", "")
    shown = Estimate(**comparisons[deciding]["estimate"])
    return (f"vs {deciding} {shown.text()}: the deciding one of {len(comparisons)} comparisons "
            f"(R = {shown.n_replicates})")


def claims_html(stem: str, claims: list, link_prefix: str = "") -> str:
    """A compact table (claim, paper, ours, outcome) whose rows open to the full statement, source, rule and
    note; the claim links to the section of its chapter that decides it. Narrow screens stack the cells
    (book/_static/claims.css)."""
    require_str(stem, "stem")
    require_str(link_prefix, "link_prefix")
    claims = _claim_records(claims, "claims", ("id", "statement", "published", "outcome"))
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
    """The scoreboard's summary: one row per chapter, a column per outcome, badges as headers. ``counts``: the
    DataFrame of ``outcome_counts``; ``titles``: {chapter stem: title}."""
    if not (hasattr(counts, "columns") and hasattr(counts, "iterrows")):
        if isinstance(counts, (list, tuple, Mapping, np.ndarray)):
            raise ValueError(f"counts must be the table of outcome_counts (a pandas DataFrame, chapters x "
                             f"outcomes), got a {type(counts).__name__}: {counts!r:.80}")
        raise wrong_type("counts", "a pandas DataFrame (outcome_counts)", counts)
    titles = {} if titles is None else require_mapping(titles, "titles")
    head = "".join(f"<th>{badge(o)}</th>" for o in counts.columns)
    body = "".join(
        f'<tr><td data-label="Chapter"><a href="#claims-{stem}">{html.escape(titles.get(stem, stem))}</a></td>'
        + "".join(f'<td data-label="{html.escape(o)}">{int(n)}</td>' for o, n in row.items()) + "</tr>"
        for stem, row in counts.iterrows())
    total = "".join(f"<td>{int(n)}</td>" for n in counts.sum(axis=0))
    return (f'<div class="claims-scroll"><table class="claims-counts"><thead><tr><th>Chapter</th>{head}</tr></thead>'
            f"<tbody>{body}<tr class=\"claims-total\"><td>All</td>{total}</tr></tbody></table></div>")
