"""What an operator sees (docs/operating.md), end to end: the production web server (uvicorn, /mcp/
without Django's middleware) and a Celery worker, each its own process, configured only by the
environment the docs give: /metrics scraped and parsed with prometheus_client's own parser, spans
exported over OTLP to a receiver in this test, and JSON log lines."""

from __future__ import annotations

import json
import random
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest
from opentelemetry import trace
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags
from prometheus_client.parser import text_string_to_metric_families

from mcp_gateway.models import ToolCall
from tests.clients import Raw, by_message, elicit_result_accepting, meta, run, sdk_client
from tests.e2e.approvals import AdminAPI, pause
from tests.processes import Web, Worker, service_env
from tests.rounds import answer, asked, eventually, input_response_accepting, result_of

METRICS_TOKEN = "metrics-secret"
WITH_TASKS = {"elicitation": {"form": {}, "url": {}}, "extensions": {"io.modelcontextprotocol/tasks": {}}}


class Receiver(ThreadingHTTPServer):
    """An OTLP/HTTP receiver: every span exported to it, decoded with opentelemetry-proto."""

    def __init__(self) -> None:
        self.spans: list[dict[str, Any]] = []
        super().__init__(("127.0.0.1", 0), _Export)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1/traces"

    def of_trace(self, trace_id: str) -> list[dict[str, Any]]:
        return [span for span in list(self.spans) if span["trace_id"] == trace_id]


class _Export(BaseHTTPRequestHandler):
    server: Receiver

    def do_POST(self) -> None:
        request = ExportTraceServiceRequest.FromString(self.rfile.read(int(self.headers["Content-Length"])))
        for resource_spans in request.resource_spans:
            service = _attributes(resource_spans.resource.attributes)["service.name"]
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    self.server.spans.append(
                        {
                            "service": service,
                            "scope": scope_spans.scope.name,
                            "name": span.name,
                            "trace_id": span.trace_id.hex(),
                            "span_id": span.span_id.hex(),
                            "parent": span.parent_span_id.hex(),
                            "start": span.start_time_unix_nano,
                            "attributes": _attributes(span.attributes),
                            "links": [link.span_id.hex() for link in span.links],
                        }
                    )
        body = ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


def _attributes(pairs: Any) -> dict[str, Any]:
    return {kv.key: getattr(kv.value, kv.value.WhichOneof("value")) for kv in pairs}


@pytest.fixture(scope="module")
def operated(django_db_setup, celery_queue, fake_model, tmp_path_factory) -> Iterator[dict[str, Any]]:
    """A web server and a worker of their own, with metrics, traces and JSON logs turned on."""
    receiver = Receiver()
    threading.Thread(target=receiver.serve_forever, daemon=True).start()
    home = tmp_path_factory.mktemp("operating")
    queue = f"{celery_queue}-operating"
    env = service_env(
        queue,
        fake_model,
        METRICS_ENABLED="true",
        METRICS_TOKEN=METRICS_TOKEN,
        METRICS_DIR=str(home / "metrics"),
        HITL_VAR_DIR=str(home),
        LOG_FORMAT="json",
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=receiver.url,
        OTEL_BSP_SCHEDULE_DELAY="100",
    )
    worker = Worker(queue, env, home / "worker.log").start()
    web = Web(env, home / "web.log").start(workers=2)
    yield {"web": web, "worker": worker, "receiver": receiver, "home": home}
    web.stop()
    worker.stop()
    receiver.shutdown()


@pytest.fixture
def mcp(operated, transactional_db) -> Iterator[str]:
    yield f"{operated['web'].url}/mcp/"
    operated["worker"].wait_until_idle()


def greet(mcp: str, token: str) -> str:
    callback = by_message({"name": elicit_result_accepting(name="Ada")})

    async def call() -> str:
        async with sdk_client(mcp, token, callback) as client:
            result = await client.call_tool("greeter", {})
        return result.content[0].text

    return run(call())


def scrape(web: Web) -> dict[tuple[str, tuple], float]:
    response = httpx.get(f"{web.url}/metrics", headers={"Authorization": f"Bearer {METRICS_TOKEN}"})
    assert response.status_code == 200, response.text
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
    }


