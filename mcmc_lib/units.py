"""Experiments as units: independent pieces of an experiment, run in parallel and cached on disk.

The entry points: ``Unit(fn, params, seed)`` describes one unit; ``run_units(units)`` runs a list of
them and returns their results in order; ``run_with_stats(units)`` does the same and also returns how
they ran (``RunStats``: cached or computed, backend, each unit's time); ``trial_chunks`` splits a long
cell into units. (There is no ``run`` or ``map`` here: ``mcmc_lib.store.Experiments`` and
``largest_scale`` wrap ``run_units`` for a chapter, with the committed stores.)

A *unit* is one independent piece of an experiment (one repeat, one grid cell, one data set): a
function, its keyword parameters and its own seed. ``run_units`` runs a list of units and returns
their results in the order of the list::

    def trial(seed, n, dim):                      # top level of a module or of a notebook cell
        rng = np.random.default_rng(seed)         # the unit's only source of randomness
        ...
        return {"ess": ess, "accept": accept}     # a summary: what a table, figure or claim needs

    units = [Unit(trial, dict(n=n, dim=dim), seed=[SEED, i, r])
             for i, (n, dim) in enumerate(GRID) for r in range(SIZES["repeats"])]
    results = run_units(units, label="Figure 2")  # results[k] is trial(seed=..., **params) of units[k]

The function is called as ``fn(seed=seed, **params)``. ``mcmc_lib.store.Experiments`` wraps this
for a chapter: paper-profile results from the committed store where they exist, with provenance.

**Where units run.** On the local cores through joblib's loky processes; ``MCMC_BOOK_JOBS`` sets how
many (default: every core). With one job, or a single unit left to compute, units run one after the
other in this process, with no pool to start. When ``MCMC_BOOK_DASK_SCHEDULER`` gives the address of
a Dask distributed scheduler (``tcp://host:8786``), units run on that cluster instead; its workers
need the same environment (the pins of requirements.txt and mcmc_lib importable). A function
defined in a notebook cell travels to the workers by value (cloudpickle), with the globals it uses.

**Seeds.** A seed is a non-negative int or a non-empty list/tuple of them, handed to the unit, which
makes its generator with ``np.random.default_rng(seed)``. The convention is ``seed=[SEED, i, j]``:
the chapter's SEED and the unit's indices in its grid, so adding a row to a grid leaves every other
unit's stream as it was. Each unit runs with BLAS limited to one thread, so its result is identical
bit for bit whatever the number of workers or the backend (and whatever the x86-64 CPU with AVX2 and
FMA when it computes portably, as under make: ``mcmc_lib.portable``; natively, BLAS and NumPy kernels
differ between CPU types).

**What a unit takes and returns.** Parameters and results are JSON-like: None, bool, int, float,
str, lists, tuples, dicts with str keys, numpy arrays (bool, int, float, str) and numpy scalars.
Anything else raises ValueError naming the parameter, or where in the result it sits. So a unit
returns a summary (ESS, errors, acceptance, a thinned trace for a figure), never a sampler object
or a raw chain of millions of draws: results are cached, and paper-profile ones committed.

**The cache.** Each result is written to disk (atomically) as soon as its unit finishes, under
``_build/cache/units/`` at the repository root (``cache/units/`` of ``output_directory()``: a notebook
run outside the repository writes to ``./mcmc_book_output/``); ``MCMC_BOOK_CACHE=<directory>`` moves it
and ``MCMC_BOOK_CACHE=off`` disables it. The key is a hash of

- the function's module, qualified name and source; the sources of the notebook-level functions and
  classes it reaches through its globals (transitively: anything not from an installed package or
  from mcmc_lib); the values of the globals it reads (numbers, strings, arrays and containers of them
  by their contents, other objects by their pickle);
- the parameters and the seed;
- the sources of the mcmc_lib modules the unit reaches (through its globals, the imports in its
  functions' bodies, and the classes of the objects it reads) and of every mcmc_lib module those
  import, transitively: editing a module no unit runs (the store, the claims, the book's helpers)
  recomputes nothing; and the versions of Python, numpy and scipy.

So a change to the unit, to a helper it calls, to a global it reads, or to mcmc_lib recomputes the
unit; anything else loads it. An interrupted run resumes with the units it had not finished. What
the key cannot see: other installed packages (fixed by the pins), data files read by path (put a
checksum or version among the parameters), and user modules imported by the unit's helpers'
modules. ``rm -rf _build/cache/units`` (or ``make clean``) empties the cache.

**The checkpoint.** The cache is one machine's. ``checkpoint=<directory>`` also writes each finished
unit there as JSON under the same key (``UnitCheckpoint``) and reads it first, the cache only where the
checkpoint lacks a unit (a checkpointed unit keeps its own measured time and finish time): the store
gives a paper run ``results/paper/<chapter>/checkpoint/``, committed while the run is unfinished, so
that it resumes from a clone on another machine.
"""
from __future__ import annotations

import base64
import datetime
import dis
import hashlib
import importlib.metadata
import inspect
import io
import json
import os
import pickle
import platform
import site
import sys
import sysconfig
import tempfile
import threading
import time
import types
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np

from .validation import require_callable, require_mapping, require_path, require_str, wrong_type

PACKAGE_DIR = Path(__file__).resolve().parent
JOBS_ENV = "MCMC_BOOK_JOBS"
SCHEDULER_ENV = "MCMC_BOOK_DASK_SCHEDULER"
CACHE_ENV = "MCMC_BOOK_CACHE"
CACHE_FORMAT = 1                     # bump to invalidate every cached result at once
_OFF = ("off", "0", "false", "no", "none")
OUTPUT_ENV = "MCMC_BOOK_OUTPUT"
OUTSIDE_OUTPUT = "mcmc_book_output"  # under the working directory, when it is outside the repository


def repository_root() -> Path:
    """The book's repository (mcmc_lib's parent) when mcmc_lib runs from it, else the working directory."""
    root = PACKAGE_DIR.parent
    return root if (root / "_toc.yml").exists() else Path.cwd()


_ANNOUNCED: set = set()

ENTRY_POINTS = ("Unit", "run_units", "run_with_stats", "trial_chunks")


