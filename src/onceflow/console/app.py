"""The console's web application (Starlette, server-rendered Jinja2 templates).

Every page reads the cluster through one ``ClusterSession`` (the same settings every CLI
takes), on a worker thread: the admin calls block. Read-only unless started with
``allow_writes``; a write is a POST carrying the page's form token (so another site
cannot make a browser write), done as the console's principal, so the cluster's ACLs
decide. With ``token`` set (required when bound beyond loopback) every request must
carry it: once as ``?token=``, which sets a cookie, or as ``Authorization: Bearer``.

A failure is a page with one line, never a trace: what ``onceflow.admin`` raises says
what happened (unreachable, not authorized, not found, refused); anything else is logged
with its traceback and shown as an internal error.
"""

from __future__ import annotations

import functools
import hmac
import logging
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from importlib.resources import files
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware
from starlette.requests import Request
from starlette.responses import FileResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from onceflow.admin.connect import ClusterSession
from onceflow.admin.errors import AdminError, NotAuthorized, NotFound, Unreachable
from onceflow.admin.offset_reset import ResetTarget, execute_reset, plan_reset
from onceflow.admin.transactions import DEFAULT_MAX_TRANSACTION_TIMEOUT_MIN
from onceflow.console import (
    dead_letters,
    groups_page,
    messages_page,
    reports,
    topics_page,
    transactions_page,
)

log = logging.getLogger(__name__)
TOKEN_COOKIE = "onceflow_console_token"
TOPICS_PER_PAGE = 100
GROUPS_PER_PAGE = 50
REFRESH_S = 3


class BadInput(ValueError):
    """Something typed in a form or a URL that cannot be used; its message says why."""


@dataclass
class ConsoleSettings:
    session: ClusterSession
    allow_writes: bool = False
    token: str | None = None
    reports: Path | None = None
    dead_letter_topics: tuple[str, ...] = ()
    max_transaction_timeout_min: int = DEFAULT_MAX_TRANSACTION_TIMEOUT_MIN
    form_token: str = field(default_factory=lambda: secrets.token_urlsafe(24))


