"""Local servers for benchmarks/prompt_cache.py: the Anthropic messages and OpenAI chat APIs.

Each server is :class:`http.server.ThreadingHTTPServer` on ``127.0.0.1`` (port 0) in a thread.
It answers every request from a :data:`Responder` (the benchmark's script), streamed as the real
API streams it (server-sent events that the real ``anthropic`` and ``openai`` SDKs parse), and
it accounts for prompt caching by the provider's published rules, over a simple deterministic
tokenizer: :func:`tokens` (words and punctuation of a canonical serialization).

- :class:`AnthropicCacheServer`: the prompt is a sequence of blocks in the provider's prefix
  order: each tool, each system block (a string system is one block), each content block of
  each message (a string content is one block). A cache entry is written only at a block that
  carries ``cache_control`` (a breakpoint) and only if the prefix it ends has at least
  ``min_tokens`` (1,024); more than four breakpoints are a 400, as from the real API. A request
  reads the longest cached prefix that ends at one of its breakpoints or at one of the 20 block
  boundaries before a breakpoint (the lookback). ``usage`` says what the real API says:
  ``cache_read_input_tokens`` (the prefix read), ``cache_creation_input_tokens`` (from there to
  the last breakpoint that writes) and ``input_tokens`` (the rest, after the last read or write
  point). Entries live five minutes from their last use (``"ttl": "1h"``: an hour).
- :class:`OpenAICacheServer`: automatic caching. The prompt is the token sequence of the tools
  then the messages, in order; the cached tokens are its longest common prefix with any earlier
  request, counted only from 1,024 tokens on and in steps of 128 (1,024, 1,152, ...), reported
  as ``usage.prompt_tokens_details.cached_tokens`` with ``prompt_tokens`` the whole prompt. An
  optional ``prompt_cache_key`` body field is accepted and recorded (one machine here, so it
  does not route anything).

Both keep a :class:`Accounting` per request in ``records``.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, TypeVar

__all__ = [
    "Accounting",
    "Answer",
    "AnthropicCacheServer",
    "CacheServer",
    "Call",
    "OpenAICacheServer",
    "Prompt",
    "Responder",
    "running",
    "tokens",
]

_TOKEN = re.compile(r"\w+|[^\w\s]")
MIN_TOKENS = 1024
OPENAI_STEP = 128
MAX_BREAKPOINTS = 4
LOOKBACK = 20
TTL_SECONDS = {"5m": 300.0, "1h": 3600.0}


def tokens(value: Any) -> list[str]:
    """The tokens of a JSON value: keys in sorted order (``cache_control`` left out), then
    their values; strings split into words and punctuation; numbers and booleans as written."""
    out: list[str] = []
    _walk(value, out)
    return out


def _walk(value: Any, out: list[str]) -> None:
    if isinstance(value, str):
        out.extend(_TOKEN.findall(value))
    elif isinstance(value, Mapping):
        for key in sorted(value):
            if key != "cache_control":
                out.append(str(key))
                _walk(value[key], out)
    elif isinstance(value, list | tuple):
        for item in value:
            _walk(item, out)
    elif value is not None:
        out.append(json.dumps(value))


# -- what the script sees and answers ------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Prompt:
    """A request as the script sees it: the system text and ``(role, text)`` entries.

    Roles are ``user``, ``assistant`` (one entry per assistant message) and ``tool`` (one per
    tool result), whichever protocol carried them.
    """

    system: str
    entries: tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class Call:
    """A tool call the script asks for; ``id`` is made unique per protocol by the server."""

    id: str
    name: str
    arguments: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Answer:
    text: str = ""
    calls: tuple[Call, ...] = ()


Responder = Callable[[Prompt], Answer]


@dataclass(frozen=True, slots=True)
class Accounting:
    """One request's prompt, as the server counted it."""

    prompt_tokens: int
    cache_read: int
    cache_write: int = 0
    breakpoints: int = 0
    short_breakpoints: int = 0
    """Breakpoints whose prefix is below the minimum (they write nothing)."""
    cache_key: str | None = None
    status: int = 200
    error: str = ""
    body: Any = field(default=None, repr=False)

    @property
    def uncached(self) -> int:
        return self.prompt_tokens - self.cache_read - self.cache_write


