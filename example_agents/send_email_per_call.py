"""The send_email agent, asking one review question per tool call (per-call mode)."""

from example_agents.send_email import build_email_agent

graph = build_email_agent("per_call")
