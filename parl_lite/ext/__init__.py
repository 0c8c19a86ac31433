"""The built-in plugins: everything beyond the multiprocessing core plugs in through entry-point groups.

Three groups, read with :mod:`importlib.metadata` by the registry :mod:`parl_lite.plugins`:

``parl_lite.backends``
    An address scheme -> a callable ``(address, **options) -> parl_lite.remote.backend.Backend``.
    ``parl_lite.connect("ray://local")`` looks up ``ray``. The options are those of
    :func:`parl_lite.connect` (``num_workers``, ``threads_per_worker``, ...).

``parl_lite.commands``
    A ``parl-lite`` command name -> a ``click.Command``. ``parl-lite --help`` lists it and
    ``parl-lite NAME`` runs it; a name ``parl-lite`` itself uses (``es-train``, ``export``,
    ``plugins``) stays parl-lite's.

``evokit_py.solvers``
    A ``solver.type`` name -> a solver class with the constructor and ask/tell methods of
    :class:`evokit_py.solvers.Solver`. ``es-train`` then accepts that ``solver.type`` in its config.

The plugins of this package (the cluster: a backend and the commands ``start``, ``connect``,
``stop``, ``status``; Ray: a backend; the monitor: the command ``monitor``) register themselves
exactly as a third-party one would, in ``setup.cfg``::

    [options.entry_points]
    parl_lite.backends =
        ray = parl_lite.ext.ray:connect_ray
    parl_lite.commands =
        monitor = parl_lite.ext.monitor.command:monitor

A third-party distribution does the same in its own metadata. ``parl-lite plugins`` lists what is
installed and whether each one loads. Nothing is imported until a plugin is used, so a broken
plugin never breaks ``import parl_lite``; using it raises :class:`parl_lite.plugins.PluginError`
naming it (a broken command says so when it runs, without a traceback).
"""
