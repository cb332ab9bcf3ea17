"""Run inside the NeMo Gym venv (Python 3.13), never imported by the test process.

Subcommands (``python driver.py CMD ...``):

``resolve``      stdin: a NeMo Gym config as JSON -> stdout: the config resolved by NeMo's own
                 ``GlobalConfigDictParser`` (defaults filled in), as YAML.
``merge``        stdin: ``{"yaml": <resolved config>, "extra": {...}}`` -> stdout: the YAML with
                 the extra top-level keys merged in (a CLI's own settings).
``model``        ``--recordings FILE --port N``: a stand-in Responses-API model server. For a
                 request whose create params carry ``metadata.ng_stand_in`` (else whose first
                 user message is) a key of FILE (``{key: [{name, arguments}, ...]}``), it
                 answers the next recorded call not yet in the request's input as a
                 ``function_call`` item, then a final assistant message. A path ending in
                 ``chat/completions`` is answered in that API (matched by the first user
                 message; streamed as server-sent events when asked): the call named as the
                 request's tools name it (``name`` itself, or a tool ending in ``__name``).
``serve``        ``--module TYPE.IMPL.app``: NeMo's server of that module, started as its
                 ``__main__`` starts it (``run_webserver``), with Ray off (``ray_enabled`` is a
                 class setting NeMo reads; a server that leaves it unset would start a cluster).
``reverify``     NeMo's ``RolloutReverificationHelper.run_from_config`` (what ``gym eval
                 reverify`` runs once its servers are up) with the injected config
                 (``NEMO_GYM_CONFIG_DICT``: the run plus the reverification settings).
``mcp``          ``--url BASE``, stdin: a seed body. Seeds BASE, validates the answer with
                 NeMo's ``ResourcesSeedSessionResponse`` (typed) and takes its MCP metadata
                 (``resources_tools``, or the ``mcp`` key of a legacy answer), then with the
                 official ``mcp`` client lists the tools and calls each call of stdin's
                 ``"calls"``; prints ``{"seed", "tools", "results"}`` as JSON.
``validate``     stdin: ``{"model": "MODULE:CLASS", "bodies": [...]}`` (a generic model with its
                 parameter: ``"MODULE:CLASS[MODULE:CLASS]"``) -> stdout: for each body,
                 what NeMo's pydantic model makes of it (``model_validate``, as FastAPI
                 validates a parsed body): ``{"ok": true, "value": <model_dump(mode="json")>}``
                 or ``{"ok": false, "locs": [<loc of each error>]}``, as a JSON list.
``configs``      stdin: ``{"configs": {label: {instance: block}}, "roots": [extra roots],
                 "base_only": ["TYPE/IMPL", ...]}`` -> stdout: per label and instance
                 ``{"problems", "validated_by", "implementation"}``: the instance as the
                 launcher validates it (``maybe_get_server_instance_config``), then as its server
                 does (the ``config`` class of the entry's server class, after the launcher's
                 name, host and port; a ``base_only`` entry by its server type's base config);
                 warnings raised while validating count as problems.
``conformance``  ``--url BASE``: NeMo's ``check_resources_session_contract`` (unmodified), over an
                 ASGI app that forwards every request to BASE; exit 0 when it passes.
"""

import argparse
import json
import sys
import uuid


def _resolve() -> None:
    from nemo_gym.global_config import GlobalConfigDictParser, GlobalConfigDictParserConfig
    from omegaconf import OmegaConf

    config = OmegaConf.create(json.loads(sys.stdin.read()))
    parsed = GlobalConfigDictParser().parse(
        GlobalConfigDictParserConfig(initial_global_config_dict=config, skip_load_from_cli=True)
    )
    sys.stdout.write(OmegaConf.to_yaml(parsed))


def _merge() -> None:
    from omegaconf import OmegaConf

    request = json.loads(sys.stdin.read())
    merged = OmegaConf.merge(OmegaConf.create(request["yaml"]), OmegaConf.create(request["extra"]))
    sys.stdout.write(OmegaConf.to_yaml(merged))


