"""A request that repeats one which died between committing its round and enqueueing the run (its
web host was killed, and its client sent it to another): the same first call by its idempotency
key, or the same answers to a round already answered. The round is enqueued again at once unless a
worker holds it, rather than once it looks stalled (RUN_STALLED_AFTER_SECONDS later)."""

from __future__ import annotations

from tests.inprocess.driver import asked, begun, call, rounds_enqueued, take_lease
from tests.rounds import input_response_accepting, only_key

REGION = "eu-west-1"


def test_a_first_call_sent_again_for_a_round_no_worker_holds_enqueues_it_again_at_once():
    round_ = begun("choose_region", idempotency_key="k-1")

    again = asked("choose_region", idempotency_key="k-1")  # the driver's worker runs what it waits for

    assert rounds_enqueued() == [str(round_.id)]
    assert "region" in str(again["inputRequests"])


def test_a_first_call_sent_again_for_a_round_a_worker_holds_enqueues_nothing():
    round_ = begun("choose_region", idempotency_key="k-1")
    take_lease(round_.id)

    still_running = call("choose_region", outlasting=True, idempotency_key="k-1")

    assert set(still_running) == {"resultType", "requestState"}
    assert rounds_enqueued() == []


def test_answers_sent_again_for_a_resume_no_worker_holds_enqueue_it_again_at_once():
    first = asked("choose_region")
    answers = {only_key(first): input_response_accepting(response=REGION)}
    resume = begun("choose_region", responses=answers, request_state=first["requestState"])

    again = call("choose_region", responses=answers, request_state=first["requestState"])

    assert rounds_enqueued() == [str(resume.id)]
    assert again["structuredContent"] == {"region": REGION}


def test_answers_sent_again_for_a_resume_a_worker_holds_enqueue_nothing():
    first = asked("choose_region")
    answers = {only_key(first): input_response_accepting(response=REGION)}
    resume = begun("choose_region", responses=answers, request_state=first["requestState"])
    take_lease(resume.id)

    call("choose_region", outlasting=True, responses=answers, request_state=first["requestState"])

    assert rounds_enqueued() == []
