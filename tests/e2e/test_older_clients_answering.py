"""Older clients that answer (MCP_OLDER_CLIENTS=answer): the official Python SDK client in legacy
mode (2025-11-25, initialize and Mcp-Session-Id) answers a tool's questions through its
elicitation_callback, asked as elicitation/create requests on the call's event stream, against
the production ASGI app under uvicorn with a real worker and Redis. A cut stream is resumed with
plain HTTP, as the transport describes it."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import mcp_types as types
import pytest

from tests.asking import DECLINED
from tests.clients import ACCEPT, CANCEL, DECLINE, by_message, elicit_result_accepting, run, sdk_client
from tests.e2e.older_sessions import LEGACY, Session, events
from tests.e2e.review import EMAIL, decisions_received, final_text
from tests.processes import Web, service_env

CANCELLED = "The request for input was cancelled."
SESSIONS_PER_CALLER = 8


@pytest.fixture(scope="module")
def web(celery_queue, fake_model, tmp_path_factory):
    env = service_env(
        celery_queue,
        fake_model,
        MCP_OLDER_CLIENTS="answer",
        MCP_STREAM_KEEPALIVE_SECONDS="1",
        MCP_SESSIONS_PER_CALLER=str(SESSIONS_PER_CALLER),
        MCP_DB_THREADS="2",
        CHECKPOINT_POOL_MAX_SIZE="2",
    )
    web = Web(env, tmp_path_factory.mktemp("older") / "web.log").start()
    yield web
    web.stop()


@pytest.fixture
def url(web, celery_worker):
    yield f"{web.url}/mcp/"
    celery_worker.wait_until_idle()


def call(url: str, token: str, tool: str, callback, arguments: dict | None = None):
    async def go():
        async with sdk_client(url, token, callback, mode="legacy") as client:
            assert client.protocol_version == LEGACY
            return await client.call_tool(tool, arguments or {})

    return run(go())


def test_a_text_question_is_answered_through_the_elicitation_callback(url, token):
    callback = by_message({"region": elicit_result_accepting(response="eu-west-1")})

    result = call(url, token, "choose_region", callback)

    assert result.structured_content == {"region": "eu-west-1"}
    assert len(callback.asked) == 1


def test_two_questions_of_one_round_are_two_requests_on_the_stream(url, token):
    callback = by_message(
        {"name": elicit_result_accepting(response="Ada"), "colour": elicit_result_accepting(response="green")}
    )

    result = call(url, token, "survey", callback)

    assert not result.is_error, result.content
    assert result.structured_content == {"name": "Ada", "colour": "green"}
    assert len(callback.asked) == 2
    assert len({request_id for request_id, _ in callback.asked}) == 2


def test_the_next_round_is_asked_on_the_same_stream(url, token):
    callback = by_message({"name": elicit_result_accepting(response="Ada"), "Open this page": ACCEPT})

    result = call(url, token, "form_then_url", callback)

    assert not result.is_error, result.content
    assert [params.mode for _, params in callback.asked] == ["form", "url"]
    assert len({request_id.partition(".")[0] for request_id, _ in callback.asked}) == 1


def test_a_2025_06_18_client_is_asked_forms_and_gets_32021_for_a_url_question(url, token):
    session = Session(url, token, capabilities={"elicitation": {"form": {}, "url": {}}}, version="2025-06-18")
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "connect_calendar", "arguments": {}}}

    refused = session.post(body)

    assert refused.json()["error"]["code"] == -32021
    with session.stream_call("choose_region") as response:
        seen = events(response)
        next(seen)
        _, question, _ = next(seen)
    assert "mode" not in question["params"]
    assert question["params"]["requestedSchema"]["properties"] == {"response": {"type": "string"}}


def test_a_typed_form_keeps_its_schema(url, token):
    callback = by_message({"pet": elicit_result_accepting(name="Rex", age=3)})

    result = call(url, token, "typed_typeddict", callback)

    ((_, params),) = callback.asked
    assert set(params.requested_schema["properties"]) == {"name", "age"}
    assert result.structured_content == {"answer": {"name": "Rex", "age": 3}}


def test_a_url_question_is_asked_in_url_mode(url, token):
    callback = by_message({"calendar": ACCEPT})

    result = call(url, token, "connect_calendar", callback)

    ((request_id, params),) = callback.asked
    assert (params.mode, params.url) == ("url", "https://example.com/oauth/calendar/start")
    assert params.elicitation_id == request_id
    assert result.structured_content == {"status": "connected"}


def test_a_decline_ends_the_call_as_the_document_says(url, token):
    result = call(url, token, "choose_region", by_message({"region": DECLINE}))

    assert result.is_error and result.content[0].text == DECLINED


def test_a_cancel_ends_the_call_as_the_document_says(url, token):
    result = call(url, token, "choose_region", by_message({"region": CANCEL}))

    assert result.is_error and result.content[0].text == CANCELLED


def test_a_refused_answer_is_asked_again_with_the_reason(url, token):
    answers = iter(
        [
            elicit_result_accepting(region="eu-west-1", replicas=20),
            elicit_result_accepting(region="eu-west-1", replicas=3),
        ]
    )
    asked: list[str] = []

    async def callback(ctx, params):
        asked.append(params.message)
        return next(answers)

    result = call(url, token, "plan_deployment", callback)

    assert result.structured_content == {"region": "eu-west-1", "replicas": 3}
    assert len(asked) == 2
    assert asked[1].startswith("Form content does not match requestedSchema: ")
    assert asked[1].endswith(asked[0])


def test_a_question_whose_answers_keep_being_refused_is_asked_five_times_then_the_call_ends_with_an_error(url, token):
    from mcp_gateway.wires.sessions.call_streams import MAX_REFUSED_ANSWERS, TOO_MANY_REFUSED

    asked: list[str] = []

    async def callback(ctx, params):
        asked.append(params.message)
        if len(asked) > 2 * MAX_REFUSED_ANSWERS:
            return types.ElicitResult(action="cancel")  # asked without end: give up, and fail below
        return elicit_result_accepting(region="eu-west-1", replicas=20)  # never a valid answer

    result = call(url, token, "plan_deployment", callback)

    assert MAX_REFUSED_ANSWERS == 5
    assert len(asked) == MAX_REFUSED_ANSWERS
    assert result.is_error and result.content[0].text == TOO_MANY_REFUSED


def test_an_answer_the_agent_refuses_is_asked_again_with_the_reason(url, token):
    answers = iter([elicit_result_accepting(nickname="nobody"), elicit_result_accepting(nickname="Ada")])
    asked: list[str] = []

    async def callback(ctx, params):
        asked.append(params.message)
        return next(answers)

    result = call(url, token, "typed_validator", callback)

    assert result.structured_content == {"answer": "Ada"}
    assert len(asked) == 2
    assert "nobody is not a nickname" in asked[1]
    assert asked[1].endswith(asked[0])


def test_a_review_decision_reaches_the_agent(url, token):
    callback = by_message({"send_email": elicit_result_accepting(decision="approve")})

    result = call(url, token, "send_email", callback, EMAIL)

    assert decisions_received() == [{"type": "approve"}]
    assert final_text(result) == "Done: sent to ada@example.com: Launch"


def test_what_the_graph_reports_reaches_a_client_that_asked_for_progress(url, token):
    reported: list[tuple[float, str | None]] = []

    async def on_progress(progress, total, message):
        reported.append((progress, message))

    async def go():
        async with sdk_client(url, token, by_message({}), mode="legacy") as client:
            return await client.call_tool("two_steps", {"value": "2"}, progress_callback=on_progress)

    result = run(go())

    assert not result.is_error, result.content
    assert "Half way there" in [message for _, message in reported]
    assert [progress for progress, _ in reported] == sorted({progress for progress, _ in reported})


# --- the stream, with plain HTTP -------------------------------------------------------------------


def test_a_cut_stream_resumes_with_last_event_id_and_the_call_finishes_once(url, token):
    session = Session(url, token)
    with session.stream_call("choose_region") as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        seen = events(response)
        first_id, first_data, _ = next(seen)
        assert first_data is None  # the first event: an id, no data
        question_id, question, _ = next(seen)
        assert question["method"] == "elicitation/create"
        assert question["id"] == question_id
        assert first_id.split(".")[0] == question_id.split(".")[0]
    # The stream is cut before the answer; it is answered meanwhile, 100 times at once.
    answer = {"jsonrpc": "2.0", "id": question["id"], "result": {"action": "accept", "content": {"response": "x"}}}
    with ThreadPoolExecutor(20) as pool:
        statuses = list(pool.map(lambda _: session.post(answer).status_code, range(100)))
    assert sorted(statuses) == [202] + [400] * 99

    with session.resume(question_id) as resumed:
        assert resumed.status_code == 200
        replayed = [data for _, data, _ in events(resumed) if data is not None]

    assert replayed == [
        {"jsonrpc": "2.0", "id": 1, "result": replayed[0]["result"]},
    ]
    assert replayed[0]["result"]["structuredContent"] == {"region": "x"}
    from mcp_gateway.models import Round

    assert Round.objects.filter(resume__isnull=False).count() == 1


def test_a_resumed_stream_replays_the_questions_not_answered(url, token):
    session = Session(url, token)
    with session.stream_call("choose_region") as response:
        seen = events(response)
        first_id, _, _ = next(seen)
        question_id, question, _ = next(seen)

    with session.resume(first_id) as resumed:
        seen = events(resumed)
        _, primer, _ = next(seen)
        replay_id, replayed, _ = next(seen)
        assert primer is None
        assert (replay_id, replayed) == (question_id, question)
        assert session.post({"jsonrpc": "2.0", "id": question_id, "result": {"action": "decline"}}).status_code == 202
        _, final, _ = next(seen)
    assert final["result"]["content"][0]["text"] == DECLINED


def test_an_idle_stream_carries_comment_lines(url, token):
    session = Session(url, token)
    with session.stream_call("choose_region") as response:
        lines = response.iter_lines()
        comments = []
        for line in lines:
            if line.startswith(":"):
                comments.append(line)
                break
    assert comments == [": ping"]


def test_the_first_event_of_a_stream_tells_the_client_when_to_reconnect(url, token):
    session = Session(url, token)
    with session.stream_call("choose_region") as response:
        head = []
        for line in response.iter_lines():
            if line == "":
                break
            head.append(line)
    assert head[0].startswith("id: ")
    assert "retry: 1000" in head
    assert "data: " in head or "data:" in head


# --- bad input ----------------------------------------------------------------------------------------


def test_a_request_with_an_unknown_session_id_is_not_found(url, token):
    session = Session(url, token)
    session.id = "not-a-session"

    response = session.post({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}})

    assert response.status_code == 404


def test_a_session_ended_with_delete_is_not_found_afterwards(url, token):
    session = Session(url, token)
    assert session.post({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}).status_code == 200

    assert session.http.delete(url, headers=session.headers()).status_code == 204

    assert session.post({"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": {}}).status_code == 404
    assert session.http.delete(url, headers=session.headers()).status_code == 404


def test_another_callers_session_id_is_not_found(url, token, make_token):
    mine = Session(url, token)
    theirs = Session(url, make_token("grace"))
    theirs.id = mine.id

    assert theirs.post({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}).status_code == 404


def test_a_request_without_a_session_id_is_served_without_a_session(url, token):
    session = Session(url, token)
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "choose_region", "arguments": {}}}

    response = session.post(body, session=False)

    assert response.headers["content-type"] == "application/json"
    assert response.json()["result"]["content"][0]["text"].startswith("This tool paused to ask for human input")


def test_a_session_whose_client_declared_no_elicitation_gets_the_error_result(url, token):
    session = Session(url, token, capabilities={})
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "choose_region", "arguments": {}}}

    response = session.post(body)

    assert response.json()["result"]["content"][0]["text"].startswith("This tool paused to ask for human input")


def test_a_get_stream_without_a_session_is_a_bad_request(url, token):
    session = Session(url, token)

    response = session.http.get(url, headers=session.headers(session=False))

    assert response.status_code == 400
    assert response.json()["error"]["message"] == "Bad Request: Mcp-Session-Id header required"


def test_a_sessions_own_stream_tells_each_change_of_its_tasks_status_and_resumes_with_the_status_now(url, token):
    session = Session(url, token)
    task_call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call"}
    task_call["params"] = {"name": "choose_region", "arguments": {}, "task": {}}

    with session.http.stream("GET", url, headers=session.headers()) as stream:
        assert stream.headers["content-type"].startswith("text/event-stream")
        seen = ((i, m) for i, m, _ in events(stream) if i is not None)
        assert next(seen) == ("tasks.0", None)
        task_id = session.post(task_call).json()["result"]["task"]["taskId"]
        told = []
        for event_id, message in seen:
            assert message["method"] == "notifications/tasks/status"
            told.append((event_id, message["params"]["taskId"], message["params"]["status"]))
            if told[-1][2] == "input_required":
                break
        cancel = {"jsonrpc": "2.0", "id": 2, "method": "tasks/cancel", "params": {"taskId": task_id}}
        assert session.post(cancel).status_code == 200
        event_id, message = next(seen)
        told.append((event_id, message["params"]["taskId"], message["params"]["status"]))

    assert [status for _, t, status in told if t == task_id][-2:] == ["input_required", "cancelled"]
    assert [event_id for event_id, _, _ in told] == [f"tasks.{n}" for n in range(1, len(told) + 1)]
    with session.resume(told[-1][0]) as resumed:
        seen = ((i, m) for i, m, _ in events(resumed) if i is not None)
        assert next(seen) == (told[-1][0], None)
        # Every live task of the caller's, this one among them, as it is now.
        again = []
        for event_id, message in seen:
            again.append((event_id, message["params"]["taskId"], message["params"]["status"]))
            if again[-1][1] == task_id:
                break
    assert again[-1][2] == "cancelled"
    assert again[0][0] == f"tasks.{len(told) + 1}"


def test_a_last_event_id_of_another_session_or_caller_is_refused(url, token, make_token):
    mine = Session(url, token)
    with mine.stream_call("choose_region") as response:
        first_id, _, _ = next(events(response))
    same_caller = Session(url, token)
    stranger = Session(url, make_token("grace"))

    for other in (same_caller, stranger):
        with other.resume(first_id) as resumed:
            resumed.read()
            assert resumed.status_code == 400
            assert resumed.json()["error"]["message"] == "Bad Request: Last-Event-ID names no stream of this session"
    with mine.resume("garbage") as resumed:
        resumed.read()
        assert resumed.status_code == 400


def test_answers_to_questions_never_asked_or_asked_in_another_session_are_refused(url, token, make_token):
    mine = Session(url, token)
    with mine.stream_call("choose_region") as response:
        seen = events(response)
        next(seen)
        question_id, _, _ = next(seen)
    answer = {"jsonrpc": "2.0", "id": question_id, "result": {"action": "accept", "content": {"response": "x"}}}
    never_asked = {**answer, "id": f"{question_id.split('.')[0]}.999999"}

    responses = [
        mine.post(never_asked),
        mine.post({**answer, "id": 7}),
        Session(url, token).post(answer),
        Session(url, make_token("grace")).post(answer),
        mine.post({**answer, "result": {"action": "maybe"}}),
    ]

    assert [r.status_code for r in responses] == [400] * 5
    assert responses[0].json()["error"]["code"] == -32602
    # None of those took the question: it still takes its answer.
    assert mine.post(answer).status_code == 202


def test_a_caller_holds_a_limited_number_of_sessions(url, token, make_token):
    opened = [Session(url, token) for _ in range(SESSIONS_PER_CALLER)]
    assert len({s.id for s in opened}) == SESSIONS_PER_CALLER

    refused = opened[0].initialize()

    assert refused.status_code == 429
    assert refused.json()["error"]["data"] == {"limit": SESSIONS_PER_CALLER}
    assert Session(url, make_token("grace")).id  # another caller's count is its own
    assert opened[0].http.delete(url, headers=opened[0].headers()).status_code == 204
    assert opened[0].initialize().status_code == 200


# --- 2025-11-25 tasks ---------------------------------------------------------------------------------

RELATED_TASK = "io.modelcontextprotocol/related-task"


def _tasks_session(url: str, token: str) -> Session:
    return Session(url, token, capabilities={"elicitation": {"form": {}, "url": {}}, "tasks": {}})


def _request(session: Session, method: str, params: dict[str, Any], request_id: int = 5) -> dict[str, Any]:
    response = session.post({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
    assert response.status_code == 200, response.text
    return response.json()


def _create_task(session: Session, tool: str, arguments: dict | None = None) -> dict[str, Any]:
    params = {"name": tool, "arguments": arguments or {}, "task": {"ttl": 60000}}
    return _request(session, "tools/call", params, 1)["result"]["task"]


def _task_get(session: Session, task_id: str) -> dict[str, Any]:
    return _request(session, "tasks/get", {"taskId": task_id})["result"]


def _wait_for(predicate, timeout: float = 60.0):
    from tests.e2e.approvals import wait_until

    return wait_until(predicate, timeout)


def test_initialize_declares_tasks_and_each_tool_says_whether_it_runs_as_one(url, token):
    session = Session(url, token)
    initialize = session.initialize()

    tools = {t["name"]: t for t in _request(session, "tools/list", {})["result"]["tools"]}

    assert initialize.json()["result"]["capabilities"]["tasks"] == {
        "list": {},
        "cancel": {},
        "requests": {"tools": {"call": {}}},
    }
    assert tools["choose_region"]["execution"] == {"taskSupport": "optional"}
    assert tools["slow_task"]["execution"] == {"taskSupport": "required"}
    assert tools["slow_never"]["execution"] == {"taskSupport": "forbidden"}


def test_a_tool_called_against_its_task_support_is_method_not_found(url, token):
    session = Session(url, token)

    as_task = _request(session, "tools/call", {"name": "slow_never", "arguments": {}, "task": {}}, 1)
    not_as_task = _request(session, "tools/call", {"name": "slow_task", "arguments": {}}, 2)

    assert as_task["error"]["code"] == -32601
    assert not_as_task["error"]["code"] == -32601


def test_a_task_asks_its_questions_on_the_tasks_result_stream_and_ends_with_the_result(url, token):
    session = _tasks_session(url, token)
    created = _create_task(session, "choose_region")
    assert created["status"] == "working"
    task_id = created["taskId"]
    _wait_for(lambda: _task_get(session, task_id)["status"] == "input_required")

    body = {"jsonrpc": "2.0", "id": 9, "method": "tasks/result", "params": {"taskId": task_id}}
    statuses = []
    with session.http.stream("POST", url, json=body, headers=session.headers()) as response:
        seen = (data for _, data, _ in events(response) if data is not None)
        for message in seen:
            if message.get("method") == "notifications/tasks/status":
                statuses.append(message["params"]["status"])
                assert message["params"]["taskId"] == task_id
                continue
            question = message
            break
        assert question["method"] == "elicitation/create"
        assert question["params"]["_meta"] == {RELATED_TASK: {"taskId": task_id}}
        answer = {
            "jsonrpc": "2.0",
            "id": question["id"],
            "result": {"action": "accept", "content": {"response": "ap-1"}},
        }
        assert session.post(answer).status_code == 202
        for message in seen:
            if message.get("method") == "notifications/tasks/status":
                statuses.append(message["params"]["status"])
                continue
            final = message

    assert statuses[0] == "input_required"
    assert statuses[-1] == "completed"

    assert final["id"] == 9
    assert final["result"]["structuredContent"] == {"region": "ap-1"}
    assert final["result"]["_meta"] == {RELATED_TASK: {"taskId": task_id}}
    assert _task_get(session, task_id)["status"] == "completed"
    again = _request(session, "tasks/result", {"taskId": task_id})["result"]
    assert again == final["result"]


def test_a_tasks_progress_reaches_its_tasks_result_stream_with_the_calls_progress_token(url, token):
    session = _tasks_session(url, token)
    params = {"name": "two_steps", "arguments": {"value": "2"}, "task": {}, "_meta": {"progressToken": "p-1"}}
    task_id = _request(session, "tools/call", params, 1)["result"]["task"]["taskId"]

    body = {"jsonrpc": "2.0", "id": 9, "method": "tasks/result", "params": {"taskId": task_id}}
    with session.http.stream("POST", url, json=body, headers=session.headers()) as response:
        messages = [data for _, data, _ in events(response) if data is not None]

    progress = [m["params"] for m in messages if m.get("method") == "notifications/progress"]
    assert "Half way there" in [p["message"] for p in progress]
    assert {p["progressToken"] for p in progress} == {"p-1"}
    assert messages[-1]["id"] == 9 and not messages[-1]["result"]["isError"]


def test_a_staff_decision_reaches_a_2025_11_25_task_with_the_agents_answer(url, token):
    from django.db import transaction

    from approvals import services
    from approvals.models import ApprovalRequest, DecidedVia
    from tests.e2e.approvals import HIRE_ME

    session = _tasks_session(url, token)
    task_id = _create_task(session, "digital_twin", {"message": HIRE_ME})["taskId"]
    _wait_for(lambda: _task_get(session, task_id).get("statusMessage") == "Waiting for staff approval")
    assert _task_get(session, task_id)["status"] == "working"

    body = {"jsonrpc": "2.0", "id": 9, "method": "tasks/result", "params": {"taskId": task_id}}
    with session.http.stream("POST", url, json=body, headers=session.headers()) as response:
        seen = events(response)
        next(seen)  # tasks/result blocks: the stream is open, waiting
        approval = ApprovalRequest.objects.get(status=ApprovalRequest.Status.PENDING)
        with transaction.atomic():
            services.approval_decide(approval=approval, approved=True, note=None, via=DecidedVia.API)
        messages = [data for _, data, _ in seen if data is not None]

    finals = [m for m in messages if "id" in m]
    assert [f["id"] for f in finals] == [9]
    assert [m["params"]["status"] for m in messages if "method" in m][-1] == "completed"
    assert finals[0]["result"]["structuredContent"]["answer"].startswith("Your message was recorded")
    assert _task_get(session, task_id)["status"] == "completed"


def test_tasks_cancel_withdraws_a_pending_approval_and_the_task_stays_cancelled(url, token):
    from approvals.models import ApprovalRequest
    from tests.e2e.approvals import HIRE_ME

    session = _tasks_session(url, token)
    task_id = _create_task(session, "digital_twin", {"message": HIRE_ME})["taskId"]
    _wait_for(lambda: _task_get(session, task_id).get("statusMessage") == "Waiting for staff approval")

    cancelled = _request(session, "tasks/cancel", {"taskId": task_id})["result"]

    assert (cancelled["taskId"], cancelled["status"]) == (task_id, "cancelled")
    assert ApprovalRequest.objects.get().status == ApprovalRequest.Status.WITHDRAWN
    assert _task_get(session, task_id)["status"] == "cancelled"
    assert _request(session, "tasks/cancel", {"taskId": task_id})["error"]["code"] == -32602


def test_tasks_list_gives_only_the_callers_own_tasks(url, token, make_token):
    mine = _tasks_session(url, token)
    theirs = _tasks_session(url, make_token("grace"))
    task_id = _create_task(mine, "choose_region")["taskId"]
    _create_task(theirs, "choose_region")

    listed = _request(mine, "tasks/list", {})["result"]

    assert [t["taskId"] for t in listed["tasks"]] == [task_id]
    assert "nextCursor" not in listed
    assert _request(mine, "tasks/list", {"cursor": "not a cursor"})["error"]["code"] == -32602
    assert _request(theirs, "tasks/get", {"taskId": task_id})["error"]["code"] == -32602
    assert _request(theirs, "tasks/result", {"taskId": task_id})["error"]["code"] == -32602


def test_random_responses_and_last_event_ids_in_a_session_never_fail_the_server(url, token):
    from hypothesis import given
    from hypothesis import strategies as st

    from tests.e2e.fuzzing import cases, json_values, printable

    session = Session(url, token)
    with session.stream_call("choose_region") as response:
        seen = events(response)
        first_id, _, _ = next(seen)
        question_id, _, _ = next(seen)
    stream_id = question_id.partition(".")[0]
    ids = st.one_of(
        st.sampled_from([question_id, first_id, f"{stream_id}.0", f"{stream_id}.-1", f"{stream_id}.{2**64}"]),
        printable,
        json_values,
    )
    results = st.one_of(
        st.fixed_dictionaries(
            {"action": st.sampled_from(["accept", "decline", "cancel", "maybe"])},
            optional={"content": st.dictionaries(st.sampled_from(["response", "x"]), json_values, max_size=2)},
        ),
        json_values,
    )

    @cases(150)
    @given(st.data())
    def run(data):
        body: dict[str, Any] = {"jsonrpc": "2.0", "id": data.draw(ids)}
        body["result" if data.draw(st.booleans()) else "error"] = data.draw(results)
        posted = session.post(body)
        assert posted.status_code in (202, 400), posted.text
        if posted.status_code == 400:
            assert posted.json()["error"]["code"] in (-32600, -32602)
        if posted.status_code == 202:
            # Taken: the call went on, so this question takes no second answer.
            assert session.post(body).status_code == 400
        # What an HTTP client can send as a header value: no control characters, nothing to trim.
        header = data.draw(
            (printable | ids.map(str)).filter(lambda v: v.isascii() and v.isprintable() and v == v.strip())
        )
        with session.resume(header) as resumed:
            status = resumed.status_code
            if status == 200:
                next(events(resumed))  # its first event
            else:
                resumed.read()
        assert status in (200, 400), status

    run()


# --- every example tool, through the SDK client ------------------------------------------------------


def _answering_every_example_question(params):
    """The elicitation callback of a person who answers each example tool's question."""
    schema = getattr(params, "requested_schema", None) or {}
    properties = schema.get("properties", {})
    if "send_email" in params.message:
        return elicit_result_accepting(decision="approve")
    if "calendar" in params.message:
        return ACCEPT
    if "Where should the service deploy" in params.message:
        return elicit_result_accepting(region="eu-west-1", replicas=3)
    if "name" in properties:
        return elicit_result_accepting(name="Ada")
    text = {"name": "Ada", "colour": "green", "region": "eu-west-1"}
    word = next(word for word in text if word in params.message)
    return elicit_result_accepting(response=text[word])


