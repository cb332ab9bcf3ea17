"""Scale-out: sessions spread over server processes by gRPC ring_hash on the session
header, each session on one process; a process SIGKILLed mid-run loses only its sessions, which
answer SESSION_LOST and recover (checkpoint restore or replay) to the uninterrupted results.

The cluster is three ``workplace-env serve`` subprocesses on loopback; placement is read from
their Prometheus metrics, and from a read-only probe call on the victim's own address.
"""

from __future__ import annotations

import dataclasses
import json
import signal
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import grpc
import pytest
import yaml

from tests.helpers import (
    READ_ONLY,
    REPO,
    SCRIPTS,
    Expected,
    ServeProcess,
    error_info,
    predicted,
    script,
    task_row,
    uninterrupted,
)
from workplace.env.v1 import admin_pb2 as admin_pb
from workplace.env.v1 import admin_pb2_grpc as admin_grpc
from workplace.env.v1 import environment_pb2 as pb
from workplace.env.v1 import environment_pb2_grpc as pb_grpc
from workplace_env import session_header
from workplace_env.config import Settings
from workplace_env_client import (
    RING_HASH_ENV,
    SESSION_HEADER,
    EnvironmentClient,
    InvalidRequestError,
    Recovery,
    ReplayDivergedError,
    Session,
    SessionHeaderMismatchError,
    SessionLostError,
    channel_options,
    task_from_row,
)
from workplace_env_client.client import SERVICE
from workplace_env_client.errors import from_rpc_error
from workplace_env_client.routing import channel_target, service_config_json

SESSIONS = 1_000
BEFORE_CHECKPOINT, BEFORE_KILL = 10, 12  # calls made before the checkpoint, before the kill


# -- the workload --------------------------------------------------------------------------------

#: The admin token of the serve processes (admin RPCs are off without one, CONTRACT A1).
ADMIN_TOKEN = "scale-out-admin"
SERVE_FLAGS = ("--metrics-address", "127.0.0.1:0", "--log-level", "ERROR")
SERVE_FLAGS += ("--admin-token", ADMIN_TOKEN)


@pytest.fixture(scope="module")
def expected(sandbox) -> dict[int, Expected]:
    """Each script's outputs, reward and table diffs in an uninterrupted run (in-process)."""
    return uninterrupted(sandbox, "scale")


# -- the cluster ---------------------------------------------------------------------------------


@pytest.fixture
def cluster() -> Iterator[list[ServeProcess]]:
    servers = [
        ServeProcess(*SERVE_FLAGS) for _ in range(3)
    ]  # started together: they import in parallel
    try:
        for server in servers:
            server.ready()
        yield servers
    finally:
        for server in servers:
            server.stop()


# -- the three-process run -----------------------------------------------------------------------


@dataclass
class Run:
    """One session of the run: its handle, outputs so far, and what happened to it."""

    index: int
    session: Session
    outputs: list[Any] = field(default_factory=list)
    lost: SessionLostError | None = None

    @property
    def k(self) -> int:
        return self.index % SCRIPTS


def _call(run: Run, start: int, stop: int) -> None:
    for name, arguments in script(run.k)[start:stop]:
        run.outputs.append(run.session.call_tool(name, arguments))


