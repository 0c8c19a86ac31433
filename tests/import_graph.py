"""Import graphs of the project's modules, for the tests of its layering."""
from collections.abc import Mapping, Set


def import_circles(graph: Mapping[str, Set[str]]) -> list[str]:
    """The import circles of ``graph`` (module -> the modules it imports), each as ``a -> b -> a``;
    empty when there is none."""
    circles: list[str] = []
    state: dict[str, int] = {}  # 1: on the path being walked, 2: done

    def visit(name: str, trail: list[str]) -> None:
        state[name] = 1
        for imported in sorted(graph[name]):
            if state.get(imported) == 1:
                circles.append(" -> ".join(trail[trail.index(imported):] + [imported]))
            elif imported not in state:
                visit(imported, trail + [imported])
        state[name] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])
    return circles
