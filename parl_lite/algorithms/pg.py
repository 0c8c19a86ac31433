"""REINFORCE (Williams, 1992): the policy gradient with normalised discounted returns."""

from collections.abc import Mapping
import paddle
import paddle.nn.functional as F

from parl_lite.core.algorithm import Algorithm
from parl_lite.core.model import Model

__all__ = ["PolicyGradient"]


class PolicyGradient(Algorithm):
    """Policy gradient for discrete actions.

    The model maps observations to action probabilities (a softmax output). ``learn`` takes the
    actions taken and their (normalised) returns and ascends ``E[log pi(a|s) * G]``.

    Args:
        model: policy network returning probabilities of shape ``[batch, act_dim]``.
        lr: Adam learning rate.
    """

    def __init__(self, model: Model, lr: float) -> None:
        super().__init__(model)
        if lr <= 0:
            raise ValueError(f"lr must be positive, got {lr}")
        self.optimizer = paddle.optimizer.Adam(learning_rate=lr, parameters=model.parameters())

    def predict(self, obs: paddle.Tensor) -> paddle.Tensor:
        """Greedy actions (the most probable), shape ``[batch]``."""
        return paddle.argmax(self.model(obs), axis=-1)

    def sample(self, obs: paddle.Tensor) -> paddle.Tensor:
        """Actions drawn from the policy, shape ``[batch]``."""
        return paddle.multinomial(self.model(obs), num_samples=1).squeeze(-1)

    def learn(self, batch: Mapping[str, paddle.Tensor]) -> dict[str, paddle.Tensor]:
        """One gradient step on ``-mean(log pi(action|obs) * returns)``.

        Args:
            batch: ``obs`` ``[N, obs_dim]``, ``action`` ``[N]`` and ``returns`` ``[N]``.

        Returns:
            ``loss``.
        """
        probs = self.model(batch["obs"])
        log_probs = paddle.log(probs.clip(min=1e-8))
        taken = (log_probs * F.one_hot(batch["action"], probs.shape[-1])).sum(axis=-1)
        loss = -(taken * batch["returns"]).mean()
        loss.backward()
        self.optimizer.step()
        self.optimizer.clear_grad()
        return {"loss": loss}