class _Failure(Exception):
    def __init__(self, status: int, body: Mapping[str, Any]) -> None:
        super().__init__(status)
        self.status = status
        self.body = body


class CacheServer:
    """What both servers share: the HTTP plumbing, the lock and the records."""

    path = ""

    def __init__(self, responder: Responder, *, min_tokens: int = MIN_TOKENS) -> None:
        self.responder = responder
        self.min_tokens = min_tokens
        self.records: list[Accounting] = []
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
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

    def handle(self, path: str, body: Any) -> tuple[int, str, bytes]:
        """(status, content type, body) of the answer to one request."""
        if path.split("?")[0] != self.path or not isinstance(body, dict):
            return 404, "application/json", b'{"error": "not found"}'
        try:
            with self._lock:
                record = self.account(body)
                self.records.append(record)
            answer = self.responder(self.prompt(body))
        except _Failure as failure:
            with self._lock:
                self.records.append(
                    Accounting(0, 0, status=failure.status, error=json.dumps(failure.body))
                )
            return failure.status, "application/json", json.dumps(failure.body).encode()
        return 200, "text/event-stream", self.stream(body, answer, record).encode()

    def account(self, body: dict[str, Any]) -> Accounting:
        raise NotImplementedError

    def prompt(self, body: dict[str, Any]) -> Prompt:
        raise NotImplementedError

    def stream(self, body: dict[str, Any], answer: Answer, record: Accounting) -> str:
        raise NotImplementedError


def _handler(server: CacheServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length)
            try:
                body: Any = json.loads(raw) if raw else None
            except ValueError:
                body = None
            status, kind, payload = server.handle(self.path, body)
            self.send_response(status)
            self.send_header("content-type", kind)
            self.end_headers()  # HTTP/1.0: the body ends when the connection closes
            self.wfile.write(payload)
            self.wfile.flush()

        def log_message(self, format: str, *args: Any) -> None:
            """Quiet."""

    return Handler


_S = TypeVar("_S", bound=CacheServer)


@contextmanager
def running(server: _S) -> Iterator[_S]:
    server.start()
    try:
        yield server
    finally:
        server.stop()


def _prefix_hashes(pieces: Sequence[Sequence[str]], seed: str) -> list[bytes]:
    """The digest of everything up to the end of each piece (tokens joined unambiguously)."""
    digest = hashlib.sha256(seed.encode())
    out = []
    for piece in pieces:
        for token in piece:
            digest.update(token.encode())
            digest.update(b"\x00")
        digest.update(b"\x01")
        out.append(digest.copy().digest())
    return out


# -- Anthropic ---------------------------------------------------------------------------------


