"""A3C on CartPole-v1: rollout actors are ``@remote_class`` actors on the process pool.

    python scripts/train_a3c.py --seed 1 --actors 2

Each actor owns ``num_envs`` environments and a copy of the policy. The learner (this process)
takes whichever rollout arrives first, takes one A2C step on it (values and n-step returns from
its current critic), and sends the new weights back with that actor's next request -- so actors
play with weights up to ``actors - 1`` updates old, as in asynchronous A3C. Update order depends on
timing, so unlike the single-process scripts a seed does not repeat a run exactly.

Every ``--eval-every`` env steps the greedy policy plays 10 episodes; training stops when their
mean reaches ``--target`` or after ``--total-steps``; the agent is saved to an HDF5 checkpoint.
The last line is a JSON summary of the run.
"""
import functools

import numpy as np
import paddle

import async_learning
import parl_lite
from parl_lite.algorithms import A2C
from parl_lite.utils.gae import gae
from parl_lite.utils.models import MLPActorCritic

HP = dict(num_envs=8, rollout_steps=5, gamma=0.99, gae_lambda=1.0, lr=7e-4, value_coef=0.5, entropy_coef=0.0,
          max_grad_norm=0.5, hidden=64, total_steps=500_000, target=475.0, eval_every=5_000)


class A3CAgent(parl_lite.Agent):
    """The learner's side: values for the returns, greedy actions for evaluation, updates."""

    def predict(self, obs: np.ndarray) -> int:
        with paddle.no_grad():
            return int(self.alg.predict(paddle.to_tensor(obs[None], dtype="float32")).numpy()[0])

    def value(self, obs: np.ndarray) -> np.ndarray:
        with paddle.no_grad():
            return self.alg.value(paddle.to_tensor(obs, dtype="float32")).numpy()

    def learn(self, batch: dict) -> dict:
        """One A2C step on a ``[T, N]`` rollout from an actor."""
        T, N = batch["rewards"].shape
        both = self.value(np.concatenate([batch["obs"], batch["next_obs"]]).reshape(2 * T * N, -1)).reshape(2 * T, N)
        advantages, returns = gae(batch["rewards"], both[:T], both[T:], batch["terminated"], batch["ends"],
                                  HP["gamma"], HP["gae_lambda"])
        return self.alg.learn(batch["obs"].reshape(T * N, -1), batch["actions"].reshape(-1),
                              advantages.reshape(-1), returns.reshape(-1))


def main() -> None:
    args = async_learning.make_parser(__doc__, HP, save="a3c.h5").parse_args()
    paddle.seed(args.seed)
    model_fn = functools.partial(MLPActorCritic, 4, 2, HP["hidden"])
    algorithm = A2C(model_fn(), lr=HP["lr"], value_coef=HP["value_coef"], entropy_coef=HP["entropy_coef"],
                    max_grad_norm=HP["max_grad_norm"])
    async_learning.main("A3C", args, A3CAgent(algorithm), model_fn, HP["num_envs"], HP["rollout_steps"])


if __name__ == "__main__":
    main()
