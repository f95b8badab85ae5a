"""The paused-call state machine: start a call, answer a round, run a round, render a round.

    request without requestState ──► start_call ──► round 0 RUNNING ──► (worker) run_round
    run ends with questions ──► round ASKING ──► answer_round ──claim──► round ANSWERED,
                                                                 next round RUNNING ──► run_round
    run ends with a result ──► round DONE ──► the call is finished (kept 10 min, or removed)

Every state change is one transaction; the claim of a round is a conditional UPDATE, so however
many identical answers arrive at once, exactly one resume is enqueued, after commit. Views call
these functions and wait (waiter.py) while a round is RUNNING.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import cache
from typing import Any

import jsonschema
from django.conf import settings
from django.db import transaction
from django.utils import timezone
from langgraph.errors import is_invalid_resume
from pydantic import ValidationError

from hitl_project.graphs import runner
from hitl_project.graphs.registry import RegisteredGraph, get_graph

from . import handoff, limits, questions, results, tokens
from .auth import Caller
from .forms import Unaskable
from .models import Round, ToolCall
from .protocol import INVALID_PARAMS, MISSING_REQUIRED_CLIENT_CAPABILITY, RpcError, invalid_request_state

logger = logging.getLogger(__name__)

CANT_ANSWER = "This tool paused to ask for human input, and this client can't answer it."
CANT_RESUME = "This tool paused to ask for human input, and this call can't be resumed."
AT_BREAKPOINT = "This tool stopped at a breakpoint (interrupt_before/interrupt_after), which can't be resumed over MCP."
TOO_MANY_ROUNDS = "This tool asked for input more than {limit} times, the most one call may ask."
TOOL_FAILED = "The tool failed."
STILL_RUNNING = "The tool did not finish within {seconds} seconds."


@dataclass(frozen=True)
class ToolRequest:
    caller: Caller
    name: str
    arguments: dict[str, Any]
    context: dict[str, Any] | None
    responses: dict[str, Any] | None
    request_state: str | None
    modern: bool
    capabilities: dict[str, Any]

    @property
    def args_digest(self) -> str:
        return tokens.arguments_digest(self.arguments)


@dataclass(frozen=True)
class Wait:
    """The answer depends on a run that has not finished: wait for this round, then `settle`."""

    # As this request last read or wrote it, with its call.
    round: Round
    # Answers sent with the first call answer the first round once it is asked.
    first_call_answers: dict[str, Any] | None = None

    @property
    def round_id(self) -> uuid.UUID:
        return self.round.id


Reply = dict[str, Any]


def lifetime(base: timedelta) -> timedelta:
    """Document "Lifetime": a shorter default_ttl shortens every lifetime."""
    if settings.MCP_DEFAULT_TTL_MINUTES is not None:
        return min(base, timedelta(minutes=settings.MCP_DEFAULT_TTL_MINUTES))
    return base


# --- entry points for the view ------------------------------------------------------------------


def begin(req: ToolRequest) -> Reply | Wait:
    if req.request_state is not None:
        # Document "Invalid state": a requestState works only for the tool and arguments it was
        # minted for, so it is checked before the tool name and the arguments (which it binds)
        # are: one sent with a name no tool has fails as one sent with another tool's does.
        return _continue(req, _verified_round(req))
    registered = get_graph(req.name)
    if registered is None:
        raise RpcError(INVALID_PARAMS, f"Unknown tool: {req.name}")
    if (problem := _argument_error(registered, req.arguments)) is not None:
        return results.error(f"Invalid arguments for {req.name}: {problem}")
    first = start_call(req, registered)
    return Wait(first, first_call_answers=req.responses or None)


def settle(req: ToolRequest, wait: Wait, *, timed_out: bool, recorded: dict[str, Any] | None = None) -> Reply | Wait:
    """What to answer once the awaited round has moved on (or the wait timed out). `recorded`: the
    round's end as its run's notification carried it (`_record`), which saves reading the row."""
    round_ = _as_recorded(wait.round, recorded) if recorded is not None else _round(pk=wait.round_id)
    if (rejected := (round_.outcome or {}).get("rejected")) is not None:
        # LangGraph's own validation refused the answers this request resumed the agent with.
        raise RpcError(INVALID_PARAMS, rejected["message"], rejected["data"])
    if round_.state == Round.State.ASKING:
        if wait.first_call_answers:
            return answer_round(req, round_, wait.first_call_answers, first_call=True)
        if round_.answers:
            # A first call's answers, left on its round when the run outlasted that call's wait
            # (`_promise_token`): they answer the round for the request that came back for it.
            return answer_round(req, round_, round_.answers, first_call=False, left_by_first_call=True)
        # The round this request waited for is new to its client: ask it. Its inputResponses
        # answered the round before, and would resume the agent again if a key repeats.
        return render(req, round_)
    if round_.state == Round.State.RUNNING and timed_out:
        nudge(round_)
        if not req.modern:
            # A client before 2026-07-28 has no requestState to come back with.
            return results.error(STILL_RUNNING.format(seconds=settings.MCP_RUN_WAIT_SECONDS))
        if not _promise_token(round_, wait.first_call_answers):
            return settle(req, wait, timed_out=False)  # it settled meanwhile
        # Still running: a result with only requestState, which the client retries after a pause.
        return {"resultType": "input_required", "requestState": _token(round_)}
    return _continue(req, round_)


def _promise_token(round_: Round, first_call_answers: dict[str, Any] | None) -> bool:
    """Document "Lifetime": a call that ends after its requestState was handed out is kept for
    that requestState, even a first call's. False when the round is no longer running.

    Document "Answers in the first call": the client comes back with the requestState alone (the
    SDK retries a result without questions with no inputResponses), so a first call's answers are
    kept on its round, to answer it once it is asked."""
    if round_.with_request_state:
        return True
    round_.with_request_state = True
    # The worker records the round's end only with the flag it ran with (`_record`).
    running = Round.objects.filter(pk=round_.pk, state=Round.State.RUNNING)
    return bool(running.update(with_request_state=True, answers=first_call_answers))


# --- states -----------------------------------------------------------------------------------


def _continue(req: ToolRequest, round_: Round) -> Reply | Wait:
    if round_.state == Round.State.RUNNING:
        return Wait(round_)
    if round_.state == Round.State.ANSWERED:
        # Repeated answers: the round was resumed once already; answer with what that resume gives.
        following = _round(call_id=round_.call_id, number=round_.number + 1)
        if "rejected" in (following.outcome or {}) and req.responses != round_.answers:
            # LangGraph refused those answers and the round was asked again as the following one
            # (document "Invalid answers": the round stays open): other answers answer it.
            return _continue(req, following)
        if following.state != Round.State.RUNNING:
            # Settled before this request subscribed to its notification (waiter.py): answer now.
            return settle(req, Wait(following), timed_out=False)
        return Wait(following)
    if round_.state == Round.State.ASKING:
        if round_.answers and not req.responses:
            # Only the answers a first call left on the round (`_promise_token`).
            return answer_round(req, round_, round_.answers, first_call=False, left_by_first_call=True)
        return answer_round(req, round_, {**(round_.answers or {}), **(req.responses or {})}, first_call=False)
    return render(req, round_)


def start_call(req: ToolRequest, registered: RegisteredGraph) -> Round:
    with transaction.atomic():
        call = ToolCall.objects.create(
            thread_id=str(uuid.uuid4()),
            graph=registered.name,
            tool_name=req.name,
            arguments_digest=req.args_digest,
            caller=req.caller.identity,
            resumable=settings.MCP_THREADS_ENABLED and req.caller.can_keep_threads,
            expires_at=timezone.now() + lifetime(settings.MCP_PAUSED_TTL),
        )
        return _new_round(call, 0, graph_input=req.arguments, context=req.context, with_request_state=False)


def answer_round(
    req: ToolRequest, round_: Round, responses: dict[str, Any], *, first_call: bool, left_by_first_call: bool = False
) -> Reply | Wait:
    """Answer an ASKING round with `responses`. `first_call`: this request has no requestState.
    `left_by_first_call`: the answers are a first call's, left on its round when its run outlasted
    the wait (`_promise_token`), brought back by a request with the requestState it got."""
    asked = round_.outcome
    assert asked is not None  # an ASKING round holds its questions
    if not req.caller.can_update_threads:
        # Answering resumes, and so updates, the call's thread: the auth handler decides each time.
        return results.error(CANT_RESUME)
    if (unable := _capability_error(req, round_)) is not None:
        raise unable
    try:
        values = questions.resume_values(asked, responses)
        error = limits.resume_value_error(values) if isinstance(values, dict) else None
    except questions.InvalidAnswer as exc:
        values, error = None, RpcError(INVALID_PARAMS, exc.message, exc.data)
    if error is not None:
        if first_call or left_by_first_call:
            # Document "Invalid answers": answers sent in a first call, without a requestState,
            # delete that call's thread (the client starts over) rather than leave it to expire;
            # left on the round, they would fail every retry with its requestState alike.
            discard_call(round_.call)
        raise error
    if values is None:
        # Missing answers: ask the same questions again, with the same requestState.
        return render(req, round_)
    # Document "Runtime context": the resumed run gets the context of the request that answered,
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
):
    call = round_.call
    with transaction.atomic():
        claimed = Round.objects.filter(pk=round_.pk, state=Round.State.ASKING).update(
            state=Round.State.ANSWERED, answers=responses
        )
        if not claimed:
            # Another request answered this round first (its transaction has committed, or this
            # UPDATE would still be waiting on the row): its resume is the one that counts.
            return _continue(req, _round(pk=round_.pk))
        if isinstance(values, questions.End):
            ended = _new_round(
                call,
                round_.number + 1,
                with_request_state=not first_call,
                state=Round.State.DONE,
                outcome={"kind": "result", "result": results.error(values.text)},
            )
            _finish(call, keep=not first_call)
            return render(req, ended)
        # No longer paused (document "Lifetime": 24 hours after its latest round of questions), so
        # its old deadline no longer applies: until its run ends and sets the next one, the call
        # is kept as long as a paused call would be, and its requestState keeps working.
        now = timezone.now()
        _update_call(
            call,
            status=ToolCall.Status.RUNNING,
            updated_at=now,
            expires_at=now + lifetime(settings.MCP_PAUSED_TTL),
        )
        following = _new_round(
            call, round_.number + 1, resume=values, context=context, with_request_state=not first_call
        )
    return Wait(following)


def render(req: ToolRequest, round_: Round) -> Reply:
    """A settled round as this request's answer; what a client gets depends on what it can do."""
    if round_.state == Round.State.RUNNING:
        return {"resultType": "input_required", "requestState": _token(round_)}
    outcome = round_.outcome or {}
    if outcome.get("kind") == "breakpoint":
        if req.modern and _declared_modes(req):
            return results.error(AT_BREAKPOINT)
        return results.success(outcome["values"])
    if outcome.get("kind") != "questions":
        return outcome["result"]
    if not req.modern:
        discard_call(round_.call)
        return results.error(CANT_ANSWER, results.compact(outcome["interrupts"]))
    if (error := _capability_error(req, round_)) is not None:
        raise error
    _keep_paused(round_)
    return {"resultType": "input_required", "inputRequests": outcome["requests"], "requestState": _token(round_)}


