"""Graphs served as MCP tools, read from a langgraph.json-compatible file.

`{"graphs": {"name": "package.module:attr" | "./path.py:attr" | {"path": ..., "description": ...}}}`,
the format of LangGraph's own config, so an existing LangGraph project plugs in unchanged. Each
graph is one tool named after its key. An entry object may also say when a call of it becomes an
MCP task (`"task": "auto" | "always" | "never"`, docs/tasks.md).
"""

from __future__ import annotations

import copy
import hashlib
import importlib
import importlib.util
import json
import sys
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from langgraph.pregel import Pregel
from mcp.shared.inbound import find_invalid_x_mcp_header

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
    # The graph's declared output (StateGraph(..., output_schema=...)): the channels a call's
    # result keeps, and their JSON Schema, the tool's outputSchema. None for a graph that declares
    # none, whose result is its whole state.
    output_keys: tuple[str, ...] | None = None
    output_schema: dict[str, Any] | None = None
    # The module the graph was imported from: its own log lines are those of its package's loggers.
    module: str = ""

    def graph_input(self, arguments: dict[str, Any]) -> dict[str, Any]:
        return {
            key: [{"role": "user", "content": value}]
            if key in self.message_fields and isinstance(value, str)
            else value
            for key, value in arguments.items()
        }

    def output(self, values: dict[str, Any]) -> dict[str, Any]:
        """What a call's result shows of the run's final state: the declared output's channels,
        as `invoke()` returns them, or the whole state."""
        if self.output_keys is None:
            return values
        return {key: values[key] for key in self.output_keys if key in values}


class GraphProblem(Exception):
    """Why one graph of the graphs file cannot be served, in a sentence that names the fix."""


class GraphsUnavailable(ImproperlyConfigured):
    """The graphs file, or a graph in it, cannot be served: what startup refuses with."""


@dataclass(frozen=True)
class Loaded:
    graphs: dict[str, RegisteredGraph]
    # Each graph that could not be loaded, by its tool name, with what is wrong and the fix; None
    # for a graphs file that could not be read at all.
    problems: dict[str | None, str]


def _import_target(target: str, base_dir: Path) -> tuple[Pregel, ModuleType]:
    module_ref, sep, attr = target.rpartition(":")
    if not sep or not module_ref or not attr:
        raise GraphProblem(f"its target {target!r} must look like 'package.module:graph' or './file.py:graph'")
    try:
        if module_ref.endswith(".py"):
            path = (base_dir / module_ref).resolve()
            if not path.is_file():
                raise GraphProblem(f"{path} does not exist (a ./file.py target is relative to the graphs file)")
            # The same name in every process (str hash() is salted per process): LangGraph's
            # serializer names a graph's own types by module, and the web reads what a worker wrote.
            module_name = f"_hitl_graph_{path.stem}_{hashlib.sha256(str(path).encode()).hexdigest()[:16]}"
            spec = importlib.util.spec_from_file_location(module_name, path)
            assert spec is not None and spec.loader is not None  # a .py file always has both
            module = importlib.util.module_from_spec(spec)
            sys.modules[module_name] = module
            spec.loader.exec_module(module)
        else:
            module = importlib.import_module(module_ref)
    except GraphProblem:
        raise
    except Exception as exc:  # the user's module failed to import: say how, without a traceback
        if module_ref.endswith(".py"):
            where = f"{module_ref} runs on its own"
        else:
            where = f"{module_ref} can be imported from {Path.cwd()} (is its package installed?)"
        raise GraphProblem(f"importing it failed with {type(exc).__name__}: {exc}; check that {where}") from exc
    if not hasattr(module, attr):
        raise GraphProblem(f"{module_ref} has no attribute {attr!r}")
    obj = getattr(module, attr)
    # langgraph.json also allows a factory that builds the graph.
    if not isinstance(obj, Pregel) and callable(obj):
        try:
            obj = obj()
        except Exception as exc:
            raise GraphProblem(f"building it with {attr}() failed with {type(exc).__name__}: {exc}") from exc
    if not isinstance(obj, Pregel):
        raise GraphProblem(
            f"{target} is a {type(obj).__name__}, not a compiled graph: point it at builder.compile(), "
            "or at a function that returns one"
        )
    return obj, module


def _is_message_list(schema: dict[str, Any]) -> bool:
    items = schema.get("items") or {}
    refs = json.dumps(items)
    return schema.get("type") == "array" and "Message" in refs


def _input_schema(graph: Pregel) -> tuple[dict[str, Any], frozenset[str]]:
    try:
        schema = copy.deepcopy(graph.get_input_jsonschema())
    except Exception as exc:
        fix = (
            " On Python 3.11 import TypedDict from typing_extensions, not from typing."
            if "typing_extensions.TypedDict" in str(exc)
            else ""
        )
        first_line = (str(exc).strip().splitlines() or [type(exc).__name__])[0].rstrip(".")
        raise GraphProblem(f"its input schema cannot be derived ({first_line}).{fix}") from exc
    schema.setdefault("type", "object")
    schema.setdefault("properties", {})
    if (reason := find_invalid_x_mcp_header(schema)) is not None:
        # A client drops a tool whose parameter headers it cannot mirror (2026-07-28): refused at
        # load, as the SDK's server refuses such a tool, rather than served to nobody.
        raise GraphProblem(f"its input schema has an invalid parameter header: {reason}.")
    message_fields = frozenset(k for k, v in schema["properties"].items() if _is_message_list(v))
    for key in message_fields:
        schema["properties"][key] = dict(MESSAGE_FIELD_SCHEMA)
    if message_fields:
        # The message classes' definitions are no longer referenced.
        schema.pop("$defs", None)
    return schema, message_fields


