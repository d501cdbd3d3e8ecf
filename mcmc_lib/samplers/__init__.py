"""Baseline samplers, vectorised over chains (NUTS loops over them)."""
from .base import (ChainState, Sampler, StepInfo, accept_proposals, metropolis_hastings_accept,
                   robbins_monro_scale)
from .classic import HMC, MALA, RWM, gamma_jitter, leapfrog
from .adaptive_metropolis import CholeskyAM, HaarioAM

__all__ = ["ChainState", "Sampler", "StepInfo", "accept_proposals", "metropolis_hastings_accept",
           "robbins_monro_scale", "RWM", "MALA", "HMC", "leapfrog", "gamma_jitter", "HaarioAM",
           "CholeskyAM", "NUTS"]


def __getattr__(name):
    # NUTS lives in its own module; import it lazily so the others load fast.
    if name == "NUTS":
        from .nuts import NUTS
        return NUTS
    raise AttributeError(name)
