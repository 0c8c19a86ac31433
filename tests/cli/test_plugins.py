"""Plugins: a third-party distribution built here, pip-installed into a folder of its own, adds a
backend scheme, ES solvers (one with a config block of its own, ``tests/toy_solver_plugin.py``) and a
``parl-lite`` command; a broken one is named when used and never breaks the import."""
import base64
import csv
import hashlib
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Dict

import h5py
import numpy as np
import pytest

from parl_lite import plugins
from parl_lite.common.datasets import write_dataset
from locations import ROOT, TESTS

pytestmark = pytest.mark.timeout(180)

PARL_LITE = Path(sys.executable).with_name("parl-lite")

# The plugin's own code: a backend that hosts actors in the caller's process (scheme myscheme://)
# and a solver (type MY_ES) that is Gaussian ES counting the generations it was told.
MY_BACKEND = '''
from parl_lite.remote.backend import ActorChannel, Backend
from parl_lite.remote.futures import Future


class InProcessChannel(ActorChannel):
    def __init__(self, actor):
        self.actor = actor

    def _run(self, function):
        future = Future()
        try:
            future.set_result(function())
        except Exception as error:
            future.set_exception(error)
        return future

    def call(self, method, args, kwargs):
        return self._run(lambda: getattr(self.actor, method)(*args, **kwargs))

    def get_attribute(self, name):
        return self._run(lambda: getattr(self.actor, name))

    def set_attribute(self, name, value):
        return self._run(lambda: setattr(self.actor, name, value))

    def close(self):
        self.actor = None


class InProcessBackend(Backend):
    def __init__(self, address):
        self.address = address
        self.created = []

    def create_actor(self, cls, args, kwargs, options):
        self.created.append(cls.__qualname__)
        return InProcessChannel(cls(*args, **kwargs))

    def status(self):
        return {"kind": "myscheme", "address": self.address, "created": self.created}

    def shutdown(self):
        pass


def connect_my(address, num_workers=None, threads_per_worker=1):
    return InProcessBackend(address)
'''

MY_SOLVER = '''
from evokit_py.solvers import BasicES


class CountingES(BasicES):
    told = 0

    def _tell(self, infos, fitness):
        CountingES.told += 1
        super()._tell(infos, fitness)
'''

TOY_SOLVER = (TESTS / "toy_solver_plugin.py").read_text()

MY_COMMAND = '''
import click


@click.command()
@click.option("--name", default="world", help="Whom to greet.")
def hello(name):
    """Greet someone (a command of my_parl_plugin)."""
    click.echo(f"hello, {name}, from my_parl_plugin")


NOT_A_COMMAND = "hello"
'''

MY_ENTRY_POINTS = {
    "parl_lite.backends": {"myscheme": "myplugin.backend:connect_my"},
    "evokit_py.solvers": {"MY_ES": "myplugin.solver:CountingES", "TOY_ES": "myplugin.toy:ToyES"},
    # "export" is parl-lite's own command: the plugin's must not replace it
    "parl_lite.commands": {"hello": "myplugin.command:hello", "export": "myplugin.command:hello",
                           "notacommand": "myplugin.command:NOT_A_COMMAND"},
}

BROKEN_ENTRY_POINTS = {
    "parl_lite.backends": {"broken": "brokenplugin.nowhere:connect"},
    "evokit_py.solvers": {"BROKEN_ES": "brokenplugin.nowhere:Solver"},
    "parl_lite.commands": {"brokencmd": "brokenplugin.nowhere:command"},
}


def build_wheel(folder: Path, name: str, version: str, files: Dict[str, str],
                entry_points: Dict[str, Dict[str, str]]) -> Path:
    """A wheel (PEP 427) holding ``files`` and the distribution's metadata and entry points."""
    dist_info = f"{name}-{version}.dist-info"
    groups = "".join(f"[{group}]\n" + "".join(f"{key} = {value}\n" for key, value in names.items()) + "\n"
                     for group, names in entry_points.items())
    contents = {**files,
                f"{dist_info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
                f"{dist_info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test_plugins\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
                f"{dist_info}/entry_points.txt": groups}
    records = []
    for path, text in contents.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        records.append(f"{path},sha256={digest},{len(text.encode())}")
    records.append(f"{dist_info}/RECORD,,")
    wheel = folder / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for path, text in contents.items():
            archive.writestr(path, text)
        archive.writestr(f"{dist_info}/RECORD", "\n".join(records) + "\n")
    return wheel


