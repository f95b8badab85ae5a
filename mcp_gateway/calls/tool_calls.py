"""The request side of the paused-call state machine: start a call, answer a round, render a round
as an outcome. One module, read from the top: the entry points (begin, after_wait), the state
changes they choose between (start_call, answer_round, claim_round, end_round) and a round's
rendering share the same checks of a request against its round (the caller, the requestState, the
capability it needs), which split apart would each need the others.

    request without requestState ──► start_call ──► round 0 RUNNING ──► (worker) runs.run_round
    run ends with questions ──► round ASKING ──► answer_round ──claim──► round ANSWERED,
                                                                 next round RUNNING ──► runs.run_round
    run ends with a result ──► round FINISHED ──► the call is finished (kept 10 min, or removed)

Every state change is one transaction, defined once: the start of a call and the claim of a round
(with the next round and the call's new state) in store.py, the others by methods of the models.
The claim is a conditional UPDATE, so however many identical answers arrive at once, exactly one
resume is enqueued, after commit. While a round runs, a request waits for it (`Waiting`, waiting.py),
then `after_wait` says what to answer.

The state machine knows no revision or transport: a request says what its client can do (`Client`,
filled in by the wire that read it), and the answer is an outcome (outcomes.py) that the wire
renders. A client that may hold an MCP task gets one instead (`BecameTask`): when the run outlasts
MCP_TASK_WAIT_SECONDS, when the call is handed over to staff, or at once where the wire says the
call starts as one. Questions asked before that are rounds, as for any client
(docs/rules.md, "Task creation").
"""

from __future__ import annotations

import dataclasses
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import jsonschema
from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from graph_runtime.registry import RegisteredGraph, get_graph, problem_of
from mcp_gateway import lifetimes, limits, metrics, observe
from mcp_gateway.auth import Caller
from mcp_gateway.calls import links, overload, questions, request_state, results, store, waiter
from mcp_gateway.calls.outcomes import Asking, BecameTask, Finished, Outcome, StillRunning
from mcp_gateway.calls.round_queue import enqueue_round, enqueue_unless_held, nudge
from mcp_gateway.calls.runs import CANT_RESUME
from mcp_gateway.models import Outcome as RoundOutcome
from mcp_gateway.models import Recorded, Round, ToolCall
from mcp_gateway.protocol import INVALID_PARAMS, RpcError, invalid_request_state

logger = logging.getLogger(__name__)

CANT_ANSWER = "This tool paused to ask for human input, and this client can't answer it."
STILL_RUNNING = "The tool did not finish within {seconds} seconds."
# The `_meta` key of a first call's idempotency key: a client that sends the same first call again
# (its connection was cut before the answer came) with the same key, within MCP_IDEMPOTENCY_WINDOW,
# gets the call the first one started instead of a second run.
IDEMPOTENCY_KEY = "hitl-mcp/idempotencyKey"
KEY_REUSED = "This idempotency key was sent with another tool or other arguments."
BROKEN_TOOL = "The tool {name} is unavailable: its graph could not be loaded (the server's log says why)."
EVERY_QUESTION = "Every question of the round needs an answer."


def _never_a_task(registered: RegisteredGraph) -> bool:
    return False


@dataclass(frozen=True)
class Client:
    """What the client of a request can do, as the wire that read the request knows it."""

    # Its declared capabilities: the elicitation modes it can answer.
    capabilities: dict[str, Any]
    # It answers a round of questions in a request of its own, with the handle the round came
    # with (a requestState): a round can be its answer, and a run that outlasts its wait is kept
    # for the handle.
    rounds: bool = True
    # It is asked on a stream that holds the call for it (an older client's call stream): a round,
    # or a run still going, is its answer too, which the wire turns into that stream.
    on_stream: bool = False
    # It can hold an MCP task: a run that outlasts its wait, or a hand-over to staff, may become one.
    tasks: bool = False
    # Answer pages are on and its wire can carry their links (links.py): a round it cannot answer
    # where it is is answered on the round's page instead of refused.
    links: bool = False
    # Whether a new call of a graph starts as a task: the wire's rule (the Tasks extension's, or
    # the 2025-11-25 tasks utility's), which refuses with the wire's own error what it cannot serve.
    starts_as_task: Callable[[RegisteredGraph], bool] = _never_a_task
    # What the client says it is (protocol.declared_client), kept on a call it starts.
    info: dict[str, str] | None = None


