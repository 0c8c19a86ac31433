"""evokit_py: EvoKit-style evolution strategies with ONNX policies (numpy + onnxruntime; no paddle).

    from evokit_py import ESAgent, load_config
    from evokit_py.train import train          # the es-train loop (the module evokit_py.train)

The names below are loaded on first use (PEP 562), so that a sampling worker, which imports
``evokit_py.sampler`` only, does not pay for the trainer's modules (checkpoints, the training loop).
``train`` is not among them: it would be shadowed by the module of that name once imported.
"""
from parl_lite.lazy import lazy_exports

# public name -> module that defines it
_LAZY = {
    "ESAgent": "evokit_py.agent",
    "ConfigError": "evokit_py.config",
    "ESConfig": "evokit_py.config",
    "default_config": "evokit_py.config",
    "load_config": "evokit_py.config",
    "parse_config": "evokit_py.config",
    "NoiseTable": "evokit_py.noise",
    "SamplingInfo": "evokit_py.noise",
    "OnnxPolicy": "evokit_py.policy",
    "build_mlp": "evokit_py.policy",
    "BasicES": "evokit_py.solvers",
    "CMAES": "evokit_py.solvers",
    "GA": "evokit_py.solvers",
    "make_solver": "evokit_py.solvers",
    "TrainResult": "evokit_py.train",
}

__all__ = list(_LAZY)


__getattr__, __dir__ = lazy_exports(globals(), _LAZY)