def test_sessions_stay_on_one_process_and_survive_losing_one(cluster, expected):
    targets = [s.target for s in cluster]
    with (
        ThreadPoolExecutor(max_workers=8) as pool,
        EnvironmentClient(targets, timeout_s=30, admin_token=ADMIN_TOKEN) as env,
    ):
        admin = env.admin()  # the same channel, so restores land where the ring maps each id
        runs: list[Run] = []

        def start(i: int) -> Run:
            k = i % SCRIPTS
            sid, episode = f"scale-{i}", (f"r{i}", 0)
            row = task_row(k)
            env.seed(sid, episode, ("scale", f"t{k}"), row)
            handle = Session(
                env,
                sid,
                episode,
                task_id=("scale", f"t{k}"),
                task=task_from_row(row),
                admin=admin,
                recovery="replay" if i % 3 == 2 else None,
            )
            run = Run(i, handle)
            _call(run, 0, BEFORE_CHECKPOINT)
            return run

        # 1,000 sessions x 10 calls through the multi-target client: no NOT_FOUND anywhere.
        runs = list(pool.map(start, range(SESSIONS)))
        live = [s.live() for s in cluster]
        assert sum(live) == SESSIONS and sum(s.seeds() for s in cluster) == SESSIONS
        assert min(live) > SESSIONS // 10, live  # ring_hash spread them over all three
        # Each session was seeded on exactly one process, and every one of its calls ran there.
        assert [s.calls_ok() for s in cluster] == [BEFORE_CHECKPOINT * n for n in live]

        # The ring depends on the addresses, not their order: another client agrees.
        with EnvironmentClient(list(reversed(targets))) as other:
            for run in runs[:100]:
                other.call_tool_raw(run.session.id, *READ_ONLY)

        # Which sessions does the victim hold? A read-only call on its own address tells.
        victim, survivors = cluster[0], cluster[1:]
        with EnvironmentClient(victim.target, max_attempts=1) as direct:

            def held(run: Run) -> bool:
                try:
                    direct.call_tool_raw(run.session.id, *READ_ONLY)
                except SessionLostError:
                    return False
                return True

            on_victim = {r.index for r, h in zip(runs, pool.map(held, runs), strict=True) if h}
        assert len(on_victim) == live[0]
        by_checkpoint = {i for i in on_victim if i % 3 == 0}
        by_replay = {i for i in on_victim if i % 3 == 1}
        automatic = {i for i in on_victim if i % 3 == 2}
        assert by_checkpoint and by_replay and automatic

        # The caller keeps checkpoints (after 10 calls) of some sessions, then 2 more calls.
        def checkpoint_then_call(run: Run) -> None:
            if run.index in by_checkpoint or run.index % 50 == 0:
                run.session.checkpoint()
            _call(run, BEFORE_CHECKPOINT, BEFORE_KILL)

        list(pool.map(checkpoint_then_call, runs))
        survivor_live = [s.live() for s in survivors]

        victim.proc.send_signal(signal.SIGKILL)
        victim.proc.wait(timeout=30)

        # The rest of each episode. The victim's sessions answer SESSION_LOST from the process
        # their id maps to now, and recover at the caller's choice.
        def finish(run: Run) -> None:
            k = run.k
            try:
                _call(run, BEFORE_KILL, BEFORE_KILL + 1)
            except SessionLostError as exc:
                run.lost = exc
                strategy = "checkpoint" if run.index in by_checkpoint else "replay"
                run.session.recover(strategy)
                _call(run, BEFORE_KILL, BEFORE_KILL + 1)
            _call(run, BEFORE_KILL + 1, len(script(k)))
            result = run.session.verify(predicted(k))
            assert (result.reward, result.tables) == (expected[k].reward, expected[k].tables)

        list(pool.map(finish, runs))

        for run in runs:
            assert run.outputs == expected[run.k].outputs, run.session.id
            recoveries = run.session.recoveries
            if run.index not in on_victim:  # the other processes' sessions: untouched
                assert run.lost is None and recoveries == (), run.session.id
                continue
            if run.index in automatic:  # recovered inside call_tool, by replay
                assert run.lost is None
            else:
                assert run.lost is not None, run.session.id
                assert run.lost.code == grpc.StatusCode.NOT_FOUND
                assert run.lost.reason == "SESSION_LOST"
                assert run.lost.session_id == run.session.id
            (recovery,) = recoveries
            if run.index in by_checkpoint:
                assert (recovery.strategy, recovery.restored) == ("checkpoint", True)
                assert recovery.replayed == BEFORE_KILL - BEFORE_CHECKPOINT
            else:
                assert (recovery.strategy, recovery.restored) == ("replay", False)
                assert recovery.replayed == BEFORE_KILL
        # The survivors kept their own sessions and took over exactly the victim's.
        gained = sum(s.live() for s in survivors) - sum(survivor_live)
        assert gained == len(on_victim)
        assert sum(s.seeds() for s in survivors) == SESSIONS  # 1,000 = theirs + the recovered

        def close(run: Run) -> str:
            return env.close_session(run.session.id, run.session.episode)

        assert set(pool.map(close, runs)) == {"CLOSED"}


