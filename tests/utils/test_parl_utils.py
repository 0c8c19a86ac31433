"""parl_lite.utils under PARL's names: logger, summary's folder, CSVLogger, ports, GPUs, time and
window statistics, schedulers, rl_utils."""
import csv
import os
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

import parl_lite.utils as utils
from parl_lite.utils import CSVLogger, LinearDecayScheduler, PiecewiseScheduler, TimeStat, WindowStat, logger
from parl_lite.utils import machine_info
from parl_lite.utils.rl_utils import calc_discount_sum_rewards, calc_gae
from locations import CHILD_ENV



def test_parl_names_are_exported():
    for name in ("logger", "summary", "machine_info", "CSVLogger", "ReplayMemory", "get_free_tcp_port",
                 "is_port_available", "PiecewiseScheduler", "LinearDecayScheduler", "TimeStat", "WindowStat",
                 "calc_gae", "calc_discount_sum_rewards"):
        assert getattr(utils, name) is not None, name
    from parl_lite.utils.replay_memory import ReplayMemory

    assert utils.ReplayMemory is ReplayMemory
    for function in ("info", "warning", "error", "debug", "set_dir", "get_dir", "auto_set_dir", "set_level"):
        assert callable(getattr(logger, function)), function


# ---------------------------------------------------------------- logger
@pytest.fixture
def restore_logger():
    """The logger is process-wide: give it back without a folder and at DEBUG."""
    yield
    handler = logger._file_handler
    if handler is not None:
        logger._logger.removeHandler(handler)
        handler.close()
    logger._file_handler, logger._log_dir = None, None
    logger.set_level(logger.DEBUG)


def test_set_dir_writes_every_level_with_parl_s_layout_and_deletes_nothing(tmp_path, restore_logger):
    folder = tmp_path / "logs"
    folder.mkdir()
    (folder / "keep.txt").write_text("earlier run")
    logger.set_dir(folder)
    assert logger.get_dir() == str(folder)
    logger.debug("a debug line")
    logger.info("value %d", 7)
    logger.warning("careful")
    logger.error("broken")
    lines = (folder / "log.log").read_text().splitlines()
    assert len(lines) == 4
    assert all(f"MainThread @{Path(__file__).name}:" in line for line in lines)
    assert [line.split("] ", 1)[1] for line in lines] == ["DEBUG a debug line", "value 7", "WRN careful", "ERR broken"]
    assert "\033[" not in (folder / "log.log").read_text()  # no colour codes in the file
    logger.set_dir(folder)  # again: appends, and the folder's other files stay
    logger.info("second run")
    assert (folder / "keep.txt").read_text() == "earlier run"
    assert (folder / "log.log").read_text().splitlines()[:4] == lines
    other = tmp_path / "other" / "nested"
    logger.set_dir(other)  # created with its parents; the first folder's file gets nothing more
    logger.info("elsewhere")
    assert "elsewhere" not in (folder / "log.log").read_text()
    assert "elsewhere" in (other / "log.log").read_text()


def test_set_level_filters_and_threads_are_named(tmp_path, restore_logger):
    import threading

    logger.set_dir(tmp_path)
    logger.set_level(logger.INFO)
    logger.debug("hidden")
    thread = threading.Thread(target=logger.info, args=("from a thread",), name="worker-7")
    thread.start()
    thread.join()
    text = (tmp_path / "log.log").read_text()
    assert "hidden" not in text
    assert "worker-7 @" in text and "from a thread" in text


def _run_script(folder: Path, body: str, stdin=subprocess.DEVNULL) -> subprocess.CompletedProcess:
    script = folder / "my_train.py"
    script.write_text(textwrap.dedent(body))
    return subprocess.run([sys.executable, str(script)], cwd=folder, capture_output=True, text=True,
                          stdin=stdin, timeout=60)


@pytest.mark.timeout(120)
def test_auto_set_dir_names_the_folder_after_the_script_and_honours_each_action(tmp_path):
    result = _run_script(tmp_path, """
        from parl_lite.utils import logger
        print(logger.auto_set_dir())       # empty: no question asked
        logger.info("first")
        """)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0] == os.path.join("train_log", "my_train")
    log = tmp_path / "train_log" / "my_train" / "log.log"
    assert "first" in log.read_text()

    keep = _run_script(tmp_path, """
        from parl_lite.utils import logger
        logger.auto_set_dir(action="k")
        logger.info("second")
        """)
    assert keep.returncode == 0, keep.stderr
    assert "first" in log.read_text() and "second" in log.read_text()

    new = _run_script(tmp_path, """
        from parl_lite.utils import logger
        print(logger.auto_set_dir(action="n"))
        """)
    assert new.returncode == 0, new.stderr
    new_folder = tmp_path / new.stdout.splitlines()[-1]
    assert new_folder.name.startswith("my_train") and new_folder.name != "my_train"
    assert (new_folder / "log.log").exists() and "second" in log.read_text()

    delete = _run_script(tmp_path, """
        from parl_lite.utils import logger
        logger.auto_set_dir(action="d")
        logger.info("third")
        """)
    assert delete.returncode == 0, delete.stderr
    assert "first" not in log.read_text() and "third" in log.read_text()

    for action, error in (("None", "FileExistsError: the log folder train_log/my_train exists and has files"),
                          ("'q'", "FileExistsError: the log folder train_log/my_train exists"),
                          ("'x'", "ValueError: auto_set_dir(action='x'): use one of 'k'")):
        refused = _run_script(tmp_path, f"""
            from parl_lite.utils import logger
            logger.auto_set_dir(action={action})
            """)
        assert refused.returncode == 1 and error in refused.stderr, refused.stderr
    assert "third" in log.read_text()


