"""GET /health/ checks the broker that is configured, named in its output: Redis (REDIS_URL), and
RabbitMQ too when CELERY_BROKER_URL names it (docs/operating.md, "Health check")."""

from __future__ import annotations

import pytest

RABBITMQ = "amqp://guest:guest@127.0.0.1:5672//"
# A port nothing listens on: the broker is down.
RABBITMQ_DOWN = "amqp://guest:guest@127.0.0.1:1//"


def health(client) -> tuple[int, dict]:
    response = client.get("/health/?format=json")
    return response.status_code, response.json()


@pytest.mark.django_db
def test_with_redis_as_the_broker_the_health_check_names_redis_and_no_rabbitmq(client):
    status, checks = health(client)

    assert status == 200, checks
    assert any(name.startswith("Redis(") for name in checks)
    assert not any(name.startswith("RabbitMQ(") for name in checks)


@pytest.mark.django_db
def test_with_rabbitmq_as_the_broker_the_health_check_names_it_without_its_credentials(client, settings):
    settings.CELERY_BROKER_URL, settings.BROKER_IS_RABBITMQ = RABBITMQ, True

    status, checks = health(client)

    assert status == 200, checks
    assert "RabbitMQ(host='127.0.0.1', port=5672)" in checks
    assert "guest" not in str(checks)


@pytest.mark.django_db
def test_with_rabbitmq_down_the_health_check_fails_naming_it(client, settings):
    settings.CELERY_BROKER_URL, settings.BROKER_IS_RABBITMQ = RABBITMQ_DOWN, True

    status, checks = health(client)

    assert status == 500
    assert checks["RabbitMQ(host='127.0.0.1', port=1)"] != "OK", checks
