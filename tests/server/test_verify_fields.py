"""Verify's answer field by field: the domain's ``VerifyOutcome`` -> ``VerifyResponse`` (the
servicer's copier) -> the SDK's ``VerifyResult``, every field driven by the message's
descriptor, so a field added to the proto and the domain is exercised here as it is."""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass
from typing import Any

import pytest
from google.protobuf.descriptor import Descriptor, FieldDescriptor

from workplace.env.v1 import environment_pb2 as pb
from workplace_env.server.servicer import message_copier, verify_response
from workplace_env.sessions import VerifyOutcome
from workplace_env.verify import TableScore
from workplace_env_client.messages import enum_texts, is_repeated, verify_answer


def sample_value(field: FieldDescriptor, hint: Any, salt: int) -> Any:
    """A value of ``field`` that is not its zero value, as the domain holds it."""
    if field.enum_type is not None:
        value: Any = enum_texts(field.enum_type)[max(v.number for v in field.enum_type.values)]
    elif field.message_type is not None:
        if not is_repeated(field):
            return sample_domain(field.message_type, hint, salt)
        item = typing.get_args(hint)[0]
        return tuple(sample_domain(field.message_type, item, salt + n) for n in (0, 1))
    elif field.cpp_type == FieldDescriptor.CPPTYPE_BOOL:
        value = True
    elif field.cpp_type in (FieldDescriptor.CPPTYPE_DOUBLE, FieldDescriptor.CPPTYPE_FLOAT):
        value = 0.5 + salt
    elif field.type == FieldDescriptor.TYPE_BYTES:
        value = f"b{salt}".encode()
    elif field.cpp_type == FieldDescriptor.CPPTYPE_STRING:
        value = f"text {salt}"
    else:
        value = 7 + salt
    return (value,) if is_repeated(field) else value


def sample_domain(message: Descriptor, domain: type, salt: int = 0) -> Any:
    """A ``domain`` value with every field of ``message`` set to a non-zero value."""
    hints = typing.get_type_hints(domain)
    return domain(
        **{
            f.name: sample_value(f, hints[f.name], salt + i * 10)
            for i, f in enumerate(message.fields)
        }
    )


def plain(value: Any) -> Any:
    """A dataclass value as nested dicts and lists (for comparing domain and SDK values)."""
    if dataclasses.is_dataclass(value):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, tuple):
        return [plain(v) for v in value]
    return value


def test_the_domain_outcome_has_exactly_the_messages_fields():
    assert [f.name for f in dataclasses.fields(VerifyOutcome)] == [
        f.name for f in pb.VerifyResponse.DESCRIPTOR.fields
    ]
    assert [f.name for f in dataclasses.fields(TableScore)] == [
        f.name for f in pb.TableComparison.DESCRIPTOR.fields
    ]


def test_every_field_travels_from_the_domain_to_the_sdk_over_the_wire():
    outcome = sample_domain(pb.VerifyResponse.DESCRIPTOR, VerifyOutcome)
    message = verify_response(outcome)
    for field in pb.VerifyResponse.DESCRIPTOR.fields:  # every field set, none left at zero
        assert getattr(message, field.name) != field.default_value, field.name
    received = pb.VerifyResponse.FromString(message.SerializeToString())
    assert plain(verify_answer(received)) == plain(outcome)


def test_a_lost_session_and_an_empty_score_travel_as_they_are():
    lost = VerifyOutcome(0.0, True, "session_lost", "the server holds no session s")
    assert verify_response(lost) == pb.VerifyResponse(
        mask_sample=True,
        failure_kind=pb.FAILURE_KIND_SESSION_LOST,
        failure_reason="the server holds no session s",
    )
    assert plain(verify_answer(verify_response(lost))) == plain(lost)
    assert verify_response(VerifyOutcome(1.0)) == pb.VerifyResponse(reward=1.0)


@dataclass(frozen=True)
class CountedTable:
    """A table score that records every read of its ``table`` in ``reads``."""

    table: str
    reads: list[str]
    equal: bool = True
    predicted_rows: int = 1
    expected_rows: int = 1

    def __getattribute__(self, name: str) -> Any:
        value = object.__getattribute__(self, name)
        if name == "table":
            object.__getattribute__(self, "reads").append(value)
        return value


@dataclass(frozen=True)
class CountedOutcome(VerifyOutcome):
    """A verify outcome whose tables count their reads."""

    tables: tuple[CountedTable, ...] = ()  # type: ignore[assignment]


def test_a_tuple_of_items_is_converted_once_and_an_equal_new_one_again():
    reads: list[str] = []
    copy = message_copier(pb.VerifyResponse.DESCRIPTOR, CountedOutcome)
    tables = (CountedTable("a", reads), CountedTable("b", reads))
    first = copy(CountedOutcome(1.0, tables=tables))
    again = copy(CountedOutcome(0.0, tables=tables))
    assert reads == ["a", "b"]
    assert list(first.tables) == list(again.tables)
    assert [t.table for t in again.tables] == ["a", "b"]
    copy(CountedOutcome(1.0, tables=(CountedTable("a", reads), CountedTable("b", reads))))
    assert reads == ["a", "b", "a", "b"]


def test_a_domain_class_without_a_field_of_the_message_is_refused_at_planning():
    @dataclass(frozen=True)
    class Partial:
        reward: float

    with pytest.raises(TypeError, match="Partial has no field mask_sample of "):
        message_copier(pb.VerifyResponse.DESCRIPTOR, Partial)


def test_a_failure_kind_the_proto_does_not_name_is_a_bug_not_a_zero():
    with pytest.raises(KeyError, match="timed_out"):
        verify_response(VerifyOutcome(0.0, True, "timed_out", "why"))
