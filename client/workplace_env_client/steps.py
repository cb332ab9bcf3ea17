"""The SDK's operations, written once as generators of steps and run by a sync or an async driver.

An operation (an RPC of a client, with its refusal retries; a session handle's call, verify,
checkpoint or recovery; a ``session()`` block's opening and closing) is a generator that
yields :class:`Step` s, is sent each step's result (or thrown its exception) and returns its
answer. It decides everything and performs nothing: :func:`run_steps` performs each step as a
plain call, :func:`run_steps_async` awaits it (an admin client's, which blocks, on a worker
thread). Both are the one loop of :func:`_drive`; the sync driver finishes it without an event
loop, since none of its steps suspends.

:func:`blocking` makes a method of an operation (the sync client's and handle's methods);
:func:`awaited` makes the awaited twin of such a method, with its name, signature and
docstring (the async client's and handle's methods).
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Coroutine, Generator, Mapping
from types import MappingProxyType
from typing import Any, Concatenate, NamedTuple, ParamSpec, TypeAlias, TypeVar

from workplace_env_client.admin import AdminClient

P = ParamSpec("P")
R = TypeVar("R")

#: The keyword arguments of a step that has none.
NO_KWARGS: Mapping[str, Any] = MappingProxyType({})


class Step(NamedTuple):
    """One call an operation asks for: ``getattr(target, method)(*args, **kwargs)``.

    ``target`` is the SDK client (sync or async), its transport or an :class:`AdminClient`
    (always sync)."""

    target: Any
    method: str
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = NO_KWARGS
    #: Run to its end even when the awaiting task is cancelled meanwhile (a session's close):
    #: the async driver holds the cancellation (:func:`_to_its_end`), the sync one sends the
    #: call once more after a first KeyboardInterrupt; either is raised once the operation
    #: ends.
    shielded: bool = False


#: An operation: it yields steps, is sent their results, and returns its answer.
Steps = Generator[Step, Any, Any]
#: An operation answering an ``R`` (the annotation of a :func:`blocking` method's plan).
Answer: TypeAlias = Generator[Step, Any, R]

#: Each :func:`blocking` method's operation, for :func:`awaited`.
_PLANS: dict[Callable[..., Any], Callable[..., Steps]] = {}


async def _to_its_end(
    awaitable: Coroutine[Any, Any, Any], bound_s: float | None
) -> tuple[asyncio.Future[Any], asyncio.CancelledError | None]:
    """Await ``awaitable`` in a task of its own until it ends; return that task (its result or
    error) and the cancellation of the awaiting task that arrived meanwhile (None: none). After
    such a cancellation it is awaited at most ``bound_s`` seconds more (None: unbounded), then
    cancelled, and a CancelledError saying so is raised."""
    inner = asyncio.ensure_future(awaitable)
    held: asyncio.CancelledError | None = None
    loop = asyncio.get_running_loop()
    deadline: float | None = None
    while not inner.done():
        remaining = None if deadline is None else deadline - loop.time()
        if remaining is not None and remaining <= 0:
            inner.cancel()
            later = f"cancelled, and the call had not ended {bound_s:g} s later"
            raise asyncio.CancelledError(later)
        try:
            await asyncio.wait({inner}, timeout=remaining)
        except asyncio.CancelledError as cancelled:
            held = held or cancelled
            if deadline is None and bound_s is not None:
                deadline = loop.time() + bound_s
    return inner, held


async def _drive(steps: Steps, awaits: bool) -> Any:
    """Run ``steps`` to their answer: each step performed (awaited when ``awaits``, an admin
    client's on a worker thread; a :attr:`Step.shielded` one to its end, bounded by its
    target's ``timeout_s``, whatever cancels the awaiting task; a plain shielded call cut by a
    first KeyboardInterrupt sent once more) and its result sent back, or its exception thrown
    in. The cancellation or interrupt a shielded step held is raised once the steps end, in
    place of their answer or their error."""
    held: BaseException | None = None
    try:
        step = next(steps)
        while True:
            call = getattr(step.target, step.method)
            try:
                if not awaits:
                    try:
                        result = call(*step.args, **step.kwargs)
                    except KeyboardInterrupt as interrupt:
                        if not step.shielded or held is not None:
                            raise
                        held = interrupt  # a close sent again answers ALREADY_CLOSED if done
                        result = call(*step.args, **step.kwargs)
                elif isinstance(step.target, AdminClient):
                    result = await asyncio.to_thread(call, *step.args, **step.kwargs)
                elif step.shielded:
                    bound = getattr(step.target, "timeout_s", None)
                    ended, cancelled = await _to_its_end(call(*step.args, **step.kwargs), bound)
                    held = held or cancelled
                    result = ended.result()
                else:
                    result = await call(*step.args, **step.kwargs)
            except BaseException as exc:
                step = steps.throw(exc)
            else:
                step = steps.send(result)
    except StopIteration as done:
        if held is not None:
            raise held from None
        return done.value
    except Exception as failed:
        if held is not None:
            raise held from failed
        raise


def run_steps(steps: Steps) -> Any:
    """Run an operation's steps as plain calls; return its answer (or raise its error)."""
    driver = _drive(steps, awaits=False)
    try:
        driver.send(None)
    except StopIteration as done:
        return done.value
    driver.close()
    raise RuntimeError("a blocking operation's step suspended")


