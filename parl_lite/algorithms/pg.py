"""REINFORCE (Williams, 1992): the policy gradient, on the returns the caller gives."""

from typing import Any

import paddle

from parl_lite.algorithms.optimizers import Adam
from parl_lite.core.algorithm import Algorithm
from parl_lite.core.learn_inputs import DISCRETE_ACTIONS, OBSERVATIONS, STEP_VALUES, LearnInputs, check_action_indices
from parl_lite.core.model import Model
from parl_lite.core.samples import Episode

__all__ = ["PolicyGradient"]

_MIN_PROB = 1e-8  # floor of a probability before its log


class PolicyGradient(Algorithm):
    """Policy gradient for discrete actions (PARL's ``PolicyGradient``).

    The model maps observations to action probabilities (a softmax output). ``learn`` ascends
    ``E[log pi(a|s) * G]`` on the actions taken and their returns ``G``.

    Args:
        model: policy network returning probabilities ``[..., act_dim]``.
        lr: Adam learning rate.
    """

    def __init__(self, model: Model, lr: float) -> None:
        super().__init__(model)
        if not lr > 0:
            raise ValueError(f"lr must be positive, got {lr}")
        self.optimizer = Adam(learning_rate=lr, parameters=model.parameters())

    def predict(self, obs: paddle.Tensor) -> paddle.Tensor:
        """The action probabilities ``model(obs)``, ``[..., act_dim]``."""
        return self.model(obs)

    def greedy_actions(self, obs: paddle.Tensor) -> paddle.Tensor:
        """The most probable actions, ``[batch]``."""
        return paddle.argmax(self.model(obs), axis=-1)

    def sample_actions(self, obs: paddle.Tensor) -> tuple[paddle.Tensor, paddle.Tensor]:
        """Actions drawn from the policy ``[batch]`` and their log-probabilities ``[batch]``."""
        probs = self.model(obs)
        actions = paddle.multinomial(probs, num_samples=1)
        return actions.squeeze(-1), paddle.log(paddle.take_along_axis(probs, actions, axis=-1).squeeze(-1))

    learn_inputs = LearnInputs(obs=OBSERVATIONS, action=DISCRETE_ACTIONS, reward=STEP_VALUES)
    sample_type = Episode

    def learn_arguments(self, sample: Episode) -> dict[str, Any]:
        """An episode under :meth:`learn`'s names (PARL's): its returns are the ``reward``."""
        return {"obs": sample.obs, "action": sample.actions, "reward": sample.returns}

    def learn(self, obs: paddle.Tensor, action: paddle.Tensor, reward: paddle.Tensor) -> paddle.Tensor:
        """One Adam step on ``-mean(log pi(action|obs) * reward)``.

        Args:
            obs: ``[N, obs_dim]``.
            action: the actions taken, whole numbers in ``[0, act_dim)``, ``[N]`` or ``[N, 1]``.
            reward: the return ``G`` of each step (e.g. the normalised reward-to-go), ``[N]`` or
                ``[N, 1]``.

        Returns:
            The loss, a 0-D tensor.

        Raises:
            TypeError, ValueError: the arrays do not fit (see :mod:`parl_lite.core.learn_inputs`);
                no update is made.
        """
        probs = self.model(obs)
        check_action_indices(type(self).__name__, "action", action, probs.shape[-1])
        taken = paddle.take_along_axis(probs, action.reshape([-1, 1]).astype("int64"), axis=-1).squeeze(-1)
        loss = -(paddle.log(taken.clip(min=_MIN_PROB)) * reward.reshape([-1])).mean()
        self.optimizer.clear_grad()
        loss.backward()
        self.optimizer.step()
        return loss
