"""An older client's tools/call answered as an event stream (MCP_OLDER_CLIENTS=answer): the
handshake revisions' way to ask a person in the middle of a call.

    tools/call in a session whose client declared elicitation, and the graph pauses
      ──► text/event-stream: a first event (its id, no data, `retry`), then one elicitation/create
          request per question of the round
    the client's JSON-RPC response to one, POSTed in the session (202) to any web process
      ──► add_answers: the checks and the claim of inputResponses and tasks/update; a refused
          answer is asked again with the reason
    ──► the same stream: the next round's questions, and last the tools/call's response

The stream is no second state machine: it reads the call's rounds (tool_calls.py) and waits for
them (waiter.py). What it sends is kept as rows (StreamEvent) before it is sent, each with the id
`<stream id>.<event id>`, which is also a question's JSON-RPC id. So a client whose stream was cut
resumes it with `GET` and `Last-Event-ID` at any web process, for as long as the call lives, and
gets what it has not answered and the response; an answer POSTed meanwhile resumes the call all
the same, once.
"""

from __future__ import annotations

import math
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from mcp_types import methods
from pydantic import ValidationError

from mcp_gateway import limits
from mcp_gateway.auth import Caller
from mcp_gateway.calls import links, questions, results, tool_calls, waiter
from mcp_gateway.calls.outcomes import Finished
from mcp_gateway.calls.questions import ELICIT
from mcp_gateway.calls.runs import CANT_RESUME
from mcp_gateway.models import CallStream, Round, Session, StreamEvent, ToolCall
from mcp_gateway.protocol import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    Message,
    RpcError,
    invalid_request_state,
    result_body,
)
from mcp_gateway.streams import capacity, pump, sse
from mcp_gateway.wires.mcp_tasks import mcp_task_handles
from mcp_gateway.wires.sessions import older_tasks, sessions

# How often a stream reads the progress of a run its client asked progress of.
PROGRESS_SECONDS = 1.0
NOT_ASKED = "No open question of this session has this id: it was never asked here, or it is answered."
# Refused answers to one question of a round before it is asked no more: the last one ends the call
# with an error result. A client that sends the same invalid answer again and again (a bug, a
# script) was otherwise asked without end, each answer a 202.
MAX_REFUSED_ANSWERS = 5
TOO_MANY_REFUSED = (
    f"The call ended: {MAX_REFUSED_ANSWERS} answers to one question were refused, so it is not asked again."
)


@dataclass(frozen=True)
class Streaming:
    """A stream to serve, outside the database thread (views.py): from after `after`, the id of
    the last event its client has, in the place it holds (streams/capacity.py)."""

    stream_id: uuid.UUID
    after: int
    caller: Caller
    place: capacity.Place


def check_capacity(caller: Caller) -> None:
    """Refuse (429 or 503) a request whose answer may be a stream the caller or the process has no
    room for, before it starts a call."""
    capacity.check(caller.identity)


# --- opening and resuming (in a database thread) -------------------------------------------------


def open_stream(
    session: Session,
    request_id: str | int,
    caller: Caller,
    call_id: uuid.UUID,
    *,
    for_task: bool = False,
    progress_token: str | int | None = None,
) -> Streaming:
    """The stream that answers a request (`request_id`) with its call: a tools/call whose answer is
    a round of questions (or a run still going, or one that reports its progress), or a 2025-11-25
    tasks/result (`for_task`). A tools/call passed `check_capacity` before its call started, so
    its stream is served whatever the count is now (capacity.take's `admitted`); a tasks/result
    started nothing, and is refused when there is no room (its task goes on)."""
    place = capacity.take(caller.identity, admitted=not for_task)
    stream = CallStream.open(
        session=session, call_id=call_id, request_id=request_id, for_task=for_task, progress_token=progress_token
    )
    return Streaming(stream.pk, 0, caller, place)


def resume_stream(session: Session, caller: Caller, last_event_id: str) -> Streaming:
    """The transport's "Resumability and Redelivery": a GET with the id of the last event the
    client got. An id of another session's stream (another caller's too: sessions are the
    caller's) is refused as an unknown one is."""
    stream_id, after = _event_id(last_event_id)
    if stream_id is None or not CallStream.objects.filter(pk=stream_id, session=session).exists():
        raise RpcError(INVALID_REQUEST, "Bad Request: Last-Event-ID names no stream of this session", http_status=400)
    return Streaming(stream_id, after, caller, capacity.take(caller.identity))