async def run_steps_async(steps: Steps) -> Any:
    """Run an operation's steps on the event loop: a client's call awaited, an admin client's
    (blocking) on a worker thread; return its answer (or raise its error)."""
    return await _drive(steps, awaits=True)


def _answered(plan: Callable[..., Steps]) -> inspect.Signature:
    """``plan``'s signature, returning what its ``Answer[...]`` annotation answers."""
    signature = inspect.signature(plan)
    annotation = signature.return_annotation
    if not (isinstance(annotation, str) and annotation.startswith("Answer[")):
        raise TypeError(f"{plan.__qualname__} must be annotated -> Answer[...]")
    return signature.replace(return_annotation=annotation[len("Answer[") : -1])


def _describe(
    made: Callable[..., Any], like: Callable[..., Any], qualname: str, signature: inspect.Signature
) -> None:
    """Give ``made`` the name, module and docstring of ``like``, ``qualname`` and
    ``signature`` (and the annotations it names), as ``help()`` and the docs read them."""
    made.__name__, made.__module__, made.__doc__ = like.__name__, like.__module__, like.__doc__
    made.__qualname__ = qualname
    made.__signature__ = signature  # type: ignore[attr-defined]
    made.__annotations__ = {
        name: param.annotation
        for name, param in signature.parameters.items()
        if param.annotation is not inspect.Parameter.empty
    } | {"return": signature.return_annotation}


def blocking(plan: Callable[Concatenate[Any, P], Answer[R]]) -> Callable[Concatenate[Any, P], R]:
    """The method that runs ``plan`` (an operation, annotated ``-> Answer[R]``) with
    :func:`run_steps` and returns its ``R``; its signature and docstring are ``plan``'s."""

    def method(owner: Any, /, *args: P.args, **kwargs: P.kwargs) -> R:
        return run_steps(plan(owner, *args, **kwargs))  # type: ignore[no-any-return]

    _describe(method, plan, plan.__qualname__, _answered(plan))
    _PLANS[method] = plan
    return method


def plan_of(method: Callable[..., Any]) -> Callable[..., Steps]:
    """The operation of a :func:`blocking` ``method``, to run inside another operation with
    ``yield from`` (one driver for both). Raises KeyError for a method :func:`blocking` did
    not make."""
    return _PLANS[method]


def awaited(
    method: Callable[Concatenate[Any, P], R],
) -> Callable[Concatenate[Any, P], Coroutine[Any, Any, R]]:
    """The awaited twin of a :func:`blocking` ``method``: the same operation run with
    :func:`run_steps_async`, with ``method``'s name, signature and docstring; its qualified
    name is ``Async`` + ``method``'s (``EnvironmentClient.seed`` ->
    ``AsyncEnvironmentClient.seed``). Raises KeyError for a method :func:`blocking` did not
    make."""
    plan = plan_of(method)

    async def twin(owner: Any, /, *args: P.args, **kwargs: P.kwargs) -> R:
        return await run_steps_async(plan(owner, *args, **kwargs))  # type: ignore[no-any-return]

    _describe(twin, method, "Async" + method.__qualname__, inspect.signature(method))
    return twin