@dataclass(frozen=True)
class ToolRequest:
    caller: Caller
    name: str
    arguments: dict[str, Any]
    context: dict[str, Any] | None
    responses: dict[str, Any] | None
    request_state: str | None
    client: Client
    # The first call's idempotency key (IDEMPOTENCY_KEY in its _meta), if it sent one.
    idempotency_key: str | None = None
    # time.monotonic() when the request arrived, before any run of its was enqueued.
    received_at: float = field(default_factory=time.monotonic)
    # The client can hold a task, and the graph lets its calls become tasks (set by begin): a run
    # still going after MCP_TASK_WAIT_SECONDS becomes a task.
    tasks: bool = False
    # The lowest level of the run's log lines the request asked to hear (2026-07-28's _meta
    # logLevel; call_notifications.py), or "" for none.
    log_level: str = ""

    @property
    def capabilities(self) -> dict[str, Any]:
        return self.client.capabilities

    @property
    def args_digest(self) -> str:
        return request_state.arguments_digest(self.arguments)

    @property
    def deadline(self) -> float:
        """When the request stops waiting for a run and answers "still running", or with a task."""
        return self.received_at + (settings.MCP_TASK_WAIT_SECONDS if self.tasks else settings.MCP_RUN_WAIT_SECONDS)


@dataclass(frozen=True)
class Waiting:
    """The answer depends on a run that has not finished: wait for `round` to move on (waiter.py),
    then `after_wait`."""

    req: ToolRequest
    # As this request last read or wrote it, with its call.
    round: Round
    # Answers sent with the first call answer the first round once it is asked.
    first_call_answers: dict[str, Any] | None = None


Step = Outcome | Waiting


# --- entry points -------------------------------------------------------------------------------


def begin(req: ToolRequest) -> Step:
    if req.name == links.STATUS_TOOL and req.client.links:
        return status_of(req)
    if req.name == links.ANSWER_TOOL and req.client.links:
        return answer_by_handle(req)
    if req.request_state is not None:
        # docs/rules.md, "Invalid state": a requestState works only for the tool and arguments it was
        # minted for, so it is checked before the tool name and the arguments (which it binds)
        # are: one sent with a name no tool has fails as one sent with another tool's does.
        round_ = request_state.verified_round(
            req.request_state, caller=req.caller.identity, tool=req.name, args_digest=req.args_digest
        )
        if not req.caller.can_read_threads:
            raise invalid_request_state()
        observe.call_known(round_.call, round_.number)
        return _continue(_task_option(req, get_graph(round_.call.graph)), round_)
    registered = get_graph(req.name)
    if registered is None and (problem := problem_of(req.name)) is not None:
        # Its process should have refused to start (hitl_project/startup.py); if it serves anyway,
        # the other tools keep working and this one says why it does not (the details, which name
        # the server's files, go to the log only).
        logger.error("%s", problem)
        return Finished(results.error(BROKEN_TOOL.format(name=req.name)))
    if registered is None:
        raise RpcError(INVALID_PARAMS, f"Unknown tool: {req.name}")
    if (problem := _argument_error(registered, req.arguments)) is not None:
        return Finished(results.error(f"Invalid arguments for {req.name}: {problem}"))
    req = _task_option(req, registered)
    as_task = req.client.starts_as_task(registered)
    if req.idempotency_key is not None:
        if (call := ToolCall.with_idempotency_key(caller=req.caller.identity, key=req.idempotency_key)) is not None:
            return _sent_again(req, call, as_task=as_task)
        try:
            first = start_call(req, registered, as_task=as_task)
        except IntegrityError:
            # The same first call, sent again before this one's transaction committed, started it.
            call = ToolCall.with_idempotency_key(caller=req.caller.identity, key=req.idempotency_key)
            if call is None:
                raise
            return _sent_again(req, call, as_task=as_task)
    else:
        first = start_call(req, registered, as_task=as_task)
    if as_task:
        return BecameTask(first.call)
    return Waiting(req, first, first_call_answers=req.responses or None)


