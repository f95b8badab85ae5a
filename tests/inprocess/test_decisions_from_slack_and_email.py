"""Staff decide where they already are: from the Approve and Reject buttons of the Slack message
(Slack signs each press; its user must be linked to a member of staff who may decide), and from an
e-mail's signed, single-use, expiring links, which open a confirmation page whose POST decides.
The same rules hold as in the admin, each refusal says why, and nothing is decided twice. Slack is
faked: the tests sign its requests with a test secret, and its response_url is a local server."""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import threading
import time
from datetime import timedelta
from functools import partial
from typing import Any
from urllib.parse import urlencode

import pytest
import time_machine
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, Permission
from django.contrib.messages import get_messages
from django.core import mail
from django.db import connections
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from django_otp.oath import TOTP
from django_otp.plugins.otp_totp.models import TOTPDevice

from approvals.models import ApprovalPolicy, ApprovalRequest, Outcome, PolicyApproverGroup, StaffIdentity
from approvals.notifications import webhook_body
from tests.inprocess.driver import (
    caller,
    committing,
    email_link,
    paused_for_staff,
    resumes_enqueued,
    run_resumes,
    send_slack_responses,
    slack_responses,
)
from tests.staff_approvals import HIRE_ME

SECRET = "slack-test-signing-secret"
SLACK_URL = "/slack/interactions"
RESPONSE_URL = "https://hooks.slack.com/actions/T0/1/response"

# The rule must be committed for the graph's thread to read it, and the race needs real commits.
pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def slack_app(settings):
    settings.SLACK_SIGNING_SECRET = SECRET
    settings.SITE_URL = "https://hitl.example.com"


def staff(username: str, *, may_decide: bool = True, slack_id: str | None = None):
    user = get_user_model().objects.create_user(username, password="pw", is_staff=True, email=f"{username}@example.com")
    codenames = ["view_approvalrequest", "decide_approval"] if may_decide else ["view_approvalrequest"]
    user.user_permissions.set(Permission.objects.filter(codename__in=codenames))
    if slack_id:
        StaffIdentity.objects.create(user=user, slack_user_id=slack_id)
    return user


def paused() -> ApprovalRequest:
    # Called by an agent that is no user: whoever decides here is never deciding their own call.
    return paused_for_staff("digital_twin", {"message": HIRE_ME}, by=caller("agent:tests"))


def press(approval: ApprovalRequest, *, slack_user: str, approve: bool = True, **kw: Any):
    """A press of the message's Approve (or Reject) button by `slack_user`, as Slack posts it."""
    payload = {
        "type": "block_actions",
        "user": {"id": slack_user, "username": slack_user.lower(), "team_id": "T0"},
        "response_url": RESPONSE_URL,
        "trigger_id": f"{time.monotonic_ns()}.trigger",  # a fresh press: a body (and signature) of its own
        "actions": [
            {
                "type": "button",
                "action_id": "hitl_approve" if approve else "hitl_reject",
                "value": str(approval.pk),
                "action_ts": f"{time.time():.6f}",
            }
        ],
    }
    return slack_post(urlencode({"payload": json.dumps(payload)}).encode(), **kw)


def slack_post(body: bytes, *, secret: str = SECRET, timestamp: int | None = None, client: Client | None = None):
    stamp = str(int(time.time()) if timestamp is None else timestamp)
    signature = "v0=" + hmac.new(secret.encode(), f"v0:{stamp}:".encode() + body, hashlib.sha256).hexdigest()
    return (client or Client()).post(
        SLACK_URL,
        data=body,
        content_type="application/x-www-form-urlencoded",
        headers={"X-Slack-Request-Timestamp": stamp, "X-Slack-Signature": signature},
    )


def last_slack_message() -> dict[str, Any]:
    url, message = slack_responses()[-1]
    assert url == RESPONSE_URL
    return message


def assert_undecided(approval: ApprovalRequest) -> None:
    approval.refresh_from_db()
    assert (approval.status, approval.decided_at) == ("pending", None)
    assert resumes_enqueued() == []


def links_in(email) -> dict[str, str]:
    return dict(re.findall(r"^(Approve|Reject): (\S+)$", email.body, re.MULTILINE))


def path_of(link: str) -> str:
    return link.removeprefix("https://hitl.example.com")


def logged_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


