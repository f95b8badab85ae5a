"""How the admin shows an approval's JSON to people: indented, argument by argument, and the
agent's answer as its words with the records it quotes laid out as fields."""

from __future__ import annotations

import json


def pretty(value) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False)


def readable(call: dict) -> dict:
    """A tool call for the decision page: its arguments one per line, and as editable JSON."""
    given = call.get("input")
    arguments: dict = given if isinstance(given, dict) else {}
    return {
        "name": call.get("name") or "a tool",
        "arguments": [(key, value if isinstance(value, str) else pretty(value)) for key, value in arguments.items()],
        "json": pretty(arguments),
    }


def readable_answer(answer: str) -> dict:
    """The agent's answer for people: its words, and each JSON object it quotes (a tool's result,
    say) as a list of fields rather than raw JSON."""
    decoder = json.JSONDecoder()
    words, records, start = [], [], 0
    at = answer.find("{")
    while at != -1:
        try:
            value, end = decoder.raw_decode(answer, at)
        except ValueError:
            at = answer.find("{", at + 1)
            continue
        words.append(answer[start:at])
        records.append([(key, item if isinstance(item, str) else pretty(item)) for key, item in value.items()])
        start = end
        at = answer.find("{", end)
    words.append(answer[start:])
    # "Your message was recorded: {...}" reads "Your message was recorded", above the fields.
    text = "".join(words).strip().rstrip(":;,").strip()
    return {"text": text, "records": records}
