"""The local pool against faults and hostile neighbours (issue 14, remote items).

The hostile local user is played by a process running as another user (``nobody``) when the tests run
as root, else by this user: it creates names in ``/dev/shm`` where the pool would put its own.
"""
import glob
import shlex
import json
import os
import signal
import stat
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import parl_lite
from parl_lite import remote_class
from parl_lite.remote.status import find_pools, read_status

from remote_actors import Counter
from remote_helpers import assert_nothing_left, wait_for_exit, wait_for_file
from remote_hostile_actors import Dynamic, Keeper, Misbehaving

pytestmark = pytest.mark.timeout(90)

OTHER_UID = 65534  # nobody
AS_ROOT = os.geteuid() == 0


def as_other_user(script: str) -> None:
    """Run shell ``script`` as another local user (as this user when not root)."""
    subprocess.run(["/bin/sh", "-ec", script], check=True, timeout=30,
                   user=OTHER_UID if AS_ROOT else None, cwd="/")


def hostile_files(paths, kind: str = "garbage") -> None:
    """Another user creates ``paths``: files of garbage, FIFOs or directories."""
    make = {"garbage": "printf 'not yours%.0s' 1 2 3 4 5 6 7 8 9 10 > {}", "fifo": "mkfifo -m 666 {}",
            "dir": "mkdir {}", "empty": ": > {}"}[kind]
    as_other_user("\n".join(make.format(shlex.quote(path)) for path in paths))


def remove_paths(paths) -> None:
    for path in paths:
        if os.path.isdir(path) and not os.path.islink(path):
            os.rmdir(path)
        elif os.path.lexists(path):
            os.unlink(path)


# --- item 2: the housekeeper survives its own errors --------------------------------------------
def test_housekeeping_goes_on_with_a_status_too_large_for_the_old_board(local_pool):
    huge_name = "L" * 300_000  # over the 256 KiB the status board once had
    Huge = remote_class(type(huge_name, (Counter,), {}))
    huge = Huge(1)
    assert huge.add(1) == 2
    Limited = remote_class(Counter, max_memory=150)
    limited = Limited()
    with pytest.raises(parl_lite.MemoryLimitError):
        limited.allocate(400)  # enforced only while the housekeeper lives
    published = _wait_for_publication(os.getpid())
    assert any(worker["actor"] == huge_name for worker in published["workers"])
    huge.close()


def _wait_for_publication(pid: int, after: float = None) -> dict:
    """Wait until the pool of ``pid`` has published a status generated after ``after`` (now)."""
    after = time.time() if after is None else after
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            status = read_status(pid)
        except (FileNotFoundError, RuntimeError):
            status = None
        if status is not None and status.get("generated_at", 0) > after:
            return status
        time.sleep(0.02)
    raise AssertionError(f"pool {pid} published no status after {after}")


# --- item 3: names taken in advance by another user ---------------------------------------------
def test_names_taken_by_another_user_do_not_deny_service(tmp_path):
    parl_lite.shutdown()
    # the status name the old board derived from our pid
    squatted = [f"/dev/shm/sm_parl_lite_status_{os.getpid()}", f"/dev/shm/parl_lite_status_{os.getpid()}"]
    hostile_files(squatted)
    taken = list(squatted)
    try:
        pool = parl_lite.connect(num_workers=2)
        actor = remote_class(Keeper)()
        worker_pids = sorted({worker["pid"] for worker in pool.status()["workers"]} | {actor.pid()})
        # every segment name the pool could use next, as the visible prefix allows guessing them
        guesses = [f"/dev/shm/{pool.session_prefix}{tag}{pid}_{n}"
                   for pid in worker_pids for tag in "dw" for n in range(12)]
        hostile_files(guesses[::3])
        hostile_files(guesses[1::3], "fifo")
        hostile_files(guesses[2::3], "dir")
        taken += guesses
        for size in (1, 3, 9, 1, 3, 9):
            array = np.full(size * 2**20, size, dtype=np.uint8)
            np.testing.assert_array_equal(actor.echo(array), array)
        assert actor.keep_and_sum(np.ones(2**20)) == 2**20
        status = _wait_for_publication(os.getpid())
        assert status["pid"] == os.getpid()
        zygote = pool.status()["zygote_pid"]
        parl_lite.shutdown()  # must not raise, must not remove what others own
        assert_nothing_left(worker_pids + [zygote], pool.session_prefix + "d_")
        left = [path for path in glob.glob(f"/dev/shm/{pool.session_prefix}*") if path not in taken]
        assert left == []
        for path in taken:  # untouched
            assert os.path.lexists(path)
        with open(squatted[0], "rb") as squatted_file:
            assert squatted_file.read() == b"not yours" * 10
    finally:
        parl_lite.shutdown()
        remove_paths(taken)


