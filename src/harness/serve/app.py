"""The ASGI application: one agent, its routes, its limits and its web page.

:func:`create_app` takes an agent that is already built (the caller keeps and closes it) or a
function that opens one (``harness serve`` passes that, so each worker process builds its own
agent at startup and closes it at shutdown, after the turns in flight have ended).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from importlib import resources

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from harness.agent import HarnessAgent
from harness.errors import HarnessError, RequestRefused
from harness.serve.api import native_router
from harness.serve.config import DEFAULT_SERVE, ServeConfig
from harness.serve.guard import RequestGuard
from harness.serve.http import HeaderLimit, RequestLog, error_response
from harness.serve.openai_api import openai_router
from harness.serve.responses_api import responses_router
from harness.serve.state import ServeState
from harness.serve.turns import Turns, error_code

__all__ = ["AgentOpener", "create_app"]

AgentOpener = Callable[[], contextlib.AbstractAsyncContextManager[HarnessAgent]]
"""Opens the served agent at startup and closes it at shutdown."""

logger = logging.getLogger("harness.serve")

_PAGE = "index.html"


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
            state = ServeState(Turns(served, config), config)
            app.include_router(openai_router(state))
            app.include_router(responses_router(state))
            app.include_router(native_router(state))
            yield

    app = FastAPI(
        title="Harness",
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
    )

    @app.exception_handler(RequestRefused)
    async def refused(request: Request, exc: RequestRefused) -> JSONResponse:
        return error_response(exc.status, exc.code, exc.message)

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
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/", response_class=HTMLResponse)
    async def page() -> Response:
        return HTMLResponse(html, headers=_PAGE_HEADERS)

    # Every request passes the guard (Host, Origin, a JSON body) before any route reads it.
    app.add_middleware(RequestGuard, allowed_hosts=_allowed_hosts(config))
    app.add_middleware(HeaderLimit, max_bytes=config.max_header_bytes)
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