# -- the header check and the SDK's routing pieces -------------------------------------------


pytestmark = pytest.mark.server(settings=Settings(admin_open=True))


def _reason(error: grpc.RpcError) -> str:
    return error_info(error).reason


def test_header_naming_another_session_is_refused_on_every_rpc(server):
    target = f"127.0.0.1:{server.port}"
    with EnvironmentClient(target) as env:
        env.seed("hdr-a", ("r", 0), ("scale", "t"), {"id": "t"})
        env.call_tool("hdr-a", *READ_ONLY)  # the SDK's own header matches
    other = ((SESSION_HEADER, "hdr-b"),)
    with grpc.insecure_channel(target) as channel:
        stub = pb_grpc.EnvironmentServiceStub(channel)
        admin = admin_grpc.EnvironmentAdminServiceStub(channel)
        episode = pb.EpisodeId(rollout_id="r")
        snapshot = admin_pb.SessionSnapshot(resources_session_id="hdr-a")
        refused = [
            lambda: stub.SeedSession(
                pb.SeedSessionRequest(
                    resources_session_id="hdr-a",
                    episode_id=episode,
                    task_id=pb.TaskId(taskset="scale", task_id="t"),
                    task=pb.WorkplaceTask(id="t"),
                ),
                metadata=other,
            ),
            lambda: stub.CallTool(
                pb.CallToolRequest(
                    resources_session_id="hdr-a", tool_name=READ_ONLY[0], arguments=READ_ONLY[1]
                ),
                metadata=other,
            ),
            lambda: stub.Verify(
                pb.VerifyRequest(
                    resources_session_id="hdr-a", function_calls=pb.FunctionCallList()
                ),
                metadata=other,
            ),
            lambda: stub.CloseSession(
                pb.CloseSessionRequest(resources_session_id="hdr-a", episode_id=episode),
                metadata=other,
            ),
            lambda: admin.RetireSession(
                admin_pb.RetireSessionRequest(resources_session_id="hdr-a"), metadata=other
            ),
            lambda: list(
                admin.ExportSessions(
                    admin_pb.ExportSessionsRequest(resources_session_ids=["hdr-a"]),
                    metadata=other,
                )
            ),
            lambda: admin.RestoreSessions(
                iter([admin_pb.RestoreSessionsRequest(snapshots=[snapshot])]), metadata=other
            ),
        ]
        for rpc in refused:
            with pytest.raises(grpc.RpcError) as caught:
                rpc()
            assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert _reason(caught.value) == session_header.REASON
        # Nothing ran: the session is still live and seeded.
        stub.CallTool(
            pb.CallToolRequest(
                resources_session_id="hdr-a", tool_name=READ_ONLY[0], arguments=READ_ONLY[1]
            ),
            metadata=((SESSION_HEADER, "hdr-a"),),
        )
        # A request that names no session passes whatever its header.
        stub.ListTools(pb.ListToolsRequest(), metadata=other)
    with EnvironmentClient(target) as env:
        error = None
        try:
            env.stub.CallTool(
                pb.CallToolRequest(
                    resources_session_id="hdr-a", tool_name=READ_ONLY[0], arguments="{}"
                ),
                metadata=other,
            )
        except grpc.RpcError as exc:
            error = from_rpc_error(exc)
        assert isinstance(error, SessionHeaderMismatchError)
        assert isinstance(error, InvalidRequestError) and error.session_id == "hdr-a"
        env.close_session("hdr-a", ("r", 0))


