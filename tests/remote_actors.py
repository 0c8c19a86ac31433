"""Plain classes the remote tests turn into actors (importable by the worker processes too)."""
import logging
import os
import sys
import time

import numpy as np


class Counter:
    def __init__(self, start: int = 0, scale: float = 1.0) -> None:
        self.value = start
        self.scale = scale
        self.seen = []

    def add(self, amount: int) -> int:
        self.value += amount
        return self.value

    def record(self, item: int) -> None:
        self.seen.append(item)

    def echo(self, value):
        return value

    def blob(self, size: int) -> bytes:
        return b"x" * size  # bytes are pickled inline: one message of that size

    def mul(self, array: np.ndarray) -> np.ndarray:
        return array * self.scale

    def pid(self) -> int:
        return os.getpid()

    def environment(self, name: str):
        return os.environ.get(name)

    def imported(self, module: str) -> bool:
        return module in sys.modules

    def read_text(self, path: str) -> str:
        with open(path) as handle:
            return handle.read()

    def path_kind(self, path: str) -> str:
        return "folder" if os.path.isdir(path) else "file" if os.path.isfile(path) else "missing"

    def shout(self, text: str) -> None:
        print(text)
        print(f"to stderr: {text}", file=sys.stderr)
        logging.getLogger("remote_actors").warning("logged: %s", text)

    def fail(self, message: str) -> None:
        raise ValueError(message)

    def fail_custom(self) -> None:
        raise CustomError("custom", 42)

    def fail_unpicklable(self) -> None:
        raise UnpicklableError(lambda: None)

    def return_unpicklable(self):
        return __import__("threading").Lock()

    def exit_now(self) -> None:
        os._exit(3)

    def exit_with(self, message: str) -> None:
        sys.exit(message)

    def interrupt(self) -> None:
        raise KeyboardInterrupt("stop it")

    def block_after_signal(self, path: str) -> None:
        """Write ``path`` (the caller waits for it), then block for a long time."""
        with open(path, "w") as marker:
            marker.write(str(os.getpid()))
        time.sleep(60)

    def rendezvous(self, mine: str, theirs: str, timeout: float) -> bool:
        """Create ``mine`` and wait for ``theirs``: true only if both actors run at the same time."""
        open(mine, "w").close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if os.path.exists(theirs):
                return True
            time.sleep(0.001)
        return False

    def allocate(self, megabytes: int) -> int:
        self.ballast = np.ones(megabytes * 2**20, dtype=np.uint8)
        return int(self.ballast.sum() // 2**20)


class CustomError(Exception):
    def __init__(self, text: str, code: int) -> None:
        super().__init__(text, code)
        self.code = code


class UnpicklableError(Exception):
    def __init__(self, payload) -> None:
        super().__init__("cannot travel")
        self.payload = payload
        self.lock = __import__("threading").Lock()


class FailingInit:
    def __init__(self, reason: str) -> None:
        raise RuntimeError(f"constructor refused: {reason}")


class WithClose:
    def __init__(self, path: str) -> None:
        self.path = path

    def close(self) -> None:
        with open(self.path, "w") as marker:
            marker.write("closed")


class PaddleProbe:
    """An ONNX rollout actor (parl_lite.utils.rollout.OnnxRolloutWorker) that also says which paddle
    modules its process has imported; this module imports no paddle itself."""

    def __init__(self, *args, **kwargs):
        from parl_lite.utils.rollout import OnnxRolloutWorker

        self.worker = OnnxRolloutWorker(*args, **kwargs)

    def collect(self, weights, steps):
        return self.worker.collect(weights, steps)

    def paddle_modules(self) -> list:
        return sorted(name for name in sys.modules if name == "paddle" or name.startswith("paddle."))


class Squarer:
    """Squares numbers; dies (its process exits) on the call after its first ``calls``."""

    def __init__(self, calls: int | None = None) -> None:
        self.calls_left = calls

    def square(self, value: int) -> int:
        if self.calls_left == 0:
            os._exit(3)
        if self.calls_left is not None:
            self.calls_left -= 1
        if value < 0:
            raise ValueError(f"no square for {value} here")
        return value * value
