"""mcmc_lib: the shared library of the adaptive-MCMC reproduction book."""
__version__ = "0.1.0"
