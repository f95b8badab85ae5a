"""Draws a bar chart of the values it is given: returns it as a PNG image, with the values as a CSV file."""

import base64
import struct
import zlib
from typing import Annotated

from langgraph.graph import START, StateGraph
from pydantic import BaseModel, Field
from typing_extensions import TypedDict  # not typing's, on Python 3.11


class Input(BaseModel):
    values: list[Annotated[int, Field(ge=0)]] = Field(min_length=1, max_length=50)


class State(TypedDict, total=False):
    values: list[int]
    total: int
    content: list[dict]  # MCP content blocks: the content of the tool's result


def png(rows: list[list[bool]]) -> bytes:
    """A greyscale PNG of the pixels, a row at a time (True is black), with zlib alone."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", len(rows[0]), len(rows), 8, 0, 0, 0, 0)
    pixels = b"".join(b"\x00" + bytes(0 if black else 255 for black in row) for row in rows)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(pixels)) + chunk(b"IEND", b"")


def draw(state: State) -> State:
    values = state["values"]
    top = max(values) or 1
    heights = [round(100 * value / top) for value in values]  # bars 10 pixels wide, 2 apart
    rows = [[x % 12 < 10 and y >= 100 - heights[x // 12] for x in range(12 * len(values))] for y in range(100)]
    csv = "value\n" + "".join(f"{value}\n" for value in values)
    return {
        "total": sum(values),
        "content": [
            {"type": "text", "text": f"A bar chart of {len(values)} values; the largest is {max(values)}."},
            {"type": "image", "data": base64.b64encode(png(rows)).decode(), "mimeType": "image/png"},
            {"type": "resource", "resource": {"uri": "chart://values.csv", "mimeType": "text/csv", "text": csv}},
        ],
    }


graph = StateGraph(State, input_schema=Input).add_node(draw).add_edge(START, "draw").compile()
