"""A terminal MCP client for trying the service: `python -m demo_client URL TOKEN [TOOL] [JSON_ARGS]`."""
