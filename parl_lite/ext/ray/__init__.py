"""``@remote_class`` actors as Ray actors: ``parl_lite.connect("ray://local")``.

Addresses: ``ray://local`` starts Ray on this machine (no dashboard, no usage statistics) and
stops it at ``parl_lite.shutdown()``; ``ray://auto`` joins the cluster ``ray start`` runs here;
``ray://host:10001`` joins a remote cluster through the Ray Client. If Ray is already initialised
in this process, that connection is used whatever the address says and left running.

Needs Ray (``pip install 'ray[client]>=2.45'``, what ``pip install '.[ray]'`` installs in the clone); this
package imports it only when connecting.
"""
from typing import Any

from parl_lite.remote.backend import Backend

__all__ = ["connect_ray", "RAY_MISSING"]

RAY_MISSING = ("the Ray backend needs Ray, which is not installed: pip install 'ray[client]>=2.45' (or "
               "pip install '.[ray]' in the parl_lite clone)")


def connect_ray(address: str, num_workers: "int | None" = None, threads_per_worker: int = 1,
                **options: Any) -> Backend:
    """The ``parl_lite.backends`` entry point of scheme ``ray``.

    Args:
        address: ``ray://local``, ``ray://auto`` or ``ray://host:port`` (a Ray Client server).
        num_workers: CPUs of the Ray that ``ray://local`` starts (default: the usable CPUs).
        threads_per_worker: OMP/MKL/OpenBLAS threads in the actors of ``ray://local``.
        options: none are known; any given is refused by name.

    Returns:
        The connected :class:`parl_lite.ext.ray.backend.RayBackend`.

    Raises:
        ImportError: Ray is not installed (the message says what to install).
        ValueError: an option this backend does not know.
    """
    if options:
        raise ValueError(f"parl_lite.connect({address!r}): the Ray backend takes no option "
                         f"{', '.join(sorted(options))}")
    try:
        import ray  # noqa: F401
    except ImportError as error:
        raise ImportError(f"parl_lite.connect({address!r}): {RAY_MISSING}") from error
    from parl_lite.ext.ray.backend import RayBackend

    return RayBackend(address, num_workers=num_workers, threads_per_worker=threads_per_worker)