def test_metrics_count_the_rounds_of_web_and_worker_processes_alike(operated, mcp, make_token):
    web = operated["web"]
    assert httpx.get(f"{web.url}/metrics").status_code == 401
    before = scrape(web)

    assert "Hello, Ada!" in greet(mcp, make_token("ada"))
    raw = Raw(mcp, make_token("bob"))
    asked(raw, "greeter")  # a call left paused
    time.sleep(0.2)
    after = scrape(web)

    def grew(name: str, **labels: str) -> float:
        key = (name, tuple(sorted(labels.items())))
        return after.get(key, 0.0) - before.get(key, 0.0)

    # Counted by the worker process...
    assert grew("hitl_tool_calls_total", tool="greeter", outcome="success") == 1
    assert grew("hitl_rounds_total", tool="greeter", outcome="questions") == 2
    assert grew("hitl_rounds_total", tool="greeter", outcome="success") == 1
    for phase in ("queue", "run"):
        assert grew("hitl_round_seconds_count", tool="greeter", phase=phase) == 3, phase
    # ...and by the web's (two uvicorn workers).
    assert grew("hitl_round_seconds_count", tool="greeter", phase="web") == 3
    assert grew("hitl_round_seconds_count", tool="greeter", phase="back") == 3
    assert grew("hitl_requests_total", method="tools/call", code="200") == 3
    assert grew("hitl_round_seconds_sum", tool="greeter", phase="run") > 0
    # Read from the tables and the broker at the scrape.
    assert after[("hitl_tool_calls", (("status", "paused"),))] == 1
    assert after[("hitl_tool_calls", (("status", "finished"),))] == 1
    assert 0 < after[("hitl_paused_call_age_seconds", ())] < 60
    assert after[("hitl_approvals_pending", ())] == 0
    assert after[("hitl_queue_length", (("queue", f"{operated['worker'].queue}"),))] == 0


def test_every_served_tools_counters_and_every_approval_outcome_are_scraped_at_0_before_their_first_count(
    operated, mcp
):
    # A series that first appears with its first count has no earlier sample: rate() and increase()
    # would miss that count, and an alert on the first failed round after a deploy would not fire.
    scraped = scrape(operated["web"])

    assert scraped[("hitl_rounds_total", (("outcome", "error"), ("tool", "slow")))] == 0
    assert scraped[("hitl_rounds_total", (("outcome", "infrastructure_error"), ("tool", "slow")))] == 0
    assert scraped[("hitl_tool_calls_total", (("outcome", "expired"), ("tool", "slow")))] == 0
    for outcome in ("approved", "rejected", "expired", "withdrawn"):
        assert (("hitl_approvals_total", (("outcome", outcome),))) in scraped, outcome


def test_the_metrics_text_declares_each_name_once_so_promtool_accepts_it(operated, mcp, make_token):
    assert "Hello, Ada!" in greet(mcp, make_token("ada"))
    response = httpx.get(f"{operated['web'].url}/metrics", headers={"Authorization": f"Bearer {METRICS_TOKEN}"})

    # promtool (and Prometheus's own text parser) refuse a second TYPE line for a name. The counter
    # hitl_tool_calls_total and the gauge hitl_tool_calls are two names in this format; in
    # OpenMetrics they would be one family, which is why /metrics serves the Prometheus text format.
    declared = [line.split()[2] for line in response.text.splitlines() if line.startswith("# TYPE ")]
    assert len(declared) == len(set(declared)), sorted(n for n in declared if declared.count(n) > 1)
    assert {"hitl_tool_calls_total", "hitl_tool_calls"} <= set(declared)
    assert response.headers["Content-Type"].startswith("text/plain; version=")  # not OpenMetrics


def test_one_calls_rounds_are_one_trace_from_the_clients_span_through_web_and_worker(operated, mcp, make_token):
    client_span = SpanContext(
        trace_id=random.getrandbits(128), span_id=random.getrandbits(64), is_remote=False, trace_flags=TraceFlags(1)
    )
    trace_id = format(client_span.trace_id, "032x")
    # The mcp SDK client puts the current trace context in each request's `_meta`.
    with trace.use_span(NonRecordingSpan(client_span)):
        assert "Hello, Ada!" in greet(mcp, make_token())

    receiver: Receiver = operated["receiver"]

    def spans_of(service: str, name: str) -> list[dict[str, Any]]:
        found = [s for s in receiver.of_trace(trace_id) if s["service"] == service and s["name"] == name]
        return sorted(found, key=lambda s: s["start"])

    def exported() -> bool:
        return len(spans_of("hitl-worker", "run round greeter")) == len(spans_of("hitl-web", "tools/call greeter")) == 2

    assert eventually(exported, timeout=20)
    requests = spans_of("hitl-web", "tools/call greeter")
    runs = spans_of("hitl-worker", "run round greeter")
    # The first call, then the answer to its round 0 (the round its requestState names).
    assert [s["attributes"]["hitl.round.number"] for s in requests] == [0, 0]
    assert [s["attributes"]["hitl.round.number"] for s in runs] == [0, 1]
    assert all(s["parent"] == format(client_span.span_id, "016x") for s in requests)
    by_id = {s["span_id"]: s for s in receiver.of_trace(trace_id)}

    def web_ancestor(span: dict[str, Any]) -> dict[str, Any]:
        while span["service"] != "hitl-web" or span["name"] != "tools/call greeter":
            span = by_id[span["parent"]]  # through Celery's run and publish spans
        return span

    # Each round's run descends from the request that enqueued it, across the worker's process...
    assert [web_ancestor(run_)["span_id"] for run_ in runs] == [s["span_id"] for s in requests]
    assert {by_id[run_["parent"]]["name"] for run_ in runs} == {"run/mcp_gateway.tasks.run_round"}
    # ...and the second round's spans link to the first round's request.
    assert requests[1]["links"] == [requests[0]["span_id"]]
    assert runs[1]["links"] == [requests[0]["span_id"]]
    # The run's own database work is in it (the psycopg instrumentation).
    assert eventually(lambda: any(s["parent"] == runs[1]["span_id"] for s in receiver.of_trace(trace_id)))