def _keep_paused(round_: Round) -> None:
    """The 10 minutes a missing url capability leaves a call (`_capability_error`) are for coming
    back with url declared. Once its questions are asked, the call is paused like any other:
    document "Lifetime", 24 hours after its latest round of questions, so the user has the time
    the page takes. Only a shortened call is written to; the usual render costs no query."""
    now = timezone.now()
    paused_until = (round_.finished_at or now) + lifetime(settings.MCP_PAUSED_TTL)
    if round_.call.expires_at < paused_until:
        # Never a call that has expired meanwhile: the cleanup job may be removing it.
        shortened = ToolCall.objects.filter(pk=round_.call_id, status=ToolCall.Status.PAUSED)
        shortened.filter(expires_at__gt=now, expires_at__lt=paused_until).update(expires_at=paused_until)


def _capability_error(req: ToolRequest, round_: Round) -> RpcError | None:
    """Document "Support clients without elicitation": -32021 naming every mode the round needs."""
    needed = questions.modes_needed(round_.outcome or {"requests": {}})
    declared = _declared_modes(req)
    missing = [m for m in needed if m not in declared]
    if not missing:
        return None
    if req.request_state is None:
        # A first call: its client holds no requestState for this call (the error takes the place
        # of the one it would have got), so nothing can ever resume the thread. It goes now, as a
        # first call's thread does after invalid answers (document "Invalid answers").
        discard_call(round_.call)
    elif "url" in missing and "form" in declared:
        # The client may come back with url declared and the same answers: keep the call 10 minutes.
        ToolCall.objects.filter(pk=round_.call_id).update(
            expires_at=timezone.now() + lifetime(settings.MCP_MISSING_CAPABILITY_TTL)
        )
    return RpcError(
        MISSING_REQUIRED_CLIENT_CAPABILITY,
        f"This tool asks for human input and needs {' and '.join(missing)} elicitation.",
        {"requiredCapabilities": {"elicitation": {m: {} for m in needed}}},
    )