def _sent_again(req: ToolRequest, call: ToolCall, *, as_task: bool = False) -> Step:
    """A first call sent again with the idempotency key of `call`'s: the answer that call's first
    request would get now (its run's outcome, or its questions with their requestState), as if
    that request had been the one to wait; never a second run. A tool that runs only as a task
    (`as_task`) answers with the task that call is, as its first request did (the id is derived
    from the call and its caller, so it is the same id)."""
    if call.tool_name != req.name or call.arguments_digest != req.args_digest:
        raise RpcError(INVALID_PARAMS, KEY_REUSED)
    if as_task:
        return BecameTask(call)
    latest = call.latest_round()
    if latest is None:
        raise RpcError(INVALID_PARAMS, KEY_REUSED)  # removed meanwhile
    answers = (req.responses or None) if latest.number == 0 else None
    if latest.state == Round.State.RUNNING:
        enqueue_unless_held(latest)
        return Waiting(req, latest, first_call_answers=answers)
    return after_wait(Waiting(req, latest, first_call_answers=answers), timed_out=False)


def _task_option(req: ToolRequest, registered: RegisteredGraph | None) -> ToolRequest:
    """Whether this request's call may become a task: the client can hold one, and the graph's
    langgraph.json entry does not say "task": "never"."""
    can = req.client.tasks and (registered is None or registered.task != "never")
    return dataclasses.replace(req, tasks=can)


def after_wait(waiting: Waiting, *, timed_out: bool, recorded: Recorded | None = None) -> Step:
    """What to answer once the awaited round has moved on (or the wait timed out). `recorded`: the
    round's end as its run's notification carried it, which saves reading the row."""
    req = waiting.req
    round_ = waiting.round.apply_recorded(recorded) if recorded is not None else _round(pk=waiting.round.id)
    observe.round_reported(round_)
    if (rejected := (round_.outcome or {}).get("rejected")) is not None:
        # LangGraph's own validation refused the answers this request resumed the agent with.
        raise RpcError(INVALID_PARAMS, rejected["message"], rejected["data"])
    if round_.state == Round.State.ASKING:
        if waiting.first_call_answers:
            return answer_round(req, round_, waiting.first_call_answers, first_call=True)
        if round_.first_call_answers:
            # A first call's answers, left on its round when the run outlasted that call's wait:
            # they answer the round for the request that came back for it.
            return answer_round(req, round_, round_.first_call_answers, first_call=False, left_by_first_call=True)
        # The round this request waited for is new to its client: ask it. Its inputResponses
        # answered the round before, and would resume the agent again if a key repeats.
        return render(req, round_)
    if round_.state == Round.State.RUNNING and timed_out:
        nudge(round_)
        asked_elsewhere = not req.client.rounds and not req.client.on_stream
        if asked_elsewhere and not req.client.links:
            # A client with no handle to come back with (an older client's, unless a stream of its
            # session holds the call for it).
            return Finished(results.error(STILL_RUNNING.format(seconds=settings.MCP_RUN_WAIT_SECONDS)))
        # The call is kept for the client's handle (a requestState, a task id, or the status tool's)
        # as it is for a requestState: the run records its end with the flag this sets.
        if not round_.promise_request_state(waiting.first_call_answers):
            return after_wait(waiting, timed_out=False)  # it moved on meanwhile
        if req.tasks:
            return BecameTask(round_.call)
        if asked_elsewhere:
            return Finished(links.running(round_.call))
        return StillRunning(round_)
    return _continue(req, round_)


