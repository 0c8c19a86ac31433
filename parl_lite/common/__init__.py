"""The paddle-free floor every other part of parl_lite and evokit_py builds on: files written
atomically (:mod:`~parl_lite.common.atomic`), HDF5 datasets with checksums
(:mod:`~parl_lite.common.datasets`), what a path is and whether it may be written
(:mod:`~parl_lite.common.paths`, :mod:`~parl_lite.common.space`), progress reporting
(:mod:`~parl_lite.common.progress`) and a run's summary (:mod:`~parl_lite.common.summary`).
It imports nothing of parl_lite but itself.
"""
