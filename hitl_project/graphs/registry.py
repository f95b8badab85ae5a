"""Graphs served as MCP tools, read from a langgraph.json-compatible file.

`{"graphs": {"name": "package.module:attr" | "./path.py:attr" | {"path": ..., "description": ...}}}`,
the format of LangGraph's own config, so an existing LangGraph project plugs in unchanged. Each
graph is one tool named after its key. An entry object may also say when a call of it becomes an
MCP task (`"task": "auto" | "always" | "never"`, docs/tasks.md).
"""

from __future__ import annotations

import copy
import importlib
import importlib.util
import json
import sys
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from langgraph.pregel import Pregel

TASK_OPTIONS = ("auto", "always", "never")
MESSAGE_FIELD_SCHEMA = {"type": "string", "description": "The user message to send to the agent."}


@dataclass(frozen=True)
class RegisteredGraph:
    name: str
    graph: Pregel
    description: str
    input_schema: dict[str, Any]
    # Input fields that are LangChain message lists in the graph but a plain string on the wire
    # (as langgraph-api does): the string becomes one user message.
    message_fields: frozenset[str] = field(default_factory=frozenset)
    # When a call becomes an MCP task: "auto" (the server decides), "always", or "never".
    task: str = "auto"

    def graph_input(self, arguments: dict[str, Any]) -> dict[str, Any]:
        return {
            key: [{"role": "user", "content": value}]
            if key in self.message_fields and isinstance(value, str)
            else value
            for key, value in arguments.items()
        }


def _import_target(target: str, base_dir: Path) -> Any:
    module_ref, sep, attr = target.rpartition(":")
    if not sep:
        raise ImproperlyConfigured(f"Graph target {target!r} must look like 'module:attr' or './file.py:attr'")
    if module_ref.endswith(".py"):
        path = (base_dir / module_ref).resolve()
        module_name = f"_hitl_graph_{path.stem}_{abs(hash(path))}"
        spec = importlib.util.spec_from_file_location(module_name, path)
        if spec is None or spec.loader is None:
            raise ImproperlyConfigured(f"Cannot load graph file {path}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        spec.loader.exec_module(module)
    else:
        module = importlib.import_module(module_ref)
    obj = getattr(module, attr)
    # langgraph.json also allows a factory that builds the graph.
    if not isinstance(obj, Pregel) and callable(obj):
        obj = obj()
    if not isinstance(obj, Pregel):
        raise ImproperlyConfigured(f"{target!r} is not a compiled LangGraph graph")
    return obj, module


def _is_message_list(schema: dict[str, Any]) -> bool:
    items = schema.get("items") or {}
    refs = json.dumps(items)
    return schema.get("type") == "array" and "Message" in refs


def _input_schema(graph: Pregel) -> tuple[dict[str, Any], frozenset[str]]:
    schema = copy.deepcopy(graph.get_input_jsonschema())
    schema.setdefault("type", "object")
    schema.setdefault("properties", {})
    message_fields = frozenset(k for k, v in schema["properties"].items() if _is_message_list(v))
    for key in message_fields:
        schema["properties"][key] = dict(MESSAGE_FIELD_SCHEMA)
    if message_fields:
        # The message classes' definitions are no longer referenced.
        schema.pop("$defs", None)
    return schema, message_fields


def load_graphs(config_path: Path) -> dict[str, RegisteredGraph]:
    config = json.loads(config_path.read_text())
    graphs: dict[str, RegisteredGraph] = {}
    for name, entry in config.get("graphs", {}).items():
        target = entry if isinstance(entry, str) else entry["path"]
        graph, module = _import_target(target, config_path.parent)
        description = (
            (entry.get("description") if isinstance(entry, dict) else None)
            or (config.get("descriptions") or {}).get(name)
            or (module.__doc__ or "").strip()
            or f"Runs the {name} graph."
        )
        schema, message_fields = _input_schema(graph)
        task = entry.get("task", "auto") if isinstance(entry, dict) else "auto"
        if task not in TASK_OPTIONS:
            raise ImproperlyConfigured(f"Graph {name!r}: task must be one of {', '.join(TASK_OPTIONS)}, not {task!r}")
        graphs[name] = RegisteredGraph(name, graph, description, schema, message_fields, task)
    return graphs


@cache
def registry() -> dict[str, RegisteredGraph]:
    return load_graphs(Path(settings.GRAPHS_CONFIG))


def get_graph(name: str) -> RegisteredGraph | None:
    return registry().get(name)