def outcome_from_record(waiting: Waiting, recorded: Recorded) -> Outcome | None:
    """after_wait's answer when it needs no database, the common case: the run's notification
    carried the round's record, and the round ended with a result, or with questions this request's
    client can be asked and a call that need not be kept longer. The view then answers from its
    event loop without a hop to a database thread (for a client asked in rounds, whose wire renders
    these outcomes without one). None when after_wait must answer: answers to
    apply (a first call's) or refused by LangGraph, a task to create, a call to keep longer or to
    discard."""
    req, round_ = waiting.req, waiting.round.apply_recorded(recorded)
    outcome = round_.outcome or {}
    if "rejected" in outcome or waiting.first_call_answers or round_.first_call_answers:
        return None
    if round_.state == Round.State.FINISHED:
        if outcome.get("handed_over") and req.tasks:
            return None
    elif round_.state == Round.State.ASKING:
        if not req.client.rounds or questions.missing_modes(outcome, req.capabilities):
            return None
        if round_.call.expires_at < lifetimes.paused_until(round_.finished_at or timezone.now()):
            return None  # shortened while a capability was missing: render's keep_paused writes
    else:
        return None
    observe.round_reported(round_)
    return render(req, round_)


# --- states -----------------------------------------------------------------------------------


def _continue(req: ToolRequest, round_: Round) -> Step:
    if round_.state == Round.State.RUNNING:
        return Waiting(req, round_)
    if round_.state == Round.State.ANSWERED:
        # Repeated answers: the round was resumed once already; answer with what that resume gives.
        following = _round(call_id=round_.call_id, number=round_.number + 1)
        if "rejected" in (following.outcome or {}) and req.responses != round_.answers:
            # LangGraph refused those answers and the round was asked again as the following one
            # (docs/rules.md, "Invalid answers": the round stays open): other answers answer it.
            return _continue(req, following)
        if following.state != Round.State.RUNNING:
            # Recorded before this request subscribed to its notification (waiter.py): answer now.
            return after_wait(Waiting(req, following), timed_out=False)
        enqueue_unless_held(following)
        return Waiting(req, following)
    if round_.state == Round.State.ASKING:
        if round_.first_call_answers and not req.responses:
            return answer_round(req, round_, round_.first_call_answers, first_call=False, left_by_first_call=True)
        return answer_round(
            req, round_, {**(round_.first_call_answers or {}), **(req.responses or {})}, first_call=False
        )
    return render(req, round_)


def start_call(req: ToolRequest, registered: RegisteredGraph, *, as_task: bool = False) -> Round:
    """A new call and its round 0, running. `as_task`: its client gets a task at once, a handle to
    the call as a requestState is (the call is kept when its run ends). Refused with a 503 and
    nothing written when the process cannot take on another run (overload.py)."""
    overload.check_run_queue()
    call = ToolCall(
        thread_id=str(uuid.uuid4()),
        graph=registered.name,
        tool_name=req.name,
        arguments_digest=req.args_digest,
        caller=req.caller.identity,
        resumable=settings.MCP_THREADS_ENABLED and req.caller.can_keep_threads,
        first_call_key=ToolCall.key_digest(req.idempotency_key) if req.idempotency_key is not None else "",
        expires_at=lifetimes.paused_until(timezone.now()),
        traceparent=observe.traceparent(),
        client_info=req.client.info,
    )
    first = _unsaved_round(
        call, 0, graph_input=req.arguments, context=req.context, with_request_state=as_task, log_level=req.log_level
    )
    store.start(call, first)
    observe.call_known(call, 0)
    _created(first)
    return first


