"""Inference models: a model's ``forward`` and weights saved by ``paddle.jit.save`` (what PARL's
``Agent.save_inference_model`` writes), each file written atomically."""
import inspect
import os
import tempfile
from pathlib import Path
from collections.abc import Sequence

import paddle
from paddle.static import InputSpec

from parl_lite.io.atomic import write_atomically
from parl_lite.io.paths import check_destination

__all__ = ["save_inference_model"]


def save_inference_model(model: paddle.nn.Layer, save_path: "str | os.PathLike",
                         input_shape_list: Sequence[Sequence[int | None]],
                         input_dtype_list: Sequence[str]) -> list[Path]:
    """Save ``model.forward`` for inference with ``paddle.jit.save``; ``paddle.jit.load(save_path)``
    reads it back (dropout off, batch-norm on its running statistics).

    paddle writes ``save_path`` + ``.json`` (the program; ``.pdmodel`` before Paddle 3) and
    ``.pdiparams``. They are traced into a temporary folder next to ``save_path`` and each is then
    moved into place atomically, the program last.

    Args:
        model: the layer to save; it must define its own ``forward``, whose first parameter is
            named ``self`` (paddle.jit binds the inputs after it).
        save_path: path prefix of the files; its folders are created.
        input_shape_list: the shape of each input of ``forward``, None for a free dimension.
        input_dtype_list: the dtype name of each input.

    Returns:
        The files written.

    Raises:
        ValueError: no ``forward`` of the model's own, a first parameter not named ``self``,
            shapes or dtypes that are not lists of the same length (each named), or a forward that
            paddle cannot trace.
        OSError: one of the files is a folder, a FIFO, a socket or a device (naming it); nothing is
            written then.
    """
    label = f"save_inference_model({type(model).__name__})"
    forward = getattr(type(model), "forward", None)
    if not callable(getattr(model, "forward", None)) or forward in (None, paddle.nn.Layer.forward):
        raise ValueError(f"{label}: the model has no forward() of its own; pass the model that defines the "
                         "network to save (PARL's model argument), e.g. agent.alg.model.actor_model")
    parameters = list(inspect.signature(forward).parameters)
    if not parameters or parameters[0] != "self":
        raise ValueError(f"{label}: the first parameter of forward must be named 'self' (paddle.jit binds the "
                         f"inputs after it), got {parameters[:1]}")
    specs = _input_specs(label, input_shape_list, input_dtype_list)
    path = Path(save_path)
    for suffix in (".pdiparams", ".json", ".pdmodel"):  # before any is written: never half a pair replaced
        check_destination(path.with_name(path.name + suffix))
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f".{path.name}.jit-", dir=path.parent) as folder:
        try:
            paddle.jit.save(model, os.path.join(folder, "model"), input_spec=specs)
        except Exception as error:
            raise ValueError(f"{label}: paddle.jit.save could not trace forward: {type(error).__name__}: "
                             f"{error}") from error
        traced = sorted(Path(folder).iterdir(), key=lambda file: file.suffix in (".json", ".pdmodel"))
        return [_move_atomically(file, path.with_name(path.name + file.suffix)) for file in traced]


def _move_atomically(source: Path, destination: Path) -> Path:
    """Move ``source`` (on the same file system) to ``destination`` through :func:`write_atomically`."""
    def move(temporary: Path) -> None:
        os.replace(source, temporary)

    return write_atomically(destination, move)


def _input_specs(label: str, shapes: Sequence[Sequence[int | None]], dtypes: Sequence[str]) -> list[InputSpec]:
    if not isinstance(shapes, list) or not all(isinstance(shape, (list, tuple)) for shape in shapes):
        raise ValueError(f"{label}: input_shape_list must be a list with one shape per input, e.g. [[None, 4]]; "
                         f"got {shapes!r}")
    if not isinstance(dtypes, list) or not all(isinstance(dtype, str) for dtype in dtypes):
        raise ValueError(f"{label}: input_dtype_list must be a list with one dtype name per input, e.g. "
                         f"['float32']; got {dtypes!r}")
    if len(shapes) != len(dtypes):
        raise ValueError(f"{label}: {len(shapes)} input shapes but {len(dtypes)} input dtypes")
    return [InputSpec(shape=list(shape), dtype=dtype) for shape, dtype in zip(shapes, dtypes, strict=True)]
