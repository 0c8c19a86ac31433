"""Inference models: a model's ``forward`` and weights saved by ``paddle.jit.save`` (what PARL's
``Agent.save_inference_model`` writes), each file written atomically."""
import errno
import inspect
import json
import math
import os
import struct
import tempfile
from pathlib import Path
from collections.abc import Sequence
from typing import Any

import paddle
from paddle.base import core
from paddle.base.proto import framework_pb2
from paddle.static import InputSpec

from parl_lite.common.atomic import write_atomically
from parl_lite.common.paths import check_destination
from parl_lite.common.space import check_room, file_size_limit, free_bytes

__all__ = ["save_inference_model"]

_BLOCK = 4096  # less free than this after a write: the disk was full
_PARAMS_SUFFIX = ".pdiparams"


def save_inference_model(model: paddle.nn.Layer, save_path: "str | os.PathLike",
                         input_shape_list: Sequence[Sequence[int | None]],
                         input_dtype_list: Sequence[str]) -> list[Path]:
    """Save ``model.forward`` for inference with ``paddle.jit.save``; ``paddle.jit.load(save_path)``
    reads it back (dropout off, batch-norm on its running statistics).

    paddle writes ``save_path`` + ``.json`` (the program; ``.pdmodel`` before Paddle 3) and
    ``.pdiparams``. They are traced into a temporary folder next to ``save_path``, checked to be
    whole (paddle does not report a failed write: on a full disk it leaves a truncated
    ``.pdiparams`` that loads as wrong weights), and each is then moved into place atomically, the
    program last.

    Args:
        model: the layer to save; it must define its own ``forward``, whose first parameter is
            named ``self`` (paddle.jit binds the inputs after it).
        save_path: path prefix of the files; its folders are created.
        input_shape_list: the shape of each input of ``forward``, None for a free dimension.
        input_dtype_list: the dtype name of each input.

    Returns:
        The files written.

    Raises:
        TypeError: ``save_path`` is not a path.
        ValueError: ``save_path`` is empty or names a folder (``""``, ``"out/"``, ``"."``), no
            ``forward`` of the model's own, a first parameter not named ``self``, shapes or dtypes
            that are not lists of the same length (each named), or a forward that paddle cannot
            trace.
        OSError: a file cannot be written whole (no space left on device, the file size limit),
            or one of them is a folder, a FIFO, a socket or a device, naming it; the files already at
            ``save_path`` are left as they were.
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
    path = _prefix(label, save_path)
    _check_destinations(model, path)
    with tempfile.TemporaryDirectory(prefix=f".{path.name}.jit-", dir=path.parent) as folder:
        try:
            paddle.jit.save(model, os.path.join(folder, "model"), input_spec=specs)
        except Exception as error:
            raise ValueError(f"{label}: paddle.jit.save could not trace forward: {type(error).__name__}: "
                             f"{error}") from error
        traced = sorted(Path(folder).iterdir(), key=lambda file: file.suffix in (".json", ".pdmodel"))
        for file in traced:
            _check_whole(file, path.with_name(path.name + file.suffix))
        return [_move_atomically(file, path.with_name(path.name + file.suffix)) for file in traced]


def _check_destinations(model: paddle.nn.Layer, path: Path) -> None:
    """Check every file name paddle may write at ``path`` before any is written (never half a pair
    replaced), make its folder and check that the model's weights fit there.

    Raises:
        OSError: a name is a folder, a FIFO, a socket or a device; the weights do not fit.
    """
    for suffix in (_PARAMS_SUFFIX, ".json", ".pdmodel"):
        check_destination(path.with_name(path.name + suffix))
    path.parent.mkdir(parents=True, exist_ok=True)
    weights = sum(int(value.numel()) * value.element_size() for value in model.state_dict().values())
    check_room(path.with_name(path.name + _PARAMS_SUFFIX), weights)


def _check_whole(file: Path, destination: Path) -> None:
    """Check that paddle wrote ``file`` (to become ``destination``) whole: the program parses, the
    weights' records are complete up to the file's end, and the write did not stop at the file size
    limit or on a full disk (a file cut there exactly between two records would pass the first test;
    paddle saves only the parameters ``forward`` uses, so the model's size is no lower bound).

    Raises:
        OSError: naming ``destination``: EFBIG when the file reached the file size limit, ENOSPC when
            less is free than it needs, else EIO.
    """
    data = file.read_bytes()
    limit, free = file_size_limit(), free_bytes(file.parent)
    if file.suffix == _PARAMS_SUFFIX:
        stored = _params_bytes(data)
        cut_short = (limit is not None and len(data) >= limit) or (free is not None and free < _BLOCK)
        whole = stored is not None and stored > 0 and not cut_short
    elif file.suffix == ".json":
        try:
            json.loads(data)
            whole = True
        except ValueError:
            whole = False
    else:  # .pdmodel: a ProgramDesc protobuf
        whole = _parses(framework_pb2.ProgramDesc(), data)
    if whole:
        return
    if limit is not None and len(data) >= limit:
        code, why = errno.EFBIG, f"the file size limit of this process (ulimit -f: {limit:,} bytes) was reached"
    elif free is not None and free < max(_BLOCK, len(data)):
        code, why = errno.ENOSPC, f"no space left on device ({free:,} bytes free)"
    else:
        code, why = errno.EIO, "the file is truncated or malformed"
    error = OSError(f"cannot write {destination}: paddle.jit.save wrote {len(data):,} bytes that are not a "
                    f"whole {file.suffix} file: {why}")
    error.errno = code
    raise error


def _params_bytes(data: bytes) -> int | None:
    """The bytes of values in paddle's ``.pdiparams`` ``data`` (a sequence of serialised tensors:
    version, LoD, version, a TensorDesc, the values), None unless its last record ends at its end."""
    offset, values = 0, 0
    while offset < len(data):
        if offset + 12 > len(data):
            return None
        lod_levels = struct.unpack_from("<Q", data, offset + 4)[0]
        offset += 12
        for _ in range(min(lod_levels, len(data))):
            if offset + 8 > len(data):
                return None
            offset += 8 + struct.unpack_from("<Q", data, offset)[0]
        if offset + 8 > len(data):
            return None
        desc_size = struct.unpack_from("<i", data, offset + 4)[0]
        offset += 8
        desc = framework_pb2.VarType.TensorDesc()
        if desc_size < 0 or offset + desc_size > len(data) or not _parses(desc, data[offset:offset + desc_size]):
            return None
        offset += desc_size
        try:
            size = math.prod(desc.dims) * core.size_of_dtype(core.VarDesc.VarType(desc.data_type))
        except (ValueError, RuntimeError):  # a type that is not a dense tensor's
            return None
        offset += size
        values += size
    return values if offset == len(data) else None


def _parses(message: Any, data: bytes) -> bool:
    """Whether ``data`` parses as the protobuf ``message`` (filled in)."""
    try:
        message.ParseFromString(data)
    except Exception:  # protobuf's DecodeError, whichever implementation raises it: not a whole message
        return False
    return True


def _move_atomically(source: Path, destination: Path) -> Path:
    """Move ``source`` (on the same file system) to ``destination`` through :func:`write_atomically`."""
    def move(temporary: Path) -> None:
        os.replace(source, temporary)

    return write_atomically(destination, move)


def _prefix(label: str, save_path: "str | os.PathLike") -> Path:
    """``save_path`` as a Path, after checking that it names files (``<prefix>.json``, ...), not a folder."""
    text = os.fspath(save_path) if isinstance(save_path, str | os.PathLike) else None
    if not isinstance(text, str):
        raise TypeError(f"{label}: save_path must be a path prefix (str or os.PathLike), got "
                        f"{type(save_path).__name__}")
    if os.path.basename(text) in ("", ".", ".."):
        raise ValueError(f"{label}: save_path {text!r} names no file; give a path prefix such as "
                         "'inference/model' (the files written are its .json and .pdiparams)")
    return Path(text)


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
