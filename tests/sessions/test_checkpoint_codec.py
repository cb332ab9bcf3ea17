"""The checkpoint table codec (REFERENCE.md (d)): bit-exact round trips and strict decoding."""

from __future__ import annotations

import json

import pytest

from workplace_env.checkpoint.codec import (
    CodecError,
    decode_state,
    encode_state,
    encode_table,
    tables_equal,
)
from workplace_env.sandbox.tables import CALENDAR, CRM, TABLE_KEYS, SessionTables
from workplace_env.sandbox.tools import execute


def _session(sandbox) -> SessionTables:
    """A session with every kind of cell the codec must keep apart."""
    tables = SessionTables(sandbox)
    # Calendar append: duplicate index label 0, and a duration stored as a JSON number.
    execute(
        tables,
        "calendar_create_event",
        {
            "event_name": "A",
            "participant_email": "x@y.com",
            "event_start": "2023-12-01 10:00:00",
            "duration": 30,
        },
    )
    # CRM: None stored by the tool beside NaN read from empty CSV cells.
    execute(
        tables,
        "customer_relationship_manager_add_customer",
        {"customer_name": "Zed", "assigned_to_email": "a@b.com", "status": "Lead"},
    )
    # Analytics: session_duration_seconds becomes float64 in place.
    execute(tables, "analytics_get_average_session_duration", {})
    # Plots: an Int64 index that is not a RangeIndex.
    execute(
        tables,
        "analytics_create_plot",
        {
            "time_min": "2023-11-01",
            "time_max": "2023-11-30",
            "value_to_plot": "total_visits",
            "plot_type": "bar",
        },
    )
    return tables


def _all(tables: SessionTables) -> dict:
    return {key: tables.table(key) for key in TABLE_KEYS}


def test_round_trip_is_bit_exact(sandbox):
    tables = _session(sandbox)
    state = encode_state(_all(tables))
    text = json.dumps(state)
    decoded = decode_state(json.loads(text), sandbox.tables)
    for key in TABLE_KEYS:
        assert tables_equal(decoded[key], tables.table(key)), key
    assert encode_state(decoded) == state  # and the bytes again


def test_round_trip_keeps_nan_none_duplicates_and_floats(sandbox):
    tables = _session(sandbox)
    decoded = decode_state(encode_state(_all(tables)), sandbox.tables)
    calendar = decoded[CALENDAR]
    assert calendar.index[-1] == 0 and calendar.index.count(0) == 2
    assert calendar.data["duration"][-1] == 30 and type(calendar.data["duration"][-1]) is int
    crm = decoded[CRM]
    phones = crm.data["customer_phone"]
    assert phones[-1] is None  # stored by the tool
    assert any(type(v) is float for v in phones[:-1])  # NaN from empty CSV cells
    analytics = decoded["analytics._analytics_data"]
    dtypes = dict(zip(analytics.columns, analytics.dtypes, strict=True))
    assert dtypes["session_duration_seconds"] == "float64"
    assert decoded["analytics._plots_data"].range_index is None


def test_v0_split_json_is_accepted(sandbox):
    tables = _session(sandbox)
    containers: dict = {}
    for key in TABLE_KEYS:
        container, attribute = key.split(".")
        containers.setdefault(container, {})[attribute] = tables.frame(key).to_json(orient="split")
    decoded = decode_state({"containers": containers}, sandbox.tables)  # no schema_version: v0
    crm = decoded[CRM]
    assert all(v is None or isinstance(v, str) for v in crm.data["customer_phone"])
    assert decoded["email._emails"].range_index == (0, len(decoded["email._emails"]), 1)
    assert decoded[CALENDAR].range_index is None and decoded[CALENDAR].index[-1] == 0


def _state_with(sandbox, key: str, mutate) -> dict:
    state = encode_state(dict(sandbox.tables))
    container, attribute = key.split(".")
    document = json.loads(state["containers"][container][attribute])
    mutate(document)
    state["containers"][container][attribute] = json.dumps(document)
    return state


@pytest.mark.parametrize(
    "mutate,field",
    [
        (lambda d: d["columns"].reverse(), "containers.email._emails.columns"),
        (lambda d: d["dtypes"].pop(), "containers.email._emails.dtypes"),
        (lambda d: d["dtypes"].__setitem__(0, "str"), "containers.email._emails.dtypes"),
        (lambda d: d["index"].pop(), "containers.email._emails.data"),
        (lambda d: d["data"][3].pop(), "containers.email._emails.data[3]"),
        (lambda d: d["nan_cells"].append([0, 0]), "containers.email._emails.nan_cells[0]"),
        (lambda d: d["nan_cells"].append([9999, 0]), "containers.email._emails.nan_cells[0]"),
        (lambda d: d.__setitem__("range_index", [0, 5, 1]), "containers.email._emails.range_index"),
        (
            lambda d: d.__setitem__("range_index", [0, 500, 0]),
            "containers.email._emails.range_index",
        ),
        (lambda d: d.__setitem__("extra", 1), "containers.email._emails"),
    ],
)
def test_invalid_table_names_the_field(sandbox, mutate, field):
    with pytest.raises(CodecError) as err:
        decode_state(_state_with(sandbox, "email._emails", mutate), sandbox.tables)
    assert err.value.field == f"state.{field}"


def test_non_object_dtype_cells_are_type_checked(sandbox):
    def bad(d):
        d["data"][0][5] = "yes"  # user_engaged is bool

    with pytest.raises(CodecError) as err:
        decode_state(_state_with(sandbox, "analytics._analytics_data", bad), sandbox.tables)
    assert "bool" in str(err.value)


@pytest.mark.parametrize(
    "state,field",
    [
        ([], "state"),
        ({"schema_version": 2, "containers": {}}, "state.schema_version"),
        ({"schema_version": 1, "containers": {}, "x": 1}, "state"),
        ({"schema_version": 1, "containers": {"email": {}}}, "state.containers"),
    ],
)
def test_invalid_state_names_the_field(sandbox, state, field):
    with pytest.raises(CodecError) as err:
        decode_state(state, sandbox.tables)
    assert err.value.field == field


def test_missing_attribute_is_refused(sandbox):
    state = encode_state(dict(sandbox.tables))
    del state["containers"]["analytics"]["_plots_data"]
    with pytest.raises(CodecError) as err:
        decode_state(state, sandbox.tables)
    assert err.value.field == "state.containers.analytics"


def test_infinite_float_cannot_be_encoded(sandbox):
    table = sandbox.tables["email._emails"].copy()
    table.data["subject"][0] = float("inf")
    with pytest.raises(CodecError):
        encode_table(table)
