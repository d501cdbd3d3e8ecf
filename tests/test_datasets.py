"""Tests for mcmc_lib.datasets (the committed files under data/)."""

import hashlib
import shutil

import numpy as np
import pytest

from mcmc_lib import datasets


# expected (n, d incl. bias, number of y == 0, number of y == 1)
LOGISTIC = {
    "ripley": (250, 3, 125, 125),
    "pima": (532, 8, 355, 177),     # 0 = "No", 1 = "Yes"
    "german": (1000, 49, 700, 300),  # 0 = "Good", 1 = "Bad"
    "caravan": (5822, 86, 5474, 348),
}


@pytest.fixture(scope="module")
def logistic():
    return {name: datasets.load_logistic_dataset(name) for name in LOGISTIC}


@pytest.mark.parametrize("name", sorted(LOGISTIC))
def test_logistic_shapes_and_labels(logistic, name):
    n, d, n0, n1 = LOGISTIC[name]
    X, y = logistic[name]
    assert X.dtype == np.float64 and y.dtype == np.float64
    assert X.shape == (n, d)
    assert y.shape == (n,)
    assert set(np.unique(y)) <= {0.0, 1.0}
    assert int(np.sum(y == 0)) == n0
    assert int(np.sum(y == 1)) == n1
    assert np.all(np.isfinite(X))


@pytest.mark.parametrize("name", sorted(LOGISTIC))
def test_logistic_standardised_with_bias_last(logistic, name):
    X, _ = logistic[name]
    np.testing.assert_array_equal(X[:, -1], 1.0)
    Z = X[:, :-1]
    np.testing.assert_allclose(Z.mean(axis=0), 0.0, atol=1e-12)
    np.testing.assert_allclose(Z.std(axis=0, ddof=1), 1.0, rtol=1e-12)


@pytest.mark.parametrize("name", sorted(LOGISTIC))
def test_logistic_design_full_rank(logistic, name):
    X, _ = logistic[name]
    assert np.linalg.matrix_rank(X) == X.shape[1]


def test_ripley_values_match_raw_file(logistic):
    # standardisation must be (x - mean) / sd(ddof=1) of the raw column
    X, _ = logistic["ripley"]
    raw = np.loadtxt(datasets.DATA_DIR / "ripley_synth_tr.csv", delimiter=",",
                     skiprows=1)
    xs = raw[:, 0]
    np.testing.assert_allclose(X[:, 0], (xs - xs.mean()) / xs.std(ddof=1), rtol=1e-12)
    np.testing.assert_array_equal(logistic["ripley"][1], raw[:, 2])


def test_german_encoding():
    names = datasets.german_feature_names()
    assert len(names) == 48
    dropped = set(datasets.GERMAN_DROPPED_CONSTANT) | set(datasets.GERMAN_DROPPED_REFERENCE)
    assert not dropped & set(names)
    assert len(datasets.GERMAN_DROPPED_REFERENCE) == 11
    # the dropped "constant" columns really are constant in the raw file,
    # and each factor's dummies (raw) sum to one on every row
    header, body = datasets._read_csv("german_credit_caret.csv")
    assert len(header) == 62
    for c in datasets.GERMAN_DROPPED_CONSTANT:
        col = datasets._column(header, body, c)
        assert np.all(col == col[0])
    for ref in datasets.GERMAN_DROPPED_REFERENCE:
        prefix = ref.split(".")[0] + "."
        members = [c for c in header if c.startswith(prefix)]
        assert members[0] == ref  # reference = first level in caret's order
        np.testing.assert_array_equal(datasets._columns(header, body, members).sum(axis=1), 1.0)


def test_unknown_name_raises():
    with pytest.raises(ValueError, match="name") as err:
        datasets.load_logistic_dataset("australian")
    msg = str(err.value)
    for valid in datasets.LOGISTIC_DATASETS:
        assert valid in msg


def test_glass():
    X, y = datasets.load_glass()
    assert X.shape == (214, 9) and X.dtype == np.float64
    assert int(y.sum()) == 163 and int((y == 0).sum()) == 51
    # raw, not standardised: refractive index is around 1.52
    assert 1.5 < X[:, 0].mean() < 1.53
    np.testing.assert_allclose(X[0], [1.52101, 13.64, 4.49, 1.10, 71.78, 0.06, 8.75, 0.0, 0.0])


def test_movielens():
    d = datasets.load_movielens()
    assert set(d) == {"user", "item", "rating"}
    n = 100004
    for k in d:
        assert d[k].shape == (n,)
    assert d["user"].dtype.kind == "i" and d["item"].dtype.kind == "i"
    assert d["rating"].dtype == np.float64
    assert d["user"].min() == 0 and d["item"].min() == 0
    n_users, n_items = d["user"].max() + 1, d["item"].max() + 1
    assert (n_users, n_items) == (671, 9066)
    assert len(np.unique(d["user"])) == n_users and len(np.unique(d["item"])) == n_items
    assert d["rating"].min() == 0.5 and d["rating"].max() == 5.0
    np.testing.assert_array_equal(d["rating"] * 2, np.round(d["rating"] * 2))


def test_mnist_subset():
    images, labels = datasets.load_mnist_subset()
    assert images.shape == (5000, 784) and images.dtype == np.float64
    assert images.min() == 0.0 and images.max() == 1.0
    assert labels.shape == (5000,) and labels.dtype.kind == "i"
    np.testing.assert_array_equal(np.bincount(labels), [500] * 10)


def test_summary_matches_files():
    summary = datasets.dataset_summary()
    assert {s["file"] for s in summary} == set(datasets.CHECKSUMS)
    for s in summary:
        assert set(s) >= {"name", "file", "rows", "columns", "sha256"}
        path = datasets.DATA_DIR / s["file"]
        assert hashlib.sha256(path.read_bytes()).hexdigest() == s["sha256"]
        if s["file"].endswith(".npz"):
            continue
        header, body = datasets._read_csv(s["file"])
        assert (len(body), len(header)) == (s["rows"], s["columns"]), s["file"]


@pytest.fixture
def data_copy(tmp_path, monkeypatch):
    for name in datasets.CHECKSUMS:
        shutil.copy(datasets.DATA_DIR / name, tmp_path / name)
    monkeypatch.setattr(datasets, "DATA_DIR", tmp_path)
    return tmp_path


def test_copy_of_data_loads(data_copy):
    X, y = datasets.load_logistic_dataset("ripley")
    assert X.shape == (250, 3)


def test_tampered_csv_fails(data_copy):
    path = data_copy / "ripley_synth_tr.csv"
    text = path.read_text()
    path.write_text(text.replace("0.05100797", "0.05100798", 1))
    with pytest.raises(datasets.DatasetChecksumError, match="ripley_synth_tr.csv"):
        datasets.load_logistic_dataset("ripley")


def test_tampered_binary_fails(data_copy):
    path = data_copy / "mnist_5k.npz"
    raw = bytearray(path.read_bytes())
    raw[-100] ^= 0xFF
    path.write_bytes(bytes(raw))
    with pytest.raises(datasets.DatasetChecksumError, match="mnist_5k.npz"):
        datasets.load_mnist_subset()


def test_missing_file_is_clear(data_copy):
    (data_copy / "glass.csv").unlink()
    with pytest.raises(FileNotFoundError, match="glass.csv"):
        datasets.load_glass()
