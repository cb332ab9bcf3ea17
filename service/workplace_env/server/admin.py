"""The EnvironmentAdminService servicer (CONTRACT K1-K6) and the bearer-token guard of admin RPCs.

Checkpoint export, batch restore and retire, over the store's checkpoint methods. When the server
has an ``admin_token``, :class:`AdminTokenInterceptor` refuses admin calls without the metadata
``authorization: Bearer <token>`` (UNAUTHENTICATED); the environment service stays open.
"""

from __future__ import annotations

import hmac

import grpc

from workplace.env.v1 import admin_pb2 as admin_pb
from workplace.env.v1 import admin_pb2_grpc as admin_grpc
from workplace_env.errors import InvalidRequest
from workplace_env.model import session_id_violations
from workplace_env.server import convert
from workplace_env.server.servicer import _rpc
from workplace_env.sessions import SessionStore

#: Target size of one streamed chunk of snapshots (bytes), well under the message limit.
CHUNK_BYTES = 8 * 1024 * 1024
ADMIN_SERVICE_NAME = admin_pb.DESCRIPTOR.services_by_name["EnvironmentAdminService"].full_name


class AdminServicer(admin_grpc.EnvironmentAdminServiceServicer):
    """Serves checkpoint export, restore and retire of one :class:`SessionStore`."""

    def __init__(self, store: SessionStore) -> None:
        self.store = store

    def ExportSessions(self, request, context):  # type: ignore[no-untyped-def]
        snapshots, missing, failures = self.store.export(list(request.resources_session_ids))
        chunk: list[admin_pb.SessionSnapshot] = []
        size = 0
        for snapshot in snapshots:
            message = convert.snapshot_message(snapshot)
            if chunk and size + message.ByteSize() > CHUNK_BYTES:
                yield admin_pb.ExportSessionsResponse(snapshots=chunk)
                chunk, size = [], 0
            chunk.append(message)
            size += message.ByteSize()
        yield admin_pb.ExportSessionsResponse(
            snapshots=chunk,
            missing_session_ids=missing,
            failures=[
                admin_pb.ExportFailure(resources_session_id=sid, reason=why)
                for sid, why in failures
            ],
        )

    @_rpc
    def RestoreSessions(self, request_iterator, context):  # type: ignore[no-untyped-def]
        snapshots = []
        for request in request_iterator:
            for message in request.snapshots:
                snapshots.append(convert.snapshot(message, f"snapshots[{len(snapshots)}]"))
        return admin_pb.RestoreSessionsResponse(restored_count=self.store.restore(snapshots))

    @_rpc
    def RetireSession(self, request, context):  # type: ignore[no-untyped-def]
        violations = session_id_violations(request.resources_session_id)
        if violations:
            raise InvalidRequest(violations, request.resources_session_id)
        return admin_pb.RetireSessionResponse(
            retired=self.store.retire(request.resources_session_id)
        )


class AdminTokenInterceptor(grpc.ServerInterceptor):
    """Refuses admin RPCs whose ``authorization`` metadata is not ``Bearer <token>``."""

    def __init__(self, token: str) -> None:
        self._token = token.encode()
        self._prefix = f"/{ADMIN_SERVICE_NAME}/"

    def intercept_service(self, continuation, handler_call_details):  # type: ignore[no-untyped-def]
        if not handler_call_details.method.startswith(self._prefix):
            return continuation(handler_call_details)
        given = str(dict(handler_call_details.invocation_metadata or ()).get("authorization", ""))
        scheme, _, token = given.partition(" ")
        # The scheme is case-insensitive (RFC 6750); the token is compared in constant time.
        if scheme.lower() == "bearer" and hmac.compare_digest(token.encode(), self._token):
            return continuation(handler_call_details)

        def refuse(request, context):  # type: ignore[no-untyped-def]
            context.abort(grpc.StatusCode.UNAUTHENTICATED, "admin RPCs need a valid bearer token")

        handler = continuation(handler_call_details)
        if handler is not None and handler.unary_stream is not None:
            return grpc.unary_stream_rpc_method_handler(refuse)
        if handler is not None and handler.stream_unary is not None:
            return grpc.stream_unary_rpc_method_handler(refuse)
        return grpc.unary_unary_rpc_method_handler(refuse)