# --- Slack ---------------------------------------------------------------------------------------


def test_the_webhook_message_carries_approve_and_reject_buttons_with_the_approval_id():
    approval = paused()

    blocks = webhook_body(approval, escalated=False)["blocks"]

    (actions,) = [block for block in blocks if block["type"] == "actions"]
    buttons = [(b["text"]["text"], b["action_id"], b["value"]) for b in actions["elements"]]
    assert buttons == [("Approve", "hitl_approve", str(approval.pk)), ("Reject", "hitl_reject", str(approval.pk))]


def test_without_a_signing_secret_the_message_has_no_buttons_and_slack_requests_are_refused(settings):
    settings.SLACK_SIGNING_SECRET = ""
    staff("ada", slack_id="U0ADA")
    approval = paused()

    assert "blocks" not in webhook_body(approval, escalated=False)
    response = press(approval, slack_user="U0ADA", secret="")
    assert response.status_code == 403
    assert "SLACK_SIGNING_SECRET is empty" in response.content.decode()
    assert_undecided(approval)


def test_a_signed_approve_from_a_mapped_user_decides_once_and_resumes_the_call_once():
    ada = staff("ada", slack_id="U0ADA")
    approval = paused()

    assert press(approval, slack_user="U0ADA").status_code == 200
    again = press(approval, slack_user="U0ADA")

    approval.refresh_from_db()
    assert (approval.status, approval.decided_via, approval.decided_by) == ("approved", "slack", ada)
    assert approval.decider == "ada (in Slack)"
    assert approval.approved_digest == approval.digest  # bound to the action as requested
    assert again.status_code == 200
    assert last_slack_message() == {
        "response_type": "ephemeral",
        "replace_original": False,
        "text": "This approval was already approved.",
    }
    assert run_resumes() == [str(approval.pk)]
    assert run_resumes() == []
    approval.refresh_from_db()
    assert approval.answered_at is not None


def test_the_slack_message_is_replaced_with_the_outcome_and_who_decided_through_its_response_url(settings, receiver):
    staff("ada", slack_id="U0ADA")
    approval = paused()
    receiver.status = 200
    # The local server stands in for Slack's origin.
    settings.SLACK_RESPONSE_ORIGINS = [f"http://127.0.0.1:{receiver.server_port}"]
    payload = {
        "type": "block_actions",
        "user": {"id": "U0ADA"},
        "response_url": f"http://127.0.0.1:{receiver.server_port}/actions/1",
        "actions": [{"action_id": "hitl_reject", "value": str(approval.pk)}],
    }
    assert slack_post(urlencode({"payload": json.dumps(payload)}).encode()).status_code == 200
    send_slack_responses()
    received = [json.loads(body) for _, body in receiver.received]

    (message,) = received
    assert message["replace_original"] is True
    assert message["text"] == "Approval needed: draft_contact_message. Rejected by ada (in Slack)."
    assert not [block for block in message["blocks"] if block["type"] == "actions"]  # no buttons left


@pytest.mark.parametrize(
    "response_url",
    [
        "http://127.0.0.1:{port}/actions/1",
        "http://hooks.slack.com/actions/1",
        "https://hooks.slack.com.example.net/actions/1",
        "https://hooks.slack.com@127.0.0.1:{port}/actions/1",
        "https://hooks.slack.com:{port}/actions/1",
    ],
    ids=["internal", "plain-http", "look-alike-host", "user-info", "another-port"],
)
def test_a_signed_slack_payload_with_a_foreign_response_url_posts_nowhere(response_url, receiver):
    staff("ada", slack_id="U0ADA")
    approval = paused()
    receiver.status = 200
    payload = {
        "type": "block_actions",
        "user": {"id": "U0ADA"},
        "response_url": response_url.format(port=receiver.server_port),
        "actions": [{"action_id": "hitl_reject", "value": str(approval.pk)}],
    }
    assert slack_post(urlencode({"payload": json.dumps(payload)}).encode()).status_code == 200
    queued = slack_responses()
    send_slack_responses()
    received = receiver.received

    assert queued == [] and received == []
    approval.refresh_from_db()
    assert approval.status == "rejected"  # the press itself was Slack's, signed: it decided


