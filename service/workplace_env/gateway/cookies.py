"""The signed session cookie of the legacy HTTP path, and the MCP session tokens.

Cookie format (CONTRACT "The legacy HTTP path"): the one the reference's web stack writes
(Starlette's ``SessionMiddleware``): ``base64(json.dumps(session))`` signed with an
``itsdangerous.TimestampSigner`` over the secret, in
``<name>=<value>; path=/; Max-Age=1209600; httponly; samesite=lax``. With the same secret a
cookie issued by the reference is read here and the other way round. Like the reference's
Starlette, the cookie is re-sent (and re-stamped) on every response while the session holds
anything; current Starlette only re-sends it when the session changed, so the middleware is
written out here rather than imported.

Session tokens scope an MCP client to one session (it has no cookie jar): a URL-safe, signed,
timestamped ``{"sid": <resources_session_id>}`` (``itsdangerous.URLSafeTimedSerializer``, its
own salt, so a cookie value is never a valid token and vice versa).
"""

from __future__ import annotations

import json
import time
from base64 import b64decode, b64encode
from typing import Any

import itsdangerous
from starlette.datastructures import MutableHeaders
from starlette.requests import HTTPConnection
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from workplace_env.memo import BoundedMemo, MemoPolicy

#: The key of the session dict that names the session (the reference's key).
SESSION_ID_KEY = "session_id"
_TOKEN_SALT = "workplace-env.mcp-session-token"
#: How the request's session cookie read (``scope[COOKIE_STATE_KEY]``): none sent, read,
#: past its Max-Age, or not readable with this gateway's secret.
COOKIE_STATE_KEY = "workplace_env.session_cookie"
COOKIE_ABSENT = "absent"
COOKIE_READ = "read"
COOKIE_EXPIRED = "expired"
COOKIE_UNREADABLE = "unreadable"


class CookieCodec:
    """Encodes and decodes the session cookie's value (see the module docstring).

    Both directions remember their last ``cache_size`` answers: an agent sends the same cookie
    value on every request of an episode, and every response re-sends a value that only changes
    with the second of its timestamp, so the HMAC work is done once per value. A remembered
    decode is still checked against ``max_age_s`` on every use.
    """

    def __init__(self, secret_key: str, max_age_s: int, cache_size: int = 4096) -> None:
        self._signer = itsdangerous.TimestampSigner(secret_key)
        self.max_age_s = max_age_s
        # cookie value -> (session JSON bytes, signed at): valid ones only
        self._decoded: BoundedMemo[str, tuple[bytes, int]] = BoundedMemo(
            cache_size, MemoPolicy.OLDEST
        )
        # (session JSON bytes, second) -> the value signed in that second
        self._encoded: BoundedMemo[tuple[bytes, int], str] = BoundedMemo(
            cache_size, MemoPolicy.OLDEST
        )

    def encode(self, session: dict[str, Any]) -> str:
        """The signed cookie value of ``session``."""
        payload = json.dumps(session).encode("utf-8")
        key = (payload, int(time.time()))
        value = self._encoded.entries.get(key)
        if value is None:
            value = self._signer.sign(b64encode(payload)).decode("utf-8")
            self._encoded.put(key, value)
        return value

    def decode(self, value: str) -> dict[str, Any]:
        """The session in a cookie value; ``{}`` when it is forged, expired or malformed."""
        return self.read(value)[0]

    def read(self, value: str) -> tuple[dict[str, Any], str]:
        """The session in a cookie value and how it read: ``(session, COOKIE_READ)``, or
        ``({}, COOKIE_EXPIRED)`` past ``max_age_s``, or ``({}, COOKIE_UNREADABLE)`` when it is
        forged, signed with another secret or malformed."""
        known = self._decoded.entries.get(value)
        if known is not None:
            age = int(time.time()) - known[1]  # itsdangerous' rule, in whole seconds
            if 0 <= age <= self.max_age_s:
                session = json.loads(known[0])
                return (session, COOKIE_READ) if isinstance(session, dict) else ({}, COOKIE_READ)
            self._decoded.entries.pop(value, None)
        try:
            data, signed_at = self._signer.unsign(
                value.encode("utf-8"), max_age=self.max_age_s, return_timestamp=True
            )
            payload = b64decode(data)
            session = json.loads(payload)
        except itsdangerous.SignatureExpired:
            return {}, COOKIE_EXPIRED
        except (itsdangerous.BadSignature, ValueError, RecursionError):  # binascii/JSON/Unicode
            return {}, COOKIE_UNREADABLE
        self._decoded.put(value, (payload, int(signed_at.timestamp())))
        return (session, COOKIE_READ) if isinstance(session, dict) else ({}, COOKIE_READ)


class SessionCookieMiddleware:
    """ASGI middleware: ``scope["session"]`` from the cookie, ``Set-Cookie`` on every response.

    The session is a plain dict; endpoints read and write it through ``request.session``.
    An invalid or expired cookie reads as an empty session (no error: the route then answers
    as for a client without a session, its detail told by ``scope[COOKIE_STATE_KEY]``).
    """

    def __init__(
        self,
        app: ASGIApp,
        codec: CookieCodec,
        cookie_name: str,
        https_only: bool = False,
    ) -> None:
        self.app = app
        self.codec = codec
        self.cookie_name = cookie_name
        self._attributes = f"path=/; Max-Age={codec.max_age_s}; httponly; samesite=lax"
        if https_only:
            self._attributes += "; secure"

    def set_cookie_value(self, session: dict[str, Any]) -> str:
        """The ``Set-Cookie`` header value for ``session``."""
        return f"{self.cookie_name}={self.codec.encode(session)}; {self._attributes}"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        raw = HTTPConnection(scope).cookies.get(self.cookie_name)
        scope["session"], scope[COOKIE_STATE_KEY] = (
            self.codec.read(raw) if raw else ({}, COOKIE_ABSENT)
        )

        async def send_with_cookie(message: Message) -> None:
            if message["type"] == "http.response.start" and scope["session"]:
                headers = MutableHeaders(scope=message)
                headers.append("set-cookie", self.set_cookie_value(scope["session"]))
            await send(message)

        await self.app(scope, receive, send_with_cookie)


class SessionTokens:
    """Mints and checks the signed session tokens of the MCP endpoint.

    A token names one ``resources_session_id`` and is valid for ``max_age_s`` seconds. The
    gateway mints one only for the session the request's cookie names (knowing a
    cookie session's id is not enough).
    """

    def __init__(self, secret_key: str, max_age_s: int) -> None:
        self._serializer = itsdangerous.URLSafeTimedSerializer(secret_key, salt=_TOKEN_SALT)
        self.max_age_s = max_age_s

    def mint(self, session_id: str) -> str:
        """A token for ``session_id``."""
        return self._serializer.dumps({"sid": session_id})

    def session_of(self, token: str) -> str | None:
        """The session a token names, or None when it is forged, expired or malformed."""
        try:
            payload = self._serializer.loads(token, max_age=self.max_age_s)
        except (itsdangerous.BadData, ValueError):
            return None
        sid = payload.get("sid") if isinstance(payload, dict) else None
        return sid if isinstance(sid, str) and sid else None
