"""The hosted answer page (MCP_ANSWER_PAGES=on): an open round's questions answered in a browser,
through the same checks and the same claim as a client's inputResponses, and what happens next
shown to the person who answered; a link that does not open a round shows one clear page."""

from __future__ import annotations

import threading
import uuid
from datetime import timedelta

import pytest
import redis
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core import checks
from django.db import connection
from django.test import Client
from django.utils import timezone

from tests.inprocess.driver import (
    Round,
    ToolCall,
    answer_page,
    answer_page_url,
    asked,
    asking_page,
    call_in_session,
    call_of,
    caller,
    caller_of,
    committing,
    finish_runs,
    latest_answer_page,
    open_session,
    refused,
    refused_answer,
    resume_approval,
    rounds_enqueued,
    staff_decided,
    waiting_for_staff,
)
from tests.rounds import input_response_accepting, only_key

REFUSED = "This link does not work"


@pytest.fixture(autouse=True)
def pages_on(settings):
    settings.MCP_ANSWER_PAGES = "on"


def _submit(client: Client, path: str, **fields: str):
    with committing():
        return client.post(path, fields)


def _resumes(tag: str) -> int:
    return int(redis.Redis.from_url(settings.REDIS_URL).get(f"hitl-test:resumes:{tag}") or 0)


def _text(response) -> str:
    return response.content.decode()


def test_a_text_question_answered_on_its_page_resumes_the_agent_once():
    ada = get_user_model().objects.create(username="ada")
    tag = uuid.uuid4().hex
    first = asked("count_resumes", {"value": tag}, by=caller(f"user:{ada.pk}"))
    page, browser = answer_page(first["requestState"]), Client()

    form = browser.get(page)
    assert form.status_code == 200 and "no-store" in form["Cache-Control"]
    assert "Count this?" in _text(form)
    # The page says which client and tool asked.
    assert "<strong>ada</strong>" in _text(form) and "<strong>count_resumes</strong>" in _text(form)

    sent = _submit(browser, page, **{"q0-f0": "yes", "action": "accept"})
    assert sent.status_code == 303 and sent["Location"] == page
    # The browser that answered follows the call: a signed cookie scoped to the answer pages.
    followed = sent.cookies["answer_pages"]
    assert followed["path"] == "/answer/" and followed["httponly"] and followed["samesite"] == "Lax"
    working = browser.get(page)
    assert "The agent is working" in _text(working) and 'http-equiv="refresh"' in _text(working)

    finish_runs()
    done = browser.get(page)
    assert "The agent has finished" in _text(done) and "yes" in _text(done) and tag in _text(done)
    assert _resumes(tag) == 1
    assert call_of(first["requestState"]).rounds.count() == 2


def test_a_typed_forms_invalid_value_shows_the_same_message_as_an_input_responses_answer():
    first = asked("typed_int")
    wire = refused_answer("typed_int", {}, first, {only_key(first): input_response_accepting(response="many")})
    page, browser = answer_page(first["requestState"]), Client()

    refused = _submit(browser, page, **{"q0-f0": "many", "action": "accept"})

    assert refused.status_code == 400
    assert f"{wire['message']}: {wire['data']['detail']}" in _text(refused).replace("&#x27;", "'")
    assert Round.objects.get(pk=first["requestState"].partition(".")[0]).state == Round.State.ASKING
    assert _submit(browser, page, **{"q0-f0": "3", "action": "accept"}).status_code == 303
    finish_runs()
    assert '"3"' not in _text(browser.get(page)) and "3" in _text(browser.get(page))


def test_several_questions_of_one_round_are_answered_on_one_page():
    first = asked("survey")
    page, browser = answer_page(first["requestState"]), Client()
    form = _text(browser.get(page))
    assert "What is your name?" in form and "What is your favourite colour?" in form

    assert _submit(browser, page, **{"q0-f0": "Ada", "q1-f0": "green", "action": "accept"}).status_code == 303
    finish_runs()

    done = _text(browser.get(page))
    assert "Ada" in done and "green" in done


