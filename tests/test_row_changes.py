"""Every change of the gateway's rows has one home (docs/architecture.md lists them, under "The
states of a call and of a round"): a model method, a statement of mcp_gateway/calls/store.py, or the
lease of graph_runtime/leases.py. Read without a server, the service's code (mcp_gateway/,
graph_runtime/, hitl_project/; tests and bench/ set rows up their own way) writes rows through the
ORM nowhere else, and sends no INSERT, UPDATE or DELETE of its own elsewhere.

A write is a call of a QuerySet's or a model's writing method (`update`, `delete`, `create`,
`bulk_create`, `save`, ...) on a query (an expression through `objects` or a QuerySet method such as
`filter`), on one of the gateway's models or an instance made from it, on a name a function bound to
one of these, or on an admin hook's `queryset`; `get_user_model()`'s rows are Django's auth app's.
A query handed to a function under another name, or SQL text built away from the `execute` that
sends it, is beyond what this reads."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("mcp_gateway", "graph_runtime", "hitl_project")
# The homes: the models' modules, the store, and the lease a worker holds on a round's row (or
# an approval's: one implementation for both tables, reached through Round.lease).
HOMES = {
    "mcp_gateway/models.py",
    "mcp_gateway/bearer_tokens.py",
    "mcp_gateway/session_models.py",
    "mcp_gateway/calls/store.py",
    "graph_runtime/leases.py",
}
WRITES = {"update", "delete", "create", "bulk_create", "bulk_update", "get_or_create", "update_or_create", "save"}
# A manager, or a QuerySet's method that returns another (a query handed in: an admin's `queryset`).
QUERIES = {"objects", "_default_manager", "filter", "exclude", "all", "select_for_update", "select_related"}
QUERIES |= {"order_by", "using", "only", "defer", "annotate"}
MODEL_MODULES = ("mcp_gateway/models.py", "mcp_gateway/bearer_tokens.py", "mcp_gateway/session_models.py")
SQL_WRITE = re.compile(r"^\s*(?:WITH\b.*\b)?(?:INSERT|UPDATE|DELETE)\b", re.IGNORECASE | re.DOTALL)


def gateway_models() -> set[str]:
    """The names of the models the gateway's model modules define."""
    return {
        node.name
        for module in MODEL_MODULES
        for node in ast.walk(ast.parse((ROOT / module).read_text()))
        if isinstance(node, ast.ClassDef) and any(ast.unparse(base) == "models.Model" for base in node.bases)
    }


MODELS = gateway_models()


def modules() -> Iterator[Path]:
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            relative = path.relative_to(ROOT).as_posix()
            if "/migrations/" not in relative and relative not in HOMES:
                yield path


def bindings(nodes: list[ast.AST]) -> dict[str, ast.expr]:
    """What each name was assigned among `nodes`, elements of a tuple included (`user, created =
    ...objects.get_or_create(...)`)."""
    bound: dict[str, ast.expr] = {}
    for node in nodes:
        if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                for name in ast.walk(target):
                    if isinstance(name, ast.Name):
                        bound[name.id] = node.value
    return bound


def is_query(expr: ast.expr, bound: dict[str, ast.expr], parameters: set[str]) -> bool:
    """Whether `expr` is a query of the gateway's rows, or an instance one read."""
    seen: set[str] = set()
    while True:
        if isinstance(expr, ast.Attribute):
            if expr.attr in QUERIES:
                return not _auth_users(expr)
            expr = expr.value
        elif isinstance(expr, ast.Call):
            expr = expr.func
        elif isinstance(expr, ast.Subscript):
            expr = expr.value
        elif isinstance(expr, ast.Name) and expr.id in bound and expr.id not in seen:
            seen.add(expr.id)
            expr = bound[expr.id]
        else:
            return isinstance(expr, ast.Name) and (expr.id in MODELS or expr.id in parameters)


def _auth_users(expr: ast.expr) -> bool:
    """An expression rooted at get_user_model(): Django's auth app's rows, not the gateway's."""
    while isinstance(expr, ast.Attribute | ast.Call | ast.Subscript):
        expr = expr.func if isinstance(expr, ast.Call) else expr.value
        if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and expr.func.id == "get_user_model":
            return True
    return False


def sql_text(expr: ast.expr) -> str:
    """The literal text of a string or an f-string (its placeholders left out)."""
    if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
        return expr.value
    if isinstance(expr, ast.JoinedStr):
        return "".join(v.value for v in expr.values if isinstance(v, ast.Constant) and isinstance(v.value, str))
    return ""


def scopes(tree: ast.Module) -> Iterator[tuple[list[ast.AST], dict[str, ast.expr], set[str]]]:
    """The top level of `tree` and each of its functions: its own nodes, what its names are bound
    to, and its parameters that hold a query."""
    functions = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
    in_functions = {id(inner) for function in functions for inner in ast.walk(function)}
    outside = [n for n in ast.walk(tree) if id(n) not in in_functions]
    top = bindings(outside)
    yield outside, top, set()
    for function in functions:
        nodes = list(ast.walk(function))
        # An admin's hooks (actions, delete_queryset) get the rows they act on as `queryset`.
        queries = {a.arg for a in function.args.args if a.arg == "queryset"}
        yield nodes, {**top, **bindings(nodes)}, queries


def writes(path: Path) -> list[str]:
    found = set()
    for nodes, bound, queries in scopes(ast.parse(path.read_text())):
        for node in nodes:
            if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
                continue
            method, receiver = node.func.attr, node.func.value
            wrote = method in WRITES and is_query(receiver, bound, queries)
            sql = sql_text(node.args[0]) if node.args else ""
            wrote |= method in ("execute", "executemany") and bool(SQL_WRITE.match(sql))
            if wrote:
                found.add(f"{path.relative_to(ROOT)}:{node.lineno}: {ast.unparse(node)[:100]}")
    return sorted(found)


def test_every_change_of_the_gateways_rows_is_made_in_its_home():
    outside = [write for path in modules() for write in writes(path)]

    assert outside == []


def test_the_reading_finds_the_writes_the_models_make():
    # A reading that found no write anywhere would let the test above pass whatever the code does.
    assert MODELS >= {"ToolCall", "Round", "MCPToken", "Session", "CallStream", "StreamEvent"}
    for module in MODEL_MODULES:
        assert writes(ROOT / module), module
