"""The server's pipeline: every method of every service wrapped in its steps, once, and the same
wrapped handlers callable in-process."""

from __future__ import annotations

from concurrent import futures
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection, reflection_pb2, reflection_pb2_grpc

from tests.helpers import HANG_S
from workplace.env.v1 import admin_pb2 as admin_pb
from workplace.env.v1 import admin_pb2_grpc as admin_grpc
from workplace.env.v1 import environment_pb2 as pb
from workplace.env.v1 import environment_pb2_grpc as pb_grpc
from workplace_env import errors
from workplace_env.server.admin import ADMIN_SERVICE_NAME
from workplace_env.server.app import SERVICE_NAME
from workplace_env.server.pipeline import Method, Pipeline, Undecodable
from workplace_env.server.status import to_status
from workplace_env_client import reasons
from workplace_env_client.errors import from_rpc_error
from workplace_env_client.messages import seed_request

TASK = {"id": "t", "ground_truth": []}


class _Aborted(Exception):
    pass


class _Context:
    """The little of a servicer context the steps and servicer use, for in-process calls."""

    def __init__(self, metadata: tuple[tuple[str, str], ...] = ()) -> None:
        self._metadata = metadata
        self.status: Any = None

    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        return self._metadata

    def abort_with_status(self, status: Any) -> None:
        self.status = status
        raise _Aborted

    def code(self) -> grpc.StatusCode | None:
        return None if self.status is None else self.status.code

    def trailing_metadata(self) -> Any:
        return None if self.status is None else self.status.trailing_metadata

    def is_active(self) -> bool:
        return True


def test_an_in_process_call_runs_through_the_servers_steps(make_server):
    """``RunningServer.pipeline.service`` answers as the server does over gRPC: counted in its
    metrics, a session header naming another session refused with the same status."""
    served = make_server()
    handlers = served.running.pipeline.service(SERVICE_NAME)
    seed = seed_request("ip-1", ("r", 0), ("u", "t"), TASK)
    answer = handlers["SeedSession"].unary_unary(seed, _Context())
    assert answer.state == pb.SESSION_STATE_SEEDED
    metrics = served.running.metrics
    ok = {"method": "SeedSession", "code": "OK"}
    assert metrics.registry.get_sample_value("workplace_env_rpc_total", ok) == 1
    assert metrics.registry.get_sample_value("workplace_env_seeds_total") == 1

    call = pb.CallToolRequest(resources_session_id="ip-1", tool_name="email_search_emails")
    context = _Context((("x-resources-session-id", "ip-2"),))
    with pytest.raises(_Aborted):
        handlers["CallTool"].unary_unary(call, context)
    with pytest.raises(grpc.RpcError) as over_grpc:
        served.raw.stub.CallTool(call, metadata=context.invocation_metadata(), timeout=HANG_S)
    assert context.status.code == over_grpc.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert context.status.details == over_grpc.value.details()
    labels = {"method": "CallTool", "reason": "SESSION_HEADER_MISMATCH"}
    assert metrics.registry.get_sample_value("workplace_env_errors_total", labels) == 2


def _refuse_all(method: Method, behaviour: Any) -> Any:
    refusal = to_status(
        errors.Unauthenticated(f"{method.full} refused", reasons.ADMIN_TOKEN_INVALID.name),
        method.name,
    )

    def refused(request: Any, context: grpc.ServicerContext) -> Any:
        context.abort_with_status(refusal)

    return refused


@pytest.fixture
def refusing_server():
    """A server whose four services are registered through a pipeline of one refusing step."""
    pool = futures.ThreadPoolExecutor(4)
    server = grpc.server(pool)
    pipeline = Pipeline([_refuse_all], server)
    pb_grpc.add_EnvironmentServiceServicer_to_server(pb_grpc.EnvironmentServiceServicer(), pipeline)
    admin_grpc.add_EnvironmentAdminServiceServicer_to_server(
        admin_grpc.EnvironmentAdminServiceServicer(), pipeline
    )
    health_pb2_grpc.add_HealthServicer_to_server(health_pb2_grpc.HealthServicer(), pipeline)
    names = (SERVICE_NAME, ADMIN_SERVICE_NAME, "grpc.health.v1.Health", reflection.SERVICE_NAME)
    reflection.enable_server_reflection(names, pipeline)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield pipeline, grpc.insecure_channel(f"127.0.0.1:{port}")
    server.stop(None)