def _declared_modes(req: ToolRequest) -> set[str]:
    """The elicitation modes the client declared; none for a missing or null capability."""
    elicitation = req.capabilities.get("elicitation")
    if not isinstance(elicitation, dict):
        return set()
    # A mode is declared by an object. The revision's schema lets a mode be null, and the SDK reads
    # null as absent (ElicitationCapability: "Present if the client supports ..."), so
    # {"form": {}, "url": null} declares form only and must not be sent a URL question.
    # A client that declares elicitation with no modes supports form.
    return {m for m in ("form", "url") if isinstance(elicitation.get(m), dict)} or {"form"}


# --- the worker's side ----------------------------------------------------------------------------


LEASED = "leased"


def run_round(round_id: uuid.UUID | str) -> str | None:
    """Run the graph for a RUNNING round and record where it stopped.

    Safe to run twice: a round that is no longer RUNNING is left alone, and a round another worker
    holds is not run again (returns LEASED: try later). A round whose worker died is taken over
    once its lease has run out, and LangGraph resumes it from the last checkpoint.
    """
    now = timezone.now()
    leased = now + timedelta(seconds=settings.ROUND_LEASE_SECONDS)
    running = Round.objects.filter(pk=round_id, state=Round.State.RUNNING)
    # A round never leased is a first attempt; one whose lease has run out was attempted before
    # (its worker died, or the attempt failed on our side), and may have left a checkpoint.
    first_attempt = bool(running.filter(leased_until__isnull=True).update(leased_until=leased))
    if not first_attempt and not running.filter(leased_until__lte=now).update(leased_until=leased):
        return LEASED if running.exists() else None
    round_ = Round.objects.select_related("call").get(pk=round_id)
    try:
        _run(round_, attempted_before=not first_attempt)
    except BaseException:
        # Not the agent's failure (that is recorded as the tool's result) but ours, such as a lost
        # database: the lease ends now, so the next attempt has the round at once.
        running.update(leased_until=timezone.now())
        raise
    return None


