"""What every endpoint shares: errors as JSON, the caller's user, bodies read within limits.

Errors have the OpenAI shape, ``{"error": {"message", "type", "code"}}``, on every endpoint, so
the ``openai`` SDK raises them with their message and a plain client reads one place.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import logging
import time
from typing import Any, Final, TypeVar

from fastapi import Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ValidationError
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from harness.errors import RequestRefused
from harness.kernel import storable
from harness.serve.config import ServeConfig

__all__ = [
    "HeaderLimit",
    "RequestLog",
    "caller",
    "error_response",
    "is_loopback",
    "json_body",
    "read_body",
]

logger = logging.getLogger("harness.serve")

ModelT = TypeVar("ModelT", bound=BaseModel)

_BEARER: Final = "bearer "


def error_response(
    status: int, code: str, message: str, *, retry_after: int | None = None
) -> JSONResponse:
    kind = "invalid_request_error" if status < 500 else "server_error"
    body = {"error": {"message": message, "type": kind, "code": code}}
    if retry_after is None and code == "session_busy":
        retry_after = 1
    headers = {"Retry-After": str(retry_after)} if retry_after is not None else None
    return JSONResponse(body, status_code=status, headers=headers)


def is_loopback(host: str | None) -> bool:
    """Whether ``host`` (an address or ``localhost``) is this machine's own."""
    if host is None:
        return False
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def caller(request: Request, config: ServeConfig) -> str | None:
    """The user the request acts for: its key's user; None on a keyless (loopback) server.

    Raises:
        RequestRefused: 401 without a known key; 403 from a non-loopback address on a
            keyless server.
    """
    if config.keys is None:
        client = request.client.host if request.client else None
        if not is_loopback(client):
            raise RequestRefused(
                403,
                "keys_required",
                "this server has no API keys and answers only this machine; start it with "
                "--keys FILE to serve other hosts",
            )
        return None
    header = request.headers.get("authorization", "")
    if not header.lower().startswith(_BEARER) or not header[len(_BEARER) :].strip():
        raise RequestRefused(
            401, "missing_api_key", "send your API key as 'Authorization: Bearer KEY'"
        )
    user = config.keys.user_for(header[len(_BEARER) :].strip())
    if user is None:
        raise RequestRefused(401, "invalid_api_key", "the API key is not known to this server")
    return user


async def read_body(request: Request, model: type[ModelT], config: ServeConfig) -> ModelT:
    """The request's JSON body as ``model``, read within the size and time limits.

    Raises:
        RequestRefused: 413 for a body over ``max_body_bytes``, 408 when it takes longer than
            ``body_timeout``, 400 for a body that is not JSON, holds text that is not text (a
            lone surrogate: refused here, not found when the session is saved), or is not of
            the model's shape.
    """
    limit = config.max_body_bytes
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise RequestRefused(413, "body_too_large", f"the request body is over {limit:,} bytes")
    chunks: list[bytes] = []
    size = 0
    try:
        async with asyncio.timeout(config.body_timeout):
            async for chunk in request.stream():
                size += len(chunk)
                if size > limit:
                    raise RequestRefused(
                        413, "body_too_large", f"the request body is over {limit:,} bytes"
                    )
                chunks.append(chunk)
    except TimeoutError:
        msg = f"the request body did not arrive within {config.body_timeout:g} s"
        raise RequestRefused(408, "body_timeout", msg) from None
    try:
        data: Any = json.loads(b"".join(chunks))
    except (ValueError, RecursionError):
        raise RequestRefused(400, "invalid_json", "the request body is not JSON") from None
    if storable(data) is not data:  # JSON may spell a lone surrogate ("\ud800"): not text
        msg = (
            "the request body holds a lone surrogate (\\ud800-\\udfff on its own), which is "
            "not text and could not be saved; send valid UTF-8 text"
        )
        raise RequestRefused(400, "invalid_text", msg)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "body"
        raise RequestRefused(400, "invalid_request", f"{where}: {first['msg']}") from None


def json_body(model: type[BaseModel]) -> dict[str, Any]:
    """A route's ``openapi_extra`` that documents its JSON body as ``model``'s schema.

    The routes read their bodies themselves (:func:`read_body`, within the limits), so FastAPI
    sees no body to document. The schema is inlined (pydantic's ``$defs`` resolved in place):
    a ``#/$defs/...`` reference would point into the OpenAPI document's root, where there are
    none.
    """
    schema = model.model_json_schema()
    definitions = schema.pop("$defs", {})
    return {
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": _inlined(schema, definitions, ())}},
        }
    }


def _inlined(value: Any, definitions: dict[str, Any], seen: tuple[str, ...]) -> Any:
    if isinstance(value, list):
        return [_inlined(item, definitions, seen) for item in value]
    if not isinstance(value, dict):
        return value
    reference = value.get("$ref")
    if isinstance(reference, str) and reference.startswith("#/$defs/"):
        name = reference.removeprefix("#/$defs/")
        rest = {k: _inlined(v, definitions, seen) for k, v in value.items() if k != "$ref"}
        if name in seen or name not in definitions:  # a recursive model: left open
            return {"type": "object", **rest}
        return {**_inlined(definitions[name], definitions, (*seen, name)), **rest}
    return {key: _inlined(item, definitions, seen) for key, item in value.items()}


class HeaderLimit:
    """Refuses a request whose headers together exceed ``max_bytes`` (431), before any route."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            size = sum(len(name) + len(value) + 4 for name, value in scope["headers"])
            if size > self.max_bytes:
                message = f"the request's headers are over {self.max_bytes:,} bytes"
                await error_response(431, "headers_too_large", message)(scope, receive, send)
                return
        await self.app(scope, receive, send)


class RequestLog:
    """One log line per request when its response ends: method, path, status, user, time."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 0

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            client = scope.get("client") or ("-", 0)
            user = scope.get("state", {}).get("user") or "-"
            logger.info(
                '%s "%s %s" %s user=%s %.1f ms',
                client[0],
                scope["method"],
                scope["path"],
                status or "-",
                user,
                (time.perf_counter() - started) * 1000,
            )
