"""Run paddle2onnx on a saved static model; started as a child process by ``onnx_export``.

paddle2onnx ends its process on failure (``sys.exit(-1)``, or a C++ abort on an unsupported
operator, without naming it), so it never runs in the caller's process. Before converting, this
script writes the program's operators that paddle2onnx does not list as supported to a JSON
report, so the parent can name them if the conversion dies.

Usage: ``python _paddle2onnx_child.py PREFIX OUTPUT.onnx OPSET REPORT.json``
(``PREFIX.json`` and ``PREFIX.pdiparams`` are what ``paddle.jit.save(layer, PREFIX)`` writes).
"""
import json
import os
import sys

# operators of the program's plumbing that paddle2onnx handles without listing them
_PLUMBING = {"data", "feed", "fetch"}


def _unsupported_operators(prefix: str) -> list:
    import paddle
    from paddle2onnx import paddle2onnx_cpp2py_export as converter

    supported = set(converter.get_all_supported_operators_pir())
    legacy = _legacy_names()
    program = paddle.jit.load(prefix).program()
    found = []
    for op in program.global_block().ops:
        dialect, _, name = op.name().partition(".")
        base = name.rstrip("_")  # in-place variant, e.g. relu_
        aliases = {name, base, legacy.get(name), legacy.get(base)}
        if dialect != "pd_op" or name in _PLUMBING or aliases & supported:
            continue
        entry = {"op": name, "layer": op.attrs().get("struct_name")}
        if entry not in found:
            found.append(entry)
    return found


def _legacy_names() -> dict:
    """PIR operator name -> legacy name (add -> elementwise_add): paddle2onnx lists some ops
    under their legacy names."""
    try:
        from paddle.incubate.autograd.phi_ops_map import op_map
    except ImportError:
        return {}
    return {entry["phi_name"]: legacy for legacy, entry in op_map.items() if "phi_name" in entry}


def main(prefix: str, output: str, opset: str, report: str) -> None:
    try:
        unsupported = _unsupported_operators(prefix)
    except Exception as error:  # the scan only explains failures; the conversion decides
        unsupported = [{"scan_error": repr(error)}]
    with open(report, "w") as handle:
        json.dump(unsupported, handle)

    import paddle2onnx

    params = prefix + ".pdiparams"
    paddle2onnx.export(
        prefix + ".json",
        params if os.path.exists(params) else "",
        output,
        opset_version=int(opset),
        enable_onnx_checker=True,
        optimize_tool=None,  # "polygraphy" (the default) may pip-install packages at run time
    )


if __name__ == "__main__":
    sys.path.pop(0)  # this file's folder (parl_lite/io) must not shadow top-level modules
    main(*sys.argv[1:])