def answer_round(
    req: ToolRequest, round_: Round, responses: dict[str, Any], *, first_call: bool, left_by_first_call: bool = False
) -> Step:
    """Answer an ASKING round with `responses`. `first_call`: this request has no requestState.
    `left_by_first_call`: the answers are a first call's, left on its round when its run outlasted
    the wait (Round.promise_request_state), brought back by a request with the requestState it got."""
    asked = round_.outcome
    assert asked is not None  # an ASKING round holds its questions
    if not req.caller.can_update_threads:
        # Answering resumes, and so updates, the call's thread: the auth handler decides each time.
        return Finished(results.error(CANT_RESUME))
    if _link_for(req, round_) is not None:
        # The round is answered on its page (links.py), which claims it: the client's accept of the
        # link says only that the person went there, so the round is asked again until then.
        declined = declined_on_page(asked, responses)
        if declined is None:
            return render(req, round_)
        responses = declined
    elif (unable := _capability_error(req, round_)) is not None:
        raise unable
    try:
        values = questions.checked_resume_values(asked, responses)
    except RpcError:
        if first_call or left_by_first_call:
            # docs/rules.md, "Invalid answers": answers sent in a first call, without a requestState,
            # delete that call's thread (the client starts over) rather than leave it to expire;
            # left on the round, they would fail every retry with its requestState alike.
            round_.call.discard()
        raise
    if values is None:
        # Missing answers: ask the same questions again, with the same requestState.
        return render(req, round_)
    # docs/rules.md, "Runtime context": the resumed run gets the context of the request that answered,
    # the first call's for its answers (round 0's run got that context).
    context = round_.context if left_by_first_call else req.context
    return _claim(req, round_, responses, values, first_call=first_call, context=context)


def _claim(
    req: ToolRequest,
    round_: Round,
    responses: dict,
    values: dict | questions.End,
    *,
    first_call: bool,
    context: dict[str, Any] | None,
) -> Step:
    following = claim_round(round_, responses, values, keep=not first_call, context=context, log_level=req.log_level)
    if following is None:
        # Another request answered this round first (its transaction has committed, or this
        # UPDATE would still be waiting on the row): its resume is the one that counts.
        return _continue(req, _round(pk=round_.pk))
    if following.state == Round.State.FINISHED:
        return render(req, following)
    return Waiting(req, following)


def claim_round(
    round_: Round,
    responses: dict,
    values: dict | questions.End,
    *,
    keep: bool,
    context: dict[str, Any] | None,
    log_level: str = "",
) -> Round | None:
    """Answer an ASKING round: the next round, running the resume (enqueued after commit), or
    finished at once for an answer that ends the call. None when another request claimed the
    round first. `keep`: the client holds a handle to the call (a requestState or a task id)."""
    call = round_.call
    if not isinstance(values, questions.End):
        following = _unsaved_round(
            call, round_.number + 1, resume=values, context=context, with_request_state=keep, log_level=log_level
        )
        if not store.claim_and_resume(round_, responses, following):
            return None
        _created(following)
        return following
    ended = _unsaved_round(
        call,
        round_.number + 1,
        with_request_state=keep,
        state=Round.State.FINISHED,
        outcome={"kind": "result", "result": results.error(values.text)},
    )
    if not store.claim_and_end(round_, responses, ended, keep=keep):
        return None
    metrics.call_ended(call.tool_name, "declined")
    return ended


def add_answers(round_: Round, answers: dict[str, Any]) -> None:
    """Answers to some of an ASKING round's questions, which its caller has locked, from a client
    that answers question by question (a task's tasks/update, an older client's responses on its
    stream): merged with those kept so far, checked as a round's answers are, and the round claimed
    once every question has one; until then they are kept. An invalid one raises (RpcError -32602)
    and nothing is kept."""
    merged = {**(round_.answers or {}), **answers}
    values = questions.checked_resume_values(round_.outcome or {}, merged)
    if values is None:
        round_.keep_answers(merged)
    else:
        # The resumed run gets the context the call last ran with: these answers carry none.
        claim_round(round_, merged, values, keep=True, context=round_.context)


