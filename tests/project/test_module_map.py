"""The module map of docs/architecture.md ("Module map") names every module of parl_lite and evokit_py,
each once, and nothing else: a module added, moved or removed without its line fails here.

The rule the map follows: one line per ``.py`` file under ``parl_lite/`` and ``evokit_py/``, written as
its path from the repository's root; a package's ``__init__.py`` is written as its folder
(``parl_lite/remote/``); each line's first word is that path, the rest the module's job."""
import re
from collections import Counter

from locations import ROOT

PACKAGES = ("parl_lite", "evokit_py")


def _map_entries(text: str) -> list[str]:
    section = text[text.index("\n## Module map\n"):]
    section = section[:section.index("\n## ", 1)]
    block = re.search(r"\n```\n(.*?)\n```\n", section, re.S)
    assert block is not None, "the Module map section of docs/architecture.md has no code block"
    return [line.split()[0] for line in block.group(1).splitlines() if line.strip()]


def _modules() -> set[str]:
    names = set()
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            relative = path.relative_to(ROOT)
            names.add(f"{relative.parent}/" if path.name == "__init__.py" else str(relative))
    return names


def test_the_module_map_names_every_module_once_and_nothing_else():
    entries = _map_entries((ROOT / "docs" / "architecture.md").read_text())
    twice = sorted(name for name, count in Counter(entries).items() if count > 1)
    assert twice == [], f"named more than once in the module map of docs/architecture.md: {twice}"
    modules = _modules()
    assert sorted(set(entries) - modules) == [], "the module map of docs/architecture.md names modules that do not exist"
    assert sorted(modules - set(entries)) == [], "modules missing from the module map of docs/architecture.md"


def test_the_map_is_read_as_the_rule_says():
    """A map that names a module which does not exist, or leaves one out, is caught (a check that cannot
    fail checks nothing)."""
    text = "\n## Module map\n\n```\nparl_lite/  the face\nparl_lite/gone.py  was here\n```\n\n## Next\n"
    entries = _map_entries(text)
    assert entries == ["parl_lite/", "parl_lite/gone.py"]
    modules = _modules()
    assert "parl_lite/gone.py" not in modules and "parl_lite/remote/pool.py" in modules
    assert "parl_lite/remote/" in modules and "parl_lite/remote/__init__.py" not in modules
