"""The cluster's control plane at scale: N real node agents on this machine, one run, one JSON line.

    python scripts/bench/bench_cluster_scale.py --nodes 100 [--cpus 4] [--actors 500] [--threads 8]

Starts a master (with its web monitor) and ``--nodes`` node agents on 127.0.0.1 (the module
``parl-lite start`` / ``connect`` run), each node in a folder of its own with ``--cpus`` actor
slots, all in a temporary folder (under ``--root``; its filesystem is reported as ``root_filesystem``,
with ``(no journal)`` for an ext4 without one) with its own token, then measures:
- ``shipped_files_write_ms``: before the nodes start, the CPU to write the files a session ships
  into a new folder there (median of 10): what the disk charges each first-wave session;
- ``placements_per_s``: ``--actors`` actors created (placement, the node's session, the actor's
  connection, its worker, ``__init__``) from ``--threads`` threads of one client, in waves of at
  most the cluster's CPUs (the first wave the remainder, so that the last is whole), each wave
  closed, its CPUs back and the nodes' spare actor hosts rebuilt before the next (not timed),
  also for the first wave alone (it opens
  the client's session with each node, shipping the script's folder) and the later ones;
  ``create_ms_p50`` / ``_p99`` for one creation; ``cpu_ms_per_placement_*``: the CPU time the
  client, the master, the node agents, their pools (zygotes and workers) and the whole machine
  (every process and the kernel) used meanwhile, per placement, and split the same way for the
  first wave and the later ones (``cpu_ms_per_placement_first_wave`` / ``_later_waves``: the first
  wave also opens the client's sessions, most of its extra cost); ``pools_cpu_ms_per_spare_host``:
  the pools' CPU between waves per spare host built in place of a closed actor's (the zygote's fork,
  the host's start and warm-up; not the closed host's end), which the placement rate leaves out;
- with no client, then with the last wave's actors alive, for ``--quiet`` seconds: the bytes the
  master's connections received per node and second (``ss -ti``: the kernel's count), and the CPU
  per second of the master, of the client and of one node (agent and pool, the mean);
- the master's CPU seconds over the run, its peak resident memory and threads; a node agent's
  resident memory (median), its pool's processes and their private memory, shared memory per node;
- the status API's latency (``{"type": "status"}`` on an observer connection) and the monitor's
  (``/api/status`` and the page), median of 20, with the last wave's actors alive, and the size of
  the status;
- the time until the master counts one node less after a node is SIGKILLed, and after one is
  SIGSTOPped (asked every 10 ms with the ``capacity`` request).

Every process gets ``PARL_LITE_EXIT_WITH`` (they stop when this script ends, however it ends); the
script kills what is left, removes the folder and any shared-memory segment of the nodes, and
reports what it had to clean (``leftover_*``), also after a failure or at ``--timeout``. The
machine may be shared: the 1-minute load average is printed at the start and the end.
"""
import argparse
import concurrent.futures
import glob
import http.client
import json
import os
import re
import secrets
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import parl_lite
from parl_lite.ext.cluster import wire
from parl_lite.ext.cluster.shipping import DEFAULT_LIMIT_MB, collect_files, write_files

READY_TIMEOUT = 300.0  # seconds for every node to start (N Python processes on a few cores)
DETECTION_TIMEOUT = 30.0  # seconds a dead node may take to be declared dead before the bench gives up
LATENCY_SAMPLES = 20


class Noop:
    """The actor: nothing to build, nothing to run (placement is what is measured)."""

    def ping(self) -> int:
        return 1


RemoteNoop = parl_lite.remote_class(Noop)


