"""Secrets and web security (hardening).

- The database and the logs never hold a raw MCP token, request token (requestState) or admin
  token: real calls, then every table of the test database and every captured log line are
  searched for them.
- A requestState from another caller, for another tool or other arguments, of an expired call or
  of a finished call past its keep time, all fail with the very same body.
- Every admin form refuses a POST without the CSRF token; the REST admin API answers only its token.
- `manage.py check --deploy` is clean with the production environment, and warns when a
  PostgreSQL deployment has no SECRET_KEY of its own; processes starting together on a new data
  directory share one generated key; with HTTPS, /health/ is not redirected; beat keeps its state
  in the data directory.

Covered elsewhere, not repeated: the staff decision needs approvals.decide_approval
(tests/inprocess/test_approval_deciders.py: test_staff_without_the_decide_permission_can_look_but_not_decide,
test_a_stranger_can_neither_look_nor_decide), the Origin check (test_endpoint.py), no/wrong/off
admin token (test_approvals_deadlines_and_access.py: test_the_admin_api_needs_the_admin_token,
test_the_admin_api_is_off_without_an_admin_token_configured).
"""

from __future__ import annotations

import logging
import os
import secrets
import string
import subprocess
import sys
import time
import uuid
from datetime import timedelta
from pathlib import Path

import httpx
import pytest
import time_machine
from django.contrib import admin
from django.db import connection
from django.test import Client
from django.urls import NoReverseMatch, URLPattern, URLResolver, reverse
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from mcp_gateway.models import MCPToken
from tests.clients import Raw, meta
from tests.processes import python
from tests.rounds import INVALID_STATE, answer, asked, call_of, input_response_accepting, only_key, result_of

ROOT = Path(__file__).resolve().parents[2]
NAME = {"user_name": input_response_accepting(name="Ada")}


# --- no raw secret in the database or the logs ------------------------------------------------------


def database_text() -> str:
    """Every row of every table of the test database (Django's, LangGraph's checkpoint tables,
    Celery's if any) as text; bytea values (checkpoint blobs) as their raw bytes."""
    parts = []
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT table_schema, table_name FROM information_schema.tables "
            "WHERE table_type = 'BASE TABLE' AND table_schema NOT IN ('pg_catalog', 'information_schema')"
        )
        tables = cursor.fetchall()
        assert {"checkpoints", "checkpoint_blobs", "checkpoint_writes", "mcp_gateway_round"} <= {t for _, t in tables}
        for schema, table in tables:
            cursor.execute(f'SELECT * FROM "{schema}"."{table}"')
            for row in cursor.fetchall():
                for value in row:
                    if isinstance(value, (bytes, memoryview)):
                        parts.append(bytes(value).decode("latin-1"))
                    else:
                        parts.append(str(value))
    return "\n".join(parts)


@pytest.fixture
def admin_token(settings):
    settings.ADMIN_TOKEN = "adm_" + secrets.token_urlsafe(32)
    return settings.ADMIN_TOKEN


