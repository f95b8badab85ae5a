"""The column type of what a round keeps exactly as it was sent or made: its input, answers'
resume values, outcome, a stream's messages."""

from __future__ import annotations

import json
from typing import Any

from django.db import models


class ExactJSONField(models.TextField):
    """JSON kept as the text it was sent as. PostgreSQL's jsonb keeps numbers as `numeric`, so a
    float such as 1e20 comes back as the integer 100000000000000000000: the agent would not get
    what the client sent, and LangGraph's checkpoint serializer cannot hold such an integer. SQL
    NULL stands for None."""

    # For django-stubs: values are JSON, not str.
    _pyi_private_set_type: Any
    _pyi_private_get_type: Any

    def from_db_value(self, value: str | None, expression: Any, connection: Any) -> Any:
        return None if value is None else json.loads(value)

    def to_python(self, value: Any) -> Any:
        return value

    def get_prep_value(self, value: Any) -> str | None:
        if value is None:
            return None
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
        try:
            text.encode()
        except UnicodeEncodeError:
            # An unpaired surrogate (an agent's output decoded with surrogateescape, say) is no
            # UTF-8 the database could store: as a JSON escape it is, and it reads back the same.
            text = json.dumps(value, separators=(",", ":"))
        return text

    def deconstruct(self) -> Any:
        # The migrations import it from mcp_gateway.models, which exports it beside the models
        # that use it: named here, every field of this type would be a change to migrate.
        name, _, args, kwargs = super().deconstruct()
        return name, "mcp_gateway.models.ExactJSONField", args, kwargs
