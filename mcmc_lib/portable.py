"""Portable floating point: the same bits on every x86-64 CPU with AVX2 and FMA.

NumPy and OpenBLAS choose their kernels by the CPU when they load. On a CPU with AVX-512 they take
wider kernels than on one with AVX2 alone, which add and round in another order, so a matrix product
or an ``exp`` differs in its last bits from one machine to another. Those bits reach the cache keys
and the committed stores whenever a unit reads a value the notebook computed (a standardised data
set, a grid built from data, an optimiser's end point): on a machine of the other kind the units look
new and a fresh clone recomputes them.

So ``make`` starts every process (Jupyter kernels, test runs, and the workers they spawn, which
inherit the environment) with OpenBLAS held to its Haswell kernels (AVX2 and FMA) and NumPy's AVX-512
code paths switched off. Measured (2026-11-25): with these settings an Intel Xeon with AVX-512 gives
the bits an AMD EPYC gave, for every unit parameter of the committed default store and for the
results of every unit recomputed (timings aside). They cost nothing on a CPU without AVX-512, which
runs these kernels anyway; on one with AVX-512 large matrix products take up to twice as long.
``MCMC_BOOK_FLOAT=native`` keeps the CPU's own kernels (then a fresh clone on such a CPU recomputes
the experiments whose inputs differ). On other CPUs (ARM, or x86-64 without AVX2 and FMA) nothing is
set, and results are reproducible bit for bit on that kind of CPU only.

The settings act only if they are in the environment before NumPy loads: ``make`` exports them
(``python mcmc_lib/portable.py`` prints them); a reader's own Jupyter needs them set before it starts
(``make lab`` does so). ``describe()`` says what the running process has.

This file imports nothing beyond the standard library at module level, so that the Makefile can run
it with any Python before the project's environment exists.
"""
from __future__ import annotations

import os
import platform
import sys
from collections.abc import Mapping

FLOAT_ENV = "MCMC_BOOK_FLOAT"
SETTINGS = ("portable", "native")
# OpenBLAS's kernel family for every x86-64 CPU with AVX2 and FMA (Intel since Haswell, AMD since Zen),
# and NumPy's dispatch targets beyond AVX2 (NumPy 2.x names; the tests check they are all off).
PORTABLE_VARIABLES = {"OPENBLAS_CORETYPE": "Haswell",
                      "NPY_DISABLE_CPU_FEATURES": "X86_V4,AVX512_SKX,AVX512_CLX,AVX512_CNL,AVX512_ICL,AVX512_SPR"}
REQUIRED_FLAGS = frozenset({"avx2", "fma"})


def _environ(environ, name: str = "environ"):
    """``environ`` (os.environ when None), checked to be a mapping (the standard library only, see above)."""
    if environ is None:
        return os.environ
    if not isinstance(environ, Mapping):
        if isinstance(environ, (list, tuple)):
            raise ValueError(f"{name} must be a mapping of variables (a dict, os.environ), got a "
                             f"{type(environ).__name__} of {len(environ)}")
        raise TypeError(f"{name} must be a mapping of variables (a dict, os.environ), got "
                        f"{type(environ).__name__} {environ!r}")
    return environ


def float_setting(environ=None) -> str:
    """``MCMC_BOOK_FLOAT``: portable (the default) or native."""
    environ = _environ(environ)
    setting = environ.get(FLOAT_ENV, "portable").strip().lower() or "portable"
    if setting not in SETTINGS:
        raise ValueError(f"{FLOAT_ENV} must be portable or native, got {setting!r}")
    return setting


def cpu_flags(cpuinfo: str = "/proc/cpuinfo") -> frozenset:
    """The CPU's feature flags as Linux lists them; empty where there is no /proc/cpuinfo."""
    if isinstance(cpuinfo, (list, tuple)):
        raise ValueError(f"cpuinfo must be one path, got a {type(cpuinfo).__name__} of {len(cpuinfo)}")
    if not isinstance(cpuinfo, (str, os.PathLike)):      # an int would be read as an open file descriptor
        raise TypeError(f"cpuinfo must be a path (str or pathlib.Path), got {type(cpuinfo).__name__} {cpuinfo!r}")
    try:
        with open(cpuinfo) as file:
            for line in file:
                if line.startswith("flags"):
                    return frozenset(line.split(":", 1)[1].split())
    except OSError:
        pass
    return frozenset()


def portable_environment(flags=None, machine=None, environ=None) -> dict:
    """The variables that make this machine compute portably: empty when ``MCMC_BOOK_FLOAT=native``,
    or when the CPU is not an x86-64 with AVX2 and FMA (Haswell kernels would not run there)."""
    if machine is not None and not isinstance(machine, str):
        if isinstance(machine, (list, tuple)):
            raise ValueError(f"machine must be one name (platform.machine()), got a {type(machine).__name__}")
        raise TypeError(f"machine must be a string (platform.machine()), got {type(machine).__name__} {machine!r}")
    if flags is not None and (isinstance(flags, (str, bytes, Mapping)) or not hasattr(flags, "__iter__")):
        raise TypeError(f"flags must be a set of CPU flag names, got {type(flags).__name__} {flags!r}")
    if float_setting(environ) == "native":
        return {}
    machine = (platform.machine() if machine is None else machine).lower()
    flags = cpu_flags() if flags is None else frozenset(flags)
    if machine not in ("x86_64", "amd64") or not REQUIRED_FLAGS <= flags:
        return {}
    return dict(PORTABLE_VARIABLES)


def apply(environ=None) -> dict:
    """Put the portable settings into ``environ`` (os.environ) where it has none of its own, for the
    processes started from here on (not this one, whose NumPy has loaded already); returns them."""
    environ = _environ(environ)
    wanted = portable_environment(environ=environ)
    for name, value in wanted.items():
        environ.setdefault(name, value)
    return wanted


def describe() -> str:
    """What the running process computes with: its OpenBLAS kernels and NumPy's widest code path in use."""
    import numpy
    import scipy.linalg  # noqa: F401  (loads SciPy's OpenBLAS beside NumPy's)

    try:
        from threadpoolctl import threadpool_info
        kernels = sorted({str(pool.get("architecture")) for pool in threadpool_info()
                          if pool.get("internal_api") == "openblas"})
    except ImportError:                          # threadpoolctl is in the book's pins, not mcmc_lib's
        kernels = ["unknown"]
    umath = getattr(numpy, "_core", None) or numpy.core
    dispatch, features = umath._multiarray_umath.__cpu_dispatch__, umath._multiarray_umath.__cpu_features__
    wide = [target for target in dispatch if features.get(target)
            and (target == "X86_V4" or target.startswith("AVX512"))]
    portable = kernels == ["Haswell"] and not wide
    blas = f"OpenBLAS {'/'.join(kernels) or 'not loaded'} kernels"
    simd = f"NumPy with {', '.join(wide)}" if wide else "NumPy without AVX-512"
    return f"{'portable' if portable else 'native'} ({blas}, {simd})"


def is_portable() -> bool:
    """Whether the running process computes portably (see the module docstring)."""
    return describe().startswith("portable")


if __name__ == "__main__":
    # For the Makefile: NAME=value pairs, one per line, for the variables the environment lacks.
    try:
        settings = portable_environment()
    except ValueError as error:
        print(error, file=sys.stderr)
        sys.exit(2)
    for name, value in settings.items():
        if name not in os.environ:
            print(f"{name}={value}")