def test_the_database_and_the_logs_hold_no_raw_mcp_token_request_token_or_admin_token(
    mcp_url, token, make_token, live_server, admin_token, celery_worker, caplog
):
    caplog.set_level(logging.DEBUG)
    raw = Raw(mcp_url, token)
    # A call over two rounds, a finished one, a failed answer, a staff approval, a wrong token.
    first = asked(raw, "form_then_url")
    second = result_of(
        answer(raw, "form_then_url", {}, first, {only_key(first): input_response_accepting(response="Ada")})
    )
    greeter = asked(raw, "greeter")
    assert result_of(answer(raw, "greeter", {}, greeter, NAME))["structuredContent"] == {"greeting": "Hello, Ada!"}
    assert raw.call("greeter", {}, inputResponses=NAME, requestState=greeter["requestState"] + "x").status_code == 400
    raw.call("digital_twin", {"message": "Please pass a message to the owner: I would like to hire you."})
    other = make_token("bob")
    assert Raw(mcp_url, other + "x").request("tools/list", {"_meta": meta()}).status_code == 401
    api = f"{live_server.url}/api/admin/approvals"
    assert httpx.get(api, headers={"Authorization": f"Bearer {admin_token}"}).status_code == 200
    assert httpx.get(api, headers={"Authorization": f"Bearer {admin_token}x"}).status_code == 401

    states = [first["requestState"], second["requestState"], greeter["requestState"]]
    raw_secrets = {
        "MCP token": token,
        "MCP token past its hint": token[len(MCPToken.PREFIX) + 7 :],
        "other MCP token": other,
        "admin token": admin_token,
        **{f"requestState {i}": s for i, s in enumerate(states)},
        **{f"requestState {i} MAC": s.partition(".")[2] for i, s in enumerate(states)},
    }
    where = {
        "database": database_text(),
        "captured log": caplog.text,
        "worker log": celery_worker.log.read_text(errors="replace"),
    }
    assert "MCP request failed" not in caplog.text
    # The search reads what it should: the token's hint, the round ids and the checkpoint blobs.
    assert token[: len(MCPToken.PREFIX) + 7] in where["database"]
    assert all(s.partition(".")[0] in where["database"] for s in states)
    assert "Hello, Ada!" in where["database"] and "Unauthorized: /mcp/" in caplog.text
    for place, text in where.items():
        for name, secret in raw_secrets.items():
            assert secret not in text, f"{name} found in the {place}"


# --- every wrong requestState fails alike ----------------------------------------------------------------


def test_request_states_that_do_not_fit_all_fail_with_the_same_body(mcp_url, token, make_token):
    from mcp_gateway.calls.sweep import remove_expired_calls

    raw = Raw(mcp_url, token)
    paused = asked(raw, "greeter")
    finished = asked(raw, "greeter")
    assert result_of(answer(raw, "greeter", {}, finished, NAME))["structuredContent"] == {"greeting": "Hello, Ada!"}
    state = paused["requestState"]
    tampered = state[:-1] + ("B" if state.endswith("A") else "A")  # a state ending in "A" would stay itself
    attempts = {
        "another caller": lambda: answer(Raw(mcp_url, make_token("bob")), "greeter", {}, paused, NAME),
        "another tool": lambda: raw.call("survey", {}, inputResponses=NAME, requestState=state),
        "other arguments": lambda: raw.call("greeter", {"greeting": "hi"}, inputResponses=NAME, requestState=state),
        "tampered": lambda: raw.call("greeter", {}, inputResponses=NAME, requestState=tampered),
        "unknown round": lambda: raw.call(
            "greeter", {}, inputResponses=NAME, requestState=f"{uuid.uuid4()}.{state.partition('.')[2]}"
        ),
        "not a token": lambda: raw.call("greeter", {}, inputResponses=NAME, requestState="x"),
    }
    bodies = {}
    for reason, attempt in attempts.items():
        bodies[reason] = attempt()
    paused_expires, finished_expires = call_of(state).expires_at, call_of(finished["requestState"]).expires_at
    assert finished_expires < paused_expires  # 10 minutes, 24 hours
    with time_machine.travel(finished_expires + timedelta(seconds=1)):
        bodies["finished, past its keep time"] = answer(raw, "greeter", {}, finished, NAME)
        remove_expired_calls()
        bodies["finished and removed"] = answer(raw, "greeter", {}, finished, NAME)
    with time_machine.travel(paused_expires + timedelta(seconds=1)):
        bodies["expired"] = answer(raw, "greeter", {}, paused, NAME)
        remove_expired_calls()
        bodies["expired and removed"] = answer(raw, "greeter", {}, paused, NAME)

    for reason, response in bodies.items():
        assert response.status_code == 400, (reason, response.text)
        body = response.json()
        assert body == {"jsonrpc": "2.0", "id": body["id"], "error": INVALID_STATE}, reason


# --- CSRF on every admin form, the REST admin API only with its token ---------------------------------


