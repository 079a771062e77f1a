"""The wire protocol: generated files are fresh, types round-trip, the table is complete."""

import subprocess
import sys

import msgspec

import heddle_protocol as wire
from heddle_protocol.events import TextDeltaEvent, TurnEventParams
from heddle_protocol.generate import ROOT, outputs


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
