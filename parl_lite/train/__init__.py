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

| loop | algorithms | a round |
|---|---|---|
| :class:`OnPolicyTrainer` | PPO, A2C | a rollout from a vector env, GAE, ``learn`` on its minibatches |
| :class:`OffPolicyTrainer` | DQN, DDPG, TD3, SAC | one env step into the replay memory, updates from it |
| :class:`AsyncTrainer` | A3C, IMPALA | the first rollout back from the remote actors, one ``learn`` |
| :class:`EpisodicTrainer` | PolicyGradient | one episode, discounted returns, one ``learn`` |
"""
import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from parl_lite.train.args import AsyncTrainArgs, TrainArgs, arg, parse_args
    from parl_lite.train.asynchronous import AsyncTrainer
    from parl_lite.train.base import EnvSpaces, RunStopped, Trainer, env_spaces, learn_stats
    from parl_lite.train.callbacks import Callback, CallbackList, EveryNSteps, StopOnThreshold
    from parl_lite.train.episodic import EpisodicTrainer
    from parl_lite.train.evaluation import Evaluator
    from parl_lite.train.exploration import ContinuousExploration, EpsilonGreedy, Exploration
    from parl_lite.train.off_policy import OffPolicyTrainer
    from parl_lite.train.on_policy import OnPolicyTrainer, advantage_batch
    from parl_lite.train.progress import Reporter
    from parl_lite.train.summary import RunSummary

__all__ = ["AsyncTrainArgs", "AsyncTrainer", "Callback", "CallbackList", "ContinuousExploration", "EnvSpaces",
           "EpisodicTrainer", "EpsilonGreedy", "Evaluator", "EveryNSteps", "Exploration", "OffPolicyTrainer",
           "OnPolicyTrainer", "Reporter", "RunStopped", "RunSummary", "StopOnThreshold", "TrainArgs", "Trainer",
           "advantage_batch", "arg", "env_spaces", "learn_stats", "parse_args"]

# where each public name lives: the loops import paddle, so they load on first use, and
# ``parl-lite es-train`` (which must not import paddle) can use the reporter and the summary
_HOMES = {
    "TrainArgs": "args", "AsyncTrainArgs": "args", "arg": "args", "parse_args": "args",
    "AsyncTrainer": "asynchronous", "EnvSpaces": "base",
    "Trainer": "base", "RunStopped": "base", "env_spaces": "base", "learn_stats": "base", "Callback": "callbacks",
    "CallbackList": "callbacks", "EveryNSteps": "callbacks", "StopOnThreshold": "callbacks",
    "EpisodicTrainer": "episodic",
    "Evaluator": "evaluation", "ContinuousExploration": "exploration", "EpsilonGreedy": "exploration",
    "Exploration": "exploration", "OffPolicyTrainer": "off_policy", "OnPolicyTrainer": "on_policy",
    "advantage_batch": "on_policy", "Reporter": "progress", "RunSummary": "summary",
}


def __getattr__(name: str) -> Any:
    """Import the module that holds ``name`` when it is first asked for."""
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value
