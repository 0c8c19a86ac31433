"""The training scripts take any Gymnasium id: RL-Zoo's values for the tasks they list, and for
another task its own target (gymnasium's reward threshold), not CartPole-v1's."""
import dataclasses
import json
import subprocess
import sys

import pytest

from parl_lite import train
from parl_lite.train import arg
from locations import ROOT



@dataclasses.dataclass
class Args(train.TrainArgs):
    env: str = arg("CartPole-v1", "gymnasium id")
    lr: float = arg(1e-3, "learning rate")
    target: float | None = arg(475.0, "stop once the evaluation mean reaches this")


TABLE = {"Acrobot-v1": {"lr": 5e-4}, "MountainCar-v0": {"lr": 4e-3, "target": -120.0}}


@pytest.mark.parametrize("argv, lr, target", [
    ([], 1e-3, 475.0),                                             # the default task, its own values
    (["--env", "Acrobot-v1"], 5e-4, -100.0),                        # the table's values, gymnasium's threshold
    (["--env", "MountainCar-v0"], 4e-3, -120.0),                    # a target in the table wins
    (["--env", "MountainCar-v0", "--target", "-90", "--lr", "0.1"], 0.1, -90.0),  # the command line wins
    (["--env", "LunarLander-v3"], 1e-3, 200.0),                     # not in the table: the defaults, its threshold
    (["--env", "Pendulum-v1"], 1e-3, None),                         # no threshold: no target
])
def test_another_environment_takes_its_table_values_and_its_own_target(argv, lr, target):
    args = train.parse_args(Args, argv=argv, env_defaults=TABLE)
    assert (args.lr, args.target) == (lr, target)


@pytest.mark.timeout(180)
def test_train_ppo_takes_an_environment_it_has_no_table_for(tmp_path):
    """It accepted only CartPole-v1 and Pendulum-v1 (argparse's choices)."""
    result = subprocess.run([sys.executable, str(ROOT / "scripts" / "examples" / "train_ppo.py"), "--env", "Acrobot-v1",
                             "--total-steps", "256", "--num-envs", "2", "--rollout-steps", "64",
                             "--eval-every", "128", "--eval-episodes", "1", "--save", str(tmp_path / "ppo.h5")],
                            capture_output=True, text=True, timeout=170, cwd=ROOT)
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    assert summary["env"] == "Acrobot-v1" and summary["steps"] >= 256 and not summary["solved"]
