"""Small helpers for the chapters' prose."""
from __future__ import annotations

import numpy as np


def glue_value(name: str, value) -> None:
    """``myst_nb.glue`` a value (number or text) for ``{glue:text}`name:.3f``` formatting: numpy scalars become
    Python numbers first (glue stores their repr, which the formatter cannot parse)."""
    from myst_nb import glue

    value = value.item() if isinstance(value, np.generic) else value
    glue(name, value, display=False)


def one_blas_thread() -> None:
    """Limit BLAS to one thread in this kernel for the rest of the session, as ``make`` does
    (OMP_NUM_THREADS=1) and as every experiment unit does: the chains are vectorised already, a chapter
    run in a reader's Jupyter then gives the book's numbers bit for bit, and on a busy machine BLAS
    threads fighting over the cores cannot make a chapter many times slower."""
    import scipy.linalg  # noqa: F401  loads scipy's own BLAS, so that the limit covers it too
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=1)
