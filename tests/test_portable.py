"""Portable floating point (mcmc_lib/portable.py): which machines get the settings, that they take
effect in a new process and in the workers it starts, and that make exports them."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mcmc_lib import portable

ROOT = Path(__file__).resolve().parent.parent
AVX2_FMA = {"sse2", "avx", "avx2", "fma"}
VARIABLES = tuple(portable.PORTABLE_VARIABLES)


def test_an_x86_64_with_avx2_and_fma_gets_the_haswell_kernels_and_no_avx512():
    settings = portable.portable_environment(flags=AVX2_FMA | {"avx512f"}, machine="x86_64", environ={})
    assert settings == {"OPENBLAS_CORETYPE": "Haswell",
                        "NPY_DISABLE_CPU_FEATURES": portable.PORTABLE_VARIABLES["NPY_DISABLE_CPU_FEATURES"]}
    assert "X86_V4" in settings["NPY_DISABLE_CPU_FEATURES"].split(",")


@pytest.mark.parametrize("flags, machine", [(AVX2_FMA - {"fma"}, "x86_64"), (AVX2_FMA - {"avx2"}, "x86_64"),
                                            (AVX2_FMA, "aarch64"), (set(), "arm64")])
def test_other_cpus_get_nothing(flags, machine):
    """Haswell kernels would not run without AVX2 and FMA (and mean nothing on ARM)."""
    assert portable.portable_environment(flags=flags, machine=machine, environ={}) == {}


def test_native_keeps_the_cpus_own_kernels_and_a_bad_setting_is_named():
    assert portable.portable_environment(flags=AVX2_FMA, machine="x86_64", environ={"MCMC_BOOK_FLOAT": "native"}) == {}
    with pytest.raises(ValueError, match="MCMC_BOOK_FLOAT"):
        portable.portable_environment(flags=AVX2_FMA, machine="x86_64", environ={"MCMC_BOOK_FLOAT": "fast"})


def test_apply_keeps_the_users_own_values():
    environ = {"OPENBLAS_CORETYPE": "Zen"}
    applied = portable.apply(environ)
    if applied:                                  # this CPU qualifies
        assert environ["OPENBLAS_CORETYPE"] == "Zen"
        assert environ["NPY_DISABLE_CPU_FEATURES"] == applied["NPY_DISABLE_CPU_FEATURES"]
    else:
        assert environ == {"OPENBLAS_CORETYPE": "Zen"}


def clean_environment(**extra):
    env = {k: v for k, v in os.environ.items() if k not in VARIABLES and k != portable.FLOAT_ENV}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return {**env, **extra}


def report_floating_point(seed):
    """A unit: what the worker process computes with."""
    from mcmc_lib.portable import describe
    return describe()


WORKERS_REPORT = """
import sys
sys.path.insert(0, {tests!r})
from mcmc_lib.portable import describe
from mcmc_lib.units import Unit, run_units
from test_portable import report_floating_point
print(describe())
for line in run_units([Unit(report_floating_point, seed=i) for i in range(4)], jobs=2, cache="off", progress=False):
    print(line)
""".format(tests=str(ROOT / "tests"))


@pytest.mark.skipif(not portable.portable_environment(environ={}), reason="this CPU has no AVX2 and FMA")
def test_the_settings_take_effect_in_a_new_process_and_its_workers():
    env = clean_environment(**portable.portable_environment(environ={}))
    lines = subprocess.run([sys.executable, "-c", WORKERS_REPORT], env=env, capture_output=True, text=True,
                           check=True, timeout=300).stdout.split("\n")
    reports = [line for line in lines if line]
    assert len(reports) == 5
    assert all(report == "portable (OpenBLAS Haswell kernels, NumPy without AVX-512)" for report in reports), reports


def run_make_probe(**extra):
    probe = "probe-float: ; @echo \"[$${OPENBLAS_CORETYPE:-}] [$${NPY_DISABLE_CPU_FEATURES:-}]\""
    return subprocess.run(["make", "-s", "--no-print-directory", f"--eval={probe}", "probe-float"], cwd=ROOT,
                          env=clean_environment(**extra), capture_output=True, text=True, timeout=60)


def test_make_exports_the_settings_to_every_recipe():
    expected = portable.portable_environment(environ={})
    out = run_make_probe()
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == (f"[{expected.get('OPENBLAS_CORETYPE', '')}] "
                                  f"[{expected.get('NPY_DISABLE_CPU_FEATURES', '')}]")
    assert run_make_probe(MCMC_BOOK_FLOAT="native").stdout.strip() == "[] []"
    assert run_make_probe(OPENBLAS_CORETYPE="Zen").stdout.strip().startswith("[Zen]")
    failed = run_make_probe(MCMC_BOOK_FLOAT="fast")
    assert failed.returncode != 0 and "MCMC_BOOK_FLOAT must be portable or native" in failed.stderr


@pytest.mark.parametrize("portable_here", [True, False])
def test_a_page_computed_natively_says_why_its_units_may_differ(monkeypatch, tmp_path, portable_here):
    from mcmc_lib import store
    monkeypatch.setattr(portable, "is_portable", lambda: portable_here)
    provenance = {"profile": "default", "n_units": 3, "commit": "abc123", "uncommitted_changes": False}
    text = store._describe_run(provenance, tmp_path / "x.json", None, outdated=tmp_path / "default" / "x.json")
    assert "other units or other code" in text
    assert ("start Jupyter through make" in text) is (not portable_here)
