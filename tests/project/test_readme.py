"""The README as a newcomer follows it: the QuickStart saved as quickstart.py and run, then the
export command that follows it, for real; the install commands with extras; the documentation
table; the quick subset of the tests it gives."""
import configparser
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import onnxruntime
import pytest
from locations import ROOT

README = (ROOT / "README.md").read_text(encoding="utf-8")
# only the clone's code on the path: not the current folder (`--app-dir .` must be what finds quickstart.py)
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}
MAX_EPISODE_STEPS = 500  # CartPole-v1's


def _block(language: str, section: str) -> str:
    """The first ```language block of the README's ``section`` (a heading line)."""
    start = README.index(f"\n{section}\n")
    end = README.find("\n## ", start + 1)
    found = re.compile(rf"^```{language}\n(.*?)^```$", re.M | re.S).search(README, start, end)
    assert found, f"no {language} block in the README's {section}"
    return found.group(1)


def _greedy_return(session: onnxruntime.InferenceSession, seed: int) -> float:
    env = gym.make("CartPole-v1")
    obs, _ = env.reset(seed=seed)
    total, done = 0.0, False
    while not done:
        probs = session.run(None, {"obs": obs[None].astype(np.float32)})[0]
        obs, reward, terminated, truncated, _ = env.step(int(probs.argmax()))
        total, done = total + float(reward), terminated or truncated
    env.close()
    return total


@pytest.mark.timeout(600)
def test_the_quickstart_trains_ends_with_its_summary_and_its_export_command_works(tmp_path):
    """As the README says: a line per evaluation every 5,000 steps, the JSON summary last, the
    trained agent in cartpole.h5; then `parl-lite export` as given turns it into an ONNX policy
    that balances (it failed: the class, in __main__, could not be imported)."""
    (tmp_path / "quickstart.py").write_text(_block("python", "## QuickStart"))
    run = subprocess.run([sys.executable, "quickstart.py"], cwd=tmp_path, env=ENV, capture_output=True, text=True,
                         timeout=500)
    assert run.returncode == 0, run.stderr[-3000:]
    *progress, last = run.stdout.splitlines()
    summary = json.loads(last)
    assert summary["solved"] and summary["checkpoint"] == "cartpole.h5" and summary["eval_return"] >= 475
    every = int(re.search(r"prints a line per evaluation \(every ([\d,]+) environment steps", README)
                .group(1).replace(",", ""))
    steps = [int(re.match(r"PolicyGradient steps +(\d+)/300000 ", line).group(1)) for line in progress]
    assert steps[-1] == summary["steps"]
    assert all(every <= later - earlier < every + MAX_EPISODE_STEPS
               for earlier, later in zip([0, *steps[:-1]], steps, strict=True)), steps

    command = next(line for line in _block("bash", "## QuickStart").splitlines() if line.startswith("parl-lite export"))
    parl_lite = Path(sys.executable).with_name("parl-lite")  # the command `pip install .` puts beside python
    export = subprocess.run([str(parl_lite), *shlex.split(command)[1:]], cwd=tmp_path, env=ENV, capture_output=True,
                            text=True, timeout=120)
    assert export.returncode == 0, export.stdout + export.stderr
    assert "wrote policy.onnx (quickstart:CartpoleModel, role 'model')" in export.stdout
    session = onnxruntime.InferenceSession(str(tmp_path / "policy.onnx"), providers=["CPUExecutionProvider"])
    assert np.mean([_greedy_return(session, seed) for seed in range(3)]) > 300  # trained: untrained ones fall at ~20


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


@pytest.mark.timeout(300)
def test_the_quick_subset_the_readme_gives_covers_the_core_and_nothing_long():
    """`python -m pytest -m quick` (README, Testing) selects the core's tests, on the local pool only,
    and not the long ones (the whole suite takes 8-9 minutes)."""
    command = re.search(r"`(python -m pytest -m quick)`", README[README.index("\n## Testing\n"):]).group(1)
    collected = subprocess.run([sys.executable, *shlex.split(command)[1:], "--collect-only", "-q", "-p",
                                "no:cacheprovider"], cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=240)
    assert collected.returncode == 0, collected.stdout[-3000:] + collected.stderr[-3000:]
    ids = [line for line in collected.stdout.splitlines() if "::" in line]
    modules = {test_id.split("::")[0] for test_id in ids}
    assert {"tests/core/test_model.py", "tests/core/test_agent.py", "tests/io/test_checkpoint.py", "tests/remote/test_remote.py",
            "tests/evokit/test_es_solvers.py", "tests/evokit/test_es_train.py", "tests/cli/test_cli.py",
            "tests/cli/test_cli_export.py"} <= modules, sorted(modules)
    assert "tests/evokit/test_es_train.py::test_es_train_command_on_the_pool" in ids
    assert not any("[ray]" in test_id or "[cluster]" in test_id for test_id in ids)
    assert not modules & {"tests/project/test_readme.py", "tests/cluster/test_cluster.py", "tests/evokit/test_es_cma.py",
                          "tests/monitor/test_monitor_browser.py"}
