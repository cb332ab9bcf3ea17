"""Python SDK of the workplace environment service (gRPC).

``__version__`` is the installed ``workplace-env-client`` distribution's version (its package
metadata; ``client/pyproject.toml``). Importing it sets
``GRPC_EXPERIMENTAL_RING_HASH_SET_REQUEST_HASH_KEY=true`` (unless already set), which grpcio
needs for session affinity over many servers (:mod:`.routing`).
"""

# First: routing sets grpcio's ring-hash switch before any channel exists.
from workplace_env_client.routing import RING_HASH_ENV, SESSION_HEADER  # isort: skip
from importlib import metadata as _metadata

from workplace_env_client.admin import AdminClient, snapshot_from_json, snapshot_to_json
from workplace_env_client.aio import AsyncEnvironmentClient, AsyncSession
from workplace_env_client.channel import (
    channel_options,
    make_channel,
    retry_service_config,
    tls_credentials,
)
from workplace_env_client.client import EnvironmentClient, Session
from workplace_env_client.errors import (
    ArgumentError,
    CallIdReusedError,
    CapacityError,
    ClientClosedError,
    DeadlineError,
    EpisodeMismatchError,
    EventLoopError,
    FieldViolation,
    InvalidRequestError,
    ReleaseFailedError,
    ReplayDivergedError,
    SandboxMismatchError,
    SessionClaimedError,
    SessionClosedError,
    SessionConflictError,
    SessionExpiredError,
    SessionHeaderMismatchError,
    SessionLeftOpenWarning,
    SessionLiveError,
    SessionLostError,
    SessionTooLargeError,
    UnauthenticatedError,
    UnavailableError,
    WorkplaceEnvError,
)
from workplace_env_client.handle import Recovery, RecoveryStrategy, SessionCheckpoint
from workplace_env_client.messages import (
    RecordedCall,
    ServerSandbox,
    TableDiff,
    VerifyResult,
    task_from_row,
)
from workplace_env_client.rollouts import (
    ModelCallsStopped,
    ModelPolicy,
    Rollout,
    arun_rollout,
    arun_rollouts,
    create_params_for,
    openai_client,
    run_rollout,
)

try:
    __version__ = _metadata.version("workplace-env-client")
except _metadata.PackageNotFoundError:  # imported from a source tree nobody installed
    __version__ = "0+unknown"

__all__ = [
    "RING_HASH_ENV",
    "SESSION_HEADER",
    "AdminClient",
    "ArgumentError",
    "AsyncEnvironmentClient",
    "AsyncSession",
    "CallIdReusedError",
    "CapacityError",
    "ClientClosedError",
    "DeadlineError",
    "EnvironmentClient",
    "EpisodeMismatchError",
    "EventLoopError",
    "FieldViolation",
    "InvalidRequestError",
    "ModelCallsStopped",
    "ModelPolicy",
    "RecordedCall",
    "Recovery",
    "RecoveryStrategy",
    "ReleaseFailedError",
    "ReplayDivergedError",
    "Rollout",
    "SandboxMismatchError",
    "ServerSandbox",
    "Session",
    "SessionCheckpoint",
    "SessionClaimedError",
    "SessionClosedError",
    "SessionConflictError",
    "SessionExpiredError",
    "SessionHeaderMismatchError",
    "SessionLeftOpenWarning",
    "SessionLiveError",
    "SessionLostError",
    "SessionTooLargeError",
    "TableDiff",
    "UnauthenticatedError",
    "UnavailableError",
    "VerifyResult",
    "WorkplaceEnvError",
    "__version__",
    "arun_rollout",
    "arun_rollouts",
    "channel_options",
    "create_params_for",
    "make_channel",
    "openai_client",
    "retry_service_config",
    "run_rollout",
    "snapshot_from_json",
    "snapshot_to_json",
    "task_from_row",
    "tls_credentials",
]
