"""Example LangGraph agents served over MCP."""
