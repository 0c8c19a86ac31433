"""Issue 23, files and checkpoints: crafted checkpoints that ran code or allocated what they
declared, values that pass the checksum but are wrong, paths that are not files.

Real HDF5 files crafted with h5py (checksums made to match) or with one bit flipped, real FIFOs, real
command lines. A file that declares more than it holds is loaded in a subprocess whose address space
is limited (RLIMIT_AS) far below the declared size: the load must refuse it, not run out of memory.
"""
import os
import resource
import socket
import stat
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest
from click.testing import CliRunner

import parl_lite
from core_models import fixed_batch, make_agent
from parl_lite.cli import main
from damaged_hdf5 import forge, patch_dataset_bytes
from es_helpers import es_train_args, es_train_here, trained_checkpoint
from locations import CHILD_ENV, ROOT, TESTS

PARL_LITE = Path(sys.executable).with_name("parl-lite")  # the console script: sys.path[0] is its folder
ADDRESS_SPACE_LIMIT = 3 * 2**30  # paddle, onnxruntime and the test's data need about 1 GiB of it
HUGE = 3_000_000_000  # values a bomb declares


def _limit_address_space() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE_LIMIT, ADDRESS_SPACE_LIMIT))


def _run_limited(args, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run(args, env=CHILD_ENV, cwd=cwd, capture_output=True, text=True, timeout=150,
                          preexec_fn=_limit_address_space)


def _declare_huge(path: Path, name: str, dtype) -> None:
    """Replace dataset ``name`` by one that declares HUGE values and stores none (HDF5 returns its
    fill value for them), with the checksum its values would have: an 11 KB file asking a reader
    for HUGE * itemsize bytes."""
    with h5py.File(path, "r+") as file:
        del file[name]
        file.create_dataset(name, shape=(HUGE,), dtype=dtype)
        file[name].attrs["crc32"] = 0


def _flip_bit_in_object_header(path: Path, name: str) -> None:
    """Flip one bit in the object header of group ``name``: the high byte of its B-tree address."""
    with h5py.File(path, "r") as file:
        address = h5py.h5o.get_info(file[name].id).addr
    with open(path, "r+b") as handle:
        handle.seek(address + 30)
        byte = handle.read(1)[0]
        handle.seek(address + 30)
        handle.write(bytes([byte ^ 0x01]))


def _export_cli(checkpoint: Path, *args, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(PARL_LITE), "export", str(checkpoint), "--input-shape", "None,4", *args], cwd=cwd,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=150)


# ---------------------------------------------------------------- 5. a crafted checkpoint runs code

EVIL_MODULE = """
from pathlib import Path
Path(__file__).with_name("imported").write_text("the checkpoint ran this module")
"""


@pytest.fixture
def evil_folder(tmp_path):
    """A folder holding ``evilmod.py`` (which leaves a file ``imported`` when imported) and a
    checkpoint that names ``evilmod.Model`` as its model class."""
    (tmp_path / "evilmod.py").write_text(EVIL_MODULE)
    make_agent(0).save(tmp_path / "a.h5")
    with h5py.File(tmp_path / "a.h5", "r+") as file:
        file["models/model"].attrs["class"] = "evilmod.Model"
    return tmp_path


@pytest.mark.timeout(180)
def test_5_export_imports_nothing_a_checkpoint_names_unless_asked(evil_folder):
    result = _export_cli(evil_folder / "a.h5", cwd=evil_folder)
    assert not (evil_folder / "imported").exists(), "export ran ./evilmod.py"
    assert result.returncode == 1, result.stderr
    assert "would import module 'evilmod'" in result.stderr and "--import-recorded-class" in result.stderr
    assert "--model-class evilmod:Model" in result.stderr, result.stderr


@pytest.mark.timeout(180)
def test_5_export_does_not_search_the_current_folder_unless_given(evil_folder):
    result = _export_cli(evil_folder / "a.h5", "--import-recorded-class", cwd=evil_folder)
    assert not (evil_folder / "imported").exists(), "export ran ./evilmod.py"
    assert result.returncode == 1 and "cannot import module 'evilmod'" in result.stderr, result.stderr
    assert "--app-dir" in result.stderr, result.stderr


