"""Domain errors -> gRPC status with rich details (``google.rpc.Status`` via grpcio-status).

The one mapping table from CONTRACT reasons to status codes. Every error carries an
``ErrorInfo`` (reason, domain :data:`DOMAIN`, ``metadata.resources_session_id``); invalid
requests add a ``BadRequest`` with the offending fields, capacity errors a ``RetryInfo``.
"""

from __future__ import annotations

import grpc
from google.protobuf import any_pb2, duration_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2
from grpc_status import rpc_status

from workplace_env import errors

#: ``ErrorInfo.domain`` of every error this service raises.
DOMAIN = "workplace-env"

_CODES: dict[type[errors.SessionError], grpc.StatusCode] = {
    errors.InvalidRequest: grpc.StatusCode.INVALID_ARGUMENT,
    errors.InvalidToolArguments: grpc.StatusCode.INVALID_ARGUMENT,
    errors.SessionConflict: grpc.StatusCode.ALREADY_EXISTS,
    errors.SessionClaimed: grpc.StatusCode.ALREADY_EXISTS,
    errors.SessionLive: grpc.StatusCode.FAILED_PRECONDITION,
    errors.SandboxMismatch: grpc.StatusCode.FAILED_PRECONDITION,
    errors.CallIdReused: grpc.StatusCode.ALREADY_EXISTS,
    errors.SessionLost: grpc.StatusCode.NOT_FOUND,
    errors.SessionExpired: grpc.StatusCode.NOT_FOUND,
    errors.TablesUnavailable: grpc.StatusCode.UNAVAILABLE,
    errors.Draining: grpc.StatusCode.UNAVAILABLE,
    errors.InjectedFault: grpc.StatusCode.UNAVAILABLE,
    errors.CapacityExhausted: grpc.StatusCode.RESOURCE_EXHAUSTED,
    errors.ResponseTooLarge: grpc.StatusCode.RESOURCE_EXHAUSTED,
    errors.SessionTooLarge: grpc.StatusCode.RESOURCE_EXHAUSTED,
    errors.EpisodeMismatch: grpc.StatusCode.FAILED_PRECONDITION,
    errors.ReleaseFailed: grpc.StatusCode.INTERNAL,
    errors.Unauthenticated: grpc.StatusCode.UNAUTHENTICATED,
}


def status_code(error: errors.SessionError, rpc: str) -> grpc.StatusCode:
    """The status code of ``error`` raised by ``rpc`` (docs/contract.md table).

    SESSION_CLOSED is ALREADY_EXISTS for a seed (S4) and NOT_FOUND otherwise (T5).
    """
    if isinstance(error, errors.SessionClosed):
        if rpc == "RestoreSessions":
            return grpc.StatusCode.FAILED_PRECONDITION
        return grpc.StatusCode.ALREADY_EXISTS if rpc == "SeedSession" else grpc.StatusCode.NOT_FOUND
    for kind in type(error).__mro__:  # a subclass answers as its base (e.g. TooManyRpcs)
        if kind in _CODES:
            return _CODES[kind]
    return grpc.StatusCode.INTERNAL


def _pack(message) -> any_pb2.Any:
    packed = any_pb2.Any()
    packed.Pack(message)
    return packed


def to_status(error: errors.SessionError, rpc: str) -> grpc.Status:
    """The rich gRPC status for ``error`` raised by ``rpc``."""
    return rpc_status.to_status(rich_status(error, rpc))


def rich_status(error: errors.SessionError, rpc: str) -> status_pb2.Status:
    """The ``google.rpc.Status`` of ``error`` raised by ``rpc``: its code, message and details
    (ErrorInfo; BadRequest for an invalid request; RetryInfo for a capacity error)."""
    code = status_code(error, rpc)
    details = [
        _pack(
            error_details_pb2.ErrorInfo(
                reason=error.reason,
                domain=DOMAIN,
                metadata={"resources_session_id": error.session_id, "rpc": rpc, **error.info},
            )
        )
    ]
    if isinstance(error, errors.InvalidRequest):
        details.append(
            _pack(
                error_details_pb2.BadRequest(
                    field_violations=[
                        error_details_pb2.BadRequest.FieldViolation(
                            field=v.field, description=v.description
                        )
                        for v in error.violations
                    ]
                )
            )
        )
    if isinstance(error, errors.CapacityExhausted):
        delay = duration_pb2.Duration()
        delay.FromNanoseconds(int(error.retry_after_s * 1e9))
        details.append(_pack(error_details_pb2.RetryInfo(retry_delay=delay)))
    return status_pb2.Status(
        code=getattr(code_pb2, code.name), message=error.message, details=details
    )
