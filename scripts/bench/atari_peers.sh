#!/usr/bin/env bash
# The peers of bench_atari.py, each in a virtual environment of its own under DIR (outside the
# repository; nothing here is installed into parl_lite's environment):
#
#   bash scripts/bench/atari_peers.sh DIR PARL_GIT [PARL_COMMIT]
#
#   DIR/parl    PARL 2.2.1 (paddle backend, paddlepaddle 3.3.1), gym 0.26.2 and opencv for its Atari
#               wrappers, ale-py 0.12 (which ships the ROMs) for the games
#   DIR/rllib   ray[rllib] with torch (CPU), gymnasium, ale-py, opencv
#   DIR/sb3     stable-baselines3 with torch (CPU), ale-py, opencv
#   DIR/parl-examples/IMPALA   PARL 2.2.1's IMPALA example, as it is in PARL's repository
#
# PARL_GIT is a clone of PaddlePaddle/PARL (its .git folder); PARL_COMMIT defaults to 3bb5fe36, the
# commit of the 2.2.1 release. TORCH (default: torch) is what pip installs torch from: on a machine
# without a GPU, a CPU wheel (or `--index-url https://download.pytorch.org/whl/cpu torch`) keeps it small.
# PYTHON (default: python3.11) makes the environments.
#
# What PARL 2.2.1 needed on Python 3.11 (it was released for 3.6-3.9), and why:
# - `pip install --no-deps parl==2.2.1`: its pins have no Python 3.11 wheels (grpcio==1.37.0 fails to
#   build, pyzmq==22.3.0); its dependencies are installed beside it with the nearest versions that
#   have them (pyzmq 23.2.1, the current grpcio, protobuf 3.20.3 as paddle 3 asks, cloudpickle
#   1.6.0 as pinned). tensorboard is left out (nothing the example runs imports it).
# - PARL_BACKEND=paddle (bench_atari.py sets it): PARL 2.2.1 detects paddle by importing
#   `paddle.fluid`, which paddle 3 no longer has; the variable is PARL's own switch to its paddle
#   backend, which does not use fluid on the example's path.
# - the example's `gym.make("PongNoFrameskip-v4")`: gym 0.26.2 (PARL's atari_wrappers wrap gym >= 0.26
#   with their CompatWrapper) and a small gym plugin, installed here as `gym-ale-ids`: at gym's
#   import it registers ale-py's Atari ids (from gymnasium's registry) with gym, as ale-py < 0.9 did
#   itself, with gym's environment checker off (it rejects gymnasium's spaces). ale-py >= 0.9 ships
#   the ROMs but registers with gymnasium only; the ale-py versions that registered with gym need
#   the ROMs downloaded separately.
# - in the learner's process only, bench_atari.py makes two things of PARL 2.2.1 work with today's
#   packages, without changing its files: the example's `paddle.io.DataLoader.from_generator`
#   (paddle >= 2.6 has it as `paddle.base.reader.DataLoader.from_generator`; paddle 2.6.2, the only
#   paddle 2 for Python 3.11, has no `paddle.fluid` either), and PARL's client-side heartbeat
#   server for its jobs (gRPC), which PARL makes before forking the process that serves it: gRPC's
#   wheels for Python 3.11 (1.49 on) do not serve from such a server, and every job quits within
#   seconds, having lost its client; the bench makes the same server in the forked process.
set -euo pipefail

if [ $# -lt 2 ]; then
    echo "usage: $0 DIR PARL_GIT [PARL_COMMIT]" >&2
    exit 2
fi
DIR=$(realpath -m "$1")
PARL_GIT=$2
PARL_COMMIT=${3:-3bb5fe36}
PYTHON=${PYTHON:-python3.11}
TORCH=${TORCH:-torch}
mkdir -p "$DIR"

# ---------------------------------------------------------------- PARL 2.2.1
"$PYTHON" -m venv "$DIR/parl"
"$DIR/parl/bin/pip" install -q --no-deps parl==2.2.1
"$DIR/parl/bin/pip" install -q paddlepaddle==3.3.1 pyzmq==23.2.1 grpcio cloudpickle==1.6.0 tensorboardX==2.5 \
    protobuf==3.20.3 termcolor scipy flask click psutil flask_cors requests pynvml \
    gym==0.26.2 "gymnasium>=1.0" "ale-py==0.12.*" opencv-python-headless
PLUGIN="$DIR/gym-ale-ids"
mkdir -p "$PLUGIN"
cat > "$PLUGIN/pyproject.toml" <<'EOF'
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "gym-ale-ids"
version = "1.0"
description = "Registers ale-py's Atari ids with gym 0.26 (a gym.envs plugin)"

[project.entry-points."gym.envs"]
__root__ = "gym_ale_ids:register"
EOF
cat > "$PLUGIN/gym_ale_ids.py" <<'EOF'
"""ale-py's Atari ids (gymnasium's registry) registered with gym 0.26, run by gym at its import."""


def register():
    import ale_py
    import gymnasium
    from gym.envs.registration import register as gym_register, registry

    gymnasium.register_envs(ale_py)
    for env_id, spec in gymnasium.registry.items():
        if spec.entry_point == "ale_py.env:AtariEnv" and env_id not in registry:
            gym_register(id=env_id, entry_point=spec.entry_point, kwargs=dict(spec.kwargs),
                         max_episode_steps=spec.max_episode_steps, disable_env_checker=True)
EOF
"$DIR/parl/bin/pip" install -q "$PLUGIN"
mkdir -p "$DIR/parl-examples/IMPALA"
for file in $(git --git-dir "$PARL_GIT" ls-tree --name-only "$PARL_COMMIT" examples/IMPALA/); do
    git --git-dir "$PARL_GIT" show "$PARL_COMMIT:$file" > "$DIR/parl-examples/IMPALA/$(basename "$file")"
done

# ---------------------------------------------------------------- RLlib, SB3
for peer in rllib sb3; do
    "$PYTHON" -m venv "$DIR/$peer"
    "$DIR/$peer/bin/pip" install -q $TORCH
done
"$DIR/rllib/bin/pip" install -q "ray[rllib]" "gymnasium>=1.0" "ale-py==0.12.*" opencv-python-headless
"$DIR/sb3/bin/pip" install -q stable-baselines3 "ale-py==0.12.*" opencv-python-headless

echo "bench_atari.py --parl-python $DIR/parl/bin/python --parl-examples $DIR/parl-examples/IMPALA" \
     "--rllib-python $DIR/rllib/bin/python --sb3-python $DIR/sb3/bin/python"