def __getattr__(name):
    """A name this module lacks: say what its entry points are (``units.run`` and ``units.map`` are guesses)."""
    if name.startswith("__"):
        raise AttributeError(name)
    raise AttributeError(f"module 'mcmc_lib.units' has no attribute {name!r}; its entry points are "
                         f"{', '.join(ENTRY_POINTS)} (run_units(units) returns the results in order, "
                         "run_with_stats(units) also says how they ran)")


def _units_list(units, name: str = "units") -> list:
    """A list of Unit (not one Unit, nor anything else)."""
    if isinstance(units, Unit):
        raise ValueError(f"{name} must be a list of units, got one Unit (write [unit])")
    if isinstance(units, (str, bytes, Mapping)) or not hasattr(units, "__iter__"):
        raise wrong_type(name, "a list of Unit(fn, params, seed)", units)
    items = list(units)
    for i, unit in enumerate(items):
        if not isinstance(unit, Unit):
            raise wrong_type(f"{name}[{i}]", "a Unit(fn, params, seed)", unit)
    return items


def output_directory() -> Path:
    """Where a chapter writes what it produces (its claims, the unit cache): the repository's ``_build/``
    when the working directory is inside the repository that holds mcmc_lib (the book build, nbval,
    ``make``: as always), else ``./mcmc_book_output/``, so that a downloaded notebook run elsewhere with
    a clone's mcmc_lib does not write into that clone's ``_build/`` (where the clone's scoreboard would
    read its claims); ``MCMC_BOOK_OUTPUT=<directory>`` chooses it anywhere. Reading is unaffected: the
    committed stores are still read from the repository. Anywhere but the repository's ``_build/``, the
    first use in a process prints where."""
    root = PACKAGE_DIR.parent
    build = root / "_build"
    setting = os.environ.get(OUTPUT_ENV, "").strip()
    if setting:
        directory = Path(setting).expanduser().absolute()
    elif (root / "_toc.yml").exists() and Path.cwd().resolve().is_relative_to(root.resolve()):
        return build
    else:
        directory = Path.cwd() / OUTSIDE_OUTPUT
    if directory.resolve() != build.resolve() and directory not in _ANNOUNCED:
        _ANNOUNCED.add(directory)
        why = (f"set by {OUTPUT_ENV}" if setting else
               f"the working directory is outside the book's repository; {OUTPUT_ENV}=<directory> chooses")
        print(f"mcmc_lib writes this run's claims and cached results under {directory} ({why})")
    return directory


# ---------------------------------------------------------------- units


class Unit:
    """One independent piece of an experiment: ``fn(seed=seed, **params)``.

    ``params`` is a dict of JSON-like keyword parameters; ``seed`` a non-negative int or a list/tuple
    of them (convention: ``[SEED, i, j]``). Both are checked here, so a bad one fails before any run.
    """
    __slots__ = ("fn", "params", "seed")

    def __init__(self, fn, params: Mapping | None = None, seed=None):
        if not callable(fn):
            raise ValueError(f"fn must be callable, got {fn!r}")
        self.fn = fn
        self.params = _checked_params(fn, {} if params is None else params)
        self.seed = canonical_seed(seed)

    def __repr__(self) -> str:
        return f"Unit({function_name(self.fn)}, {self.params!r}, seed={self.seed!r})"


def trial_chunks(fn, params: Mapping, seed, n_trials: int, chunk_trials: int | None = None,
                 trials_param: str = "n_trials") -> list[Unit]:
    """The units of ``n_trials`` independent trials of ``fn`` (``fn(seed=..., **params, n_trials=k)``
    runs k of them): one unit with ``seed`` when ``chunk_trials`` is None; else consecutive chunks of at
    most ``chunk_trials`` trials, chunk k seeded ``[*seed, k]``, so that a cell too long for one sitting
    resumes chunk by chunk and spreads over workers. The chunks' results, in order, hold the cell's
    trials (independent draws, not the same draws as the one-unit cell)."""
    require_callable(fn, "fn")
    require_mapping(params, "params")
    require_str(trials_param, "trials_param")
    if isinstance(n_trials, bool) or not isinstance(n_trials, int) or n_trials < 1:
        raise ValueError(f"n_trials must be a positive integer, got {n_trials!r}")
    if chunk_trials is None:
        return [Unit(fn, {**params, trials_param: n_trials}, seed)]
    if isinstance(chunk_trials, bool) or not isinstance(chunk_trials, int) or chunk_trials < 1:
        raise ValueError(f"chunk_trials must be a positive integer or None, got {chunk_trials!r}")
    seed = canonical_seed(seed)
    base = seed if isinstance(seed, list) else [seed]
    return [Unit(fn, {**params, trials_param: min(chunk_trials, n_trials - start)}, [*base, k])
            for k, start in enumerate(range(0, n_trials, chunk_trials))]


def _checked_params(fn, params) -> dict:
    if not isinstance(params, Mapping):
        raise ValueError(f"params must be a dict of keyword parameters, got {type(params).__name__}")
    for name, value in params.items():
        if not isinstance(name, str):
            raise ValueError(f"parameter names must be str, got {name!r} for a unit of {function_name(fn)}")
        if name == "seed":
            raise ValueError("params must not contain 'seed': it is given apart, Unit(fn, params, seed=...)")
        try:
            encode(value, where=f"parameter {name!r}", convert=False)
        except ValueError as error:
            raise ValueError(f"{error} (a parameter of a unit of {function_name(fn)})") from None
    return dict(params)


def function_name(fn) -> str:
    """``module.qualname`` of a unit's function (of its class for a callable object)."""
    require_callable(fn, "fn")
    module = getattr(fn, "__module__", None) or type(fn).__module__
    qualname = getattr(fn, "__qualname__", None) or type(fn).__qualname__
    return f"{module}.{qualname}"


def canonical_seed(seed):
    """A seed as an int or a list of ints (a tuple becomes a list: numpy reads both the same)."""
    def entry(value):
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or value < 0:
            raise ValueError(f"seed must be a non-negative int or a non-empty list/tuple of them "
                             f"(e.g. [SEED, i, j]), got {seed!r}")
        return int(value)

    if isinstance(seed, (list, tuple)):
        if not seed:
            raise ValueError(f"seed must not be an empty {type(seed).__name__}")
        return [entry(value) for value in seed]
    return entry(seed)