def _admin_urls() -> list[str]:
    """Every URL of the admin site, with a placeholder for each argument."""
    urls = []

    def walk(patterns, namespace: str) -> None:
        for pattern in patterns:
            if isinstance(pattern, URLResolver):
                walk(pattern.url_patterns, namespace)
            elif isinstance(pattern, URLPattern) and pattern.name:
                names = list(pattern.pattern.regex.groupindex)
                for value in ("1", "approvals"):
                    try:
                        urls.append(reverse(f"{namespace}:{pattern.name}", kwargs=dict.fromkeys(names, value)))
                        break
                    except NoReverseMatch:
                        continue

    walk(admin.site.get_urls(), "admin")
    return sorted(set(urls))


@pytest.mark.django_db
def test_every_admin_form_refuses_a_post_without_the_csrf_token(django_user_model):
    staff = django_user_model.objects.create_superuser("root", "root@example.com", "pw-for-the-test")
    client = Client(enforce_csrf_checks=True)
    client.force_login(staff)
    urls = _admin_urls()
    assert "/admin/approvals/approvalrequest/1/decide/" in urls and "/admin/mcp_gateway/mcptoken/" in urls
    for url in urls:
        response = client.post(url, {"decision": "approve", "action": "revoke", "_selected_action": "1"})
        assert response.status_code == 403, url
        assert b"CSRF" in response.content, url
    # The login form too, for someone not logged in.
    assert Client(enforce_csrf_checks=True).post(reverse("admin:login"), {"username": "root"}).status_code == 403


@pytest.mark.django_db
def test_every_admin_page_answers_a_query_string_with_nul_with_400_not_500(django_user_model):
    staff = django_user_model.objects.create_superuser("root", "root@example.com", "pw-for-the-test")
    client = Client(raise_request_exception=False)
    client.force_login(staff)
    # The list filters' own parameters too: the admin hands their values to the database.
    query = "?q=%00&status__exact=%00&tool_name=%00&status=%00"
    for url in _admin_urls():
        assert client.get(url + query).status_code == 400, url


tokens_near = st.one_of(
    st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=60),
    st.sampled_from(["", "Bearer", "Bearer ", "Token x", "Basic YWRtaW46YWRtaW4="]),
)


