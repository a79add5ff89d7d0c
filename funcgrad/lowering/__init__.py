"""Lowering and runtime: PJRT clients and devices, Array, Jaxpr -> StableHLO, executables, the eager interpreter."""