# --- item 4: SystemExit and KeyboardInterrupt in a method ---------------------------------------
def test_sys_exit_and_keyboard_interrupt_in_a_method_are_reported_and_the_actor_lives(local_pool):
    actor = remote_class(Misbehaving)()
    pid = actor.pid()
    with pytest.raises(parl_lite.RemoteError, match="SystemExit: fatal") as caught:
        actor.exit_with("fatal")
    assert not isinstance(caught.value, SystemExit)
    with pytest.raises(parl_lite.RemoteError, match="KeyboardInterrupt: stop it"):
        actor.interrupt()
    assert actor.add(2, 3) == 5 and actor.pid() == pid


# --- item 5: an actor that forks ---------------------------------------------------------------
def test_death_of_an_actor_whose_child_holds_the_socket_is_seen_at_once(local_pool, tmp_path):
    actor = remote_class(Misbehaving, wait=False)()
    marker = tmp_path / "child"
    future = actor.fork_child(str(marker), True)
    with pytest.raises(parl_lite.ActorDiedError):
        future.result(timeout=5)  # the child keeps the socket open for 60 s
    child = int(marker.read_text())
    assert wait_for_exit(child, timeout=5), "the actor's child outlived the actor"


def test_shutdown_ends_the_children_of_actors(tmp_path):
    parl_lite.shutdown()
    parl_lite.connect(num_workers=1)
    actor = remote_class(Misbehaving)()
    marker = tmp_path / "child"
    child = actor.fork_child(str(marker), False)
    assert int(marker.read_text()) == child
    parl_lite.shutdown()
    assert wait_for_exit(child, timeout=5), "the actor's child survived shutdown()"


# --- item 6: parl-lite status with dead pools and bad entries -----------------------------------
POOL_SCRIPT = textwrap.dedent("""
    import json, sys, parl_lite
    from parl_lite import remote_class
    from evokit_py.noise import NoiseTable

    class A:
        def pid(self):
            import os
            return os.getpid()

    pool = parl_lite.connect(num_workers=1)
    a = remote_class(A)()
    table = NoiseTable.create(seed=1, size=1000)  # a segment of this process outside the pool
    print(json.dumps({"prefix": pool.session_prefix, "zygote": pool.status()["zygote_pid"],
                      "actor": a.pid()}), flush=True)
    sys.stdin.readline()
""")


def _start_pool_script(tmp_path) -> subprocess.Popen:
    script = tmp_path / "pool_script.py"
    script.write_text(POOL_SCRIPT)
    return subprocess.Popen([sys.executable, str(script)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True, cwd=tmp_path, start_new_session=True)


def _entries_of(pid: int) -> list:
    return [path for path in glob.glob("/dev/shm/*") if f"_{pid}_" in path or path.endswith(f"_{pid}")]


@pytest.mark.parametrize("kill_zygote_too", [False, True])
def test_a_killed_pool_is_not_listed_and_leaves_nothing(tmp_path, kill_zygote_too):
    process = _start_pool_script(tmp_path)
    try:
        info = json.loads(process.stdout.readline())
        assert process.pid in find_pools()
        if kill_zygote_too:
            os.kill(info["zygote"], signal.SIGKILL)
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)
        assert wait_for_exit(info["zygote"], timeout=10)
        assert wait_for_exit(info["actor"], timeout=10)
        assert process.pid not in find_pools()
        assert _entries_of(process.pid) == []
    finally:
        if process.poll() is None:
            process.kill()
        process.stdout.close()
        process.stdin.close()


