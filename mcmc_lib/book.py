"""Small helpers for the chapters' prose."""
from __future__ import annotations

import numpy as np


def glue_value(name: str, value) -> None:
    """``myst_nb.glue`` a value (number or text) for ``{glue:text}`name:.3f``` formatting: numpy scalars become
    Python numbers first (glue stores their repr, which the formatter cannot parse)."""
    from myst_nb import glue

    value = value.item() if isinstance(value, np.generic) else value
    glue(name, value, display=False)
