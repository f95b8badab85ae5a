"""Review of tool calls (HumanInTheLoopMiddleware): one question per reviewed tool call."""