def _spawn_with_pid(pid: int, command: list[str]) -> subprocess.Popen | None:
    """``command`` started as process ``pid`` (free), through the kernel's ``ns_last_pid``, as CRIU
    does; None if another process took the pid first 20 times."""
    for _ in range(20):
        with open("/proc/sys/kernel/ns_last_pid", "w") as last_pid:
            last_pid.write(str(pid - 1))
        process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        if process.pid == pid:
            return process
        process.kill()
        process.wait()
    return None


@pytest.mark.timeout(60)
@pytest.mark.skipif(not os.access("/proc/sys/kernel/ns_last_pid", os.W_OK), reason="needs a writable ns_last_pid")
def test_a_dead_pools_zygote_leaves_alone_the_segments_of_the_process_that_reuses_its_pid(tmp_path):
    """The zygote of a pool whose process died sweeps that process's other segments (its noise
    table) by pid. With many processes started, the pid can name a new process by then: its live
    segments (another run's noise table) must not be swept (they were: that run died)."""
    script = tmp_path / "pool_script.py"
    script.write_text(POOL_SCRIPT)
    # not a session leader: a child of it that outlives it (its resource tracker) would hold its pid as
    # a session id where nothing reaps orphans
    process = subprocess.Popen([sys.executable, str(script)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               text=True, cwd=tmp_path)
    reuser = info = None
    try:
        info = json.loads(process.stdout.readline())
        os.kill(info["zygote"], signal.SIGSTOP)  # the sweep waits until the pid is taken again
        process.kill()
        process.wait(timeout=10)
        reuser = _spawn_with_pid(process.pid, [sys.executable, "-c", textwrap.dedent("""
            import os, sys
            path = f"/dev/shm/parl_lite_{os.getpid()}_noise_reused"
            open(path, "w").close()
            print(path, flush=True)
            sys.stdin.readline()
            os.unlink(path)
        """)])
        if reuser is None:
            pytest.skip(f"pid {process.pid} was taken by another process each time")
        segment = reuser.stdout.readline().strip()
        os.kill(info["zygote"], signal.SIGCONT)
        assert wait_for_exit(info["zygote"], timeout=20)
        assert os.path.exists(segment), "the zygote swept the segment of the process now holding its pool's pid"
        reuser.communicate("\n", timeout=10)
        assert not os.path.exists(segment)
        find_pools()  # parl-lite status sweeps what a dead pid left (the dead pool's noise table)
        assert _entries_of(process.pid) == []
    finally:
        for running in (process, reuser):
            if running is not None and running.poll() is None:
                running.kill()
                running.wait()
        if info is not None and not wait_for_exit(info["zygote"], timeout=0):
            os.kill(info["zygote"], signal.SIGCONT)  # it ends with its pool
            assert wait_for_exit(info["zygote"], timeout=20)
        process.stdout.close()
        process.stdin.close()


def test_status_skips_bad_entries_and_never_hangs(local_pool, tmp_path):
    fake_pid = 999_999_000 + os.getpid() % 1000  # beyond pid_max: never a live process
    names = []
    for scheme in (f"/dev/shm/sm_parl_lite_status_{{}}", f"/dev/shm/parl_lite_status_{{}}_{'0' * 16}"):
        names += [scheme.format(fake_pid + i) for i in range(6)]
    hostile_files(names[0::6])  # garbage
    hostile_files([names[1], names[7]], "empty")
    hostile_files(names[2::6], "dir")
    hostile_files(names[3::6], "fifo")
    as_other_user("\n".join(f"echo '{{\"body\": \"{{}}\", \"crc\": 1}}' > {path}" for path in names[4::6]))
    with open(names[5], "w") as own, open(names[11], "w") as own_new:  # ours, wrong shape
        own.write('{"pid": "x"}')
        own_new.write('{"pid": "x"}')
    try:
        _wait_for_publication(os.getpid())
        result = subprocess.run([sys.executable, "-m", "parl_lite.cli", "status", "--json"],
                                capture_output=True, text=True, timeout=30)
        assert result.returncode == 0, result.stderr
        pools = json.loads(result.stdout)["pools"]
        listed = [entry["pid"] for entry in pools]  # other pools of this user (a cluster node's) may run too
        assert os.getpid() in listed and not any(fake_pid <= pid < fake_pid + 6 for pid in listed)
        assert "note: skipped" in result.stderr  # the other user's entries, reported
        others = names[0:5] + names[6:11]
        assert all(os.path.lexists(path) for path in others)  # and left alone
        assert not os.path.lexists(names[11])  # ours, of a dead pid: swept
        table = subprocess.run([sys.executable, "-m", "parl_lite.cli", "status"],
                               capture_output=True, text=True, timeout=30)
        assert table.returncode == 0 and f"pool of process {os.getpid()}" in table.stdout
    finally:
        remove_paths(names)


def test_status_is_readable_as_soon_as_connect_returns():
    for _ in range(5):
        parl_lite.shutdown()
        pool = parl_lite.connect(num_workers=1)
        assert read_status(os.getpid())["pid"] == os.getpid()
        assert os.getpid() in find_pools()
        parl_lite.shutdown()
        assert os.getpid() not in find_pools()
        del pool


# --- item 13: methods supplied by __getattr__ ---------------------------------------------------
def test_methods_from_getattr_run_in_the_actor(local_pool):
    actor = remote_class(Dynamic)()
    name, args, pid = actor.do_work(1, 2)
    assert (name, args) == ("do_work", (1, 2))
    assert pid == actor.pid() != os.getpid()
    assert actor.calls == 1  # the actor's state changed, not a local copy's
    with pytest.raises(AttributeError, match="missing"):
        actor.missing()


# --- item 14: max_memory counts the actor's own memory ------------------------------------------
def test_memory_limit_does_not_count_shared_pages_of_arguments(local_pool):
    Limited = remote_class(Keeper, max_memory=150)
    actor = Limited()
    array = np.ones(500 * 2**20 // 8)  # 500 MB, mapped and read by the actor
    assert actor.keep_and_sum(array) == array.size
    del array
    before = time.time()
    status = _wait_for_publication(os.getpid(), before)  # a housekeeping pass checked memory
    _wait_for_publication(os.getpid(), status["generated_at"])
    assert actor.pid() > 0  # still alive
    mine = [w for w in local_pool.status()["workers"] if w["actor"] == "Keeper"]
    assert mine and mine[0]["rss_mb"] < 150


# --- item 15: smaller remote defects ------------------------------------------------------------
def test_remote_os_errors_keep_their_filename_and_unicode_errors_their_message(local_pool, tmp_path):
    actor = remote_class(Misbehaving)()
    missing = str(tmp_path / "no_such_file.txt")
    with pytest.raises(FileNotFoundError) as caught:
        actor.open_missing(missing)
    assert caught.value.filename == missing and caught.value.errno == 2
    assert missing in str(caught.value)
    with pytest.raises(UnicodeDecodeError) as decoding:
        actor.decode_bad()
    assert "can't decode byte 0xff in position 2" in str(decoding.value)
    assert decoding.value.start == 2


@pytest.mark.parametrize("bad", ["abc", None.__class__, float("nan"), True, -1])
def test_max_memory_of_the_wrong_type_is_named(bad):
    with pytest.raises((TypeError, ValueError), match="max_memory"):
        remote_class(Counter, max_memory=bad)


def test_an_idle_pool_keeps_a_bounded_amount_of_free_shared_memory(local_pool):
    from parl_lite.remote.shm import session_segments

    actor = remote_class(Counter)()
    for megabytes in (8, 20, 48, 100, 8, 20, 48, 100):
        result = actor.echo(np.ones(megabytes * 2**20, dtype=np.uint8))
        assert result.nbytes == megabytes * 2**20
        del result

    def free_bytes() -> int:
        total = 0
        for name in session_segments(local_pool.session_prefix):
            try:
                total += os.stat(f"/dev/shm/{name}").st_size
            except FileNotFoundError:
                pass
        return total

    deadline = time.monotonic() + 20
    while free_bytes() > 80 * 2**20 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert free_bytes() <= 80 * 2**20  # at most the caller's reserve once idle


SECOND_CTRL_C_SCRIPT = textwrap.dedent("""
    import os, sys, time, parl_lite
    from parl_lite import remote_class

    class Slow:
        def close(self):
            time.sleep(30)  # shutdown waits for this: the second Ctrl-C arrives meanwhile
        def ready(self):
            return os.getpid()

    pool = parl_lite.connect(num_workers=1)
    slow = remote_class(Slow)()
    ready = f'{pool.session_prefix} {pool.status()["zygote_pid"]} {slow.ready()}'
    try:
        print(ready, flush=True)  # inside the try: the first Ctrl-C may follow at once
        time.sleep(60)
    except KeyboardInterrupt:
        print("first", flush=True)
        slow.close()
""")


def test_a_second_ctrl_c_during_cleanup_exits_with_130_and_leaves_nothing(tmp_path):
    script = tmp_path / "ctrl_c.py"
    script.write_text(SECOND_CTRL_C_SCRIPT)
    process = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, cwd=tmp_path)
    try:
        prefix, zygote, actor = process.stdout.readline().split()
        process.send_signal(signal.SIGINT)
        assert process.stdout.readline() == "first\n"
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=20)
        assert process.returncode in (130, -signal.SIGINT), err
        assert "Exception ignored" not in err, err
        assert_nothing_left([int(zygote), int(actor)], prefix)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()


