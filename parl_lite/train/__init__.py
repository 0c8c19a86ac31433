"""Training loops for every algorithm: one evaluator, one reporter, callbacks, checkpoints.

    import paddle
    from parl_lite import train
    from parl_lite.algorithms import PPO
    from parl_lite.utils.models import MLPActorCritic

    paddle.seed(1)
    spaces = train.env_spaces("CartPole-v1")
    ppo = PPO(MLPActorCritic(spaces.obs_dim, spaces.act_dim), clip_param=0.2, value_loss_coef=1.0, initial_lr=1e-3,
              use_clipped_value_loss=False)
    trainer = train.OnPolicyTrainer(ppo, "CartPole-v1", num_envs=8, rollout_steps=32, epochs=20, minibatch_size=256,
                                    seed=1, target=475)
    summary = trainer.learn(total_timesteps=100_000, callback=None, progress_bar=True)

| loop | algorithms (sample) | a round |
|---|---|---|
| :class:`OnPolicyTrainer` | PPO, A2C (``AdvantageBatch``) | a rollout from a vector env, GAE, ``learn`` on it |
| :class:`OffPolicyTrainer` | DQN, DDPG, TD3, SAC (``Transitions``) | one env step into the replay memory, updates |
| :class:`AsyncTrainer` | A3C (``AdvantageBatch``), IMPALA (``Trajectories``) | a remote rollout, one ``learn`` |
| :class:`EpisodicTrainer` | PolicyGradient (``Episode``) | one episode, discounted returns, one ``learn`` |

A loop builds the sample its algorithm learns from (the algorithm's ``sample_type``, one of
:mod:`parl_lite.core.samples`) and calls ``agent.learn_from(sample)``: the algorithm maps the
sample to its ``learn``'s arguments, so the loops name no algorithm.
"""
from typing import TYPE_CHECKING

from parl_lite.lazy import lazy_exports

if TYPE_CHECKING:
    from parl_lite.train.args import AsyncTrainArgs, ContinuousOffPolicyArgs, RemoteArgs, TrainArgs, arg, parse_args
    from parl_lite.train.asynchronous import AsyncTrainer
    from parl_lite.train.base import EnvSpaces, RunStopped, Trainer, env_spaces, learn_stats
    from parl_lite.train.callbacks import Callback, CallbackList, EveryNSteps, StopOnThreshold
    from parl_lite.train.episodic import EpisodicTrainer
    from parl_lite.train.evaluation import Evaluator
    from parl_lite.train.exploration import ContinuousExploration, EpsilonGreedy, Exploration
    from parl_lite.train.off_policy import OffPolicyTrainer
    from parl_lite.train.on_policy import OnPolicyTrainer
    from parl_lite.common.progress import Reporter
    from parl_lite.common.summary import RunSummary

# public name -> the module that defines it: the loops import paddle, so they load on first use, and
# ``parl-lite es-train`` (which must not import paddle) can use the reporter and the summary
_LAZY = {
    "TrainArgs": "parl_lite.train.args", "AsyncTrainArgs": "parl_lite.train.args",
    "ContinuousOffPolicyArgs": "parl_lite.train.args", "RemoteArgs": "parl_lite.train.args",
    "arg": "parl_lite.train.args",
    "parse_args": "parl_lite.train.args",
    "AsyncTrainer": "parl_lite.train.asynchronous",
    "EnvSpaces": "parl_lite.train.base", "Trainer": "parl_lite.train.base", "RunStopped": "parl_lite.train.base",
    "env_spaces": "parl_lite.train.base", "learn_stats": "parl_lite.train.base",
    "Callback": "parl_lite.train.callbacks", "CallbackList": "parl_lite.train.callbacks",
    "EveryNSteps": "parl_lite.train.callbacks", "StopOnThreshold": "parl_lite.train.callbacks",
    "EpisodicTrainer": "parl_lite.train.episodic",
    "Evaluator": "parl_lite.train.evaluation",
    "ContinuousExploration": "parl_lite.train.exploration", "EpsilonGreedy": "parl_lite.train.exploration",
    "Exploration": "parl_lite.train.exploration",
    "OffPolicyTrainer": "parl_lite.train.off_policy",
    "OnPolicyTrainer": "parl_lite.train.on_policy",
    "Reporter": "parl_lite.common.progress",
    "RunSummary": "parl_lite.common.summary",
}

__all__ = ["AsyncTrainArgs", "AsyncTrainer", "Callback", "CallbackList", "ContinuousExploration",
           "ContinuousOffPolicyArgs", "EnvSpaces", "EpisodicTrainer", "EpsilonGreedy", "Evaluator",
           "EveryNSteps", "Exploration", "OffPolicyTrainer", "OnPolicyTrainer", "RemoteArgs", "Reporter", "RunStopped",
           "RunSummary", "StopOnThreshold", "TrainArgs", "Trainer", "arg", "env_spaces",
           "learn_stats", "parse_args"]

__getattr__, __dir__ = lazy_exports(globals(), _LAZY)
