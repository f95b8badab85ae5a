"""The gateway's public hand-over point, and the only module of the gateway another app imports
(an import-linter contract in pyproject.toml holds the staff side to it): register a handler for an
interrupt type, then keep the calls it takes over waiting, resume them and end them. The state
machine's side of each function is in calls/handover.py."""

from mcp_gateway.calls.handover import (
    HandoverResult,
    PausedCall,
    keep_waiting,
    register,
    resume_running,
    resuming,
    run_ended,
    withdraw,
)

__all__ = [
    "HandoverResult",
    "PausedCall",
    "keep_waiting",
    "register",
    "resume_running",
    "resuming",
    "run_ended",
    "withdraw",
]
