"""The tamper-evident audit: every state change of an approval appends an event to one chain;
each event's hash covers the previous hash and the event's canonical JSON (RFC 8785); concurrent
writers never fork it; `manage.py verify_audit` recomputes it and names the first broken link;
and the chain is exported as JSON Lines, streamed and filtered by date, from the admin and the
REST API."""

from __future__ import annotations

import hashlib
import json
import threading
from datetime import UTC, datetime, timedelta

import pytest
import rfc8785
import time_machine
from asgiref.sync import async_to_sync
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.core.management import CommandError, call_command
from django.db import connection, connections
from django.urls import reverse
from django.utils import timezone
from knox.models import AuthToken

from approvals.models import AuditEvent
from tests.inprocess.driver import (
    WITH_TASKS,
    audit_event,
    call,
    call_of_task,
    cancel_task,
    decide,
    escalate_approvals,
    expire_approvals,
    run_resumes,
)
from tests.staff_approvals import HIRE_ME

GENESIS = "0" * 64


def kinds(approval_id) -> list[str]:
    return list(AuditEvent.objects.filter(approval_id=approval_id).values_list("kind", flat=True))


def verify_audit(*args: str) -> str:
    out = []

    class Out:
        def write(self, text):
            out.append(text)

    call_command("verify_audit", *args, stdout=Out())
    return "".join(out)


def head_now() -> str:
    """The chain's head as it would be published, `<seq>:<hash>`."""
    last = AuditEvent.objects.order_by("-seq").first()
    return f"{last.seq}:{last.hash}"


def cut_the_tail_with_sql(keep: int) -> None:
    """What a writer of SQL does to hide the last events: delete them and move the head row back."""
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM approvals_auditevent WHERE seq > %s", [keep])
        cursor.execute(
            "UPDATE approvals_audithead SET seq = %s, hash = (SELECT hash FROM approvals_auditevent WHERE seq = %s)",
            [keep, keep],
        )


def staff(username: str, *permissions: str):
    account = get_user_model().objects.create_user(username, is_staff=True)
    account.user_permissions.set(
        Permission.objects.filter(content_type__app_label="approvals", codename__in=permissions)
    )
    return account


# --- what is recorded --------------------------------------------------------------------------


def test_a_decided_approval_records_its_request_decision_resume_and_end(paused_approval, admin_user):
    decide(paused_approval, approved=True, note="Fine.", by=admin_user, door="admin")
    run_resumes()

    assert kinds(paused_approval.pk) == ["requested", "decided", "resumed", "finished"]
    decided = AuditEvent.objects.get(approval_id=paused_approval.pk, kind="decided")
    assert (decided.actor, decided.data["via"], decided.data["status"], decided.data["note"]) == (
        admin_user.username,
        "admin",
        "approved",
        "Fine.",
    )


def test_an_approval_nobody_decided_records_its_expiry(paused_approval):
    with time_machine.travel(timezone.now() + timedelta(days=7, minutes=1)):
        expire_approvals()

    assert kinds(paused_approval.pk) == ["requested", "expired"]


def test_an_approval_pending_too_long_records_its_escalation(paused_approval, settings):
    settings.APPROVAL_ESCALATE_AFTER = timedelta(hours=1)

    with time_machine.travel(timezone.now() + timedelta(hours=2)):
        escalate_approvals()

    assert kinds(paused_approval.pk) == ["requested", "escalated"]


def test_an_approval_its_client_withdrew_records_the_withdrawal(model_in_this_process):
    created = call("digital_twin", {"message": HIRE_ME}, capabilities=WITH_TASKS)
    approval = call_of_task(created["taskId"]).approvals.get()

    cancel_task(created["taskId"])

    assert kinds(approval.pk) == ["requested", "withdrawn"]


# --- the chain -----------------------------------------------------------------------------------


def test_each_events_hash_covers_the_previous_hash_and_the_events_canonical_json(paused_approval):
    decide(paused_approval, approved=False, note="No.")

    events = list(AuditEvent.objects.order_by("seq"))
    previous = GENESIS
    for event in events:
        body = {
            "seq": event.seq,
            "at": event.at.astimezone(UTC).isoformat(),
            "kind": event.kind,
            "approval": str(event.approval_id),
            "actor": event.actor,
            "data": event.data,
        }
        assert event.prev_hash == previous
        assert event.hash == hashlib.sha256(previous.encode() + b"\n" + rfc8785.dumps(body)).hexdigest()
        previous = event.hash
    assert [event.kind for event in events] == ["requested", "decided"]


