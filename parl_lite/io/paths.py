"""Paths given to read or write a file, checked first so that a mistake gets a message that names
it rather than an error from deep inside h5py or ``os.replace`` (no paddle import)."""
import stat

__all__ = ["describe_file_type"]

_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"), (stat.S_ISREG, "a file"))


def describe_file_type(mode: int) -> str:
    """What a file of ``st_mode`` ``mode`` is, in words: "a folder", "a FIFO (named pipe)", ..."""
    for test, words in _KINDS:
        if test(mode):
            return words
    return f"a special file (mode {stat.S_IFMT(mode):o})"