def test_a_forged_slack_signature_is_refused_and_nothing_is_decided():
    staff("ada", slack_id="U0ADA")
    approval = paused()

    response = press(approval, slack_user="U0ADA", secret="not-the-signing-secret")

    assert response.status_code == 401
    assert response.content.decode() == "The request's signature does not match Slack's signing secret."
    assert_undecided(approval)
    assert slack_responses() == []


def test_a_slack_request_with_a_stale_timestamp_is_refused_and_nothing_is_decided():
    staff("ada", slack_id="U0ADA")
    approval = paused()

    response = press(approval, slack_user="U0ADA", timestamp=int(time.time()) - 6 * 60)

    assert response.status_code == 401
    assert "more than five minutes from now" in response.content.decode()
    assert_undecided(approval)


def test_a_replayed_slack_interaction_is_refused_and_nothing_is_decided():
    approval = paused()
    body = urlencode(
        {
            "payload": json.dumps(
                {
                    "type": "block_actions",
                    "user": {"id": "U0ADA"},
                    "actions": [{"action_id": "hitl_approve", "value": str(approval.pk)}],
                }
            )
        }
    ).encode()
    stamp = int(time.time())
    assert slack_post(body, timestamp=stamp).status_code == 200  # ada is not linked yet: refused
    staff("ada", slack_id="U0ADA")

    replayed = slack_post(body, timestamp=stamp)

    assert replayed.status_code == 409
    assert replayed.content.decode() == "This interaction was received already: a replayed request is refused."
    assert_undecided(approval)


@pytest.mark.parametrize(
    "body",
    [
        b"payload=not-json",
        b"payload=%5B%5D",  # a JSON list
        b"nothing=here",
        urlencode({"payload": json.dumps({"type": "view_submission", "user": {"id": "U0ADA"}})}).encode(),
        urlencode({"payload": json.dumps({"type": "block_actions", "user": "U0ADA", "actions": ["x"]})}).encode(),
        urlencode(
            {"payload": json.dumps({"type": "block_actions", "actions": [{"action_id": "hitl_approve", "value": "1"}]})}
        ).encode(),
    ],
)
def test_a_signed_request_that_is_not_a_press_of_our_buttons_decides_nothing_and_says_so(body):
    staff("ada", slack_id="U0ADA")
    approval = paused()

    response = slack_post(body)

    assert response.status_code in (200, 400)
    if response.status_code == 400:
        assert "no interaction payload" in response.content.decode()
    assert_undecided(approval)


def test_a_slack_request_without_a_readable_timestamp_is_refused():
    response = Client().post(
        SLACK_URL,
        data=b"payload=%7B%7D",
        content_type="application/x-www-form-urlencoded",
        headers={"X-Slack-Request-Timestamp": "\u00b2", "X-Slack-Signature": "v0=00"},
    )

    assert response.status_code == 401
    assert "X-Slack-Request-Timestamp and X-Slack-Signature are required" in response.content.decode()


def test_an_unmapped_slack_user_is_refused_with_a_message_saying_why():
    staff("ada", slack_id="U0ADA")
    approval = paused()

    assert press(approval, slack_user="U0STRANGER").status_code == 200

    assert last_slack_message()["response_type"] == "ephemeral"
    assert last_slack_message()["text"] == (
        "Nothing was decided: your Slack account (U0STRANGER) is not linked to a member of staff. "
        "An administrator links it in the admin, under Staff identities."
    )
    assert_undecided(approval)


def test_a_slack_user_linked_to_staff_without_the_permission_to_decide_is_refused():
    staff("linus", may_decide=False, slack_id="U0LINUS")
    approval = paused()

    press(approval, slack_user="U0LINUS")

    assert last_slack_message()["text"] == (
        "Nothing was decided: linus, whom your Slack account is linked to, may not decide approvals "
        "(an active staff account with the permission approvals.decide_approval may)."
    )
    assert_undecided(approval)


def test_slack_keeps_the_approver_group_as_the_admin_does():
    finance = Group.objects.create(name="Finance")
    policy = ApprovalPolicy.objects.create(
        name="Messages to the owner", tool_pattern="draft_contact_message", outcome=Outcome.APPROVE
    )
    PolicyApproverGroup.objects.create(policy=policy, group=finance, position=1)
    staff("ada", slack_id="U0ADA")
    approval = paused()

    press(approval, slack_user="U0ADA")

    assert last_slack_message()["text"] == (
        "Nothing was decided: Only members of the group “Finance” may decide this approval. You are not one."
    )
    assert_undecided(approval)


