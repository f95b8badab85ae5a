"""The hosted answer page: one open round's questions as a form a person answers in a browser,
and, for the person who answered, what happens next. A wire of its own (docs/architecture.md,
"The gateway's packages"): it renders a round as a page, and hands the answers to the core's claim
(`tool_calls.answer_in_full`), the one every answer goes through.

    GET  /answer/<link>/   the round asks: its form. Answered, and this browser answered it (or sent
                           the same answers): the next round's page, "the agent is working", "waiting
                           for staff", or the result. Anything else: the refusal page.
    POST /answer/<link>/   (CSRF-protected) the answers: claimed once however many race, then a
                           redirect to the GET; an invalid answer: the form again, with the message a
                           client's inputResponses answer gets.

Every refusal is the same page with the same status (404), whatever the reason, so a link tells
its holder nothing about rounds it was not minted for. The link is never logged
(hitl_project/logs.py redacts it from Django's and uvicorn's lines).

With MCP_ANSWER_PAGE_LOGIN=caller, a link opens its pages only in a browser logged in as the Django
user whose MCP token made the call (2025-11-25, elicitation, "Phishing": the server verifies the
identity of the user who opens the URL before accepting information). A browser not logged in is
sent to log in (GET /answer/login/?next=<the page>); one logged in as anybody else, and every
browser for a call whose caller is no user, gets the page that says so (403).
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.views import LoginView, redirect_to_login
from django.core import signing
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBase, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.csrf import csrf_protect
from django.views.decorators.http import require_http_methods

from graph_runtime.registry import get_graph
from mcp_gateway import limits
from mcp_gateway.auth import user_id_of
from mcp_gateway.calls import tool_calls
from mcp_gateway.models import Round, ToolCall
from mcp_gateway.protocol import RpcError
from mcp_gateway.wires.pages import forms, links

# The calls this browser answered a round of: a signed cookie, so what happens next is shown to
# the person who answered, and a link read by anyone else after that shows nothing.
FOLLOWED = "answer_pages"
FOLLOWED_SALT = "hitl-mcp.answer-page.followed"
FOLLOWED_MOST = 20
# The cookie outlives any call it names (a call waits for staff for days): each call's own
# lifetime decides how long its page is shown.
FOLLOWED_FOR = timedelta(days=30)
# How often a page that waits (the agent works, staff decide) reads the call again.
REFRESH_SECONDS = 2


def _page(request: HttpRequest, template: str, context: dict[str, Any], status: int = 200) -> HttpResponse:
    response = render(request, f"answer_pages/{template}", context, status=status)
    # The page's own address is the capability: never sent on to a site a URL question links to.
    # Same-origin, not no-referrer: the browser would then send the form's POST with `Origin:
    # null`, which Django's CSRF check refuses.
    response["Referrer-Policy"] = "same-origin"
    return response


def _refused(request: HttpRequest) -> HttpResponse:
    return _page(request, "refused.html", {}, status=404)


def _followed(request: HttpRequest) -> list[str]:
    try:
        ids = json.loads(request.get_signed_cookie(FOLLOWED, salt=FOLLOWED_SALT, max_age=FOLLOWED_FOR) or "[]")
    except (KeyError, signing.BadSignature, ValueError):
        return []
    return [i for i in ids if isinstance(i, str)] if isinstance(ids, list) else []


def _follow(request: HttpRequest, response: HttpResponse, call: ToolCall) -> None:
    ids = [i for i in _followed(request) if i != str(call.pk)] + [str(call.pk)]
    response.set_signed_cookie(
        FOLLOWED,
        json.dumps(ids[-FOLLOWED_MOST:]),
        salt=FOLLOWED_SALT,
        max_age=int(FOLLOWED_FOR.total_seconds()),
        path=request.path.rsplit("/", 2)[0] + "/",  # the answer pages' own path, wherever mounted
        secure=request.is_secure(),
        httponly=True,
        samesite="Lax",
    )


def refused_by_csrf(request: HttpRequest) -> HttpResponse:
    """Django's CSRF check refused a POST of the page (a form left open past its cookie, a form
    posted from elsewhere): the page says so in its own words, and answers nothing."""
    return _page(request, "stale_form.html", {}, status=403)


def _who_asked(call: ToolCall) -> dict[str, str]:
    """Which client and tool asked: the caller's account where it is a user, the client as it named
    itself when the call started, the tool and its description (docs/security.md, "Answer pages":
    the person checks whom they answer)."""
    caller = call.caller
    if (user_id := user_id_of(call.caller)) is not None:
        user = get_user_model().objects.filter(pk=user_id).first()
        caller = user.get_username() if user is not None else caller
    registered = get_graph(call.graph)
    return {
        "caller": caller,
        "client": _client_named(call.client_info or {}),
        "tool": call.tool_name,
        "description": registered.description if registered is not None else "",
    }


def _client_named(info: dict[str, str]) -> str:
    """The client as a person reads it, "Claude Desktop (claude-ai 0.9)": its title, then its name
    and version; "" when it declared none. Its own words (cut short when the call started), escaped
    by the template."""
    named = " ".join(part for part in (info.get("name"), info.get("version")) if part)
    title = info.get("title")
    return f"{title} ({named})" if title and named and title != info.get("name") else named


@never_cache
@csrf_protect
@require_http_methods(["GET", "POST"])
def answer_page(request: HttpRequest, token: str) -> HttpResponse:
    if settings.MCP_ANSWER_PAGES != "on":
        raise Http404
    link = links.verified(token)
    if link is None:
        return _refused(request)
    if (not_the_caller := _login_refusal(request, link.round.call)) is not None:
        return not_the_caller
    if request.method == "POST":
        return _answer(request, link)
    if link.open:
        return _form(request, link.round)
    if str(link.round.call_id) in _followed(request):
        return _next(request, link.round)
    return _refused(request)


def _login_refusal(request: HttpRequest, call: ToolCall) -> HttpResponse | None:
    """MCP_ANSWER_PAGE_LOGIN=caller: None when this browser is logged in as the call's caller, else
    what it gets instead. Checked before anything of the call is shown or answered, on every page
    of the link."""
    if settings.MCP_ANSWER_PAGE_LOGIN != "caller":
        return None
    user_id = user_id_of(call.caller)
    if user_id is not None and request.user.is_authenticated and request.user.pk == user_id:
        return None
    if user_id is not None and not request.user.is_authenticated:
        response = redirect_to_login(request.path, login_url=reverse("answer_page_login"))
        response["Referrer-Policy"] = "same-origin"
        return response
    # Logged in as somebody else, or a caller the page cannot ask to log in (no Django user): the
    # same page, naming nobody.
    return _page(request, "not_yours.html", {"user_call": user_id is not None}, status=403)


class _Login(LoginView):
    template_name = "answer_pages/login.html"

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        if settings.MCP_ANSWER_PAGES != "on" or settings.MCP_ANSWER_PAGE_LOGIN != "caller":
            raise Http404
        response = super().dispatch(request, *args, **kwargs)
        # Its own address carries the page's link in `next`: never sent on as a Referer.
        response["Referrer-Policy"] = "same-origin"
        return response

    def get_default_redirect_url(self) -> str:
        return reverse("home")


login = _Login.as_view()


def _form(request: HttpRequest, round_: Round, *, error: RpcError | None = None, status: int = 200) -> HttpResponse:
    outcome = round_.outcome or {}
    shown = forms.questions_of(outcome.get("requests", {}), request.POST if error is not None else None)
    problem = ""
    if error is not None:
        detail = (error.data or {}).get("detail") if isinstance(error.data, dict) else None
        key = (error.data or {}).get("key") if isinstance(error.data, dict) else None
        text = f"{error.message}: {detail}" if detail else error.message
        for question in shown:
            if question.key == key:
                question.error = text
        problem = text
    rejected = outcome.get("rejected")
    return _page(
        request,
        "round.html",
        {
            "asked": _who_asked(round_.call),
            "questions": shown,
            "several": len(shown) > 1,
            "problem": problem,
            "rejected": _rejection(rejected) if isinstance(rejected, dict) else "",
            "expires_at": round_.call.expires_at,
        },
        status=status,
    )


def _rejection(rejected: dict[str, Any]) -> str:
    """Why LangGraph's own validation refused the answers the call resumed with, which asks again."""
    detail = (rejected.get("data") or {}).get("detail")
    return f"{rejected.get('message')}: {detail}" if detail else str(rejected.get("message"))


