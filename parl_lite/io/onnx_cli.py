"""``parl-lite export``: a checkpoint written by ``Agent.save`` -> an ONNX file.

paddle is imported only when the command runs, so ``parl-lite --help`` stays fast.
"""
import importlib
import json
import sys
import time
from pathlib import Path
from typing import Any, NamedTuple

import click

_DYNAMIC = {"none", "-1", "?"}
_OWN_PACKAGE = "parl_lite."  # recorded classes of this package are imported without asking
_MAIN = "__main__"  # the module name of a class defined in the script that was run


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


def _check_class_path(path: str) -> None:
    """Refuse a class path that is not ``dotted.module:Class`` or ``dotted.module.Class`` made of
    Python identifiers (no relative import, no path, nothing but names)."""
    module_part, colon, class_part = path.partition(":")
    parts = module_part.split(".") + (class_part.split(".") if colon else [])
    if not all(part.isidentifier() for part in parts) or len(parts) < 2:
        raise _ClassNotUsable(f"{path!r} is not a class path of the form package.module:ClassName "
                              f"(dotted Python names only)")


def _module_of(path: str) -> str:
    """The module a class path would import first: ``a.b`` for ``a.b:C`` and for ``a.b.C``."""
    return path.partition(":")[0] if ":" in path else path.rpartition(".")[0]


def _load_class(path: str, app_dir: str | None) -> type:
    """``package.module:ClassName`` (or ``package.module.ClassName``) -> the class, importing its
    module (which runs the module's code).

    Raises:
        _ClassNotUsable: malformed, not importable, missing, or not a ``paddle.nn.Layer``.
    """
    import paddle

    _check_class_path(path)
    if ":" in path:
        module_part, _, class_part = path.partition(":")
        candidates = [(module_part, class_part)]
    else:  # package.module.Outer.Inner: the longest importable prefix is the module
        parts = path.split(".")
        candidates = [(".".join(parts[:i]), ".".join(parts[i:])) for i in range(len(parts) - 1, 0, -1)]
    for candidate in candidates:
        try:
            value: Any = importlib.import_module(candidate[0])
            break
        except ImportError as error:
            failure = error
        except Exception as error:  # the module's own code failed
            raise _ClassNotUsable(f"importing module {candidate[0]!r} of {path!r} failed: "
                                  f"{type(error).__name__}: {error}") from error
    else:
        where = f"nor in --app-dir {app_dir}" if app_dir else "and the current folder is not searched"
        raise _ClassNotUsable(f"cannot import module {_module_of(path)!r} of {path!r}: {failure} (it is not "
                              f"installed, {where}; give the folder that holds it with --app-dir FOLDER)")
    module_name, qualname = candidate
    for part in qualname.split("."):
        if not hasattr(value, part):
            raise _ClassNotUsable(f"module {module_name!r} has no class {qualname!r}")
        value = getattr(value, part)
    if not (isinstance(value, type) and issubclass(value, paddle.nn.Layer)):
        raise _ClassNotUsable(f"{path!r} is not a paddle.nn.Layer class")
    return value


def _is_recorded_class(name: str, qualname: str, stored_class: str | None) -> bool:
    """Whether the class ``name`` (``module.QualName``) is the one the checkpoint records: the same
    name, or for a class of a script run as ``__main__``, the same class in the module named instead."""
    return stored_class is not None and stored_class in (name, f"{_MAIN}.{qualname}")


def _main_class_advice(qualname: str) -> str:
    """What to do about class ``qualname`` of a script that ran as ``__main__`` (it cannot be imported by that name)."""
    return (f"a class of the script that was run (module {_MAIN}), which cannot be imported by that name; name "
            f"the script's module instead: --model-class SCRIPT:{qualname} --app-dir FOLDER for FOLDER/SCRIPT.py "
            f"(importing it runs its top level: keep its training under if __name__ == \"__main__\":); the "
            f"constructor arguments the checkpoint records are used")