def _event_id(value: str) -> tuple[uuid.UUID | None, int]:
    head, _, tail = value.strip().partition(".")
    try:
        stream_id, event_id = uuid.UUID(head), int(tail)
    except ValueError:
        return None, 0
    # An event id is a bigint row id (or 0, before any event).
    return (stream_id, event_id) if tail.isdigit() and event_id < 2**63 else (None, 0)


# --- an answer (in a database thread) ------------------------------------------------------------


def take_response(session: Session, caller: Caller, body: dict[str, Any]) -> None:
    """The client's JSON-RPC response to one question of its session. Accepted (the view answers
    202) when it answered an open question, refused or not; RpcError (400) otherwise."""
    stream_id, event_id = _event_id(body["id"]) if isinstance(body.get("id"), str) else (None, 0)
    asked = StreamEvent.objects.filter(stream__session=session, kind=StreamEvent.Kind.QUESTION)
    question = asked.filter(pk=event_id, stream_id=stream_id).first() if stream_id is not None else None
    if question is None or question.answered_at is not None or question.round_id is None:
        raise RpcError(INVALID_PARAMS, NOT_ASKED, http_status=400)
    answer = _answer_of(body, session.protocol_version)
    if not caller.can_update_threads:
        # Answering resumes, and so updates, the call's thread: the auth handler decides each time.
        raise RpcError(INVALID_PARAMS, CANT_RESUME, http_status=400)
    with transaction.atomic():
        # The round locked, so answers to its questions arriving together are merged, not lost.
        locked = Round.objects.select_for_update(of=("self",)).select_related("call")
        round_ = locked.filter(pk=question.round_id).first()
        by_link = round_ is not None and _by_link(session, round_, question.key)
        if round_ is not None and by_link and answer["action"] == "accept":
            # The round's page answers it (calls/links.py): an accept of its link says only that the
            # person went there (perhaps after they answered it), kept so that the stream does not
            # ask it again meanwhile.
            if question.take_answer(answer) and round_.state == Round.State.ASKING:
                round_.keep_answers({**(round_.answers or {}), question.key: answer})
            return
        if round_ is None or round_.state != Round.State.ASKING:
            raise RpcError(INVALID_PARAMS, NOT_ASKED, http_status=400)
        if not question.take_answer(answer):
            raise RpcError(INVALID_PARAMS, NOT_ASKED, http_status=400)
        # A decline or cancel of a round's link declines or cancels every question its page asks.
        declined = tool_calls.declined_on_page(round_.outcome or {}, {question.key: answer}) if by_link else None
        answers = declined or {question.key: answer}
        try:
            tool_calls.add_answers(round_, answers)
        except RpcError as refused:
            if _refused_before(question, round_) + 1 >= MAX_REFUSED_ANSWERS:
                question.refuse()
                # The stream's next read finds the round ended and sends this as the response.
                tool_calls.end_round(round_, {"kind": "result", "result": results.error(TOO_MANY_REFUSED)})
            else:
                _ask_again(question, answer, round_, refused)
        transaction.on_commit(lambda: waiter.notify_task(round_.call_id))


def _refused_before(question: StreamEvent, round_: Round) -> int:
    """Answers to this question of its round refused so far, whichever stream of the session asked it."""
    return StreamEvent.objects.filter(
        kind=StreamEvent.Kind.QUESTION, round=round_, key=question.key, refused=True
    ).count()


def _answer_of(body: dict[str, Any], version: str) -> dict[str, Any]:
    """The ElicitResult a response carries, as the session's revision shapes it. An error response
    (the client could not ask) counts as a cancel: the person was not asked."""
    if "error" in body:
        return {"action": "cancel"}
    result = body.get("result")
    try:
        methods.validate_client_result(ELICIT, version, result if isinstance(result, dict) else {})
    except (ValidationError, KeyError, ValueError):
        raise RpcError(INVALID_PARAMS, "Invalid ElicitResult", http_status=400) from None
    assert isinstance(result, dict)
    answer = {k: v for k, v in result.items() if k in ("action", "content")}
    limits.check_input_responses({"answer": answer})
    limits.check_stored_values(inputResponses=answer)
    return answer


