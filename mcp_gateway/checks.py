"""System checks of this service's own settings, beside Django's (`manage.py check --deploy`)."""

from django.conf import settings
from django.core.checks import Error, Tags, Warning, register

from graph_runtime.registry import loaded


@register(Tags.security, deploy=True)
def secret_key_set(app_configs, **kwargs):
    """Without SECRET_KEY each host makes its own key in its data directory, and requestStates and
    staff sessions from one host do not verify on another (nor after that directory is lost)."""
    if settings.SECRET_KEY_FROM_ENVIRONMENT or settings.DATABASES["default"]["ENGINE"].endswith("sqlite3"):
        return []
    return [
        Warning(
            f"SECRET_KEY is not set, so this process uses the key generated in {settings.VAR_DIR / 'secret_key'}.",
            hint="Set SECRET_KEY, the same on every web and worker host: requestStates and staff sessions "
            "made with one key do not verify with another.",
            id="hitl.W001",
        )
    ]


@register("graphs")
def graphs_load(app_configs, **kwargs):
    """The graphs file and every graph in it load, as each process checks when it starts."""
    return [
        Error(problem, hint="Fix the graph or its entry in the graphs file (GRAPHS_CONFIG).", id="hitl.E001")
        for problem in loaded().problems.values()
    ]


@register("graphs")
def status_tool_name_free(app_configs, **kwargs):
    """With answer pages on, the built-in tools (the status tool, the answer App's tool) answer
    their names beside the graphs: a graph of either name could never be called."""
    from mcp_gateway.calls.links import ANSWER_TOOL, STATUS_TOOL

    if settings.MCP_ANSWER_PAGES != "on":
        return []
    return [
        Error(
            f"A graph is named {name}, a built-in tool MCP_ANSWER_PAGES=on serves.",
            hint="Rename the graph's entry in the graphs file (GRAPHS_CONFIG), or set MCP_ANSWER_PAGES=off.",
            id="hitl.E002",
        )
        for name in (STATUS_TOOL, ANSWER_TOOL)
        if name in loaded().graphs
    ]


@register(Tags.urls)
def answer_pages_site_url(app_configs, **kwargs):
    """An answer page's link is made where no request is at hand (a worker's run, a status tool's
    answer), so it takes its host from SITE_URL alone: without it the link is a path, which a client
    cannot open and a person cannot follow from another application."""
    if settings.MCP_ANSWER_PAGES != "on" or settings.SITE_URL:
        return []
    return [
        Warning(
            "MCP_ANSWER_PAGES=on without SITE_URL: answer pages' links are paths without a host "
            "(/answer/<link>/), which clients cannot open.",
            hint="Set SITE_URL to where people reach this service, e.g. SITE_URL=https://hitl.example.com "
            "(`make run` sets it to the address it serves).",
            id="hitl.W002",
        )
    ]