def nudge(round_: Round) -> None:
    """Enqueue a RUNNING round again when nobody seems to run it: its lease ran out (the worker
    died), or it was never picked up (the process that enqueued it died before it could). A
    second copy of a queued round is harmless: the lease lets one run."""
    if round_.is_stalled(timezone.now()):
        from . import tasks

        logger.warning("round %s of call %s looks stalled; enqueueing it again", round_.number, round_.call_id)
        tasks.enqueue_round(str(round_.id))


def _run(round_: Round, *, attempted_before: bool = False) -> None:
    call = round_.call
    registered = get_graph(call.graph)
    try:
        if registered is None:
            raise LookupError(f"the graph {call.graph!r} is no longer registered")
        # A round 0 attempted before may have left a checkpoint (its worker died after LangGraph
        # saved it): it carries on from there, so nodes that finished do not run again. A later
        # round's resume is safe to repeat as is.
        started = attempted_before and round_.number == 0 and runner.has_checkpoint(call.thread_id)
        run = runner.run(
            registered,
            call.thread_id,
            arguments=round_.graph_input if round_.number == 0 else None,
            resume=round_.resume,
            context=round_.context,
            carry_on=started,
        )
    except runner.INFRASTRUCTURE_ERRORS:
        raise  # retried by the task (RETRY_ON_INFRASTRUCTURE)
    except Exception as exc:  # the agent's own failure becomes the tool's error result
        if registered is not None and round_.resume is not None and is_invalid_resume(exc):
            _rejected(round_, registered, exc)
            return
        logger.exception("tool call %s failed in round %s", call.id, round_.number)
        # The exception's text can carry internal detail (paths, hosts, queries): sent only when
        # MCP_TOOL_ERROR_DETAIL allows it; the log has it either way.
        text = f"The tool failed: {type(exc).__name__}: {exc}" if settings.MCP_TOOL_ERROR_DETAIL else TOOL_FAILED
        _settle_run(round_, results.error(text))
        return
    if run.interrupts:
        _paused(round_, registered, run)
    elif run.at_breakpoint:
        with transaction.atomic():
            _record(round_, Round.State.DONE, {"kind": "breakpoint", "values": results.jsonable(run.values)})
            # Document "Lifetime": like any end of the call, kept 10 minutes when reached by a
            # request with a requestState, so resending it gets the same result.
            _finish(call, keep=round_.with_request_state)
    else:
        _settle_run(round_, results.success(run.values))