def create_app(settings: ConsoleSettings) -> Starlette:
    templates = Jinja2Templates(directory=str(files("onceflow.console") / "templates"))
    templates.env.globals.update(
        settings=settings, refresh_s=REFRESH_S, when=_when, bar=_bar, quote=_quote
    )

    def page(template: str, status: int = 200) -> Callable:
        """A GET handler: ``load(request) -> context`` on a worker thread, then the page."""

        def wrap(load: Callable[[Request], dict[str, Any]]) -> Callable:
            @functools.wraps(load)
            async def handle(request: Request) -> Response:
                try:
                    context = await run_in_threadpool(_in_one_view, session, load, request)
                except Exception as error:
                    return _failure(templates, request, error)
                context.setdefault("notice", request.query_params.get("notice"))
                return templates.TemplateResponse(request, template, context, status_code=status)

            return handle

        return wrap

    def write(action: Callable[[Request, dict[str, str]], str]) -> Callable:
        """A POST handler: checks, ``action(request, form) -> where to go``, a redirect."""

        async def handle(request: Request) -> Response:
            form = {key: str(value) for key, value in (await request.form()).items()}
            if not settings.allow_writes:
                return _failure(
                    templates,
                    request,
                    PermissionError(
                        "this console is read-only: start it with --allow-writes to change "
                        "the cluster"
                    ),
                )
            if not hmac.compare_digest(form.get("form_token", ""), settings.form_token):
                return _failure(
                    templates,
                    request,
                    PermissionError(
                        "the form is stale or from another site: reload the page and try again"
                    ),
                )
            try:
                return RedirectResponse(await run_in_threadpool(action, request, form), 303)
            except Exception as error:
                return _failure(templates, request, error)

        return handle

    session = settings.session

    @page("overview.html")
    def overview(request: Request) -> dict[str, Any]:
        search = request.query_params.get("search", "")
        first = _number(request.query_params.get("first", "0"), "first", minimum=0)
        view = topics_page.overview(session, [first, TOPICS_PER_PAGE], search)
        return {"view": view, "search": search, "first": first, "per_page": TOPICS_PER_PAGE}

    @page("topic.html")
    def topic(request: Request) -> dict[str, Any]:
        return {"view": topics_page.topic(session, request.path_params["name"])}

    @page("messages.html")
    def messages(request: Request) -> dict[str, Any]:
        name, query = request.path_params["name"], request.query_params
        partition = _number(query.get("partition", "0"), "partition", minimum=0)
        isolation = query.get("isolation", messages_page.READ_COMMITTED)
        limit = _number(query.get("limit", "50"), "limit", minimum=1)
        offset = None
        if query.get("timestamp"):
            moment = _timestamp(query["timestamp"])
            offset = messages_page.offset_for(session, name, partition, moment)
        elif query.get("offset"):
            offset = _number(query["offset"], "offset", minimum=0)
        view = messages_page.browse(session, name, partition, offset, isolation, limit)
        return {"view": view, "query": query}

    @page("groups.html")
    def groups(request: Request) -> dict[str, Any]:
        search = request.query_params.get("search", "")
        internal = request.query_params.get("internal") == "1"
        first = _number(request.query_params.get("first", "0"), "first", minimum=0)
        rows, total = groups_page.groups(session, [first, GROUPS_PER_PAGE], search, internal)
        return {
            "rows": rows,
            "total": total,
            "search": search,
            "first": first,
            "per_page": GROUPS_PER_PAGE,
            "internal": internal,
        }

    @page("group.html")
    def group(request: Request) -> dict[str, Any]:
        return {"view": groups_page.group(session, request.path_params["group"])}

    def reset(request: Request, form: dict[str, str]) -> str:
        group_id = request.path_params["group"]
        target = _target(form.get("to", ""), form.get("value", ""))
        planned = plan_reset(session, group_id, None, target)
        execute_reset(session, group_id, planned)
        return f"/groups/{_quote(group_id)}?notice=" + _quote(
            f"reset {len(planned)} partitions of {group_id} to {form.get('to')}"
        )

    @page("transactions.html")
    def transactions(request: Request) -> dict[str, Any]:
        limit = settings.max_transaction_timeout_min
        return {"view": transactions_page.transactions(session, limit)}

    def abort(request: Request, form: dict[str, str]) -> str:
        done = transactions_page.abort(
            session,
            form.get("topic", ""),
            _number(form.get("partition", ""), "partition", 0),
            _number(form.get("start_offset", ""), "start offset", 0),
        )
        return "/transactions?notice=" + _quote(done)

    @page("dead_letters.html")
    def dead_letter_list(request: Request) -> dict[str, Any]:
        names = dead_letters.dead_letter_topics(session, settings.dead_letter_topics)
        views = [topics_page.topic(session, name) for name in names]
        return {"views": views}

    @page("dead_letter.html")
    def dead_letter(request: Request) -> dict[str, Any]:
        name, query = request.path_params["name"], request.query_params
        partition = _number(query.get("partition", "0"), "partition", minimum=0)
        offset = _number(query["offset"], "offset", 0) if query.get("offset") else None
        view = dead_letters.failed(session, name, partition, offset)
        return {
            "view": view,
            "source_of": dead_letters.source_of,
            "error_of": dead_letters.error_of,
        }

    def replay(request: Request, form: dict[str, str]) -> str:
        name = request.path_params["name"]
        count = dead_letters.replay(session, name)
        return f"/dead-letters/{_quote(name)}?notice=" + _quote(
            f"replayed {count} records of {name} to their source topics in one transaction"
            if count
            else f"nothing to replay: every record of {name} was replayed before"
        )

    @page("reports.html")
    def report_list(request: Request) -> dict[str, Any]:
        return {"found": reports.listing(settings.reports)}

    @page("report.html")
    def report_page(request: Request) -> dict[str, Any]:
        return {"report": reports.render(settings.reports, request.path_params["path"])}

    async def report(request: Request) -> Response:
        """A report rendered, or a file it shows (a heat map next to its Markdown)."""
        relative = request.path_params["path"]
        if not relative.endswith(reports.SHOWN):
            path = reports.resolve(settings.reports, relative)
            if path is None:
                return PlainTextResponse("no such file in the reports folder", 404)
            return FileResponse(path)
        return await report_page(request)

    async def health(_request: Request) -> Response:
        return PlainTextResponse("ok")

    routes = [
        Route("/", overview),
        Route("/topics/{name:path}/messages", messages),
        Route("/topics/{name:path}", topic),
        Route("/groups", groups),
        Route("/groups/{group:path}/reset", write(reset), methods=["POST"]),
        Route("/groups/{group:path}", group),
        Route("/transactions", transactions),
        Route("/transactions/abort", write(abort), methods=["POST"]),
        Route("/dead-letters", dead_letter_list),
        Route("/dead-letters/{name:path}/replay", write(replay), methods=["POST"]),
        Route("/dead-letters/{name:path}", dead_letter),
        Route("/reports", report_list),
        Route("/reports/{path:path}", report),
        Route("/health", health),
        Mount("/static", StaticFiles(directory=str(files("onceflow.console") / "static"))),
    ]
    middleware = [Middleware(BaseHTTPMiddleware, dispatch=_token_check(settings.token))]
    return Starlette(routes=routes, middleware=middleware)


