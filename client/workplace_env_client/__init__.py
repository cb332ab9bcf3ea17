"""Python SDK of the workplace environment service (gRPC)."""

from workplace_env_client.client import (
    EnvironmentClient,
    Session,
    TableDiff,
    VerifyResult,
    task_from_row,
)
from workplace_env_client.errors import (
    CallIdReusedError,
    CapacityError,
    DeadlineError,
    EpisodeMismatchError,
    FieldViolation,
    InvalidRequestError,
    SessionClosedError,
    SessionConflictError,
    SessionLostError,
    UnavailableError,
    WorkplaceEnvError,
)

__all__ = [
    "CallIdReusedError",
    "CapacityError",
    "DeadlineError",
    "EnvironmentClient",
    "EpisodeMismatchError",
    "FieldViolation",
    "InvalidRequestError",
    "Session",
    "SessionClosedError",
    "SessionConflictError",
    "SessionLostError",
    "TableDiff",
    "UnavailableError",
    "VerifyResult",
    "WorkplaceEnvError",
    "task_from_row",
]