def _recorded_role(checkpoint_path: Path, role: str) -> tuple[str | None, str | None]:
    """The model class and the constructor arguments (JSON) a checkpoint records for ``role``
    (``None`` where it records none), after checking its header: attributes only, no value is read.

    Raises:
        CheckpointError: not a parl_lite checkpoint, or no such role.
    """
    from parl_lite.io import checkpoint

    with checkpoint.open_checkpoint(checkpoint_path) as file:
        attrs = checkpoint.model_group(file, checkpoint_path, role, role_option="--role").attrs
        stored_class, stored_args = attrs.get("class"), attrs.get("constructor_args")
    return (None if stored_class is None else str(stored_class)), (None if stored_args is None else str(stored_args))


def _recorded_kwargs(text: str, checkpoint_path: Path, role: str) -> dict[str, Any]:
    """The constructor arguments recorded as the JSON ``text``.

    Raises:
        click.ClickException: not a JSON object (the message names the attribute and the file).
    """
    where = f"checkpoint {checkpoint_path}: attribute constructor_args of models/{role}"
    try:
        value = json.loads(text)
    except (ValueError, RecursionError) as error:
        raise click.ClickException(f"{where} is not valid JSON: {error}") from None
    if not isinstance(value, dict):
        raise click.ClickException(f"{where} is not a JSON object; give the arguments with --model-kwargs")
    return value


@click.command("export")
@click.argument("checkpoint_path", metavar="CHECKPOINT", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--input-shape", "input_shapes", required=True, multiple=True, callback=_parse_shape,
              help="Shape of one float32 input of forward, comma-separated; None marks a dynamic "
                   "dimension (e.g. None,4 or None,3,84,84). Repeat for each input.")
@click.option("--output", "-o", "output", type=click.Path(dir_okay=False, path_type=Path),
              help="ONNX file to write (default: CHECKPOINT with the suffix .onnx). Written atomically.")
@click.option("--model-class", help="Class of the model, package.module:ClassName (its module is imported). "
                                    "Without it, see --import-recorded-class.")
@click.option("--import-recorded-class", is_flag=True,
              help="Import the model class that CHECKPOINT records for --role, which runs its module's "
                   "code: only for checkpoints you trust. Without it or --model-class, only parl_lite's own "
                   "classes (shipped models) are imported.")
@click.option("--model-kwargs", default=None, callback=_parse_kwargs,
              help="Keyword arguments of the model class's constructor, as a JSON object. Default: the "
                   "arguments recorded in the checkpoint when the class is the recorded one (or, for a class "
                   "of a script that ran as __main__, the same class in the module named), else none.")
@click.option("--role", default="model", show_default=True,
              help="Which model of the checkpoint to export (an algorithm attribute: model, target_model, ...).")
@click.option("--output-name", "output_names", multiple=True,
              help="Name of an ONNX output, once per output of forward (default output_0, output_1, ...).")
@click.option("--opset", default=17, show_default=True, type=click.IntRange(7, 21), help="ONNX opset version.")
@click.option("--backend", default="auto", show_default=True, type=click.Choice(["auto", "paddle2onnx", "onnx"]),
              help="auto: parl_lite's own translation to ONNX (milliseconds, no paddle2onnx), else paddle2onnx; "
                   "onnx: the own translation only; paddle2onnx: paddle2onnx only.")
@click.option("--app-dir", default=None, type=click.Path(exists=True, file_okay=False),
              help="Folder put first on the Python path, to import the model class from (default: none; "
                   "the current folder is not searched unless given, e.g. --app-dir .).")