def _spans_of_call(receiver: Receiver, name: str, call_id: str) -> list[dict[str, Any]]:
    """The spans named `name` that are about the call, oldest first."""
    found = [s for s in list(receiver.spans) if (s["name"], s["attributes"].get("hitl.call.id")) == (name, call_id)]
    return sorted(found, key=lambda s: s["start"])


def test_a_clients_call_without_a_trace_of_its_own_is_one_trace_from_its_first_request(operated, mcp, make_token):
    raw = Raw(mcp, make_token())  # sends no traceparent
    round_ = asked(raw, "greeter")
    answered = answer(raw, "greeter", {}, round_, {"user_name": input_response_accepting(name="Ada")})
    assert "Hello, Ada!" in answered.text
    call_id = str(ToolCall.objects.get().id)
    receiver: Receiver = operated["receiver"]

    def of_the_call(name: str) -> list[dict[str, Any]]:
        return _spans_of_call(receiver, name, call_id)

    def exported() -> bool:
        return len(of_the_call("run round greeter")) == len(of_the_call("tools/call greeter")) == 2

    assert eventually(exported, timeout=20)
    first, second = of_the_call("tools/call greeter")
    assert first["parent"] == ""  # the call's trace starts with its first request
    # The answer's request continues it, and so do both rounds' runs in the worker.
    assert (second["trace_id"], second["parent"]) == (first["trace_id"], first["span_id"])
    assert {run_["trace_id"] for run_ in of_the_call("run round greeter")} == {first["trace_id"]}


def test_a_tasks_requests_without_a_trace_of_their_own_are_in_its_calls_trace_and_carry_it_into_the_resume(
    operated, mcp, make_token
):
    raw = Raw(mcp, make_token())  # sends no traceparent
    task_id = result_of(raw.call("choose_region_task", {}, capabilities=WITH_TASKS))["taskId"]

    def about_the_task(method: str, **params: Any) -> dict[str, Any]:
        body = {"taskId": task_id, "_meta": meta(WITH_TASKS), **params}
        return result_of(raw.request(method, body, **{"Mcp-Name": task_id}))

    assert eventually(lambda: about_the_task("tasks/get")["status"] == "input_required", timeout=20)
    (key,) = about_the_task("tasks/get")["inputRequests"]
    about_the_task("tasks/update", inputResponses={key: input_response_accepting(response="eu")})
    assert eventually(lambda: about_the_task("tasks/get")["status"] == "completed", timeout=20)
    # A listen stream on the ended task: its notification, then its end.
    listened = raw.request("subscriptions/listen", {"notifications": {"taskIds": [task_id]}, "_meta": meta(WITH_TASKS)})
    assert listened.status_code == 200
    call_id = str(ToolCall.objects.get().id)
    receiver: Receiver = operated["receiver"]

    def of_the_call(name: str) -> list[dict[str, Any]]:
        return _spans_of_call(receiver, name, call_id)

    def exported() -> bool:
        return len(of_the_call("run round choose_region_task")) == 2 and len(of_the_call("subscriptions/listen")) == 1

    assert eventually(exported, timeout=20)
    [first] = of_the_call("tools/call choose_region_task")
    assert first["parent"] == ""  # the call's trace starts with its first request
    about_it = [*of_the_call("tasks/get"), *of_the_call("tasks/update"), *of_the_call("subscriptions/listen")]
    assert len(about_it) >= 5
    # Each request about the task is a child of the call's first request, and links to it.
    for span in about_it:
        assert (span["trace_id"], span["parent"], span["links"]) == (
            first["trace_id"],
            first["span_id"],
            [first["span_id"]],
        )
    # The resume that tasks/update enqueued runs in the worker as the update's descendant.
    [update] = of_the_call("tasks/update")
    by_id = {s["span_id"]: s for s in receiver.of_trace(first["trace_id"])}
    run_0, run_1 = of_the_call("run round choose_region_task")
    ancestor = by_id[run_1["parent"]]
    while ancestor["service"] != "hitl-web" or ancestor["scope"] != "mcp_gateway":
        ancestor = by_id[ancestor["parent"]]  # through Celery's run and publish spans
    assert ancestor["span_id"] == update["span_id"]
    assert run_1["links"] == [first["span_id"]] and run_0["trace_id"] == first["trace_id"]