def test_an_answer_that_langgraph_rejects_is_asked_again_on_the_next_page_with_the_reason():
    first = asked("typed_validator")
    page, browser = answer_page(first["requestState"]), Client()

    assert _submit(browser, page, **{"q0-f0": "nobody", "action": "accept"}).status_code == 303
    finish_runs()

    again = browser.get(page)
    assert again.status_code == 303 and again["Location"] != page
    asked_again = _text(browser.get(again["Location"]))
    assert "Your previous answer was refused" in asked_again and "nobody is not a nickname" in asked_again
    assert _submit(browser, again["Location"], **{"q0-f0": "Ada", "action": "accept"}).status_code == 303
    finish_runs()
    assert "Ada" in _text(browser.get(again["Location"]))


@pytest.mark.parametrize(
    ("fields", "shown"),
    [
        ({"q0-f0": "approve"}, "tagged Ada"),
        ({"q0-f0": "edit", "q0-f2": '{"label": "Babbage"}'}, "tagged Babbage"),
        ({"q0-f0": "reject", "q0-f1": "Not that ticket"}, "Not that ticket"),
    ],
)
def test_a_review_is_decided_on_its_page_with_the_decision_it_allows(fields, shown):
    first = asked("review_letters_only_per_call", {"messages": "go"})
    page, browser = answer_page(first["requestState"]), Client()
    form = _text(browser.get(page))
    assert all(f'value="{d}"' in form for d in ("approve", "edit", "reject", "respond"))

    assert _submit(browser, page, action="accept", **fields).status_code == 303
    finish_runs()

    assert shown in _text(browser.get(page))


def test_a_review_that_allows_approve_or_respond_offers_only_those_and_a_response_reaches_the_agent():
    first = asked("review_approve_or_respond_per_call", {"messages": "go"})
    page, browser = answer_page(first["requestState"]), Client()
    form = _text(browser.get(page))
    assert 'value="approve"' in form and 'value="respond"' in form
    assert 'value="reject"' not in form and 'value="edit"' not in form

    sent = _submit(browser, page, **{"q0-f0": "respond", "q0-f1": "Published by hand", "action": "accept"})
    assert sent.status_code == 303
    finish_runs()

    assert "Published by hand" in _text(browser.get(page))


def test_a_url_question_links_out_and_sending_the_page_says_the_person_has_finished_there():
    first = asked("relay_url", {"value": "https://login.example.com/start?flow=1"})
    page, browser = answer_page(first["requestState"]), Client()
    form = _text(browser.get(page))
    assert "Open this page." in form and '<span class="host">login.example.com</span>' in form
    assert 'href="https://login.example.com/start?flow=1" target="_blank" rel="noopener noreferrer"' in form

    assert _submit(browser, page, action="accept").status_code == 303
    finish_runs()

    done = _text(browser.get(page)).replace("&quot;", '"')
    assert "The agent has finished" in done and '"page": {\n      "action": "accept"\n    }' in done


@pytest.mark.parametrize(
    ("action", "told"), [("decline", "The request for input was declined."), ("cancel", "was cancelled")]
)
def test_decline_and_cancel_end_the_call_and_the_page_says_so(action, told):
    first = asked("count_resumes", {"value": uuid.uuid4().hex})
    page, browser = answer_page(first["requestState"]), Client()

    assert _submit(browser, page, action=action).status_code == 303

    done = _text(browser.get(page))
    assert "The agent has finished" in done and told in done
    assert call_of(first["requestState"]).status == ToolCall.Status.FINISHED


def test_a_call_that_asks_again_shows_the_next_rounds_questions_under_a_link_of_its_own():
    first = asked("same_text_in_sequence")
    page, browser = answer_page(first["requestState"]), Client()
    _submit(browser, page, **{"q0-f0": "one", "action": "accept"})
    finish_runs()

    moved = browser.get(page)
    following = latest_answer_page(first["requestState"])
    assert moved.status_code == 303 and moved["Location"] == following != page
    assert "Once more?" in _text(browser.get(following))


def test_a_call_handed_to_staff_shows_waiting_for_staff_then_the_decision_then_the_result():
    first = asked("text_then_staff")
    page, browser = answer_page(first["requestState"]), Client()
    _submit(browser, page, **{"q0-f0": "yes", "action": "accept"})
    finish_runs()

    waiting = _text(browser.get(page))
    assert "Waiting for staff" in waiting and 'http-equiv="refresh"' in waiting
    (approval,) = waiting_for_staff()
    staff_decided(str(approval.pk))
    assert "Staff approved; the agent is resuming" in _text(browser.get(page))

    resume_approval(str(approval.pk))
    done = _text(browser.get(page))
    assert "The agent has finished" in done and "After the staff decision" in done and "shipped" in done


