"""The SDK's gRPC channels: deadlines, retry policy, keepalive and message size.

Shared by the sync client (:mod:`.client`), the async one (:mod:`.aio`) and the admin client
(:mod:`.admin`), so none of them imports another for its channel. Retries: only the idempotent
RPCs of :data:`RETRIED_METHODS`, by gRPC's own retry policy, on UNAVAILABLE and CANCELLED
(:data:`RETRIED_CODES`), within the call's deadline (CONTRACT S2, C2, V1, V3, T6). A refusal
for concurrency (RESOURCE_EXHAUSTED :data:`REFUSED_REASON`, CONTRACT X3) is retried by the
clients themselves after its ``RetryInfo`` delay (:func:`refusal_wait`): gRPC's retry policy
cannot read that delay. Affinity: :mod:`.routing`.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import grpc
import grpc.aio

from workplace.env.v1 import environment_pb2 as pb
from workplace_env_client import checks, reasons
from workplace_env_client.errors import WorkplaceEnvError, from_rpc_error
from workplace_env_client.routing import (
    Target,
    channel_target,
    check_ring_hash_enabled,
    service_config_json,
)

DEFAULT_TIMEOUT_S = 30.0
#: Attempts per RPC (the first one included) on a retryable status; gRPC caps it at 5.
DEFAULT_MAX_ATTEMPTS = 4
SERVICE = pb.DESCRIPTOR.services_by_name["EnvironmentService"].full_name
#: The RPCs safe to retry: each is idempotent (CallTool through the SDK's call_id).
RETRIED_METHODS = ("SeedSession", "CloseSession", "Verify", "CallTool", "ListTools")
#: The statuses retried. CANCELLED (never sent by our servicer) is what gRPC answers an RPC that
#: races a server's listener closing at the end of a drain (X2): it was not run, and a retry of
#: an idempotent RPC is safe even when it was.
RETRIED_CODES = ("UNAVAILABLE", "CANCELLED")
#: Largest message the SDK accepts, in bytes (the server's limit).
MAX_MESSAGE_BYTES = 64 * 1024 * 1024
#: Keepalive: ping an idle connection every 30 s, drop it after 10 s without an answer (the
#: server admits pings every 15 s, so it never closes an SDK channel for pinging too often).
KEEPALIVE_TIME_MS = 30_000
KEEPALIVE_TIMEOUT_MS = 10_000
#: ``ErrorInfo.reason`` of an RPC the server refused without running it because it runs its
#: maximum of concurrent RPCs (CONTRACT X3, RESOURCE_EXHAUSTED with ``RetryInfo``).
REFUSED_REASON = reasons.TOO_MANY_RPCS.name
#: The wait (seconds) before retrying such a refusal that carries no ``RetryInfo``.
REFUSAL_FALLBACK_WAIT_S = 0.1
#: The shortest wait (seconds) before a retry, whatever the ``RetryInfo`` says (no busy loop).
REFUSAL_MIN_WAIT_S = 0.01
#: A refusal's wait is its ``RetryInfo`` delay stretched by up to this fraction at random, so
#: clients refused together do not all come back in the same instant.
REFUSAL_JITTER = 0.25
#: Seconds of its deadline a resent RPC must have left after the wait, so that the resend
#: itself is not cut short by the deadline (it would end DEADLINE_EXCEEDED, not refused).
REFUSAL_SEND_BUDGET_S = 0.25


def is_refusal(error: BaseException) -> bool:
    """Whether ``error`` is a concurrency refusal: RESOURCE_EXHAUSTED :data:`REFUSED_REASON`
    (CONTRACT X3), answered at once, the RPC not run."""
    return (
        isinstance(error, WorkplaceEnvError)
        and error.code == grpc.StatusCode.RESOURCE_EXHAUSTED
        and error.reason == REFUSED_REASON
    )


def refusal_wait(error: WorkplaceEnvError, remaining_s: float) -> float | None:
    """How long to wait (seconds) before sending again an RPC that failed with ``error``, with
    ``remaining_s`` seconds left of its deadline; None when it must not be sent again.

    Only a concurrency refusal (RESOURCE_EXHAUSTED :data:`REFUSED_REASON`, CONTRACT X3) is
    retried: the server answered it at once without running it, so sending it again is safe
    for every RPC. The wait honours the refusal's ``RetryInfo`` (``error.retry_after_s``;
    :data:`REFUSAL_FALLBACK_WAIT_S` without one; at least :data:`REFUSAL_MIN_WAIT_S`),
    stretched by up to :data:`REFUSAL_JITTER`; None when that wait does not end
    :data:`REFUSAL_SEND_BUDGET_S` before the deadline. Other capacity answers (the session
    bound, S7) are not retried: they last until sessions close.
    """
    if not is_refusal(error):
        return None
    delay = error.retry_after_s if error.retry_after_s is not None else REFUSAL_FALLBACK_WAIT_S
    wait = max(REFUSAL_MIN_WAIT_S, delay) * (1.0 + REFUSAL_JITTER * random.random())
    return wait if wait + REFUSAL_SEND_BUDGET_S <= remaining_s else None


def wait_or_raise(exc: grpc.RpcError, deadline: float, retry: bool = True) -> float:
    """The wait (seconds, :func:`refusal_wait`) before sending again an RPC that failed with
    ``exc``, ``deadline`` being its ``time.monotonic()`` end; raises ``exc`` as its typed
    :class:`~workplace_env_client.errors.WorkplaceEnvError` when it is not to be sent again
    (or ``retry`` is off)."""
    error = from_rpc_error(exc)
    wait = refusal_wait(error, deadline - time.monotonic()) if retry else None
    if wait is None:
        raise error from exc
    return wait


def check_max_attempts(max_attempts: int) -> None:
    """Raise ArgumentError (a ValueError) naming ``max_attempts`` unless it is an int in 1..5
    (gRPC caps attempts at 5)."""
    checks.count(max_attempts, "max_attempts", 1, 5, " (gRPC's limit)")


def check_client_options(
    timeout_s: Any,
    affinity: Any = None,
    retry_refusals: Any = None,
    token: Any = None,
    token_field: str = "admin_token",
) -> float:
    """The clients' constructor arguments checked before any channel is made: ``timeout_s``
    (:func:`~workplace_env_client.checks.seconds`), ``affinity`` and ``retry_refusals`` (bool or
    None), the admin token (None or a string); ArgumentError naming the argument. Returns
    ``timeout_s`` as a float."""
    checks.flag(affinity, "affinity")
    checks.flag(retry_refusals, "retry_refusals")
    checks.optional_text(token, token_field)
    return checks.seconds(timeout_s, "timeout_s")


def _retry_method_config(max_attempts: int) -> list[dict[str, Any]]:
    return [
        {
            "name": [{"service": SERVICE, "method": m} for m in RETRIED_METHODS],
            "retryPolicy": {
                "maxAttempts": max_attempts,
                "initialBackoff": "0.05s",
                "maxBackoff": "1s",
                "backoffMultiplier": 2,
                "retryableStatusCodes": list(RETRIED_CODES),
            },
        }
    ]


def retry_service_config(
    max_attempts: int = DEFAULT_MAX_ATTEMPTS, *, affinity: bool = False
) -> str:
    """The gRPC service config (JSON text) retrying :data:`RETRIED_METHODS` on
    :data:`RETRIED_CODES`.

    Backoff: 50 ms, doubling, at most 1 s, randomised by gRPC. With ``affinity`` it also picks
    the ``ring_hash`` policy keyed by the session header. Pass it as channel option
    ``("grpc.service_config", ...)`` when you bring your own channel.
    """
    config = service_config_json(_retry_method_config(max_attempts), affinity)
    assert config is not None
    return config


def channel_options(
    max_attempts: int = DEFAULT_MAX_ATTEMPTS, *, affinity: bool = False
) -> list[tuple[str, Any]]:
    """Channel options of the SDK: message size, for ``max_attempts > 1`` retries, and with
    ``affinity`` the session-affine ``ring_hash`` policy (raises RuntimeError when
    grpcio's switch for it is off, see :mod:`workplace_env_client.routing`); ArgumentError for
    ``max_attempts`` outside 1..5."""
    check_max_attempts(max_attempts)
    if affinity:
        check_ring_hash_enabled()
    options: list[tuple[str, Any]] = [
        ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
        ("grpc.keepalive_time_ms", KEEPALIVE_TIME_MS),
        ("grpc.keepalive_timeout_ms", KEEPALIVE_TIMEOUT_MS),
        ("grpc.keepalive_permit_without_calls", 1),
    ]
    retries = max_attempts > 1
    options.append(("grpc.enable_retries", 1 if retries else 0))
    config = service_config_json(_retry_method_config(max_attempts) if retries else None, affinity)
    if config is not None:
        options.append(("grpc.service_config", config))
    return options


def tls_credentials(
    ca_file: str | None = None, cert_file: str | None = None, key_file: str | None = None
) -> grpc.ChannelCredentials:
    """TLS channel credentials from PEM files: ``ca_file``, the CA bundle trusted for the
    server's certificate (None: the system's roots); ``cert_file`` and ``key_file``, this
    client's certificate chain and key, for a server that requires them (mTLS, the server's
    ``--tls-client-ca``). Raises OSError when a file cannot be read, ValueError when only one of
    ``cert_file`` and ``key_file`` is given."""
    if (cert_file is None) != (key_file is None):
        raise ValueError("give both cert_file and key_file, or neither")

    def read(path: str | None) -> bytes | None:
        return None if path is None else Path(path).read_bytes()

    return grpc.ssl_channel_credentials(read(ca_file), read(key_file), read(cert_file))


def make_channel(
    target: Target,
    *,
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    affinity: bool | None = None,
    credentials: grpc.ChannelCredentials | None = None,
) -> grpc.Channel:
    """A channel to ``target`` with the SDK's options (see :class:`EnvironmentClient` for
    ``target`` and ``affinity``): TLS with ``credentials`` (e.g. :func:`tls_credentials`), else
    plaintext. Raises ValueError for a malformed target list."""
    uri, options = _uri_and_options(target, max_attempts, affinity)
    if credentials is not None:
        return grpc.secure_channel(uri, credentials, options=options)
    return grpc.insecure_channel(uri, options=options)


def aio_dialer(
    target: Target,
    *,
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    affinity: bool | None = None,
    credentials: grpc.ChannelCredentials | None = None,
) -> Callable[[], grpc.aio.Channel]:
    """What makes :func:`make_aio_channel`'s channel when called, ``target`` and the options
    checked now (raising as :func:`make_channel` does). A ``grpc.aio`` channel belongs to the
    event loop it is made in, so the
    :class:`~workplace_env_client.aio.AsyncEnvironmentClient` dials on its first call, inside
    its loop, wherever the client was made."""
    uri, options = _uri_and_options(target, max_attempts, affinity)
    if credentials is not None:
        return partial(grpc.aio.secure_channel, uri, credentials, options=options)
    return partial(grpc.aio.insecure_channel, uri, options=options)


def make_aio_channel(
    target: Target,
    *,
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    affinity: bool | None = None,
    credentials: grpc.ChannelCredentials | None = None,
) -> grpc.aio.Channel:
    """:func:`make_channel` for asyncio: the same target, options and TLS, as a ``grpc.aio``
    channel of the running event loop."""
    dial = aio_dialer(target, max_attempts=max_attempts, affinity=affinity, credentials=credentials)
    return dial()


#: A sync or a ``grpc.aio`` channel.
AnyChannel = TypeVar("AnyChannel", grpc.Channel, grpc.aio.Channel)


def given_or_made(
    target: Target | None,
    channel: AnyChannel | None,
    make: Callable[..., Any],
    *,
    max_attempts: int,
    affinity: bool | None,
    credentials: grpc.ChannelCredentials | None,
) -> tuple[Any, bool]:
    """A client's channel and whether the client owns it (closes it): ``channel``, the
    caller's, else what ``make`` (:func:`make_channel`, or :func:`aio_dialer`: what dials
    it) makes of ``target`` with the other arguments (raising as it does)."""
    if channel is not None:
        return channel, False
    assert target is not None
    return make(target, max_attempts=max_attempts, affinity=affinity, credentials=credentials), True


def _uri_and_options(
    target: Target, max_attempts: int, affinity: bool | None
) -> tuple[str, list[tuple[str, Any]]]:
    """The channel URI of ``target`` and the SDK's options for it (a list of several servers
    turns affinity on unless ``affinity`` says otherwise)."""
    uri, multi = channel_target(target)
    return uri, channel_options(max_attempts, affinity=multi if affinity is None else affinity)
