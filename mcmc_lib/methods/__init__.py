"""Modules generated from the chapters' cells tagged `export` (see mcmc_lib.literate). Never edit by hand."""
