"""The tools the MCP conformance suite calls by name (test_simple_text, test_image_content, ...), as
graphs, each returning what the suite's scenario checks: registered only in the tests' graphs file
(tests/langgraph.json), which the compatibility tests serve, never with the example agents."""

from __future__ import annotations

import base64
import io
import struct
import time
import wave
import zlib
from typing import Any

from langgraph.graph import START, StateGraph
from langgraph.types import interrupt
from pydantic import BaseModel, ConfigDict
from typing_extensions import TypedDict


class NoInput(TypedDict):
    pass


class State(TypedDict, total=False):
    content: list[dict[str, Any]]


def _png_pixel(red: int, green: int, blue: int) -> str:
    """A 1x1 PNG of one colour, base64."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)  # 1x1, 8-bit RGB
    pixels = zlib.compress(bytes([0, red, green, blue]))  # filter byte, then the pixel
    png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")
    return base64.b64encode(png).decode()


def _wav_silence(frames: int = 80) -> str:
    """A hundredth of a second of silence, 8 kHz mono 16-bit WAV, base64."""
    out = io.BytesIO()
    with wave.open(out, "wb") as wav:
        wav.setnchannels(1)
        wav.setsampwidth(2)
        wav.setframerate(8000)
        wav.writeframes(b"\x00\x00" * frames)
    return base64.b64encode(out.getvalue()).decode()


RED_PIXEL = {"type": "image", "data": _png_pixel(255, 0, 0), "mimeType": "image/png"}


def _returning(*blocks: dict[str, Any]) -> Any:
    return (
        StateGraph(State, input_schema=NoInput)
        .add_node("answer", lambda state: {"content": list(blocks)})
        .add_edge(START, "answer")
        .compile()
    )


test_simple_text = _returning({"type": "text", "text": "This is a simple text response for testing."})
test_image_content = _returning(RED_PIXEL)
test_audio_content = _returning({"type": "audio", "data": _wav_silence(), "mimeType": "audio/wav"})
test_embedded_resource = _returning(
    {
        "type": "resource",
        "resource": {
            "uri": "test://embedded-resource",
            "mimeType": "text/plain",
            "text": "This is an embedded resource content.",
        },
    }
)
test_multiple_content_types = _returning(
    {"type": "text", "text": "Multiple content types test:"},
    RED_PIXEL,
    {
        "type": "resource",
        "resource": {
            "uri": "test://mixed-content-resource",
            "mimeType": "application/json",
            "text": '{"test":"data","value":123}',
        },
    },
)


def _fail(state: State) -> State:
    raise RuntimeError("This tool intentionally returns an error for testing")


test_error_handling = StateGraph(State, input_schema=NoInput).add_node("fail", _fail).add_edge(START, "fail").compile()


class address(BaseModel):  # noqa: N801  # the suite looks for $defs.address, which is the model's name
    street: str | None = None
    city: str | None = None


Address = address  # the field below is named `address` too


class JsonSchema2020Input(BaseModel):
    """An input schema that keeps JSON Schema 2020-12's `$schema`, `$defs` and `additionalProperties`."""

    model_config = ConfigDict(
        extra="forbid", json_schema_extra={"$schema": "https://json-schema.org/draft/2020-12/schema"}
    )

    name: str | None = None
    address: Address | None = None


class JsonSchema2020State(State, total=False):
    name: str | None
    address: Any


json_schema_2020_12_tool = (
    StateGraph(JsonSchema2020State, input_schema=JsonSchema2020Input)
    .add_node("answer", lambda state: {"content": [{"type": "text", "text": "Received."}]})
    .add_edge(START, "answer")
    .compile()
)


# --- tools that ask the client or report progress mid-call (older clients with answering on) -----


class MessageInput(TypedDict):
    message: str


class AskState(State, total=False):
    message: str


def _asking(schema: dict[str, Any], message: str | None = None, input_schema: Any = NoInput) -> Any:
    """A graph that asks one form question with `schema` (its message the call's `message`
    argument, or `message`) and returns what came back as one text block."""

    def ask(state: AskState) -> AskState:
        content = interrupt(message or state["message"], response_schema=schema)
        return {"content": [{"type": "text", "text": f"Elicitation completed: action=accept, content={content}"}]}

    return StateGraph(AskState, input_schema=input_schema).add_node("ask", ask).add_edge(START, "ask").compile()


test_elicitation = _asking(
    {
        "type": "object",
        "properties": {
            "username": {"type": "string", "description": "User's response"},
            "email": {"type": "string", "description": "User's email address"},
        },
        "required": ["username", "email"],
    },
    input_schema=MessageInput,
)
test_elicitation_sep1034_defaults = _asking(
    {
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": "User name", "default": "John Doe"},
            "age": {"type": "integer", "description": "User age", "default": 30},
            "score": {"type": "number", "description": "User score", "default": 95.5},
            "status": {
                "type": "string",
                "description": "User status",
                "enum": ["active", "inactive", "pending"],
                "default": "active",
            },
            "verified": {"type": "boolean", "description": "Verification status", "default": True},
        },
        "required": [],
    },
    "Test client default value handling - please accept with defaults",
)
test_elicitation_sep1330_enums = _asking(
    {
        "type": "object",
        "properties": {
            "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
            "titledSingle": {
                "type": "string",
                "oneOf": [
                    {"const": "value1", "title": "First Option"},
                    {"const": "value2", "title": "Second Option"},
                    {"const": "value3", "title": "Third Option"},
                ],
            },
            "legacyEnum": {
                "type": "string",
                "enum": ["opt1", "opt2", "opt3"],
                "enumNames": ["Option One", "Option Two", "Option Three"],
            },
            "untitledMulti": {"type": "array", "items": {"type": "string", "enum": ["option1", "option2", "option3"]}},
            "titledMulti": {
                "type": "array",
                "items": {
                    "anyOf": [
                        {"const": "value1", "title": "First Choice"},
                        {"const": "value2", "title": "Second Choice"},
                        {"const": "value3", "title": "Third Choice"},
                    ]
                },
            },
        },
        "required": [],
    },
    "Choose from each kind of list",
)


def _report_progress(state: State) -> State:
    """Reports 0, 50 and 100 of 100, each held long enough for a stream's reading of progress
    (about once a second) to see it, a reconnection's second aside."""
    from langgraph.config import get_stream_writer

    for done in (0, 50, 100):
        get_stream_writer()({"message": f"{done}/100"})
        time.sleep(1.5)
    return {"content": [{"type": "text", "text": "Progress test completed"}]}


test_tool_with_progress = (
    StateGraph(State, input_schema=NoInput).add_node("work", _report_progress).add_edge(START, "work").compile()
)


def _outlast_the_stream(state: State) -> State:
    """Runs longer than the stream the compatibility tests' server holds open (MCP_STREAM_HOLD_SECONDS),
    so that its client gets the result after reconnecting with Last-Event-ID."""
    time.sleep(3.5)
    return {"content": [{"type": "text", "text": "Reconnection test completed successfully"}]}


test_reconnection = (
    StateGraph(State, input_schema=NoInput).add_node("work", _outlast_the_stream).add_edge(START, "work").compile()
)
