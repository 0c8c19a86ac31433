"""IMPALA's learner update (Espeholt et al., 2018): actor-critic with V-trace off-policy correction,
PARL's ``IMPALA``.

Actors play with slightly old weights (the behaviour policy ``mu``) and send trajectories with the
behaviour policy's logits; the learner re-evaluates them under its current policy ``pi`` and value
function, computes V-trace targets (:func:`parl_lite.algorithms.vtrace.vtrace`) and takes one
gradient step on

    pi_loss + vf_loss_coeff * vf_loss + entropy_coeff * entropy,
    pi_loss = -sum(log pi(a|x) * A_vtrace),  vf_loss = 0.5 * sum((v_s - V(x))^2),  entropy = sum(H(pi(.|x)))

(sums as PARL's; ``reduction="mean"`` takes means). A negative ``entropy_coeff`` rewards entropy.

A batch is ``B`` trajectories of ``sample_batch_steps`` (``T``) steps each, side by side in one
axis of ``B * T`` rows (trajectory ``b``, step ``t`` at row ``b * T + t``). The last step of each
trajectory only supplies the bootstrap value ``V(x_T)``: the update trains on the first ``T - 1``.
"""
from typing import NamedTuple

import numpy as np
import paddle

from parl_lite.algorithms.actor_critic import ActorCriticAlgorithm
from parl_lite.algorithms.common import GlobalNormClip, check_hyperparameter, reduction_of
from parl_lite.algorithms.optimizers import Adam
from parl_lite.algorithms.vtrace import VTraceReturns, vtrace
from parl_lite.core.learn_inputs import ACTIONS, OBSERVATIONS, POLICY_OUTPUTS, STEP_VALUES, TERMINALS, LearnInputs
from parl_lite.core.model import Model
from parl_lite.core.samples import Trajectories
from parl_lite.core.distributions import Categorical, Distribution, make_distribution, policy_output

__all__ = ["IMPALA", "IMPALALosses", "VTraceLoss"]


class VTraceLoss(NamedTuple):
    """The terms of IMPALA's loss (0-D tensors) and the V-trace targets it used (``[T - 1, B]``
    tensors), under PARL's attribute names."""

    total_loss: paddle.Tensor
    pi_loss: paddle.Tensor
    vf_loss: paddle.Tensor
    entropy: paddle.Tensor
    vtrace_returns: VTraceReturns


class IMPALALosses(NamedTuple):
    """What :meth:`IMPALA.learn` returns (a tuple, as PARL's)."""

    vtrace_loss: VTraceLoss
    kl: paddle.Tensor  # mean KL(pi || mu) over the batch, for monitoring


