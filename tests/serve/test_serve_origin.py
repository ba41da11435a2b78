"""What a browser can make the server do: only its own page, on a host it answers to, with JSON.

Without keys any web page the operator visits could otherwise run turns (a cross-origin
``text/plain`` POST needs no CORS preflight) and, by DNS rebinding, read every session. Each
check is tried over real HTTP on a real server with values drawn by hypothesis: the ones the
rules allow pass, everything else is refused with its status and code before any route runs.
"""

from __future__ import annotations

import ipaddress
import re
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from _served import Served, scripted_agent, serve_process, served
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.errors import ConfigError
from harness.serve import ApiKeys, ServeConfig, digest
from harness.serve.guard import allowed_hosts_for

TURNS: list[dict[str, Any]] = [{"text": "Done.", "repeat": True}]
EXAMPLES = settings(max_examples=150, deadline=None)
KEY = "hk_test-key"

# A body the server parses and then refuses with 404 (no such model), so that a request the
# guard lets through costs no turn.
PROBE = b'{"model": "no-such-agent", "messages": [{"role": "user", "content": "hi"}]}'
PASSED = 404  # model_not_found: the body was read and parsed


@pytest.fixture
def server(workspace: Path) -> Iterator[Served]:
    with served(scripted_agent(workspace, TURNS)) as running:
        yield running


def port_of(server: Served) -> int:
    return int(server.url.rsplit(":", 1)[1])


def probe(
    api: httpx2.Client,
    *,
    host: str | None = None,
    origin: str | None = None,
    content_type: str | None = "application/json",
    body: bytes = PROBE,
    path: str = "/v1/chat/completions",
) -> httpx2.Response:
    headers = {}
    if host is not None:
        headers["Host"] = host
    if origin is not None:
        headers["Origin"] = origin
    if content_type is not None:
        headers["Content-Type"] = content_type
    return api.post(path, content=body, headers=headers)


def refused(reply: httpx2.Response, status: int, code: str) -> str:
    assert reply.status_code == status, (reply.status_code, reply.text)
    error = reply.json()["error"]
    assert error["code"] == code
    assert "\n" not in error["message"]
    return str(error["message"])


def passed(reply: httpx2.Response) -> None:
    assert reply.status_code == PASSED, reply.text
    assert reply.json()["error"]["code"] == "model_not_found"


# -- Host ---------------------------------------------------------------------------------------

ports = st.none() | st.integers(1, 65535)


def with_port(hosts: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.tuples(hosts, ports).map(lambda hp: hp[0] if hp[1] is None else f"{hp[0]}:{hp[1]}")


label = st.from_regex(r"[a-z0-9]([a-z0-9-]{0,8}[a-z0-9])?", fullmatch=True)
loopback_hosts = with_port(
    st.one_of(
        st.sampled_from(["localhost", "LocalHost", "[::1]", "[0:0:0:0:0:0:0:1]"]),
        st.ip_addresses(network="127.0.0.0/8").map(str),
        label.map(lambda name: f"{name}.localhost"),
    )
)
other_hosts = with_port(
    st.one_of(
        st.tuples(label, st.sampled_from(["example", "com", "test", "nip.io"])).map(".".join),
        label.map(lambda name: f"localhost.{name}.example"),
        st.ip_addresses(v=4).filter(lambda a: not a.is_loopback).map(str),
        st.ip_addresses(v=6).filter(lambda a: not a.is_loopback).map(lambda a: f"[{a}]"),
        st.sampled_from(
            [
                "127.0.0.1.nip.io",
                "localhost.",
                "localhost@evil.example",
                "evil.example#localhost",
                "[127.0.0.1]",
                "::1",
                "127.1",
                "0.0.0.0",
                "[::]",
                "agent.example.evil",
            ]
        ),
    )
)
LOOKS_ALLOWED = re.compile(
    r"(localhost|[a-z0-9_.-]+\.localhost|127\.[0-9.]+|\[[0-9a-f:]+\]|agent\.example)"
    r"(:[1-9][0-9]{0,4})?"
)


def test_a_keyless_server_answers_only_loopback_host_names(server: Served) -> None:
    with httpx2.Client(base_url=server.url, timeout=10) as api:

        @EXAMPLES
        @given(loopback_hosts)
        def loopback_passes(host: str) -> None:
            passed(probe(api, host=host))

        @EXAMPLES
        @given(other_hosts)
        def others_are_refused(host: str) -> None:
            message = refused(probe(api, host=host), 421, "host_not_allowed")
            assert "--allowed-host" in message

        @EXAMPLES
        @given(st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=1))
        def only_loopback_ever_passes(host: str) -> None:
            reply = probe(api, host=host)
            if reply.status_code != 421:
                assert LOOKS_ALLOWED.fullmatch(host.lower()), host
                name = host.lower()
                ip = name[1 : name.index("]")] if "]" in name else name.rsplit(":", 1)[0]
                if re.fullmatch(r"[0-9.]+|[0-9a-f:]+", ip):
                    assert ipaddress.ip_address(ip).is_loopback, host

        loopback_passes()
        others_are_refused()
        only_loopback_ever_passes()
        # Reading is refused as well: DNS rebinding is about reading the answers.
        reply = api.get("/v1/sessions", headers={"Host": f"rebound.example:{port_of(server)}"})
        refused(reply, 421, "host_not_allowed")
        refused(api.get("/", headers={"Host": "rebound.example"}), 421, "host_not_allowed")
        # A load balancer probes by address: the health check answers any host.
        assert api.get("/healthz", headers={"Host": "10.1.2.3:8000"}).status_code == 200