def _in_one_view(session: ClusterSession, load: Callable, request: Request) -> Any:
    """A page's questions, answered from one reading of the cluster's metadata."""
    with session.one_view():
        return load(request)


def _token_check(token: str | None) -> Callable:
    async def dispatch(request: Request, call_next: Callable) -> Response:
        if token is None or request.url.path == "/health":
            return await call_next(request)
        given = request.query_params.get("token")
        if given is not None and hmac.compare_digest(given, token):
            response = RedirectResponse(request.url.remove_query_params("token"), 303)
            response.set_cookie(TOKEN_COOKIE, token, httponly=True, samesite="strict")
            return response
        bearer = request.headers.get("authorization", "").removeprefix("Bearer ")
        cookie = request.cookies.get(TOKEN_COOKIE, "")
        if hmac.compare_digest(cookie, token) or hmac.compare_digest(bearer, token):
            return await call_next(request)
        return PlainTextResponse(
            "this console needs its token: open the URL it printed (…/?token=…)", 401
        )

    return dispatch


def _failure(templates: Jinja2Templates, request: Request, error: BaseException) -> Response:
    if isinstance(error, NotFound):
        status, kind = 404, "not found"
    elif isinstance(error, NotAuthorized | PermissionError):
        status, kind = 403, "not allowed"
    elif isinstance(error, Unreachable):
        status, kind = 503, "cluster unreachable"
    elif isinstance(error, AdminError | BadInput | ValueError):
        status, kind = 400, "cannot do that"
    else:
        log.exception("console page %s failed", request.url.path)
        status, kind = 500, "internal error (the console's log has the details)"
    message = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    return templates.TemplateResponse(
        request, "error.html", {"kind": kind, "message": message}, status_code=status
    )


def _number(text: str, what: str, minimum: int | None = None) -> int:
    try:
        value = int(text)
    except ValueError:
        raise BadInput(f"{what} must be a whole number, not {text!r}") from None
    if minimum is not None and value < minimum:
        raise BadInput(f"{what} must be at least {minimum}, not {value}")
    return value


def _timestamp(text: str) -> int:
    """A date-time typed in the browser (ISO 8601; a bare number is epoch milliseconds)."""
    if text.isdigit():
        return int(text)
    try:
        return int(datetime.fromisoformat(text).timestamp() * 1000)
    except ValueError:
        raise BadInput(f"timestamp {text!r}: expected YYYY-MM-DDTHH:MM[:SS] or epoch ms") from None


def _target(to: str, value: str) -> ResetTarget:
    if to in ("earliest", "latest"):
        return ResetTarget(to)
    if to == "offset":
        return ResetTarget("offset", _number(value, "offset", 0))
    if to == "datetime":
        return ResetTarget("datetime", _timestamp(value))
    raise BadInput(f"reset to {to!r}: choose earliest, latest, offset or datetime")


def _when(ms: int | None) -> str:
    if ms is None or ms < 0:
        return ""
    return datetime.fromtimestamp(ms / 1000).strftime("%Y-%m-%d %H:%M:%S")


def _bar(start: int | None, stable: int | None, end: int | None, width: int = 240) -> str:
    """An SVG bar of a partition: its records, the part past the LSO marked."""
    if start is None or end is None or end <= start:
        return (
            f'<svg class="bar" width="{width}" height="12">'
            f'<rect width="{width}" height="12" class="empty"/></svg>'
        )
    stable = end if stable is None else min(max(stable, start), end)
    settled = int(width * (stable - start) / (end - start))
    return (
        f'<svg class="bar" width="{width}" height="12" role="img" '
        f'aria-label="{stable - start} readable, {end - stable} past the LSO">'
        f'<rect width="{settled}" height="12" class="stable"/>'
        f'<rect x="{settled}" width="{width - settled}" height="12" class="unstable"/></svg>'
    )


def _quote(text: str) -> str:
    from urllib.parse import quote

    return quote(text, safe="")
