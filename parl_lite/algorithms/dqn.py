"""Deep Q-Network (Mnih et al., 2015) and Double DQN (van Hasselt et al., 2016).

``model(obs)`` returns Q-values ``[batch, num_actions]``. A deep copy of it is the target network,
refreshed by :meth:`DQN.sync_target` (a hard copy, or Polyak averaging with ``decay``).
"""
import copy

import paddle
import paddle.nn.functional as F

from parl_lite.algorithms.common import GlobalNormClip, check_hyperparameter, column
from parl_lite.algorithms.onnx_target import TARGET_RUNTIMES, OnnxTarget
from parl_lite.algorithms.optimizers import Adam
from parl_lite.core.algorithm import Algorithm
from parl_lite.core.learn_inputs import (DISCRETE_ACTIONS, OBSERVATIONS, STEP_VALUES, TERMINALS, LearnInputs,
                                         check_action_indices)
from parl_lite.core.model import Model
from parl_lite.core.samples import Transitions

__all__ = ["DQN", "DDQN"]

_LOSSES = {"mse": F.mse_loss, "huber": F.smooth_l1_loss}


class DQN(Algorithm):
    """Q-learning with a target network (PARL's ``DQN``).

    Args:
        model: Q-network, ``model(obs) -> [batch, num_actions]``.
        gamma: discount factor in [0, 1].
        lr: Adam learning rate.
        loss: ``"mse"`` (PARL's) or ``"huber"`` (the smooth L1 loss of the DQN paper and
            Stable-Baselines3).
        max_grad_norm: global gradient-norm clip; None (PARL's): no clipping.
        target_runtime: where the target network runs: ``"paddle"`` (PARL's), or
            ``"onnxruntime"`` with its weights as constants, rebuilt after each sync or restore
            (:class:`parl_lite.algorithms.onnx_target.OnnxTarget`): half the CPU of paddle's
            forward pass on the Nature DQN, for a target copied rarely (Atari: every 1,000 steps).
    """

    def __init__(self, model: Model, gamma: float, lr: float, *, loss: str = "mse",
                 max_grad_norm: float | None = None, target_runtime: str = "paddle") -> None:
        super().__init__(model)
        self.gamma = check_hyperparameter("gamma", gamma, 0.0, 1.0)
        self.lr = check_hyperparameter("lr", lr, 0.0, float("inf"), low_open=True)
        if loss not in _LOSSES:
            raise ValueError(f"loss must be one of {sorted(_LOSSES)}, got {loss!r}")
        if target_runtime not in TARGET_RUNTIMES:
            raise ValueError(f"target_runtime must be one of {TARGET_RUNTIMES}, got {target_runtime!r}")
        self.loss_fn = _LOSSES[loss]
        self.target_model = copy.deepcopy(model)
        self.target_model.eval()
        for parameter in self.target_model.parameters():
            parameter.stop_gradient = True
        self._onnx_target = (OnnxTarget(self.target_model, type(self).__name__)
                             if target_runtime == "onnxruntime" else None)
        clip = GlobalNormClip(max_grad_norm) if max_grad_norm else None
        self.optimizer = Adam(learning_rate=lr, parameters=model.parameters(), grad_clip=clip)

    def predict(self, obs: paddle.Tensor) -> paddle.Tensor:
        """The Q-values of every action, ``[..., num_actions]``."""
        return self.model(obs)

    def greedy_actions(self, obs: paddle.Tensor) -> paddle.Tensor:
        """The actions of highest Q-value, ``[batch]`` (exploration belongs to the loop or the agent)."""
        return paddle.argmax(self.model(obs), axis=-1)

    learn_inputs = LearnInputs(obs=OBSERVATIONS, action=DISCRETE_ACTIONS, reward=STEP_VALUES, next_obs=OBSERVATIONS,
                               terminal=TERMINALS)
    sample_type = Transitions  # learn takes its fields by their names

    def learn(self, obs: paddle.Tensor, action: paddle.Tensor, reward: paddle.Tensor, next_obs: paddle.Tensor,
              terminal: paddle.Tensor) -> paddle.Tensor:
        """One Adam step on the loss between ``Q(obs, action)`` and the TD target
        ``reward + gamma * (1 - terminal) * Q_target(next_obs, a*)``.

        Args:
            obs, next_obs: ``[N, obs_dim]``.
            action: the actions taken, whole numbers in ``[0, num_actions)``, ``[N]`` or ``[N, 1]``.
            reward: ``[N]`` or ``[N, 1]``.
            terminal: ``[N]`` or ``[N, 1]``, 1 where the episode truly ended (a time-limit
                truncation must bootstrap: 0).

        Returns:
            The loss, a 0-D tensor.

        Raises:
            TypeError, ValueError: the arrays do not fit (see :mod:`parl_lite.core.learn_inputs`);
                no update is made.
        """
        with paddle.no_grad():
            target = column(reward) + self.gamma * (1.0 - column(terminal)) * self._next_value(next_obs)
        q_values = self.model(obs)
        check_action_indices(type(self).__name__, "action", action, q_values.shape[-1])
        q = paddle.take_along_axis(q_values, action.reshape([-1, 1]).astype("int64"), axis=-1)
        loss = self.loss_fn(q, target)
        self.optimizer.clear_grad()
        loss.backward()
        self.optimizer.step()
        return loss

    def _next_value(self, next_obs: paddle.Tensor) -> paddle.Tensor:
        """``max_a Q_target(next_obs, a)``, ``[N, 1]``."""
        return self._target_q(next_obs).max(axis=-1, keepdim=True)

    def _target_q(self, obs: paddle.Tensor) -> paddle.Tensor:
        """The target network's Q-values, in paddle or onnxruntime (``target_runtime``)."""
        return self.target_model(obs) if self._onnx_target is None else self._onnx_target(obs)

    def sync_target(self, decay: float = 0.0) -> None:
        """``target = decay * target + (1 - decay) * model``; ``decay=0`` (PARL's) copies."""
        self.model.sync_weights_to(self.target_model, decay=decay)


class DDQN(DQN):
    """Double DQN (PARL's ``DDQN``): the online network picks the next action, the target network
    values it, which reduces the max operator's over-estimation. Arguments as :class:`DQN`."""

    def _next_value(self, next_obs: paddle.Tensor) -> paddle.Tensor:
        best = paddle.argmax(self.model(next_obs), axis=-1, keepdim=True)
        return paddle.take_along_axis(self._target_q(next_obs), best, axis=-1)