def test_slack_keeps_m_of_n_the_first_approval_keeps_the_buttons_and_nobody_approves_twice():
    ApprovalPolicy.objects.create(
        name="Messages to the owner",
        tool_pattern="draft_contact_message",
        outcome=Outcome.APPROVE,
        approvals_required=2,
    )
    staff("ada", slack_id="U0ADA")
    grace = staff("grace", slack_id="U0GRACE")
    approval = paused()

    press(approval, slack_user="U0ADA")
    first = last_slack_message()
    press(approval, slack_user="U0ADA")
    twice = last_slack_message()
    press(approval, slack_user="U0GRACE")

    assert first["text"].endswith("Approved 1 of 2 by ada (in Slack): another member of staff must approve.")
    assert [block for block in first["blocks"] if block["type"] == "actions"]  # the buttons stay
    assert twice["text"] == (
        "Nothing was decided: You approved this already: another member of staff must give the second approval."
    )
    approval.refresh_from_db()
    assert (approval.status, approval.decided_by, approval.approvals_given) == ("approved", grace, 2)
    assert resumes_enqueued() == [str(approval.pk)]


def test_approving_from_slack_a_call_whose_policy_changed_answers_with_a_link_to_the_decision_page():
    policy = ApprovalPolicy.objects.create(
        name="Messages to the owner", tool_pattern="draft_contact_message", outcome=Outcome.APPROVE
    )
    staff("ada", slack_id="U0ADA")
    approval = paused()
    policy.save()  # edited while the call waits: version 2

    press(approval, slack_user="U0ADA")

    message = last_slack_message()
    assert message["response_type"] == "ephemeral"
    assert "changed since this call was requested (version 1, now 2)" in message["text"]
    page = f"https://hitl.example.com/admin/approvals/approvalrequest/{approval.pk}/change/"
    assert message["text"].endswith(f"Decide on the decision page: {page}")
    assert_undecided(approval)


# --- e-mail --------------------------------------------------------------------------------------


def test_the_email_carries_approve_and_reject_links_that_open_a_confirmation_page_and_decide_nothing():
    ada = staff("ada")
    approval = paused()
    (email,) = mail.outbox
    links = links_in(email)
    assert set(links) == {"Approve", "Reject"}

    page = logged_in(ada).get(path_of(links["Approve"]))

    assert page.status_code == 200
    assert 'id="email-decision"' in page.content.decode()
    assert '<input type="submit" class="default" value="Approve">' in page.content.decode()
    assert_undecided(approval)


def test_the_confirmation_pages_post_decides_once_and_resumes_the_call_once():
    ada = staff("ada")
    approval = paused()
    reject = links_in(mail.outbox[0])["Reject"]

    decided = logged_in(ada).post(path_of(reject), {"note": "Not this week."})

    assert decided.status_code == 200
    assert "Rejected by ada (through an e-mail link)" in decided.content.decode()
    approval.refresh_from_db()
    assert (approval.status, approval.note, approval.decided_via, approval.decided_by) == (
        "rejected",
        "Not this week.",
        "email",
        ada,
    )
    assert run_resumes() == [str(approval.pk)]
    assert run_resumes() == []


def test_a_used_email_link_is_refused():
    ada = staff("ada")
    paused()
    approve = path_of(links_in(mail.outbox[0])["Approve"])
    logged_in(ada).post(approve)
    run_resumes()

    again = logged_in(ada).post(approve)

    assert again.status_code == 410
    assert "This link was used already" in again.content.decode()
    assert resumes_enqueued() == []


def test_an_expired_email_link_is_refused_and_nothing_is_decided():
    ada = staff("ada")
    approval = paused()
    approve = path_of(links_in(mail.outbox[0])["Approve"])

    with time_machine.travel(timezone.now() + timedelta(hours=25)):
        opened, posted = logged_in(ada).get(approve), logged_in(ada).post(approve)

    assert (opened.status_code, posted.status_code) == (410, 410)
    assert "This link has expired" in posted.content.decode()
    assert_undecided(approval)


