"""IMPALA on CartPole-v1: V-trace learner here, rollout actors on the process pool.

    python scripts/train_impala.py --seed 1 --actors 2

Actors (``@remote_class`` :class:`RolloutWorker`) play ``unroll`` steps in ``num_envs``
environments with the weights they were last sent and return the trajectories with their
behaviour log-probabilities. The learner takes whichever trajectory arrives first, corrects for the
policy lag with V-trace, takes one gradient step and pushes the new weights to that actor with its
next request. Update order depends on timing, so a seed does not repeat a run exactly.

Every ``--eval-every`` env steps the greedy policy plays 10 episodes; training stops when their
mean reaches ``--target`` or after ``--total-steps``; the agent is saved to an HDF5 checkpoint.
The last line is a JSON summary of the run.
"""
import functools

import numpy as np
import paddle

import async_learning
import parl_lite
from parl_lite.algorithms import IMPALA
from parl_lite.utils.models import MLPActorCritic

HP = dict(num_envs=8, unroll=10, gamma=0.99, lr=1e-3, value_coef=0.5, entropy_coef=0.0, max_grad_norm=0.5,
          clip_rho=1.0, clip_c=1.0, hidden=64, total_steps=500_000, target=475.0, eval_every=5_000)


class ImpalaAgent(parl_lite.Agent):
    """The learner's side: greedy actions for evaluation and V-trace updates."""

    def predict(self, obs: np.ndarray) -> int:
        with paddle.no_grad():
            return int(self.alg.predict(paddle.to_tensor(obs[None], dtype="float32")).numpy()[0])

    def learn(self, batch: dict) -> dict:
        return self.alg.learn(obs=batch["obs"], actions=batch["actions"], behaviour_log_probs=batch["log_probs"],
                              rewards=batch["rewards"], terminated=batch["terminated"], ends=batch["ends"],
                              next_obs=batch["next_obs"])


def main() -> None:
    args = async_learning.make_parser(__doc__, HP, save="impala.h5").parse_args()
    paddle.seed(args.seed)
    model_fn = functools.partial(MLPActorCritic, 4, 2, HP["hidden"])
    algorithm = IMPALA(model_fn(), gamma=HP["gamma"], lr=HP["lr"], value_coef=HP["value_coef"],
                       entropy_coef=HP["entropy_coef"], max_grad_norm=HP["max_grad_norm"],
                       clip_rho_threshold=HP["clip_rho"], clip_pg_rho_threshold=HP["clip_rho"],
                       clip_c_threshold=HP["clip_c"])
    async_learning.main("IMPALA", args, ImpalaAgent(algorithm), model_fn, HP["num_envs"], HP["unroll"],
                        describe=lambda stats: f"rho {stats.get('mean_rho', float('nan')):.3f}  ")


if __name__ == "__main__":
    main()
