"""Actor output at the caller: each line an actor printed, prefixed with the actor's label."""
import sys

__all__ = ["print_actor_output"]


def print_actor_output(label: str, stream_name: str, text: str) -> None:
    """Write ``text`` to this process's stdout (``stream_name`` "stdout") or stderr, each line
    prefixed ``(label) ``, ending with a newline."""
    stream = sys.stdout if stream_name == "stdout" else sys.stderr
    stream.write("".join(f"({label}) {line}" for line in text.splitlines(keepends=True)))
    if not text.endswith("\n"):
        stream.write("\n")
    stream.flush()
