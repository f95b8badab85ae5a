"""A graph's content blocks (docs/writing-agents.md, "Returning images, audio and files") over the
wire, as the official Python SDK client of each revision reads them: its own content types."""

import pytest
from mcp import types

from tests.clients import MODERN, run, sdk_client


@pytest.mark.parametrize("mode", [MODERN, "legacy"])
def test_the_sdk_client_reads_a_graphs_text_image_and_resource_blocks_as_its_own_types(mcp_url, token, mode):
    async def go():
        async with sdk_client(mcp_url, token, mode=mode) as client:
            return await client.call_tool("test_multiple_content_types", {})

    result = run(go())
    assert not result.is_error
    text, image, resource = result.content
    assert isinstance(text, types.TextContent) and text.text == "Multiple content types test:"
    assert isinstance(image, types.ImageContent) and image.mime_type == "image/png"
    assert isinstance(resource, types.EmbeddedResource)
    assert str(resource.resource.uri) == "test://mixed-content-resource"


def test_a_bad_block_reaches_the_sdk_client_as_an_error_result(mcp_url, token):
    async def go():
        async with sdk_client(mcp_url, token) as client:
            return await client.call_tool("content_echo", {"content": [{"type": "image", "data": "%%"}]})

    result = run(go())
    assert result.is_error
    assert result.content[0].text.startswith("This tool's output has a content block that MCP can't carry")
