"""Hypothesis strategies and bookkeeping shared by the fuzz suites (``test_fuzz_*.py``).

Inputs are hostile on purpose: full Unicode text including lone surrogates (as JSON escapes, and
as the ill-formed UTF-8 bytes ``surrogatepass`` writes), integers over 4,300 digits, NaN and
Infinity, nesting past every limit, truncated and garbage bytes, huge bodies.

Budget: ``WORKPLACE_ENV_FUZZ_EXAMPLES`` examples per fuzz test (default :data:`CI_EXAMPLES`,
derandomised so CI is repeatable); any other value runs random examples. Every example sent is
counted in :data:`COUNTS`, every answer by status in :data:`OUTCOMES`; with
``WORKPLACE_ENV_FUZZ_REPORT=FILE`` both are written there as JSON when the suites finish
(docs/testing.md has the long run's command).
"""

from __future__ import annotations

import json
import os
import threading
from collections import Counter
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

CI_EXAMPLES = 40
EXAMPLES = int(os.environ.get("WORKPLACE_ENV_FUZZ_EXAMPLES", CI_EXAMPLES))
#: The id of the well-behaved session each suite watches; no fuzzed input names it.
WELL_BEHAVED = "well-behaved-1"

FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=EXAMPLES == CI_EXAMPLES,
    database=None,
    suppress_health_check=list(HealthCheck),
)

COUNTS: Counter[str] = Counter()
#: Answers seen per target: ``"<kind> <status>"`` (a gRPC status name or an HTTP code).
OUTCOMES: Counter[str] = Counter()
_COUNT_LOCK = threading.Lock()


def count(kind: str) -> None:
    """Count one input sent (``kind``: the RPC or route)."""
    with _COUNT_LOCK:
        COUNTS[kind] += 1


def seen(kind: str, status: object) -> None:
    """Count one answer of ``kind`` with ``status`` (``grpc.StatusCode`` name, HTTP code)."""
    with _COUNT_LOCK:
        OUTCOMES[f"{kind} {getattr(status, 'name', status)}"] += 1


def write_report() -> None:
    """Write :data:`COUNTS` to ``$WORKPLACE_ENV_FUZZ_REPORT`` (merged with what is there)."""
    target = os.environ.get("WORKPLACE_ENV_FUZZ_REPORT")
    if not target:
        return
    path = Path(target)
    merged: Counter[str] = Counter()
    outcomes: Counter[str] = Counter()
    if path.exists():
        earlier = json.loads(path.read_text())
        merged.update(earlier.get("inputs", {}))
        outcomes.update(earlier.get("outcomes", {}))
    merged.update(COUNTS)
    outcomes.update(OUTCOMES)
    report = {
        "inputs": dict(merged),
        "outcomes": dict(outcomes),
        "total": sum(merged.values()),
        "examples": EXAMPLES,
    }
    path.write_text(json.dumps(report, indent=1, sort_keys=True))


# -- text ----------------------------------------------------------------------------------------

#: Every code point, lone surrogates included (they cannot be UTF-8 encoded).
any_text = st.text(st.characters(min_codepoint=0, max_codepoint=0x10FFFF), max_size=24)
lone_surrogate = st.integers(0xD800, 0xDFFF).map(chr)
hostile_text = st.one_of(
    any_text,
    st.builds(lambda a, s, b: a + s + b, any_text, lone_surrogate, any_text),
    st.sampled_from(["", " ", "a b", "x" * 257, "\x00", "é", "🙂", "s1", "ok:id.1-2"]),
)
ids = st.one_of(
    st.sampled_from(["s1", "s2", "fz:1", "legacy-1", "", "x" * 300]), hostile_text
).filter(lambda s: s != WELL_BEHAVED)
tools = st.one_of(
    st.sampled_from(
        [
            "email_send_email",
            "email_search_emails",
            "email_delete_email",
            "calendar_create_event",
            "analytics_create_plot",
            "project_management_create_task",
            "customer_relationship_manager_add_customer",
            "company_directory_find_email_address",
            "nope",
            "",
        ]
    ),
    hostile_text,
)


def clean(text: str) -> str:
    """``text`` without lone surrogates (what UTF-8, and so a protobuf string, can hold)."""
    return text.encode("utf-8", "replace").decode("utf-8")


def surrogate_utf8(text: str) -> bytes:
    """``text`` as UTF-8, lone surrogates written as the ill-formed bytes they would be."""
    return text.encode("utf-8", "surrogatepass")


# -- JSON ----------------------------------------------------------------------------------------

GIANT = "9" * 4301
_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    hostile_text,
)
json_values = st.recursive(
    _scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(hostile_text, inner, max_size=4)
    ),
    max_leaves=12,
)


def _dump(value: Any) -> str:
    return json.dumps(value)  # ASCII: lone surrogates become \udXXX escapes; NaN stays NaN


def _call_args(value: Any) -> str:
    return json.dumps(value if isinstance(value, dict) else {"query": value})


json_texts = st.one_of(
    json_values.map(_dump),
    json_values.map(_call_args),
    st.sampled_from(
        [
            "{}",
            "[]",
            "null",
            "NaN",
            "-Infinity",
            "1e999",
            GIANT,
            "[" + GIANT + "]",
            '{"query": ' + GIANT + "}",
            '{"query": "\\ud800"}',
            '{"\\udfff": 1}',
            "[" * 100_000 + "]" * 100_000,
            '{"a": ' * 150 + "1" + "}" * 150,
            '{"query": "C++"}',
            '{"name": null}',
            "{bad",
            "",
            "\ufeff{}",
        ]
    ),
    json_values.map(_dump).map(lambda t: t[: len(t) // 2]),  # truncated
)
calls = st.lists(st.fixed_dictionaries({"name": tools, "arguments": json_texts}), max_size=3)


def response_items(calls_: list[dict[str, str]]) -> list[dict[str, Any]]:
    """Responses-API output items for ``calls_`` (function calls, plus other item types)."""
    items: list[dict[str, Any]] = [{"type": "message", "content": []}]
    for i, call in enumerate(calls_):
        items.append({"type": "function_call", "call_id": f"c{i}", **call})
    return items


# -- bytes ---------------------------------------------------------------------------------------

garbage = st.one_of(
    st.binary(max_size=64),
    st.sampled_from([b"", b"\xff", b"\x0a\x80", b"\x0a\x03\xed\xa0\x80", b"\x08\x80" * 20]),
)


def mutate(data: bytes, edits: list[tuple[int, int]], cut: int | None) -> bytes:
    """``data`` with bytes overwritten at (position, value) pairs, optionally truncated."""
    out = bytearray(data)
    for position, value in edits:
        if out:
            out[position % len(out)] = value
    if cut is not None and out:
        del out[cut % len(out) :]
    return bytes(out)


edits = st.lists(st.tuples(st.integers(0, 1 << 16), st.integers(0, 255)), max_size=3)
cuts = st.one_of(st.none(), st.integers(0, 1 << 16))


def stable_snapshot(snapshot: Any, call_ids: set[str] | None = None) -> Any:
    """``snapshot`` (a ``SessionSnapshot``) as it stays while nobody writes to the session: its
    call records' ages (they grow with time) cleared, and only the records of ``call_ids`` (the
    ones at the start: a check's own reads through the SDK add records of their own)."""
    stable = type(snapshot)()
    stable.CopyFrom(snapshot)
    kept = [r for r in stable.call_records if call_ids is None or r.call_id in call_ids]
    del stable.call_records[:]
    stable.call_records.extend(kept)
    for record in stable.call_records:
        record.ClearField("age")
    return stable
