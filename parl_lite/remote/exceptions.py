"""PARL's ``parl.remote.exceptions`` names for parl_lite's remote errors.

A remote exception is raised with its own type, which also derives from :class:`RemoteError`,
whether the call waited or went through a future: so PARL's ``FutureFunctionError`` is
``RemoteError`` and its ``RemoteSerializeError``/``RemoteDeserializeError`` are
``SerializationError``.
"""
from parl_lite.remote.errors import (ActorDiedError, FutureObjectEmpty, MemoryLimitError, RemoteError,
                                     SerializationError)

__all__ = ["RemoteError", "FutureFunctionError", "RemoteSerializeError", "RemoteDeserializeError",
           "FutureObjectEmpty", "ActorDiedError", "MemoryLimitError", "SerializationError"]

FutureFunctionError = RemoteError
RemoteSerializeError = SerializationError
RemoteDeserializeError = SerializationError
