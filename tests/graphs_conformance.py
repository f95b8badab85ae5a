"""The tools the MCP conformance suite calls by name (test_simple_text, test_image_content, ...), as
graphs, each returning what the suite's scenario checks: registered only in the tests' graphs file
(tests/langgraph.json), which the compatibility tests serve, never with the example agents."""

from __future__ import annotations

import base64
import io
import struct
import wave
import zlib
from typing import Any

from langgraph.graph import START, StateGraph
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
