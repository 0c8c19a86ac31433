"""The house's rules, read from the code: every import runs down the floors of docs/architecture.md
("Who may import whom"), no two modules import each other through any path (imports under
``TYPE_CHECKING`` and inside functions included), and no function of parl_lite or evokit_py is longer
than 50 lines of code (its docstring left out)."""
import ast
from pathlib import Path

import pytest
from import_graph import import_circles
from locations import ROOT

PACKAGES = ("parl_lite", "evokit_py")
LONGEST_FUNCTION = 50

# floor -> the modules on it (a name ending in "/" is a whole package), lowest first; a module may
# import modules of its own floor and of the floors below
FLOORS: list[tuple[str, ...]] = [
    # parl_lite/__init__.py imports only lazy and version; its public names load on first use
    ("parl_lite/__init__.py", "parl_lite/version.py", "parl_lite/lazy.py", "parl_lite/plugins.py", "parl_lite/mkl.py",
     "parl_lite/malloc.py", "parl_lite/common/"),
    ("parl_lite/remote/", "parl_lite/env/", "parl_lite/utils/__init__.py", "parl_lite/utils/csv_logger.py",
     "parl_lite/utils/envs.py", "parl_lite/utils/frame_replay.py", "parl_lite/utils/gae.py",
     "parl_lite/utils/logger.py", "parl_lite/utils/machine_info.py", "parl_lite/utils/replay_memory.py",
     "parl_lite/utils/returns.py", "parl_lite/utils/rl_utils.py", "parl_lite/utils/scheduler.py",
     "parl_lite/utils/summary.py", "parl_lite/utils/time_stat.py", "parl_lite/utils/window_stat.py"),
    ("parl_lite/core/", "parl_lite/io/"),
    ("parl_lite/utils/layers.py", "parl_lite/utils/normalization.py", "parl_lite/utils/models.py",
     "parl_lite/utils/rollout.py"),
    ("parl_lite/algorithms/",),
    ("parl_lite/train/",),
    ("parl_lite/ext/", "evokit_py/"),
    ("parl_lite/cli.py",),
]


def _modules() -> dict[str, Path]:
    """Dotted name -> file, for every module of the packages."""
    return {_name(path): path for package in PACKAGES for path in (ROOT / package).rglob("*.py")}


def _floor(path: Path) -> int:
    relative = path.relative_to(ROOT).as_posix()
    for floor, members in enumerate(FLOORS):
        if any(relative == member or (member.endswith("/") and relative.startswith(member)) for member in members):
            return floor
    raise AssertionError(f"{relative} is on no floor of tests/project/test_architecture.py: add it where it belongs")


def _imports(path: Path, modules: dict[str, Path]) -> set[str]:
    """The project's modules ``path`` imports, anywhere in the file (a name imported from a package
    that is a module of it counts as that module)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        else:
            continue
        found.update(name for name in names if name in modules)
    return found - {_name(path)}


def _name(path: Path) -> str:
    relative = path.relative_to(ROOT).with_suffix("")
    return ".".join(relative.parts[:-1] if relative.name == "__init__" else relative.parts)


def test_every_import_runs_down_the_floors():
    modules = _modules()
    upward = []
    for name, path in modules.items():
        for imported in _imports(path, modules):
            if _floor(modules[imported]) > _floor(path) and not name.startswith(imported + "."):
                upward.append(f"{name} (floor {_floor(path)}) imports {imported} (floor {_floor(modules[imported])})")
    assert upward == []


def test_no_module_reaches_itself_through_its_imports():
    modules = _modules()
    graph = {name: {imported for imported in _imports(path, modules) if not name.startswith(imported + ".")}
             for name, path in modules.items()}
    assert import_circles(graph) == []


def _code_lines(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    body = node.body
    has_docstring = isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
        and isinstance(body[0].value.value, str)
    first = body[1] if has_docstring and len(body) > 1 else body[0]
    return node.end_lineno - first.lineno + 1


@pytest.mark.parametrize("package", PACKAGES)
def test_no_function_is_longer_than_50_lines_of_code(package):
    long = []
    for path in sorted((ROOT / package).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and _code_lines(node) > LONGEST_FUNCTION:
                long.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name}: {_code_lines(node)} lines")
    assert long == []