# ---------------------------------------------------------------- JSON-like values

_ARRAY_KINDS = "biufU"               # bool, int, unsigned, float, str: exact through JSON
_MARKERS = ("__ndarray__", "__tuple__", "__numpy__")


def encode(value, where: str = "value", convert: bool = True, compact: bool = False):
    """``value`` as plain JSON types, numpy arrays, numpy scalars and tuples marked so that ``decode``
    restores them exactly. With ``convert=False`` only checks. With ``compact=True`` numeric arrays of
    ``COMPACT_SIZE`` or more elements are written as base64 of their bytes (about half the length of
    their decimals; the store's results). ValueError names ``where`` the value that JSON cannot hold sits."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, (np.generic, np.ndarray)):
        return _encode_numpy(value, where, convert, compact)
    if isinstance(value, (int, float)):
        return value
    if isinstance(value, tuple):
        items = [encode(item, f"{where}[{i}]", convert, compact) for i, item in enumerate(value)]
        return {"__tuple__": items} if convert else None
    if isinstance(value, list):
        items = [encode(item, f"{where}[{i}]", convert, compact) for i, item in enumerate(value)]
        return items if convert else None
    if isinstance(value, dict):
        for key in value:
            if not isinstance(key, str) or key in _MARKERS:
                raise ValueError(f"{where} has the key {key!r}: keys must be str (and not {_MARKERS})")
        items = {key: encode(item, f"{where}[{key!r}]", convert, compact) for key, item in value.items()}
        return items if convert else None
    raise ValueError(f"{where} has type {type(value).__name__}, which is not JSON-like: use None, bool, "
                     f"int, float, str, lists, tuples, dicts with str keys, numpy arrays or scalars")


COMPACT_SIZE = 16


def _encode_numpy(value, where, convert, compact=False):
    if value.dtype.kind not in _ARRAY_KINDS:
        raise ValueError(f"{where} is numpy data of dtype {value.dtype}: only bool, int, float and str "
                         f"dtypes are JSON-like")
    if not convert:
        return None
    if isinstance(value, np.generic):
        return {"__numpy__": value.item(), "dtype": value.dtype.str}
    if compact and value.dtype.kind in "biuf" and value.size >= COMPACT_SIZE:
        little = value.astype(value.dtype.newbyteorder("<"), copy=False)
        return {"__ndarray__": base64.b64encode(np.ascontiguousarray(little).tobytes()).decode("ascii"),
                "dtype": little.dtype.str, "shape": list(value.shape)}
    return {"__ndarray__": value.tolist(), "dtype": value.dtype.str, "shape": list(value.shape)}


def decode(value):
    """The inverse of ``encode``: arrays, numpy scalars and tuples come back with their dtypes and types."""
    try:
        return _decode(value)
    except (TypeError, ValueError, KeyError) as error:
        raise ValueError(f"value is not what encode writes: {type(error).__name__}: {error}") from None


def _decode(value):
    if isinstance(value, list):
        return [_decode(item) for item in value]
    if not isinstance(value, dict):
        return value
    if "__ndarray__" in value:
        data, dtype = value["__ndarray__"], np.dtype(value["dtype"])
        if isinstance(data, str):                # compact: base64 of the bytes
            return np.frombuffer(base64.b64decode(data), dtype=dtype).reshape(value["shape"]).copy()
        return np.array(data, dtype=dtype).reshape(value["shape"])
    if "__numpy__" in value:
        return np.dtype(value["dtype"]).type(value["__numpy__"])
    if "__tuple__" in value:
        return tuple(_decode(item) for item in value["__tuple__"])
    return {key: _decode(item) for key, item in value.items()}


# ---------------------------------------------------------------- what code a unit runs


def _sha(text) -> str:
    data = text if isinstance(text, bytes) else str(text).encode()
    return hashlib.sha256(data).hexdigest()


@lru_cache(maxsize=1)
def _library_paths() -> tuple:
    """Directories of the standard library and of installed packages."""
    paths = {sysconfig.get_paths()[name] for name in ("stdlib", "platstdlib", "purelib", "platlib")}
    paths.update(site.getsitepackages() + [site.getusersitepackages()])
    return tuple(str(Path(p).resolve()) + os.sep for p in paths if p)


def is_library_module(name) -> bool:
    """True for mcmc_lib (hashed as a whole), the standard library and installed packages; False for
    notebook-level code: ``__main__``, a notebook's cells, a test module, a script next to a chapter."""
    if name is not None and not isinstance(name, str):
        if isinstance(name, (list, tuple)):
            raise ValueError(f"name must be one module name, got a {type(name).__name__} of {len(name)}")
        raise wrong_type("name", "a module name (str) or None", name)
    if not name or name == "__main__":
        return False
    if name == "mcmc_lib" or name.startswith("mcmc_lib."):
        return True
    module = sys.modules.get(name)
    if module is None:
        return False
    path = getattr(module, "__file__", None)
    if path is None:
        return name in sys.builtin_module_names
    return str(Path(path).resolve()).startswith(_library_paths())


def _hashed(kind, digest):
    """What the hashing pickler writes in place of notebook-level code (never called)."""


class _HashPickler(pickle.Pickler):
    """A pickler for hashing only: notebook-level functions, classes and modules are replaced by their
    fingerprints (sources, not code objects, whose file names change between sessions)."""

    def __init__(self, file, fingerprint):
        super().__init__(file, protocol=5)
        self._fingerprint = fingerprint

    def reducer_override(self, obj):
        plain = isinstance(obj, (types.FunctionType, type, types.ModuleType))
        wrapped = None if plain else getattr(obj, "__wrapped__", None)
        if isinstance(wrapped, types.FunctionType) and not is_library_module(wrapped.__module__):
            # A notebook function under a C-level decorator (functools.lru_cache) would pickle by
            # name alone: hash the source of the function it wraps instead.
            return _hashed, ("wrapped", type(obj).__qualname__, self._fingerprint.value(wrapped, "code"))
        if plain:
            name = obj.__name__ if isinstance(obj, types.ModuleType) else getattr(obj, "__module__", None)
            if is_library_module(name):
                self._fingerprint.note_library(name, obj if isinstance(obj, types.ModuleType) else None)
                if isinstance(obj, types.ModuleType):
                    return _hashed, ("module", name)
                return NotImplemented                # pickled by reference: module and name
            return _hashed, ("code", self._fingerprint.value(obj, "code"))
        return NotImplemented


