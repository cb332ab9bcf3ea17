"""Domain errors -> gRPC status with rich details (``google.rpc.Status`` via grpcio-status).

Each reason's status code is its row of the error registry
(:mod:`workplace_env_client.reasons`). Every error carries an
``ErrorInfo`` (reason, domain :data:`DOMAIN`, ``metadata.resources_session_id``); invalid
requests add a ``BadRequest`` with the offending fields, capacity errors a ``RetryInfo``.
"""

from __future__ import annotations

import grpc
from google.protobuf import any_pb2, duration_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2
from grpc_status import rpc_status

from workplace_env import errors
from workplace_env_client import reasons

#: ``ErrorInfo.domain`` of every error this service raises.
DOMAIN = "workplace-env"


def status_code(error: errors.SessionError, rpc: str) -> grpc.StatusCode:
    """The status code of ``error`` raised by ``rpc``: its reason's in the error registry
    (:mod:`workplace_env_client.reasons`, e.g. SESSION_CLOSED is ALREADY_EXISTS for a seed,
    S4, and NOT_FOUND for a call, T5); INTERNAL for a reason not there."""
    row = reasons.REASONS.get(error.reason)
    return grpc.StatusCode.INTERNAL if row is None else row.code_on(rpc)


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
