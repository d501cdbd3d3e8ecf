"""The claims registry: each chapter records the paper's headline claims with the published and the
reproduced number and whether the claim holds, writes them to ``_build/claims/<stem>.json`` and
shows them as a table; ``book/scoreboard.md`` gathers every chapter's file into one table.
"""
from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path

from .profiles import active_profile

REPO_ROOT = Path(__file__).resolve().parent.parent
CLAIMS_DIR = REPO_ROOT / "_build" / "claims"


@dataclass
class Claim:
    id: str
    statement: str
    published: str      # the paper's number or wording, as text ("7.4", "higher than MALA")
    reproduced: str     # ours, as text
    holds: bool
    profile: str
    note: str = ""


def _fmt(value) -> str:
    if isinstance(value, float):
        return "nan" if math.isnan(value) else f"{value:.4g}"
    return str(value)


class ClaimsRegistry:
    """Collects a chapter's claims; ``write()`` saves them, ``table()`` renders them."""

    def __init__(self, stem: str, directory: Path | None = None):
        if not stem or "/" in stem:
            raise ValueError(f"stem must be a chapter file stem such as 'gsm', got {stem!r}")
        self.stem = stem
        self.directory = CLAIMS_DIR if directory is None else Path(directory)
        self.claims: list[Claim] = []

    def add(self, id: str, statement: str, published, reproduced, holds, note: str = "") -> None:
        """Record one claim (returns nothing, so a notebook cell shows no stray output)."""
        if any(c.id == id for c in self.claims):
            raise ValueError(f"id {id!r} is already recorded in chapter {self.stem!r}")
        claim = Claim(id, statement, _fmt(published), _fmt(reproduced), bool(holds), active_profile(), note)
        self.claims.append(claim)

    def write(self) -> Path:
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.directory / f"{self.stem}.json"
        path.write_text(json.dumps({"chapter": self.stem, "claims": [asdict(c) for c in self.claims]}, indent=2))
        return path

    def table(self):
        """The claims as a styled table for the chapter's end (full statements, failures in red)."""
        return style_claims(claims_frame([asdict(c) | {"chapter": self.stem} for c in self.claims]))


def claims_frame(rows):
    import pandas as pd
    frame = pd.DataFrame(rows, columns=["chapter", "id", "statement", "published", "reproduced",
                                        "holds", "profile", "note"])
    frame["holds"] = frame["holds"].map({True: "yes", False: "NO"})
    return frame


def style_claims(frame):
    """An HTML-ready Styler: no index, full text, 'NO' in bold red."""
    return (frame.style.hide(axis="index")
            .map(lambda v: "color: #b00020; font-weight: bold" if v == "NO" else "", subset=["holds"])
            .set_properties(**{"text-align": "left", "white-space": "normal"})
            .set_properties(subset=["statement"], **{"min-width": "24em"})
            .set_properties(subset=["published", "reproduced", "note"], **{"min-width": "9em"}))


def load_all_claims(directory: Path | None = None):
    """Every chapter's claims from ``_build/claims/*.json`` as one DataFrame (for the scoreboard)."""
    directory = CLAIMS_DIR if directory is None else Path(directory)
    rows = []
    for path in sorted(directory.glob("*.json")):
        data = json.loads(path.read_text())
        rows += [claim | {"chapter": data["chapter"]} for claim in data["claims"]]
    return claims_frame(rows)