def test_5_only_parl_lites_own_classes_are_imported_without_asking(evil_folder):
    (evil_folder / "parl_lite_evil.py").write_text(EVIL_MODULE)  # a name that merely starts like ours
    with h5py.File(evil_folder / "a.h5", "r+") as file:
        file["models/model"].attrs["class"] = "parl_lite_evil.Model"
    result = CliRunner().invoke(main, ["export", str(evil_folder / "a.h5"), "--input-shape", "None,4",
                                       "--app-dir", str(evil_folder)])
    assert result.exit_code == 1 and "--import-recorded-class" in result.output, result.output
    assert not (evil_folder / "imported").exists()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("class_path", ["../evilmod.Model", "evil-mod.Model", ".evilmod.Model", "evilmod.Model()",
                                        "evilmod", "evilmod:", "os.path/evilmod:Model", "evilmod:Model x"])
def test_5_class_paths_that_are_not_dotted_names_are_refused_before_any_import(evil_folder, class_path):
    with h5py.File(evil_folder / "a.h5", "r+") as file:
        file["models/model"].attrs["class"] = class_path
    for how in (["--import-recorded-class"], ["--model-class", class_path]):
        result = CliRunner().invoke(main, ["export", str(evil_folder / "a.h5"), "--input-shape", "None,4",
                                           "--app-dir", str(evil_folder), *how])
        assert result.exit_code != 0 and "dotted Python names only" in result.output, (how, result.output)
    assert not (evil_folder / "imported").exists()


# ---------------------------------------------------------------- 6. decompression bombs


@pytest.mark.timeout(180)
def test_6_export_refuses_a_checkpoint_declaring_more_than_it_holds(tmp_path):
    make_agent(0).save(tmp_path / "bomb.h5")
    _declare_huge(tmp_path / "bomb.h5", "models/model/fc1.weight", np.float32)
    assert (tmp_path / "bomb.h5").stat().st_size < 20_000
    result = _run_limited([sys.executable, "-m", "parl_lite.cli", "export", str(tmp_path / "bomb.h5"),
                           "--input-shape", "None,4", "--model-class", "core_models:CartpoleModel"])
    assert result.returncode == 1, result.stderr[-3000:]
    assert "bomb.h5" in result.stderr and "models/model/fc1.weight: declares (3000000000,)" in result.stderr
    assert "MemoryError" not in result.stderr and "Traceback" not in result.stderr


RESTORE = """
import sys
from core_models import make_agent
import parl_lite
try:
    make_agent(0).restore(sys.argv[1])
except parl_lite.CheckpointError as error:
    print(error)
"""


@pytest.mark.timeout(120)
def test_6_restore_refuses_a_checkpoint_declaring_more_than_it_holds(tmp_path):
    agent = make_agent(0)
    agent.learn(*fixed_batch(0))
    agent.save(tmp_path / "bomb.h5", with_optimizer=True)
    _declare_huge(tmp_path / "bomb.h5", "optimizers/optimizer/model/fc1.weight/moment1_0", np.float64)
    result = _run_limited([sys.executable, "-c", RESTORE, str(tmp_path / "bomb.h5")])
    assert result.returncode == 0, result.stderr[-3000:]
    assert "bomb.h5" in result.stdout and "fc1.weight/moment1_0: declares" in result.stdout, result.stdout


@pytest.mark.timeout(180)
def test_6_es_train_resume_refuses_best_params_declaring_more_than_the_file_holds(tmp_path):
    path = trained_checkpoint(tmp_path)
    _declare_huge(path, "extra/best_params", np.float64)
    result = _run_limited([sys.executable, "-m", "parl_lite.cli",
                           *es_train_args(tmp_path, "train.generations=4", "train.workers=1"), "--resume"])
    assert result.returncode == 1, result.stderr[-3000:]
    assert str(path) in result.stderr and "extra/best_params: declares" in result.stderr, result.stderr
    assert "MemoryError" not in result.stderr and "Traceback" not in result.stderr


def test_6_restore_checks_shapes_against_the_model_before_reading_any_value(tmp_path):
    # fc1.weight has the wrong shape *and* corrupted bytes: the shape is named, so it was checked
    # before the values were read (their checksum would fail on reading)
    make_agent(0).save(tmp_path / "a.h5")
    forge(tmp_path / "a.h5", "models/model/fc1.weight", np.zeros((5, 20), np.float32))
    patch_dataset_bytes(tmp_path / "a.h5", "models/model/fc1.weight")
    with pytest.raises(parl_lite.CheckpointError, match=r"fc1.weight' has shape \(5, 20\), expected \(4, 20\)"):
        make_agent(1).restore(tmp_path / "a.h5")