def answer_in_full(round_: Round, responses: dict[str, Any]) -> Round | None:
    """Answers to every question of an ASKING round from a person rather than from a client's
    request (a hosted answer page): checked as a round's answers are (an RpcError -32602 for an
    invalid one, or for one missing: a person sends the whole round at once), then claimed as
    every answer is, so however many submissions race, one resumes. The resumed run gets the
    context the call last ran with, and the call is kept once it ends, as for a requestState, for
    the person to read its result. The next round, or None when another answer claimed it first."""
    values = questions.checked_resume_values(round_.outcome or {}, responses)
    if values is None:
        raise RpcError(INVALID_PARAMS, EVERY_QUESTION)
    following = claim_round(round_, responses, values, keep=True, context=round_.context)
    # An older client's stream that sent the person to this page reads the call again.
    transaction.on_commit(lambda: waiter.notify_task(round_.call_id))
    return following


def end_round(round_: Round, outcome: RoundOutcome) -> Round | None:
    """End a call at its ASKING round without resuming it (a cancelled task): the round is claimed
    as answered, the next one is created finished with `outcome`. None when it was answered first."""
    ended = _unsaved_round(
        round_.call, round_.number + 1, with_request_state=True, state=Round.State.FINISHED, outcome=outcome
    )
    return ended if store.claim_and_end(round_, {}, ended, keep=True) else None


def render(req: ToolRequest, round_: Round) -> Outcome:
    """A round that is not running as this request's answer; what a client gets depends on what it
    can do."""
    if round_.state == Round.State.RUNNING:
        return StillRunning(round_)
    outcome = round_.outcome or {}
    if outcome.get("handed_over") and req.tasks:
        # Staff decide later: a client that can hold a task gets one, and with it the final answer.
        return BecameTask(round_.call)
    if outcome.get("handed_over") and req.client.links:
        # Any other learns the decision, and the agent's answer, from the status tool.
        return Finished(links.handed_over(outcome["result"], round_.call))
    if outcome.get("kind") == "breakpoint":
        return Finished(
            results.at_breakpoint(
                outcome["values"], answerable=req.client.rounds and bool(questions.declared_modes(req.capabilities))
            )
        )
    if outcome.get("kind") != "questions":
        return Finished(outcome["result"])
    if (by_link := _by_link(req, round_)) is not None:
        round_.call.keep_paused(asked_at=round_.finished_at or timezone.now())
        return by_link
    if not req.client.rounds and not req.client.on_stream:
        round_.call.discard()
        return Finished(results.error(CANT_ANSWER, results.compact(outcome["interrupts"])))
    if (error := _capability_error(req, round_)) is not None:
        raise error
    # The 10 minutes a missing url capability leaves a call are for coming back with url declared.
    # Once its questions are asked, the call is paused like any other (docs/rules.md, "Lifetime"): 24
    # hours after its latest round of questions, so the user has the time the page takes.
    round_.call.keep_paused(asked_at=round_.finished_at or timezone.now())
    return Asking(round_)


def _by_link(req: ToolRequest, round_: Round) -> Outcome | None:
    """docs/rules.md, "Answer through a link": a client that cannot answer the round where it is
    gets its page's link, as URL questions where it declared URL mode and is asked rounds (or on a
    stream), as a result with the status tool's handle where it cannot elicit. None otherwise (a
    client that fills forms but opens no URL still gets -32021 for a URL question)."""
    if (how := _link_for(req, round_)) is None:
        return None
    if how == "url":
        return Asking(round_, link=links.link_for(round_))
    registered = get_graph(req.name)
    return Finished(links.asking(round_, schema_bound=registered is not None and registered.output_schema is not None))


def _link_for(req: ToolRequest, round_: Round) -> str | None:
    """How the round reaches this client through a link: "url" questions, a "result", or None."""
    if not req.client.links:
        return None
    return _how_linked(round_, req.capabilities, asked_in_place=req.client.rounds or req.client.on_stream)


def _by_url(round_: Round, capabilities: dict[str, Any]) -> bool:
    """A task's client is asked the round as URL questions to its page (_link_for's "url")."""
    return links.available() and _how_linked(round_, capabilities, asked_in_place=True) == "url"