def _rejected(round_: Round, registered: RegisteredGraph, exc: Exception) -> None:
    """Document "Invalid answers", for an answer that fits the form but not the response_schema type
    (a Pydantic validator the form cannot carry): LangGraph saved nothing for it, so the request
    that sent it gets -32602 and the same questions stay open, or, after a first call, the thread
    is deleted."""
    detail = "; ".join(e["msg"] for e in exc.errors()) if isinstance(exc, ValidationError) else str(exc)
    rejected = {"message": questions.INVALID_CONTENT, "data": {"detail": detail}}
    pending = runner.pending_interrupts(registered, round_.call.thread_id)
    if not round_.with_request_state or not pending:
        result = results.error(f"{questions.INVALID_CONTENT}: {detail}")
        with transaction.atomic():
            _record(round_, Round.State.DONE, {"kind": "result", "result": result, "rejected": rejected})
            _finish(round_.call, keep=round_.with_request_state)
        return
    _paused(round_, registered, runner.RunResult(values={}, interrupts=pending), rejected=rejected)


def _paused(
    round_: Round, registered: RegisteredGraph, run: runner.RunResult, *, rejected: dict[str, Any] | None = None
) -> None:
    call = round_.call
    handler = next((h for i in run.interrupts if (h := handoff.handler_for(i)) is not None), None)
    if handler is not None:
        with transaction.atomic():
            handed = handler(handoff.Handoff(call.id, call.thread_id, call.graph, run.interrupts, run.values))
            result = {
                "content": [{"type": "text", "text": handed.text}],
                "structuredContent": handed.structured,
                "isError": False,
            }
            _record(round_, Round.State.DONE, {"kind": "result", "result": result})
            _update_call(call, status=ToolCall.Status.AWAITING_STAFF, expires_at=timezone.now() + handed.keep_for)
        return
    if not call.resumable:
        # Kept only if a requestState was handed out while it ran (`_promise_token`).
        _settle_run(round_, results.error(CANT_RESUME))
        return
    if round_.number >= settings.MCP_MAX_ROUNDS:
        # Round n's run asks the (n+1)th round of questions: a call that keeps asking ends here.
        text = TOO_MANY_ROUNDS.format(limit=settings.MCP_MAX_ROUNDS)
        _settle_run(round_, results.error(text))
        return
    try:
        asked = questions.build_round(run.interrupts)
    except Unaskable as exc:
        # Kept like any other end of the call (document "Lifetime"), so a resent answer gets this result.
        _settle_run(round_, results.error(f"{questions.UNASKABLE}: {exc}."))
        return
    except Exception:
        # A question kind that breaks on what an agent wrote must not leave the round RUNNING for
        # ever (the worker would fail it again on every retry): the call ends unaskable.
        logger.exception("could not build the questions of round %s of call %s", round_.number, call.id)
        _settle_run(round_, results.error(f"{questions.UNASKABLE}."))
        return
    asked["interrupts"] = [
        {"id": i.id, "value": results.jsonable(i.value), "response_schema": results.jsonable(i.response_schema)}
        for i in run.interrupts
    ]
    # Stored as JSON: what an agent wrote (a message with U+0000, a NaN) must not fail the write.
    outcome = {"kind": "questions", **results.jsonable(asked)}
    if rejected is not None:
        outcome["rejected"] = rejected
    with transaction.atomic():
        _record(round_, Round.State.ASKING, outcome)
        # Document "Lifetime": a paused call expires 24 hours after its latest round of questions.
        _update_call(call, status=ToolCall.Status.PAUSED, expires_at=timezone.now() + lifetime(settings.MCP_PAUSED_TTL))