@pytest.fixture(scope="module")
def plugin_path(tmp_path_factory) -> str:
    """A folder the two plugin distributions were pip-installed into (``--target``: the test's
    virtual environment is left untouched); put it on a subprocess's PYTHONPATH to use them."""
    folder = tmp_path_factory.mktemp("plugins")
    wheels = [
        build_wheel(folder, "my_parl_plugin", "0.3.1",
                    {"myplugin/__init__.py": "", "myplugin/backend.py": MY_BACKEND,
                     "myplugin/solver.py": MY_SOLVER, "myplugin/toy.py": TOY_SOLVER,
                     "myplugin/command.py": MY_COMMAND}, MY_ENTRY_POINTS),
        build_wheel(folder, "broken_parl_plugin", "1.0", {"brokenplugin/__init__.py": ""}, BROKEN_ENTRY_POINTS),
    ]
    target = folder / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index",
                    "--target", str(target), *map(str, wheels)], check=True, timeout=120)
    return str(target)


def _env(plugin_path: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([plugin_path, str(ROOT), str(ROOT / "tests")])}


def run_python(code: str, plugin_path: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], env=_env(plugin_path), cwd=cwd, capture_output=True,
                          text=True, timeout=150)


def run_parl_lite(plugin_path: str, *args: str) -> subprocess.CompletedProcess:
    """The ``parl-lite`` console script of this environment, with the plugins on its path."""
    return subprocess.run([str(PARL_LITE), *args], env=_env(plugin_path), capture_output=True, text=True,
                          timeout=150)


def test_a_third_party_backend_and_solver_are_used(plugin_path, tmp_path):
    code = f"""
import json, parl_lite
from evokit_py.config import resolve_config
from evokit_py.solvers import solver_class
from evokit_py.train import train
from remote_actors import Counter

config = resolve_config(None, ["solver.type=MY_ES", "train.address=myscheme://anywhere", "train.workers=2",
                               "train.generations=3", "train.target_return=null", "env.max_steps=30",
                               "train.log_dir={tmp_path}/run", "train.checkpoint_dir={tmp_path}/run/ck"])
result = train(config, echo=lambda line: None)
backend = parl_lite.connect()  # the one train.address connected
assert parl_lite.remote_class(Counter)(5).add(2) == 7
print(json.dumps({{"status": backend.status(), "told": solver_class("MY_ES").told,
                  "solver": solver_class("MY_ES").__module__, "generations": result.generations}}))
"""
    out = run_python(code, plugin_path, tmp_path)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report["status"]["kind"] == "myscheme" and report["status"]["address"] == "myscheme://anywhere"
    assert report["status"]["created"] == ["Sampler", "Sampler", "Counter"]  # the ES workers ran there
    assert report["solver"] == "myplugin.solver" and report["told"] == 3 and report["generations"] == 3
    rows = list(csv.DictReader(open(tmp_path / "run" / "progress.csv")))
    assert [int(row["generation"]) for row in rows] == [1, 2, 3]


def test_es_train_command_accepts_the_plugin_solver_type(plugin_path, tmp_path):
    code = ("from parl_lite.cli import main; main(['es-train', '--in-process', '--set', 'solver.type=MY_ES', "
            f"'--set', 'train.generations=2', '--set', 'env.max_steps=20', '--set', 'train.log_dir={tmp_path}/r', "
            f"'--set', 'train.checkpoint_dir={tmp_path}/r/ck'])")
    out = run_python(code, plugin_path, tmp_path)
    assert out.returncode == 0, out.stderr
    assert "CartPole-v1, MY_ES," in out.stdout
    summary = json.loads(out.stdout.splitlines()[-1])
    assert summary["algo"] == "MY_ES" and summary["updates"] == 2


TOY_CONFIG = """
solver:
  type: TOY_ES
  population_size: 6
  toy: {step: 0.5, elite: 3}
env: {max_steps: 30}
train: {generations: 4, target_return: null, workers: 1, checkpoint_every: 1}
"""