def _how_linked(round_: Round, capabilities: dict[str, Any], *, asked_in_place: bool) -> str | None:
    """ "url" questions where the client declared URL mode but not the forms the round needs, a
    "result" where it cannot elicit or is asked nowhere (`asked_in_place`: in rounds, on a stream),
    None where it answers the round itself or must get -32021."""
    if not links.for_caller(round_.call.caller):
        return None
    if not asked_in_place:
        return "result"
    if not questions.missing_modes(round_.outcome or {}, capabilities):
        return None
    declared = questions.declared_modes(capabilities)
    if "url" in declared:
        return "url"
    return "result" if not declared else None


def task_asking(round_: Round, capabilities: dict[str, Any]) -> Asking:
    """An MCP task's asking round as its client is asked it (tasks/get, a listen stream): its
    questions, or, for a client that declared URL mode but not the forms the round needs (answer
    pages on), URL questions to the round's page (docs/rules.md, "Answer through a link"). -32021
    naming the modes the round needs otherwise: the task stays as it is, for a request that
    declares them."""
    if _by_url(round_, capabilities):
        return Asking(round_, link=links.link_for(round_))
    asked = round_.outcome or {}
    if missing := questions.missing_modes(asked, capabilities):
        raise questions.missing_modes_error(asked, missing, asker="task")
    return Asking(round_)


def task_answers(round_: Round, answers: dict[str, Any], capabilities: dict[str, Any]) -> dict[str, Any] | None:
    """Answers a task's client sent to its asking round (tasks/update), as add_answers takes them.
    A client asked the round by link (task_asking) answers its URL questions: its accept says only
    that the person went to the page, which claims the round (None: nothing to add), and its decline
    or cancel declines or cancels every question the page asks."""
    if not _by_url(round_, capabilities):
        return answers
    asked = round_.outcome or {}
    declined = declined_on_page(asked, answers)
    if declined is None:
        # Kept, as an older client's on its stream is: the Tasks extension never asks a key again
        # once its response came, so the task waits for the page without asking (mcp_task_methods).
        accepted = {key: answer for key, answer in answers.items() if key in asked.get("requests", {})}
        round_.keep_answers({**(round_.answers or {}), **accepted})
    return declined


def declined_on_page(asked: dict[str, Any], responses: dict[str, Any]) -> dict[str, Any] | None:
    """A decline or cancel of a round's link declines or cancels every question its page asks, as
    the person's own would; None for anything else (the page answers the round)."""
    actions = {a.get("action") for k, a in responses.items() if k in asked["requests"] and isinstance(a, dict)}
    for action in ("cancel", "decline"):
        if action in actions:
            return {key: {"action": action} for key in asked["requests"]}
    return None


def status_of(req: ToolRequest) -> Step:
    """The status tool (links.py): where the call a handle names stands, answered as to a client
    that cannot elicit: the next round's link, the run's outcome (waited for as any call's is),
    waiting for staff, or the final result."""
    call = links.verified_call(req.arguments.get("handle"), caller=req.caller.identity)
    if call is None or not req.caller.can_read_threads:
        return Finished(links.unknown())
    if call.status == ToolCall.Status.FINISHED and call.final_outcome is not None:
        return Finished(call.final_outcome["result"])  # the agent's answer after the staff's decision
    latest = call.latest_round()
    if latest is None:
        return Finished(links.unknown())
    req = dataclasses.replace(req, client=Client(capabilities={}, rounds=False, links=True), responses=None)
    return render(req, latest) if latest.state == Round.State.ASKING else _continue(req, latest)