def test_a_link_that_opens_no_round_shows_one_clear_page_and_a_tampered_one_the_same_as_an_unknown_one():
    first, other = asked("count_resumes", {"value": "a"}), asked("count_resumes", {"value": "b"})
    page, other_page = answer_page(first["requestState"]), answer_page(other["requestState"])
    unknown = _text(Client().get(f"/answer/{uuid.uuid4().hex}.{'0' * 64}/"))
    assert REFUSED in unknown

    round_id, signature = page.split("/")[2].split(".")
    tampered = f"/answer/{round_id}.{signature[:-1]}{'1' if signature[-1] == '0' else '0'}/"
    another_calls = f"/answer/{round_id}.{other_page.split('/')[2].split('.')[1]}/"
    for path in (tampered, another_calls, "/answer/x/", "/answer/../", f"/answer/{round_id.upper()}.{signature}/"):
        response = Client().get(path)
        assert response.status_code == 404 and _text(response) == unknown, path
        assert Client().post(path, {"q0-f0": "yes", "action": "accept"}).status_code == 404

    # Answered: the person who answered follows the call; anyone else gets the refusal.
    _submit(Client(), page, **{"q0-f0": "yes", "action": "accept"})
    answered = Client().get(page)
    assert answered.status_code == 404 and _text(answered) == unknown
    assert Client().post(page, {"q0-f0": "no", "action": "accept"}).status_code == 404

    # Its caller's account deactivated since.
    grace = get_user_model().objects.create(username="grace")
    paused = asked("count_resumes", {"value": "c"}, by=caller(f"user:{grace.pk}"))
    assert Client().get(answer_page(paused["requestState"])).status_code == 200
    get_user_model().objects.filter(pk=grace.pk).update(is_active=False)
    deactivated = Client().get(answer_page(paused["requestState"]))
    assert deactivated.status_code == 404 and _text(deactivated) == unknown

    # Expired with its call.
    ToolCall.objects.filter(pk=call_of(other["requestState"]).pk).update(expires_at=timezone.now() - timedelta(1))
    expired = Client().get(other_page)
    assert expired.status_code == 404 and _text(expired) == unknown


def test_a_post_that_is_not_an_answer_is_refused_with_the_form_again_never_a_500():
    first = asked("survey")
    page, browser = answer_page(first["requestState"]), Client()

    for fields in ({"action": "maybe"}, {"q0-f0": "Ada", "action": "accept"}, {}):
        response = _submit(browser, page, **fields)
        assert response.status_code == 400, fields
        assert "What is your name?" in _text(response)
    assert Round.objects.get(pk=first["requestState"].partition(".")[0]).state == Round.State.ASKING


def test_the_pages_post_needs_its_csrf_token():
    first = asked("count_resumes", {"value": uuid.uuid4().hex})
    page, browser = answer_page(first["requestState"]), Client(enforce_csrf_checks=True)

    refused = browser.post(page, {"q0-f0": "yes", "action": "accept"})
    assert refused.status_code == 403 and "Your answer was not sent" in _text(refused)
    assert Round.objects.get(pk=first["requestState"].partition(".")[0]).state == Round.State.ASKING

    browser.get(page)
    token = browser.cookies[settings.CSRF_COOKIE_NAME].value
    sent = _submit(browser, page, **{"q0-f0": "yes", "action": "accept", "csrfmiddlewaretoken": token})
    assert sent.status_code == 303


def test_a_rounds_link_is_absolute_with_site_url_and_holds_neither_question_nor_answer(settings):
    first = asked("typed_int")
    settings.SITE_URL = "https://hitl.example.com"

    url = answer_page_url(first["requestState"])

    assert url == f"https://hitl.example.com{answer_page(first['requestState'])}"
    round_id, signature = url.removeprefix("https://hitl.example.com/answer/").removesuffix("/").split(".")
    assert round_id == first["requestState"].partition(".")[0].replace("-", "")
    assert len(signature) == 64 and "replicas" not in url.lower()