def test_a_plugin_solver_with_a_config_block_of_its_own_trains_and_resumes(plugin_path, tmp_path):
    (tmp_path / "toy.yaml").write_text(TOY_CONFIG)

    def es_train(run: str, *overrides: str, resume: bool = False) -> subprocess.CompletedProcess:
        sets = [f"train.log_dir={tmp_path / run}", f"train.checkpoint_dir={tmp_path / run}/ck", *overrides]
        return run_parl_lite(plugin_path, "es-train", "--config", str(tmp_path / "toy.yaml"),
                             *(arg for value in sets for arg in ("--set", value)), *(["--resume"] if resume else []))

    whole = es_train("whole")
    assert whole.returncode == 0 and "CartPole-v1, TOY_ES," in whole.stdout, whole.stderr
    half = es_train("halves", "train.generations=2")
    assert half.returncode == 0, half.stderr
    resumed = es_train("halves", resume=True)
    assert resumed.returncode == 0 and "at generation 2" in resumed.stdout, resumed.stderr
    with h5py.File(tmp_path / "whole/ck/solver.h5", "r") as one, h5py.File(tmp_path / "halves/ck/solver.h5") as two:
        assert int(one["solver/moves"][()]) == int(two["solver/moves"][()]) == 4
        assert one["solver/centre"][()].tobytes() == two["solver/centre"][()].tobytes()  # the same run, resumed
        assert "step: 0.5" in one.attrs["config"] and "elite: 3" in one.attrs["config"]
        count = len(one["params"])
    with h5py.File(tmp_path / "halves/ck/solver.h5", "r+") as file:  # the plugin's layout is checked
        del file["solver/centre"]
        write_dataset(file, "solver/centre", np.zeros(count + 1))
    forged = es_train("halves", "train.generations=5", resume=True)
    assert forged.returncode == 1 and f"solver/centre: shape ({count + 1},), expected ({count},)" in forged.stderr


@pytest.mark.parametrize("override, message", [
    ("solver.toy.elite=7", "solver.toy.elite: must be <= population_size (6), got 7"),
    ("solver.toy.step=0", "solver.toy.step: must be > 0, got 0"),
    ("solver.toy.speed=1", "solver.toy.speed: unknown key (known keys here: step, elite)"),
    ("train.mode=async", "train.mode: async needs solver.type BASIC_ES (TOY_ES does not correct samples"),
])
def test_a_plugin_solver_s_config_block_is_checked_by_its_own_rules(plugin_path, tmp_path, override, message):
    (tmp_path / "toy.yaml").write_text(TOY_CONFIG)
    out = run_parl_lite(plugin_path, "es-train", "--config", str(tmp_path / "toy.yaml"), "--set", override)
    assert out.returncode == 1 and message in out.stderr and "Traceback" not in out.stderr, out.stderr


def test_the_plugins_command_lists_them_and_names_the_broken_one(plugin_path, tmp_path):
    out = run_python("from parl_lite.cli import main; main(['plugins', '--json'])", plugin_path, tmp_path)
    assert out.returncode == 0, out.stderr
    rows = {(row["group"], row["name"]): row for row in json.loads(out.stdout)}
    mine = rows[("parl_lite.backends", "myscheme")]
    assert (mine["module"], mine["distribution"], mine["version"], mine["loads"]) == \
        ("myplugin.backend:connect_my", "my_parl_plugin", "0.3.1", True)
    assert rows[("evokit_py.solvers", "MY_ES")]["loads"] is True
    assert rows[("parl_lite.backends", "ray")]["distribution"] == "parl_lite"  # built-ins register the same way
    broken = rows[("evokit_py.solvers", "BROKEN_ES")]
    assert broken["loads"] is False and "brokenplugin.nowhere" in broken["error"]
    table = run_python("from parl_lite.cli import main; main(['plugins'])", plugin_path, tmp_path).stdout
    assert "myscheme" in table and "my_parl_plugin 0.3.1" in table and "NO: " in table


