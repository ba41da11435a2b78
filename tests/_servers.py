"""Local HTTP servers that speak just enough OpenAI and Anthropic for the adapter tests.

Each server runs :class:`http.server.ThreadingHTTPServer` on ``127.0.0.1`` (port 0) in a
background thread. It records every request it receives (path, headers, JSON body) and answers
with the next queued :class:`Reply`; when nothing is queued it answers 500, so a test that
forgets to queue a reply fails loudly instead of hanging. Replies are written as HTTP/1.0
responses whose body ends when the connection closes, which is how a streaming server that
sends no ``Content-Length`` behaves; that lets a test close a stream at any byte it likes.

The adapters talk to these servers through the real SDKs, over real sockets, so the tests cover
the SDKs' request encoding, SSE parsing and retry logic, not a mock of them.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, TypeVar

__all__ = [
    "AnthropicServer",
    "OpenAIServer",
    "RecordedRequest",
    "RecordingServer",
    "Reply",
    "running",
]

NO_WAIT: dict[str, str] = {"retry-after-ms": "1"}
"""Headers that make the SDKs retry after one millisecond instead of their backoff."""


@dataclass(frozen=True)
class Reply:
    """One queued HTTP response."""

    status: int = 200
    body: bytes = b""
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class RecordedRequest:
    """One request as the server received it."""

    method: str
    path: str
    headers: Mapping[str, str]
    body: Any


class RecordingServer:
    """Records requests and replays queued replies; see the module docstring."""

    def __init__(self) -> None:
        self.requests: list[RecordedRequest] = []
        self._replies: deque[Reply] = deque()
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _make_handler(self))
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True
        )

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join()

    def reset(self) -> None:
        with self._lock:
            self.requests.clear()
            self._replies.clear()

    def queue(self, *replies: Reply) -> None:
        with self._lock:
            self._replies.extend(replies)

    @property
    def bodies(self) -> list[Any]:
        """The JSON bodies of the requests received so far."""
        return [request.body for request in self.requests]

    def _take(self, request: RecordedRequest) -> Reply:
        with self._lock:
            self.requests.append(request)
            if self._replies:
                return self._replies.popleft()
        return Reply(500, b'{"error": {"message": "test server: no reply queued"}}')

    # -- helpers shared by both protocols ------------------------------------------------------

    def queue_json(
        self, body: Any, *, status: int = 200, headers: Mapping[str, str] | None = None
    ) -> None:
        payload = json.dumps(body).encode()
        all_headers = {"content-type": "application/json", **(headers or {})}
        self.queue(Reply(status, payload, all_headers))

    def queue_raw_stream(self, body: bytes) -> None:
        self.queue(Reply(200, body, {"content-type": "text/event-stream"}))


class OpenAIServer(RecordingServer):
    """A chat-completions endpoint; the SDK's ``base_url`` is ``server.url + "/v1"``."""

    def queue_stream(self, chunks: Sequence[Mapping[str, Any]], *, done: bool = True) -> None:
        """Queue an SSE stream of ``chat.completion.chunk`` objects (filled in with defaults)."""
        events = [f"data: {json.dumps(_openai_chunk(chunk))}\n\n" for chunk in chunks]
        if done:
            events.append("data: [DONE]\n\n")
        self.queue_raw_stream("".join(events).encode())

    def queue_error(
        self, status: int, message: str, *, code: str | None = None, retry_now: bool = True
    ) -> None:
        """Queue an OpenAI-style error body; ``retry_now`` asks the SDK to retry after 1 ms."""
        error = {"message": message, "type": "invalid_request_error", "param": None, "code": code}
        self.queue_json({"error": error}, status=status, headers=NO_WAIT if retry_now else None)


class AnthropicServer(RecordingServer):
    """A messages endpoint; the SDK's ``base_url`` is ``server.url``."""

    def queue_stream(self, events: Sequence[Mapping[str, Any]]) -> None:
        """Queue an SSE stream of messages-API events, each named after its ``type``."""
        text = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events)
        self.queue_raw_stream(text.encode())

    def queue_error(
        self, status: int, error_type: str, message: str, *, retry_now: bool = True
    ) -> None:
        """Queue an Anthropic-style error body; ``retry_now`` asks the SDK to retry after 1 ms."""
        body = {"type": "error", "error": {"type": error_type, "message": message}}
        self.queue_json(body, status=status, headers=NO_WAIT if retry_now else None)


def _openai_chunk(chunk: Mapping[str, Any]) -> dict[str, Any]:
    base: dict[str, Any] = {
        "id": "chatcmpl-test",
        "object": "chat.completion.chunk",
        "created": 1700000000,
        "model": "gpt-test-2024",
        "choices": [],
    }
    return {**base, **chunk}


def _make_handler(server: RecordingServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length)
            try:
                body: Any = json.loads(raw) if raw else None
            except ValueError:
                body = raw.decode(errors="replace")
            headers = {key.lower(): value for key, value in self.headers.items()}
            reply = server._take(RecordedRequest(self.command, self.path, headers, body))
            self.send_response(reply.status)
            for key, value in reply.headers.items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(reply.body)
            self.wfile.flush()

        def log_message(self, format: str, *args: Any) -> None:
            """Keep the test output quiet."""

    return Handler


_S = TypeVar("_S", bound=RecordingServer)


@contextmanager
def running(server: _S) -> Iterator[_S]:
    """Run ``server`` in its background thread for the duration of the block."""
    server.start()
    try:
        yield server
    finally:
        server.stop()
