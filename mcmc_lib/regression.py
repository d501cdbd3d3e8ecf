"""Regression checks of the numbers a chapter reports, against committed reference values.

A chapter calls ``check_reference(stem, name, value, tolerance)`` in a hidden cell. At the smoke
profile (what nbval runs) the value must lie within ``tolerance`` of the committed reference in
``tests/reference/<stem>.json``; the tolerance is set by the number's Monte Carlo error (a few
standard errors), so another machine's rounding passes and a planted bug fails. Other profiles are
not checked. ``MCMC_BOOK_UPDATE_REFERENCES=1`` records the values instead of checking them.
"""
from __future__ import annotations

import json
import math
import os
from pathlib import Path

from .profiles import active_profile
from .store import STORE_ENV, use_store
from .validation import require_number

REFERENCE_DIR = Path(__file__).resolve().parent.parent / "tests" / "reference"
CHECKED_PROFILE = "smoke"


class ReferenceMismatch(AssertionError):
    pass


def _path(stem):
    return REFERENCE_DIR / f"{stem}.json"


def _load(stem):
    path = _path(stem)
    return json.loads(path.read_text()) if path.exists() else {}


def check_reference(stem: str, name: str, value: float, tolerance: float) -> str:
    """Compare one reported number with its committed reference; returns a one-line verdict."""
    for label, text in (("stem", stem), ("name", name)):
        if not isinstance(text, str):
            raise TypeError(f"{label} must be a string, got {type(text).__name__} {text!r}")
    value = require_number(value, "value", finite=False)
    if require_number(tolerance, "tolerance", finite=False) <= 0 or not math.isfinite(tolerance):
        raise ValueError(f"tolerance must be positive and finite, got {tolerance!r}")
    if active_profile() != CHECKED_PROFILE:
        return f"{name}: {value:.6g} (reference checks run at the {CHECKED_PROFILE} profile only)"
    if use_store(CHECKED_PROFILE):            # MCMC_BOOK_STORE=on: values may be stored paper-scale results
        return f"{name}: {value:.6g} (no reference check: {STORE_ENV}=on shows stored results)"
    references = _load(stem)
    if os.environ.get("MCMC_BOOK_UPDATE_REFERENCES") == "1":
        references[name] = value
        REFERENCE_DIR.mkdir(parents=True, exist_ok=True)
        _path(stem).write_text(json.dumps(references, indent=1, sort_keys=True) + "\n")
        return f"{name}: recorded {value:.6g}"
    if name not in references:
        raise ReferenceMismatch(f"{stem}/{name}: no reference value committed; run with "
                                "MCMC_BOOK_UPDATE_REFERENCES=1 MCMC_BOOK_PROFILE=smoke to record it")
    reference = references[name]
    if not abs(value - reference) <= tolerance:
        raise ReferenceMismatch(f"{stem}/{name} = {value:.6g} differs from the reference {reference:.6g} "
                                f"by more than {tolerance:.3g}")
    return f"{name}: {value:.6g} (reference {reference:.6g} +- {tolerance:.3g})"
