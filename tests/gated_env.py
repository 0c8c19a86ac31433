"""Test environments that hold an episode at a gate (a FIFO) until the test opens it, without sleeps.

``gated_env:GatedCartPole-v0``: CartPole whose first episode, in any process, waits at its reset
until the test opens its gate: a candidate that is still running for as long as a test needs."""
import os

import gymnasium
from gymnasium.envs.classic_control import CartPoleEnv


class GatedCartPole(CartPoleEnv):
    def __init__(self, gate: str):
        super().__init__()
        self.gate = gate

    def reset(self, *, seed=None, options=None):
        try:  # the first reset anywhere claims the gate and waits for it
            os.close(os.open(self.gate + ".claimed", os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            pass
        else:
            with open(self.gate, "rb") as gate:  # blocks until the test opens the FIFO for writing
                gate.read()
        return super().reset(seed=seed, options=options)


gymnasium.register(id="GatedCartPole-v0", entry_point=GatedCartPole, max_episode_steps=500)


class StallingCartPole(CartPoleEnv):
    """``gated_env:StallingCartPole-v0``: CartPole whose sampler stalls at a known point, for a run
    that loses its only sampler there: after ``resets`` resets (in its process), the next one writes
    the process id to ``gate + ".pid"`` and waits at the gate (a FIFO); once ``gate + ".shut"``
    exists, no more can be made (the constructor raises), so that the sampler is not replaced."""

    def __init__(self, gate: str, resets: int):
        if os.path.exists(gate + ".shut"):
            raise RuntimeError(f"{gate}.shut: no more samplers")
        super().__init__()
        self.gate, self.resets_left = gate, resets

    def reset(self, *, seed=None, options=None):
        if self.resets_left == 0:
            with open(self.gate + ".pid", "w") as pid:
                pid.write(str(os.getpid()))
            with open(self.gate, "rb") as gate:  # blocks until the test opens the FIFO for writing
                gate.read()
        self.resets_left -= 1
        return super().reset(seed=seed, options=options)


gymnasium.register(id="StallingCartPole-v0", entry_point=StallingCartPole, max_episode_steps=500)
