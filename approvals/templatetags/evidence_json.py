"""`{{ value|as_json }}`: a value of the evidence as indented JSON, as the JSON export writes it,
so the printed page and the download read alike."""

import json
from typing import Any

from django import template

register = template.Library()


@register.filter
def as_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, indent=2, sort_keys=True)