def _settle_run(round_: Round, result: dict[str, Any]) -> None:
    """End the call with `result`, kept for 10 minutes if a requestState reached this round."""
    with transaction.atomic():
        _record(round_, Round.State.DONE, {"kind": "result", "result": result})
        _finish(round_.call, keep=round_.with_request_state)


def _record(round_: Round, state: str, outcome: dict[str, Any]) -> None:
    """Record where a RUNNING round's run stopped. A request that timed out waiting may have handed
    out a requestState for the round meanwhile (`_promise_token`): the UPDATE matches only the flag
    this run knows, and on a miss `round_.with_request_state` is brought up to date first, so what
    the caller does next (keep the call or delete it) agrees with the row."""
    from . import waiter

    finished = timezone.now()

    def update() -> int:
        return Round.objects.filter(
            pk=round_.pk, state=Round.State.RUNNING, with_request_state=round_.with_request_state
        ).update(state=state, outcome=outcome, finished_at=finished)

    updated = update()
    if not updated and not round_.with_request_state:
        round_.with_request_state = True
        updated = update()
        round_.with_request_state = bool(updated)  # a miss again: another run recorded the round
    if not updated:
        return
    call = round_.call

    def notify() -> None:
        # What the rows hold at this commit, so the waiting request answers without reading them
        # (`_as_recorded`): the call's expiry is the one this transaction set (`_update_call`).
        recorded = {
            "state": state,
            "outcome": outcome,
            "finished_at": finished.isoformat(),
            "with_request_state": round_.with_request_state,
            "expires_at": call.expires_at.isoformat(),
        }
        waiter.notify(round_.pk, recorded)

    transaction.on_commit(notify)


def _as_recorded(round_: Round, recorded: dict[str, Any]) -> Round:
    """`round_` (a request's own copy, with its call) brought to where its run recorded it."""
    round_.state = recorded["state"]
    round_.outcome = recorded["outcome"]
    round_.finished_at = datetime.fromisoformat(recorded["finished_at"])
    round_.with_request_state = recorded["with_request_state"]
    round_.call.expires_at = datetime.fromisoformat(recorded["expires_at"])
    return round_


