"""The command-line options of the settings, generated from :class:`~workplace_env.config.Settings`.

A command decorated with :func:`setting_options` gets one option per setting whose
:class:`~workplace_env.config.SettingSpec` names that command: ``--<name>`` (``--x/--no-x`` for a
boolean), of the field's type, default None (not given), with the spec's help. They follow the
command's ``config`` parameter, in declaration order; the command receives them as one
``flags`` mapping of setting name to value (None: not given), ready for
:func:`~workplace_env.config.load_settings`.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from dataclasses import fields
from typing import Annotated, Any, Optional, TypeVar

import typer

from workplace_env.config import SPECS, Settings, parse_value

Command = TypeVar("Command", bound=Callable[..., Any])

#: A setting's option value type, from its field's annotation (its first word).
_TYPES: dict[str, type] = {"str": str, "int": int, "float": float, "bool": bool}


def setting_option(name: str, command: str) -> Any:
    """The ``Annotated`` type of setting ``name``'s option in ``command``."""
    field = next(f for f in fields(Settings) if f.name == name)
    kind = _TYPES[str(field.type).split()[0]]
    help_text = SPECS[name].help_for(command, field.default)
    flag = f"--{name.replace('_', '-')}"
    decls = (f"{flag}/--no-{flag[2:]}",) if kind is bool else ()
    parsed = {"parser": _parser(name)} if kind in (int, float) else {}
    return Annotated[Optional[kind], typer.Option(*decls, help=help_text, **parsed)]  # noqa: UP045


def _parser(name: str) -> Callable[[str], Any]:
    """The parser of setting ``name``'s number option: the value as every source is parsed
    (:func:`~workplace_env.config.parse_value`); one that is not a number of the setting's
    type is a usage error (exit 2) echoing it (``'1e3' is not an integer``)."""

    def parse(text: str) -> Any:
        try:
            return parse_value(name, text)
        except ValueError as exc:
            raise typer.BadParameter(str(exc)) from None

    return parse


def setting_options(command: str, **replaced: Any) -> Callable[[Command], Command]:
    """Decorate a command taking a ``config`` and a ``flags`` parameter: its options are its
    own parameters, then those of the settings ``command`` takes right after ``config``
    (``replaced``: the ``Annotated`` type of some, in place of the generated one); it is
    called with those as ``flags``."""
    names = [name for name, spec in SPECS.items() if command in spec.commands]
    unknown = set(replaced) - set(names)
    if unknown:
        raise ValueError(f"not settings of {command}: {sorted(unknown)}")

    def decorate(func: Command) -> Command:
        own = inspect.signature(func, eval_str=True)
        generated = [
            inspect.Parameter(
                name,
                inspect.Parameter.KEYWORD_ONLY,
                default=None,
                annotation=replaced.get(name) or setting_option(name, command),
            )
            for name in names
        ]
        params: list[inspect.Parameter] = []
        for param in own.parameters.values():
            if param.name == "flags":
                continue
            params.append(param.replace(kind=inspect.Parameter.KEYWORD_ONLY))
            if param.name == "config":
                params.extend(generated)
        if len(params) == len(own.parameters) - 1:
            raise TypeError(f"{func.__name__} has no config parameter")

        @functools.wraps(func)
        def wrapper(**kwargs: Any) -> Any:
            flags = {name: kwargs.pop(name) for name in names}
            return func(**kwargs, flags=flags)

        wrapper.__signature__ = own.replace(parameters=params)  # type: ignore[attr-defined]
        wrapper.__annotations__ = {p.name: p.annotation for p in params}
        return wrapper  # type: ignore[return-value]

    return decorate
