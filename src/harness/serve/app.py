"""The ASGI application: one agent, its routes, its limits and its web page.

:func:`create_app` takes an agent that is already built (the caller keeps and closes it) or a
function that opens one (``harness serve`` passes that, so each worker process builds its own
agent at startup and closes it at shutdown, after the turns in flight have ended).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import dataclasses
import hashlib
import logging
import re
from collections.abc import AsyncIterator, Callable
from importlib import resources
from typing import TYPE_CHECKING, Any, Final

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.openapi.utils import get_openapi
from fastapi.responses import HTMLResponse, JSONResponse, Response
from pydantic import BaseModel
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.middleware.cors import CORSMiddleware

from harness.agent import HarnessAgent
from harness.errors import ConfigError, HarnessError, RequestRefused
from harness.kernel.cancelling import cancel_and_wait
from harness.serve import metrics
from harness.serve.api import (
    DecisionsRequest,
    RenameRequest,
    ReviewRequest,
    TurnRequest,
    native_router,
)
from harness.serve.config import DEFAULT_SERVE, ServeConfig
from harness.serve.conversations import Conversations
from harness.serve.events import error_code
from harness.serve.guard import RequestGuard
from harness.serve.highlight import HighlightRequest
from harness.serve.http import HeaderLimit, RequestLog, caller, error_response, json_body
from harness.serve.limits import Limiter
from harness.serve.openai_api import ChatRequest, openai_router
from harness.serve.responses_api import ResponsesRequest, responses_router
from harness.serve.state import ServeState
from harness.serve.streams import TurnStreams
from harness.serve.turns import Turns

if TYPE_CHECKING:
    from harness.serve.engine import EngineTurns

__all__ = ["AgentOpener", "create_app"]

AgentOpener = Callable[[], contextlib.AbstractAsyncContextManager[HarnessAgent]]
"""Opens the served agent at startup and closes it at shutdown."""

logger = logging.getLogger("harness.serve")

_PAGE = "index.html"


async def _engine(
    stack: contextlib.AsyncExitStack, turns: Turns, config: ServeConfig
) -> EngineTurns:
    """Connect to the durable engine and run a worker of its queue for the served agent."""
    from harness.durable import EngineConfig, TemporalEngine
    from harness.serve.engine import EngineTurns, turn_log_observer

    assert config.engine is not None
    if not turns.agent.options.durable:
        msg = "a served agent on a durable engine must be made with durable=True"
        raise ConfigError(msg)
    engine_config = dataclasses.replace(
        EngineConfig.parse(config.engine), turn_seconds=config.turn_timeout
    )
    engine = await TemporalEngine.connect(engine_config)
    await stack.enter_async_context(
        engine.worker(turns.agent, observe=turn_log_observer(turns.agent))
    )
    return EngineTurns(turns, engine)


def create_app(agent: HarnessAgent | AgentOpener, config: ServeConfig = DEFAULT_SERVE) -> FastAPI:
    """The served agent as an ASGI application (run it with uvicorn, or ``harness serve``)."""
    # Read once, here, so no request reads a file on the event loop.
    html = resources.files("harness.serve").joinpath("static", _PAGE).read_text("utf-8")

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with contextlib.AsyncExitStack() as stack:
            served = (
                agent
                if isinstance(agent, HarnessAgent)
                else await stack.enter_async_context(agent())
            )
            turns = Turns(served, config)
            engine = await _engine(stack, turns, config) if config.engine else None
            limiter = Limiter(config.limits, served.workspace) if config.limits else None
            state = ServeState(
                TurnStreams(turns, engine, limiter),
                config,
                Conversations(served.workspace, served.sessions),
            )
            stack.push_async_callback(state.streams.aclose)  # before the agent closes
            app.include_router(openai_router(state))
            app.include_router(responses_router(state))
            app.include_router(native_router(state))
            if config.keys is not None:  # a revoked key stops working without a restart
                watching = asyncio.create_task(config.keys.watch())
                stack.push_async_callback(cancel_and_wait, watching)
            stack.callback(metrics.worker_stopped)
            yield

    app = FastAPI(
        title="Harness",
        lifespan=lifespan,
        docs_url=None,  # served below, with its own Content-Security-Policy
        redoc_url=None,
        openapi_url="/openapi.json",
    )

    def openapi() -> dict[str, Any]:
        """The schema of every route, with the JSON bodies the routes read themselves.

        Made at the first request: the routes are in by then (they are included at startup).
        """
        if app.openapi_schema is None:
            schema = get_openapi(
                title=app.title, version=app.version, description=_API_TEXT, routes=app.routes
            )
            for (method, path), model in _BODIES.items():
                operation = schema.get("paths", {}).get(path, {}).get(method.lower())
                if operation is not None and "requestBody" not in operation:
                    operation.update(json_body(model))
            # Every /v1 route wants the key: Swagger UI's "Authorize" then sends it.
            schema.setdefault("components", {})["securitySchemes"] = {
                "apiKey": {"type": "http", "scheme": "bearer", "description": "an API key"}
            }
            for path, operations in schema.get("paths", {}).items():
                if path.startswith("/v1/"):
                    for operation in operations.values():
                        operation.setdefault("security", [{"apiKey": []}])
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]

    @app.exception_handler(RequestRefused)
    async def refused(request: Request, exc: RequestRefused) -> JSONResponse:
        return error_response(exc.status, exc.code, exc.message, retry_after=exc.retry_after)

    @app.exception_handler(HarnessError)
    async def failed(request: Request, exc: HarnessError) -> JSONResponse:
        # What the harness could not do before a turn began: its store or disk failed, say.
        logger.error("%s %s failed: %s", request.method, request.url.path, exc)
        return error_response(503, error_code(exc), str(exc))

    @app.exception_handler(Exception)
    async def broken(request: Request, exc: Exception) -> JSONResponse:
        logger.error("%s %s failed", request.method, request.url.path, exc_info=exc)
        return error_response(500, "internal_error", "the server failed; see its log")

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = "not_found" if exc.status_code == 404 else "http_error"
        return error_response(exc.status_code, code, str(exc.detail))

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        return error_response(400, "invalid_request", f"{where}: {first['msg']}")

    @app.get("/healthz")
    @app.get("/health")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/metrics", include_in_schema=False)
    async def prometheus(request: Request) -> Response:
        if not config.metrics_open:  # any valid key; a keyless server: this machine only
            request.scope.setdefault("state", {})["user"] = caller(request, config)
        text = await asyncio.to_thread(metrics.metrics_text)  # reads files with --workers N
        return Response(text, media_type=metrics.CONTENT_TYPE)

    @app.get("/docs", include_in_schema=False)
    async def docs() -> Response:
        return HTMLResponse(_DOCS_PAGE, headers=_DOCS_HEADERS)

    @app.get("/", response_class=HTMLResponse)
    async def page() -> Response:
        return HTMLResponse(html, headers=_PAGE_HEADERS)

    if config.cors_origins:  # inside the guard: an unlisted page is refused before CORS
        app.add_middleware(
            CORSMiddleware,
            allow_origins=list(config.cors_origins),
            allow_methods=["GET", "POST", "PATCH", "DELETE", "OPTIONS"],
            # Whatever headers a listed page's client sends: the official SDKs add their own
            # (the openai JS SDK's x-stainless-*, a retry count, a timeout), which change from
            # one release to the next, and none of them grants anything here.
            allow_headers=["*"],
            expose_headers=["X-Harness-Session"],
            allow_credentials=False,  # keys travel in Authorization; no cookie means anything
        )
    # Every request passes the guard (Host, Origin, a JSON body) before any route reads it.
    app.add_middleware(
        RequestGuard, allowed_hosts=_allowed_hosts(config), cors_origins=config.cors_origins
    )
    app.add_middleware(HeaderLimit, max_bytes=config.max_header_bytes)
    app.add_middleware(metrics.HttpMetrics)
    app.add_middleware(RequestLog)  # added last, so it runs first and logs refusals too
    return app


def _allowed_hosts(config: ServeConfig) -> tuple[str, ...] | None:
    """The non-loopback Host names the guard lets through; None for every one.

    Without keys, only those the operator listed: a keyless server is for this machine, and
    a name it does not know is what DNS rebinding looks like. With keys and no list, every
    name: the key is the boundary, and the server may be reached by names it cannot know.
    """
    if config.allowed_hosts is not None:
        return config.allowed_hosts
    return None if config.keys is not None else ()


_BODIES: Final[dict[tuple[str, str], type[BaseModel]]] = {
    ("POST", "/v1/chat/completions"): ChatRequest,
    ("POST", "/v1/responses"): ResponsesRequest,
    ("POST", "/v1/sessions/{session_id}/turns"): TurnRequest,
    ("POST", "/v1/sessions/{session_id}/approvals"): DecisionsRequest,
    ("PATCH", "/v1/sessions/{session_id}"): RenameRequest,
    ("POST", "/v1/memory/review/{entry_id}"): ReviewRequest,
    ("POST", "/v1/highlight"): HighlightRequest,
}
"""The JSON body each route reads (by ``read_body``), for the OpenAPI schema."""

_API_TEXT: Final = (
    "A harness agent over HTTP: the OpenAI-compatible API and the native API (docs/serve.md). "
    "Send your key as 'Authorization: Bearer KEY'."
)

_DOCS_PAGE: Final = bytes(
    get_swagger_ui_html(
        openapi_url="/openapi.json",
        title="Harness API",
        swagger_ui_parameters={"validatorUrl": None},  # no badge fetched from a third party
    ).body
).decode()
_CDN: Final = "https://cdn.jsdelivr.net"
_INLINE_SCRIPTS: Final = " ".join(
    "'sha256-" + base64.b64encode(hashlib.sha256(script.encode()).digest()).decode() + "'"
    for script in re.findall(r"<script>(.*?)</script>", _DOCS_PAGE, flags=re.DOTALL)
)
_DOCS_HEADERS: Final = {
    # /docs only: Swagger UI's script and style from its CDN, its one inline script by hash,
    # requests to this server alone. The main page keeps its own policy (no other origin).
    "Content-Security-Policy": (
        f"default-src 'none'; script-src {_CDN} {_INLINE_SCRIPTS}; "
        f"style-src {_CDN} 'unsafe-inline'; img-src 'self' data: https://fastapi.tiangolo.com; "
        "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}

_PAGE_HEADERS = {
    # The page is self-contained: its own script and style, no other origin, no framing.
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self' 'unsafe-inline'; style-src 'unsafe-inline'; "
        "connect-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
