"""Listening addresses: ``HOST:PORT`` parsed, bound, and a refused bind named plainly."""

from __future__ import annotations

import socket


class BindError(RuntimeError):
    """An address that cannot be listened on: ``cannot bind ADDRESS: reason``; ``address`` is
    the address as given."""

    def __init__(self, address: str, reason: object) -> None:
        super().__init__(f"cannot bind {address}: {reason}")
        self.address = address


def parse_address(address: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[v6]:PORT`` for IPv6) as ``(host, port)``. Raises ValueError."""
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise ValueError(f"address must be HOST:PORT, got {address!r}")
    return host.removeprefix("[").removesuffix("]"), int(port)


def bind_socket(address: str, backlog: int = 2048) -> socket.socket:
    """A listening TCP socket on ``address``. Raises :class:`BindError` when it cannot be
    bound (the OS's reason: ``[Errno 98] Address already in use``), ValueError when
    ``address`` is not ``HOST:PORT``."""
    host, port = parse_address(address)
    try:
        family, kind, proto, _, sockaddr = socket.getaddrinfo(
            host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
        sock = socket.socket(family, kind, proto)
    except OSError as exc:
        raise BindError(address, exc) from exc
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(sockaddr)
        sock.listen(backlog)  # connections queue from now on, before the server accepts
    except OSError as exc:
        sock.close()
        raise BindError(address, exc) from exc
    sock.set_inheritable(True)
    return sock


def check_free(address: str) -> None:
    """Raise :class:`BindError` (the OS's reason) when ``address`` cannot be listened on now: a
    trial bind, closed at once. Port 0 and what is not ``HOST:PORT`` are left to the server."""
    try:
        _, port = parse_address(address)
    except ValueError:
        return
    if port != 0:
        bind_socket(address).close()


def bind_failure(address: str, fallback: RuntimeError) -> RuntimeError:
    """Why a server (gRPC) that only says it failed could not listen on ``address``: a trial
    bind's :class:`BindError` in the OS's words (an address in use, not this host's), else
    ``fallback`` itself (the address is free: something else failed). The trial socket is
    closed at once."""
    try:
        bind_socket(address).close()
    except BindError as refused:
        return refused
    except ValueError:
        pass
    return fallback
