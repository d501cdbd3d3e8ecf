"""The literate exporter, the profiles, the claims registry and the reference checks."""
import json

import numpy as np
import pytest

from mcmc_lib import claims, literate, profiles, regression

CHAPTER = """---
jupytext:
  text_representation:
    extension: .md
    format_name: myst
kernelspec:
  display_name: Python 3
  language: python
  name: python3
---

# A chapter

```{code-cell} ipython3
:tags: [export]

def double(x):
    return 2 * x
```

```{code-cell} ipython3
print(double(3))   # experiment code: not exported
```

```{code-cell} ipython3
:tags: [export, hide-input]

TRIPLE = 3
```
"""


def test_export_writes_tagged_cells_in_order_and_check_detects_drift(tmp_path):
    book, methods = tmp_path / "book", tmp_path / "pkg" / "methods"
    book.mkdir()
    (book / "demo.md").write_text(CHAPTER)
    (book / "prose.md").write_text("# No code here\n")
    assert literate.out_of_date(book, methods) == ["pkg/methods/demo.py: missing or differs from its chapter"]
    literate.export(book, methods)
    module = (methods / "demo.py").read_text()
    assert "def double" in module and "TRIPLE = 3" in module and "print(double" not in module
    assert module.index("def double") < module.index("TRIPLE")
    assert "Generated from book/demo.md" in module
    assert literate.out_of_date(book, methods) == []
    namespace = {}
    exec(module, namespace)
    assert namespace["double"](2) == 4
    (book / "demo.md").write_text(CHAPTER.replace("2 * x", "x + x"))
    assert literate.out_of_date(book, methods) != []
    (book / "demo.md").unlink()
    assert "no chapter exports it" in literate.out_of_date(book, methods)[0]


def test_repository_methods_are_in_sync():
    assert literate.out_of_date() == []


def test_profiles(monkeypatch):
    monkeypatch.setenv("MCMC_BOOK_PROFILE", "smoke")
    assert profiles.choose(1, 2, 3) == 1
    assert profiles.sizes({"n": (10, 20, 30)}) == {"n": 10}
    monkeypatch.delenv("MCMC_BOOK_PROFILE")
    assert profiles.active_profile() == "default"
    monkeypatch.setenv("MCMC_BOOK_PROFILE", "huge")
    with pytest.raises(ValueError, match="MCMC_BOOK_PROFILE"):
        profiles.active_profile()


def test_old_form_claims_still_round_trip(tmp_path, monkeypatch):
    monkeypatch.setenv("MCMC_BOOK_PROFILE", "smoke")
    registry = claims.ClaimsRegistry("demo", directory=tmp_path)
    registry.add("c1", "x beats y", 7.4, 7.31, True)
    registry.add("c2", "z holds", "1.62x", "1.1x", False, note="scale")
    with pytest.raises(ValueError, match="already recorded"):
        registry.add("c1", "again", 1, 1, True)
    path = registry.write()
    data = json.loads(path.read_text())
    assert data["chapter"] == "demo" and data["claims"][0]["published"] == "7.4"
    loaded = claims.load_claims(tmp_path)["demo"]
    assert [c["outcome"] for c in loaded] == [claims.LEGACY_HOLDS, claims.LEGACY_FAILS]
    assert {c["profile"] for c in loaded} == {"smoke"}
    assert [c.holds for c in registry.claims] == [True, False]
    with pytest.raises(ValueError, match="stem"):
        claims.ClaimsRegistry("a/b")


def test_reference_checks(tmp_path, monkeypatch):
    monkeypatch.setattr(regression, "REFERENCE_DIR", tmp_path)
    monkeypatch.setenv("MCMC_BOOK_PROFILE", "smoke")
    monkeypatch.setenv("MCMC_BOOK_UPDATE_REFERENCES", "1")
    regression.check_reference("demo", "acc", 0.25, 0.05)
    monkeypatch.delenv("MCMC_BOOK_UPDATE_REFERENCES")
    assert "reference 0.25" in regression.check_reference("demo", "acc", 0.27, 0.05)
    with pytest.raises(regression.ReferenceMismatch, match="differs"):
        regression.check_reference("demo", "acc", 0.35, 0.05)
    with pytest.raises(regression.ReferenceMismatch, match="no reference"):
        regression.check_reference("demo", "other", 1.0, 0.1)
    with pytest.raises(ValueError, match="tolerance"):
        regression.check_reference("demo", "acc", 0.25, -1)
    monkeypatch.setenv("MCMC_BOOK_STORE", "on")         # smoke showing stored paper-scale results
    assert "shows stored results" in regression.check_reference("demo", "acc", 0.9, 0.05)
    monkeypatch.delenv("MCMC_BOOK_STORE")
    monkeypatch.setenv("MCMC_BOOK_PROFILE", "default")
    assert "smoke profile only" in regression.check_reference("demo", "acc", 0.9, 0.05)


def test_a_chapter_kernel_runs_blas_on_one_thread():
    """Chapters call one_blas_thread() in their setup: BLAS on one thread whatever the environment."""
    from threadpoolctl import threadpool_info, threadpool_limits

    from mcmc_lib.book import one_blas_thread

    with threadpool_limits(limits=2, user_api="blas"):      # as in a reader's Jupyter without OMP_NUM_THREADS
        one_blas_thread()
        blas = [pool for pool in threadpool_info() if pool["user_api"] == "blas"]
        assert blas and all(pool["num_threads"] == 1 for pool in blas)


def test_listed_writes_a_list_as_prose():
    from mcmc_lib.book import listed
    assert [listed(["a"]), listed(["a", "b"]), listed(["a", "b", "c"])] == ["a", "a and b", "a, b and c"]
    with pytest.raises(ValueError, match="items"):
        listed([])