def test_a_changed_email_link_is_refused():
    ada = staff("ada")
    approval = paused()
    approve = path_of(links_in(mail.outbox[0])["Approve"])

    changed = approve[:-2] + ("A" if approve[-2] != "A" else "B") + "/"  # its signature's last character

    response = logged_in(ada).post(changed)

    assert response.status_code == 410
    assert "This link is not valid" in response.content.decode()
    assert_undecided(approval)


def test_an_email_link_decides_only_for_a_logged_in_member_of_staff_who_may_decide():
    approval = paused()
    approve = path_of(links_in(mail.outbox[0])["Approve"])

    anonymous = Client().post(approve)
    viewer = logged_in(staff("linus", may_decide=False)).post(approve)

    assert anonymous.status_code == 302 and anonymous["Location"].startswith(reverse("admin:login"))
    assert viewer.status_code == 403
    assert "You may not decide approvals" in viewer.content.decode()
    assert_undecided(approval)


def test_the_confirmation_pages_post_needs_its_csrf_token():
    ada = staff("ada")
    approval = paused()
    client = Client(enforce_csrf_checks=True)
    client.force_login(ada)

    response = client.post(path_of(links_in(mail.outbox[0])["Approve"]))

    assert response.status_code == 403
    assert_undecided(approval)


def test_an_email_link_to_a_call_whose_policy_changed_sends_staff_to_the_decision_page():
    policy = ApprovalPolicy.objects.create(
        name="Messages to the owner", tool_pattern="draft_contact_message", outcome=Outcome.APPROVE
    )
    ada = staff("ada")
    approval = paused()
    approve = path_of(links_in(mail.outbox[0])["Approve"])
    policy.save()  # edited while the call waits

    page = logged_in(ada).get(approve).content.decode()
    posted = logged_in(ada).post(approve)

    assert 'id="policy-changed"' in page and 'id="email-decision"' not in page
    assert posted.status_code == 409
    assert "changed since this call was requested (version 1, now 2)" in posted.content.decode()
    assert_undecided(approval)


# --- one decision --------------------------------------------------------------------------------


def test_ten_decisions_at_once_from_slack_email_and_the_admin_decide_once_and_nine_are_told_it_was_already_decided():
    ada = staff("ada", slack_id="U0ADA")
    approval = paused()
    start = threading.Barrier(10)
    told: list[str] = []
    admin_decide = reverse("admin:approvals_approvalrequest_decide", args=[approval.pk])

    def from_slack() -> None:
        start.wait()
        press(approval, slack_user="U0ADA")

    def from_email(link: str, client: Client) -> None:
        start.wait()
        told.append(_outcome(client.post(link).content.decode()))

    def from_admin(client: Client) -> None:
        start.wait()
        response = client.post(admin_decide, {"decision": "approve"})
        told.append(" ".join(str(message) for message in get_messages(response.wsgi_request)))

    # Every link made and every client logged in before the ten start together.
    work = [from_slack] * 4
    work += [partial(from_email, path_of(email_link(approval)), logged_in(ada)) for _ in range(3)]
    work += [partial(from_admin, logged_in(ada)) for _ in range(3)]
    threads = [threading.Thread(target=_closing, args=(job,)) for job in work]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)

    told += [message["text"] for _, message in slack_responses()]
    decided = [text for text in told if text != "This approval was already approved."]
    assert len(told) == 10
    assert len(decided) == 1 and "Approved" in decided[0], told
    assert resumes_enqueued() == [str(approval.pk)]
    assert run_resumes() == [str(approval.pk)]


def _outcome(page: str) -> str:
    found = re.search(r'<p (?:class="errornote" id="refused"[^>]*|id="decided")>([^<]*)</p>', page)
    return found.group(1).strip() if found else page


def _closing(job) -> None:
    try:
        job()
    finally:
        connections.close_all()


# --- step-up ---------------------------------------------------------------------------------------


def requiring_step_up(*, passkey: bool = False) -> ApprovalPolicy:
    return ApprovalPolicy.objects.create(
        name="Messages to the owner",
        tool_pattern="draft_contact_message",
        outcome=Outcome.APPROVE,
        requires_step_up=True,
        requires_passkey=passkey,
    )