def _answer(request: HttpRequest, link: links.Verified) -> HttpResponse:
    round_ = link.round
    if not link.open:
        if str(round_.call_id) in _followed(request):
            return HttpResponseRedirect(request.path, status=303)
        return _refused(request)
    responses = forms.responses_of((round_.outcome or {}).get("requests", {}), request.POST)
    try:
        limits.check_input_responses(responses)
        following = tool_calls.answer_in_full(round_, responses)
    except RpcError as exc:
        return _form(request, round_, error=exc, status=400)
    if following is None:
        # Another submission claimed the round first. The same answers sent twice (a double
        # press, a second tab) are the same person's: they see what that claim brought, as a
        # client that sends the same answers again gets the same outcome.
        claimed = Round.objects.filter(pk=round_.pk).values_list("answers", flat=True).first()
        if claimed != responses:
            return _refused(request)
    response = HttpResponseRedirect(request.path, status=303)
    _follow(request, response, round_.call)
    return response


def _next(request: HttpRequest, answered: Round) -> HttpResponse:
    """What happens after the round this browser answered: the call's latest round and status."""
    call = ToolCall.objects.filter(pk=answered.call_id).first()
    latest = Round.objects.filter(call_id=answered.call_id).order_by("-number").first()
    if call is None or latest is None or call.expires_at <= timezone.now():
        return _refused(request)
    latest.call = call
    context: dict[str, Any] = {"asked": _who_asked(call), "refresh": 0}
    outcome = latest.outcome or {}
    if latest.state == Round.State.ASKING:
        # The agent asks again: the next round's page, under a link of its own.
        return HttpResponseRedirect(links.path_for(latest), status=303)
    if latest.state in (Round.State.RUNNING, Round.State.ANSWERED):
        context.update(state="working", progress=call.progress, refresh=REFRESH_SECONDS)
    elif outcome.get("handed_over") and call.status == ToolCall.Status.AWAITING_STAFF:
        context.update(
            state="staff",
            notice=_texts(outcome.get("result", {})),
            progress=call.progress,
            refresh=REFRESH_SECONDS,
        )
    elif outcome.get("handed_over"):
        final = call.final_outcome or {}
        context.update(state="ended", staff=True, result=_readable(final.get("result", {})))
    elif outcome.get("kind") == "breakpoint":
        context.update(state="ended", result=_readable({"structuredContent": outcome.get("values", {})}))
    else:
        context.update(state="ended", result=_readable(outcome.get("result", {})))
    return _page(request, "next.html", context)


def _texts(result: dict[str, Any]) -> str:
    blocks = result.get("content")
    if not isinstance(blocks, list):
        return ""
    return "\n".join(b["text"] for b in blocks if isinstance(b, dict) and isinstance(b.get("text"), str))


def _readable(result: dict[str, Any]) -> dict[str, Any]:
    """A CallToolResult as a person reads it: the graph's declared output (its structuredContent)
    field by field, else its text; an error result's text as the error."""
    if result.get("isError"):
        return {"error": _texts(result) or "The tool failed."}
    data = result.get("structuredContent")
    if isinstance(data, dict) and data:
        rows = [
            (str(k), v if isinstance(v, str) else json.dumps(v, indent=2, ensure_ascii=False)) for k, v in data.items()
        ]
        return {"rows": rows}
    return {"text": _texts(result)}