class AnthropicCacheServer(CacheServer):
    """``POST /v1/messages``; the SDK's ``base_url`` is ``server.url``."""

    path = "/v1/messages"

    def __init__(self, responder: Responder, *, min_tokens: int = MIN_TOKENS) -> None:
        super().__init__(responder, min_tokens=min_tokens)
        self._entries: dict[bytes, float] = {}  # prefix digest -> expiry (monotonic)
        self._calls = 0

    @staticmethod
    def blocks(body: Mapping[str, Any]) -> list[tuple[str, Any]]:
        """The prompt's blocks in prefix order, each as ``(where, block)``."""
        out: list[tuple[str, Any]] = [("tool", tool) for tool in body.get("tools") or []]
        system = body.get("system")
        if isinstance(system, str):
            if system:
                out.append(("system", {"type": "text", "text": system}))
        elif isinstance(system, list):
            out.extend(("system", block) for block in system)
        for message in body.get("messages") or []:
            content = message.get("content")
            if isinstance(content, str):
                content = [{"type": "text", "text": content}]
            out.extend((str(message.get("role")), block) for block in content or [])
        return out

    def account(self, body: dict[str, Any]) -> Accounting:
        blocks = self.blocks(body)
        marks = [
            i
            for i, (_, block) in enumerate(blocks)
            if isinstance(block, Mapping) and block.get("cache_control") is not None
        ]
        if len(marks) > MAX_BREAKPOINTS:
            message = (
                f"A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. "
                f"Found {len(marks)}."
            )
            error = {"type": "invalid_request_error", "message": message}
            raise _Failure(400, {"type": "error", "error": error})
        pieces = [[where, *tokens(block)] for where, block in blocks]
        ends: list[int] = []
        total = 0
        for piece in pieces:
            total += len(piece)
            ends.append(total)
        digests = _prefix_hashes(pieces, str(body.get("model")))
        now = time.monotonic()
        self._entries = {key: expiry for key, expiry in self._entries.items() if expiry > now}
        read_end = -1  # the block whose prefix is read; -1: none
        for mark in marks:
            for i in range(mark, max(-1, mark - LOOKBACK - 1), -1):
                if digests[i] in self._entries:
                    read_end = max(read_end, i)
                    break
        read = ends[read_end] if read_end >= 0 else 0
        if read_end >= 0:
            ttl = _ttl(blocks[next(m for m in marks if m >= read_end)][1])
            self._entries[digests[read_end]] = now + ttl  # a read refreshes the entry
        written_to = read
        short = 0
        for mark in marks:
            if ends[mark] < self.min_tokens:
                short += 1
                continue
            self._entries[digests[mark]] = now + _ttl(blocks[mark][1])
            written_to = max(written_to, ends[mark])
        return Accounting(
            prompt_tokens=total,
            cache_read=read,
            cache_write=written_to - read,
            breakpoints=len(marks),
            short_breakpoints=short,
            body=body,
        )

    def prompt(self, body: dict[str, Any]) -> Prompt:
        system = body.get("system")
        if isinstance(system, list):
            system = "\n\n".join(str(block.get("text", "")) for block in system)
        entries: list[tuple[str, str]] = []
        for message in body.get("messages") or []:
            content = message.get("content")
            if isinstance(content, str):
                content = [{"type": "text", "text": content}]
            if message.get("role") == "assistant":
                text = "".join(b.get("text", "") for b in content if b.get("type") == "text")
                entries.append(("assistant", text))
                continue
            for block in content or []:
                if block.get("type") == "tool_result":
                    result = block.get("content")
                    if isinstance(result, list):
                        result = "".join(part.get("text", "") for part in result)
                    entries.append(("tool", str(result or "")))
                elif block.get("type") == "text":
                    entries.append(("user", str(block.get("text", ""))))
        return Prompt(str(system or ""), tuple(entries))

    def stream(self, body: dict[str, Any], answer: Answer, record: Accounting) -> str:
        with self._lock:
            self._calls += 1
            number = self._calls
        usage = {
            "input_tokens": record.uncached,
            "cache_creation_input_tokens": record.cache_write,
            "cache_read_input_tokens": record.cache_read,
            "output_tokens": 1,
        }
        message: dict[str, Any] = {
            "id": f"msg_{number:05d}",
            "type": "message",
            "role": "assistant",
            "model": body.get("model"),
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": usage,
        }
        events: list[dict[str, Any]] = [{"type": "message_start", "message": message}]
        index = 0
        if answer.text:
            events += [
                {
                    "type": "content_block_start",
                    "index": index,
                    "content_block": {"type": "text", "text": ""},
                },
                *(
                    {
                        "type": "content_block_delta",
                        "index": index,
                        "delta": {"type": "text_delta", "text": piece},
                    }
                    for piece in _pieces(answer.text)
                ),
                {"type": "content_block_stop", "index": index},
            ]
            index += 1
        for call in answer.calls:
            start = {"type": "tool_use", "id": f"toolu_{call.id}", "name": call.name, "input": {}}
            partial = {"type": "input_json_delta", "partial_json": json.dumps(call.arguments)}
            events += [
                {"type": "content_block_start", "index": index, "content_block": start},
                {"type": "content_block_delta", "index": index, "delta": partial},
                {"type": "content_block_stop", "index": index},
            ]
            index += 1
        output = len(tokens(answer.text)) + sum(
            len(tokens(dict(c.arguments))) for c in answer.calls
        )
        events += [
            {
                "type": "message_delta",
                "delta": {
                    "stop_reason": "tool_use" if answer.calls else "end_turn",
                    "stop_sequence": None,
                },
                "usage": {"output_tokens": max(1, output)},
            },
            {"type": "message_stop"},
        ]
        return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events)


