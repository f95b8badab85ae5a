"""A graph's output carrying MCP content blocks (docs/writing-agents.md, "Returning images, audio and
files"): the `content` key of its final state. Driven in-process with tests.graphs:content_echo,
whose output is what it is called with."""

from __future__ import annotations

import base64
import json

import pytest
from langchain_core.messages.content import create_audio_block, create_image_block, create_text_block

from tests.inprocess.driver import call
from tests.rounds import text_of

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n not a real image, but bytes").decode()
WAV = base64.b64encode(b"RIFF....WAVEfmt ").decode()
BAD_CONTENT = "This tool's output has a content block that MCP can't carry"

TEXT = {"type": "text", "text": "Sales by month:"}
IMAGE = {"type": "image", "data": PNG, "mimeType": "image/png"}
EVERY_KIND = [
    TEXT,
    IMAGE,
    {"type": "audio", "data": WAV, "mimeType": "audio/wav"},
    {"type": "resource", "resource": {"uri": "file:///sales.csv", "mimeType": "text/csv", "text": "month,sales\n"}},
    {"type": "resource", "resource": {"uri": "file:///sales.xlsx", "blob": PNG}},
    {"type": "resource_link", "uri": "https://example.com/sales", "name": "sales"},
]


def test_a_graphs_content_blocks_are_the_results_content_in_order_and_the_rest_of_its_state_its_structured_content():
    result = call("content_echo", {"content": EVERY_KIND, "note": "twelve months"})

    assert result == {"content": EVERY_KIND, "structuredContent": {"note": "twelve months"}, "isError": False}


def test_a_block_keeps_its_annotations_and_meta():
    block = {**IMAGE, "annotations": {"audience": ["user"], "priority": 0.5}, "_meta": {"chart": "bar"}}

    assert call("content_echo", {"content": [block]})["content"] == [block]


def test_langchains_standard_text_image_and_audio_blocks_become_the_mcp_blocks_they_stand_for():
    content = [
        create_text_block("Sales by month:"),
        create_image_block(base64=PNG, mime_type="image/png"),
        create_audio_block(base64=WAV, mime_type="audio/wav"),
    ]

    assert call("content_echo", {"content": content})["content"] == [
        TEXT,
        IMAGE,
        {"type": "audio", "data": WAV, "mimeType": "audio/wav"},
    ]


@pytest.mark.parametrize(
    "state",
    [
        {"note": "no content key"},
        {"content": "a string, such as an e-mail's body"},
        {"content": []},
        {"content": ["a list", "of strings"]},
        {"content": [["nested"], 3, None]},
    ],
    ids=["absent", "string", "empty list", "strings", "other values"],
)
def test_a_state_without_content_blocks_is_the_result_as_before_its_json_text_and_structured_content(state):
    result = call("content_echo", state)

    assert result["isError"] is False
    assert result["structuredContent"] == state
    assert result["content"] == [{"type": "text", "text": json.dumps(state, separators=(",", ":"))}]


@pytest.mark.parametrize(
    ("block", "why"),
    [
        (
            {"type": "imag", "data": PNG, "mimeType": "image/png"},
            "content[1] has type 'imag'; a block's type is one of",
        ),
        ({"type": "image", "data": PNG}, "content[1] (image): mimeType: Field required"),
        ({"type": "image", "data": "not base64!", "mimeType": "image/png"}, "content[1]: data is not base64"),
        ({"type": "audio", "data": PNG, "mimeType": "image/png"}, "content[1] (audio): mimeType 'image/png' is not"),
        ({"type": "text", "text": 42}, "content[1] (text): text: Input should be a valid string"),
        ({"type": "resource", "resource": {"text": "no uri"}}, "content[1] (resource): resource.uri: Field required"),
        (
            {"type": "resource", "resource": {"uri": "file:///a", "blob": "%%"}},
            "content[1]: resource.blob is not base64",
        ),
        ("a string among blocks", 'content[1] is not a content block: an object with a "type"'),
        (create_image_block(url="https://example.com/a.png"), "content[1] is a LangChain 'image' block"),
        (create_image_block(base64=PNG), "content[1] (image): mimeType: Input should be a valid string"),
        ({"type": "file", "base64": PNG, "mime_type": "application/pdf"}, "content[1] is a LangChain 'file' block"),
    ],
    ids=[
        "unknown type",
        "no mimeType",
        "data not base64",
        "audio of an image type",
        "text not a string",
        "resource without uri",
        "blob not base64",
        "not an object",
        "langchain image by url",
        "langchain image without its type",
        "langchain file",
    ],
)
def test_a_block_mcp_cannot_carry_ends_the_call_with_an_error_result_that_names_it(block, why):
    result = call("content_echo", {"content": [TEXT, block], "note": "kept out of the error"})

    assert result["isError"] is True and "structuredContent" not in result
    assert text_of(result).startswith(f"{BAD_CONTENT}: {why}"), text_of(result)


def test_a_bad_block_is_an_error_result_for_a_client_of_an_older_revision_too():
    result = call("content_echo", {"content": [{"type": "video"}]}, modern=False)

    assert result["isError"] is True
    assert text_of(result).startswith(f"{BAD_CONTENT}: content[0] has type 'video'")


def test_blocks_given_as_the_mcp_sdks_models_are_sent_with_their_wire_names():
    result = call("content_as_mcp_models")

    assert result["content"] == [{"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"}]