def test_a_staff_decision_is_a_django_span_whose_child_is_the_resume_in_the_worker_linked_to_the_calls_start(
    operated, mcp, make_token
):
    from django.contrib.auth import get_user_model
    from knox.models import AuthToken

    from approvals.models import ApprovalRequest

    pause(mcp, make_token())  # sends no traceparent
    staff = get_user_model().objects.create_superuser("grace", password="pw")
    approval = ApprovalRequest.objects.get()
    call_id = str(approval.call_id)
    decided = AdminAPI(operated["web"].url, AuthToken.objects.create(staff)[1]).decide(str(approval.pk), approved=True)
    assert decided.status_code == 200, decided.text
    receiver: Receiver = operated["receiver"]

    def of_the_call(name: str) -> list[dict[str, Any]]:
        return [s for s in list(receiver.spans) if (s["name"], s["attributes"].get("hitl.call.id")) == (name, call_id)]

    def decision_span() -> dict[str, Any] | None:
        """The span the resume's worker span descends from, once both are exported."""
        resumes = of_the_call("run/approvals.tasks.resume_approval")
        if not resumes:
            return None
        by_id = {s["span_id"]: s for s in receiver.of_trace(resumes[-1]["trace_id"])}
        span = resumes[-1]
        while span["parent"] in by_id:  # through Celery's publish span in the web
            span = by_id[span["parent"]]
        return span if span["service"] == "hitl-web" and span["parent"] == "" else None

    assert eventually(lambda: (decision_span() or {}).get("scope") == "opentelemetry.instrumentation.django", 20)
    assert decision_span()["name"] == "POST api/admin/approvals/<str:ref>"  # type: ignore[index]
    # The decision is a trace of its own, and the resume in it links to where the call began.
    [first] = of_the_call("tools/call digital_twin")
    [resume] = of_the_call("run/approvals.tasks.resume_approval")
    assert first["trace_id"] != resume["trace_id"]
    assert resume["links"] == [first["span_id"]]


def test_json_log_lines_about_a_call_name_its_id_round_tool_and_caller(operated, mcp, make_token):
    token = make_token("ada")
    raw = Raw(mcp, token)
    round_ = asked(raw, "greeter")
    call = ToolCall.objects.get()
    # An answer the form refuses: the web logs the 400 while it handles the call.
    refused = raw.call(
        "greeter", {}, inputResponses={"user_name": {"action": "accept"}}, requestState=round_["requestState"]
    )
    assert refused.status_code == 400
    caller = f"user:{call.caller.split(':')[1]}"

    def lines(process: str) -> list[dict[str, Any]]:
        text = (operated["home"] / f"{process}.log").read_text(errors="replace")
        return [json.loads(line) for line in text.splitlines() if line.startswith("{")]

    def about_the_call(process: str) -> list[dict[str, Any]]:
        return [line for line in lines(process) if line.get("call_id") == str(call.id)]

    def line_of(process: str, says: Callable[[str], bool]) -> dict[str, Any] | None:
        return next((line for line in about_the_call(process) if says(line["message"])), None)

    def refused_line() -> dict[str, Any] | None:
        return line_of("web", lambda message: message == "Bad Request: /mcp/")

    def succeeded_line() -> dict[str, Any] | None:
        return line_of("worker", lambda message: "succeeded" in message)

    # Each process writes its line when it gets there: the worker's task may end after the 400.
    assert eventually(lambda: refused_line() is not None and succeeded_line() is not None)
    web_line, worker_line = refused_line(), succeeded_line()
    assert web_line is not None and worker_line is not None
    assert (web_line["level"], web_line["round"], web_line["tool"], web_line["caller"]) == (
        "WARNING",
        0,
        "greeter",
        caller,
    )
    assert (worker_line["round"], worker_line["tool"], worker_line["caller"], worker_line["graph"]) == (
        0,
        "greeter",
        caller,
        "greeter",
    )
