"""evokit_py's modules import only down the drawing of docs/architecture.md ("Inside evokit_py"), never
in a circle (imports for type hints and inside functions included); a sampling worker's modules reach
neither the solvers nor the whole config; no function is longer than 50 lines."""
import ast
from pathlib import Path

from import_graph import import_circles
from locations import ROOT

PACKAGE = ROOT / "evokit_py"

# the drawing's lines, top first: a module imports modules of lower lines, and of its own line (the
# training/ and solvers/ lines, policy -> envs) only without a circle
LINES = [
    {"evokit_py", "train", "agent", "offline"},
    {"training", "training.loop", "training.result", "training.progress_log", "training.totals",
     "training.schedule", "training.evaluations", "training.saving", "training.run_folders", "training.run_lock",
     "training.unfinished"},
    {"training.setup"},
    {"pool"},
    {"checkpoint", "seeds"},
    {"config"},
    {"checkpoint_checks"},
    {"solvers", "solvers.registry", "solvers.ars", "solvers.basic_es", "solvers.cma", "solvers.ga", "solvers.base",
     "solvers.settings"},
    {"sampler"},
    {"policy", "envs", "basis", "limits"},
    {"sections"},
    {"schema", "noise", "obs_stats", "optimizers", "solvers.cma_stop"},
]
LINE_OF = {module: index for index, line in enumerate(LINES) for module in line}
MAX_FUNCTION_LINES = 50


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts) or "evokit_py"


def _imports() -> dict[str, set[str]]:
    """Module -> the evokit_py modules it imports anywhere in its text (``evokit_py.`` left off)."""
    modules = {_module_name(path): path for path in PACKAGE.rglob("*.py")}
    graph = {}
    for name, path in modules.items():
        found = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("evokit_py."):
                base = node.module.removeprefix("evokit_py.")
                found |= {f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names}
            elif isinstance(node, ast.Import):
                found |= {a.name.removeprefix("evokit_py.") for a in node.names if a.name.startswith("evokit_py.")}
        graph[name] = found - {name}
    return graph


GRAPH = _imports()


def test_every_module_is_on_a_line_of_the_drawing():
    assert sorted(set(GRAPH) - set(LINE_OF)) == []
    assert sorted(set(LINE_OF) - set(GRAPH)) == []


def test_every_import_runs_down_the_drawing():
    upward = [f"{module} -> {target}" for module, targets in GRAPH.items() for target in targets
              if LINE_OF[target] < LINE_OF[module]]
    assert upward == []


def test_there_is_no_import_circle():
    assert import_circles(GRAPH) == []


def test_a_sampling_worker_s_modules_reach_neither_the_solvers_nor_the_config():
    reached, todo = set(), ["sampler"]
    while todo:
        module = todo.pop()
        if module not in reached:
            reached.add(module)
            todo += GRAPH[module]
    assert sorted(m for m in reached if m.startswith(("solvers", "training", "checkpoint")) or m == "config") == []


def test_no_function_is_longer_than_50_lines():
    long = []
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    long.append(f"{path.relative_to(PACKAGE)}:{node.lineno} {node.name} ({lines} lines)")
    assert long == []
