"""Python SDK of the workplace environment service (gRPC)."""

from workplace_env_client.client import (
    EnvironmentClient,
    Session,
    TableDiff,
    VerifyResult,
    channel_options,
    retry_service_config,
    task_from_row,
)
from workplace_env_client.errors import (
    CallIdReusedError,
    CapacityError,
    DeadlineError,
    EpisodeMismatchError,
    FieldViolation,
    InvalidRequestError,
    ReleaseFailedError,
    SessionClosedError,
    SessionConflictError,
    SessionExpiredError,
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
    "ReleaseFailedError",
    "Session",
    "SessionClosedError",
    "SessionConflictError",
    "SessionExpiredError",
    "SessionLostError",
    "TableDiff",
    "UnavailableError",
    "VerifyResult",
    "WorkplaceEnvError",
    "channel_options",
    "retry_service_config",
    "task_from_row",
]
