"""Context managers used with the wrong ``with``: a TypeError that says what to write.

A synchronous object (an :class:`~workplace_env_client.client.EnvironmentClient`, its
``session()`` block, an admin client, the TRL environment) subclasses :class:`SyncOnly`; an
asyncio one (an :class:`~workplace_env_client.aio.AsyncEnvironmentClient`, its ``session()``
block) :class:`AsyncOnly`. Each names, in ``_usage``, the statement that uses it and, in
``_counterpart``, what to use from the other kind of code (true for that class: the admin client
and the TRL environment have no asyncio form). Used with the other statement, it raises TypeError
before doing anything (nothing is sent or closed).
"""

from __future__ import annotations

from typing import ClassVar, NoReturn


class SyncOnly:
    """A context manager for ``with`` only: ``async with`` raises TypeError naming ``_usage``."""

    #: The ``with`` statement that uses it, as the TypeError shows it.
    _usage: ClassVar[str] = "with ..."
    #: What asyncio code uses instead, as the TypeError's closing parenthesis shows it.
    _counterpart: ClassVar[str] = "call it from asyncio through asyncio.to_thread"

    async def __aenter__(self) -> NoReturn:
        raise TypeError(
            f"{type(self).__name__} is synchronous: write `{self._usage}`, not `async with`"
            f" ({self._counterpart})"
        )

    async def __aexit__(self, *exc: object) -> None:
        """Never reached: :meth:`__aenter__` raises."""


class AsyncOnly:
    """A context manager for ``async with`` only: ``with`` raises TypeError naming ``_usage``."""

    #: The ``async with`` statement that uses it, as the TypeError shows it.
    _usage: ClassVar[str] = "async with ..."
    #: What synchronous code uses instead, as the TypeError's closing parenthesis shows it.
    _counterpart: ClassVar[str] = "synchronous code calls it through asyncio.run"

    def __enter__(self) -> NoReturn:
        raise TypeError(
            f"{type(self).__name__} is asynchronous: write `{self._usage}` inside an async"
            f" function, not `with` ({self._counterpart})"
        )

    def __exit__(self, *exc: object) -> None:
        """Never reached: :meth:`__enter__` raises."""
