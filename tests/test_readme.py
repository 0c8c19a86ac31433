"""The README as a newcomer follows it: the install commands with extras; the documentation table."""
import configparser
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


# `pip install '<target>[extras]'`, as the docs and messages write it
INSTALL_WITH_EXTRAS = re.compile(r"pip\s+install\s+(?:-e\s+)?'([^'\s\[]*)\[([\w,-]+)\]")
OURS = {".", "parl_lite", "parl-lite", "parl"}


def _texts():
    for pattern in ("README.md", "docs/*.md", ".ci/run", "setup.cfg", "tox.ini", "parl_lite/**/*.py",
                    "evokit_py/**/*.py", "scripts/**/*.py", "tests/*.py"):
        for path in sorted(ROOT.glob(pattern)):
            yield path.relative_to(ROOT), path.read_text(encoding="utf-8")


def test_the_install_commands_with_extras_install_from_the_clone():
    """No index serves parl_lite, so installing it by name with an extra fails; from the clone,
    `pip install '.[mujoco]'` works. And the extras named exist."""
    parser = configparser.ConfigParser()
    parser.read(ROOT / "setup.cfg")
    extras = set(parser["options.extras_require"])
    seen = []
    for path, text in _texts():
        for target, names in INSTALL_WITH_EXTRAS.findall(text):
            if target in OURS:
                seen.append(f"{path}: pip install '{target}[{names}]'")
                assert target == ".", f"{seen[-1]}: no package index serves parl_lite; from the clone: '.[{names}]'"
                assert set(names.split(",")) <= extras, f"{seen[-1]}: setup.cfg has the extras {sorted(extras)}"
    assert any(line.startswith("README.md: pip install '.[test,ray,lint]'") for line in seen)
    assert any(line.startswith("docs/evokit.md: pip install '.[mujoco]'") for line in seen)


def test_the_documentation_table_lists_every_page_once():
    table = README[README.index("\n## Documentation\n"):README.index("\n## Testing\n")]
    pages = re.findall(r"^\| \[(docs/[\w-]+\.md)\]\(\1\) \|", table, re.M)
    assert len(pages) == len(set(pages)), f"listed twice: {sorted({page for page in pages if pages.count(page) > 1})}"
    assert set(pages) == {f"docs/{path.name}" for path in (ROOT / "docs").glob("*.md")}
