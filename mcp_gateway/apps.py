from django.apps import AppConfig


class McpGatewayConfig(AppConfig):
    name = "mcp_gateway"
    verbose_name = "MCP gateway"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Question kinds beyond text, typed and relay register themselves on import; so do checks,
        # and the Celery tasks, which every process enqueues by name (graph_runtime.work).
        from mcp_gateway import checks, tasks  # noqa: F401
        from mcp_gateway.calls import links, review  # noqa: F401
        from mcp_gateway.wires.pages import links as answer_pages

        # The core hands a round's page link to clients that cannot answer it where they are; the
        # pages make it (calls/links.py).
        links.register(answer_pages.url_for)