@pytest.mark.timeout(120)
def test_summary_writes_to_the_logger_s_folder_or_sets_one(tmp_path):
    result = _run_script(tmp_path, """
        from parl_lite.utils import logger, summary
        logger.set_dir("./exp1")
        summary.add_scalar("train/return", 12.5, 3)
        summary.add_histogram("weights", [1.0, 2.0, 3.0], 3)
        summary.flush()
        """)
    assert result.returncode == 0, result.stderr
    with open(tmp_path / "exp1" / "scalars.csv") as f:
        assert [row[1:] for row in csv.reader(f)][1:] == [["3", "train/return", "12.5"]]
    assert list((tmp_path / "exp1").glob("events.out.tfevents.*"))

    (tmp_path / "train_log" / "my_train").mkdir(parents=True)
    (tmp_path / "train_log" / "my_train" / "notes.txt").write_text("kept")
    result = _run_script(tmp_path, """
        from parl_lite.utils import logger, summary
        summary.add_scalar("loss", 0.5, 1)
        logger.info("logged next to the summary")
        """)
    assert result.returncode == 0, result.stderr
    folder = tmp_path / "train_log" / "my_train"
    assert (folder / "notes.txt").read_text() == "kept"  # PARL's default deletes the folder
    assert list(folder.glob("events.out.tfevents.*")) and (folder / "scalars.csv").exists()
    assert "logged next to the summary" in (folder / "log.log").read_text()


# ---------------------------------------------------------------- CSVLogger
def test_csv_logger_writes_a_header_and_rows_flushed_as_they_come(tmp_path):
    path = tmp_path / "result.csv"
    path.write_text("old content\n")
    csv_logger = CSVLogger(path)
    csv_logger.log_dict({"loss": 1, "reward": 2})
    assert path.read_text().splitlines() == ["loss,reward", "1,2"]  # readable before close
    csv_logger.log_dict({"reward": 4, "loss": 3})  # same keys, another order
    with pytest.raises(ValueError, match=r"keys \['a', 'loss'\] differ from the header's \['loss', 'reward'\]"):
        csv_logger.log_dict({"loss": 5, "a": 6})
    with pytest.raises(TypeError, match="takes a dict, got list"):
        csv_logger.log_dict([("loss", 1)])
    csv_logger.close()
    csv_logger.close()
    assert path.read_text().splitlines() == ["loss,reward", "1,2", "3,4"]
    with CSVLogger(tmp_path / "other.csv") as other:
        other.log_dict({"x": 0.5})
    assert other.output_file.closed


@pytest.mark.timeout(60)
def test_a_log_file_that_is_a_fifo_is_refused_naming_it_without_blocking(tmp_path):
    """logger.set_dir and CSVLogger waited for ever for a reader of the FIFO."""
    script = textwrap.dedent("""
        import os, sys
        from parl_lite.utils import CSVLogger, logger
        os.mkfifo(os.path.join(sys.argv[1], "log.log"))
        os.mkfifo(os.path.join(sys.argv[1], "rows.csv"))
        for make in (lambda: logger.set_dir(sys.argv[1]), lambda: CSVLogger(os.path.join(sys.argv[1], "rows.csv"))):
            try:
                make()
            except FileExistsError as error:
                print(error)
        with CSVLogger(os.devnull) as rows:  # a character device is written as it is
            rows.log_dict({"a": 1})
        print("done")
    """)
    result = subprocess.run([sys.executable, "-c", script, str(tmp_path)], env=CHILD_ENV, capture_output=True, text=True,
                            timeout=50)
    assert result.stdout.splitlines() == [f"cannot write {tmp_path}/log.log: it is a FIFO (named pipe), not a file",
                                          f"cannot write {tmp_path}/rows.csv: it is a FIFO (named pipe), not a file",
                                          "done"], result.stderr


# ---------------------------------------------------------------- machine_info
def test_free_port_is_bindable_and_is_port_available_sees_a_listener():
    port = utils.get_free_tcp_port()
    assert isinstance(port, str) and 1 <= int(port) <= 65535
    with socket.socket() as server:
        server.bind(("127.0.0.1", int(port)))
        assert utils.is_port_available(port)  # bound but not listening: nothing accepts connections
        server.listen()
        assert not utils.is_port_available(port)
        assert not utils.is_port_available(int(port))
        with pytest.raises(ValueError, match=f"every port in {port}-{port} is taken"):
            machine_info.get_port_from_range(int(port), int(port))
    assert utils.is_port_available(port)
    assert machine_info.get_port_from_range(int(port), int(port)) == int(port)
    for bad in (0, 70000, "http"):
        with pytest.raises(ValueError, match="port must be an integer in 1..65535"):
            utils.is_port_available(bad)
    with pytest.raises(ValueError, match="start 9 is after end 5"):
        machine_info.get_port_from_range(9, 5)