def answer_by_handle(req: ToolRequest) -> Step:
    """The answer App's tool (links.ANSWER_TOOL): a person's answers to every question of the round
    the handle's call asks, claimed through answer_in_full as an answer page's are (the same checks,
    the same claim: an App and a page racing for one round resume it once). Then, as the status
    tool says it, what the call does next: waited for, the next round, staff, or the result. A
    handle that is not the caller's, a call that asks nothing now, or an invalid answer is an error
    result the App shows, never a JSON-RPC error: the person is in the middle of a form."""
    call = links.verified_call(req.arguments.get("handle"), caller=req.caller.identity)
    if call is None or not req.caller.can_read_threads:
        return Finished(links.unknown())
    if not req.caller.can_update_threads:
        return Finished(results.error(CANT_RESUME))
    latest = call.latest_round()
    answers = req.arguments.get("answers")
    asked = req.arguments.get("round")
    if latest is None or latest.state != Round.State.ASKING or (asked is not None and asked != latest.number):
        # Answered meanwhile (on the page, or in another App), or a round this App never showed.
        return Finished(results.error(links.NOT_ASKING))
    if not isinstance(answers, dict):
        return Finished(results.error(EVERY_QUESTION))
    try:
        limits.check_input_responses(answers)
        following = answer_in_full(latest, answers)
    except RpcError as exc:
        detail = exc.data.get("detail") if isinstance(exc.data, dict) else None
        return Finished(results.error(f"{exc.message}: {detail}" if detail else exc.message))
    if following is None:
        return Finished(results.error(links.NOT_ASKING))
    req = dataclasses.replace(req, client=Client(capabilities={}, rounds=False, links=True), responses=None)
    return _continue(req, following)


def _capability_error(req: ToolRequest, round_: Round) -> RpcError | None:
    """docs/rules.md, "Clients without elicitation": -32021 naming every mode the round needs."""
    asked = round_.outcome or {"requests": {}}
    missing = questions.missing_modes(asked, req.capabilities)
    if not missing:
        return None
    if req.request_state is None:
        # A first call: its client holds no requestState for this call (the error takes the place
        # of the one it would have got), so nothing can ever resume the thread. It goes now, as a
        # first call's thread does after invalid answers (docs/rules.md, "Invalid answers").
        round_.call.discard()
    elif "url" in missing and "form" in questions.declared_modes(req.capabilities):
        round_.call.keep_for_missing_capability()
    return questions.missing_modes_error(asked, missing, asker="tool")


# --- helpers ------------------------------------------------------------------------------------


def _unsaved_round(call: ToolCall, number: int, *, state: str = Round.State.RUNNING, **fields: Any) -> Round:
    """A new round of the call, not saved yet, with the keyed hash of its requestState."""
    round_id = uuid.uuid4()
    minted = request_state.mint(
        round_id, caller=call.caller, graph=call.graph, tool=call.tool_name, args_digest=call.arguments_digest
    )
    return Round(
        id=round_id,
        call=call,
        number=number,
        state=state,
        request_state_hash=request_state.stored_hash(minted),
        **fields,
    )


def _created(round_: Round) -> None:
    """A round was created: a running one is enqueued once its transaction commits."""
    if round_.state != Round.State.RUNNING:
        return
    call, round_id = round_.call, round_.id
    observe.round_enqueued(call)
    # Without a requestState the client cannot come back to this call, only start another:
    # if the broker refuses the run, the call goes, so that it does not run later unseen
    # (the sweep's stalled-round nudge would enqueue it). With one, the client's retry waits
    # for the run, and the nudge enqueues it.
    forget = None if round_.with_request_state else call
    transaction.on_commit(lambda: _enqueue(round_id, forget=forget))


def _enqueue(round_id: uuid.UUID, *, forget: ToolCall | None) -> None:
    try:
        enqueue_round(round_id)
    except Exception:
        if forget is not None:
            forget.discard()
        raise


def _round(**lookup: Any) -> Round:
    """A round the request has already seen. Gone means its call was removed meanwhile (it expired,
    or it was discarded): the request fails as one with an expired requestState does."""
    round_ = Round.objects.select_related("call").filter(**lookup).first()
    if round_ is None:
        raise invalid_request_state()
    return round_


@cache
def _validator(name: str) -> jsonschema.Validator:
    registered = get_graph(name)
    assert registered is not None
    cls = jsonschema.validators.validator_for(registered.input_schema, default=jsonschema.Draft202012Validator)
    return cls(registered.input_schema)


def _argument_error(registered: RegisteredGraph, arguments: dict[str, Any]) -> str | None:
    error = jsonschema.exceptions.best_match(_validator(registered.name).iter_errors(arguments))
    return None if error is None else error.message
