"""The runner's report of a run that paused: what the worker records as the round's questions must
be what the thread's checkpoint holds (LangGraph's get_state), in its order, whether the runner
read it back or took it from the run's own stream."""

from __future__ import annotations

import operator
import uuid
from typing import Annotated, Any

import pytest
from langgraph.graph import START, StateGraph
from langgraph.pregel import Pregel
from langgraph.types import Send, interrupt
from typing_extensions import TypedDict

from graph_runtime import runner
from graph_runtime.registry import RegisteredGraph, get_graph


class _Mixed(TypedDict, total=False):
    answers: Annotated[list, operator.add]


def _ask(question: str) -> Any:
    return lambda state: {"answers": [interrupt(question)]}


# Questions from a Send and from edges in one step, the edges' nodes added against their names'
# order: get_state lists a Send's task first, then the others in the order of the graph's nodes.
_mixed = (
    StateGraph(_Mixed)
    .add_node("zeta", _ask("Zeta?"))
    .add_node("alpha", _ask("Alpha?"))
    .add_node("sent", _ask("Sent?"))
    .add_edge(START, "zeta")
    .add_edge(START, "alpha")
    .add_conditional_edges(START, lambda state: [Send("sent", {})], ["sent"])
    .compile()
)

REGISTERED = {
    "choose_region": {},
    "survey": {},
    "plan_deployment": {},
    "connect_calendar": {},
    "typed_dataclass": {},
    "typed_nan": {},
    "same_text_twice": {},
    "relay_twice": {},
    "fan_out_questions": {"value": 6},
    "form_then_url": {},
    "context_before_question": {},
    "text_then_breakpoint": {},
}


def _registered(name: str) -> RegisteredGraph:
    registered = get_graph(name)
    assert registered is not None
    return registered


def _mixed_graph() -> RegisteredGraph:
    return RegisteredGraph(name="mixed", graph=_mixed, description="", input_schema={})


@pytest.fixture
def thread_id():
    """A thread of its own, deleted with its checkpoints after the test."""
    name = f"runner-{uuid.uuid4()}"
    yield name
    runner.delete_thread(name)


@pytest.fixture
def get_state_calls(monkeypatch) -> list[str]:
    """The threads LangGraph's get_state read, for the runner's runs and the test's own reads."""
    calls: list[str] = []
    real = Pregel.get_state

    def counted(self, config, **kwargs):
        calls.append(config["configurable"]["thread_id"])
        return real(self, config, **kwargs)

    monkeypatch.setattr(Pregel, "get_state", counted)
    return calls


def _same_as_the_checkpoint(registered: RegisteredGraph, thread_id: str, run: runner.RunResult) -> None:
    snapshot = runner.state(registered, thread_id)
    assert [(i.id, repr(i.value), i.response_schema) for i in run.interrupts] == [
        (i.id, repr(i.value), i.response_schema) for i in snapshot.interrupts
    ]
    assert run.values == dict(snapshot.values)
    assert run.interrupts


@pytest.mark.parametrize("name", sorted(REGISTERED))
def test_a_run_that_pauses_reports_the_questions_its_checkpoint_holds_in_its_order(name, get_state_calls, thread_id):
    registered = _registered(name)
    run = runner.run(registered, thread_id, arguments=REGISTERED[name])
    # Taken from the run's own stream: the thread was not read back.
    assert get_state_calls == []
    _same_as_the_checkpoint(registered, thread_id, run)


def test_questions_from_a_send_and_from_edges_in_one_step_come_in_the_checkpoints_order(get_state_calls, thread_id):
    registered = _mixed_graph()
    run = runner.run(registered, thread_id, arguments={})
    assert [i.value for i in run.interrupts] == ["Sent?", "Zeta?", "Alpha?"]
    assert get_state_calls == []
    _same_as_the_checkpoint(registered, thread_id, run)


def test_a_resume_that_answers_some_of_the_questions_reports_the_others_still_pending(get_state_calls, thread_id):
    registered = _mixed_graph()
    first = runner.run(registered, thread_id, arguments={})
    answered = first.interrupts[0]
    run = runner.run(registered, thread_id, resume={answered.id: "yes"})
    assert [i.value for i in run.interrupts] == ["Zeta?", "Alpha?"]
    # The answered task's writes are pending beside the questions: read back with them.
    assert thread_id in get_state_calls
    _same_as_the_checkpoint(registered, thread_id, run)


@pytest.mark.parametrize("name", ["same_text_in_sequence", "text_then_unaskable"])
def test_a_resume_that_asks_again_reports_the_new_question_its_checkpoint_holds(name, get_state_calls, thread_id):
    registered = _registered(name)
    first = runner.run(registered, thread_id, arguments={})
    run = runner.run(registered, thread_id, resume={first.interrupts[0].id: "yes"})
    assert get_state_calls == []
    assert run.interrupts[0].id != first.interrupts[0].id
    _same_as_the_checkpoint(registered, thread_id, run)


def test_a_run_that_carries_on_from_its_checkpoint_reads_the_thread_back(get_state_calls, thread_id):
    """An earlier attempt's saved writes are not streamed again: the runner cannot tell from the
    stream what is pending, and reads it."""
    registered = _registered("survey")
    runner.run(registered, thread_id, arguments={})
    run = runner.run(registered, thread_id, carry_on=True)
    assert thread_id in get_state_calls
    _same_as_the_checkpoint(registered, thread_id, run)


def test_a_run_stopped_at_a_breakpoint_reports_no_questions(thread_id):
    registered = _registered("breakpoint_graph")
    run = runner.run(registered, thread_id, arguments={})
    assert run.at_breakpoint and run.interrupts == ()
    resumed = runner.run(registered, thread_id, carry_on=True)
    assert not resumed.at_breakpoint and resumed.interrupts == ()
    assert runner.state(registered, thread_id).next == ()


def test_a_run_resumed_to_its_end_reports_its_output_and_nothing_pending(thread_id):
    registered = _registered("choose_region")
    paused = runner.run(registered, thread_id, arguments={})
    ended = runner.run(registered, thread_id, resume={paused.interrupts[0].id: "eu-west-1"})
    assert ended.interrupts == () and ended.values["region"] == "eu-west-1"