class IMPALA(ActorCriticAlgorithm):
    """The IMPALA learner (see :class:`ActorCriticAlgorithm` for the models).

    Args:
        model: the policy (``policy(obs)`` logits), with ``value(obs)`` when ``critic`` is None.
        sample_batch_steps: steps ``T`` of each trajectory in a batch (at least 2: the last one is
            the bootstrap).
        gamma: discount factor in [0, 1].
        vf_loss_coeff: weight of the value loss.
        clip_rho_threshold: V-trace ``rho_bar``.
        clip_pg_rho_threshold: clip of the policy-gradient importance weights.
        critic: a separate value model.
        lr: the learning rate until ``learn`` is given one (PARL's IMPALA starts at 0.001).
        max_grad_norm: global gradient-norm clip (PARL's: 40); None: no clipping.
        clip_c_threshold: V-trace ``c_bar`` (PARL's: 1).
        reduction: ``"sum"`` (PARL's) or ``"mean"`` of the losses over the batch.
        entropy_coeff: the weight of the entropy term when ``learn`` is given none.
    """

    def __init__(self, model: Model, sample_batch_steps: int | None = None, gamma: float = 0.99,
                 vf_loss_coeff: float = 0.5, clip_rho_threshold: float = 1.0, clip_pg_rho_threshold: float = 1.0, *,
                 critic: Model | None = None, lr: float = 1e-3, max_grad_norm: float | None = 40.0,
                 clip_c_threshold: float = 1.0, reduction: str = "sum", entropy_coeff: float = 0.0) -> None:
        super().__init__(model, critic)
        if isinstance(sample_batch_steps, bool) or not isinstance(sample_batch_steps, int) or sample_batch_steps < 2:
            raise ValueError(f"sample_batch_steps must be an int >= 2 (the steps of each trajectory, the last one "
                             f"the bootstrap), got {sample_batch_steps!r}")
        self.sample_batch_steps = sample_batch_steps
        self.gamma = check_hyperparameter("gamma", gamma, 0.0, 1.0)
        self.vf_loss_coeff = check_hyperparameter("vf_loss_coeff", vf_loss_coeff, 0.0, float("inf"))
        self.clip_rho_threshold = check_hyperparameter("clip_rho_threshold", clip_rho_threshold, 0.0, float("inf"))
        self.clip_pg_rho_threshold = check_hyperparameter("clip_pg_rho_threshold", clip_pg_rho_threshold, 0.0,
                                                          float("inf"))
        self.clip_c_threshold = check_hyperparameter("clip_c_threshold", clip_c_threshold, 0.0, float("inf"))
        self.entropy_coeff = check_hyperparameter("entropy_coeff", entropy_coeff, -float("inf"), float("inf"))
        check_hyperparameter("lr", lr, 0.0, float("inf"), low_open=True)
        self.reduce = reduction_of(reduction)
        clip = GlobalNormClip(max_grad_norm) if max_grad_norm else None
        self.optimizer = Adam(learning_rate=lr, parameters=self.parameters(), grad_clip=clip)

    learn_inputs = LearnInputs(obs=OBSERVATIONS, actions=ACTIONS, behaviour_logits=POLICY_OUTPUTS, rewards=STEP_VALUES,
                               dones=TERMINALS)
    sample_type = Trajectories  # of sample_batch_steps rows each; learn takes its fields by their names

    def learn(self, obs: paddle.Tensor, actions: paddle.Tensor, behaviour_logits: paddle.Tensor,
              rewards: paddle.Tensor, dones: paddle.Tensor, learning_rate: float | None = None,
              entropy_coeff: float | None = None) -> IMPALALosses:
        """One gradient step on ``B`` trajectories of ``sample_batch_steps`` steps (see the module
        docstring for the layout).

        Args:
            obs: ``[B * T, ...]``.
            actions: ``[B * T]`` (or ``[B * T, act_dim]``).
            behaviour_logits: the actors' policy output at ``obs`` (logits ``[B * T, num_actions]``,
                or a ``(mean, std)`` pair).
            rewards: ``[B * T]``.
            dones: ``[B * T]``, true where the episode ended at that step (the trace is cut there).
            learning_rate: when given, the learning rate from this step on.
            entropy_coeff: weight of the entropy term, negative rewards entropy; None: the
                constructor's.

        Returns:
            ``(vtrace_loss, kl)``: a :class:`VTraceLoss` and the mean ``KL(pi || mu)``.

        Raises:
            ValueError: the number of rows is not a multiple of ``sample_batch_steps``, or
                ``behaviour_logits`` differ in shape from the policy's output.
            TypeError, ValueError: the arrays do not fit (see :mod:`parl_lite.core.learn_inputs`);
                no update is made.
        """
        steps = self.sample_batch_steps
        if obs.shape[0] % steps:
            raise ValueError(f"IMPALA.learn: {obs.shape[0]} rows are not whole trajectories of "
                             f"sample_batch_steps={steps} steps")
        trajectories = obs.shape[0] // steps

        def trained(x: paddle.Tensor) -> paddle.Tensor:  # [B * T] -> [B, T - 1], the steps trained on
            return x.reshape([trajectories, steps])[:, :-1]

        def time_major(x: paddle.Tensor) -> np.ndarray:  # [B * T] -> [T, B] float64
            return x.numpy().astype(np.float64).reshape(trajectories, steps).T

        dist, values = self.distribution_and_value(obs)
        values = values.reshape([-1])
        behaviour = make_distribution(behaviour_logits)
        if _parameters_shape(behaviour) != _parameters_shape(dist):
            raise ValueError(f"IMPALA.learn: behaviour_logits have shape {_parameters_shape(behaviour)}; the "
                             f"policy's output at obs has {_parameters_shape(dist)}")
        target_log_probs = self.checked_log_prob(dist, actions, "actions")
        with paddle.no_grad():
            kl = dist.kl(behaviour).mean()
            all_values = time_major(values)
            returns = vtrace(time_major(behaviour.log_prob(actions))[:-1], time_major(target_log_probs)[:-1],
                             rewards=time_major(rewards)[:-1],
                             discounts=self.gamma * (1.0 - time_major(dones.astype("float32"))[:-1]),
                             values=all_values[:-1], bootstrap_value=all_values[-1],
                             clip_rho_threshold=self.clip_rho_threshold,
                             clip_pg_rho_threshold=self.clip_pg_rho_threshold, clip_c_threshold=self.clip_c_threshold)
            vtrace_returns = VTraceReturns(paddle.to_tensor(returns.vs), paddle.to_tensor(returns.pg_advantages))
        pi_loss = -self.reduce(trained(target_log_probs) * vtrace_returns.pg_advantages.t())
        vf_loss = 0.5 * self.reduce((trained(values) - vtrace_returns.vs.t()) ** 2)
        entropy = self.reduce(trained(dist.entropy()))
        total_loss = pi_loss + vf_loss * self.vf_loss_coeff + entropy * (
            self.entropy_coeff if entropy_coeff is None else entropy_coeff)
        if learning_rate:
            self.optimizer.set_lr(learning_rate)
        total_loss.backward()
        self.optimizer.step()
        self.optimizer.clear_grad()
        return IMPALALosses(VTraceLoss(total_loss, pi_loss, vf_loss, entropy, vtrace_returns), kl)

    def sample(self, obs: paddle.Tensor) -> tuple[paddle.Tensor, paddle.Tensor]:
        """The policy's action probabilities and logits at ``obs`` (PARL's), each
        ``[batch, num_actions]``; the agent draws the actions."""
        logits = policy_output(self.model, obs)
        return paddle.nn.functional.softmax(logits, axis=-1), logits


def _parameters_shape(dist: Distribution) -> list[int]:
    """The shape of a distribution's parameters: logits, or the mean of a Gaussian."""
    return list((dist.logits if isinstance(dist, Categorical) else dist.mean).shape)