def test_a_request_without_a_host_is_refused(server: Served) -> None:
    with socket.create_connection(("127.0.0.1", port_of(server)), timeout=10) as sock:
        sock.sendall(b"GET /v1/sessions HTTP/1.0\r\n\r\n")
        answer = b"".join(iter(lambda: sock.recv(4096), b"")).decode()
    assert answer.startswith("HTTP/1.1 421"), answer
    assert "host_not_allowed" in answer


def test_the_operator_allows_more_host_names(workspace: Path) -> None:
    config = ServeConfig(allowed_hosts=("Agent.Example", "[2001:DB8::7]"))
    with (
        served(scripted_agent(workspace, TURNS), config) as server,
        httpx2.Client(base_url=server.url, timeout=10) as api,
    ):
        for host in ("agent.example", "AGENT.example:8443", "[2001:db8::7]:80", "localhost:1"):
            passed(probe(api, host=host))
        for host in ("agent.example.evil", "www.agent.example", "[2001:db8::8]", "evil.example"):
            refused(probe(api, host=host), 421, "host_not_allowed")


def test_with_keys_host_names_are_checked_only_when_the_operator_lists_them(
    workspace: Path,
) -> None:
    keys = ApiKeys.parse(f"alice {digest(KEY)}", source="test")
    auth = {"Authorization": f"Bearer {KEY}"}
    with (
        served(scripted_agent(workspace, TURNS), ServeConfig(keys=keys)) as server,
        httpx2.Client(base_url=server.url, timeout=10, headers=auth) as api,
    ):
        # Behind names the server cannot know; the key is the boundary.
        passed(probe(api, host="agent.example.com"))
        passed(probe(api, host="10.0.0.5:8000"))
    listed = ServeConfig(keys=keys, allowed_hosts=("agent.example.com",))
    with (
        served(scripted_agent(workspace, TURNS), listed) as server,
        httpx2.Client(base_url=server.url, timeout=10, headers=auth) as api,
    ):
        passed(probe(api, host="agent.example.com"))
        passed(probe(api))  # 127.0.0.1:PORT
        refused(probe(api, host="10.0.0.5:8000"), 421, "host_not_allowed")


@pytest.mark.parametrize(
    ("listen", "extra", "keyed", "expected"),
    [
        ("127.0.0.1", [], False, ("127.0.0.1",)),
        ("::1", ["agent.test"], False, ("agent.test", "::1")),
        ("127.0.0.1", [], True, ("127.0.0.1",)),  # loopback: checked with keys too
        ("agent.example.com", [], True, ("agent.example.com",)),  # a name: checked
        ("0.0.0.0", [], True, None),  # every address: any name, the keys decide
        ("10.0.0.5", [], True, None),
        ("0.0.0.0", ["agent.example.com"], True, ("agent.example.com",)),
        ("10.0.0.5", ["agent.example.com"], True, ("agent.example.com", "10.0.0.5")),
    ],
)
def test_what_harness_serve_allows_by_its_host_and_keys(
    listen: str, extra: list[str], keyed: bool, expected: tuple[str, ...] | None
) -> None:
    assert allowed_hosts_for(listen, extra, keyed=keyed) == expected


