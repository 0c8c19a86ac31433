"""Deep Q-Network (Mnih et al., 2015) and Double DQN (van Hasselt et al., 2016).

``model(obs)`` returns Q-values ``[batch, num_actions]``. A deep copy of it is the target network,
refreshed by :meth:`DQN.sync_target` (a hard copy, or Polyak averaging with ``decay``).
"""
from collections.abc import Mapping
import copy

import paddle
import paddle.nn.functional as F

from parl_lite.core.algorithm import Algorithm
from parl_lite.algorithms.common import GlobalNormClip
from parl_lite.core.model import Model

__all__ = ["DQN", "DDQN"]


class DQN(Algorithm):
    """Q-learning with a target network and a Huber TD loss.

    Args:
        model: Q-network, ``model(obs) -> [batch, num_actions]``.
        gamma: discount factor in [0, 1].
        lr: Adam learning rate.
        double: Double DQN: the online network picks the next action, the target network
            values it (reduces the max operator's over-estimation).
        max_grad_norm: global gradient-norm clip; None: no clipping.
    """

    def __init__(self, model: Model, gamma: float, lr: float, double: bool = False,
                 max_grad_norm: "float | None" = 10.0) -> None:
        super().__init__(model)
        if not 0.0 <= gamma <= 1.0:
            raise ValueError(f"gamma must be in [0, 1], got {gamma}")
        if lr <= 0:
            raise ValueError(f"lr must be positive, got {lr}")
        self.gamma, self.double = gamma, double
        self.target_model = copy.deepcopy(model)
        self.target_model.eval()
        for parameter in self.target_model.parameters():
            parameter.stop_gradient = True
        clip = GlobalNormClip(max_grad_norm) if max_grad_norm else None
        self.optimizer = paddle.optimizer.Adam(learning_rate=lr, parameters=model.parameters(), grad_clip=clip)

    def q_values(self, obs: paddle.Tensor) -> paddle.Tensor:
        """Q-values of every action, ``[batch, num_actions]``."""
        return self.model(obs)

    def predict(self, obs: paddle.Tensor) -> paddle.Tensor:
        """Greedy actions, ``[batch]`` (exploration, e.g. epsilon-greedy, belongs to the loop)."""
        return paddle.argmax(self.model(obs), axis=-1)

    sample = predict

    def learn(self, batch: Mapping[str, paddle.Tensor]) -> dict[str, paddle.Tensor]:
        """One Adam step on the Huber loss between ``Q(obs, action)`` and the TD target
        ``reward + gamma * (1 - terminated) * Q_target(next_obs, a*)``.

        Args:
            batch: ``obs``, ``next_obs`` ``[N, obs_dim]``; ``action``, ``reward`` and
                ``terminated`` ``[N]``. ``terminated`` marks true terminations only: a
                time-limit truncation must bootstrap.

        Returns:
            ``loss``.
        """
        with paddle.no_grad():
            next_obs = batch["next_obs"]
            next_q = self.target_model(next_obs)
            if self.double:
                best = paddle.argmax(self.model(next_obs), axis=-1, keepdim=True)
                next_value = paddle.take_along_axis(next_q, best, axis=-1).squeeze(-1)
            else:
                next_value = next_q.max(axis=-1)
            target = batch["reward"] + self.gamma * (1.0 - batch["terminated"].astype("float32")) * next_value
        q = paddle.take_along_axis(self.model(batch["obs"]), batch["action"].reshape([-1, 1]), axis=-1).squeeze(-1)
        loss = F.smooth_l1_loss(q, target)
        loss.backward()
        self.optimizer.step()
        self.optimizer.clear_grad()
        return {"loss": loss}

    def sync_target(self, decay: float = 0.0) -> None:
        """``target = decay * target + (1 - decay) * model``; ``decay=0`` copies."""
        self.model.sync_weights_to(self.target_model, decay=decay)


class DDQN(DQN):
    """Double DQN: :class:`DQN` with ``double=True``."""

    def __init__(self, model: Model, gamma: float, lr: float, max_grad_norm: "float | None" = 10.0) -> None:
        super().__init__(model, gamma, lr, double=True, max_grad_norm=max_grad_norm)