def _ask_again(question: StreamEvent, answer: dict[str, Any], round_: Round, refused: RpcError) -> None:
    """An answer the checks refused: its question is asked again with the reason, as a round with
    an invalid answer stays open (docs/rules.md, "Invalid answers"). A refusal can name another
    question of the round (a review's decisions are checked together): that one is asked again,
    and this answer is kept."""
    data = refused.data if isinstance(refused.data, dict) else {}
    named = data.get("key")
    key = named if isinstance(named, str) and named in (round_.outcome or {}).get("requests", {}) else question.key
    if key != question.key:
        kept = {**(round_.answers or {}), question.key: answer}
        round_.keep_answers({k: v for k, v in kept.items() if k != key})
    question.ask_again(round_, key, _reason(refused))


def _reason(error: RpcError | dict[str, Any]) -> str:
    message, data = (error.message, error.data) if isinstance(error, RpcError) else (error["message"], error["data"])
    detail = data.get("detail") if isinstance(data, dict) else None
    return f"{message}: {detail}" if detail else message


# --- serving (on the event loop, through the pump) -----------------------------------------------


@dataclass(frozen=True)
class _Step:
    """What the call's latest round gives the stream: what to wait for, or nothing (a response
    recorded)."""

    running: uuid.UUID | None = None
    asking: uuid.UUID | None = None
    # A run whose progress the client asked for: read again at least this often.
    poll: float | None = None


def serve(streaming: Streaming) -> AsyncIterator[bytes]:
    """The stream's frames: the first event, then each event not sent yet as the call moves on,
    until its response. Ends at once, silently, when the client goes away; the client resumes it
    with Last-Event-ID."""
    # 2025-11-25, "Resumability": an event with an id and no data first, so that a client cut
    # before any question still reconnects.
    first = pump.opening(f"{streaming.stream_id}.{streaming.after}")
    return pump.pump(Reading(streaming).read, streaming.place, first=[first])


class Reading:
    """One serving of a stream: the id of the last event sent, and when to let go of a run still
    going."""

    def __init__(self, streaming: Streaming) -> None:
        self.streaming = streaming
        self.sent = streaming.after
        # 2025-11-25, "Resumability": the server may close a stream before the response; its
        # client reconnects with Last-Event-ID. Done only while the run goes on (nothing to answer).
        hold = settings.MCP_STREAM_HOLD_SECONDS
        self.close_at = time.monotonic() + hold if hold > 0 else None

    def read(self) -> pump.Read:
        stream = CallStream.objects.select_related("session", "call").filter(pk=self.streaming.stream_id).first()
        if stream is None:
            return pump.Read(done=True)  # its session ended, or its call was removed
        sessions.keep_alive(stream.session)  # an open stream keeps its session
        responded = stream.events.filter(kind=StreamEvent.Kind.RESPONSE).exists()
        step = _Step() if responded else _record(stream, self.streaming.caller)
        # What the client has not seen, in order: the questions still open (an answered one needs
        # no asking again) and the response.
        unsent = (
            stream.events.filter(pk__gt=self.sent)
            .filter(Q(kind=StreamEvent.Kind.RESPONSE) | Q(answered_at__isnull=True))
            .select_related("round")
            .order_by("pk")
        )
        frames = []
        for event in unsent:
            frames.append(_event(stream, event))
            self.sent = event.pk
            responded = responded or event.kind == StreamEvent.Kind.RESPONSE
        if responded:
            return pump.Read(frames, done=True)
        if step.running is not None:
            poll = step.poll
            if self.close_at is not None:
                if time.monotonic() >= self.close_at:
                    return pump.Read(frames, done=True)
                poll = min(poll or math.inf, self.close_at - time.monotonic())
            # A run's progress is read from its call's row: nothing announces it.
            return pump.Read(frames, wait=pump.Run(step.running), poll=poll)
        if step.asking is not None:
            return pump.Read(frames, wait=pump.Changes([step.asking], [stream.call_id]))
        return pump.Read(frames)


