"""Package exports loaded on first use (PEP 562), so that importing a package costs only what is used."""
from collections.abc import Callable
from importlib import import_module
from typing import Any


def lazy_exports(package: dict[str, Any], exports: dict[str, str]) -> tuple[Callable[[str], Any], Callable[[], list]]:
    """The ``__getattr__`` and ``__dir__`` of a package whose public names live in submodules.

    Args:
        package: the package's ``globals()``; a name is cached there once loaded.
        exports: public name -> the module that defines it; a name that maps to the package's
            submodule of that name (``"algorithms": "parl_lite.algorithms"``) exports that module.
    """
    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package['__name__']!r} has no attribute {name!r}")
        imported = import_module(module)
        value = imported if module == f"{package['__name__']}.{name}" else getattr(imported, name)
        package[name] = value
        return value

    def __dir__() -> list:
        return sorted(package.get("__all__", exports))

    return __getattr__, __dir__
