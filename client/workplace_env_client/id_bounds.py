"""The length bound of the contract's identities (CONTRACT "Identities"), one constant and one
check shared by the SDK's argument checks and the server's validation; imports nothing, so the
server's domain can use it without a transport."""

from __future__ import annotations

#: Longest ``resources_session_id``, ``episode_id.rollout_id`` and ``call_id``, in characters:
#: each names server state and travels in headers, logs and checkpoints.
MAX_ID_CHARS = 256


def id_length_problem(value: str) -> str | None:
    """Why the identity ``value`` is too long (over :data:`MAX_ID_CHARS` characters:
    ``must be at most 256 characters, not 300``), or None."""
    if len(value) > MAX_ID_CHARS:
        return f"must be at most {MAX_ID_CHARS} characters, not {len(value)}"
    return None
