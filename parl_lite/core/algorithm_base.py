"""``AlgorithmBase``: weights of every model an algorithm holds, whatever the framework (PARL's
``parl.core.algorithm_base``). :class:`parl_lite.Algorithm` is the paddle implementation."""
from typing import Any

from parl_lite.core.model_base import ModelBase

__all__ = ["AlgorithmBase"]


class AlgorithmBase:
    """Base of the framework-specific ``Algorithm`` classes.

    :meth:`get_weights` and :meth:`set_weights` cover every :class:`ModelBase` attribute, and the
    models held directly in a list, tuple or dict attribute (not deeper).
    """

    def get_weights(self) -> dict[str, Any]:
        """``{attribute: weights}``; a list or tuple attribute gives the list of its models'
        weights, a dict attribute the dict of its models' weights."""
        weights: dict[str, Any] = {}
        for name, value in vars(self).items():
            if isinstance(value, ModelBase):
                weights[name] = value.get_weights()
            elif isinstance(value, (list, tuple)):
                held = [item.get_weights() for item in value if isinstance(item, ModelBase)]
                if held:
                    weights[name] = held
            elif isinstance(value, dict):
                held_by_key = {key: item.get_weights() for key, item in value.items() if isinstance(item, ModelBase)}
                if held_by_key:
                    weights[name] = held_by_key
        return weights

    def set_weights(self, weights: dict[str, Any]) -> None:
        """Load weights returned by :meth:`get_weights`; names it does not hold are ignored.

        Raises:
            ValueError: ``weights`` lacks a model this algorithm holds, or a list or dict of models
                differs in length or keys (the message names the attribute); nothing is changed.
        """
        updates: list[tuple[ModelBase, Any]] = []
        for name, value in vars(self).items():
            if isinstance(value, ModelBase):
                if name not in weights:
                    raise ValueError(f"set_weights: weights have no entry for model {name!r}")
                updates.append((value, weights[name]))
            elif isinstance(value, (list, tuple)):
                models = [item for item in value if isinstance(item, ModelBase)]
                if models:
                    given = weights.get(name)
                    if not isinstance(given, (list, tuple)) or len(given) != len(models):
                        raise ValueError(f"set_weights: {name!r} holds {len(models)} models; the weights give "
                                         f"{len(given) if isinstance(given, (list, tuple)) else 'no list'}")
                    updates += list(zip(models, given, strict=True))
            elif isinstance(value, dict):
                models_by_key = {key: item for key, item in value.items() if isinstance(item, ModelBase)}
                if models_by_key:
                    given = weights.get(name)
                    if not isinstance(given, dict) or set(given) != set(models_by_key):
                        raise ValueError(f"set_weights: {name!r} holds models {sorted(models_by_key)}; the weights "
                                         f"give {sorted(given) if isinstance(given, dict) else 'no dict'}")
                    updates += [(model, given[key]) for key, model in models_by_key.items()]
        for model, model_weights in updates:
            model.set_weights(model_weights)

    def learn(self, *args: Any, **kwargs: Any) -> Any:
        """Update the model(s)."""
        raise NotImplementedError(f"{type(self).__name__} does not implement learn()")

    def predict(self, *args: Any, **kwargs: Any) -> Any:
        """The algorithm's prediction (e.g. the greedy action)."""
        raise NotImplementedError(f"{type(self).__name__} does not implement predict()")

    def sample(self, *args: Any, **kwargs: Any) -> Any:
        """An exploratory output (e.g. an action drawn from the policy)."""
        raise NotImplementedError(f"{type(self).__name__} does not implement sample()")