def test_6_restore_checks_accumulator_shapes_before_reading_any_value(tmp_path):
    agent = make_agent(0)
    agent.learn(*fixed_batch(0))
    agent.save(tmp_path / "a.h5", with_optimizer=True)
    name = "optimizers/optimizer/model/fc2.bias/moment2_0"
    forge(tmp_path / "a.h5", name, np.zeros(7, np.float32))
    patch_dataset_bytes(tmp_path / "a.h5", name)
    with pytest.raises(parl_lite.CheckpointError, match=r"fc2.bias/moment2_0: shape \(7,\), expected"):
        make_agent(1).restore(tmp_path / "a.h5")


@pytest.mark.timeout(120)
def test_6_solver_checkpoint_shapes_are_checked_before_reading_any_value(tmp_path):
    path = trained_checkpoint(tmp_path)
    with h5py.File(path, "r") as file:
        count = file["params"].shape[0]
    forge(path, "extra/best_params", np.zeros(count + 1))
    patch_dataset_bytes(path, "extra/best_params")
    result = es_train_here(tmp_path, "train.generations=4", extra=["--resume"])
    assert result.exit_code == 1 and f"extra/best_params: shape ({count + 1},), expected ({count},)" in result.output
    assert "checksum" not in result.output, result.output


@pytest.mark.timeout(30, method="thread")  # a read blocked on the FIFO ignores signals
@pytest.mark.parametrize("storage", ["external link", "external storage"])
def test_6_a_checkpoint_that_reads_other_files_is_refused(tmp_path, storage):
    make_agent(0).save(tmp_path / "a.h5")
    os.mkfifo(tmp_path / "fifo")  # following the link or the storage would block on it
    with h5py.File(tmp_path / "a.h5", "r+") as file:
        del file["models/model/fc1.bias"]
        if storage == "external link":
            file["models/model/fc1.bias"] = h5py.ExternalLink(str(tmp_path / "fifo"), "/x")
        else:
            file.create_dataset("models/model/fc1.bias", shape=(20,), dtype=np.float32,
                                external=[(str(tmp_path / "fifo"), 0, 80)])
    with pytest.raises(parl_lite.CheckpointError, match="a.h5 is corrupted or crafted: models/model/fc1.bias"):
        make_agent(1).restore(tmp_path / "a.h5")


# ---------------------------------------------------------------- 9. values that pass the checksum


def _solver_value(path: Path, name: str):
    with h5py.File(path, "r") as file:
        return file[name][()]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("dataset, make_value, message", [
    ("solver/theta", lambda theta, gen: np.full_like(theta, 1e300), "solver/theta: values up to 1e+300, beyond"),
    ("solver/sigma", lambda sigma, gen: np.float64(-1.0), "solver/sigma: -1.0, expected a step size > 0"),
    ("solver/sigma", lambda sigma, gen: np.complex128(0.05 + 1j), "solver/sigma: dtype complex128, expected real"),
    ("solver/sigma", lambda sigma, gen: np.full(3, 0.05), "solver/sigma: shape (3,), expected a scalar"),
    ("solver/theta", lambda theta, gen: theta[:-1], "solver/theta: shape"),
    ("solver/history/versions", lambda versions, gen: versions + gen, "solver/history/versions: "),
    ("solver/history/versions", lambda versions, gen: np.zeros_like(versions) + gen - 1, "holds a version twice"),
])
def test_9_solver_values_that_pass_the_checksum_are_refused(tmp_path, dataset, make_value, message):
    path = trained_checkpoint(tmp_path, "train.generations=3")
    generation = int(_solver_value(path, "solver/generation"))
    value = _solver_value(path, dataset)
    assert np.size(value) >= (2 if "versions" in dataset else 1)  # the run kept versions for stale samples
    forge(path, dataset, make_value(value, generation))
    result = es_train_here(tmp_path, "train.generations=5", extra=["--resume"])
    assert result.exit_code == 1 and message in result.output and str(path) in result.output, result.output
    assert "generations/s" not in result.output


