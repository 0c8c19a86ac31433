"""Issue 23, actors: an actor that replaces its program (``os.execv``) and one that writes bytes
to ``sys.stdout.buffer``, on the local pool (real worker processes)."""
import time

import pytest

import parl_lite
from parl_lite import remote_class

from remote_actors import Counter
from remote_helpers import wait_for_exit
from remote_hostile_actors import Outsider

pytestmark = pytest.mark.timeout(90)


def test_an_actor_that_execs_fails_its_caller_at_once_and_the_pool_stays_healthy(local_pool):
    bystander = remote_class(Counter)()
    actor = remote_class(Outsider, wait=False)()
    pid = actor.pid().result(timeout=30)
    started = time.monotonic()
    with pytest.raises(parl_lite.ActorDiedError, match=rf"Outsider.exec_sleeper\(\) \(worker pid {pid}\).*os.exec"):
        actor.exec_sleeper(60).result(timeout=20)  # before the fix: blocked until the program ended
    assert time.monotonic() - started < 10
    assert wait_for_exit(pid, timeout=5), "the program the actor exec'd outlived it"
    with pytest.raises(parl_lite.ActorDiedError):
        actor.pid().result(timeout=5)
    assert bystander.add(1) == 1
    assert remote_class(Counter)().add(2) == 2


def test_bytes_written_to_stdout_buffer_are_captured(local_pool, capfd):
    actor = remote_class(Outsider)()
    pid = actor.pid()
    capfd.readouterr()
    # a character cut in two writes is decoded whole; the output is printed before the reply is
    assert actor.write_bytes("caf\u00e9 ".encode() + b"\xe2\x82", b"\xac bytes\n", b"\xff end") == 21
    assert capfd.readouterr().out == f"(Outsider pid={pid}) caf\u00e9 \u20ac bytes\n(Outsider pid={pid}) \ufffd end\n"
