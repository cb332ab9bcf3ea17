"""Griffe extension: the SDK's awaited twins (``name = awaited(...)`` in a class body,
``workplace_env_client.steps.awaited``) documented as the async methods they are, with the
signature and docstring the imported method carries."""

from __future__ import annotations

import importlib
import inspect
from typing import Any

import griffe


class AwaitedMethods(griffe.Extension):
    """Replace each ``awaited(...)`` attribute of a class by an async method."""

    def on_class_members(self, *, node: Any, cls: griffe.Class, agent: Any, **kwargs: Any) -> None:
        for name, member in list(cls.members.items()):
            if not (
                isinstance(member, griffe.Attribute) and str(member.value).startswith("awaited(")
            ):
                continue
            runtime = getattr(importlib.import_module(cls.module.path), cls.name)
            method = getattr(runtime, name)
            signature = inspect.signature(method)
            parameters = griffe.Parameters(
                *(
                    griffe.Parameter(
                        param.name,
                        annotation=_text(param.annotation),
                        kind=griffe.ParameterKind(param.kind.description),
                        default=None if param.default is param.empty else repr(param.default),
                    )
                    for param in signature.parameters.values()
                )
            )
            function = griffe.Function(
                name,
                lineno=member.lineno,
                endlineno=member.endlineno,
                parameters=parameters,
                returns=_text(signature.return_annotation),
            )
            function.docstring = griffe.Docstring(
                inspect.cleandoc(method.__doc__ or ""),
                parent=function,
                parser=agent.docstring_parser,
                parser_options=agent.docstring_options,
            )
            function.labels.add("async")
            cls.set_member(name, function)


def _text(annotation: Any) -> str | None:
    return None if annotation is inspect.Parameter.empty else str(annotation)