@pytest.mark.django_db
def test_the_rest_admin_api_answers_only_its_token(admin_token):
    client = Client()
    near = [admin_token[:-1], admin_token + "x", admin_token.upper(), admin_token[1:], " " + admin_token[:-1]]

    @hypothesis_settings(max_examples=300, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
    @given(
        st.one_of(
            tokens_near,
            st.sampled_from(near).map(lambda t: f"Bearer {t}"),
            st.sampled_from(near).map(lambda t: f"bearer {t}"),
        )
    )
    def run(header):
        for response in (
            client.get("/api/admin/approvals", HTTP_AUTHORIZATION=header),
            client.post(
                "/api/admin/approvals/some-thread",
                {"approved": True},
                content_type="application/json",
                HTTP_AUTHORIZATION=header,
            ),
        ):
            assert response.status_code == 401, (header, response.content)
            assert response["WWW-Authenticate"] == 'Bearer realm="admin"'
            assert set(response.json()) == {"detail"}

    run()
    assert client.get("/api/admin/approvals", HTTP_AUTHORIZATION=f"Bearer {admin_token}").status_code == 200
    assert client.get("/api/admin/approvals", HTTP_AUTHORIZATION=f"bearer  {admin_token} ").status_code == 200


@pytest.mark.django_db
@pytest.mark.parametrize(
    "thread, body, status",
    [
        ("%00", b'{"approved": true}', 404),
        ("x%00y", b'{"approved": true}', 404),
        ("a" * 5000, b'{"approved": true}', 404),
        ("%ED%A0%80", b'{"approved": true}', 404),
        ("x", b"[" * 5000, 400),
        ("x", b'{"approved": NaN}', 400),
        ("x", b'{"approved": true, "note": "a\\u0000b"}', 400),
        ("x", b"\xff\xfe", 400),
        ("x", b'{"approved": true, "note": "' + b"a" * (5 * 1024 * 1024) + b'"}', 413),
    ],
    ids=[
        "NUL thread",
        "NUL inside",
        "long thread",
        "surrogate thread",
        "deep body",
        "NaN",
        "NUL note",
        "not UTF-8",
        "too large",
    ],
)
def test_the_rest_admin_api_answers_malformed_input_with_a_4xx_not_a_500(admin_token, thread, body, status):
    client = Client(raise_request_exception=False)
    response = client.post(
        f"/api/admin/approvals/{thread}",
        body,
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {admin_token}",
    )
    assert response.status_code == status, response.content
    assert response["Content-Type"] == "application/json"


# --- production settings ---------------------------------------------------------------------------------


def _production_env(tmp_path: Path, **settings: str) -> dict[str, str]:
    """This process's environment with the production settings of the README's "Production"."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "SECURE_", "SESSION_", "CSRF_"))}
    env.pop("SECRET_KEY", None)
    env.update(DEBUG="False", HTTPS="true", HITL_VAR_DIR=str(tmp_path), DJANGO_SETTINGS_MODULE="hitl_project.settings")
    env.update(settings)
    return env


def _check_deploy(env: dict[str, str]) -> subprocess.CompletedProcess:
    return python("manage.py", "check", "--deploy", "--fail-level", "WARNING", env=env)


def test_check_deploy_is_clean_with_the_production_environment(tmp_path):
    alphabet = string.ascii_letters + string.digits + "!@#%^&*(-_=+)"
    secret_key = "".join(secrets.choice(alphabet) for _ in range(50))
    done = _check_deploy(_production_env(tmp_path, SECRET_KEY=secret_key, ALLOWED_HOSTS="example.com"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "System check identified no issues (0 silenced)." in done.stdout, done.stdout + done.stderr
    assert "WARNINGS" not in done.stdout + done.stderr


def test_check_deploy_warns_when_production_has_no_secret_key_of_its_own(tmp_path):
    # Each host would make its own key, and a requestState minted by one would fail on the next.
    env = _production_env(tmp_path, ALLOWED_HOSTS="example.com")
    assert env["DATABASE_URL"].startswith("postgres")
    done = _check_deploy(env)
    assert done.returncode == 1
    assert "(hitl.W001) SECRET_KEY is not set" in done.stderr, done.stdout + done.stderr


def test_processes_starting_at_once_on_a_new_data_directory_share_one_secret_key(tmp_path):
    # uvicorn's workers (or a worker beside the web) starting together on an empty data directory.
    code = "from django.conf import settings; print(settings.SECRET_KEY)"
    for trial in range(8):
        env = _production_env(tmp_path / str(trial))
        starting = [
            subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)
            for _ in range(4)
        ]
        keys = {process.communicate(timeout=60)[0].strip() for process in starting}
        assert len(keys) == 1 and len(keys.pop()) == 50
        assert sorted(p.name for p in (tmp_path / str(trial)).iterdir() if p.name.startswith("secret_key")) == [
            "secret_key"
        ]


def test_with_https_on_plain_http_is_redirected_except_the_health_probe(tmp_path):
    # On the embedded database, migrated first, so that the probe finds everything healthy.
    code = (
        "import django; django.setup()\n"
        "from django.core.management import call_command; call_command('migrate', verbosity=0)\n"
        "from django.test import Client\n"
        "c = Client()\n"
        "print(c.get('/health/').status_code, c.get('/admin/login/').status_code)\n"
    )
    env = _production_env(tmp_path, SECRET_KEY="x" * 50, ALLOWED_HOSTS="testserver")
    del env["DATABASE_URL"], env["REDIS_URL"]
    done = python("-c", code, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["200", "301"]


def test_beat_keeps_its_schedule_file_in_the_data_directory_not_where_it_was_started(tmp_path):
    # A read-only image, or a checkout, should not gain celerybeat-schedule files.
    started_in, data = tmp_path / "cwd", tmp_path / "var"
    started_in.mkdir()
    env = _production_env(data, SECRET_KEY="x" * 50, CELERY_QUEUE=f"beat-{uuid.uuid4().hex}", PYTHONPATH=str(ROOT))
    beat = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "hitl_project", "beat", "-l", "INFO"],
        cwd=started_in,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while not list(data.glob("celerybeat-schedule*")) and time.monotonic() < deadline:
            assert beat.poll() is None
            time.sleep(0.2)
        assert list(data.glob("celerybeat-schedule*"))
        assert list(started_in.iterdir()) == []
    finally:
        beat.terminate()
        beat.wait(30)


def test_a_dot_env_file_beside_manage_py_sets_the_data_directory_too(tmp_path):
    # settings.py reads the .env two levels above itself: run a copy of it in a scratch project, so
    # the test never touches the checkout's own .env.
    (tmp_path / "hitl_project").mkdir()
    (tmp_path / "hitl_project" / "settings.py").write_text((ROOT / "hitl_project" / "settings.py").read_text())
    data = tmp_path / "elsewhere"
    (tmp_path / ".env").write_text(f"HITL_VAR_DIR={data}\n")
    env = {k: v for k, v in os.environ.items() if k != "HITL_VAR_DIR"}
    code = "import runpy; print(runpy.run_path('hitl_project/settings.py')['VAR_DIR'])"
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(data)
    assert (data / "static").is_dir() and not (tmp_path / "var").exists()


def test_comma_separated_settings_ignore_the_spaces_around_their_items(tmp_path):
    env = {
        **os.environ,
        "HITL_VAR_DIR": str(tmp_path),
        "ALLOWED_HOSTS": "hitl.example.com, 127.0.0.1 ,",
        "CSRF_TRUSTED_ORIGINS": "https://hitl.example.com, https://admin.example.com",
        "MCP_ALLOWED_ORIGINS": "https://app.example.com, http://localhost",
    }
    code = (
        "import runpy; s = runpy.run_path('hitl_project/settings.py');"
        "print(s['ALLOWED_HOSTS'], s['CSRF_TRUSTED_ORIGINS'], s['MCP_ALLOWED_ORIGINS'], sep='\\n')"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "['hitl.example.com', '127.0.0.1']",
        "['https://hitl.example.com', 'https://admin.example.com']",
        "['https://app.example.com', 'http://localhost']",
    ]


def test_an_empty_number_or_flag_in_the_environment_or_in_dot_env_means_its_default(tmp_path):
    # A copy of settings.py in a scratch project, as above, so that the .env is the scratch one.
    (tmp_path / "hitl_project").mkdir()
    (tmp_path / "hitl_project" / "settings.py").write_text((ROOT / "hitl_project" / "settings.py").read_text())
    (tmp_path / ".env").write_text("MCP_RUN_WAIT_SECONDS=\nMCP_THREADS_ENABLED=\n")
    env = {
        **{k: v for k, v in os.environ.items() if k not in ("MCP_RUN_WAIT_SECONDS", "MCP_THREADS_ENABLED")},
        "HITL_VAR_DIR": str(tmp_path / "var"),
        "DATABASE_URL": "postgres://hitl@db.example/hitl",
        "MCP_DB_THREADS": "",
        "CONN_MAX_AGE": " ",
        "CONN_HEALTH_CHECKS": "",
    }
    code = (
        "import runpy; s = runpy.run_path('hitl_project/settings.py'); db = s['DATABASES']['default'];"
        "print(s['MCP_DB_THREADS'], db['CONN_MAX_AGE'], db['CONN_HEALTH_CHECKS'],"
        " s['MCP_RUN_WAIT_SECONDS'], s['MCP_THREADS_ENABLED'])"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["8", "60", "True", "60.0", "True"]


@pytest.mark.parametrize(
    "name, value, message",
    [
        ("MCP_DB_THREADS", "abc", "MCP_DB_THREADS='abc' is not an integer"),
        ("APPROVAL_WAIT_SECONDS", "soon", "APPROVAL_WAIT_SECONDS='soon' is not a number"),
    ],
)
def test_a_number_setting_that_is_not_a_number_stops_startup_with_one_line_naming_it(tmp_path, name, value, message):
    env = {**os.environ, "HITL_VAR_DIR": str(tmp_path), name: value}
    done = subprocess.run(
        [sys.executable, "manage.py", "check"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode != 0
    assert done.stderr.splitlines()[-1] == f"django.core.exceptions.ImproperlyConfigured: {message}"
    assert "ValueError" not in done.stderr
