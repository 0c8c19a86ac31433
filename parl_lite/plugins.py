"""The plugin registry: what is installed under parl_lite's entry-point groups, and loading it.

A plugin is an entry point of an installed distribution (``importlib.metadata``); nothing is
imported until a plugin is used, so a broken plugin cannot break ``import parl_lite``. When it is
used and fails to load, :class:`PluginError` names the group, the plugin, its module and the
distribution that installed it.

This module imports only the standard library, so every layer may read the registry without
depending on the plugins themselves: :func:`parl_lite.connect` (``parl_lite.remote``) looks up
backends, the ``parl-lite`` command line commands, ``evokit_py`` solvers. The built-in plugins
(``parl_lite.ext``) register in ``setup.cfg`` exactly as a third-party distribution does in its own
metadata.
"""
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from typing import Any

__all__ = ["BACKENDS", "COMMANDS", "SOLVERS", "GROUPS", "Plugin", "PluginError", "installed", "find", "load"]

BACKENDS = "parl_lite.backends"
COMMANDS = "parl_lite.commands"
SOLVERS = "evokit_py.solvers"
GROUPS = (BACKENDS, COMMANDS, SOLVERS)


class PluginError(ImportError):
    """An installed plugin could not be loaded (its module fails to import or lacks the object)."""


@dataclass(frozen=True)
class Plugin:
    """One entry point of an installed distribution.

    Attributes:
        group: the entry-point group (:data:`BACKENDS`, :data:`COMMANDS` or :data:`SOLVERS`).
        name: the address scheme (backends), the ``parl-lite`` command (commands) or
            ``solver.type`` (solvers).
        value: ``module:object`` the entry point names.
        distribution: the distribution that installed it (None if unknown).
        version: that distribution's version (None if unknown).
    """

    group: str
    name: str
    value: str
    distribution: str | None
    version: str | None

    @property
    def module(self) -> str:
        return self.value.split(":", 1)[0].strip()

    @property
    def description(self) -> str:
        origin = f"{self.distribution} {self.version}" if self.distribution else "an unknown distribution"
        return f"plugin {self.name!r} of group {self.group} ({self.value}, from {origin})"

    def load(self) -> Any:
        """Import the plugin's object.

        Raises:
            PluginError: naming the plugin, with the import error as its cause.
        """
        try:
            return EntryPoint(self.name, self.value, self.group).load()
        except Exception as error:
            raise PluginError(f"{self.description} cannot be loaded: {type(error).__name__}: {error}") from error


def _from_entry_point(entry: EntryPoint) -> Plugin:
    dist = getattr(entry, "dist", None)
    return Plugin(entry.group, entry.name, entry.value, dist.name if dist else None, dist.version if dist else None)


def installed(group: str | None = None) -> list[Plugin]:
    """The plugins installed in ``group`` (every group of :data:`GROUPS` if None), sorted by
    group and name; when two distributions register the same name, the first found wins, as in
    :func:`find`."""
    plugins: dict[tuple, Plugin] = {}
    for each in ([group] if group else GROUPS):
        for entry in entry_points(group=each):
            plugins.setdefault((each, entry.name), _from_entry_point(entry))
    return [plugins[key] for key in sorted(plugins)]


def find(group: str, name: str) -> Plugin | None:
    """The plugin called ``name`` in ``group``, or None."""
    return next((plugin for plugin in installed(group) if plugin.name == name), None)


def load(group: str, name: str) -> Any:
    """Load the object of plugin ``name`` in ``group``.

    Raises:
        KeyError: no such plugin is installed.
        PluginError: it is installed but cannot be loaded (the message names it).
    """
    plugin = find(group, name)
    if plugin is None:
        raise KeyError(name)
    return plugin.load()
