"""The MCP endpoint: LangGraph graphs as tools, interrupts as elicitation rounds."""