def test_a_slack_press_on_an_approval_whose_policy_requires_step_up_decides_nothing_and_links_the_decision_page():
    requiring_step_up()
    staff("ada", slack_id="U0ADA")
    approval = paused()

    press(approval, slack_user="U0ADA")

    message = last_slack_message()
    assert message["response_type"] == "ephemeral"
    page = f"https://hitl.example.com/admin/approvals/approvalrequest/{approval.pk}/change/"
    assert message["text"].endswith(f"requires step-up. Confirm it's you and decide on the decision page: {page}")
    assert_undecided(approval)


def test_an_email_link_to_an_approval_whose_policy_requires_step_up_asks_for_it_first_and_decides_nothing():
    requiring_step_up()
    ada = staff("ada")
    approval = paused()
    approve = path_of(links_in(mail.outbox[0])["Approve"])

    opened, posted = logged_in(ada).get(approve), logged_in(ada).post(approve)

    assert opened.status_code == 302
    assert opened["Location"] == f"{reverse('staff-step-up')}?{urlencode({'next': approve})}"
    # A post without a step-up is held on the step-up page, which posts it back here with the proof.
    assert posted.status_code == 403 and "Confirm it’s you" in posted.content.decode()
    assert f'action="{approve}"' in posted.content.decode()
    assert_undecided(approval)


def test_a_slack_press_on_an_approval_whose_policy_requires_a_passkey_decides_nothing_and_links_the_decision_page():
    requiring_step_up(passkey=True)
    staff("ada", slack_id="U0ADA")
    approval = paused()

    press(approval, slack_user="U0ADA")

    page = f"https://hitl.example.com/admin/approvals/approvalrequest/{approval.pk}/change/"
    assert last_slack_message()["text"].endswith(
        f"requires step-up with a passkey. Confirm it with your passkey on the decision page: {page}"
    )
    assert_undecided(approval)


def test_an_email_link_to_an_approval_whose_policy_requires_a_passkey_decides_nothing_and_links_the_decision_page():
    requiring_step_up(passkey=True)
    ada = staff("ada")
    approval = paused()
    approve = path_of(links_in(mail.outbox[0])["Approve"])

    opened, posted = logged_in(ada).get(approve), logged_in(ada).post(approve)

    # No detour by the step-up page: a password would not do.
    assert opened.status_code == 200
    page = f"/admin/approvals/approvalrequest/{approval.pk}/change/"
    assert posted.status_code == 403 and "Confirm it with your passkey on the decision page" in posted.content.decode()
    assert page in posted.content.decode()
    assert_undecided(approval)


def test_an_email_links_decision_held_for_step_up_goes_on_once_the_password_is_given():
    requiring_step_up()
    ada = staff("ada")
    approval = paused()
    approve = path_of(links_in(mail.outbox[0])["Approve"])
    browser = logged_in(ada)

    with committing():
        held = browser.post(approve, {"note": "Checked."})
        wrong = browser.post(approve, {"note": "Checked.", "step_up-password": "guess", "step_up-code": ""})
        assert_undecided(approval)
        with time_machine.travel(timezone.now() + timedelta(seconds=2)):  # past the wrong password's back-off
            confirmed = browser.post(approve, {"note": "Checked.", "step_up-password": "pw", "step_up-code": ""})

    assert held.status_code == 403 and '<input type="hidden" name="note" value="Checked.">' in held.content.decode()
    assert wrong.status_code == 403 and "That is not your password. Nothing was decided." in wrong.content.decode()
    assert confirmed.status_code == 200 and 'id="decided"' in confirmed.content.decode()
    approval.refresh_from_db()
    assert (approval.status, approval.note, approval.decided_via) == ("approved", "Checked.", "email")


def test_a_wrong_totp_code_on_an_email_links_step_up_page_is_refused_and_its_back_off_is_kept():
    requiring_step_up()
    ada = staff("ada")
    device = TOTPDevice.objects.create(user=ada, name="phone", confirmed=True)
    approval = paused()
    approve = path_of(links_in(mail.outbox[0])["Approve"])
    now = TOTP(device.bin_key, device.step, device.t0, device.digits, device.drift).token()
    code = f"{(now + 1) % 10**6:06d}"  # not the code the device shows now

    with committing():
        wrong = logged_in(ada).post(approve, {"note": "", "step_up-password": "", "step_up-code": code})

    assert wrong.status_code == 403 and "That is not a current code" in wrong.content.decode()
    device.refresh_from_db()
    assert device.throttling_failure_count == 1
    assert_undecided(approval)