def _text(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def _model(recordings_path: str, port: int) -> None:
    import uvicorn
    from fastapi import FastAPI, Request
    from fastapi.responses import JSONResponse, Response

    with open(recordings_path, encoding="utf-8") as fh:
        recordings: dict[str, list[dict[str, str]]] = json.load(fh)
    app = FastAPI()

    @app.get("/")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.post("/{path:path}")
    async def responses(path: str, request: Request) -> Response:
        body = await request.json()
        if path.rstrip("/").endswith("chat/completions"):
            return _chat_answer(body, recordings)
        items = body.get("input")
        items = [{"role": "user", "content": items}] if isinstance(items, str) else items or []
        key = (body.get("metadata") or {}).get("ng_stand_in")
        if key is None:
            key = next((_text(i.get("content")) for i in items if i.get("role") == "user"), None)
        if key not in recordings:
            return JSONResponse({"error": f"no recording for {key!r}"}, status_code=400)
        done = sum(1 for i in items if i.get("type") == "function_call")
        calls = recordings[key]
        if done < len(calls):
            call = calls[done]
            output = [
                {
                    "type": "function_call",
                    "id": f"fc_{uuid.uuid4().hex}",
                    "call_id": f"call_{done}",
                    "name": call["name"],
                    "arguments": call["arguments"],
                    "status": "completed",
                }
            ]
        else:
            output = [
                {
                    "type": "message",
                    "id": f"msg_{uuid.uuid4().hex}",
                    "role": "assistant",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": "Done.", "annotations": []}],
                }
            ]
        return JSONResponse(
            {
                "id": f"resp_{uuid.uuid4().hex}",
                "object": "response",
                "created_at": 0,
                "model": "stand-in",
                "output": output,
                "parallel_tool_calls": False,
                "tool_choice": "auto",
                "tools": [],
                "status": "completed",
            }
        )

    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


def _offered_name(name: str, tools: list[dict]) -> str:
    """``name`` as the request's chat tools spell it (a harness may prefix it: ``x__name``)."""
    offered = [t.get("function", {}).get("name", "") for t in tools]
    return next((o for o in offered if o == name or o.endswith(f"__{name}")), name)


def _chat_answer(body: dict, recordings: dict[str, list[dict[str, str]]]):
    """The chat-completions answer of ``_model``: the next recorded call, else a final text."""
    from fastapi.responses import JSONResponse, StreamingResponse

    messages = body.get("messages") or []
    key = next((_text(m.get("content")) for m in messages if m.get("role") == "user"), None)
    if key not in recordings:
        return JSONResponse({"error": {"message": f"no recording for {key!r}"}}, status_code=400)
    done = sum(len(m.get("tool_calls") or []) for m in messages if m.get("role") == "assistant")
    calls = recordings[key]
    message: dict = {"role": "assistant", "content": None}
    if done < len(calls):
        function = {
            "name": _offered_name(calls[done]["name"], body.get("tools") or []),
            "arguments": calls[done]["arguments"],
        }
        message["tool_calls"] = [{"id": f"call_{done}", "type": "function", "function": function}]
        finish = "tool_calls"
    else:
        message["content"] = "Done."
        finish = "stop"
    head = {"id": f"chatcmpl-{uuid.uuid4().hex}", "created": 0, "model": body.get("model", "")}
    usage = {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
    if not body.get("stream"):
        choice = {"index": 0, "message": message, "finish_reason": finish, "logprobs": None}
        return JSONResponse(
            head | {"object": "chat.completion", "choices": [choice], "usage": usage}
        )
    delta = dict(message)
    if "tool_calls" in delta:
        delta["tool_calls"] = [{"index": 0, **c} for c in delta["tool_calls"]]
    chunk = head | {"object": "chat.completion.chunk"}
    events = [
        chunk | {"choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
        chunk | {"choices": [{"index": 0, "delta": {}, "finish_reason": finish}]},
        chunk | {"choices": [], "usage": usage},
    ]
    text = "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"
    return StreamingResponse(iter([text]), media_type="text/event-stream")


def _server_class(module: object) -> type:
    """The one NeMo server class ``module`` defines (its most derived); SystemExit otherwise."""
    from nemo_gym.server_utils import BaseServer

    name = getattr(module, "__name__", "")
    defined = [
        v
        for v in vars(module).values()
        if isinstance(v, type) and issubclass(v, BaseServer) and v.__module__ == name
    ]
    leaves = [c for c in defined if not any(o is not c and issubclass(o, c) for o in defined)]
    if len(leaves) != 1:
        raise SystemExit(f"{name}: expected one server class, found {leaves}")
    return leaves[0]


def _serve(module_name: str) -> None:
    import importlib

    server_cls = _server_class(importlib.import_module(module_name))
    server_cls.ray_enabled = False
    server_cls.run_webserver()


def _entry_module(path: str, root: str, site: str) -> object:
    """The module of entry file ``path`` found under ``root``: imported by its package name
    from NeMo's site-packages, else loaded from the file (an extra root's entry)."""
    import importlib
    import importlib.util
    import os

    relative = os.path.relpath(path, root)[: -len(".py")]
    if root == site:
        return importlib.import_module(relative.replace(os.sep, "."))
    name = "_config_entry_" + relative.replace(os.sep, "_")
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _check_instance(name: str, block: dict, roots: list[str], base_only: list[str]) -> dict:
    """One instance of a config, validated as the launcher and its server validate it."""
    import os
    import warnings

    import nemo_gym
    from nemo_gym.base_environment_server import BaseEnvironmentServerConfig
    from nemo_gym.base_resources_server import BaseResourcesServerConfig
    from nemo_gym.base_responses_api_agent import BaseResponsesAPIAgentConfig
    from nemo_gym.base_responses_api_model import BaseResponsesAPIModelConfig
    from nemo_gym.config_types import maybe_get_server_instance_config
    from omegaconf import OmegaConf
    from pydantic import ValidationError

    bases = {
        "resources_servers": BaseResourcesServerConfig,
        "responses_api_agents": BaseResponsesAPIAgentConfig,
        "responses_api_models": BaseResponsesAPIModelConfig,
        "environment_servers": BaseEnvironmentServerConfig,
    }
    site = os.path.dirname(os.path.dirname(nemo_gym.__file__))
    problems: list[str] = []
    result = {"problems": problems, "validated_by": None, "implementation": None}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _, error = maybe_get_server_instance_config(name, OmegaConf.create(block))
        if error is not None or not isinstance(block, dict):
            problems.append(f"not a server instance: {error}")
            return result
        (server_type,) = [key for key in bases if key in block]
        ((implementation, inner),) = block[server_type].items()
        result["implementation"] = f"{server_type}/{implementation}"
        # What the launcher adds before a server reads its block: its name, host and port.
        given = {"host": "127.0.0.1", "port": 0, **inner, "name": name}
        entry = inner.get("entrypoint", "")
        found = [
            (root, os.path.join(root, server_type, implementation, entry))
            for root in [*roots, site]
            if os.path.isfile(os.path.join(root, server_type, implementation, entry))
        ]
        if not found:
            problems.append(f"no {server_type}/{implementation}/{entry} in {roots} or NeMo Gym")
            return result
        root, path = found[0]
        if result["implementation"] in base_only:
            config_cls = bases[server_type]
        else:
            server_cls = _server_class(_entry_module(path, root, site))
            config_cls = server_cls.model_fields["config"].annotation
        try:
            config_cls.model_validate(given)
            result["validated_by"] = f"{config_cls.__module__}:{config_cls.__qualname__}"
        except ValidationError as exc:
            problems += [f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()]
    problems += [f"warning: {w.message}" for w in caught]
    return result


def _configs() -> None:
    request = json.loads(sys.stdin.read())
    out = {
        label: {
            name: _check_instance(name, block, request["roots"], request["base_only"])
            for name, block in config.items()
        }
        for label, config in request["configs"].items()
    }
    print(json.dumps(out))


def _reverify() -> None:
    import asyncio

    from nemo_gym.global_config import get_global_config_dict
    from nemo_gym.rollout_reverification import (
        RolloutReverificationConfig,
        RolloutReverificationHelper,
    )

    config = RolloutReverificationConfig.model_validate(get_global_config_dict())
    asyncio.run(RolloutReverificationHelper().run_from_config(config))


def _mcp(url: str) -> None:
    import asyncio

    import httpx
    from mcp import ClientSession
    from mcp.client.streamable_http import streamablehttp_client
    from nemo_gym.base_resources_server import MCPServerMetadata, ResourcesSeedSessionResponse

    request = json.loads(sys.stdin.read())
    seeded = httpx.post(f"{url}/seed_session", json=request["seed"], timeout=60)
    seeded.raise_for_status()
    answer = seeded.json()
    if "task_data" in request["seed"] and "resources_tools" in answer:
        meta = ResourcesSeedSessionResponse.model_validate(answer).resources_tools
    else:
        meta = MCPServerMetadata.model_validate(answer["mcp"])
    assert meta is not None, f"no MCP metadata in {answer}"

    async def session() -> dict:
        endpoint = url + "/" + meta.url_path.lstrip("/")
        async with (
            streamablehttp_client(endpoint, headers=meta.headers) as (read, write, _),
            ClientSession(read, write) as client,
        ):
            await client.initialize()
            tools = await client.list_tools()
            results = []
            for call in request["calls"]:
                result = await client.call_tool(call["name"], call["arguments"])
                results.append(result.model_dump(mode="json", exclude_none=True))
            return {
                "seed": answer,
                "metadata": meta.model_dump(mode="json"),
                "tools": [t.model_dump(mode="json", exclude_none=True) for t in tools.tools],
                "results": results,
            }

    print(json.dumps(asyncio.run(session())))


def _validate() -> None:
    import importlib

    from pydantic import ValidationError

    def named(spec: str) -> type:
        module, name = spec.split(":")
        return getattr(importlib.import_module(module), name)

    request = json.loads(sys.stdin.read())
    spec, _, parameter = request["model"].rstrip("]").partition("[")
    model = named(spec)[named(parameter)] if parameter else named(spec)
    out = []
    for body in request["bodies"]:
        try:
            out.append({"ok": True, "value": model.model_validate(body).model_dump(mode="json")})
        except ValidationError as exc:
            out.append({"ok": False, "locs": [list(e["loc"]) for e in exc.errors()]})
    print(json.dumps(out))


def _conformance(url: str) -> None:
    import httpx
    from nemo_gym.base_resources_server import ResourcesSeedSessionRequest
    from nemo_gym.episode_types import EpisodeId, TaskId
    from nemo_gym.testing.session_conformance import check_resources_session_contract
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    async def forward(request: Request) -> Response:
        headers = {
            k: v for k, v in request.headers.items() if k.lower() in ("cookie", "content-type")
        }
        async with httpx.AsyncClient(base_url=url, timeout=60) as client:
            upstream = await client.request(
                request.method, request.url.path, content=await request.body(), headers=headers
            )
        response = Response(upstream.content, upstream.status_code)
        for k, v in upstream.headers.multi_items():
            if k.lower() in ("content-type", "set-cookie"):
                response.headers.append(k, v)
        return response

    app = Starlette(routes=[Route("/{path:path}", forward, methods=["GET", "POST"])])
    row = {
        "id": "conformance",
        "ground_truth": [],
        "responses_create_params": {"input": [{"role": "user", "content": "hi"}]},
    }
    seed = ResourcesSeedSessionRequest(
        resources_session_id=f"conformance-{uuid.uuid4().hex}",
        episode_id=EpisodeId(rollout_id=f"r{uuid.uuid4().hex}", attempt=0),
        task_id=TaskId(taskset="conformance", task_id="t0"),
        task_data=row,
    )
    check_resources_session_contract(app, seed, keeps_state=True)
    print("check_resources_session_contract: passed")


def main() -> None:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="cmd", required=True)
    sub.add_parser("resolve")
    sub.add_parser("merge")
    model = sub.add_parser("model")
    model.add_argument("--recordings", required=True)
    model.add_argument("--port", type=int, required=True)
    sub.add_parser("reverify")
    mcp = sub.add_parser("mcp")
    mcp.add_argument("--url", required=True)
    serve = sub.add_parser("serve")
    serve.add_argument("--module", required=True)
    sub.add_parser("validate")
    sub.add_parser("configs")
    conformance = sub.add_parser("conformance")
    conformance.add_argument("--url", required=True)
    args = parser.parse_args()
    if args.cmd == "resolve":
        _resolve()
    elif args.cmd == "merge":
        _merge()
    elif args.cmd == "reverify":
        _reverify()
    elif args.cmd == "validate":
        _validate()
    elif args.cmd == "configs":
        _configs()
    elif args.cmd == "mcp":
        _mcp(args.url)
    elif args.cmd == "serve":
        _serve(args.module)
    elif args.cmd == "model":
        _model(args.recordings, args.port)
    else:
        _conformance(args.url)


if __name__ == "__main__":
    main()