def test_memory_is_the_machines_total_and_what_is_not_available_of_it():
    used, total = machine_info.memory_mb()
    pages_mb = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") / 2**20
    assert abs(total - pages_mb) <= 1.0
    assert 0 < used < total


def test_gpu_count_follows_cuda_visible_devices(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0, 1")
    assert machine_info.get_gpu_count() == 2
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "-1")
    assert machine_info.get_gpu_count() == 0
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert machine_info.get_gpu_count() == 0
    assert machine_info.is_gpu_available() is False


def test_ip_address_is_not_loopback():
    import ipaddress

    address = machine_info.get_ip_address()
    assert address is None or not ipaddress.ip_address(address).is_loopback


# ---------------------------------------------------------------- time and window statistics
def test_window_stat_keeps_the_last_values():
    stat = WindowStat(3)
    assert (stat.mean, stat.min, stat.max) == (None, None, None)
    for value in (5, 1, 3, 10):
        stat.add(value)
    assert (stat.mean, stat.min, stat.max, stat.count) == (14 / 3, 1, 10, 4)
    with pytest.raises(ValueError, match="window_size must be positive, got 0"):
        WindowStat(0)


def test_time_stat_times_each_block():
    timer = TimeStat(window_size=2)
    assert timer.mean is None
    for seconds in (0.01, 0.03, 0.02):
        with timer:
            time.sleep(seconds)
    assert timer.min >= 0.02 and timer.max >= 0.03  # the window holds the last two runs
    assert timer.min <= timer.mean <= timer.max


# ---------------------------------------------------------------- schedulers, as PARL's users call them
def test_schedulers_parl_style():
    piecewise = PiecewiseScheduler([(0, 0.1), (3, 0.2), (7, 0.3)])
    assert [piecewise.step() for _ in range(8)] == [0.1, 0.1, 0.2, 0.2, 0.2, 0.2, 0.3, 0.3]
    jump = PiecewiseScheduler([(0, 0.1), (3, 0.2), (7, 0.3)])
    assert jump.step(9) == 0.3  # past two boundaries at once (PARL's moves one boundary per step)
    linear = LinearDecayScheduler(start_value=10, max_steps=10)
    assert linear.step(5) == pytest.approx(5) and linear.step(3) == pytest.approx(2)
    assert linear.step(100) == 0.0
    keyword = LinearDecayScheduler(start_value=1.0, max_steps=4)
    assert keyword.step(step_num=2) == pytest.approx(0.5)  # PARL's PPO example passes step_num=
    assert PiecewiseScheduler([(0, 0.1), (3, 0.2)]).step(step_num=3) == 0.2
    with pytest.raises(ValueError, match="increase strictly"):
        PiecewiseScheduler([(10, 0.1), (1, 0.2)])


# ---------------------------------------------------------------- rl_utils, as PARL's A2C actor calls it
def test_calc_discount_sum_rewards_is_the_reward_to_go():
    returns = calc_discount_sum_rewards([1.0, 0.0, 2.0], 0.5)
    np.testing.assert_allclose(returns, [1.5, 1.0, 2.0])
    np.testing.assert_allclose(calc_discount_sum_rewards(np.ones(4), 1.0), [4, 3, 2, 1])


def test_calc_gae_matches_the_definition_and_takes_parls_argument_types():
    rewards, values, next_value, gamma, lam = [1.0, 0.0, 1.0, -1.0], [0.5, 0.2, 0.1, 0.4], 0.3, 0.9, 0.8
    deltas = np.array(rewards) + gamma * np.array(values[1:] + [next_value]) - np.array(values)
    expected = [sum((gamma * lam) ** k * deltas[t + k] for k in range(len(deltas) - t)) for t in range(len(deltas))]
    np.testing.assert_allclose(calc_gae(rewards, values, next_value, gamma, lam), expected, rtol=1e-6)
    # PARL's A2C actor: values a list of float32 scalars, next_value agent.value(obs[None]) of shape [1]
    advantages = calc_gae(rewards, [np.float32(v) for v in values], np.array([next_value], np.float32), gamma, lam)
    np.testing.assert_allclose(advantages, expected, rtol=1e-6)
    np.testing.assert_allclose(calc_gae([1.0, 2.0], [0.0, 0.0], 0, 0.5, 1.0), calc_discount_sum_rewards([1, 2], 0.5))
    with pytest.raises(ValueError, match="next_value must be one value"):
        calc_gae(rewards, values, [0.1, 0.2], gamma, lam)
    with pytest.raises(ValueError, match="shapes differ"):
        calc_gae(rewards[:3], values, next_value, gamma, lam)