def test_verify_audit_says_the_chain_holds_when_nobody_touched_it(paused_approval):
    decide(paused_approval, approved=True)

    assert verify_audit() == "The audit chain holds: 2 events.\n"


def test_verify_audit_names_the_first_broken_link_after_a_row_is_changed_with_sql(paused_approval):
    decide(paused_approval, approved=True)
    audit_event("decided", approval=paused_approval, actor="mallory", status="rejected")
    with connection.cursor() as cursor:
        cursor.execute("UPDATE approvals_auditevent SET actor = %s WHERE seq = 2", ["someone else"])

    with pytest.raises(CommandError, match=r"breaks at event #2: its content \(decided\) does not match its hash"):
        verify_audit()


def test_verify_audit_names_a_deleted_event(paused_approval):
    decide(paused_approval, approved=True)
    audit_event("decided", approval=paused_approval)
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM approvals_auditevent WHERE seq = 2")

    with pytest.raises(CommandError, match=r"breaks at event #2: it is missing \(the next event is #3\)"):
        verify_audit()


def test_verify_audit_sees_events_deleted_from_the_end(paused_approval):
    decide(paused_approval, approved=True)
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM approvals_auditevent WHERE seq = 2")

    with pytest.raises(CommandError, match=r"breaks at event #2: the chain's head says 2 events"):
        verify_audit()


def test_a_tail_cut_with_sql_passes_verify_audit_alone_but_not_against_a_head_recorded_elsewhere(paused_approval):
    decide(paused_approval, approved=True)
    earlier = head_now()  # as published when event #2 was appended
    cut_the_tail_with_sql(keep=1)

    assert verify_audit() == "The audit chain holds: 1 events.\n"
    with pytest.raises(CommandError) as refused:
        verify_audit("--expect-head", earlier)
    assert str(refused.value) == (
        f"The audit chain breaks at event #2: the chain ends at event #1, short of the head recorded elsewhere, "
        f"#2 ({earlier.split(':')[1][:16]}…): its tail was cut (and its head row moved back). (the 1 before it hold.)"
    )


def test_an_unchanged_chain_passes_verify_audit_against_a_head_recorded_earlier(paused_approval):
    decide(paused_approval, approved=True)
    earlier = head_now()
    audit_event("decided", approval=paused_approval, actor="grace", status="approved")  # the chain grows on

    assert verify_audit("--expect-head", earlier) == (
        f"The audit chain holds: 3 events, up to the head recorded elsewhere, #2 ({earlier.split(':')[1][:16]}…).\n"
    )


def test_a_rewritten_chain_fails_verify_audit_against_the_head_recorded_elsewhere(paused_approval):
    decide(paused_approval, approved=True)
    seq, recorded = head_now().split(":")
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM approvals_auditevent WHERE seq = 2")
        cursor.execute(
            "UPDATE approvals_audithead SET seq = 1, hash = (SELECT hash FROM approvals_auditevent WHERE seq = 1)"
        )
    # Appended again, consistently hashed: the links hold, but #2 is not the event that was published.
    audit_event("decided", approval=paused_approval, actor="mallory", status="rejected")

    with pytest.raises(CommandError, match=r"breaks at event #2: its hash is not that of the head recorded elsewhere"):
        verify_audit("--expect-head", f"{seq}:{recorded}")


def test_verify_audit_checks_the_chain_against_the_last_event_of_an_earlier_export(paused_approval, tmp_path):
    decide(paused_approval, approved=True)
    export = tmp_path / "approvals-audit.jsonl"
    export.write_text("".join(async_to_sync(_collect)()))
    cut_the_tail_with_sql(keep=1)

    with pytest.raises(CommandError, match=r"the chain ends at event #1, short of the head recorded elsewhere, #2"):
        verify_audit("--expect-head-from", str(export))


async def _collect() -> list[str]:
    from approvals import audit

    return [lines async for lines in audit.export_lines(None, None)]


@pytest.mark.parametrize("given", ["2", "2:nothex", f"0:{'a' * 64}", "two:" + "a" * 64])
def test_verify_audit_refuses_an_expected_head_that_is_not_one(paused_approval, given):
    with pytest.raises(CommandError, match=r"No head to check against: .* is not a head: give <seq>:<hash>"):
        verify_audit("--expect-head", given)


