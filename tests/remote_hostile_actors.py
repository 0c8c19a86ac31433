"""Actors for the hardening tests: exits, forks, dynamic methods, memory and remote errors."""
import os
import sys
import time

import numpy as np


class Misbehaving:
    def exit_with(self, message: str) -> None:
        sys.exit(message)

    def interrupt(self) -> None:
        raise KeyboardInterrupt("stop it")

    def add(self, a: int, b: int) -> int:
        return a + b

    def pid(self) -> int:
        return os.getpid()

    def fork_child(self, path: str, then_exit: bool) -> int:
        """Fork a child that writes its pid to ``path`` and sleeps; optionally exit this process."""
        child = os.fork()
        if child == 0:
            with open(path + ".tmp", "w") as marker:
                marker.write(str(os.getpid()))
            os.rename(path + ".tmp", path)
            time.sleep(60)
            os._exit(0)
        while not os.path.exists(path):
            time.sleep(0.001)
        if then_exit:
            os._exit(5)
        return child

    def open_missing(self, path: str) -> None:
        open(path)

    def decode_bad(self) -> str:
        return b"ab\xffcd".decode("utf-8")


class Dynamic:
    """Methods supplied by ``__getattr__``, as proxies and wrappers do."""

    def __init__(self) -> None:
        self.calls = 0

    def __getattr__(self, name: str):
        if name.startswith("do_"):
            def method(*args):
                self.calls += 1
                return (name, args, os.getpid())
            return method
        raise AttributeError(name)

    def pid(self) -> int:
        return os.getpid()


class Keeper:
    """Holds on to its argument: its memory limit must not count the caller's shared pages."""

    def __init__(self) -> None:
        self.kept = None

    def keep_and_sum(self, array: np.ndarray) -> float:
        self.kept = array
        return float(array.sum())

    def keep_and_return(self, array: np.ndarray) -> np.ndarray:
        self.kept = array
        return array

    def scale_kept(self, factor: float) -> None:
        self.kept *= factor

    def echo(self, value):
        return value

    def pid(self) -> int:
        return os.getpid()


class Outsider:
    """Replaces its process's program, or writes bytes to ``sys.stdout.buffer``."""

    def pid(self) -> int:
        return os.getpid()

    def exec_sleeper(self, seconds: float) -> None:
        os.execv(sys.executable, [sys.executable, "-c", f"import time; time.sleep({seconds})"])

    def write_bytes(self, *chunks: bytes) -> int:
        written = sum(sys.stdout.buffer.write(chunk) for chunk in chunks)
        sys.stdout.buffer.flush()
        return written
