"""The run-size profile of the book: one environment variable, MCMC_BOOK_PROFILE.

- ``smoke``: what CI and nbval run; every chapter in a few minutes on 2 cores.
- ``default``: what ``make book`` renders; the papers' protocols where the book still builds in
  well under an hour, fewer repeats or datasets where it cannot.
- ``paper``: the papers' full scale; hours; documented, not run in CI.
"""
from __future__ import annotations

import os

PROFILES = ("smoke", "default", "paper")
ENV_VAR = "MCMC_BOOK_PROFILE"


def active_profile() -> str:
    """The profile named by MCMC_BOOK_PROFILE (``default`` when unset)."""
    name = os.environ.get(ENV_VAR, "default").strip().lower() or "default"
    if name not in PROFILES:
        raise ValueError(f"{ENV_VAR} must be one of {PROFILES}, got {name!r}")
    return name


def choose(smoke, default, paper, profile: str | None = None):
    """Pick the value for the active profile: ``n_iter = choose(2_000, 20_000, 20_000)``."""
    profile = active_profile() if profile is None else profile
    if not isinstance(profile, str) or profile not in PROFILES:
        raise ValueError(f"profile must be one of {PROFILES}, got {profile!r}")
    return {"smoke": smoke, "default": default, "paper": paper}[profile]


def sizes(table: dict, profile: str | None = None) -> dict:
    """Sizes for the active profile from a table {name: (smoke, default, paper)}."""
    if not isinstance(table, dict):
        raise TypeError(f"table must be a dict {{name: (smoke, default, paper)}}, got {type(table).__name__} {table!r}")
    for name, values in table.items():
        if not isinstance(values, (tuple, list)) or len(values) != 3:
            raise ValueError(f"table[{name!r}] must be the three sizes (smoke, default, paper), got {values!r}")
    return {name: choose(*values, profile=profile) for name, values in table.items()}
