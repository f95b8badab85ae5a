"""A graph's own MCP content blocks (docs/writing-agents.md, "Returning images, audio and files").

A graph whose final state has a `content` list of blocks (objects with a "type") gets them as its
CallToolResult's `content`, in order, and the rest of its state as `structuredContent`. A block is
an MCP content block (text, image, audio, an embedded resource, a resource link: as MCP writes it,
or as an `mcp_types` model), or one of LangChain's standard blocks that maps onto one (text, and
image or audio given as base64). Each is checked against the `mcp` SDK's types, with base64 data
and a media type of the block's kind, so that a client never gets a block it cannot read.

Any other `content` (none, a string, an empty list, a list of plain strings) is no blocks: the
result is the whole state, as for every other graph.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from typing import Any

from mcp_types import (
    AudioContent,
    BlobResourceContents,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    TextResourceContents,
)
from pydantic import BaseModel, ValidationError

KEY = "content"
MCP_TYPES: dict[str, type[BaseModel]] = {
    "text": TextContent,
    "image": ImageContent,
    "audio": AudioContent,
    "resource": EmbeddedResource,
    "resource_link": ResourceLink,
}
MCP_MODELS = tuple(MCP_TYPES.values())
# Keys of LangChain's standard content blocks (langchain_core.messages.content) that no MCP block has.
LANGCHAIN_KEYS = frozenset({"base64", "mime_type", "url", "file_id", "id", "extras", "index"})
# Media types a block's kind must have, so that an image is not sent as audio by mistake.
MEDIA_OF_KIND = {"image": "image/", "audio": "audio/"}


class BadContent(ValueError):
    """A block of a graph's `content` that is no MCP content block: says which, and why."""


def split(values: dict[str, Any]) -> tuple[list[dict[str, Any]], dict[str, Any]] | None:
    """The state's content blocks as MCP writes them, and the rest of the state; None when the state
    has no blocks. Raises BadContent for a `content` list with a block that is not valid."""
    given = values.get(KEY)
    if not isinstance(given, (list, tuple)) or not any(_typed(item) for item in given):
        return None
    blocks = [_mcp_block(n, item) for n, item in enumerate(given)]
    return blocks, {k: v for k, v in values.items() if k != KEY}


def _typed(item: Any) -> bool:
    return isinstance(item, MCP_MODELS) or (isinstance(item, Mapping) and "type" in item)


def _mcp_block(n: int, item: Any) -> dict[str, Any]:
    where = f"content[{n}]"
    if isinstance(item, MCP_MODELS):
        # An mcp_types model: its wire names (mimeType), not its Python ones (mime_type).
        item = item.model_dump(by_alias=True, exclude_none=True)
    if not isinstance(item, Mapping) or not isinstance(item.get("type"), str):
        raise BadContent(f'{where} is not a content block: an object with a "type"')
    kind = item["type"]
    if LANGCHAIN_KEYS & item.keys() or kind in ("file", "text-plain"):
        item = _from_langchain(where, item)
    model = MCP_TYPES.get(kind)
    if model is None:
        raise BadContent(f"{where} has type {kind!r}; a block's type is one of {', '.join(MCP_TYPES)}")
    if kind == "resource":
        # Its text or its blob says which of the two it is: the other's missing fields are no news.
        resource = item.get("resource")
        if not isinstance(resource, Mapping) or not ({"text", "blob"} & resource.keys()):
            raise BadContent(f"{where} (resource): resource must be an object with a uri and a text or a blob")
        _validate(
            where, kind, TextResourceContents if "text" in resource else BlobResourceContents, resource, "resource."
        )
    wire = _validate(where, kind, model, item)
    _check_data(where, kind, wire)
    return wire


def _validate(where: str, kind: str, model: type[BaseModel], item: Mapping[str, Any], at: str = "") -> dict[str, Any]:
    try:
        block = model.model_validate(dict(item))
    except ValidationError as exc:
        problems = "; ".join(f"{at}{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise BadContent(f"{where} ({kind}): {problems}") from None
    try:
        wire: dict[str, Any] = block.model_dump(mode="json", by_alias=True, exclude_none=True)
    except ValueError as exc:  # a value JSON cannot hold, in its _meta say
        raise BadContent(f"{where} ({kind}): {exc}") from None
    return wire


def _from_langchain(where: str, item: Mapping[str, Any]) -> dict[str, Any]:
    """A LangChain standard block as the MCP block it stands for: text, or image or audio as base64."""
    kind = item["type"]
    if kind == "text" and isinstance(item.get("text"), str):
        return {"type": "text", "text": item["text"]}
    if kind in ("image", "audio") and "base64" in item:
        return {"type": kind, "data": item["base64"], "mimeType": item.get("mime_type")}
    raise BadContent(
        f"{where} is a LangChain {kind!r} block that MCP cannot carry as it is: give an image or audio "
        "as base64 (create_image_block(base64=..., mime_type=...)), and a file as an MCP "
        '"resource" block with its uri'
    )


def _check_data(where: str, kind: str, wire: dict[str, Any]) -> None:
    if kind in MEDIA_OF_KIND:
        _base64(where, "data", wire["data"])
        if not wire["mimeType"].startswith(MEDIA_OF_KIND[kind]):
            raise BadContent(f"{where} ({kind}): mimeType {wire['mimeType']!r} is not an {MEDIA_OF_KIND[kind]}* type")
    elif kind == "resource" and "blob" in wire["resource"]:
        _base64(where, "resource.blob", wire["resource"]["blob"])


def _base64(where: str, field: str, data: str) -> None:
    try:
        base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise BadContent(f"{where}: {field} is not base64") from None