def test_every_example_tool_is_answered_through_to_its_final_result(url, token):
    from tests.e2e.approvals import HIRE_ME

    asked: list[str] = []

    async def callback(ctx, params):
        asked.append(params.message)
        return _answering_every_example_question(params)

    async def go():
        async with sdk_client(url, token, callback, mode="legacy") as client:
            assert client.protocol_version == LEGACY
            calls = [
                ("greeter", {}),
                ("choose_region", {}),
                ("plan_deployment", {}),
                ("connect_calendar", {}),
                ("survey", {}),
                ("send_email", EMAIL),
                ("send_email_per_call", EMAIL),
                ("digital_twin", {"message": "What do you know about Django?"}),
                ("digital_twin", {"message": HIRE_ME}),
                ("roll_out", {"version": "1.0"}),
            ]
            return [await client.call_tool(tool, arguments) for tool, arguments in calls]

    greeter, region, plan, calendar, survey, batched, per_call, twin, handed, rolled = run(go())

    assert greeter.structured_content == {"greeting": "Hello, Ada!"}
    assert region.structured_content == {"region": "eu-west-1"}
    assert plan.structured_content == {"region": "eu-west-1", "replicas": 3}
    assert calendar.structured_content == {"status": "connected"}
    assert survey.structured_content == {"name": "Ada", "colour": "green"}
    assert final_text(batched) == final_text(per_call) == "Done: sent to ada@example.com: Launch"
    assert twin.structured_content["answer"].startswith("Here is what I found: ")
    # The owner-contact message asks the client nothing: the call is handed to staff and ends.
    assert handed.structured_content["status"] == "pending", handed.content
    assert rolled.structured_content == {"version": "1.0", "regions": ["us-east-1", "eu-west-1", "ap-southeast-2"]}
    assert len(asked) == 8  # survey asks two questions in its round
