"""``gated_env:GatedCartPole-v0``: CartPole whose first episode, in any process, waits at its reset
until the test opens its gate (a FIFO): a candidate that is still running for as long as a test
needs, without sleeps."""
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