def _record(stream: CallStream, caller: Caller) -> _Step:
    """Keep as rows what the call's latest round gives the stream: a question for each of its
    questions that has no answer and is not open yet, or the response. Two processes serving the
    stream at once record each once (the constraints of StreamEvent)."""
    _completions(stream)
    round_ = Round.objects.select_related("call").filter(call_id=stream.call_id).order_by("-number").first()
    if round_ is not None and round_.state == Round.State.RUNNING:
        if stream.for_task:
            _task_status(stream, round_.call, round_)
        if stream.progress_token is None:
            return _Step(running=round_.id)
        _progress(stream, round_.call)
        return _Step(running=round_.id, poll=PROGRESS_SECONDS)
    session = stream.session
    req = tool_calls.ToolRequest(
        caller=caller,
        name=stream.call.tool_name,
        arguments={},
        context=None,
        responses=None,
        request_state=None,
        client=tool_calls.Client(
            capabilities=session.capabilities, rounds=False, on_stream=True, links=links.available()
        ),
    )
    try:
        if round_ is None:
            raise invalid_request_state()
        # Read with its round, in one statement: the stream's own copy may predate the round's end.
        call = round_.call
        if stream.for_task and call.status == ToolCall.Status.FINISHED:
            _task_status(stream, call, round_)
            reply = older_tasks.task_reply(call, round_, session.protocol_version, session.capabilities)
            message = {"jsonrpc": "2.0", "id": stream.request_id, "result": reply}
        elif stream.for_task and call.status == ToolCall.Status.AWAITING_STAFF:
            # A task waits for staff until their decision has run: the hand-over point tells.
            _task_status(stream, call, round_)
            return _Step(asking=round_.id)
        elif round_.state == Round.State.ASKING:
            if stream.for_task:
                _task_status(stream, call, round_)
            ask_round(stream, req, round_)
            return _Step(asking=round_.id)
        else:
            outcome = tool_calls.render(req, round_)
            # The round a stream reads last is running, asking or finished: finished here.
            reply = outcome.result if isinstance(outcome, Finished) else {}
            message = result_body(Message(stream.request_id, "tools/call", {}, session.protocol_version), reply)
    except RpcError as error:
        message = error.body(stream.request_id)
    StreamEvent.respond(stream, message)
    return _Step()


def _completions(stream: CallStream) -> None:
    """2025-11-25, "Completion Notifications for URL Mode Elicitation": a URL question this stream
    sent to a round's answer page, once the page answered the round, is told complete
    (`notifications/elicitation/complete` with its elicitationId), before whatever the stream sends
    next. On the stream that asked, as a row like its other events, so a client whose stream was
    cut gets it when it resumes; the session's own stream is stored nowhere. The revisions before
    2025-11-25 have no URL mode, and 2026-07-28 has neither elicitationId nor the notification."""
    declared = questions.declared_modes(stream.session.capabilities)
    if stream.session.protocol_version not in sessions.URL_REVISIONS or "url" not in declared or "form" in declared:
        return  # no question of this stream went to a page (_by_link)
    if not links.available():
        return
    told = stream.events.filter(kind=StreamEvent.Kind.COMPLETE).values_list("key", flat=True)
    asked = (
        stream.events.filter(kind=StreamEvent.Kind.QUESTION)
        .exclude(round__state=Round.State.ASKING)
        .select_related("round")
        .order_by("pk")
    )
    done = [
        event.pk
        for event in asked.exclude(pk__in=[int(k) for k in told])
        if event.round is not None and _by_link(stream.session, event.round, event.key) and _answered_on_page(event)
    ]
    if done:
        StreamEvent.complete(stream, done, [_completion(f"{stream.pk}.{pk}") for pk in done])


def _answered_on_page(question: StreamEvent) -> bool:
    """The page answered the question's round (the person sent its form, or declined it there):
    the round holds an answer to the question that no client's response to it gave (a decline or
    cancel of the link ends the round without the page; a cancelled call's round has no answers)."""
    round_ = question.round
    assert round_ is not None
    if not isinstance((round_.answers or {}).get(question.key), dict):
        return False
    by_client = StreamEvent.objects.filter(
        kind=StreamEvent.Kind.QUESTION, round_id=round_.pk, answered_at__isnull=False
    ).exclude(answer__action="accept")
    return not by_client.exists()


def _completion(elicitation_id: str) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "method": "notifications/elicitation/complete",
        "params": {"elicitationId": elicitation_id},
    }


def _task_status(stream: CallStream, call: ToolCall, latest: Round) -> None:
    """A task's status, as notifications/tasks/status when it changed since the stream last told."""
    notification = older_tasks.status_notification(call, latest)
    _numbered(
        stream,
        StreamEvent.Kind.STATUS,
        notification,
        same=lambda sent: sent["params"]["status"] == notification["params"]["status"],
    )