def _global_names(code) -> set:
    """Names a code object (and the functions, classes and comprehensions inside it) reads as globals."""
    names = {ins.argval for ins in dis.get_instructions(code)
             if ins.opname in ("LOAD_GLOBAL", "LOAD_NAME", "STORE_GLOBAL", "DELETE_GLOBAL")}
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _global_names(const)
    return names


def _code_digest(code) -> str:
    """A code object's digest without its file name and line numbers (for functions with no source)."""
    consts = [_code_digest(c) if isinstance(c, types.CodeType) else
              repr(sorted(map(repr, c))) if isinstance(c, frozenset) else repr(c) for c in code.co_consts]
    return _sha(repr((code.co_code, consts, code.co_names, code.co_varnames, code.co_freevars,
                      code.co_cellvars, code.co_exceptiontable)))


_CLASS_SKIP = {"__dict__", "__weakref__", "__module__", "__qualname__", "__doc__", "__annotations__",
               "__dataclass_fields__", "__dataclass_params__", "__match_args__", "__slots__"}


def _is_plain_scalar(value) -> bool:
    return value is None or type(value) in (bool, int, float, str, bytes)


class Fingerprint:
    """The fingerprint of notebook-level code, and the mcmc_lib modules it reaches."""

    def __init__(self):
        self._digests = {}           # id(obj) -> digest (a placeholder while visiting: recursion)
        self._alive = []             # keeps visited objects alive, so ids stay unique
        self._open = set()           # ids of containers being hashed (a cycle ends there)
        self.library_modules = set()  # mcmc_lib modules reached: their imports are followed when hashing
        self.all_library = False     # reached something that may use any of mcmc_lib

    def note_library(self, module_name, module=None):
        """Record that the code reaches ``module_name`` (a function's or class's module, or a module
        object). A package reached as an object (``import mcmc_lib``, ``from mcmc_lib import methods``)
        gives attribute access to any submodule: then all of mcmc_lib counts."""
        if not module_name or not (module_name == "mcmc_lib" or module_name.startswith("mcmc_lib.")):
            return
        if module is not None and hasattr(module, "__path__"):
            self.all_library = True
        self.library_modules.add(module_name)

    def value(self, obj, where: str) -> str:
        """Digest of anything a unit uses: functions and classes by source; numbers, strings, numpy arrays
        and the lists, tuples, dicts and sets of them by their contents (whatever objects they share, and
        whatever the order of a set); other objects by their pickle."""
        if isinstance(obj, (types.FunctionType, type, types.ModuleType)):
            return self._memoised(obj)
        if _is_plain_scalar(obj):
            return _sha(repr((type(obj).__name__, obj)))
        if isinstance(obj, (np.ndarray, np.generic)) and obj.dtype.kind in "biufcSU":
            array = np.ascontiguousarray(obj)
            return _sha(repr(("ndarray" if isinstance(obj, np.ndarray) else "numpy", array.dtype.str, array.shape))
                        .encode() + array.tobytes())
        if isinstance(obj, (list, tuple, dict, set, frozenset)):
            return self._container(obj, where)
        buffer = io.BytesIO()
        try:
            _HashPickler(buffer, self).dump(obj)
        except Exception as error:  # any pickling failure: say which value, then how to avoid it
            raise ValueError(f"{where} (a {type(obj).__name__}) cannot be hashed for the unit cache: {error}. "
                             f"Build it inside the unit, or pass what defines it as a parameter") from error
        return _sha(buffer.getvalue())

    def _container(self, obj, where: str) -> str:
        kind = type(obj).__name__
        if isinstance(obj, (list, tuple)) and all(map(_is_plain_scalar, obj)):
            return _sha(repr((kind, [(type(item).__name__, item) for item in obj])))     # fast path
        if id(obj) in self._open:
            return _sha(f"cycle {kind}")
        self._open.add(id(obj))
        try:
            if isinstance(obj, dict):
                parts = [(self.value(key, f"a key of {where}"), self.value(item, f"{where}[{key!r}]"))
                         for key, item in obj.items()]
            elif isinstance(obj, (set, frozenset)):
                parts = sorted(self.value(item, f"an element of {where}") for item in obj)
            else:
                parts = [self.value(item, f"{where}[{i}]") for i, item in enumerate(obj)]
        finally:
            self._open.discard(id(obj))
        return _sha(repr((kind, parts)))

    def _memoised(self, obj) -> str:
        if id(obj) in self._digests:
            return self._digests[id(obj)]
        name = obj.__name__ if isinstance(obj, types.ModuleType) else getattr(obj, "__module__", None)
        qualname = getattr(obj, "__qualname__", obj.__name__)
        self._alive.append(obj)
        if is_library_module(name):
            self.note_library(name, obj if isinstance(obj, types.ModuleType) else None)
            digest = _sha(f"library {name} {qualname}")
        else:
            self._digests[id(obj)] = _sha(f"visiting {name} {qualname}")
            visit = (self._function if isinstance(obj, types.FunctionType) else
                     self._class if isinstance(obj, type) else self._module)
            digest = _sha("\n".join([f"{name} {qualname}"] + visit(obj)))
        self._digests[id(obj)] = digest
        return digest

    def _function(self, fn) -> list:
        try:
            parts = [inspect.getsource(fn.__code__)]   # its own code: a decorator's wrapper is not unwrapped
        except (OSError, TypeError):             # made by exec (dataclass methods): no file to read
            parts = [_code_digest(fn.__code__)]
        self._note_imports(fn.__code__)
        for name in sorted(_global_names(fn.__code__)):
            if name in fn.__globals__:
                parts.append(f"{name}={self.value(fn.__globals__[name], f'global {name!r} of {fn.__qualname__}')}")
        parts.append(self.value((fn.__defaults__, fn.__kwdefaults__), f"the defaults of {fn.__qualname__}"))
        cells = [cell.cell_contents for cell in fn.__closure__ or () if _cell_is_set(cell)]
        parts.append(self.value(cells, f"the closure of {fn.__qualname__}"))
        if hasattr(fn, "__wrapped__"):
            parts.append(self.value(fn.__wrapped__, f"the function {fn.__qualname__} wraps"))
        return parts

    def _note_imports(self, code):
        """mcmc_lib modules imported inside a function (``from mcmc_lib.x import y`` in its body)."""
        module = None
        for ins in dis.get_instructions(code):
            if ins.opname == "IMPORT_NAME":
                module = ins.argval if str(ins.argval).split(".")[0] == "mcmc_lib" else None
                if module is not None:
                    self.note_library(module)
                    if module == "mcmc_lib":
                        self.all_library = True        # ``import mcmc_lib`` then attribute access
            elif ins.opname == "IMPORT_FROM" and module is not None:
                self.note_library(f"{module}.{ins.argval}")
        for const in code.co_consts:
            if isinstance(const, types.CodeType):
                self._note_imports(const)

    def _class(self, cls) -> list:
        parts = [self.value(base, f"a base of {cls.__qualname__}") for base in cls.__bases__]
        for name, attr in sorted(vars(cls).items()):
            if name in _CLASS_SKIP:
                continue
            if isinstance(attr, (staticmethod, classmethod)):
                attr = attr.__func__
            if isinstance(attr, property):
                attr = (attr.fget, attr.fset, attr.fdel)
            if isinstance(attr, (types.MemberDescriptorType, types.GetSetDescriptorType)):
                continue                         # slots: no code, no value
            parts.append(f"{name}={self.value(attr, f'{cls.__qualname__}.{name}')}")
        return parts

    def _module(self, module) -> list:
        self.all_library = True                  # its imports are not followed: assume it reaches any
        try:
            return [inspect.getsource(module)]
        except (OSError, TypeError) as error:
            raise ValueError(f"the module {module.__name__} that a unit uses has no source to hash") from error