def export_command(checkpoint_path: Path, input_shapes, output: Path | None, model_class: str | None,
                   import_recorded_class: bool, model_kwargs: dict[str, Any] | None, role: str,
                   output_names: tuple[str, ...], opset: int, backend: str, app_dir: str | None) -> None:
    """Export a model from an HDF5 checkpoint (written by Agent.save) to ONNX.

    Builds the model class with --model-kwargs (default: the constructor arguments the checkpoint
    recorded), restores its weights from CHECKPOINT, exports its forward in evaluation mode and
    checks the ONNX file against paddle in onnxruntime.

    Importing a class runs its module's code, so the class a checkpoint records is imported only
    with --import-recorded-class (or if it is one of parl_lite's own); otherwise name it with
    --model-class.

    \b
    Example:
      parl-lite export pg_cartpole.h5 --model-class my_models:CartpoleModel --app-dir . \\
          --model-kwargs '{"obs_dim": 4, "act_dim": 2}' --input-shape None,4 --output policy.onnx
    """
    from parl_lite.io import checkpoint
    from parl_lite.io.onnx_export import OnnxExportError, export_onnx
    from parl_lite.common.paths import check_destination

    if model_class is not None and import_recorded_class:
        raise click.UsageError("give either --model-class or --import-recorded-class, not both")
    started = time.perf_counter()
    output = output or checkpoint_path.with_suffix(".onnx")
    try:
        check_destination(output)  # a folder, FIFO or device there: said before any work
    except (OSError, ValueError) as error:
        raise click.ClickException(str(error)) from None
    try:
        stored_class, stored_args = _recorded_role(checkpoint_path, role)
        class_path = _chosen_class(checkpoint_path, role, model_class, import_recorded_class, stored_class)
        if app_dir is not None:
            app_dir = str(Path(app_dir).resolve())
            if app_dir not in sys.path:
                sys.path.insert(0, app_dir)
        try:
            cls = _load_class(class_path, app_dir)
        except _ClassNotUsable as error:
            if model_class:
                raise click.BadParameter(str(error), param_hint="--model-class") from None
            raise click.ClickException(f"the class recorded in {checkpoint_path} for role {role!r}: {error}; "
                                       f"give the class with --model-class") from None
        if model_kwargs is None:  # the recorded arguments fit the recorded class only
            recorded = _is_recorded_class(checkpoint.qualified_name(cls), cls.__qualname__, stored_class)
            model_kwargs = _recorded_kwargs(stored_args, checkpoint_path, role) if recorded and stored_args else {}
        try:
            model = cls(**model_kwargs)
        except Exception as error:
            raise click.ClickException(f"cannot build {class_path} with --model-kwargs {model_kwargs}: "
                                       f"{type(error).__name__}: {error}") from error
        # the one role exported (a trainer's checkpoint holds target models too); no optimizer state
        checkpoint.load(checkpoint_path, models={role: model}, optimizers=None, strict=False)
        _check_input_shapes(model, input_shapes, checkpoint_path)
        export_onnx(model, output, input_shapes, output_names=output_names or None, opset_version=opset,
                    backend=backend)
    except (checkpoint.CheckpointError, OnnxExportError) as error:
        raise click.ClickException(str(error)) from error
    click.echo(f"wrote {output} ({class_path}, role {role!r}) in {time.perf_counter() - started:.1f} s")


def _check_input_shapes(model: Any, shapes: list[list[int | None]], checkpoint_path: Path) -> None:
    """Run ``forward`` once on zeros of ``shapes`` (a free dimension: 1), in evaluation mode, so
    that inputs the weights do not take are named before paddle's tracer (which prints pages of
    its own frames, once per route tried) sees them.

    Raises:
        click.BadParameter: for ``--input-shape``, when the first layer's weight in the checkpoint
            takes another width (the message gives both).
        click.ClickException: forward fails otherwise (paddle's message, last line).
    """
    import paddle

    model.eval()
    try:
        with paddle.no_grad():
            model(*[paddle.zeros([1 if dim is None else dim for dim in shape]) for shape in shapes])
    except Exception as error:
        first = _first_layer_width(model)
        given = [_shape_text(shape) for shape in shapes]
        if first is not None and len(shapes) == 1 and len(shapes[0]) >= 2 and shapes[0][first.axis] != first.width:
            expected = list(shapes[0])
            expected[first.axis] = first.width
            raise click.BadParameter(
                f"{given[0]} gives inputs of {first.what} {shapes[0][first.axis]}, but the model's first layer "
                f"{first.layer} takes {first.what} {first.width} (its weight {first.layer}.weight in "
                f"{checkpoint_path} has shape {first.weight_shape}); use --input-shape {_shape_text(expected)}",
                param_hint="--input-shape") from None
        lines = [line.strip() for line in str(error).splitlines() if line.strip()]
        raise click.ClickException(f"forward fails on zeros of --input-shape {' '.join(given)}: "
                                   f"{type(error).__name__}: {lines[-1] if lines else ''}") from None


