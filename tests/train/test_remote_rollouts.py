"""The on-policy loop with remote rollout actors gathered synchronously (PARL's A2C): on every backend,
the actors' rollouts side by side; an actor that dies is replaced and the run goes on."""
import logging
import os
import signal

import numpy as np
import paddle
import pytest

from parl_lite import train
from parl_lite.algorithms import A2C
from parl_lite.utils.models import MLPActorCritic

from remote_helpers import wait_for_exit

pytestmark = pytest.mark.timeout(240)


def _a2c() -> A2C:
    paddle.seed(1)
    return A2C(MLPActorCritic(4, 2, 64), 1.0, lr=7e-4, optimizer="rmsprop", max_grad_norm=0.5, reduction="mean")


class Rounds(train.Callback):
    """Records each round's rollout size; at round ``kill_at`` SIGKILLs the first actor's process, and
    stops the run at the first whole round after one without that actor's rollout."""

    def __init__(self, kill_at: int | None = None) -> None:
        self.kill_at, self.steps, self.killed = kill_at, [], None

    def on_step(self, trainer) -> bool:
        self.steps.append(trainer.steps)
        if self.kill_at is not None and len(self.steps) == self.kill_at:
            self.killed = trainer.rollout.group.actors[0]._channel.pid
            os.kill(self.killed, signal.SIGKILL)
            assert wait_for_exit(self.killed, 10)
        sizes = np.diff([0, *self.steps])
        return not (self.killed and sizes.min() < sizes[0] and sizes[-1] == sizes[0])


def test_remote_actors_play_each_round_side_by_side_on_every_backend(backend):
    rounds = Rounds()
    trainer = train.OnPolicyTrainer(_a2c(), "CartPole-v1", num_envs=3, rollout_steps=5, gae_lambda=1.0, actors=2,
                                    seed=1, eval_every=10_000, eval_episodes=1)
    summary = trainer.learn(90, callback=rounds)
    assert rounds.steps == [30, 60, 90]  # each round: 2 actors x 3 environments x 5 steps
    assert summary.steps == 90 and summary.updates == 3 and summary.actors == 2


def test_a_killed_actor_is_replaced_and_the_rounds_go_on(caplog):
    import parl_lite

    parl_lite.shutdown()
    parl_lite.connect(num_workers=2)
    rounds = Rounds(kill_at=2)
    try:
        trainer = train.OnPolicyTrainer(_a2c(), "CartPole-v1", num_envs=3, rollout_steps=5, gae_lambda=1.0,
                                        actors=2, seed=1, eval_every=10_000, eval_episodes=1)
        with caplog.at_level(logging.WARNING, logger="parl_lite.train"):
            trainer.learn(1_000_000, callback=rounds)  # until the replacement plays (the test's timeout)
    finally:
        parl_lite.shutdown()
    sizes = np.diff([0, *rounds.steps])
    assert sizes[0] == 30 and sizes[2] == 15  # the round after the kill had the other actor's rollout only
    assert set(sizes[2:-1]) == {15} and sizes[-1] == 30  # until the replacement, made meanwhile, plays again
    events = [record.getMessage() for record in caplog.records]
    assert any("rollout actor 0 lost" in event for event in events)
    assert any("rollout actor 2 made (a replacement)" in event for event in events)
