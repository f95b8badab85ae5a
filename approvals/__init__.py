"""Staff approvals: high-risk tool calls wait for a staff decision in the Django admin."""