def _update_call(call: ToolCall, **fields: Any) -> None:
    """UPDATE the call's row, and `call` with it (a round's notification carries its expiry)."""
    ToolCall.objects.filter(pk=call.pk).update(**fields)
    for name, value in fields.items():
        setattr(call, name, value)


def _finish(call: ToolCall, *, keep: bool) -> None:
    """Document "Lifetime": finished by a request with a requestState, the call is kept 10 minutes
    (the same answers resent get the same result); without one, its thread is deleted now."""
    now = timezone.now()
    expires = now + lifetime(settings.MCP_FINISHED_TTL) if keep else now
    _update_call(call, status=ToolCall.Status.FINISHED, expires_at=expires, updated_at=now)
    if not keep:
        thread_id = call.thread_id
        transaction.on_commit(lambda: _delete_thread(thread_id))


def discard_call(call: ToolCall) -> None:
    """Remove a call that can go no further: its thread now, its rows with it. The rows go only
    once the thread has: the cleanup job finds threads through them."""
    if _delete_thread(call.thread_id):
        ToolCall.objects.filter(pk=call.pk).delete()
    else:
        ToolCall.objects.filter(pk=call.pk).update(status=ToolCall.Status.FINISHED, expires_at=timezone.now())


def _delete_thread(thread_id: str) -> bool:
    try:
        runner.delete_thread(thread_id)
    except Exception:  # the cleanup job removes what is left, found through the call's row
        logger.exception("could not delete thread %s now", thread_id)
        return False
    return True


# --- helpers ------------------------------------------------------------------------------------


def _new_round(call: ToolCall, number: int, *, state: str = Round.State.RUNNING, **fields: Any) -> Round:
    round_id = uuid.uuid4()
    token = tokens.request_state(
        round_id, caller=call.caller, graph=call.graph, tool=call.tool_name, args_digest=call.arguments_digest
    )
    round_ = Round.objects.create(
        id=round_id, call=call, number=number, state=state, token_hash=tokens.stored_hash(token), **fields
    )
    if state == Round.State.RUNNING:
        # Without a requestState the client cannot come back to this call, only start another:
        # if the broker refuses the run, the call goes, so that it does not run later unseen
        # (cleanup.nudge_stalled_rounds would enqueue it). With one, the client's retry waits for
        # the run, and the nudge enqueues it.
        forget = None if fields.get("with_request_state") else call
        transaction.on_commit(lambda: _enqueue(round_id, forget=forget))
    return round_


def _enqueue(round_id: uuid.UUID, *, forget: ToolCall | None) -> None:
    from . import tasks

    try:
        tasks.enqueue_round(str(round_id))
    except Exception:
        if forget is not None:
            discard_call(forget)
        raise


def _round(**lookup: Any) -> Round:
    """A round the request has already seen. Gone means its call was removed meanwhile (it expired,
    or it was discarded): the request fails as one with an expired requestState does."""
    round_ = Round.objects.select_related("call").filter(**lookup).first()
    if round_ is None:
        raise invalid_request_state()
    return round_


def _token(round_: Round) -> str:
    call = round_.call
    return tokens.request_state(
        round_.id, caller=call.caller, graph=call.graph, tool=call.tool_name, args_digest=call.arguments_digest
    )


def _verified_round(req: ToolRequest) -> Round:
    """Document "Invalid state" and "Secure paused calls": the token must be the one minted for
    this caller, tool and arguments, and its call must not have expired. Every failure looks alike."""
    round_id = tokens.round_id_of(req.request_state)
    round_ = Round.objects.select_related("call").filter(pk=round_id).first() if round_id else None
    if round_ is None:
        raise invalid_request_state()
    expected = tokens.request_state(
        round_.id, caller=req.caller.identity, graph=round_.call.graph, tool=req.name, args_digest=req.args_digest
    )
    if not tokens.matches(str(req.request_state), expected, round_.token_hash) or round_.call.is_expired:
        raise invalid_request_state()
    if not req.caller.can_read_threads:
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
