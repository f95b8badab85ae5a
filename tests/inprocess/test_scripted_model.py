"""The scripted model the example agents use without OPENAI_API_KEY: it proposes what the person
asked for, the same way every time."""

from __future__ import annotations

import pytest

from tests.inprocess.driver import asked

pytestmark = pytest.mark.django_db(transaction=True)


def proposed(message: str) -> str:
    (request,) = asked("send_email", {"message": message})["inputRequests"].values()
    return request["params"]["message"]


def test_the_email_agent_proposes_the_address_and_the_subject_typed():
    said = proposed('Please e-mail bob@example.com with the subject "Board meeting"')

    assert "'to': 'bob@example.com'" in said and "'subject': 'Board meeting'" in said
    assert "ada@example.com" not in said


def test_the_email_agent_proposes_the_same_email_for_the_same_request():
    assert proposed("Mail carol@example.org about lunch") == proposed("Mail carol@example.org about lunch")
    assert "'to': 'carol@example.org'" in proposed("Mail carol@example.org about lunch")


def test_the_email_agent_falls_back_to_its_demo_address_and_subject_when_none_is_typed():
    said = proposed("Send the launch email")

    assert "'to': 'ada@example.com'" in said and "'subject': 'Launch'" in said