def _ttl(block: Any) -> float:
    control = block.get("cache_control") if isinstance(block, Mapping) else None
    if isinstance(control, Mapping) and control.get("ttl") in TTL_SECONDS:
        return TTL_SECONDS[str(control["ttl"])]
    return TTL_SECONDS["5m"]


# -- OpenAI ------------------------------------------------------------------------------------


class OpenAICacheServer(CacheServer):
    """``POST /v1/chat/completions``; the SDK's ``base_url`` is ``server.url + "/v1"``."""

    path = "/v1/chat/completions"

    def __init__(self, responder: Responder, *, min_tokens: int = MIN_TOKENS) -> None:
        super().__init__(responder, min_tokens=min_tokens)
        self._prefixes: set[bytes] = set()  # digests of earlier prompts' 128-token prefixes
        self._calls = 0

    @staticmethod
    def sequence(body: Mapping[str, Any]) -> list[str]:
        """The prompt's tokens: the tools, then the messages, in order."""
        out = tokens(body.get("tools") or [])
        for message in body.get("messages") or []:
            out += tokens(message)
        return out

    def account(self, body: dict[str, Any]) -> Accounting:
        sequence = self.sequence(body)
        chunks = [
            sequence[i : i + OPENAI_STEP]
            for i in range(0, len(sequence) - len(sequence) % OPENAI_STEP, OPENAI_STEP)
        ]
        digests = _prefix_hashes(chunks, str(body.get("model")))
        cached = 0
        for count, digest in enumerate(digests, start=1):
            if digest not in self._prefixes:
                break
            cached = count * OPENAI_STEP
        if cached < self.min_tokens:
            cached = 0
        self._prefixes.update(digests)
        key = body.get("prompt_cache_key")
        return Accounting(
            prompt_tokens=len(sequence),
            cache_read=cached,
            cache_key=key if isinstance(key, str) else None,
            body=body,
        )

    def prompt(self, body: dict[str, Any]) -> Prompt:
        system: list[str] = []
        entries: list[tuple[str, str]] = []
        for message in body.get("messages") or []:
            role, content = message.get("role"), message.get("content")
            if isinstance(content, list):
                content = "".join(part.get("text", "") for part in content)
            text = str(content or "")
            if role in ("system", "developer"):
                system.append(text)
            elif role in ("user", "assistant", "tool"):
                entries.append((str(role), text))
        return Prompt("\n\n".join(system), tuple(entries))

    def stream(self, body: dict[str, Any], answer: Answer, record: Accounting) -> str:
        with self._lock:
            self._calls += 1
            number = self._calls
        base = {
            "id": f"chatcmpl-{number:05d}",
            "object": "chat.completion.chunk",
            "created": 1_700_000_000,
            "model": body.get("model"),
        }
        chunks: list[dict[str, Any]] = [
            {"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}
        ]
        chunks += [
            {"choices": [{"index": 0, "delta": {"content": piece}}]}
            for piece in _pieces(answer.text)
        ]
        for index, call in enumerate(answer.calls):
            function = {"name": call.name, "arguments": json.dumps(call.arguments)}
            delta = {
                "tool_calls": [
                    {
                        "index": index,
                        "id": f"call_{call.id}",
                        "type": "function",
                        "function": function,
                    }
                ]
            }
            chunks.append({"choices": [{"index": 0, "delta": delta}]})
        finish = "tool_calls" if answer.calls else "stop"
        chunks.append({"choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
        output = len(tokens(answer.text)) + sum(
            len(tokens(dict(c.arguments))) for c in answer.calls
        )
        usage = {
            "prompt_tokens": record.prompt_tokens,
            "completion_tokens": max(1, output),
            "total_tokens": record.prompt_tokens + max(1, output),
            "prompt_tokens_details": {"cached_tokens": record.cache_read},
        }
        if (body.get("stream_options") or {}).get("include_usage"):
            chunks.append({"choices": [], "usage": usage})
        events = [f"data: {json.dumps(base | chunk)}\n\n" for chunk in chunks]
        return "".join(events) + "data: [DONE]\n\n"


def _pieces(text: str, size: int = 40) -> list[str]:
    """The text in a few deltas, as a stream sends it."""
    return [text[i : i + size] for i in range(0, len(text), size)]
