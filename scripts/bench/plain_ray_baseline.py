"""Plain Ray actors measured beside ``@remote_class`` on ``ray://`` in ``bench_remote.py``: the same
``Worker`` class decorated with ``ray.remote`` and called with ``ray.get(actor.method.remote())``,
on the Ray that parl_lite's backend started (one cluster, one run, the same load)."""
from typing import Any, Callable

import ray


class PlainRayWorker:
    """One plain Ray actor of ``cls`` and its calls as plain functions."""

    def __init__(self, cls: type) -> None:
        self._actor_class = ray.remote(cls)
        self.actor = self._actor_class.remote()
        ray.get(self.actor.noop.remote())  # started

    def noop(self) -> None:
        ray.get(self.actor.noop.remote())

    def echo(self, value: Any) -> Any:
        return ray.get(self.actor.echo.remote(value))

    def async_noops(self, count: int) -> None:
        """``count`` calls, then one ``ray.get`` of all their refs."""
        ray.get([self.actor.noop.remote() for _ in range(count)])

    def future_noops(self, count: int) -> None:
        """``count`` calls, each as Ray's own ``concurrent.futures.Future`` (``ObjectRef.future()``)."""
        futures = [self.actor.noop.remote().future() for _ in range(count)]
        for future in futures:
            future.result()

    def create(self) -> Callable[[], None]:
        """Create another actor of the class and wait until it runs; returns its killer."""
        actor = self._actor_class.remote()
        ray.get(actor.noop.remote())
        return lambda: ray.kill(actor)

    def close(self) -> None:
        ray.kill(self.actor)