def test_9_an_optimizer_restored_and_not_stepped_can_be_saved(tmp_path):
    trained = make_agent(0)
    trained.learn(*fixed_batch(0))
    trained.save(tmp_path / "a.h5", with_optimizer=True)
    resumed = make_agent(1)
    resumed.restore(tmp_path / "a.h5")
    resumed.save(tmp_path / "b.h5", with_optimizer=True)  # before any update (the optimizer holds numpy)
    with h5py.File(tmp_path / "a.h5", "r") as first, h5py.File(tmp_path / "b.h5", "r") as second:
        names: list[str] = []
        first["optimizers"].visititems(lambda name, item: None if isinstance(item, h5py.Group) else names.append(name))
        assert len(names) == 16  # Adam: 4 slots of 4 parameters
        for name in names:
            np.testing.assert_array_equal(first["optimizers"][name][()], second["optimizers"][name][()])
    again = make_agent(2)
    again.restore(tmp_path / "b.h5")
    again.learn(*fixed_batch(1))
    trained.learn(*fixed_batch(1))
    for name, value in trained.get_weights().items():
        np.testing.assert_allclose(again.get_weights()[name], value, rtol=1e-6, atol=1e-7)


@pytest.mark.timeout(240)
def test_9_train_ppo_resumed_and_saved_before_any_update_writes_its_checkpoint(tmp_path):
    short = ["--total-steps", "256", "--rollout-steps", "32", "--num-envs", "4", "--epochs", "1",
             "--eval-every", "100000", "--target", "1e9"]
    script = str(ROOT / "scripts" / "examples" / "train_ppo.py")
    first = subprocess.run([sys.executable, script, *short, "--save", str(tmp_path / "x.h5")], env=CHILD_ENV,
                           capture_output=True, text=True, timeout=150)
    assert first.returncode == 0, first.stderr[-3000:]
    second = subprocess.run([sys.executable, script, *short, "--resume", str(tmp_path / "x.h5"),
                             "--save", str(tmp_path / "y.h5")], env=CHILD_ENV, capture_output=True, text=True, timeout=150)
    assert second.returncode == 0, second.stderr[-3000:]
    assert (tmp_path / "y.h5").is_file()
    with h5py.File(tmp_path / "y.h5", "r") as file:
        assert "optimizers" in file


# ---------------------------------------------------------------- minor: corrupt headers, bad paths


def test_a_bit_flipped_in_an_object_header_is_named(tmp_path):
    agent = make_agent(0)
    agent.learn(*fixed_batch(0))
    agent.save(tmp_path / "a.h5", with_optimizer=True)
    _flip_bit_in_object_header(tmp_path / "a.h5", "optimizers/optimizer")
    with pytest.raises(parl_lite.CheckpointError, match="checkpoint .*a.h5 is corrupted"):
        make_agent(1).restore(tmp_path / "a.h5")


@pytest.mark.timeout(120)
def test_a_bit_flipped_in_an_object_header_of_a_solver_checkpoint_is_named(tmp_path):
    path = trained_checkpoint(tmp_path)
    _flip_bit_in_object_header(path, "solver/optimizer")
    result = es_train_here(tmp_path, "train.generations=4", extra=["--resume"])
    assert result.exit_code == 1 and f"solver checkpoint {path} is corrupted" in result.output, result.output


