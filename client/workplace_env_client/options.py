"""What the sync and the async environment client decide alike, written once.

:meth:`ClientOptions.checked` checks and resolves their constructor arguments; an
:class:`RpcBudget` is one RPC's deadline and whether a concurrency refusal (TOO_MANY_RPCS, X3)
is sent again within it. The clients only drive them: the sync one sleeps, the async one
awaits.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from workplace_env_client.channel import check_client_options, check_max_attempts, refusal_wait
from workplace_env_client.errors import WorkplaceEnvError


@dataclass(frozen=True)
class ClientOptions:
    """An environment client's options, checked: ``timeout_s`` (seconds, every RPC's
    deadline), ``admin_token`` and ``retry_refusals`` (resolved to a bool)."""

    timeout_s: float
    admin_token: str | None
    retry_refusals: bool

    @classmethod
    def checked(
        cls,
        over: tuple[object, object, object],
        timeout_s: Any,
        max_attempts: Any,
        affinity: Any,
        admin_token: Any,
        retry_refusals: Any,
    ) -> ClientOptions:
        """The options of a client ``over`` exactly one of its ``(target, channel,
        transport)``; ``retry_refusals`` None follows ``max_attempts`` (on above 1). Raises
        ValueError unless exactly one is given, ArgumentError (a ValueError) naming the
        argument as :func:`~workplace_env_client.channel.check_max_attempts` and
        :func:`~workplace_env_client.channel.check_client_options` do."""
        if list(over).count(None) != 2:
            raise ValueError("pass exactly one of target, channel or transport")
        check_max_attempts(max_attempts)
        timeout_s = check_client_options(timeout_s, affinity, retry_refusals, admin_token)
        retry = max_attempts > 1 if retry_refusals is None else bool(retry_refusals)
        return cls(timeout_s, admin_token, retry)


@dataclass(frozen=True)
class RpcBudget:
    """One RPC's ``deadline`` (a ``time.monotonic()`` instant), retries included, and whether
    a concurrency refusal is sent again before it (``retry_refusals``)."""

    deadline: float
    retry_refusals: bool

    @classmethod
    def start(
        cls, timeout_s: float, retry_refusals: bool, override: bool | None = None
    ) -> RpcBudget:
        """The budget of an RPC sent now with ``timeout_s`` seconds; refusals retried as
        ``override`` says (None: as the client's ``retry_refusals``)."""
        return cls(time.monotonic() + timeout_s, retry_refusals if override is None else override)

    def remaining(self) -> float:
        """Seconds left before the deadline (0 once it passed): the next attempt's timeout."""
        return max(0.0, self.deadline - time.monotonic())

    def wait_after(self, error: WorkplaceEnvError) -> float | None:
        """Seconds to wait before sending the RPC again after ``error``
        (:func:`~workplace_env_client.channel.refusal_wait`); None when it must not be."""
        if not self.retry_refusals:
            return None
        return refusal_wait(error, self.deadline - time.monotonic())