@pytest.mark.django_db(transaction=True)
def test_each_new_head_is_published_outside_the_database_as_a_log_line_and_a_gauge(paused_approval, caplog):
    from prometheus_client import REGISTRY

    caplog.set_level("INFO", logger="approvals.audit.head")
    decide(paused_approval, approved=True)

    published = [
        json.loads(r.getMessage().removeprefix("audit head "))
        for r in caplog.records
        if r.name == "approvals.audit.head"
    ]
    assert published[-1] == {"seq": int(head_now().split(":")[0]), "hash": head_now().split(":")[1]}
    assert REGISTRY.get_sample_value("hitl_audit_head_seq") == published[-1]["seq"]


@pytest.mark.django_db(transaction=True)
def test_concurrent_writers_never_fork_the_chain():
    writers, events_each = 8, 5
    start = threading.Barrier(writers)
    failures: list[BaseException] = []

    def write() -> None:
        try:
            start.wait()
            for _ in range(events_each):
                audit_event("escalated", note=threading.current_thread().name)
        except BaseException as exc:  # reported below, in the test's thread
            failures.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=write) for _ in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert failures == []
    assert list(AuditEvent.objects.values_list("seq", flat=True)) == list(range(1, writers * events_each + 1))
    assert verify_audit() == f"The audit chain holds: {writers * events_each} events.\n"


# --- the export ----------------------------------------------------------------------------------


@pytest.fixture
def three_days_of_events(db):
    for day in (1, 2, 3):
        with time_machine.travel(datetime(2026, 11, day, 12, tzinfo=UTC), tick=False):
            audit_event("escalated", day=day)


def lines(response) -> list[dict]:
    """The streamed JSON Lines, read as the ASGI server reads them (the export is an async stream)."""

    async def read() -> bytes:
        return b"".join([chunk async for chunk in response.streaming_content])

    return [json.loads(line) for line in async_to_sync(read)().decode().splitlines()]


def test_the_api_exports_the_chain_as_json_lines_streamed_and_filtered_by_date(three_days_of_events, client):
    token = AuthToken.objects.create(staff("auditor", "view_auditevent"))[1]

    response = client.get(
        "/api/admin/audit", {"since": "2026-11-02", "until": "2026-11-03"}, HTTP_AUTHORIZATION=f"Bearer {token}"
    )

    assert response.status_code == 200 and response.streaming
    assert response["Content-Type"] == "application/jsonl"
    exported = lines(response)
    assert [event["data"]["day"] for event in exported] == [2, 3]
    first = AuditEvent.objects.get(seq=2)
    assert exported[0] == {
        "seq": 2,
        "at": "2026-11-02T12:00:00+00:00",
        "kind": "escalated",
        "approval": None,
        "actor": "",
        "data": {"day": 2},
        "prev_hash": first.prev_hash,
        "hash": first.hash,
    }


def test_the_api_export_needs_the_view_permission_on_audit_events(three_days_of_events, client):
    token = AuthToken.objects.create(staff("approver", "view_approvalrequest", "decide_approval"))[1]

    response = client.get("/api/admin/audit", HTTP_AUTHORIZATION=f"Bearer {token}")

    assert response.status_code == 403 and "approvals.view_auditevent" in response.json()["detail"]


def test_the_api_export_refuses_a_date_that_is_not_one_with_400(three_days_of_events, client):
    token = AuthToken.objects.create(staff("auditor", "view_auditevent"))[1]

    response = client.get("/api/admin/audit", {"since": "last tuesday"}, HTTP_AUTHORIZATION=f"Bearer {token}")

    assert response.status_code == 400
    assert "'last tuesday' is not a date" in json.dumps(response.json())


def test_the_admin_exports_the_chain_as_json_lines_filtered_by_date(three_days_of_events, admin_client):
    listed = admin_client.get(reverse("admin:approvals_auditevent_changelist")).content.decode()

    response = admin_client.get(reverse("admin:approvals_auditevent_export"), {"since": "2026-11-02"})

    assert 'id="audit-export"' in listed
    assert response.status_code == 200 and response.streaming
    assert [event["data"]["day"] for event in lines(response)] == [2, 3]


def test_the_decision_page_shows_the_approvals_audit_trail(paused_approval, admin_client):
    decide(paused_approval, approved=False)

    page = admin_client.get(reverse("admin:approvals_approvalrequest_change", args=[paused_approval.pk]))

    html = page.content.decode()
    assert 'id="audit-trail"' in html
    assert f"<code>{paused_approval.digest}</code>" in html and "<td>decided</td>" in html