@pytest.mark.parametrize("where, error, message", [
    ("folder", IsADirectoryError, "cannot write {tmp}/folder: it is a folder"),
    ("ok.h5/sub.h5", NotADirectoryError, "cannot write {tmp}/ok.h5/sub.h5: {tmp}/ok.h5 is a file, not a folder"),
    ("ok.h5/deeper/sub.h5", NotADirectoryError, "{tmp}/ok.h5 is a file, not a folder"),
    ("", ValueError, "cannot write a file at an empty path"),
])
def test_saving_to_a_path_that_cannot_be_a_file_says_why(tmp_path, where, error, message):
    (tmp_path / "folder").mkdir()
    (tmp_path / "ok.h5").write_text("a file")
    path = str(tmp_path / where) if where else ""
    with pytest.raises(error) as caught:
        make_agent(0).save(path)
    assert message.format(tmp=tmp_path) in str(caught.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["folder", "ok.h5"]  # no temporary left


def _special_file(path: Path, kind: str) -> str:
    """Make a FIFO, a socket or a character device (/dev/null's numbers) at ``path``; returns its
    description. A device needs root (CAP_MKNOD): skipped without."""
    if kind == "fifo":
        os.mkfifo(path)
        return "a FIFO (named pipe)"
    if kind == "socket":
        with socket.socket(socket.AF_UNIX) as server:
            server.bind(str(path))
        return "a socket"
    try:
        os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    except PermissionError as error:
        pytest.skip(f"making a device needs root: {error}")
    return "a character device"


def _save_with_every_writer(path: Path, writer: str) -> str:
    """Write ``path`` with one of parl_lite's writers; returns what the writer said."""
    from core_models import CartpoleModel
    from evokit_py.checkpoint import write_checkpoint
    from parl_lite.io.inference import save_inference_model
    from parl_lite.io.onnx_export import export_onnx
    from parl_lite.utils import ReplayMemory

    writers = {
        "Agent.save": lambda: make_agent(0).save(path),
        "ReplayMemory.save": lambda: ReplayMemory(4, 3, 1).save(path),
        "export_onnx": lambda: export_onnx(CartpoleModel(), path, [None, 4]),
        "evokit write_checkpoint": lambda: write_checkpoint(
            path, solver_type="BASIC_ES", config_yaml="seed: 0\n", noise_seed=0, params=np.ones(3),
            solver_state={"generation": np.int64(0)}, obs_stats={}),
        "save_inference_model": lambda: save_inference_model(CartpoleModel(), path.with_suffix(""), [[None, 4]],
                                                             ["float32"]),
    }
    if writer == "parl-lite export -o":
        checkpoint = path.with_name("model.h5")
        make_agent(0).save(checkpoint)
        result = CliRunner().invoke(main, ["export", str(checkpoint), "--input-shape", "None,4", "-o", str(path),
                                           "--model-class", "core_models:CartpoleModel", "--app-dir", str(TESTS)])
        assert result.exit_code == 1, result.output
        checkpoint.unlink()
        return result.output
    with pytest.raises(Exception) as caught:
        writers[writer]()
    return str(caught.value)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("kind", ["fifo", "socket", "device"])
@pytest.mark.parametrize("writer", ["Agent.save", "ReplayMemory.save", "export_onnx", "parl-lite export -o",
                                    "evokit write_checkpoint", "save_inference_model"])
def test_saving_over_a_fifo_socket_or_device_is_refused_naming_it(tmp_path, writer, kind):
    """Every writer wrote a temporary and renamed it over the path: run as root, agent.save("/dev/null")
    replaced the machine's /dev/null with a regular file."""
    path = tmp_path / ("m.pdiparams" if writer == "save_inference_model" else "target")
    description = _special_file(path, kind)
    before = os.stat(path)
    said = _save_with_every_writer(path, writer)
    assert f"cannot write {path}: it is {description}, not a file" in " ".join(said.split()), said
    after = os.stat(path)
    assert (after.st_mode, after.st_ino, after.st_rdev) == (before.st_mode, before.st_ino, before.st_rdev)
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]  # no temporary, nothing else written


@pytest.mark.timeout(30, method="thread")
def test_restoring_a_fifo_says_what_it_is_without_blocking(tmp_path):
    os.mkfifo(tmp_path / "a.h5")
    with pytest.raises(parl_lite.CheckpointError, match=r"a.h5 is a FIFO \(named pipe\), not a checkpoint file"):
        make_agent(0).restore(tmp_path / "a.h5")


@pytest.mark.timeout(30, method="thread")
def test_exporting_a_fifo_or_a_device_says_what_it_is(tmp_path):
    os.mkfifo(tmp_path / "a.h5")
    for path, kind in ((tmp_path / "a.h5", "a FIFO (named pipe)"), (Path("/dev/null"), "a character device")):
        result = CliRunner().invoke(main, ["export", str(path), "--input-shape", "None,4", "--model-class",
                                           "core_models:CartpoleModel", "--app-dir", str(TESTS)])
        assert result.exit_code == 1 and f"{path} is {kind}, not a checkpoint file" in result.output, result.output