def _output_schema(graph: Pregel) -> tuple[tuple[str, ...] | None, dict[str, Any] | None]:
    """The declared output's channels and JSON Schema, or (None, None). LangGraph makes the state
    the output when none is declared; only a StateGraph built with `output_schema=` declares one.
    Its `content` list travels as the result's content blocks (mcp_gateway/calls/content_blocks.py), not
    in structuredContent, so the advertised schema leaves it out."""
    builder = getattr(graph, "builder", None)
    if builder is None or getattr(builder, "output_schema", None) in (None, getattr(builder, "state_schema", None)):
        return None, None
    channels = graph.output_channels
    keys = (channels,) if isinstance(channels, str) else tuple(channels)
    try:
        schema = copy.deepcopy(graph.get_output_jsonschema())
    except Exception as exc:
        first_line = (str(exc).strip().splitlines() or [type(exc).__name__])[0].rstrip(".")
        raise GraphProblem(f"its output schema cannot be derived ({first_line}).") from exc
    schema["type"] = "object"
    schema.setdefault("properties", {}).pop("content", None)
    if "content" in schema.get("required", []):
        schema["required"] = [name for name in schema["required"] if name != "content"]
    return keys, schema


def _read_config(config_path: Path) -> dict[str, Any]:
    fix = "set GRAPHS_CONFIG to your langgraph.json (default: langgraph.json beside manage.py)"
    try:
        config = json.loads(config_path.read_text())
    except FileNotFoundError:
        raise GraphProblem(f"The graphs file {config_path} does not exist: {fix}.") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise GraphProblem(f"The graphs file {config_path} cannot be read ({exc}): {fix}.") from None
    except ValueError as exc:
        raise GraphProblem(f"The graphs file {config_path} is not valid JSON ({exc}).") from None
    if not isinstance(config, dict) or not isinstance(config.get("graphs"), dict):
        raise GraphProblem(
            f'The graphs file {config_path} has no "graphs" object: write '
            '{"graphs": {"my_tool": "my_package.my_module:graph"}}.'
        )
    return config


def _add_dependencies(config: dict[str, Any], base_dir: Path) -> None:
    """langgraph.json's local "dependencies" ("." and "./src") are directories the graphs' own
    imports come from, as langgraph-cli puts them on the path."""
    for dependency in config.get("dependencies") or []:
        if isinstance(dependency, str) and dependency.startswith("."):
            directory = str((base_dir / dependency).resolve())
            if directory not in sys.path:
                sys.path.append(directory)


def load_graphs(config_path: Path) -> Loaded:
    """Every graph of the file that loads, and what is wrong with each that does not: one broken
    graph leaves the others servable (startup still refuses it, see `verify`)."""
    try:
        config = _read_config(config_path)
    except GraphProblem as problem:
        return Loaded({}, {None: str(problem)})
    _add_dependencies(config, config_path.parent)
    graphs: dict[str, RegisteredGraph] = {}
    problems: dict[str | None, str] = {}
    for name, entry in config["graphs"].items():
        target = entry if isinstance(entry, str) else entry.get("path") if isinstance(entry, dict) else None
        try:
            if not isinstance(target, str):
                raise GraphProblem(
                    'its entry must be "package.module:graph", "./file.py:graph" or {"path": ..., "description": ...}'
                )
            graph, module = _import_target(target, config_path.parent)
            schema, message_fields = _input_schema(graph)
            output_keys, output_schema = _output_schema(graph)
        except GraphProblem as problem:
            problems[name] = f"Graph {name!r} in {config_path}: {problem}"
            continue
        description = (
            (entry.get("description") if isinstance(entry, dict) else None)
            or (config.get("descriptions") or {}).get(name)
            or (module.__doc__ or "").strip()
            or f"Runs the {name} graph."
        )
        task = entry.get("task", "auto") if isinstance(entry, dict) else "auto"
        if task not in TASK_OPTIONS:
            problems[name] = (
                f"Graph {name!r} in {config_path}: task must be one of {', '.join(TASK_OPTIONS)}, not {task!r}"
            )
            continue
        graphs[name] = RegisteredGraph(
            name, graph, description, schema, message_fields, task, output_keys, output_schema, module.__name__
        )
    return Loaded(graphs, problems)


_loaded = cache(load_graphs)


def loaded() -> Loaded:
    return _loaded(Path(settings.GRAPHS_CONFIG))


def registry() -> dict[str, RegisteredGraph]:
    """The graphs that loaded, by tool name."""
    return loaded().graphs


def get_graph(name: str) -> RegisteredGraph | None:
    return registry().get(name)


def problem_of(name: str) -> str | None:
    """What is wrong with a graph listed in the graphs file that could not be loaded."""
    return loaded().problems.get(name)


def verify() -> Loaded:
    """Load the graphs as a process starts (web, worker, `make run`): a process that would answer
    every call to a graph with an error refuses to start instead, naming each graph and the fix."""
    result = loaded()
    if result.problems:
        raise GraphsUnavailable("\n".join(result.problems.values()))
    return result