def _cell_is_set(cell) -> bool:
    try:
        cell.cell_contents
    except ValueError:                           # a closure variable not assigned yet
        return False
    return True


# ---------------------------------------------------------------- mcmc_lib's sources


def _module_name(path: Path, package_dir: Path) -> str:
    parts = list(path.relative_to(package_dir).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(["mcmc_lib"] + parts)


def _imports(path: Path, package_dir: Path, known) -> set:
    """The mcmc_lib modules (among ``known``) a source file imports, anywhere in it (function bodies too)."""
    import ast

    module = _module_name(path, package_dir)
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = ".".join(package[:len(package) - node.level + 1]) if node.level else ""
            stem = ".".join(filter(None, [base, node.module or ""]))
            found.add(stem)
            found.update(f"{stem}.{alias.name}" for alias in node.names)   # a submodule, if it is one
    return found & known


@lru_cache(maxsize=64)
def _library_graph(package_dir: Path, signature: tuple) -> tuple[dict, dict]:
    """({module name: file}, {module name: the mcmc_lib modules it imports}) of the package's sources."""
    files = {_module_name(path, package_dir): path for path in sorted(package_dir.rglob("*.py"))}
    known = frozenset(files)
    return files, {name: _imports(path, package_dir, known) for name, path in files.items()}


def _current_graph(package_dir: Path) -> tuple[dict, dict]:
    """``_library_graph`` of the package's sources as they are now (re-read when a file changes)."""
    signature = tuple((str(p), p.stat().st_mtime_ns, p.stat().st_size) for p in sorted(package_dir.rglob("*.py")))
    return _library_graph(package_dir, signature)


def _closure(modules, files: dict, imports: dict) -> list[str]:
    if modules is None:
        return sorted(files)
    reached, todo = set(), [name for name in modules if name in files]
    while todo:
        name = todo.pop()
        if name not in reached:
            reached.add(name)
            todo.extend(imports[name] - reached)
    return sorted(reached)


def _modules(modules):
    """None, or the dotted names of mcmc_lib modules (a list, tuple, set or frozenset of str; not one str)."""
    if modules is None:
        return None
    if isinstance(modules, str):
        raise ValueError(f"modules must be a collection of module names, got the string {modules!r} "
                         f"(write [{modules!r}])")
    if not isinstance(modules, (list, tuple, set, frozenset)):
        raise wrong_type("modules", "None or a collection of module names", modules)
    for module in modules:
        if not isinstance(module, str):
            raise wrong_type("modules", "module names (str)", module)
    return modules


def library_closure(modules, package_dir: Path = PACKAGE_DIR) -> list[str]:
    """``modules`` and every mcmc_lib module they import, transitively, sorted (every module of the
    package when ``modules`` is None)."""
    return _closure(_modules(modules), *_current_graph(require_path(package_dir, "package_dir")))


def library_code_hash(modules=None, package_dir: Path = PACKAGE_DIR) -> str:
    """sha256 of the sources of the mcmc_lib modules ``modules`` (dotted names) and of every mcmc_lib
    module they import, transitively; of all of mcmc_lib when ``modules`` is None. A unit's cache key
    and a stored run's provenance use the modules its code reaches, so that editing a module no unit
    runs (the store, the claims, the book's helpers) leaves cached and stored results current."""
    package_dir = require_path(package_dir, "package_dir")
    files, imports = _current_graph(package_dir)
    digest = hashlib.sha256()
    for name in _closure(_modules(modules), files, imports):
        path = files[name]
        digest.update(path.relative_to(package_dir).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def environment() -> dict:
    """What else decides a unit's floating-point results: Python, numpy and scipy versions, the architecture
    (the kernels within it are held fixed by mcmc_lib.portable, and are not part of the key)."""
    versions = {}
    for package in ("numpy", "scipy"):
        try:
            versions[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            versions[package] = None
    return {"python": platform.python_version(), "machine": platform.machine(), **versions}


def function_fingerprint(fn) -> tuple[str, frozenset | None]:
    """(digest of a unit's function and of the notebook-level code it reaches, the mcmc_lib modules it
    reaches directly: None when it may reach any)."""
    require_callable(fn, "fn")
    fingerprint = Fingerprint()
    digest = fingerprint.value(fn, f"the unit function {function_name(fn)}")
    return digest, None if fingerprint.all_library else frozenset(fingerprint.library_modules)


def function_code(fn) -> tuple[str, str]:
    """(digest of a unit's function and the notebook-level code it reaches, hash of the mcmc_lib code
    it may run)."""
    require_callable(fn, "fn")
    digest, modules = function_fingerprint(fn)
    return digest, library_code_hash(modules)


def unit_keys(units) -> list[str]:
    """The cache key of every unit (functions fingerprinted once each)."""
    units = _units_list(units)
    codes, env = {}, environment()
    keys = []
    for unit in units:
        if id(unit.fn) not in codes:
            codes[id(unit.fn)] = function_code(unit.fn)
        source, library = codes[id(unit.fn)]
        payload = {"format": CACHE_FORMAT, "function": function_name(unit.fn), "source": source,
                   "library": library, "environment": env, "params": encode(unit.params, "params"),
                   "seed": unit.seed}
        keys.append(_sha(json.dumps(payload, sort_keys=True)))
    return keys


# ---------------------------------------------------------------- the cache


def cache_directory(cache=None) -> Path | None:
    """Where unit results are cached: ``cache`` if given, else MCMC_BOOK_CACHE, else ``cache/units`` of
    ``output_directory()`` (``_build/cache/units`` at the repository root when run inside it); None when
    the setting is off."""
    if cache is not None and not isinstance(cache, (bool, str, os.PathLike)):
        if isinstance(cache, (list, tuple)):
            raise ValueError(f"cache must be one directory (or \"off\"), got a {type(cache).__name__} of {len(cache)}")
        raise wrong_type("cache", "a directory (str or pathlib.Path), \"off\", or None", cache)
    setting = os.environ.get(CACHE_ENV, "") if cache is None else cache
    if setting is False or str(setting).strip().lower() in _OFF:
        return None
    if setting is True or str(setting).strip() == "":
        return output_directory() / "cache" / "units"
    return Path(setting).expanduser()


def _entry_path(directory: Path, unit, key: str, suffix: str) -> Path:
    name = "".join(c if c.isalnum() or c in "._-" else "_" for c in function_name(unit.fn))
    return directory / name / f"{key}{suffix}"


NOW = object()   # a save's ``finished`` default: the unit finished just now (no recorded time can equal it)


def finished_now() -> str:
    """When a unit finished, as an entry records it: ISO 8601 in UTC to the second."""
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def _finished(finished) -> str | None:
    """A save's ``finished``: now (``NOW``), or the time an earlier record gave (None: not recorded)."""
    return finished_now() if finished is NOW else finished


class UnitCache:
    """One pickle per finished unit, ``<dir>/<module.function>/<key>.pkl``, written atomically."""

    def __init__(self, directory: Path | None):
        self.directory = None if directory is None else require_path(directory, "directory")

    def _path(self, unit, key) -> Path:
        return _entry_path(self.directory, unit, key, ".pkl")

    def load(self, unit, key):
        """The cached entry {"result", "seconds", "cpu_seconds", ...} or None."""
        if self.directory is None:
            return None
        try:
            with open(self._path(unit, key), "rb") as file:
                return pickle.load(file)
        except FileNotFoundError:
            return None
        except Exception:  # an unreadable entry (truncated disk, other numpy): recompute it
            return None

    def has(self, unit, key) -> bool:
        return self.directory is not None and self._path(unit, key).exists()

    def forget(self, unit, key) -> None:
        """Delete the unit's entry, if any: the next run computes it again."""
        if self.directory is not None:
            self._path(unit, key).unlink(missing_ok=True)

    def save(self, unit, key, result, seconds, cpu_seconds=None, machine=None, finished=NOW):
        """Keep the unit's entry; ``finished``: when it finished, if not now (a carried measurement)."""
        if self.directory is None:
            return
        path = self._path(unit, key)
        path.parent.mkdir(parents=True, exist_ok=True)
        entry = {"result": result, "seconds": seconds, "cpu_seconds": cpu_seconds, "machine": machine,
                 "function": function_name(unit.fn), "params": unit.params, "seed": unit.seed,
                 "finished": _finished(finished)}
        # Write beside, then rename: a reader never sees half a file, even if this run is killed.
        with tempfile.NamedTemporaryFile(dir=path.parent, prefix=".", suffix=".tmp", delete=False) as file:
            pickle.dump(entry, file, protocol=5)
        os.replace(file.name, path)


class UnitCheckpoint:
    """A paper run's finished units in the repository, so that a run longer than one machine's life
    resumes on another from a clone: one JSON file per unit, ``<dir>/<module.function>/<key>.json``,
    under the cache's key and with the result encoded as in the store (``encode``, compact). The store
    keeps it at ``results/paper/<chapter>/checkpoint/`` while a chapter's paper run is unfinished, and
    empties it of an experiment's units once their results are stored (``mcmc_lib.store``)."""

    def __init__(self, directory):
        self.directory = require_path(directory, "directory")

    def _path(self, unit, key) -> Path:
        return _entry_path(self.directory, unit, key, ".json")

    def load(self, unit, key):
        """The checkpointed entry (as ``UnitCache.load``) or None."""
        try:
            entry = json.loads(self._path(unit, key).read_text())
        except FileNotFoundError:
            return None
        except ValueError:       # unreadable (a file cut short by a failed copy or merge): recompute the unit
            return None
        entry["result"] = decode(entry["result"])
        return entry

    def has(self, unit, key) -> bool:
        return self._path(unit, key).exists()

    def forget(self, unit, key) -> None:
        """Delete the unit's entry, if any: the run computes it again."""
        self._path(unit, key).unlink(missing_ok=True)

    def save(self, unit, key, result, seconds, cpu_seconds=None, machine=None, finished=NOW):
        """As ``UnitCache.save``."""
        path = self._path(unit, key)
        path.parent.mkdir(parents=True, exist_ok=True)
        entry = {"function": function_name(unit.fn), "params": encode(unit.params, "params"), "seed": unit.seed,
                 "seconds": seconds, "cpu_seconds": cpu_seconds, "machine": machine,
                 "finished": _finished(finished), "result": encode(result, "the result", compact=True)}
        temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        temporary.write_text(json.dumps(entry) + "\n")
        os.replace(temporary, path)

    def remove(self, units, keys=None) -> int:
        """Delete ``units``' entries (their results are stored now) and the folders left empty; how many.
        ``keys``: the keys they were run under (``RunStats.keys``), else computed now."""
        removed = 0
        for unit, key in zip(units, unit_keys(units) if keys is None else keys):
            path = self._path(unit, key)
            if path.exists():
                path.unlink()
                removed += 1
        for folder in sorted(self.directory.glob("*"), reverse=True) if self.directory.exists() else []:
            if folder.is_dir() and not any(folder.iterdir()):
                folder.rmdir()
        if self.directory.exists() and not any(self.directory.iterdir()):
            self.directory.rmdir()
        return removed


# ---------------------------------------------------------------- running


class _OneBlasThread:
    """Limits BLAS to one thread while any unit runs in this process (threads of a Dask worker
    included: the first to enter sets the limit, the last to leave restores it)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._depth = 0
        self._controller = None
        self._limiter = None

    def __enter__(self):
        with self._lock:
            if self._controller is None:
                import scipy.linalg  # noqa: F401  loads scipy's own BLAS, so that the limit covers it too
                from threadpoolctl import ThreadpoolController
                self._controller = ThreadpoolController()
            if self._depth == 0:
                self._limiter = self._controller.limit(limits=1)
            self._depth += 1

    def __exit__(self, *exc):
        with self._lock:
            self._depth -= 1
            if self._depth == 0:
                self._limiter.restore_original_limits()


_ONE_BLAS_THREAD = _OneBlasThread()


def call_unit(index, fn, params, seed):
    """Run one unit where it lands (this process, a loky worker, a Dask worker): (index, result,
    (wall seconds, CPU seconds, machine)). The CPU time is the running thread's: with one BLAS thread it
    is the unit's compute time even on a busy machine, where the wall time also counts the waiting. The
    machine (``machine_label``) is the one the unit ran on, which a Dask worker's need not share."""
    require_callable(fn, "fn")
    require_mapping(params, "params")
    start, start_cpu = time.perf_counter(), time.thread_time()
    with _ONE_BLAS_THREAD:
        result = fn(seed=seed, **params)
    return index, result, (time.perf_counter() - start, time.thread_time() - start_cpu, machine_label())


def cpu_model() -> str:
    """The CPU's model name (Linux), else what the platform says."""
    try:
        with open("/proc/cpuinfo") as file:
            return next(line.split(":", 1)[1].strip() for line in file if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or platform.machine()


@lru_cache(maxsize=1)
def machine_label() -> str:
    """Where a unit was computed: the CPU model and the floating point it computed with (portable or
    native, ``mcmc_lib.portable``). Kept with every cached and checkpointed unit, since a paper run's
    units can be computed over several sittings on different machines."""
    from . import portable
    return label_of(cpu_model(), portable.describe())


def label_of(cpu: str, floating_point) -> str:
    """The one spelling of a machine's label, shared by the units' records and the stores' provenance."""
    require_str(cpu, "cpu")
    if floating_point is not None and not isinstance(floating_point, str):     # None: an old record lacks it
        raise wrong_type("floating_point", "a string (mcmc_lib.portable.describe()) or None", floating_point)
    return f"{cpu}, {floating_point}"


def job_count(jobs=None) -> int:
    """Local worker processes: ``jobs`` if given, else MCMC_BOOK_JOBS, else every core."""
    name, raw = ("jobs", jobs) if jobs is not None else (JOBS_ENV, os.environ.get(JOBS_ENV, ""))
    if str(raw).strip() in ("", "0", "auto"):
        return os.cpu_count() or 1
    try:
        count = int(raw)
    except (TypeError, ValueError):
        count = 0
    if isinstance(raw, float) and raw != count:       # 2.5 jobs is not 2
        count = 0
    if isinstance(raw, bool) or count < 1:
        raise ValueError(f"{name} must be a positive integer (or empty/0/auto for every core), got {raw!r}")
    return count


def dask_scheduler(scheduler=None):
    """A Dask scheduler address (or Client): ``scheduler`` if given, else MCMC_BOOK_DASK_SCHEDULER, else None."""
    if scheduler is not None:
        if isinstance(scheduler, (list, tuple)):
            raise ValueError(f"scheduler must be one address or Client, got a {type(scheduler).__name__}")
        if not isinstance(scheduler, str) and not callable(getattr(scheduler, "submit", None)):
            raise wrong_type("scheduler", "a Dask scheduler address (\"tcp://host:8786\") or a distributed.Client",
                             scheduler)
        return scheduler
    return os.environ.get(SCHEDULER_ENV, "").strip() or None


def _serially(pending):
    for index, unit in pending:
        yield call_unit(index, unit.fn, unit.params, unit.seed)


def _on_loky(pending, jobs):
    from joblib import Parallel, delayed, parallel_config

    # Unordered: each result is cached the moment it arrives, not when the ones before it have.
    with parallel_config(backend="loky", inner_max_num_threads=1):
        parallel = Parallel(n_jobs=jobs, return_as="generator_unordered")
        yield from parallel(delayed(call_unit)(i, unit.fn, unit.params, unit.seed) for i, unit in pending)


def _on_dask(pending, scheduler, info):
    from distributed import Client, as_completed

    client = scheduler if isinstance(scheduler, Client) else Client(scheduler)
    info["jobs"] = sum(client.nthreads().values())
    futures = [client.submit(call_unit, i, unit.fn, unit.params, unit.seed, pure=False) for i, unit in pending]
    try:
        for future in as_completed(futures):
            yield future.result()
    finally:
        unfinished = [future for future in futures if not future.done()]
        if unfinished:                           # after an error or an interrupt: stop the rest
            client.cancel(unfinished)
        if client is not scheduler:
            client.close()


@dataclass
class RunStats:
    """How a set of units ran: counts, backend, wall time, and each unit's wall and CPU time (from the
    cache for units computed earlier; CPU time and machine None where an older entry lacks them)."""
    n_units: int
    n_cached: int
    backend: str                     # "cache" (nothing to compute), "serial", "loky" or "dask <address>"
    jobs: int                        # worker processes (loky), threads of the cluster (dask), 1 (serial)
    wall_seconds: float
    unit_seconds: list = field(default_factory=list)
    unit_cpu_seconds: list = field(default_factory=list)
    unit_machines: list = field(default_factory=list)   # where each unit ran (machine_label; None: not recorded)
    keys: list = field(default_factory=list)     # each unit's cache key (None with no cache or checkpoint)
    # when each unit finished (``finished_now``; None: an entry older than that record): which units of a
    # timed comparison were measured in the same sitting
    unit_finished: list = field(default_factory=list)


def _backend(n_pending, jobs, scheduler):
    if n_pending == 0:
        return "cache", 0
    if scheduler is not None:
        return f"dask {scheduler if isinstance(scheduler, str) else scheduler.scheduler.address}", 0
    if jobs == 1 or n_pending == 1:
        return "serial", 1
    return "loky", min(jobs, n_pending)


def _compute(pending, backend, workers, scheduler, info):
    """An iterator of (index, result, (wall seconds, CPU seconds)) in the order the units finish."""
    if backend == "cache":
        return iter(())
    if backend == "serial":
        return _serially(pending)
    if backend == "loky":
        return _on_loky(pending, workers)
    return _on_dask(pending, scheduler, info)


def _show_progress(progress):
    from .harness import _show_progress as terminal_only
    return terminal_only(progress)


def run_with_stats(units, label: str | None = None, jobs=None, scheduler=None, cache=None, progress=None,
                   checkpoint=None, keys=None):
    """``run_units`` that also says how the units ran: (results, RunStats). ``keys``: the units'
    ``unit_keys`` when the caller has them already."""
    units = _units_list(units)
    store = UnitCache(cache_directory(cache))
    kept = UnitCheckpoint(checkpoint) if checkpoint is not None else None
    if keys is None:
        keys = unit_keys(units) if store.directory is not None or kept is not None else [None] * len(units)
    results, seconds, pending = [None] * len(units), [0.0] * len(units), []
    cpu_seconds, machines, finished = [None] * len(units), [None] * len(units), [None] * len(units)
    for i, (unit, key) in enumerate(zip(units, keys)):
        entry = _load(store, kept, unit, key)
        if entry is None:
            pending.append((i, unit))
        else:
            results[i], seconds[i] = entry["result"], entry["seconds"]
            cpu_seconds[i], machines[i] = entry.get("cpu_seconds"), entry.get("machine")
            finished[i] = entry.get("finished")
    jobs, scheduler = job_count(jobs), dask_scheduler(scheduler)
    backend, workers = _backend(len(pending), jobs, scheduler)
    info = {"jobs": workers}
    computed = _compute(pending, backend, workers, scheduler, info)
    start = time.perf_counter()
    bar = _progress_bar(len(units), len(units) - len(pending), label, units, progress)
    try:
        for index, result, (unit_seconds, unit_cpu_seconds, machine) in computed:
            encode(result, where=f"the result of units[{index}] ({function_name(units[index].fn)})", convert=False)
            finished[index] = finished_now()
            store.save(units[index], keys[index], result, unit_seconds, unit_cpu_seconds, machine, finished[index])
            if kept is not None:
                kept.save(units[index], keys[index], result, unit_seconds, unit_cpu_seconds, machine, finished[index])
            results[index], seconds[index] = result, unit_seconds
            cpu_seconds[index], machines[index] = unit_cpu_seconds, machine
            if bar is not None:
                bar.update()
    finally:
        if hasattr(computed, "close"):           # after an error: stop the units still running
            computed.close()
        if bar is not None:
            bar.close()
    stats = RunStats(len(units), len(units) - len(pending), backend, info["jobs"],
                     time.perf_counter() - start, seconds, cpu_seconds, machines, keys, finished)
    return results, stats


def _load(store, kept, unit, key):
    """A unit's entry from the checkpoint, else from the cache. The checkpoint wins because it holds what
    this run measured or carried from the store: the same key gives the same result from either, but a
    cache entry left by another run (one stopped early, say) would swap in another sitting's time. A
    cached unit the checkpoint lacks is added to it (so that a run begun before it had a checkpoint
    carries over to another machine)."""
    entry = kept.load(unit, key) if kept is not None else None
    if entry is not None:
        return entry
    entry = store.load(unit, key)
    if entry is not None and kept is not None:
        kept.save(unit, key, entry["result"], entry["seconds"], entry.get("cpu_seconds"), entry.get("machine"),
                  entry.get("finished"))
    return entry


def _progress_bar(total, done, label, units, progress):
    """A tqdm bar on a terminal only: never in the rendered book, a notebook's output, or CI logs."""
    if total == 0 or not _show_progress(progress):
        return None
    from tqdm.auto import tqdm
    label = label or ", ".join(sorted({getattr(u.fn, "__name__", "unit") for u in units}))
    return tqdm(total=total, initial=done, desc=label, unit="unit", leave=False)


def run_units(units, label: str | None = None, jobs=None, scheduler=None, cache=None, progress=None,
              checkpoint=None) -> list:
    """Run ``units`` (a list of ``Unit``) and return their results in the same order.

    Cached results are loaded; the others run on MCMC_BOOK_JOBS local processes (``jobs``), or on the
    Dask cluster at MCMC_BOOK_DASK_SCHEDULER (``scheduler``: an address or a ``distributed.Client``),
    each cached as soon as it finishes. ``cache``: a directory, or "off" (default: MCMC_BOOK_CACHE,
    else ``_build/cache/units``). ``progress``: None shows a bar on a terminal only. ``checkpoint``: a
    directory that also keeps every finished unit, as JSON (``UnitCheckpoint``: the store's paper runs).
    """
    return run_with_stats(units, label, jobs, scheduler, cache, progress, checkpoint)[0]
