"""parl_lite: PARL's Model / Algorithm / Agent on PaddlePaddle, and ``@remote_class`` actors
on a local pool of processes that share memory.

Importing ``parl_lite`` is cheap: the paddle-backed names (``Model``, ``Algorithm``, ``Agent``,
``algorithms``, ``export_onnx``) are loaded on first use, so a program that only wants parallel
actors never pays paddle's import.
"""
from parl_lite.lazy import lazy_exports
from parl_lite.version import __version__

# public name -> module that defines it; resolved lazily by __getattr__ (PEP 562).
_LAZY = {
    "Model": "parl_lite.core.model",
    "Algorithm": "parl_lite.core.algorithm",
    "Agent": "parl_lite.core.agent",
    "algorithms": "parl_lite.algorithms",  # PARL's parl.algorithms.PolicyGradient, ... (the subpackage)
    "CheckpointError": "parl_lite.io.checkpoint",
    "export_onnx": "parl_lite.io.onnx_export",
    "OnnxExportError": "parl_lite.io.onnx_export",
    "remote_class": "parl_lite.remote.api",
    "connect": "parl_lite.remote.api",
    "shutdown": "parl_lite.remote.api",
    "get": "parl_lite.remote.api",
    "wait": "parl_lite.remote.api",
    "Future": "parl_lite.remote.api",
    "RemoteError": "parl_lite.remote.api",
    "ActorDiedError": "parl_lite.remote.api",
    "SerializationError": "parl_lite.remote.api",
    "MemoryLimitError": "parl_lite.remote.api",
    "ActorHandle": "parl_lite.remote.api",
}

__all__ = ["__version__", *_LAZY]


__getattr__, __dir__ = lazy_exports(globals(), _LAZY)