class _FirstLayer(NamedTuple):
    """What the first layer with weights takes: ``width`` along the input's ``axis``."""
    layer: str
    what: str  # "width" (a Linear's features) or "channels" (a Conv's)
    width: int
    axis: int
    weight_shape: list[int]


def _first_layer_width(model: Any) -> _FirstLayer | None:
    """What the model's first sublayer with weights takes, when it is a Linear (its weight's rows,
    along the last axis) or a channels-first Conv (its weight's second dimension times its groups,
    along axis 1); None for any other first layer."""
    import paddle

    for name, layer in model.named_sublayers():
        weight = getattr(layer, "weight", None)
        if weight is None:
            continue
        shape = list(weight.shape)
        if isinstance(layer, paddle.nn.Linear):
            return _FirstLayer(name, "width", shape[0], -1, shape)
        convolutions = (paddle.nn.Conv1D, paddle.nn.Conv2D, paddle.nn.Conv3D)
        if isinstance(layer, convolutions) and str(getattr(layer, "_data_format", "NC")).startswith("NC"):
            return _FirstLayer(name, "channels", shape[1] * int(getattr(layer, "_groups", 1) or 1), 1, shape)
        return None
    return None


def _shape_text(shape: list[int | None]) -> str:
    return ",".join("None" if dim is None else str(dim) for dim in shape)


def _chosen_class(checkpoint_path: Path, role: str, model_class: str | None, import_recorded_class: bool,
                  stored_class: str | None) -> str:
    """The class path to import: --model-class, else the recorded one if it is parl_lite's own (a
    shipped model: importing it runs only parl_lite's code) or with --import-recorded-class."""
    if model_class is not None:
        if _module_of(model_class) == _MAIN:
            raise click.BadParameter(f"{model_class!r}: {_main_class_advice(model_class.rpartition(':')[2])}",
                                     param_hint="--model-class")
        return model_class
    if stored_class is not None and stored_class.startswith(_MAIN + "."):
        raise click.ClickException(f"checkpoint {checkpoint_path} records the model class {stored_class!r} for role "
                                   f"{role!r}: {_main_class_advice(stored_class[len(_MAIN) + 1:])}")
    if stored_class is None:
        raise click.ClickException(f"checkpoint {checkpoint_path} records no class for model role {role!r} "
                                   f"(attribute 'class' of models/{role}); give it with --model-class")
    if not import_recorded_class and not stored_class.startswith(_OWN_PACKAGE):
        try:
            _check_class_path(stored_class)
        except _ClassNotUsable as error:
            raise click.ClickException(f"the class recorded in {checkpoint_path} for role {role!r}: {error}; "
                                       f"give the class with --model-class") from None
        module, _, name = stored_class.rpartition(".")
        raise click.ClickException(
            f"checkpoint {checkpoint_path} records the model class {stored_class!r} for role {role!r}; using it "
            f"would import module {module!r}, which runs that module's code, so it is imported only when you "
            f"ask: pass --import-recorded-class if you trust this checkpoint, or name the class yourself with "
            f"--model-class {module}:{name} (and --app-dir FOLDER if the module is not installed)")
    return stored_class
