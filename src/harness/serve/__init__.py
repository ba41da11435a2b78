"""Serve an agent over HTTP: an OpenAI-compatible endpoint, a streaming events API, a web page.

``harness serve`` runs it; :func:`create_app` gives the ASGI application for your own server.
Needs the ``serve`` extra (FastAPI and uvicorn). ``docs/serve.md`` documents the endpoints, the
events, the keys and what a disconnect does.
"""

from harness.models.prices import Price
from harness.serve.app import AgentOpener, create_app
from harness.serve.config import DEFAULT_SERVE, ServeConfig
from harness.serve.events import MAX_TOOL_OUTPUT_CHARS
from harness.serve.keys import KEYS_ENV, ApiKeys, add_key, digest, new_key
from harness.serve.limits import UserLimits
from harness.serve.openai_api import SESSION_HEADER

__all__ = [
    "DEFAULT_SERVE",
    "KEYS_ENV",
    "MAX_TOOL_OUTPUT_CHARS",
    "SESSION_HEADER",
    "AgentOpener",
    "ApiKeys",
    "Price",
    "ServeConfig",
    "UserLimits",
    "add_key",
    "create_app",
    "digest",
    "new_key",
]
