"""Session affinity over many server processes: gRPC's ``ring_hash`` policy keyed by a header.

Every RPC about one session carries the metadata ``x-resources-session-id: <id>``
(:data:`SESSION_HEADER`); a channel with affinity balances with ``ring_hash_experimental``
hashing that header (gRFC A76 ``request_hash_header``), so every RPC of a session reaches the
same server, and when a server goes away only its keys move (to a server that then answers
SESSION_LOST). Envoy deployments hash the same header (``deploy/envoy.yaml``).

grpcio 1.85 accepts ``requestHashHeader`` only when the environment variable
``GRPC_EXPERIMENTAL_RING_HASH_SET_REQUEST_HASH_KEY`` is ``true`` when the channel is created
(without it every RPC fails with INTERNAL "hash attribute not present"). Importing the SDK sets
it (``os.environ.setdefault``), so it is in place before the SDK creates any channel; a value
set otherwise by the caller is kept, and a channel with affinity then refuses to start
(:func:`check_ring_hash_enabled`).
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
from collections.abc import Sequence
from typing import Any

from workplace_env_client.errors import ArgumentError
from workplace_env_client.id_bounds import MAX_ID_CHARS

#: Metadata key carrying the session id; gRPC's ring_hash and Envoy's ring hash key on it.
SESSION_HEADER = "x-resources-session-id"
#: grpcio's switch for ``requestHashHeader`` in the ring_hash config (gRFC A76).
RING_HASH_ENV = "GRPC_EXPERIMENTAL_RING_HASH_SET_REQUEST_HASH_KEY"
#: The LB policy name grpcio registers for ring hash.
RING_HASH_POLICY = "ring_hash_experimental"

os.environ.setdefault(RING_HASH_ENV, "true")

# CONTRACT "Identities": only such ids go into the header (always valid metadata); other ids
# travel in the body alone and the server answers INVALID_ARGUMENT as before.
_SESSION_ID = re.compile(rf"[A-Za-z0-9._:-]{{1,{MAX_ID_CHARS}}}")

Target = str | Sequence[str]


def session_metadata(session_id: str) -> tuple[tuple[str, str], ...]:
    """The call metadata routing an RPC about ``session_id``: the header, or ``()`` for an id
    that is not a CONTRACT session id (it cannot be a header value; the server refuses it)."""
    if _SESSION_ID.fullmatch(session_id):
        return ((SESSION_HEADER, session_id),)
    return ()


def _address(address: str) -> tuple[str, str]:
    """``(family, "host:port")`` of one ``IP:PORT`` / ``[IPv6]:PORT``; ValueError otherwise."""
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"target {address!r} is not IP:PORT")
    try:
        ip = ipaddress.ip_address(host.removeprefix("[").removesuffix("]"))
    except ValueError:
        raise ValueError(
            f"target {address!r}: a list names IP:PORT addresses; for a host name use one "
            "DNS target resolving to every replica, e.g. 'dns:///svc.ns.svc.cluster.local:50051'"
        ) from None
    return ("ipv4", address) if ip.version == 4 else ("ipv6", address)


#: The URI schemes of gRPC's name resolvers; any other target is ``HOST[:PORT]``.
_SCHEMES = ("dns", "ipv4", "ipv6", "unix", "unix-abstract", "vsock", "xds", "google-c2p")
_HOST = re.compile(r"[A-Za-z0-9._~%-]*")


def target_problem(target: str) -> str | None:
    """Why the string ``target`` names no gRPC server, or None: blank, whitespace in it, an
    http(s) URL (gRPC takes ``HOST:PORT``), an IPv6 address without brackets, a host of
    characters no name has, a port that is no number in 1..65535. A URI of one of gRPC's
    resolvers (``dns:///``, ``ipv4:``, ``unix:``, ...) is left to gRPC."""
    if not target.strip():
        return "must be HOST:PORT of the server, not blank"
    if any(c.isspace() or not c.isprintable() for c in target):
        return f"{target!r} has whitespace or control characters; give HOST:PORT"
    scheme, colon, rest = target.partition(":")
    if colon and scheme.lower() in ("http", "https", "grpc", "grpcs"):
        bare = rest.removeprefix("//").rstrip("/")
        return f"{target!r} is a URL; a gRPC target is HOST:PORT, e.g. {bare!r}"
    if colon and scheme in _SCHEMES:
        return None
    if target.startswith("["):
        host, bracket, after = target[1:].partition("]")
        if not bracket or (after and not after.startswith(":")):
            return f"{target!r} is not [IPV6]:PORT"
        has_port, port = bool(after), after.removeprefix(":")
    else:
        host, has_port, port = target, False, ""
        if colon:
            host, _, port = target.rpartition(":")
            has_port = True
        if ":" in host:
            return f"{target!r}: an IPv6 address goes in brackets, e.g. '[::1]:50051'"
        if not _HOST.fullmatch(host):
            return f"{target!r}: {host!r} is no host name or address"
    if has_port and not (port.isdigit() and 1 <= int(port) <= 65535):
        return f"{target!r}: the port must be a number in 1..65535"
    return None


def channel_target(target: Target) -> tuple[str, bool]:
    """The gRPC target URI for ``target``, and whether it names several addresses.

    A string is used as is (``host:port``, ``dns:///name:port``, ``ipv4:a:p,b:q``, ...) when
    :func:`target_problem` finds nothing, else ArgumentError (a ValueError) naming ``target``.
    A list of ``IP:PORT`` strings (all IPv4 or all IPv6) becomes ``ipv4:a:p,b:q``; a
    one-element list is that address. Raises ValueError for an empty list, a host name in a
    list, or a mix of IPv4 and IPv6.
    """
    if isinstance(target, str):
        if (problem := target_problem(target)) is not None:
            raise ArgumentError("target", problem)
        scheme, _, rest = target.partition(":")
        multi = scheme in ("ipv4", "ipv6") and "," in rest
        return target, multi
    addresses = [_address(a) for a in target]
    if not addresses:
        raise ValueError("the target list is empty")
    families = {family for family, _ in addresses}
    if len(families) > 1:
        raise ValueError("a target list cannot mix IPv4 and IPv6 addresses")
    (family,) = families
    return f"{family}:{','.join(a for _, a in addresses)}", len(addresses) > 1


def check_ring_hash_enabled() -> None:
    """Raise RuntimeError unless grpcio's request-hash-header switch (:data:`RING_HASH_ENV`)
    is on: without it a ring_hash channel fails every RPC with INTERNAL."""
    if os.environ.get(RING_HASH_ENV, "").strip().lower() != "true":
        raise RuntimeError(
            f"session affinity needs {RING_HASH_ENV}=true in the environment "
            f"(it is {os.environ.get(RING_HASH_ENV)!r})"
        )


def load_balancing_config() -> list[dict[str, Any]]:
    """The ``loadBalancingConfig`` of a channel with affinity: ring hash on the header."""
    return [{RING_HASH_POLICY: {"requestHashHeader": SESSION_HEADER}}]


def service_config_json(method_config: list[dict[str, Any]] | None, affinity: bool) -> str | None:
    """A service config (JSON text) from the retry ``method_config`` and the affinity switch,
    or None when it would be empty."""
    config: dict[str, Any] = {}
    if affinity:
        config["loadBalancingConfig"] = load_balancing_config()
    if method_config:
        config["methodConfig"] = method_config
    return json.dumps(config) if config else None
