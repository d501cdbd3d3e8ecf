# Two commands: `make book` renders the HTML book, `make test` is what CI runs (see README.md).
SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# The executable chapters: pages without a kernelspec (intro, about, bibliography) are plain Markdown,
# whose fenced shell examples jupytext would otherwise turn into code cells.
NOTEBOOKS := $(shell grep -l '^kernelspec:' book/*.md)
NBVAL_DIR := _build/nbval
JB_FLAGS := --all -W -n --keep-going
# One BLAS thread per process: the chains are vectorised already, and timings stay comparable.
export OMP_NUM_THREADS ?= 1
export OPENBLAS_NUM_THREADS ?= 1
export MKL_NUM_THREADS ?= 1
# Portable floating point (mcmc_lib/portable.py): every process computes with OpenBLAS's Haswell
# kernels and NumPy without AVX-512, so that results are the same bits on every x86-64 CPU with AVX2
# and FMA and a fresh clone there takes the committed stores; MCMC_BOOK_FLOAT=native keeps the CPU's own.
PORTABLE_SETTINGS := $(shell $(PYTHON) mcmc_lib/portable.py)
ifneq ($(.SHELLSTATUS),0)
$(error mcmc_lib/portable.py failed: see the message above)
endif
$(foreach setting,$(PORTABLE_SETTINGS),$(eval export $(setting)))

.PHONY: help env book test unit sync nbval book-smoke chromium check-browser book-default-check notebook page lab bench export references paper default-store store-check verify-code paper-costs clean publish

help:
	@echo "make book       - build the HTML book at _build/html/index.html (MCMC_BOOK_PROFILE=default)"
	@echo "make test       - what CI runs: unit, sync, nbval, book-smoke, check-browser and book-default-check"
	@echo "make unit       - the pytest unit tests (tests/)"
	@echo "make sync       - check that mcmc_lib/methods is in sync with the chapters' exported cells"
	@echo "make nbval      - execute every chapter as a notebook at the smoke profile"
	@echo "make book-smoke - strict (-W) book build at the smoke profile, then the HTML checks"
	@echo "make check-browser - every page of _build/html in headless Chromium at 1,400 and 400 px"
	@echo "make chromium   - install Debian's Chromium for the browser checks when it is missing (as root)"
	@echo "make book-default-check - the default build (as readers see it) built strictly and checked the"
	@echo "                same way, when the committed stores are current (else skipped, with why)"
	@echo "make notebook CHAPTER=foundations"
	@echo "                - one chapter as a plain notebook, executed at smoke size, in _build/notebooks/"
	@echo "make page CHAPTER=gsm - one chapter and its audit page built (MCMC_BOOK_PROFILE, default unless"
	@echo "                set) into _build/pages/<chapter>/ and checked as make test checks the book"
	@echo "make lab CHAPTER=foundations"
	@echo "                - the same, opened in JupyterLab (installs the pins of requirements-lab.txt)"
	@echo "make bench      - benchmarks/ -> benchmarks/results/*.json"
	@echo "make export     - regenerate mcmc_lib/methods from the chapters' exported cells"
	@echo "make references - re-record the smoke-size reference values (tests/reference/)"
	@echo "make paper      - run chapters at the paper profile into results/paper/ (CHAPTERS=\"kmc mcma\" picks; resumes)"
	@echo "make default-store - run chapters at the default profile into results/default/, which make book"
	@echo "                then reads while the units and their code are unchanged (CHAPTERS picks)"
	@echo "make store-check - which experiments a default build would compute rather than take from the"
	@echo "                stores, and why (runs no unit; about a minute a chapter; CHAPTERS picks)"
	@echo "make verify-code - for each stored record whose code changed since its run, rerun a sample of its"
	@echo "                units under the current code (the cheapest unit of each function and of each value"
	@echo "                of a string or boolean parameter) and, when every result is the stored one, record"
	@echo "                that in its provenance, so that it reads as current (STORE=paper|default picks a"
	@echo "                store, CHAPTERS picks chapters; MAX_SECONDS=1800 per record; DRY_RUN=1 lists the"
	@echo "                sample and its projected time from the stores, running nothing; SKIP=a,b leaves those"
	@echo "                experiments alone, records about to be recomputed)"
	@echo "make paper-costs - what the stored paper runs cost, projected on 16 and 64 workers"
	@echo "                (COSTS=default: the stored default runs; COSTS=cache: the unit cache;"
	@echo "                COSTS=checkpoint: what unfinished paper runs have done)"
	@echo "make publish    - push the built book (_build/html, from make book) to the gh-pages branch of"
	@echo "                PUBLISH_REMOTE (default origin) with ghp-import"
	@echo "make env        - create .venv with the pins of requirements.txt"
	@echo "make clean      - remove _build (the book, the unit cache, executed notebooks)"
	@echo "make help       - this list"

# The virtual environment, rebuilt when the pins change.
$(STAMP): requirements.txt pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade "pip==26.3"
	$(BIN)/python -m pip install --quiet -r requirements.txt
	$(BIN)/python -m pip install --quiet --no-deps --no-build-isolation -e .
	@touch $(STAMP)

env: $(STAMP)

# Claims are cleared first so that the scoreboard shows only this build's.
book: $(STAMP)
	rm -rf _build/claims
	MCMC_BOOK_PROFILE=$${MCMC_BOOK_PROFILE:-default} $(BIN)/jupyter-book build . --all
	@echo "The book is at _build/html/index.html"

test: unit sync nbval book-smoke check-browser book-default-check
	@echo "make test: all checks passed"

unit: $(STAMP)
	$(BIN)/python -m pytest -q tests

sync: $(STAMP)
	$(BIN)/python -m mcmc_lib.literate check

# nbval runs every chapter as a notebook at smoke size: a cell that raises (a failed reference or
# claim check included) fails the test.
nbval: $(STAMP)
	rm -rf $(NBVAL_DIR) _build/claims && mkdir -p $(NBVAL_DIR)
	for f in $(NOTEBOOKS); do $(BIN)/jupytext --quiet --to ipynb -o $(NBVAL_DIR)/$$(basename $${f%.md}).ipynb $$f; done
	MCMC_BOOK_PROFILE=smoke $(BIN)/python -m pytest -q --nbval-lax --nbval-current-env \
	    --nbval-cell-timeout=1800 -p no:randomly $(NBVAL_DIR)/*.ipynb

book-smoke: $(STAMP)
	rm -rf _build/claims
	MCMC_BOOK_PROFILE=smoke $(BIN)/jupyter-book build . $(JB_FLAGS)
	$(BIN)/python tests/check_html.py _build/html

# Every page in headless Chromium at 1,400 px and 400 px (tests/check_browser.py, about 2 minutes):
# wide content without a scroll cue, unreadable or unlabelled figures, raw LaTeX or MyST. Chromium is
# Debian's package, installed here when it is missing and this runs as root with apt-get (as in CI);
# CHROMIUM=/path/to/chrome uses another.
chromium:
	@if [ -z "$${CHROMIUM:-}" ] && ! command -v chromium >/dev/null && ! command -v chromium-browser >/dev/null; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "installing chromium (apt-get)"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	  else echo "make check-browser needs Chromium: apt-get install chromium, or set CHROMIUM=/path/to/chrome"; exit 1; fi; \
	fi

check-browser: $(STAMP) chromium
	$(BIN)/python tests/check_browser.py _build/html

# The book as readers see it: the default profile, built strictly into _build/default/ and checked as
# the smoke build is (HTML, then Chromium at 1,400 and 400 px). It runs when make store-check finds every
# experiment in the committed stores (about 3 minutes in all); when the stores are not current it says
# so and skips (a build would compute for up to an hour: refresh them with make default-store).
book-default-check: $(STAMP) chromium
	@status=0; $(BIN)/python -m mcmc_lib.store --check || status=$$?; \
	if [ $$status = 1 ]; then echo "book-default-check: skipped, the committed stores are not current (above)"; exit 0; fi; \
	if [ $$status != 0 ]; then exit $$status; fi; \
	rm -rf _build/claims; \
	MCMC_BOOK_PROFILE=default $(BIN)/jupyter-book build . $(JB_FLAGS) --path-output _build/default; \
	$(BIN)/python tests/check_html.py _build/default/_build/html; \
	$(BIN)/python tests/check_browser.py _build/default/_build/html

# One chapter as a plain Jupyter notebook: code included from mcmc_lib shown as code, numbers and
# figures filled in, citations and equation numbers as in the book (book/_ext/notebook_download.py).
# Executed at MCMC_BOOK_PROFILE (smoke unless set: about a minute); EXECUTE=0 only converts.
notebook: $(STAMP)
	@test -n "$(CHAPTER)" || { echo "usage: make notebook CHAPTER=<one of: $(basename $(notdir $(shell grep -l '^kernelspec:' book/*.md)))>"; exit 2; }
	MCMC_BOOK_PROFILE=$${MCMC_BOOK_PROFILE:-smoke} $(BIN)/python book/_ext/notebook_download.py $(CHAPTER) \
	    -o _build/notebooks/$(CHAPTER).ipynb $(if $(filter 0,$(EXECUTE)),,--execute)

# One method chapter and its audit page, built on their own (with the intro and the bibliography) and
# checked as make test checks the whole book: for writing a chapter without building the rest.
PAGE_DIR := _build/pages/$(CHAPTER)
page: $(STAMP) chromium
	@test -n "$(CHAPTER)" && test -f book/$(CHAPTER)_audit.md || { echo "usage: make page CHAPTER=<a chapter with an audit page: $(patsubst book/%_audit.md,%,$(wildcard book/*_audit.md))>"; exit 2; }
	mkdir -p $(PAGE_DIR)
	sed 's/CHAPTER/$(CHAPTER)/g' book/_ext/page_toc.yml > $(PAGE_DIR)/_toc.yml
	MCMC_BOOK_PROFILE=$${MCMC_BOOK_PROFILE:-default} $(BIN)/jupyter-book build . --all --toc $(PAGE_DIR)/_toc.yml \
	    --path-output $(PAGE_DIR)
	@status=0; $(BIN)/python tests/check_html.py $(PAGE_DIR)/_build/html || status=1; \
	$(BIN)/python tests/check_browser.py $(PAGE_DIR)/_build/html --pages $(CHAPTER),$(CHAPTER)_audit \
	    --screenshots $(PAGE_DIR)/screenshots || status=1; exit $$status

# JupyterLab is not needed to build or test the book; requirements-lab.txt pins it on top of the
# book's pins, installed into .venv on first use.
LAB_STAMP := $(VENV)/.lab-installed
$(LAB_STAMP): requirements-lab.txt $(STAMP)
	$(BIN)/python -m pip install --quiet -c requirements.txt -r requirements-lab.txt
	@touch $(LAB_STAMP)

lab: $(LAB_STAMP) $(if $(CHAPTER),notebook)
	MCMC_BOOK_PROFILE=$${MCMC_BOOK_PROFILE:-smoke} $(BIN)/jupyter lab $(if $(CHAPTER),_build/notebooks/$(CHAPTER).ipynb,_build/notebooks)

bench: $(STAMP)
	$(BIN)/python benchmarks/run_benchmarks.py

export: $(STAMP)
	$(BIN)/python -m mcmc_lib.literate export

# Re-record the committed smoke-size reference values (after an intended change of results).
references: $(STAMP)
	MCMC_BOOK_PROFILE=smoke MCMC_BOOK_UPDATE_REFERENCES=1 $(MAKE) nbval

# The paper profile: execute chapters (all that call largest_scale, or CHAPTERS="kmc mcma") with
# nbclient and write their results to results/paper/ (README, "Running at scale"). Finished units
# are cached in _build/cache/units, so an interrupted run resumes; MCMC_BOOK_JOBS and
# MCMC_BOOK_DASK_SCHEDULER choose where units run. RERUN_SHARED="gsm/table-ripley ..." recomputes those
# experiments' stored units that had no core to themselves (timed on a busy machine); with
# RERUN_BEFORE=2026-11-26T18:00 (UTC) also those that finished before then or have no recorded time.
paper: $(STAMP)
	MCMC_BOOK_PROFILE=paper $(if $(RERUN_SHARED),MCMC_BOOK_RERUN_SHARED="$(RERUN_SHARED)") \
	    $(if $(RERUN_BEFORE),MCMC_BOOK_RERUN_BEFORE="$(RERUN_BEFORE)") $(BIN)/python -m mcmc_lib.store \
	    $(if $(filter command line,$(origin CHAPTERS)),$(basename $(notdir $(CHAPTERS))))

# The default profile's results, committed like the paper profile's: a cold `make book` takes an
# experiment from results/default/ instead of computing it when the store holds exactly its units and
# the code they ran is unchanged (else it computes). Run after a change of the units' code: units that
# are unchanged come from the cache or from the store it rewrites, so only new or changed units run.
default-store: $(STAMP)
	$(BIN)/python -m mcmc_lib.store --profile default \
	    $(if $(filter command line,$(origin CHAPTERS)),$(basename $(notdir $(CHAPTERS))))

# Which experiments a default build would compute rather than take from results/, and why (the first
# unit parameter that differs from the stored one, or the code that changed): no unit runs.
store-check: $(STAMP)
	$(BIN)/python -m mcmc_lib.store --check \
	    $(if $(filter command line,$(origin CHAPTERS)),$(basename $(notdir $(CHAPTERS))))

# After an edit of mcmc_lib or of a chapter's unit functions that should change no number (an argument
# check, a message): rerun a sample of each changed record's units with the cache off and, when each result
# is the stored one exactly (measured times aside), append a "verified" entry to its provenance (units
# untouched). A record that differs is left as it was, with the unit and the first difference reported.
# The chapters are executed at the default profile with MCMC_BOOK_STORE=verify (no other unit runs).
verify-code: $(STAMP)
	$(BIN)/python -m mcmc_lib.store --verify-code $(if $(STORE),--profile $(STORE)) \
	    $(if $(MAX_SECONDS),--max-seconds $(MAX_SECONDS)) $(if $(filter 1,$(DRY_RUN)),--dry-run) \
	    $(if $(SKIP),--skip $(SKIP)) \
	    $(if $(filter command line,$(origin CHAPTERS)),$(basename $(notdir $(CHAPTERS))))

# What the stored paper-profile runs cost, and would cost on 16 and 64 workers (COSTS=default: the
# stored default-profile runs; COSTS=cache: the units in the unit cache, whatever profile filled it;
# COSTS=checkpoint: the finished units of unfinished paper runs, results/paper/*/checkpoint/).
paper-costs: $(STAMP)
	$(BIN)/python -m mcmc_lib.store $(if $(filter default,$(COSTS)),--costs store --profile default,--costs $${COSTS:-store})

# The built book on GitHub Pages from a gh-pages branch, the Jupyter Book way (ghp-import -n -p -f:
# .nojekyll, push, force): .ci/publish, which refuses when there is no built book. A fork that lets
# GitHub Actions publish instead (.github/workflows/book.yml) needs no make publish.
PUBLISH_REMOTE ?= origin
PUBLISH_DIR ?= _build/html
publish: $(STAMP)
	.ci/publish $(PUBLISH_DIR) $(PUBLISH_REMOTE) $(BIN)/ghp-import

clean:
	rm -rf _build
