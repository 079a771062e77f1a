"""The wire protocol: generated files are fresh, types round-trip, the table is complete."""

import re
import subprocess
import sys

import msgspec

import heddle_protocol as wire
from heddle_protocol.events import TextDeltaEvent, TurnEventParams
from heddle_protocol.generate import ROOT, outputs, schema
from heddle.core import events as core
from heddle.rpc import convert


def test_generated_files_are_fresh():
    for path, text in outputs().items():
        assert path.read_text() == text, f"{path} is stale: run python -m heddle_protocol.generate"


def test_generate_check_command():
    result = subprocess.run([sys.executable, "-m", "heddle_protocol.generate", "--check"],
                            cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr


def test_event_envelope_is_camel_case_and_tagged():
    params = TurnEventParams(session_id="s", turn_id="t", seq=3, event=TextDeltaEvent(text="hi"))
    assert msgspec.json.decode(msgspec.json.encode(params)) == {
        "sessionId": "s", "turnId": "t", "seq": 3, "event": {"kind": "textDelta", "text": "hi"}}


def test_invalid_params_name_the_field():
    try:
        msgspec.convert({"sessionId": "s", "prompt": 1}, wire.TurnStartParams)
    except msgspec.ValidationError as exc:
        assert "`$.prompt`" in str(exc)
    else:
        raise AssertionError("accepted an int prompt")


def test_every_method_has_params_and_unique_name():
    names = [m.name for m in wire.METHODS]
    assert len(names) == len(set(names))
    for m in wire.METHODS:
        assert issubclass(m.params, msgspec.Struct)
        assert (m.result is None) == (m.kind is wire.Kind.NOTIFICATION)


def _field_tables() -> dict[str, dict[str, str]]:
    """The field tables of protocol/README.md: type name → field → type column. A table
    belongs to the params of the method whose section it is in, or to the type that a line
    "Result `TurnStartResult`:" above it names."""
    by_method = {m.name: m.params.__name__ for m in wire.METHODS}
    tables: dict[str, dict[str, str]] = {}
    owner = table = None
    for line in (ROOT / "protocol/README.md").read_text().splitlines():
        if m := re.match(r"### `([a-zA-Z]+/[a-zA-Z]+)`", line):
            owner = by_method[m.group(1)]
        elif m := re.match(r"Result `(\w+)`:", line):
            owner = m.group(1)
        elif line == "| field | type | meaning |":
            table = tables.setdefault(owner, {})
        elif not line.startswith("|"):
            table = None
        elif table is not None and line.startswith("| `"):
            name_cell, type_cell = (c.strip() for c in re.split(r"(?<!\\)\|", line)[1:3])
            for name in re.findall(r"`(\w+)`", name_cell):
                table[name] = type_cell
    return tables


def test_fields_the_spec_lists_without_a_question_mark_are_required():
    """Required in the schema is what the daemon always sends (omit_defaults drops only fields
    with a default), so a field the spec shows as always present must have no default."""
    defs = schema()["$defs"]
    tables = _field_tables()
    assert {"SessionNewParams", "TurnStartParams", "TurnStartResult",
            "PermissionRequestParams"} <= set(tables)
    for type_name, fields in tables.items():
        required = set(defs[type_name].get("required", []))
        assert set(fields) <= set(defs[type_name]["properties"]), type_name
        always = {f for f, kind in fields.items() if not kind.endswith("?")}
        assert (type_name, always) == (type_name, required & set(fields))


def test_an_empty_turn_result_still_has_text_and_transitions():
    quiet = core.Terminal(reason=core.TerminalReason.ABORTED_STREAMING, messages=(),
                          usage=core.Usage())
    sent = msgspec.json.decode(msgspec.json.encode(convert.turn_result("t1", quiet)))
    assert sent == {"turnId": "t1", "reason": "cancelled", "cancelPhase": "streaming",
                    "usage": {}, "text": "", "transitions": []}