def test_no_method_of_any_service_is_served_around_the_steps(refusing_server):
    """Every method of the environment, admin, health and reflection services answers through
    the steps (here one that refuses all), whichever arity: none is registered unwrapped."""
    pipeline, channel = refusing_server
    registered = {
        service: sorted(pipeline.service(service))
        for service in (SERVICE_NAME, ADMIN_SERVICE_NAME, "grpc.health.v1.Health")
    }
    assert registered[SERVICE_NAME] == sorted(
        m.name for m in pb.DESCRIPTOR.services_by_name["EnvironmentService"].methods
    )
    calls = [
        lambda: pb_grpc.EnvironmentServiceStub(channel).ListTools(pb.ListToolsRequest()),
        lambda: admin_grpc.EnvironmentAdminServiceStub(channel).RetireSession(
            admin_pb.RetireSessionRequest(resources_session_id="x")
        ),
        lambda: list(
            admin_grpc.EnvironmentAdminServiceStub(channel).ExportSessions(
                admin_pb.ExportSessionsRequest()
            )
        ),
        lambda: admin_grpc.EnvironmentAdminServiceStub(channel).RestoreSessions(
            iter([admin_pb.RestoreSessionsRequest()])
        ),
        lambda: health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest()),
        lambda: list(health_pb2_grpc.HealthStub(channel).Watch(health_pb2.HealthCheckRequest())),
        lambda: list(
            reflection_pb2_grpc.ServerReflectionStub(channel).ServerReflectionInfo(
                iter([reflection_pb2.ServerReflectionRequest(list_services="")])
            )
        ),
    ]
    for call in calls:
        with pytest.raises(grpc.RpcError) as err:
            call()
        assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED
        assert err.value.details().endswith(" refused")
        assert from_rpc_error(err.value).reason == reasons.ADMIN_TOKEN_INVALID.name


def test_a_behaviours_thread_pool_is_kept_by_every_step_around_it():
    """grpcio runs a behaviour on its ``experimental_thread_pool``: the steps wrapped around
    the one that set it keep it, so the registered behaviour still carries it."""
    lane = futures.ThreadPoolExecutor(1)
    seen: list[str] = []

    def on_lane(method: Method, behaviour: Any) -> Any:
        def run(request: Any, context: Any) -> Any:
            return behaviour(request, context)

        run.experimental_thread_pool = lane  # type: ignore[attr-defined]
        return run

    def outer(method: Method, behaviour: Any) -> Any:
        def run(request: Any, context: Any) -> Any:
            seen.append(method.full)
            return behaviour(request, context)

        return run

    pipeline = Pipeline([outer, on_lane])
    pipeline.add_registered_method_handlers(
        "pkg.S", {"M": grpc.unary_unary_rpc_method_handler(lambda request, context: request)}
    )
    handler = pipeline.service("pkg.S")["M"]
    assert handler.unary_unary.experimental_thread_pool is lane
    assert handler.unary_unary(b"x", None) == b"x" and seen == ["/pkg.S/M"]
    lane.shutdown()


def test_bytes_that_do_not_parse_reach_the_steps_as_undecodable():
    pipeline = Pipeline([])
    pipeline.add_registered_method_handlers(
        "pkg.S",
        {
            "M": grpc.unary_unary_rpc_method_handler(
                lambda request, context: request,
                request_deserializer=pb.SeedSessionRequest.FromString,
            )
        },
    )
    parse = pipeline.service("pkg.S")["M"].request_deserializer
    assert parse(b"\x0a\x01a").resources_session_id == "a"
    assert isinstance(parse(b"\xff\xff\xff"), Undecodable)
