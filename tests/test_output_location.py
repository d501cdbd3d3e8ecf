"""Where a chapter writes its claims and unit cache (mcmc_lib.units.output_directory): the repository's
_build/ when it runs inside the repository (the book build, nbval, make: the scoreboard reads
claims.CLAIMS_DIR), ./mcmc_book_output/ when a notebook runs elsewhere, MCMC_BOOK_OUTPUT when set;
anywhere but _build/ it says where, once."""
from pathlib import Path

import pytest

from mcmc_lib import claims, units

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def fresh(monkeypatch):
    monkeypatch.setattr(units, "_ANNOUNCED", set())
    monkeypatch.delenv(units.OUTPUT_ENV, raising=False)
    monkeypatch.delenv(units.CACHE_ENV, raising=False)


def test_inside_the_repository_nothing_changes(monkeypatch, capsys):
    for where in (REPO, REPO / "book", REPO / "_build"):     # make, the book build, nbval
        monkeypatch.chdir(where if where.exists() else REPO)
        assert units.output_directory() == REPO / "_build"
        assert claims.claims_directory() == claims.CLAIMS_DIR == REPO / "_build" / "claims"
        assert claims.ClaimsRegistry("demo").directory == claims.CLAIMS_DIR
        assert units.cache_directory() == REPO / "_build" / "cache" / "units"
    assert capsys.readouterr().out == ""


def test_outside_the_repository_a_run_writes_beside_itself_and_says_where(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    registry = claims.ClaimsRegistry("demo")
    path = registry.write()
    assert path == tmp_path / "mcmc_book_output" / "claims" / "demo.json"
    assert claims.load_claims() == {"demo": []}                        # read back from the same place
    assert units.cache_directory() == tmp_path / "mcmc_book_output" / "cache" / "units"
    out = capsys.readouterr().out
    assert out.count("\n") == 1                                        # one line, once per process
    assert f"under {tmp_path / 'mcmc_book_output'}" in out and units.OUTPUT_ENV in out


def test_mcmc_book_output_chooses_the_place(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(REPO)
    monkeypatch.setenv(units.OUTPUT_ENV, str(tmp_path / "elsewhere"))
    assert claims.ClaimsRegistry("demo").write() == tmp_path / "elsewhere" / "claims" / "demo.json"
    assert units.cache_directory() == tmp_path / "elsewhere" / "cache" / "units"
    assert f"set by {units.OUTPUT_ENV}" in capsys.readouterr().out
    monkeypatch.setenv(units.CACHE_ENV, str(tmp_path / "cache"))      # MCMC_BOOK_CACHE still wins for the cache
    assert units.cache_directory() == tmp_path / "cache"
