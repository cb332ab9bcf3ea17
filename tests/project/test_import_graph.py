"""The project's import graph: no import cycles, and an SDK that needs no server code.

The graph is grimp's static one over the installed packages: every ``import`` counts, those inside
functions and ``TYPE_CHECKING`` blocks included, since a cycle hidden there is still two modules
that cannot be understood (or split apart) one without the other.
"""

from __future__ import annotations

import sys
from copy import deepcopy

import grimp
import pytest

#: The server, the SDK and the generated stubs.
PACKAGES = ("workplace_env", "workplace_env_client", "workplace")


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph(*PACKAGES, cache_dir=None)


def strongly_connected(graph: grimp.ImportGraph) -> list[list[str]]:
    """The import cycles of ``graph``: its strongly connected components of two or more
    modules (Tarjan's algorithm, iterative so deep graphs cannot overflow the stack)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph.modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            module, edges = work[-1]
            step = next(edges, None)
            if step is not None:
                if step not in index:
                    index[step] = low[step] = len(index)
                    stack.append(step)
                    on_stack.add(step)
                    work.append((step, iter(sorted(graph.find_modules_directly_imported_by(step)))))
                elif step in on_stack:
                    low[module] = min(low[module], index[step])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[module])
            if low[module] == index[module]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == module:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def describe(graph: grimp.ImportGraph, component: list[str]) -> str:
    members = set(component)
    edges = [
        f"  {a} -> {b} (line {d['line_number']})"
        for a in component
        for b in sorted(graph.find_modules_directly_imported_by(a) & members)
        for d in graph.get_import_details(importer=a, imported=b)[:1]
    ]
    return "\n".join([" <-> ".join(component), *edges])


def test_the_cycle_finder_finds_a_cycle():
    toy = grimp.ImportGraph()
    for module in ("p.a", "p.b", "p.c", "p.d"):
        toy.add_module(module)
    toy.add_import(importer="p.a", imported="p.b")
    toy.add_import(importer="p.b", imported="p.c")
    toy.add_import(importer="p.c", imported="p.a")
    toy.add_import(importer="p.d", imported="p.a")
    assert strongly_connected(toy) == [["p.a", "p.b", "p.c"]]
    toy.remove_import(importer="p.c", imported="p.a")
    assert strongly_connected(toy) == []


def test_no_import_cycles(graph):
    assert len(graph.modules) > 50, "grimp found too few modules: is the project installed?"
    cycles = strongly_connected(graph)
    assert not cycles, "import cycles:\n" + "\n".join(describe(graph, c) for c in cycles)


def test_the_sdk_imports_no_server_code(graph):
    """The SDK distribution ships without ``workplace_env``: nothing in it may import that."""
    chain = graph.find_shortest_chain(
        importer="workplace_env_client", imported="workplace_env", as_packages=True
    )
    assert chain is None, f"the SDK imports the server: {' -> '.join(chain or ())}"


def test_the_sdk_needs_only_its_declared_dependencies():
    """The SDK and the stubs import, beyond the standard library, only what the SDK
    distribution's required dependencies provide (client/pyproject.toml): grpcio (``grpc``),
    grpcio-status (``grpc_status``, and ``google.rpc`` through googleapis-common-protos) and
    protobuf (``google.protobuf``). A package an optional extra brings in goes in ``OPTIONAL``."""
    required = {"grpc", "grpc_status", "google"}
    optional = {"openai"}  # the "model" extra: rollouts.openai_client() imports it lazily
    optional |= {"pytest"}  # pytest_plugin: loaded by pytest only (its pytest11 entry point)
    optional |= {"openenv"}  # the "openenv" extra: workplace_env_client.openenv alone
    full = grimp.build_graph(*PACKAGES, include_external_packages=True, cache_dir=None)
    sdk = set()
    for package in ("workplace_env_client", "workplace"):
        sdk |= full.find_descendants(package) | {package}
    imported = {
        module.split(".")[0]
        for importer in sdk
        for module in full.find_modules_directly_imported_by(importer)
    }
    unexpected = imported - sys.stdlib_module_names - required - optional
    assert unexpected - {"workplace_env_client", "workplace"} == set()
    openenv_importers = {
        importer
        for importer in sdk
        if any(
            m.split(".")[0] == "openenv" for m in full.find_modules_directly_imported_by(importer)
        )
    }
    assert openenv_importers == {"workplace_env_client.openenv"}


# -- the session store's parts, and the test support ----------------------------------

#: Test support shipped in the server distribution; the server's own code must not import it.
TEST_SUPPORT = "workplace_env.testing"

#: The modules of ``workplace_env.sessions``, each importing only those after it.
SESSION_LAYERS = (
    "store",
    "lifecycle",
    "checkpoints",
    "sweep",
    "table",
    "records",
    "scope",
    "hooks",
    "types",
)


def importers_of_test_support(graph: grimp.ImportGraph) -> set[str]:
    """The modules outside :data:`TEST_SUPPORT` that import it, directly or through others."""
    found = graph.find_downstream_modules(TEST_SUPPORT, as_package=True)
    return {m for m in found if m != TEST_SUPPORT and not m.startswith(TEST_SUPPORT + ".")}


def session_layer_breaches(graph: grimp.ImportGraph) -> list[str]:
    """Imports in ``workplace_env.sessions`` from a module to one before it in
    :data:`SESSION_LAYERS` (a cycle in the package needs at least one)."""
    illegal = graph.find_illegal_dependencies_for_layers(
        layers=SESSION_LAYERS, containers={"workplace_env.sessions"}
    )
    return sorted(f"{d.importer} -> {d.imported}" for d in illegal)


def test_the_rule_checks_find_what_they_forbid(graph):
    copy = deepcopy(graph)
    copy.add_import(importer="workplace_env.cli", imported=f"{TEST_SUPPORT}.faults")
    assert importers_of_test_support(copy) == {"workplace_env.cli"}
    copy.add_import(
        importer="workplace_env.sessions.table", imported="workplace_env.sessions.lifecycle"
    )
    assert session_layer_breaches(copy) == [
        "workplace_env.sessions.table -> workplace_env.sessions.lifecycle"
    ]


def test_the_server_code_never_imports_the_test_support(graph):
    assert graph.find_children(TEST_SUPPORT), f"{TEST_SUPPORT} has no modules: is it installed?"
    assert importers_of_test_support(graph) == set()


def test_each_part_of_the_session_store_imports_only_the_parts_below_it(graph):
    modules = {m.rsplit(".", 1)[1] for m in graph.find_children("workplace_env.sessions")}
    assert modules == set(SESSION_LAYERS), "a module of workplace_env.sessions is not layered"
    assert session_layer_breaches(graph) == []


# -- the ``run`` command's package: the server never imports it ------------------------------

#: The ``run`` command's package (plays episode files through a server, as a client does).
RUN = "workplace_env.run"
#: The modules of ``workplace_env.run``, each importing only those of the layers after it (the
#: modules of one layer import none of each other).
RUN_LAYERS = (
    "command",
    {"model_policy", "report"},
    "plan",
    {"rollout_files", "scripted", "sandbox_check", "options"},
)
#: Server-side code, which serves episodes and never plays them: none of it reaches ``RUN``.
SERVER_SIDE = (
    "workplace_env.sessions",
    "workplace_env.sandbox",
    "workplace_env.verify",
    "workplace_env.identity",
    "workplace_env.server",
    "workplace_env.gateway",
    "workplace_env.checkpoint",
)


def server_chains_to_run(graph: grimp.ImportGraph) -> list[str]:
    """Each chain by which a :data:`SERVER_SIDE` module reaches :data:`RUN`."""
    chains = (
        graph.find_shortest_chain(importer=module, imported=RUN, as_packages=True)
        for module in SERVER_SIDE
    )
    return [" -> ".join(chain) for chain in chains if chain]


def run_layer_breaches(graph: grimp.ImportGraph) -> list[str]:
    """Imports in :data:`RUN` against :data:`RUN_LAYERS`."""
    illegal = graph.find_illegal_dependencies_for_layers(layers=RUN_LAYERS, containers={RUN})
    return sorted(f"{d.importer} -> {d.imported}" for d in illegal)


def test_the_run_rules_find_what_they_forbid(graph):
    copy = deepcopy(graph)
    copy.add_import(importer="workplace_env.sessions.store", imported=f"{RUN}.scripted")
    copy.add_import(importer=f"{RUN}.scripted", imported=f"{RUN}.report")
    copy.add_import(importer=f"{RUN}.report", imported=f"{RUN}.model_policy")
    assert f"workplace_env.sessions.store -> {RUN}.scripted" in server_chains_to_run(copy)
    assert run_layer_breaches(copy) == [
        f"{RUN}.report -> {RUN}.model_policy",
        f"{RUN}.scripted -> {RUN}.report",
    ]


def test_no_server_code_imports_the_run_package(graph):
    assert server_chains_to_run(graph) == []


def test_each_module_of_the_run_package_imports_only_the_layers_below_it(graph):
    layered = {m for layer in RUN_LAYERS for m in ([layer] if isinstance(layer, str) else layer)}
    modules = {m.rsplit(".", 1)[1] for m in graph.find_children(RUN)}
    assert modules == layered, "a module of workplace_env.run is not layered"
    assert run_layer_breaches(graph) == []


# -- the domain knows no transport (CONTRACT rules answered by gRPC and HTTP each their own way) --

#: Modules (packages: all their modules) of the domain: rules and data, no transport.
DOMAIN = (
    "workplace_env.errors",
    "workplace_env.identity",
    "workplace_env.wire",
    "workplace_env.session_header",
    "workplace_env.responses",
    "workplace_env.sessions",
    "workplace_env.sandbox",
)
#: The transports' packages: gRPC, its generated stubs, and the HTTP stack.
TRANSPORTS = ("grpc", "workplace", "fastapi", "starlette")


@pytest.fixture(scope="module")
def external_graph() -> grimp.ImportGraph:
    return grimp.build_graph(*PACKAGES, include_external_packages=True, cache_dir=None)


def transport_chains(graph: grimp.ImportGraph) -> list[str]:
    """Each chain by which a :data:`DOMAIN` module reaches a :data:`TRANSPORTS` package."""
    found = []
    for module in DOMAIN:
        for transport in TRANSPORTS:
            chain = graph.find_shortest_chain(importer=module, imported=transport, as_packages=True)
            if chain:
                found.append(" -> ".join(chain))
    return found


def test_the_domain_imports_no_transport(external_graph):
    """E.g. CONTRACT X4's rule (``workplace_env.session_header``) is one function both the gRPC
    server and the HTTP gateway call; neither transport's types may leak into it."""
    assert transport_chains(external_graph) == []
    copy = deepcopy(external_graph)
    copy.add_import(importer="workplace_env.session_header", imported="grpc")
    assert transport_chains(copy) == ["workplace_env.session_header -> grpc"]
