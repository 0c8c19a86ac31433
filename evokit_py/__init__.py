"""evokit_py: EvoKit-style evolution strategies with ONNX policies (numpy + onnxruntime; no paddle).

    from evokit_py import ESAgent, load_config, train
"""
from evokit_py.agent import ESAgent
from evokit_py.config import ConfigError, ESConfig, default_config, load_config, parse_config
from evokit_py.noise import NoiseTable, SamplingInfo
from evokit_py.policy import OnnxPolicy, build_mlp
from evokit_py.solvers import CMAES, GA, BasicES, make_solver
from evokit_py.train import TrainResult, train

__all__ = ["ESAgent", "ConfigError", "ESConfig", "default_config", "load_config", "parse_config", "NoiseTable",
           "SamplingInfo", "OnnxPolicy", "build_mlp", "BasicES", "CMAES", "GA", "make_solver", "TrainResult", "train"]
