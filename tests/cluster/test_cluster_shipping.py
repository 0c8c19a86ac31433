"""The files a cluster client ships (``distributed_files``): only regular files and folders, linked
folders followed, cycles and special files (FIFOs, devices, links to nothing) refused by name, and
nothing read past the limit. Real FIFOs and symlinks in a temporary folder; each collection runs in
a process of its own, with 1 GiB of address space and a timeout, so that a hang or a read without
end fails the test instead of the machine."""
import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(120)

COLLECT = """
import json, sys
from parl_lite.ext.cluster.shipping import DistributedFilesError, collect_files
try:
    files = collect_files(json.loads(sys.argv[1]), float(sys.argv[2]))
except Exception as error:
    print(json.dumps({"error": type(error).__name__, "text": str(error),
                      "names_it": isinstance(error, DistributedFilesError)}))
else:
    print(json.dumps({"files": {name: content.decode(errors="replace") for name, content in files.items()}}))
"""


def _collect(folder: Path, patterns: list[str], limit_mb: float = 64.0) -> dict:
    """``collect_files(patterns, limit_mb)`` run in ``folder``: {"files": name -> text} or {"error", "text"}."""
    def limit_memory() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (2**30, 2**30))

    try:
        result = subprocess.run([sys.executable, "-c", COLLECT, json.dumps(patterns), str(limit_mb)], cwd=folder,
                                capture_output=True, text=True, timeout=30, preexec_fn=limit_memory)
    except subprocess.TimeoutExpired:
        pytest.fail(f"collecting {patterns} in {folder} hung")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@pytest.fixture
def data(tmp_path) -> Path:
    """``data/`` with a file and a sub-folder holding another."""
    (tmp_path / "data" / "sub").mkdir(parents=True)
    (tmp_path / "data" / "a.txt").write_text("a\n")
    (tmp_path / "data" / "sub" / "b.txt").write_text("b\n")
    return tmp_path / "data"


def test_a_fifo_in_a_shipped_folder_is_refused_by_name_not_waited_on(data):
    os.mkfifo(data / "sub" / "pipe")
    collected = _collect(data.parent, ["data"])
    assert collected.get("names_it") and "data/sub/pipe is a FIFO, not a regular file or folder" in collected["text"]


def test_a_fifo_named_in_distributed_files_is_refused_as_a_fifo(data):
    os.mkfifo(data / "pipe")
    collected = _collect(data.parent, ["data/pipe"])
    assert collected.get("names_it") and "data/pipe is a FIFO" in collected["text"], collected


def test_a_symlink_to_a_device_is_refused_by_name_and_never_read(data):
    os.symlink("/dev/zero", data / "zero")
    collected = _collect(data.parent, ["data"])
    assert collected.get("names_it"), collected
    assert "data/zero (a symlink to /dev/zero) is a character device" in collected["text"]


def test_a_symlink_to_nothing_is_refused_by_name(data):
    os.symlink("gone.txt", data / "dangling")
    collected = _collect(data.parent, ["data"])
    assert collected.get("names_it") and "data/dangling is a symlink to nothing ('gone.txt')" in collected["text"]


def test_a_symlinked_folder_is_shipped_under_the_links_name(data, tmp_path):
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "c.txt").write_text("c\n")
    os.symlink(tmp_path / "elsewhere", data / "linked")
    os.symlink(tmp_path / "elsewhere" / "c.txt", data / "c-link.txt")
    files = _collect(tmp_path, ["data"])["files"]
    assert files == {"data/": "", "data/linked/": "", "data/sub/": "", "data/a.txt": "a\n", "data/c-link.txt": "c\n",
                     "data/linked/c.txt": "c\n", "data/sub/b.txt": "b\n"}


def test_a_symlink_cycle_is_refused_by_name(data):
    os.symlink("..", data / "sub" / "up")
    collected = _collect(data.parent, ["data"])
    assert collected.get("names_it"), collected
    assert "data/sub/up is a symlink to a folder that contains it (a cycle)" in collected["text"]


def test_a_file_whose_size_stat_understates_is_read_only_up_to_the_limit(tmp_path):
    maps = Path("/proc/self/maps")
    assert maps.stat().st_size == 0 and len(maps.read_bytes()) > 2048  # what the test relies on
    collected = _collect(tmp_path, [str(maps)], limit_mb=1 / 1024)  # 1 KiB
    assert collected.get("error") == "ClusterError", collected
    assert "over the limit of 0.000976562 MB once /proc/self/maps is read" in collected["text"]
