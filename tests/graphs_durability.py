"""Graphs whose runs a test can hold and release from outside the worker process."""

from __future__ import annotations

import time
from pathlib import Path

from langgraph.graph import START, StateGraph
from langgraph.runtime import Runtime
from langgraph.types import interrupt
from typing_extensions import TypedDict

from graph_runtime.runner import require_lease


class State(TypedDict, total=False):
    signal_dir: str
    go: str
    done: bool
    after: str | None


class Context(TypedDict, total=False):
    tag: str


def _ask(state: State) -> State:
    return {"go": interrupt("Go ahead?")}


def _held(folder: Path) -> None:
    """Announce the start, then wait for the test's release file."""
    with (folder / "started").open("a") as f:
        f.write("started\n")
    deadline = time.monotonic() + 120
    while not (folder / "release").exists():
        if time.monotonic() > deadline:
            raise TimeoutError("the test never released this run")
        time.sleep(0.05)


def _effect(state: State) -> State:
    """Held until the test releases it, then one side effect recorded."""
    folder = Path(state["signal_dir"])
    _held(folder)
    with (folder / "effects").open("a") as f:
        f.write("effect\n")
    return {"done": True}


held_effect = (
    StateGraph(State)
    .add_node("ask", _ask)
    .add_node("effect", _effect)
    .add_edge(START, "ask")
    .add_edge("ask", "effect")
    .compile()
)


# The side effect first, then the question: a first run whose worker dies after LangGraph saved
# its checkpoint must not run the effect again.
effect_then_ask = (
    StateGraph(State)
    .add_node("effect", _effect)
    .add_node("ask", _ask)
    .add_edge(START, "effect")
    .add_edge("effect", "ask")
    .compile()
)


def _ask_then_read_context(state: State, runtime: Runtime[Context]) -> State:
    return {"go": interrupt("Go ahead?"), "after": (runtime.context or {}).get("tag")}


# effect_then_ask whose resumed run reports the runtime context it got.
effect_then_ask_context = (
    StateGraph(State, context_schema=Context)
    .add_node("effect", _effect)
    .add_node("ask", _ask_then_read_context)
    .add_edge(START, "effect")
    .add_edge("effect", "ask")
    .compile()
)


class SlowState(TypedDict, total=False):
    signal_dir: str
    tag: str
    seconds: float
    done: bool


def _slow_effect(state: SlowState) -> SlowState:
    """A model call of `seconds`, then one side effect recorded under the call's tag."""
    folder = Path(state["signal_dir"])
    with (folder / "started").open("a") as f:
        f.write(f"{state['tag']}\n")
    time.sleep(state.get("seconds", 1.0))
    with (folder / "effects").open("a") as f:
        f.write(f"{state['tag']}\n")
    return {"done": True}


# A run that takes a while and then does one thing: a call that completes twice shows in `effects`.
slow_effect = StateGraph(SlowState).add_node("work", _slow_effect).add_edge(START, "work").compile()


def _ask_staff(state: State) -> State:
    decision = interrupt({"type": "staff_approval", "tool_calls": [{"name": "effect", "input": {}}]})
    return {"go": "yes" if isinstance(decision, dict) and decision.get("approved") is True else "no"}


# Handed to staff, then, once they approve, the held effect: a resume a test can kill or stop
# in the middle of.
staff_held_effect = (
    StateGraph(State)
    .add_node("ask_staff", _ask_staff)
    .add_node("effect", _effect)
    .add_edge(START, "ask_staff")
    .add_edge("ask_staff", "effect")
    .compile()
)


def _slow_step(state: SlowState) -> SlowState:
    """A model call of `seconds`: its end is checkpointed before the next step starts."""
    folder = Path(state["signal_dir"])
    with (folder / "started").open("a") as f:
        f.write(f"{state['tag']}\n")
    time.sleep(state.get("seconds", 1.0))
    return {"tag": state["tag"]}


def _record_effect(state: SlowState) -> SlowState:
    with (Path(state["signal_dir"]) / "effects").open("a") as f:
        f.write(f"{state['tag']}\n")
    return {"done": True}


# A step, then a side effect in a step of its own: a run that wrote the first step's checkpoint
# after another worker took it over would go on to the effect, which `effects` shows twice.
slow_step_then_effect = (
    StateGraph(SlowState)
    .add_node("work", _slow_step)
    .add_node("effect", _record_effect)
    .add_edge(START, "work")
    .add_edge("work", "effect")
    .compile()
)


def _held_then_checked_effect(state: State) -> State:
    """_effect, with the lease asked for right before the side effect."""
    folder = Path(state["signal_dir"])
    _held(folder)
    require_lease()
    with (folder / "effects").open("a") as f:
        f.write("effect\n")
    return {"done": True}


# An effect that its node makes only while its run holds the lease.
checked_effect = StateGraph(State).add_node("effect", _held_then_checked_effect).add_edge(START, "effect").compile()


class AskedState(SlowState, total=False):
    go: str


def _lease_checked_effect(state: SlowState) -> SlowState:
    """The effect, made as docs/writing-agents.md advises: right after asking for the lease. Its
    line says when the lease was found held and when the effect was made (time.monotonic, which
    every process of the machine shares), so a copy that was already under way when its process
    was stopped (the one case the fence cannot undo) can be told from a fence that failed."""
    require_lease()
    cleared = time.monotonic()
    with (Path(state["signal_dir"]) / "effects").open("a") as f:
        f.write(f"{state['tag']} {cleared:.6f} {time.monotonic():.6f}\n")
    return {"done": True}


# A round of questions, then slow_step_then_effect's step and a side effect that asks for the lease
# first: a call of bench/faults.py's steady load. An effect recorded twice, or never, shows in
# `effects`.
asked_slow_effect = (
    StateGraph(AskedState)
    .add_node("ask", _ask)
    .add_node("work", _slow_step)
    .add_node("effect", _lease_checked_effect)
    .add_edge(START, "ask")
    .add_edge("ask", "work")
    .add_edge("work", "effect")
    .compile()
)