def test_with_answer_pages_off_nothing_is_served(settings):
    settings.MCP_ANSWER_PAGES = "off"
    first = asked("count_resumes", {"value": uuid.uuid4().hex})
    page = answer_page(first["requestState"])

    assert Client().get(page).status_code == 404
    assert REFUSED not in _text(Client().get(page))
    assert Client().post(page, {"q0-f0": "yes", "action": "accept"}).status_code == 404
    assert Round.objects.get(pk=first["requestState"].partition(".")[0]).state == Round.State.ASKING


@pytest.mark.django_db(transaction=True)
def test_twenty_submissions_of_one_page_at_once_resume_the_agent_once():
    tag = uuid.uuid4().hex
    first = asked("count_resumes", {"value": tag})
    page = answer_page(first["requestState"])
    enqueued_before = len(rounds_enqueued())
    start = threading.Barrier(20)
    statuses: list[int] = []

    def submit() -> None:
        try:
            browser = Client()
            start.wait()
            statuses.append(browser.post(page, {"q0-f0": "yes", "action": "accept"}).status_code)
        finally:
            connection.close()

    threads = [threading.Thread(target=submit) for _ in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    # One claim. A submission that read the round while it asked and lost the claim with the
    # same answers follows the call too; one that came once the round was answered is refused.
    assert len(statuses) == 20 and set(statuses) <= {303, 404} and 303 in statuses
    assert len(rounds_enqueued()) - enqueued_before == 1
    assert call_of(first["requestState"]).rounds.count() == 2
    finish_runs()
    assert _resumes(tag) == 1


def test_answer_pages_without_site_url_are_warned_of_by_the_system_checks(settings):
    settings.SITE_URL = ""

    (warning,) = [m for m in checks.run_checks(tags=[checks.Tags.urls]) if m.id == "hitl.W002"]

    assert warning.level == checks.WARNING and "SITE_URL" in warning.msg and "SITE_URL=https://" in warning.hint
    settings.SITE_URL = "https://hitl.example.com"
    assert not [m for m in checks.run_checks(tags=[checks.Tags.urls]) if m.id == "hitl.W002"]
    settings.MCP_ANSWER_PAGES, settings.SITE_URL = "off", ""
    assert not [m for m in checks.run_checks(tags=[checks.Tags.urls]) if m.id == "hitl.W002"]


def test_the_page_names_the_client_that_asked_as_its_request_declared_itself():
    first = asked("choose_region", client_info={"name": "claude-ai", "title": "Claude Desktop", "version": "0.9"})

    page = Client().get(answer_page(first["requestState"]))

    assert "<strong>Claude Desktop (claude-ai 0.9)</strong>, through the tool" in page.content.decode()


def test_an_older_clients_name_is_the_one_its_sessions_initialize_declared(settings):
    settings.MCP_OLDER_CLIENTS = "answer"
    raw = open_session(client_info={"name": "inspector", "version": "2.1"})
    call_ = call_in_session(raw, "choose_region")
    finish_runs()

    page = Client().get(asking_page(call_))

    assert "<strong>inspector 2.1</strong>" in page.content.decode()


def test_the_clients_own_words_are_escaped_on_the_page_and_cut_short():
    name = "<script>alert(1)</script>\u202e" + "x" * 500
    first = asked("choose_region", client_info={"name": name, "version": "\n1.0"})

    page = Client().get(answer_page(first["requestState"])).content.decode()

    assert "<script>alert" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;xxx" in page
    assert "x" * 100 not in page and "…" in page
    stored = call_of(first["requestState"]).client_info
    assert len(stored["name"]) == 100 and stored["version"] == "1.0"


def test_a_client_that_declared_no_name_is_the_callers_client_alone():
    first = asked("choose_region")

    page = Client().get(answer_page(first["requestState"])).content.decode()

    assert "s MCP client, through the tool" in page


# --- MCP_ANSWER_PAGE_LOGIN=caller: the page verifies who opens it ---------------------------------

PASSWORD = "correct horse battery staple"


@pytest.fixture
def login_caller(settings):
    settings.MCP_ANSWER_PAGE_LOGIN = "caller"


def _asked_by(username: str, name: str = "choose_region", arguments: dict | None = None):
    """A round the account `username` (with a password) asked through its MCP client: the account
    and the page's path."""
    user = get_user_model().objects.create_user(username, password=PASSWORD)
    first = asked(name, arguments, by=caller_of(user))
    return user, answer_page(first["requestState"])


def test_with_login_caller_a_browser_not_logged_in_is_sent_to_log_in_and_sees_no_question(login_caller):
    _, page = _asked_by("ada")

    opened = Client().get(page)
    posted = _submit(Client(), page, **{"q0-f0": "eu-west-1", "action": "accept"})

    assert opened.status_code == 302 and opened["Location"] == f"/answer/login/?next={page}"
    assert "Which region" not in _text(opened)
    assert posted.status_code == 302 and Round.objects.filter(state=Round.State.ASKING).count() == 1


def test_with_login_caller_logging_in_as_the_caller_leads_back_to_the_page_which_takes_the_answer(login_caller):
    ada, page = _asked_by("ada")
    browser = Client()

    wrong = browser.post("/answer/login/", {"username": "ada", "password": "nope", "next": page})
    logged_in = browser.post("/answer/login/", {"username": "ada", "password": PASSWORD, "next": page})
    form = browser.get(page)
    sent = _submit(browser, page, **{"q0-f0": "eu-west-1", "action": "accept"})
    finish_runs()

    assert wrong.status_code == 200 and "Log in to answer" in _text(wrong)
    assert logged_in.status_code == 302 and logged_in["Location"] == page
    assert form.status_code == 200 and "Which region" in _text(form)
    assert sent.status_code == 303
    assert "eu-west-1" in _text(browser.get(page))


def test_with_login_caller_another_logged_in_account_is_refused_and_its_answer_not_taken(login_caller):
    _, page = _asked_by("ada")
    grace = get_user_model().objects.create_user("grace", password=PASSWORD, is_staff=True, is_superuser=True)
    browser = Client()
    browser.force_login(grace)

    opened = browser.get(page)
    posted = _submit(browser, page, **{"q0-f0": "eu-west-1", "action": "accept"})

    for refused_page in (opened, posted):
        assert refused_page.status_code == 403 and "This link is for another account" in _text(refused_page)
        assert "Which region" not in _text(refused_page) and "<strong>grace</strong>" in _text(refused_page)
    assert Round.objects.filter(state=Round.State.ASKING).count() == 1


def test_with_login_caller_a_caller_that_is_no_user_is_not_sent_to_a_page_and_its_page_takes_no_answer(
    login_caller,
):
    service = caller("service:nightly-report")
    ada = get_user_model().objects.create_user("ada", password=PASSWORD)

    url_only = refused("choose_region", capabilities={"elicitation": {"url": {}}}, by=service)
    page = answer_page(asked("choose_region", by=service)["requestState"])
    browser = Client()
    browser.force_login(ada)

    assert url_only["code"] == -32021  # as with answer pages off: no link nobody could use
    for opened in (Client().get(page), browser.get(page)):
        assert opened.status_code == 403 and "acts for no person" in _text(opened)


def test_the_login_page_is_served_only_with_login_caller(settings):
    assert Client().get("/answer/login/").status_code == 404
    settings.MCP_ANSWER_PAGE_LOGIN = "caller"
    assert Client().get("/answer/login/").status_code == 200
    settings.MCP_ANSWER_PAGES = "off"
    assert Client().get("/answer/login/").status_code == 404


@pytest.mark.parametrize(
    "line",
    [
        '"GET /answer/{link}/ HTTP/1.1" 200',
        '"GET /answer/login/?next=/answer/{link}/ HTTP/1.1" 200',
        '"GET /answer/login/?next=%2Fanswer%2F{link}%2F&x=1 HTTP/1.1" 200',
        '"GET /answer/login/?next=%2fanswer%2f{link}%2f HTTP/1.1" 200',
    ],
)
def test_a_link_is_cut_out_of_a_log_line_in_a_path_or_in_the_login_pages_next_encoded_or_not(line):
    from hitl_project.logs import redacted

    _, page = _asked_by("ada")
    link = page.strip("/").rpartition("/")[2]

    logged = redacted(line.format(link=link))

    assert link not in logged and "[redacted]" in logged