def test_a_broken_plugin_is_named_when_used_and_never_breaks_the_import(plugin_path, tmp_path):
    code = """
import parl_lite
from parl_lite.plugins import PluginError
from evokit_py.config import resolve_config
try:
    parl_lite.connect("broken://x")
except PluginError as error:
    print("backend:", error)
try:
    resolve_config(None, ["solver.type=BROKEN_ES"])  # a solver's settings are part of the config: it is loaded
except PluginError as error:
    print("solver:", error)
"""
    out = run_python(code, plugin_path, tmp_path)
    assert out.returncode == 0, out.stderr
    assert ("backend: plugin 'broken' of group parl_lite.backends (brokenplugin.nowhere:connect, from "
            "broken_parl_plugin 1.0) cannot be loaded: ModuleNotFoundError") in out.stdout
    assert "solver: plugin 'BROKEN_ES' of group evokit_py.solvers" in out.stdout
    cli = run_python("from parl_lite.cli import main; main(['es-train', '--set', 'solver.type=BROKEN_ES'])",
                     plugin_path, tmp_path)
    assert cli.returncode != 0 and "plugin 'BROKEN_ES'" in cli.stderr and "Traceback" not in cli.stderr


def test_an_unknown_solver_type_lists_the_available_ones():
    from evokit_py.config import ConfigError, resolve_config
    import numpy as np

    from evokit_py.noise import NoiseSource
    from evokit_py.solvers import make_solver

    message = r"solver\.type: must be one of BASIC_ES, CMA_ES, SEP_CMA_ES, GA, ARS.*got 'PSO'"
    with pytest.raises(ConfigError, match=message):  # checked as the config is read
        resolve_config(None, ["solver.type=PSO"])
    config = resolve_config(None, ["solver.type=GA"])
    config.solver.type = "PSO"  # a config changed after it was read: checked when the solver is built
    with pytest.raises(ConfigError, match=message):
        make_solver(config.solver, np.zeros(2), NoiseSource(0, 2))


def test_the_built_in_plugins_are_registered_like_third_party_ones():
    ray_plugin = plugins.find(plugins.BACKENDS, "ray")
    assert ray_plugin is not None and ray_plugin.value == "parl_lite.ext.ray:connect_ray"
    assert ray_plugin.distribution == "parl_lite"
    assert plugins.find(plugins.BACKENDS, "nosuch") is None
    commands = {plugin.name: plugin for plugin in plugins.installed(plugins.COMMANDS)}
    assert {"start", "connect", "stop", "status", "monitor"} <= set(commands)
    assert all(commands[name].distribution == "parl_lite" and commands[name].module.startswith("parl_lite.ext.")
               for name in ("start", "connect", "stop", "status", "monitor"))


def test_a_third_party_command_is_listed_and_runs(plugin_path):
    listed = run_parl_lite(plugin_path, "--help")
    assert listed.returncode == 0, listed.stderr
    names = {line.split()[0] for line in listed.stdout.split("Commands:")[1].splitlines() if line.strip()}
    assert {"hello", "brokencmd", "notacommand", "export", "es-train", "plugins"} <= names
    assert {"start", "connect", "stop", "status", "monitor"} <= names  # the built-in plugins' commands
    assert "Greet someone" in listed.stdout
    ran = run_parl_lite(plugin_path, "hello", "--name", "tester")
    assert ran.returncode == 0 and ran.stdout == "hello, tester, from my_parl_plugin\n", ran.stderr
    own = run_parl_lite(plugin_path, "export", "--help")  # parl-lite's own command wins the name
    assert own.returncode == 0 and "Export a model" in own.stdout and "Greet" not in own.stdout


@pytest.mark.parametrize("name, problem", [
    ("brokencmd", "plugin 'brokencmd' of group parl_lite.commands (brokenplugin.nowhere:command, from "
                  "broken_parl_plugin 1.0) cannot be loaded: ModuleNotFoundError"),
    ("notacommand", "plugin 'notacommand' of group parl_lite.commands (myplugin.command:NOT_A_COMMAND, from "
                    "my_parl_plugin 0.3.1) is 'hello', not a click command"),
])
def test_a_broken_command_plugin_is_named_not_a_traceback(plugin_path, name, problem):
    for args in ([name], [name, "--an-option", "value"], [name, "--help"]):
        ran = run_parl_lite(plugin_path, *args)
        assert ran.returncode == 1 and ran.stderr.startswith(f"Error: {problem}"), ran.stderr
        assert "Traceback" not in ran.stderr
    assert run_parl_lite(plugin_path, "hello").returncode == 0  # the others still run
