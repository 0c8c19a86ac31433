"""PARL's ``parl.utils.machine_info``: this machine's IP address, GPUs and free TCP ports; also
(ours) its memory.

Nothing here imports paddle unless a GPU is visible (:func:`is_gpu_available` then asks paddle
whether it was built with CUDA).
"""
import ipaddress
import os
import random
import socket
import subprocess

__all__ = ["get_ip_address", "get_gpu_count", "is_gpu_available", "get_free_tcp_port", "is_port_available",
           "get_port_from_range", "memory_mb"]

_LOCALHOST = "127.0.0.1"


def get_ip_address() -> str | None:
    """The IPv4 address this machine uses to reach other hosts, or None if it has only loopback.

    No packet is sent: a UDP socket is "connected" to a public address only to read which local
    address the routing table picks.
    """
    candidates = []
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect(("8.8.8.8", 80))
            candidates.append(probe.getsockname()[0])
    except OSError:
        pass
    try:
        candidates.append(socket.gethostbyname(socket.gethostname()))
    except OSError:
        pass
    for address in candidates:
        if not ipaddress.ip_address(address).is_loopback:
            return address
    return None


def get_gpu_count() -> int:
    """GPUs listed by ``CUDA_VISIBLE_DEVICES`` if it is set, else by ``nvidia-smi -L`` (0 without it)."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        devices = [device.strip() for device in visible.split(",") if device.strip()]
        try:
            return len([device for device in devices if int(device) >= 0])
        except ValueError:  # GPU UUIDs instead of indices
            return len(devices)
    try:
        listing = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=10, check=True)
    except (OSError, subprocess.SubprocessError):
        return 0
    return listing.stdout.count("UUID")


def is_gpu_available() -> bool:
    """A GPU is visible and paddle was built with CUDA."""
    if get_gpu_count() == 0:
        return False
    import paddle  # only here: a CPU-only machine never pays paddle's import

    return bool(paddle.is_compiled_with_cuda())


def get_free_tcp_port() -> str:
    """A TCP port of 127.0.0.1 that no socket is bound to now, as a string (as PARL returns it).

    Another process may take it before you bind it; servers that can should bind port 0 instead.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((_LOCALHOST, 0))
        return str(probe.getsockname()[1])


def is_port_available(port: int | str) -> bool:
    """True if nothing accepts TCP connections on 127.0.0.1:``port``.

    Raises:
        ValueError: ``port`` is not an integer in 1..65535.
    """
    number = _port_number(port)
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.settimeout(2.0)
        return probe.connect_ex((_LOCALHOST, number)) != 0


def get_port_from_range(start: int, end: int) -> int:
    """A random port in ``[start, end]`` that :func:`is_port_available` (tries each at most once).

    Raises:
        ValueError: the range is not within 1..65535, or every port in it is taken.
    """
    first, last = _port_number(start), _port_number(end)
    if first > last:
        raise ValueError(f"get_port_from_range: start {first} is after end {last}")
    ports = list(range(first, last + 1))
    random.shuffle(ports)
    for port in ports:
        if is_port_available(port):
            return port
    raise ValueError(f"get_port_from_range: every port in {first}-{last} is taken")


def _port_number(port: int | str) -> int:
    try:
        number = int(port)
    except (TypeError, ValueError):
        raise ValueError(f"port must be an integer in 1..65535, got {port!r}") from None
    if not 1 <= number <= 65535:
        raise ValueError(f"port must be an integer in 1..65535, got {port!r}")
    return number


_MEMORY_FIELDS = ("MemTotal", "MemFree", "MemAvailable")  # the first three lines of /proc/meminfo


def memory_mb() -> tuple[float, float]:
    """This machine's used and total memory in MB, used being what is not available (free, on a
    kernel older than 3.14 that does not say what is available); ``/proc/meminfo``, read as far as
    these fields."""
    fields: dict[str, float] = {}
    with open("/proc/meminfo") as meminfo:
        for line in meminfo:
            name, _, value = line.partition(":")
            if name in _MEMORY_FIELDS:
                fields[name] = int(value.split()[0]) / 1024  # kB
                if len(fields) == len(_MEMORY_FIELDS):
                    break
    available = fields.get("MemAvailable", fields.get("MemFree", 0.0))
    return round(fields["MemTotal"] - available, 1), round(fields["MemTotal"], 1)
