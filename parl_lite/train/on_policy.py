"""The on-policy loop: rollouts from a vector environment (here, or in remote actors gathered
synchronously), the :class:`parl_lite.core.samples.AdvantageBatch` of each, ``learn`` on it or on
its minibatches over several epochs."""

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from parl_lite.core.agent import Agent
from parl_lite.core.algorithm import Algorithm, to_tensor
from parl_lite.core.model import Model
from parl_lite.core.samples import AdvantageBatch
from parl_lite.train.base import Trainer, spaces_of
from parl_lite.train.remote_rollouts import RemoteRollouts, RolloutActors, translated_policy
from parl_lite.utils.normalization import RewardScaler
from parl_lite.utils.rollout import OnnxPolicySampler, VectorRollout
from parl_lite.utils.scheduler import LinearDecayScheduler

__all__ = ["OnPolicyTrainer"]

_SAMPLER_STREAM = 1  # the action draws' random stream beside the seed's (the minibatch shuffles are the seed's own)


class OnPolicyTrainer(Trainer):
    """Collect ``rollout_steps`` steps in each of ``num_envs`` environments with ``agent.sample``,
    compute GAE advantages with the agent's value function, and learn from the batch: ``epochs``
    passes over it, in shuffled minibatches of ``minibatch_size`` (PPO; as PARL's PPO agent does),
    or one ``learn`` on the whole batch (A2C: the defaults).

    The algorithm learns from :class:`parl_lite.core.samples.AdvantageBatch` samples
    (``sample_type``; PPO, A2C) and has ``sample_actions(obs) -> (actions, log_probs)`` and
    ``value(obs)``; the loop calls ``agent.learn_from`` on each (mini)batch, which hands ``learn``
    the arrays under the algorithm's names (``alg.learn_arguments``). When the algorithm draws its
    actions from its policy alone (``samples_from_policy``: PPO, A2C) and the policy translates to
    ONNX, the environments here act through the policy's graph in onnxruntime, given the weights
    before each rollout, and the draws are numpy's (seeded by ``seed``), as the rollout actors'.

    Args:
        agent: the agent or algorithm to train.
        env_id: a registered gymnasium id.
        num_envs: environments stepped together (one batched forward per step).
        rollout_steps: steps per environment between updates.
        gamma: discount.
        gae_lambda: GAE's lambda (1: n-step Monte-Carlo returns, as A2C).
        epochs: passes over each batch.
        minibatch_size: rows per ``learn``; None (or at least the batch size): the whole batch,
            unshuffled (its mean loss does not depend on the order).
        anneal: decay the learning rate (and PPO's ``clip_param``) linearly to 0 over the budget.
        normalize_reward: divide the rewards the algorithm learns from by the running standard
            deviation of the discounted return (SB3's ``VecNormalize(norm_reward=True)``); the
            model's observation normaliser, if it has one, is fed each rollout's observations
            after the algorithm learned from it, so a rollout is collected and learned from with
            the same statistics.
        actors: 0: the environments step in this process; more: that many remote rollout actors of
            ``num_envs`` environments each (on the local pool, or the cluster or Ray
            ``parl_lite.connect`` gave), which play every round with the current weights, as
            PARL's A2C example (:class:`parl_lite.train.remote_rollouts.RemoteRollouts`).
        model_fn: builds the actors' paddle copy of the model when its policy has no ONNX
            translation (see :class:`parl_lite.train.remote_rollouts.RolloutActors`); default: the
            model's class with its recorded constructor arguments.
        **options: the :class:`Trainer` options (seed, target, eval_every, save, ...); ``seed``
            also seeds the minibatch shuffling.
    """

    def __init__(self, agent: Agent | Algorithm, env_id: str, *, num_envs: int = 8, rollout_steps: int = 32,
                 gamma: float = 0.99, gae_lambda: float = 0.95, epochs: int = 1, minibatch_size: int | None = None,
                 anneal: bool = False, normalize_reward: bool = False, actors: int = 0,
                 model_fn: Callable[[], Model] | None = None, **options) -> None:
        super().__init__(agent, env_id, **options)
        self.sample_type = self._sample_type(AdvantageBatch)
        self._value = self._value_function(self.sample_type)
        for name, value in (("rollout_steps", rollout_steps), ("epochs", epochs), ("minibatch_size", minibatch_size)):
            if value is not None and value <= 0:
                raise ValueError(f"{name} must be positive, got {value}")
        if actors < 0:
            raise ValueError(f"actors must be 0 (environments here) or more, got {actors}")
        self.rollout: VectorRollout | RemoteRollouts
        if actors:
            maker = RolloutActors(self.agent.alg.model, env_id, num_envs, self.seed, self.env_kwargs, model_fn,
                                  "OnPolicyTrainer")
            self.rollout = RemoteRollouts(maker, actors=actors, name=self.name)
        else:
            self.rollout = VectorRollout(env_id, num_envs, seed=self.seed, env_kwargs=self.env_kwargs)
        self._sampler = self._onnx_sampler(self.rollout) if isinstance(self.rollout, VectorRollout) else None
        self.num_actors = actors or None
        self.num_envs, self.rollout_steps = num_envs, rollout_steps
        self._per_round = rollout_steps * num_envs * max(actors, 1)  # steps of a round with every actor
        self.gamma, self.gae_lambda, self.anneal = gamma, gae_lambda, anneal
        self.epochs, self.minibatch_size = epochs, minibatch_size
        self.rng = np.random.default_rng(self.seed)
        alg: Any = self.agent.alg  # its optimizer and, if it has one, its clip_param (PPO's)
        self._base_lr = alg.optimizer.get_lr() if anneal else None
        self._base_clip: float | None = getattr(alg, "clip_param", None) if anneal else None
        self._schedule: LinearDecayScheduler | None = None
        self.reward_scaler = RewardScaler(num_envs * max(actors, 1), gamma) if normalize_reward else None

    def _budget(self, total_steps: int) -> int:
        per_round = self._per_round
        num_updates = max(1, total_steps // per_round)
        if self.anneal:
            self._schedule = LinearDecayScheduler(1.0, num_updates, end_value=0.0)
        return num_updates * per_round

    def _onnx_sampler(self, rollout: VectorRollout) -> OnnxPolicySampler | None:
        """The actions' sampler in onnxruntime (a tenth of paddle's time per step on small batches)
        when the algorithm draws from its policy alone and the policy translates; else None (the
        algorithm's ``sample_actions`` draws them)."""
        if not self.agent.alg.samples_from_policy:
            return None
        env = rollout.env  # its spaces, without making another environment
        spaces = spaces_of(env.single_observation_space, env.single_action_space, self.env_id)
        graph = translated_policy(self.agent.alg.model, spaces, f"{self.name}: the actions' draws")
        return OnnxPolicySampler(graph, [self.seed, _SAMPLER_STREAM]) if graph is not None else None

    def _policy(self, obs: np.ndarray) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        actions, log_probs = self.agent.sample(obs)
        return actions, {"log_probs": log_probs}

    def _round(self, total_steps: int) -> None:
        if self._schedule is not None and self._base_lr is not None:  # both set when annealing
            fraction = self._schedule.value_at(self.steps // self._per_round)
            alg: Any = self.agent.alg
            alg.optimizer.set_lr(self._base_lr * fraction)
            if self._base_clip is not None:
                alg.clip_param = self._base_clip * max(fraction, 1e-3)
        if isinstance(self.rollout, RemoteRollouts):
            rollout = self.rollout.collect(self.agent.get_weights(), self.rollout_steps)
        elif self._sampler is not None:
            self._sampler.set_weights(self.agent.get_weights())
            rollout = self.rollout.collect(self._sampler, self.rollout_steps)
        else:
            rollout = self.rollout.collect(self._policy, self.rollout_steps)
        if self.reward_scaler is not None:
            rollout["rewards"] = self._scaled_rewards(rollout["rewards"], rollout["ends"])
        sample = self.sample_type.from_rollout(rollout, self._value, self.gamma, self.gae_lambda)
        for minibatch in self._minibatches(sample):
            self.last_learned = self.agent.learn_from(minibatch)
            self.updates += 1
        if self.obs_normalizer is not None:
            self.obs_normalizer.update(rollout["obs"])
        self.steps += rollout["rewards"].size

    def _scaled_rewards(self, rewards: np.ndarray, ends: np.ndarray) -> np.ndarray:
        """``[T, N]`` rewards scaled step by step, each with the statistics of its time (as SB3's)."""
        assert self.reward_scaler is not None
        scaled = np.empty(rewards.shape, dtype=np.float32)
        for t in range(len(rewards)):
            self.reward_scaler.observe(rewards[t], ends[t])
            scaled[t] = self.reward_scaler.scale(rewards[t])
        return scaled

    def _minibatches(self, sample: AdvantageBatch) -> Iterator[AdvantageBatch]:
        """Every epoch's minibatches: shuffled slices of ``minibatch_size`` rows, or the whole
        batch each time, its arrays made tensors once (the learn wrapper would convert them, and
        PPO normalise the advantages, at every epoch)."""
        size = len(sample)
        if self.minibatch_size is None or self.minibatch_size >= size:
            whole = to_tensor(sample)
            for _ in range(self.epochs):
                yield whole
            return
        for _ in range(self.epochs):
            order = self.rng.permutation(size)
            for start in range(0, size, self.minibatch_size):
                yield sample.rows(order[start:start + self.minibatch_size])

    def train_return(self) -> float:
        return self.rollout.returns.recent_mean

    def _close(self) -> None:
        self.rollout.close()
