"""Touchdown (Chen et al. 2019): the Street View graph and records, the navigation simulator with
its reference, GA and RConcat agents, TC / SPD / SED; spatial description resolution in `sdr`."""