def test_an_allowed_host_must_be_a_host_name() -> None:
    for bad in ("http://agent.example", "agent.example:8000", "*.example", "", "a b", "x/y"):
        with pytest.raises(ConfigError, match="not a host name"):
            ServeConfig(allowed_hosts=(bad,))
    with pytest.raises(ConfigError, match="not one string"):
        ServeConfig(allowed_hosts="agent.example")  # type: ignore[arg-type]
    assert ServeConfig(allowed_hosts=("A.Example", "[::1]")).allowed_hosts == ("a.example", "::1")


def test_harness_serve_takes_allowed_hosts(tmp_path: Path) -> None:
    harness = str(Path(sys.executable).with_name("harness"))
    base = [harness, "serve", "-w", str(tmp_path / "ws"), "-m", "scripted:x"]
    done = subprocess.run(
        [*base, "--allowed-host", "http://agent.test"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2
    assert "not a host name" in done.stderr
    script = tmp_path / "script.json"
    script.write_text('{"turns": [{"text": "Done.", "repeat": true}]}')
    args = ["-w", str(tmp_path / "ws"), "-m", f"scripted:{script}", "--allowed-host", "agent.test"]
    with (
        serve_process(args, tmp_path / "serve.log") as (url, _),
        httpx2.Client(base_url=url) as api,
    ):
        assert api.get("/v1/sessions", headers={"Host": "agent.test:80"}).status_code == 200
        refused(api.get("/v1/sessions", headers={"Host": "other.test"}), 421, "host_not_allowed")


# -- Origin -------------------------------------------------------------------------------------


def origins(port: int) -> st.SearchStrategy[str]:
    """Origins near the server's own: each part right or slightly wrong."""
    scheme = st.sampled_from(["http", "https", "HTTP", "ws", "file", "chrome-extension"])
    host = st.sampled_from(
        ["127.0.0.1", "localhost", "127.0.0.2", "[::1]", "evil.example", "127.0.0.1.nip.io", ""]
    )
    port_part = st.sampled_from([f":{port}", f":{port + 1}", f":0{port}", "", ":80", ":"])
    suffix = st.sampled_from(["", "", "/", "/page", "?x", "#y", "@evil.example", ",null"])
    near = st.tuples(scheme, host, port_part, suffix).map(
        lambda parts: f"{parts[0]}://{parts[1]}{parts[2]}{parts[3]}"
    )
    return (
        near
        | st.sampled_from(["null", ""])
        | st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), max_size=40)
    )


def test_only_the_servers_own_origin_passes(server: Served) -> None:
    port = port_of(server)
    own = {f"http://127.0.0.1:{port}", f"https://127.0.0.1:{port}"}
    with httpx2.Client(base_url=server.url, timeout=10) as api:
        passed(probe(api))  # no Origin: a program, not a page

        @EXAMPLES
        @given(origins(port))
        def only_own_passes(origin: str) -> None:
            reply = probe(api, origin=origin)
            if origin.strip().lower() in own:
                passed(reply)
            else:
                refused(reply, 403, "origin_not_allowed")

        only_own_passes()
        passed(probe(api, host=f"localhost:{port}", origin=f"http://localhost:{port}"))
        # The origin is the page's host as well: a page on localhost is not 127.0.0.1's.
        refused(probe(api, origin=f"http://localhost:{port}"), 403, "origin_not_allowed")
        # Reading too, and a bodiless POST (cancelling a task).
        refused(
            api.get("/v1/sessions", headers={"Origin": "http://evil.example"}),
            403,
            "origin_not_allowed",
        )
        refused(
            probe(api, origin="http://evil.example", body=b"", content_type=None, path="/v1/x"),
            403,
            "origin_not_allowed",
        )


# -- Content-Type -------------------------------------------------------------------------------


