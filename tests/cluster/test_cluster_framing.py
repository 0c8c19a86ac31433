"""The cluster's frames over a TCP connection on 127.0.0.1: what a connection holds, and messages of
every size."""
import os
import resource
import socket
import threading
import tracemalloc

import numpy as np
import pytest

from parl_lite.ext.cluster.framing import FramedSocket, decode, encode

pytestmark = pytest.mark.timeout(60)


def _tcp_pair() -> tuple[socket.socket, socket.socket]:
    with socket.create_server(("127.0.0.1", 0)) as listener:
        ours = socket.create_connection(listener.getsockname())
        theirs, _ = listener.accept()
    return ours, theirs


def _pair() -> tuple[FramedSocket, FramedSocket]:
    ours, theirs = _tcp_pair()
    return FramedSocket(ours, "sender", 2**30), FramedSocket(theirs, "receiver", 2**30)


def test_a_new_connection_holds_a_few_kib_not_a_read_buffer_of_256_kib():
    ours, theirs = _tcp_pair()
    try:
        tracemalloc.start()
        framed = FramedSocket(ours, "peer", 2**20)
        held, _ = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        assert held < 16 * 1024  # a client holds one connection per actor, a node one per session
        framed.close()
    finally:
        theirs.close()


def test_messages_below_at_and_far_above_the_first_inbox_arrive_whole_and_in_order():
    sender, receiver = _pair()
    sizes = [1, 4095, 4096, 4097, 10_000, 300_000, 3, 2_000_000, 7, 4096 * 3 + 1]
    bodies = [bytes([index % 251]) * size for index, size in enumerate(sizes)]
    writer = threading.Thread(target=lambda: [sender.send(body) for body in bodies])
    writer.start()
    try:
        received = [receiver.receive() for _ in bodies]
    finally:
        writer.join()
        sender.close()
        receiver.close()
    assert [body for body, _ in received] == bodies
    assert all(buffers == [] for _, buffers in received)


def test_small_messages_and_out_of_band_arrays_alternate_on_one_connection():
    sender, receiver = _pair()
    messages = [("small", index, np.arange(size, dtype=np.float64)) for index, size in
                enumerate([1, 100_000, 3, 400_000, 0, 50_000])]
    writer = threading.Thread(target=lambda: [sender.send(*encode(message)) for message in messages])
    writer.start()
    try:
        received = [decode(*receiver.receive()) for _ in messages]
    finally:
        writer.join()
        sender.close()
        receiver.close()
    for (tag, index, array), (got_tag, got_index, got_array) in zip(messages, received, strict=True):
        assert (got_tag, got_index) == (tag, index)
        np.testing.assert_array_equal(got_array, array)


def test_waiting_for_a_message_times_out_on_a_connection_numbered_above_1024():
    """A client with thousands of actors holds a connection each: select() cannot wait on a
    descriptor numbered 1024 or more, so the wait must not take it for a message arriving."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard <= 1500:
        pytest.skip(f"the hard limit on open files ({hard}) leaves no descriptor above 1500")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 2048), hard))
    ours, theirs = _tcp_pair()
    high = socket.socket(fileno=os.dup2(ours.fileno(), 1500))
    ours.close()
    receiver, sender = FramedSocket(high, "sender", 2**20), FramedSocket(theirs, "receiver", 2**20)
    try:
        assert receiver.wait_for_message(0.05) is False  # nothing sent
        sender.send_json({"hello": 1})
        assert receiver.wait_for_message(5.0) is True
        assert receiver.receive_json() == {"hello": 1}
    finally:
        receiver.close()
        sender.close()
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