def _spawn(role: str, arguments: list[str], folder: Path, token_file: Path, env: dict) -> tuple[subprocess.Popen, Path]:
    ready = folder / f"{role}.ready"
    with open(folder / f"{role}.log", "wb") as log:
        process = subprocess.Popen([sys.executable, "-m", f"parl_lite.ext.cluster.{role}", *arguments,
                                    "--ready-file", str(ready), "--token-file", str(token_file)],
                                   cwd=folder, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
    return process, ready


def _wait_ready(process: subprocess.Popen, ready: Path, deadline: float) -> dict:
    while not ready.exists():
        if process.poll() is not None:
            log = ready.with_suffix(".log").read_text(errors="replace").splitlines()[-5:]
            raise RuntimeError(f"{ready.stem} {process.pid} exited with {process.returncode}: {log}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"{ready.parent.name} did not start in time")
        time.sleep(0.02)
    return json.loads(ready.read_text())


def _cpu_seconds(pid: int, own: bool = True, children: bool = False) -> float:
    """CPU seconds of process ``pid``, its own and/or its reaped children's; 0 once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    ticks = sum(int(value) for value in fields[11 if own else 13:15 if children else 13])
    return ticks / os.sysconf("SC_CLK_TCK")


def _run_seconds(pid: int, reaped: bool = True) -> float:
    """Seconds process ``pid``'s live threads have run (``schedstat``: nanoseconds, where the clock
    ticks of ``stat`` would round a short-lived worker's share down to 0), with (``reaped``) its
    reaped children's CPU, in clock ticks; 0 once it is gone."""
    total = 0
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return 0.0
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/schedstat") as schedstat:
                total += int(schedstat.read().split()[0])
        except (OSError, ValueError, IndexError):
            pass
    return total / 1e9 + (_cpu_seconds(pid, own=False, children=True) if reaped else 0.0)


def _machine_busy_seconds() -> float:
    """CPU seconds this machine has been busy (every core, every process and the kernel)."""
    with open("/proc/stat") as stat:
        fields = [int(value) for value in stat.readline().split()[1:]]
    return (sum(fields) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")  # all but idle and iowait


def _status_field(pid: int, name: str) -> float:
    """A ``kB`` field of /proc/PID/status in MB (VmRSS, VmHWM), or a count (Threads)."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith(name + ":"):
                value = int(line.split()[1])
                return value / 1024 if line.rstrip().endswith("kB") else value
    raise KeyError(name)


def _bytes_received(port: int) -> dict[str, int]:
    """Bytes received so far on each established TCP connection to ``port`` of this machine, by
    peer (``ss -ti``: the kernel's count, whoever reads them)."""
    listing = subprocess.run(["ss", "-tinH", "state", "established", f"( sport = :{port} )"], capture_output=True,
                             text=True, timeout=30, check=True).stdout
    received, peer = {}, None
    for line in listing.splitlines():
        fields = line.split()
        if len(fields) >= 4 and fields[0].isdigit():
            peer = fields[3]
            continue
        found = re.search(r"bytes_received:(\d+)", line)
        if found and peer:
            received[peer] = int(found.group(1))
    return received


def _descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    parent = int(stat.read().rsplit(")", 1)[1].split()[1])
            except OSError:
                continue
            children.setdefault(parent, []).append(int(entry))
    found, queue = [], [pid]
    while queue:
        for child in children.get(queue.pop(), []):
            found.append(child)
            queue.append(child)
    return found


def _per_placement(wave_cpu: list[dict[str, float]], waves: list[int]) -> dict[str, float]:
    """The CPU milliseconds each part used per placement over these waves."""
    return {part: round(sum(used[part] for used in wave_cpu) / sum(waves) * 1000, 3) for part in wave_cpu[0]}


def _descendants_of_sessions(pids: list[int]) -> list[int]:
    """Every process whose command line names the pool session of one of ``pids`` (the zygotes,
    which start a session of their own, and their workers)."""
    marks = [f"parl_lite_{pid}_".encode() for pid in pids]
    found = []
    for path in glob.glob("/proc/[0-9]*/cmdline"):
        try:
            with open(path, "rb") as cmdline:
                text = cmdline.read()
        except OSError:
            continue
        if any(mark in text for mark in marks):
            found.append(int(path.split("/")[2]))
    return found


def _median_ms(function, samples: int = LATENCY_SAMPLES) -> float:
    times = []
    for _ in range(samples):
        started = time.perf_counter()
        function()
        times.append(time.perf_counter() - started)
    return round(statistics.median(times) * 1000, 2)


class Observer:
    """An observer connection to the master (what ``parl-lite status`` opens)."""

    def __init__(self, address: str, token: bytes) -> None:
        self.framed, _ = wire.open_connection(address, token, "observer")

    def ask(self, request: dict) -> dict:
        self.framed.send_json(request)
        return self.framed.receive_json()

    def status(self) -> dict:
        return self.ask({"type": "status"})["status"]

    def nodes_alive(self) -> int:
        return self.ask({"type": "capacity"})["capacity"]["nodes_alive"]

    def cpus_used(self) -> int:
        capacity = self.ask({"type": "capacity"})["capacity"]
        return capacity["cpus_total"] - capacity["cpus_free"]


def _http_get(port: int, path: str) -> None:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        response.read()
        if response.status != 200:
            raise RuntimeError(f"GET {path}: {response.status}")
    finally:
        connection.close()


def _wait_for(predicate, timeout: float, what: str, poll: float = 0.01) -> float:
    """Seconds until ``predicate()`` holds, polling every ``poll`` s."""
    started = time.monotonic()
    while not predicate():
        if time.monotonic() - started > timeout:
            raise TimeoutError(f"{what} did not happen within {timeout:g} s")
        time.sleep(poll)
    return time.monotonic() - started


class Run:
    """The cluster of one run and everything it started (see :meth:`cleanup`)."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.root = Path(tempfile.mkdtemp(prefix="parl_lite_scale_", dir=args.root))
        self.token_file = self.root / "token"
        self.token_file.write_text(secrets.token_hex(32) + "\n")
        self.token_file.chmod(0o600)
        self.token = self.token_file.read_text().strip().encode()
        self.env = {key: value for key, value in os.environ.items() if key != "PARL_LITE_TOKEN"}
        self.env.update(PARL_LITE_HOME=str(self.root / "home"), PARL_LITE_EXIT_WITH=str(os.getpid()))
        self.master: subprocess.Popen | None = None
        self.nodes: list[subprocess.Popen] = []
        self.figures: dict[str, Any] = {}

    def start(self) -> None:
        deadline = time.monotonic() + READY_TIMEOUT
        (self.root / "master").mkdir()
        self.master, ready = _spawn("master", ["--port", "0", "--monitor-port", "0"], self.root / "master",
                                    self.token_file, self.env)
        info = _wait_ready(self.master, ready, deadline)
        self.address, self.monitor_port = info["address"], int(info["monitor"].rstrip("/").rsplit(":", 1)[1])
        started = time.monotonic()
        readies = []
        for index in range(self.args.nodes):
            folder = self.root / f"node-{index:04d}"
            folder.mkdir()
            process, ready = _spawn("node", ["--address", self.address, "--cpus", str(self.args.cpus)], folder,
                                    self.token_file, self.env)
            self.nodes.append(process)
            readies.append(ready)
        for process, ready in zip(self.nodes, readies, strict=True):
            _wait_ready(process, ready, deadline)
        self.figures["start_nodes_s"] = round(time.monotonic() - started, 2)

    def measure(self) -> None:
        args, figures, master = self.args, self.figures, self.master
        assert master is not None
        observer = Observer(self.address, self.token)
        _wait_for(lambda: observer.nodes_alive() == args.nodes, 60, "every node joining", poll=0.2)
        cpu_start = _cpu_seconds(master.pid)
        figures.update(self._heartbeats("idle"))
        parl_lite.connect(self.address, token_file=str(self.token_file), placement_timeout=60)
        actors = self._place(observer)
        _wait_for(lambda: sum(a["state"] == "alive" for a in observer.status()["actors"]) >= len(actors), 30,
                  "the actors being reported", 0.1)
        figures["status_ms"] = _median_ms(observer.status)
        figures["monitor_status_ms"] = _median_ms(lambda: _http_get(self.monitor_port, "/api/status"))
        figures["monitor_page_ms"] = _median_ms(lambda: _http_get(self.monitor_port, "/"))
        figures["status_bytes"] = len(json.dumps(observer.status()))
        figures.update(self._heartbeats("with_actors"))
        for actor in actors:
            actor.close()
        actors = []
        parl_lite.shutdown()
        _wait_for(lambda: observer.cpus_used() == 0, 60, "the last wave's CPUs coming back", 0.05)
        figures["master_cpu_s"] = round(_cpu_seconds(master.pid) - cpu_start, 2)
        figures["master_peak_rss_mb"] = round(_status_field(master.pid, "VmHWM"), 1)
        figures["master_threads"] = int(_status_field(master.pid, "Threads"))
        agents = [node.pid for node in self.nodes]
        figures["node_agent_rss_mb"] = round(statistics.median(_status_field(pid, "VmRSS") for pid in agents), 1)
        pool_processes = _descendants_of_sessions(agents[:1])
        figures["node_pool_processes"] = len(pool_processes)
        figures["node_pool_private_mb"] = round(sum(_private_mb(pid) for pid in pool_processes), 1)
        figures["shm_mb_per_node"] = round(_shm_mb(agents) / len(agents), 2)
        figures["killed_node_dead_s"] = self._detection(observer, signal.SIGKILL)
        figures["stopped_node_dead_s"] = self._detection(observer, signal.SIGSTOP)
        observer.framed.close()

    def _place(self, observer: Observer) -> list:
        """Create ``--actors`` actors in waves of at most the cluster's CPUs (the first wave the
        remainder, so that the last is whole), closing each wave before the next; the last wave's
        actors are returned alive. Records the rate and where its CPU time went."""
        args, figures = self.args, self.figures
        capacity = args.nodes * args.cpus
        waves = [args.actors % capacity] if args.actors % capacity else []
        waves += [capacity] * (args.actors // capacity)
        agents = [node.pid for node in self.nodes]
        times, actors = [], []
        wave_seconds, wave_cpu = [], []  # each wave's duration, and the CPU each part used meanwhile
        settled = args.nodes * (1 + args.cpus)  # each node's zygote and a spare actor host per CPU

        def create(_):
            started = time.perf_counter()
            actor = RemoteNoop()
            return actor, time.perf_counter() - started

        spares, spare_seconds = 0, 0.0  # hosts built again between waves, and the pools' CPU for them
        with concurrent.futures.ThreadPoolExecutor(args.threads) as threads:
            for wave in waves:
                closing = {pid: _run_seconds(pid, reaped=False) for pid in _descendants_of_sessions(agents)}
                for actor in actors:  # the previous wave: closed, its CPUs back, its hosts rebuilt
                    actor.close()
                actors = []
                _wait_for(lambda: observer.cpus_used() == 0, 60, "the closed actors' CPUs coming back", 0.05)
                _wait_for(lambda: len(_descendants_of_sessions(agents)) == settled, 60,
                          "the nodes building a spare actor host for each free CPU", 0.05)
                pools = _descendants_of_sessions(agents)
                built = set(pools) - closing.keys()
                if built:  # the zygotes' forks and the new hosts' own start
                    spares += len(built)
                    spare_seconds += sum(_run_seconds(pid, reaped=False) - closing.get(pid, 0.0) for pid in pools)
                before = self._cpu(agents, pools)
                started = time.perf_counter()
                results = list(threads.map(create, range(wave)))
                wave_seconds.append(time.perf_counter() - started)
                after = self._cpu(agents, _descendants_of_sessions(agents))
                wave_cpu.append({part: after[part] - before[part] for part in before})
                actors = [actor for actor, _ in results]
                times += [elapsed for _, elapsed in results]
        assert all(actor.ping() == 1 for actor in actors)
        times.sort()
        figures["placements_per_s"] = round(len(times) / sum(wave_seconds), 1)
        # the first wave also opens the client's session with each node it reaches (files shipped)
        figures["placements_per_s_first_wave"] = round(waves[0] / wave_seconds[0], 1)
        if len(waves) > 1:
            figures["placements_per_s_later_waves"] = round(sum(waves[1:]) / sum(wave_seconds[1:]), 1)
        figures["create_ms_p50"] = round(times[len(times) // 2] * 1000, 2)
        figures["create_ms_p99"] = round(times[int(len(times) * 0.99)] * 1000, 2)
        for part, used in _per_placement(wave_cpu, waves).items():
            figures[f"cpu_ms_per_placement_{part}"] = used
        figures["cpu_ms_per_placement_first_wave"] = _per_placement(wave_cpu[:1], waves[:1])
        if len(waves) > 1:
            figures["cpu_ms_per_placement_later_waves"] = _per_placement(wave_cpu[1:], waves[1:])
        if spares:
            figures["pools_cpu_ms_per_spare_host"] = round(spare_seconds / spares * 1000, 3)
        figures["actors_alive_at_latency"] = len(actors)
        return actors

    def _cpu(self, agents: list[int], pools: list[int]) -> dict[str, float]:
        """CPU seconds used so far by this process, the master, the node agents and their pools
        (zygotes with the workers they reaped, and the live workers)."""
        assert self.master is not None
        return {"client": time.process_time(), "master": _cpu_seconds(self.master.pid),
                "nodes": sum(_cpu_seconds(pid) for pid in agents),
                "pools": sum(_run_seconds(pid) for pid in pools), "machine": _machine_busy_seconds()}

    def _heartbeats(self, label: str) -> dict[str, float]:
        """Over ``--quiet`` seconds: the bytes the master's connections received per node and second,
        and the CPU per second of the master, of this client, and of a node (its agent and its pool,
        the mean over the nodes)."""
        assert self.master is not None
        seconds, port = self.args.quiet, int(self.address.rsplit(":", 1)[1])
        agents = [node.pid for node in self.nodes]
        pools = _descendants_of_sessions(agents)
        cpu, received, started = self._cpu(agents, pools), _bytes_received(port), time.monotonic()
        time.sleep(seconds)
        elapsed = time.monotonic() - started
        cpu_after, received_after = self._cpu(agents, pools), _bytes_received(port)
        read = sum(received_after[peer] - received[peer] for peer in received_after if peer in received)
        used = {part: (cpu_after[part] - cpu[part]) / elapsed * 1000 for part in cpu}
        return {f"heartbeat_bytes_per_node_per_s_{label}": round(read / elapsed / self.args.nodes, 1),
                f"master_cpu_ms_per_s_{label}": round(used["master"], 1),
                f"client_cpu_ms_per_s_{label}": round(used["client"], 1),
                f"node_cpu_ms_per_s_{label}": round((used["nodes"] + used["pools"]) / self.args.nodes, 2)}

    def _detection(self, observer: Observer, number: int) -> float:
        """Seconds from sending ``number`` to a node until the master counts one node alive less."""
        victim = next(node for node in reversed(self.nodes) if node.poll() is None)
        alive = observer.nodes_alive()
        started = time.monotonic()
        os.kill(victim.pid, number)
        try:
            _wait_for(lambda: observer.nodes_alive() < alive, DETECTION_TIMEOUT, "the node declared dead")
            return round(time.monotonic() - started, 3)
        finally:
            if number == signal.SIGSTOP:
                os.kill(victim.pid, signal.SIGKILL)
                os.kill(victim.pid, signal.SIGCONT)
            victim.wait()

    def cleanup(self) -> None:
        """Stop everything this run started and remove its folder and segments; record what was left."""
        try:
            parl_lite.shutdown()
        except Exception:  # the cluster may be half gone: what is left is killed below
            pass
        started = [process for process in (*self.nodes, self.master) if process is not None]
        pids = [process.pid for process in self.nodes]
        for process in started:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 30
        for process in started:
            try:
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        time.sleep(0.5)  # the zygotes see their node's socket close and stop their workers
        stray = _descendants_of_sessions(pids)
        for pid in stray:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        segments = [path for pid in pids for path in glob.glob(f"/dev/shm/parl_lite_*{pid}_*")]
        for path in segments:
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
        shutil.rmtree(self.root, ignore_errors=True)
        self.figures["leftover_processes"] = len(stray)
        self.figures["leftover_segments"] = len(segments)


def _private_mb(pid: int) -> float:
    """Memory a process does not share (its private pages: what one more of it costs)."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as smaps:
            return sum(int(line.split()[1]) for line in smaps
                       if line.startswith(("Private_Clean:", "Private_Dirty:"))) / 1024
    except OSError:
        return 0.0


def _shm_mb(pids: list[int]) -> float:
    total = 0
    for pid in pids:
        for path in glob.glob(f"/dev/shm/parl_lite_{pid}_*"):
            try:
                total += os.stat(path).st_blocks * 512
            except FileNotFoundError:
                pass
    return total / 2**20


def _filesystem(path: Path) -> str:
    """The type of the filesystem holding ``path`` (``/proc/mounts``: the longest mount point above
    it), ``ext4 (no journal)`` for an ext4 that has none (no ``/proc/fs/jbd2`` entry): such an ext4
    steps over every inode deleted in the last minute or more when it makes a file, so files made
    soon after many were deleted cost several times as much."""
    best, kind = "", "unknown"
    resolved = str(path.resolve())
    with open("/proc/mounts") as mounts:
        for line in mounts:
            _, point, fs_type = line.split()[:3]
            inside = resolved == point or resolved.startswith(point.rstrip("/") + "/")
            if inside and len(point) >= len(best):
                best, kind = point, fs_type
    if kind == "ext4" and not _has_journal(path):
        return "ext4 (no journal)"
    return kind


def _has_journal(path: Path) -> bool:
    """Whether the filesystem holding ``path`` has a journal: ``/proc/fs/jbd2/<device>-<inode>``, the
    device by its kernel name (``vda``, ``dm-0``, ``loop0``: not a ``/dev/mapper`` alias), found
    from the path's device number; True when the device cannot be named (nothing is claimed)."""
    device = os.stat(path).st_dev
    try:
        link = os.readlink(f"/sys/dev/block/{os.major(device)}:{os.minor(device)}")
    except OSError:
        return True
    return bool(glob.glob(f"/proc/fs/jbd2/{os.path.basename(link)}-*"))


def _shipped_files_write_ms(root: Path, samples: int = 10) -> float:
    """CPU milliseconds to write the files a session ships (this script's folder) into a new folder
    under ``root``, as a node does, median of ``samples``: what the disk charges a first-wave session
    at the start of the run. The folders stay until the run's folder is removed (deleting them now
    would make the run's own files dearer on an ext4 without a journal)."""
    files = collect_files([], DEFAULT_LIMIT_MB)
    names, contents = list(files), list(files.values())
    seconds = []
    for index in range(samples):
        started = time.process_time()
        folder = root / f"shipped-{index}"
        folder.mkdir()
        write_files(folder, names, contents, DEFAULT_LIMIT_MB)
        seconds.append(time.process_time() - started)
    return round(statistics.median(seconds) * 1000, 3)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=10, help="node agents started")
    parser.add_argument("--cpus", type=int, default=4, help="actor slots of each node")
    parser.add_argument("--actors", type=int, default=500, help="actors created in all")
    parser.add_argument("--threads", type=int, default=8, help="client threads creating actors")
    parser.add_argument("--quiet", type=float, default=5.0, help="seconds the heartbeats are measured")
    parser.add_argument("--timeout", type=float, default=1200.0, help="seconds before the run is abandoned")
    parser.add_argument("--root", default=None,
                        help="folder under which the run's folder (the nodes' working folders) is made "
                             "(default: the system's temporary folder)")
    args = parser.parse_args()
    if args.root is not None and not os.path.isdir(args.root):
        parser.error(f"--root: {args.root!r} is not a folder")
    run = Run(args)
    run.figures.update(nodes=args.nodes, cpus_per_node=args.cpus, actors=args.actors, threads=args.threads,
                       root_filesystem=_filesystem(run.root), load1_start=os.getloadavg()[0])
    watchdog = threading.Timer(args.timeout, lambda: os.kill(os.getpid(), signal.SIGTERM))
    watchdog.daemon = True
    watchdog.start()

    def stop(number, _frame):
        raise SystemExit(f"stopped by signal {number} (--timeout {args.timeout:g} s, or from outside)")

    signal.signal(signal.SIGTERM, stop)
    failure = None
    try:
        run.figures["shipped_files_write_ms"] = _shipped_files_write_ms(run.root)
        run.start()
        run.measure()
    except BaseException as error:  # also SystemExit from the watchdog and KeyboardInterrupt
        failure = f"{type(error).__name__}: {error}"
    finally:
        watchdog.cancel()
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        run.cleanup()
    run.figures["load1_end"] = os.getloadavg()[0]
    if failure:
        run.figures["error"] = failure
    print(json.dumps(run.figures), flush=True)
    if failure:
        sys.exit(1)


if __name__ == "__main__":
    main()