def content_types() -> st.SearchStrategy[str]:
    kind = st.sampled_from(["application", "Application", "text", "multipart", "", "*"])
    sub = st.sampled_from(
        [
            "json",
            "JSON",
            "vnd.api+json",
            "merge-patch+json",
            "+json",
            "json5",
            "jsonx",
            "plain",
            "x-www-form-urlencoded",
            "form-data",
            "json, text/plain",
            "*",
        ]
    )
    params = st.sampled_from(["", "; charset=utf-8", ";charset=UTF-8", "; boundary=x", ";"])
    made = st.tuples(kind, sub, params).map(lambda p: f"{p[0]}/{p[1]}{p[2]}")
    return (
        made
        | st.sampled_from(["json", "text/plain, application/json"])
        | st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=1, max_size=30)
    )


JSON_TYPE = re.compile(r"application/(json|[a-z0-9!#$&^_.+-]+\+json)")


def test_a_body_must_be_declared_json(server: Served) -> None:
    with httpx2.Client(base_url=server.url, timeout=10) as api:

        @EXAMPLES
        @given(content_types())
        def only_json_passes(content_type: str) -> None:
            reply = probe(api, content_type=content_type)
            if JSON_TYPE.fullmatch(content_type.split(";")[0].strip().lower()):
                passed(reply)
            else:
                refused(reply, 415, "unsupported_media_type")

        only_json_passes()
        # What a page may send to another origin without a preflight: each one refused.
        for simple in (
            "text/plain",
            "text/plain;charset=UTF-8",
            "application/x-www-form-urlencoded",
            "multipart/form-data; boundary=----x",
        ):
            message = refused(probe(api, content_type=simple), 415, "unsupported_media_type")
            assert "Content-Type: application/json" in message
        refused(probe(api, content_type=None), 415, "unsupported_media_type")  # a body, no type
        for method in ("PUT", "PATCH", "DELETE"):
            reply = api.request(method, "/v1/sessions/s", content=PROBE)
            refused(reply, 415, "unsupported_media_type")
        # A POST without a body needs no type (cancelling a task), but a wrong one is refused.
        assert api.post("/v1/tasks/task_x/cancel").status_code == 404
        refused(
            probe(api, body=b"", content_type="text/plain", path="/v1/tasks/task_x/cancel"),
            415,
            "unsupported_media_type",
        )


def test_the_checks_hold_with_keys(workspace: Path) -> None:
    keys = ApiKeys.parse(f"alice {digest(KEY)}", source="test")
    auth = {"Authorization": f"Bearer {KEY}"}
    with (
        served(scripted_agent(workspace, TURNS), ServeConfig(keys=keys)) as server,
        httpx2.Client(base_url=server.url, timeout=10, headers=auth) as api,
    ):
        passed(probe(api, origin=server.url))
        refused(probe(api, origin="https://evil.example"), 403, "origin_not_allowed")
        refused(probe(api, content_type="text/plain"), 415, "unsupported_media_type")
        # A rebound name meets a page of the same name: only the key stops it, and it does.
        reply = probe(api, host="rebound.example", origin="http://rebound.example")
        passed(reply)
        anonymous = httpx2.post(
            f"{server.url}/v1/chat/completions",
            content=PROBE,
            headers={"Host": "rebound.example", "Origin": "http://rebound.example"}
            | {"Content-Type": "application/json"},
        )
        refused(anonymous, 401, "missing_api_key")


def test_a_refused_request_runs_no_turn(server: Served, workspace: Path) -> None:
    attacks: list[Callable[[httpx2.Client], httpx2.Response]] = [
        lambda api: api.post(
            "/v1/sessions/s1/turns",
            content=b'{"input": "run this"}',
            headers={"Content-Type": "text/plain"},
        ),
        lambda api: api.post(
            "/v1/sessions/s1/turns",
            json={"input": "run this"},
            headers={"Origin": "http://evil.example"},
        ),
        lambda api: api.post(
            "/v1/sessions/s1/turns", json={"input": "run this"}, headers={"Host": "evil.example"}
        ),
    ]
    with httpx2.Client(base_url=server.url, timeout=10) as api:
        for attack in attacks:
            assert attack(api).status_code in (403, 415, 421)
        assert api.get("/v1/sessions/s1").status_code == 404
        reply = api.post("/v1/sessions/s1/turns", json={"input": "mine"})
        assert reply.status_code == 200
        assert "turn.completed" in reply.text
