"""The SDK's answer classes against their messages: every proto field is declared (typed and
documented), a field not yet declared still reaches the answer, and enums read as text."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import pytest

from workplace.env.v1 import environment_pb2 as pb
from workplace_env_client.messages import (
    TableDiff,
    VerifyResult,
    message_reader,
    undeclared_fields,
    verify_answer,
    with_message_fields,
)


@pytest.mark.parametrize(
    ("answer", "message"),
    [(VerifyResult, pb.VerifyResponse), (TableDiff, pb.TableComparison)],
)
def test_every_field_of_the_message_is_declared_by_its_answer_class(answer, message):
    assert undeclared_fields(answer) == (), (
        f"declare these fields in {answer.__name__} (client/workplace_env_client/messages.py) "
        f"and document them: {', '.join(undeclared_fields(answer))}"
    )
    assert [f.name for f in dataclasses.fields(answer)] == [
        f.name for f in message.DESCRIPTOR.fields
    ]


def test_a_field_the_class_does_not_declare_reaches_the_answer_with_its_zero_default():
    @with_message_fields(pb.VerifyResponse.DESCRIPTOR)
    @dataclass(frozen=True)
    class Partial:
        """Only the reward."""

        reward: float

    undeclared = undeclared_fields(Partial)
    assert [text.split(":")[0] for text in undeclared] == [
        f.name for f in pb.VerifyResponse.DESCRIPTOR.fields[1:]
    ]
    assert {"failure_kind: str", "tables: tuple[TableComparison, ...]"} <= set(undeclared)
    assert (Partial.__name__, Partial.__doc__) == ("Partial", "Only the reward.")
    assert Partial(1.0) == Partial(1.0, False, "", "", ())
    read = message_reader(Partial, pb.VerifyResponse.DESCRIPTOR)
    row = pb.TableComparison(table="email.emails", equal=True, predicted_rows=2)
    answer = read(
        pb.VerifyResponse(reward=1.0, failure_kind=pb.FAILURE_KIND_SESSION_LOST, tables=[row])
    )
    assert (answer.reward, answer.failure_kind, answer.tables) == (1.0, "session_lost", (row,))


def test_a_class_field_the_message_lacks_is_refused_at_planning():
    @dataclass(frozen=True)
    class Extra:
        reward: float
        not_in_the_proto: int

    with pytest.raises(TypeError, match=r"Extra\.not_in_the_proto is not a field of "):
        message_reader(Extra, pb.VerifyResponse.DESCRIPTOR)


def test_a_failure_kind_this_sdk_does_not_know_reads_as_its_number():
    answer = verify_answer(pb.VerifyResponse(mask_sample=True, failure_kind=7))
    assert (answer.mask_sample, answer.failure_kind) == (True, "7")


def test_an_undeclared_field_is_typed_by_its_proto_type():
    @with_message_fields(pb.TableComparison.DESCRIPTOR)
    @dataclass(frozen=True)
    class Bare:
        pass

    assert undeclared_fields(Bare) == (
        "table: str",
        "equal: bool",
        "predicted_rows: int",
        "expected_rows: int",
    )
    assert Bare() == Bare("", False, 0, 0)
    read = message_reader(Bare, pb.TableComparison.DESCRIPTOR)
    assert read(pb.TableComparison(table="crm.customers", predicted_rows=3)) == Bare(
        "crm.customers", False, 3, 0
    )
