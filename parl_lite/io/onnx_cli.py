"""``parl-lite export``: a checkpoint written by ``Agent.save`` -> an ONNX file.

paddle is imported only when the command runs, so ``parl-lite --help`` stays fast.
"""
import importlib
import json
import sys
import time
from pathlib import Path
from typing import Any

import click

_DYNAMIC = {"none", "-1", "?"}


def _parse_shape(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> list[list[int | None]]:
    shapes: list[list[int | None]] = []
    for text in values:
        dims: list[int | None] = []
        for token in text.strip().strip("[]()").split(","):
            token = token.strip()
            if token.lower() in _DYNAMIC:
                dims.append(None)
            elif token.isdigit() and int(token) >= 1:
                dims.append(int(token))
            else:
                raise click.BadParameter(f"{text!r}: each dimension must be a positive integer or None "
                                         f"(dynamic), e.g. None,4 or None,3,84,84; got {token!r}", ctx, param)
        shapes.append(dims)
    return shapes


def _constructor_kwargs(model_kwargs: dict[str, Any] | None, model_class: str | None, checkpoint_path: Path,
                        role: str) -> dict[str, Any]:
    """``--model-kwargs`` when given; else, unless ``--model-class`` names another class, the
    constructor arguments the checkpoint recorded for ``role`` (models record theirs); else none."""
    if model_kwargs is not None:
        return model_kwargs
    if model_class is None:
        import h5py

        with h5py.File(checkpoint_path, "r") as file:
            recorded = file["models"][role].attrs.get("constructor_args")
        if recorded is not None:
            return json.loads(recorded)
    return {}


def _parse_kwargs(ctx: click.Context, param: click.Parameter, text: str | None) -> dict[str, Any] | None:
    if text is None:
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        raise click.BadParameter(f"not valid JSON ({error}): {text!r}", ctx, param) from error
    if not isinstance(value, dict):
        raise click.BadParameter(f"must be a JSON object such as '{{\"obs_dim\": 4}}', got {text!r}", ctx, param)
    return value


class _ClassNotUsable(Exception):
    """The class named by --model-class or by the checkpoint cannot be used (message says why)."""


def _load_class(path: str) -> type:
    """``package.module:ClassName`` (or ``package.module.ClassName``) -> the class.

    Raises:
        _ClassNotUsable: malformed, not importable, missing, or not a ``paddle.nn.Layer``.
    """
    import paddle

    if ":" in path:
        module_part, _, class_part = path.partition(":")
        candidates = [(module_part, class_part)]
    else:  # package.module.Outer.Inner: the longest importable prefix is the module
        parts = path.split(".")
        candidates = [(".".join(parts[:i]), ".".join(parts[i:])) for i in range(len(parts) - 1, 0, -1)]
    if not candidates or not all(candidates[0]):
        raise _ClassNotUsable(f"{path!r} is not of the form package.module:ClassName")
    for candidate in candidates:
        try:
            value: Any = importlib.import_module(candidate[0])
            break
        except ImportError as error:
            failure = error
    else:
        raise _ClassNotUsable(f"cannot import the module of {path!r}: {failure} (is it on the path? see --app-dir)")
    module_name, qualname = candidate
    for part in qualname.split("."):
        if not hasattr(value, part):
            raise _ClassNotUsable(f"module {module_name!r} has no class {qualname!r}")
        value = getattr(value, part)
    if not (isinstance(value, type) and issubclass(value, paddle.nn.Layer)):
        raise _ClassNotUsable(f"{path!r} is not a paddle.nn.Layer class")
    return value


def _stored_class(checkpoint_path: Path, role: str) -> str | None:
    """The model class a checkpoint records for ``role`` (``None`` if it records none), after the
    header and every weight of ``role`` were checked (checksums, finite values): nothing named in a
    file is imported before the file proved sound."""
    from parl_lite.io import checkpoint

    with checkpoint.open_checkpoint(checkpoint_path) as file:
        checkpoint.read_weights(file, checkpoint_path, role, role_option="--role")
        stored = file["models"][role].attrs.get("class")
    return None if stored is None else str(stored)


@click.command("export")
@click.argument("checkpoint_path", metavar="CHECKPOINT", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--input-shape", "input_shapes", required=True, multiple=True, callback=_parse_shape,
              help="Shape of one float32 input of forward, comma-separated; None marks a dynamic "
                   "dimension (e.g. None,4 or None,3,84,84). Repeat for each input.")
@click.option("--output", "-o", "output", type=click.Path(dir_okay=False, path_type=Path),
              help="ONNX file to write (default: CHECKPOINT with the suffix .onnx). Written atomically.")
@click.option("--model-class", help="Class of the model, package.module:ClassName. Default: the class "
                                    "recorded in the checkpoint for --role.")
@click.option("--model-kwargs", default=None, callback=_parse_kwargs,
              help="Keyword arguments of the model class's constructor, as a JSON object. Default: the "
                   "arguments recorded in the checkpoint (models record theirs), else none.")
@click.option("--role", default="model", show_default=True,
              help="Which model of the checkpoint to export (an algorithm attribute: model, target_model, ...).")
@click.option("--output-name", "output_names", multiple=True,
              help="Name of an ONNX output, once per output of forward (default output_0, output_1, ...).")
@click.option("--opset", default=17, show_default=True, type=click.IntRange(7, 21), help="ONNX opset version.")
@click.option("--backend", default="auto", show_default=True, type=click.Choice(["auto", "paddle2onnx", "onnx"]),
              help="auto: parl_lite's own translation to ONNX (milliseconds, no paddle2onnx), else paddle2onnx; "
                   "onnx: the own translation only; paddle2onnx: paddle2onnx only.")
@click.option("--app-dir", default=".", show_default=True, type=click.Path(file_okay=False),
              help="Folder put first on the Python path, to import the model class from.")
def export_command(checkpoint_path: Path, input_shapes, output: Path | None, model_class: str | None,
                   model_kwargs: dict[str, Any], role: str, output_names: tuple[str, ...], opset: int,
                   backend: str, app_dir: str) -> None:
    """Export a model from an HDF5 checkpoint (written by Agent.save) to ONNX.

    Builds the model class with --model-kwargs (default: the constructor arguments the checkpoint
    recorded), restores its weights from CHECKPOINT, exports its
    forward in evaluation mode and checks the ONNX file against paddle in onnxruntime.

    \b
    Example:
      parl-lite export pg_cartpole.h5 --model-class my_models:CartpoleModel \\
          --model-kwargs '{"obs_dim": 4, "act_dim": 2}' --input-shape None,4 --output policy.onnx
    """
    from parl_lite.io import checkpoint
    from parl_lite.io.onnx_export import OnnxExportError, export_onnx

    app_dir = str(Path(app_dir).resolve())
    if app_dir not in sys.path:
        sys.path.insert(0, app_dir)
    started = time.perf_counter()
    try:
        stored_class = _stored_class(checkpoint_path, role)
        class_path = model_class or stored_class
        if class_path is None:
            raise click.ClickException(f"checkpoint {checkpoint_path} records no class for model role {role!r} "
                                       f"(attribute 'class' of models/{role}); give it with --model-class")
        try:
            cls = _load_class(class_path)
        except _ClassNotUsable as error:
            if model_class:
                raise click.BadParameter(str(error), param_hint="--model-class") from None
            raise click.ClickException(f"the class recorded in {checkpoint_path} for role {role!r}: {error}; "
                                       f"give the class with --model-class") from None
        try:
            model_kwargs = _constructor_kwargs(model_kwargs, model_class, checkpoint_path, role)
            model = cls(**model_kwargs)
        except Exception as error:
            raise click.ClickException(f"cannot build {class_path} with --model-kwargs {model_kwargs}: "
                                       f"{type(error).__name__}: {error}") from error
        checkpoint.load(checkpoint_path, models={role: model}, optimizers=None)  # optimizer state: not needed
        output = output or checkpoint_path.with_suffix(".onnx")
        export_onnx(model, output, input_shapes, output_names=output_names or None, opset_version=opset,
                    backend=backend)
    except (checkpoint.CheckpointError, OnnxExportError) as error:
        raise click.ClickException(str(error)) from error
    click.echo(f"wrote {output} ({class_path}, role {role!r}) in {time.perf_counter() - started:.1f} s")