@pytest.mark.parametrize("batched", [False, True], ids=["a-message-each", "one-message"])
def test_every_snapshot_of_a_restore_stream_is_checked_against_the_header(server, batched):
    # The header names the first snapshot's session; the second snapshot, in a later message
    # of the stream or later in the same message, names another: refused, nothing installed.
    target = f"127.0.0.1:{server.port}"
    first, second = f"hdr-k{int(batched)}-a", f"hdr-k{int(batched)}-b"
    with EnvironmentClient(target) as env, env.admin() as admin:
        for k, sid in enumerate((first, second)):
            env.seed(sid, (f"r{k}", 0), ("scale", "t"), {"id": "t"})
        snapshots = admin.export_sessions([first, second]).snapshots
        assert [s.resources_session_id for s in snapshots] == [first, second]
        for sid in (first, second):
            assert admin.retire_session(sid)
        if batched:
            stream = [admin_pb.RestoreSessionsRequest(snapshots=snapshots)]
        else:
            stream = [admin_pb.RestoreSessionsRequest(snapshots=[s]) for s in snapshots]
        with pytest.raises(grpc.RpcError) as caught:
            admin.stub.RestoreSessions(iter(stream), metadata=((SESSION_HEADER, first),))
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert _reason(caught.value) == session_header.REASON
        assert admin.export_sessions([first, second]).missing == [first, second]
        # The same stream without the header restores both: only the header was wrong.
        assert admin.stub.RestoreSessions(iter(stream)).restored_count == 2
        for sid in (first, second):
            assert admin.retire_session(sid)


def test_an_id_that_is_not_a_header_value_still_gets_the_bad_request(server):
    with (
        EnvironmentClient(f"127.0.0.1:{server.port}") as env,
        pytest.raises(InvalidRequestError) as caught,
    ):
        env.call_tool("not valid\n", *READ_ONLY)
    assert caught.value.reason != session_header.REASON
    assert {v.field for v in caught.value.violations} == {"resources_session_id"}


def test_target_lists_become_one_ipv4_or_ipv6_target():
    assert channel_target("127.0.0.1:1") == ("127.0.0.1:1", False)
    assert channel_target(["127.0.0.1:1", "10.0.0.2:2"]) == ("ipv4:127.0.0.1:1,10.0.0.2:2", True)
    assert channel_target(["[::1]:1", "[fd00::2]:2"]) == ("ipv6:[::1]:1,[fd00::2]:2", True)
    assert channel_target(["127.0.0.1:1"]) == ("ipv4:127.0.0.1:1", False)
    assert channel_target("ipv4:127.0.0.1:1,127.0.0.1:2") == ("ipv4:127.0.0.1:1,127.0.0.1:2", True)
    assert channel_target("dns:///svc:50051") == ("dns:///svc:50051", False)
    for bad in ([], ["svc:1"], ["127.0.0.1"], ["127.0.0.1:1", "[::1]:2"]):
        with pytest.raises(ValueError):
            channel_target(bad)


def test_affinity_config_is_ring_hash_on_the_header_and_keeps_the_retries(monkeypatch):
    options = dict(channel_options(4, affinity=True))
    config = json.loads(options["grpc.service_config"])
    assert config["loadBalancingConfig"] == [
        {"ring_hash_experimental": {"requestHashHeader": SESSION_HEADER}}
    ]
    assert config["methodConfig"][0]["retryPolicy"]["maxAttempts"] == 4
    assert SESSION_HEADER == session_header.SESSION_HEADER  # the header X4 checks
    assert service_config_json(None, False) is None
    monkeypatch.setenv(RING_HASH_ENV, "false")
    with pytest.raises(RuntimeError, match=RING_HASH_ENV):
        EnvironmentClient(["127.0.0.1:1", "127.0.0.1:2"])
    EnvironmentClient("127.0.0.1:1").close()  # one address: no ring, no switch needed