CTRL_C_STORM_SCRIPT = textwrap.dedent("""
    import signal, threading, time, parl_lite
    from parl_lite import remote_class

    class Echo:
        def echo(self, x):
            return x

    pool = parl_lite.connect(num_workers=1)
    echo = remote_class(Echo)()
    print(pool.session_prefix, pool.status()["zygote_pid"], flush=True)
    main = threading.get_ident()

    def storm():  # Ctrl-C after Ctrl-C: through the calls, the pool's shutdown and the exit
        while True:
            signal.pthread_kill(main, signal.SIGINT)
            time.sleep(0.0002)

    threading.Thread(target=storm, daemon=True).start()
    for _ in range(100000):
        try:
            echo.echo(1)
        except KeyboardInterrupt:
            pass
""")


@pytest.mark.timeout(120)
@pytest.mark.parametrize("run", range(5))  # where the interrupts land differs from run to run
def test_ctrl_c_after_ctrl_c_through_the_shutdown_leaves_nothing(tmp_path, run):
    """However the interrupts cut the shutdown short, the zygote (not killed) sweeps the session's
    segments and the pool's status file once the owner is gone."""
    script = tmp_path / "storm.py"
    script.write_text(CTRL_C_STORM_SCRIPT)
    process = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, cwd=tmp_path)
    try:
        prefix, zygote = process.stdout.readline().split()
        process.communicate(timeout=60)
        assert_nothing_left([int(zygote)], prefix)
        assert glob.glob(f"/dev/shm/parl_lite_status_{process.pid}_*") == []
    finally:
        if process.poll() is None:
            process.kill()


# --- speed of large arrays: what is handed back without a copy must still be a value -------------
def test_a_returned_argument_never_changes_under_the_caller(local_pool):
    actor = remote_class(Keeper)()
    array = np.arange(2**20, dtype=np.float64)
    kept = actor.keep_and_return(array)  # the actor still views it: copied back
    actor.scale_kept(2.0)
    np.testing.assert_array_equal(kept, array)
    echoed = actor.echo(array)  # nothing in the actor views it: handed back, no copy
    echoed *= 3.0
    np.testing.assert_array_equal(actor.echo(array), array)
    np.testing.assert_array_equal(echoed, array * 3.0)
    np.testing.assert_array_equal(kept, array)
    from parl_lite.remote.shm import session_segments

    worker_segments = [name for name in session_segments(local_pool.session_prefix) if f"w{actor.pid()}_" in name]
    assert len(worker_segments) == 1  # the copy of the kept argument, none for the echoes