def _progress(stream: CallStream, call: ToolCall) -> None:
    """The run's progress (the graph's own report, or the step it is at), as a progress
    notification when it changed; its number is its `progress`, which grows as the revision
    requires."""
    if not call.progress or stream.progress_token is None:
        return
    # Numbered by _numbered: the count of progress notifications this stream has sent.
    notification = sse.progress_notification(stream.progress_token, 0, call.progress)
    _numbered(
        stream, StreamEvent.Kind.PROGRESS, notification, same=lambda last: last["params"]["message"] == call.progress
    )


def _numbered(stream: CallStream, kind: str, notification: dict[str, Any], *, same: Callable[[dict], bool]) -> None:
    """Record a notification of `kind` unless it says the `same` as the last one; numbered, so two
    processes serving the stream at once record it once (the constraint on its number)."""
    last = stream.events.filter(kind=kind).order_by("-pk").first()
    if last is not None and last.message is not None and same(last.message):
        return
    number = int(last.key) + 1 if last is not None else 1
    if kind == StreamEvent.Kind.PROGRESS:
        notification["params"]["progress"] = number
    StreamEvent.notify(stream, kind, number, notification)


def ask_round(stream: CallStream, req: tool_calls.ToolRequest, round_: Round) -> None:
    """Record the round's unanswered questions on the stream. RpcError when the client cannot be
    asked them."""
    asked = stream.events.filter(kind=StreamEvent.Kind.QUESTION, round=round_)
    if not asked.exists():
        # The first time this stream asks the round: the checks a round's rendering makes (-32021
        # for an elicitation mode the client did not declare; a call kept paused once asked).
        tool_calls.render(req, round_)
    outcome = round_.outcome or {}
    open_keys = set(asked.filter(answered_at__isnull=True).values_list("key", flat=True))
    # The answers kept read after the open questions: a question answered meanwhile (its answer
    # and its round's kept answers commit together) is then in one or the other, never asked again.
    fresh = Round.objects.filter(pk=round_.pk).values("state", "answers").first()
    if fresh is None or fresh["state"] != Round.State.ASKING:
        return  # answered meanwhile: the next read gives the run or the response
    kept = fresh["answers"] or {}
    rejected = outcome.get("rejected")
    # LangGraph refused the answers the previous round resumed with: this round asks them again.
    reason = _reason(dict(rejected)) if rejected else ""
    StreamEvent.ask(
        stream, round_, [k for k in outcome.get("requests", {}) if k not in kept and k not in open_keys], reason
    )


def _event(stream: CallStream, event: StreamEvent) -> bytes:
    event_id = f"{stream.pk}.{event.pk}"
    if event.kind != StreamEvent.Kind.QUESTION:
        body = event.message
    else:
        body = {"jsonrpc": "2.0", "id": event_id, "method": ELICIT, "params": _params(stream, event, event_id)}
    return sse.frame(body, event_id=event_id)


def _params(stream: CallStream, event: StreamEvent, event_id: str) -> dict[str, Any]:
    """The question as the session's revision asks it: 2025-11-25's URL mode names the
    elicitation; 2025-06-18 knows only forms, without a mode."""
    assert event.round is not None and event.round.outcome is not None
    params = dict(event.round.outcome["requests"][event.key]["params"])
    if event.reason:
        params["message"] = f"{event.reason}\n\n{params['message']}"
    if _by_link(stream.session, event.round, event.key):
        params = dict(questions.by_link({"params": params}, links.link_for(event.round))["params"])
    if stream.for_task:
        task_id = mcp_task_handles.mint(stream.call_id, stream.call.caller)
        params["_meta"] = {**params.get("_meta", {}), older_tasks.RELATED_TASK: {"taskId": task_id}}
    if params.get("mode") == "url":
        params["elicitationId"] = event_id
    elif stream.session.protocol_version not in sessions.URL_REVISIONS:
        params.pop("mode", None)
    return params


def _by_link(session: Session, round_: Round, key: str) -> bool:
    """Whether the client is sent to the round's answer page for this question: answer pages are
    on, and it declared URL mode but not the form this question is (calls/links.py)."""
    request = (round_.outcome or {}).get("requests", {}).get(key)
    declared = questions.declared_modes(session.capabilities)
    return (
        links.available()
        and links.for_caller(session.caller)
        and request is not None
        and request["params"].get("mode", "form") == "form"
        and "url" in declared
        and "form" not in declared
    )