def test_a_dns_target_with_affinity_serves_sessions(server):
    with EnvironmentClient(f"dns:///127.0.0.1:{server.port}", affinity=True) as env:
        assert len(env.list_tools()) == 27  # no header: any replica
        with env.session(task_row(1)) as s:
            assert s.call_tool(*script(1)[0]) == "Email sent successfully."


def test_recovering_a_session_the_server_still_holds_changes_nothing(server):
    with EnvironmentClient(f"127.0.0.1:{server.port}") as env, env.session(task_row(3)) as s:
        for name, arguments in script(3)[:4]:
            s.call_tool(name, arguments)
        assert s.recover("replay") == Recovery("replay", False, 0, True)
        assert s.checkpoint().call_count == 4
        # The restore is refused (SESSION_LIVE) and the seed finds the live session.
        assert s.recover("checkpoint") == Recovery("checkpoint", False, 0, True)
        found = s.call_tool(*script(3)[4])  # the search: one sent email, not two
        assert found["pagination"]["total_emails"] == 1


def test_recover_after_retire_replays_and_a_diverging_replay_is_an_error(server):
    with EnvironmentClient(f"127.0.0.1:{server.port}") as env:
        admin = env.admin()
        with env.session(task_row(5), recovery="replay") as s:
            first = [s.call_tool(n, a) for n, a in script(5)[:5]]
            assert admin.retire_session(s.id) is True  # K6: the server lets the session go
            # Recovered inside the call: the next output is the uninterrupted one.
            assert s.call_tool(*script(5)[5]) == "Email deleted successfully."
            assert s.recoveries == (Recovery("replay", False, 5, False),)
            assert len(s.calls) == 6 and first[4]["pagination"]["total_emails"] == 1
            assert admin.retire_session(s.id) is True
            s._calls[0] = dataclasses.replace(s._calls[0], output_digest=bytes(8))
            with pytest.raises(ReplayDivergedError) as caught:
                s.recover("replay")
            assert caught.value.code == grpc.StatusCode.DATA_LOSS


def test_envoy_config_hashes_the_session_header_over_healthy_http2_replicas():
    config = yaml.safe_load((REPO / "deploy" / "envoy.yaml").read_text())
    (listener,) = config["static_resources"]["listeners"]
    (manager,) = listener["filter_chains"][0]["filters"]
    (host,) = manager["typed_config"]["route_config"]["virtual_hosts"]
    (route,) = host["routes"]
    assert route["route"]["hash_policy"] == [{"header": {"header_name": SESSION_HEADER}}]
    (cluster,) = config["static_resources"]["clusters"]
    assert route["route"]["cluster"] == cluster["name"]
    assert (cluster["type"], cluster["lb_policy"]) == ("STRICT_DNS", "RING_HASH")
    options = cluster["typed_extension_protocol_options"]
    (http,) = options.values()
    assert "http2_protocol_options" in http["explicit_http_config"]
    (check,) = cluster["health_checks"]
    assert check["grpc_health_check"]["service_name"] == SERVICE
    # A slow answer is not a failure: only a long silence takes a pod out.
    assert check["timeout"] == "30s"
    assert cluster["common_lb_config"]["healthy_panic_threshold"] == {"value": 0}
    kinds = [
        d["kind"] for d in yaml.safe_load_all((REPO / "deploy" / "kubernetes.yaml").read_text())
    ]
    assert kinds == ["Service", "Deployment", "Service", "Deployment"]
    replicas = list(yaml.safe_load_all((REPO / "deploy" / "kubernetes.yaml").read_text()))[1]
    server = replicas["spec"]["template"]["spec"]["containers"][0]
    assert server["readinessProbe"]["timeoutSeconds"] >= 30
    assert server["livenessProbe"]["timeoutSeconds"] >= 30
