"""Plugins: everything beyond the multiprocessing core plugs in through entry-point groups.

Two groups, read with :mod:`importlib.metadata` (see :mod:`parl_lite.ext.plugins`):

``parl_lite.backends``
    An address scheme -> a callable ``(address, **options) -> parl_lite.remote.backend.Backend``.
    ``parl_lite.connect("ray://local")`` looks up ``ray``. The options are those of
    :func:`parl_lite.connect` (``num_workers``, ``threads_per_worker``, ...).

``evokit_py.solvers``
    A ``solver.type`` name -> a solver class with the constructor and ask/tell methods of
    :class:`evokit_py.solvers.Solver`. ``es-train`` then accepts that ``solver.type`` in its config.

The built-in plugins register themselves exactly as a third-party one would, in ``setup.cfg``::

    [options.entry_points]
    parl_lite.backends =
        ray = parl_lite.ext.ray:connect_ray

A third-party distribution does the same in its own metadata. ``parl-lite plugins`` lists what is
installed and whether each one loads. Nothing is imported until a plugin is used, so a broken
plugin never breaks ``import parl_lite``; using it raises
:class:`parl_lite.ext.plugins.PluginError` naming it.
"""
