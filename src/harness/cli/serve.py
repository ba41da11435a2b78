"""``harness serve`` (the agent over HTTP) and ``harness keys`` (its API keys).

The server is uvicorn running :func:`harness.serve.create_app`. Each worker process builds
its own agent from the same options, so ``--workers N`` needs the options to reach the worker
processes: they travel as JSON in ``$HARNESS_SERVE_OPTIONS``, which :func:`worker_app` reads.
SIGTERM (or Ctrl-C) stops taking requests, lets the turns in flight finish for ``--grace``
seconds, stops those still running (each saves what it completed), then closes the agent.

uvicorn starts each worker as a fresh process (spawned, not forked): nothing the parent set up
reaches it but the environment. So each worker sets up its own logging (:func:`worker_app`), and
the workers share their metrics through ``$PROMETHEUS_MULTIPROC_DIR``, a temporary directory
the parent makes for them and removes when it exits.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import shutil
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Annotated, Any, Final

import typer

from harness.cli._agent import AgentArgs, agent_command, connected_engine, opened_agent
from harness.cli._common import (
    one_line,
    one_line_errors,
    shortened,
    valid_path,
    valid_paths,
    valid_text,
)
from harness.cli._output import err, out, setup_logging
from harness.errors import ConfigError, install_hint

__all__ = ["keys_app", "serve_command", "worker_app"]

OPTIONS_ENV: Final = "HARNESS_SERVE_OPTIONS"

keys_app = typer.Typer(help="API keys of 'harness serve': one per user.", no_args_is_help=True)


@dataclass(frozen=True)
class ServeOptions:
    """Everything a worker needs to build the served agent, as JSON-able values."""

    workspace: str | None = None
    model: str | None = None
    store: str | None = None
    context_window: int | None = None
    options: list[str] = field(default_factory=list)
    mcp_config: str | None = None
    keys: list[str] = field(default_factory=list)
    host: str = "127.0.0.1"
    allowed_hosts: list[str] = field(default_factory=list)
    session_wait: float = 5.0
    turn_timeout: float = 600.0
    approvals: list[str] = field(default_factory=list)
    cors_origins: list[str] = field(default_factory=list)
    metrics_open: bool = False
    engine: str | None = None
    verbose: bool = False
    limit_requests: int | None = None
    limit_turns: int | None = None
    limit_tokens: int | None = None
    limit_cost: float | None = None
    prices: str | None = None


def _agent_args(options: ServeOptions) -> AgentArgs:
    """The options of the served agent, as ``run`` and ``chat`` take them."""
    return AgentArgs(
        workspace=Path(options.workspace) if options.workspace else None,
        model=options.model,
        store=options.store,
        context_window=options.context_window,
        options=tuple(options.options),
        mcp_config=Path(options.mcp_config) if options.mcp_config else None,
        approvals=tuple(options.approvals),
        engine=options.engine,
        verbose=options.verbose,
    )


def _app(options: ServeOptions) -> Any:
    """The ASGI app of ``options``; its agent is built when the server starts."""
    from harness.serve import ApiKeys, ServeConfig, create_app
    from harness.serve.guard import allowed_hosts_for

    given = _agent_args(options)
    has_keys = options.keys or os.environ.get("HARNESS_API_KEYS", "").strip()
    keys = ApiKeys.load([Path(k) for k in options.keys]) if has_keys else None
    config = ServeConfig(
        keys=keys,
        session_wait=options.session_wait,
        turn_timeout=options.turn_timeout,
        allowed_hosts=allowed_hosts_for(
            options.host, options.allowed_hosts, keyed=keys is not None
        ),
        cors_origins=tuple(options.cors_origins),
        metrics_open=options.metrics_open,
        limits=_limits(options),
        engine=options.engine,
    )
    return create_app(lambda: opened_agent(given), config)


def _limits(options: ServeOptions) -> Any:
    """The per-user limits the options set; None when they set none."""
    from harness.models.prices import load_prices
    from harness.serve.limits import UserLimits

    given = (options.limit_requests, options.limit_turns, options.limit_tokens, options.limit_cost)
    if all(value is None for value in given) and options.prices is None:
        return None
    return UserLimits(
        requests_per_minute=options.limit_requests,
        concurrent_turns=options.limit_turns,
        tokens_per_day=options.limit_tokens,
        cost_per_day=options.limit_cost,
        prices=load_prices(Path(options.prices)) if options.prices else {},
    )


def worker_app() -> Any:
    """The app of a worker process started by ``--workers N`` (uvicorn's factory).

    A worker is a new process that did not run the parent's logging setup: it sets up its own
    here, so it logs its requests as a single server does.
    """
    options = ServeOptions(**json.loads(os.environ[OPTIONS_ENV]))
    setup_logging(options.verbose)
    _log_requests()
    return _app(options)


def _valid_host(value: str) -> str:
    """Refuse a host no address or name can be (blank, spaces, control characters) at once.

    Otherwise it would reach the refusal to listen without keys, or uvicorn, in a message of
    several lines.
    """
    valid_text(value)
    if not value or any(c.isspace() or not c.isprintable() for c in value):
        msg = f"{shortened(value)} is not an address or a host name (e.g. 127.0.0.1 or ::1)"
        raise typer.BadParameter(msg)
    return value


def _valid_hosts(values: list[str] | None) -> list[str] | None:
    """Refuse an ``--allowed-host`` that is not a host name or an address (a URL, a port)."""
    try:
        from harness.serve.config import host_name
    except ImportError:  # no serve extra: serve says so once it runs
        return values
    for value in values or []:
        valid_text(value)
        try:
            host_name(value)
        except ValueError as exc:
            raise typer.BadParameter(str(exc)) from None
    return values


def _valid_origins(values: list[str] | None) -> list[str] | None:
    """Refuse a ``--cors-origin`` that is not ``scheme://host[:port]`` (a path, a wildcard)."""
    try:
        from harness.serve.config import web_origin
    except ImportError:  # no serve extra: serve says so once it runs
        return values
    for value in values or []:
        valid_text(value)
        try:
            web_origin(value)
        except ValueError as exc:
            raise typer.BadParameter(str(exc)) from None
    return values


@agent_command(per_turn=False)
def serve_command(
    given: AgentArgs,
    host: Annotated[
        str,
        typer.Option(
            "--host",
            help="Address to listen on; beyond loopback needs --keys.",
            callback=_valid_host,
        ),
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", "-p", min=0, max=65535)] = 8000,
    workers: Annotated[int, typer.Option("--workers", min=1, max=64, help="Server processes.")] = 1,
    keys: Annotated[
        list[Path] | None,
        typer.Option(
            "--keys",
            metavar="FILE",
            help="API key file (harness keys add); repeatable. Also $HARNESS_API_KEYS.",
            callback=valid_paths,
            show_default="none: one local user, loopback only",
        ),
    ] = None,
    allowed_host: Annotated[
        list[str] | None,
        typer.Option(
            "--allowed-host",
            metavar="NAME",
            help="A host name clients may use besides loopback ones (a proxy's, a tunnel's); "
            "repeatable.",
            callback=_valid_hosts,
            show_default="--host, if a name or loopback",
        ),
    ] = None,
    session_wait: Annotated[
        float,
        typer.Option(
            "--session-wait", min=0, help="Seconds a request waits for a busy session, then 409."
        ),
    ] = 5.0,
    turn_timeout: Annotated[
        float, typer.Option("--turn-timeout", min=1, help="Seconds a turn may run.")
    ] = 600.0,
    grace: Annotated[
        float,
        typer.Option("--grace", min=0, help="Seconds turns in flight get to finish on SIGTERM."),
    ] = 30.0,
    cors_origin: Annotated[
        list[str] | None,
        typer.Option(
            "--cors-origin",
            metavar="ORIGIN",
            help="A web origin (https://app.example.com) whose pages may call the API from a "
            "browser; repeatable.",
            callback=_valid_origins,
            show_default="none: only the server's own page",
        ),
    ] = None,
    metrics_open: Annotated[
        bool,
        typer.Option(
            "--metrics-open",
            help="Answer GET /metrics without a key (a scraper on a trusted network).",
        ),
    ] = False,
    limit_requests: Annotated[
        int | None,
        typer.Option(
            "--limit-requests", min=1, metavar="N", help="Requests per minute a user may make."
        ),
    ] = None,
    limit_turns: Annotated[
        int | None,
        typer.Option("--limit-turns", min=1, metavar="N", help="Turns a user may run at once."),
    ] = None,
    limit_tokens: Annotated[
        int | None,
        typer.Option(
            "--limit-tokens", min=1, metavar="N", help="Model tokens a user may use a day (UTC)."
        ),
    ] = None,
    limit_cost: Annotated[
        float | None,
        typer.Option(
            "--limit-cost",
            min=0.000001,
            metavar="AMOUNT",
            help="What a user may spend a day, at the prices of --prices.",
        ),
    ] = None,
    prices: Annotated[
        Path | None,
        typer.Option(
            "--prices",
            metavar="FILE",
            help='Price table, JSON: {"<model>": {"input": ..., "output": ...}} per million.',
        ),
    ] = None,
) -> None:
    """Serve the agent over HTTP: OpenAI-compatible API, streaming events API, web page at /."""
    setup_logging(given.verbose)
    options = ServeOptions(
        workspace=str(given.workspace) if given.workspace else None,
        model=given.model,
        store=given.store,
        context_window=given.context_window,
        options=list(given.options),
        mcp_config=str(given.mcp_config) if given.mcp_config else None,
        keys=[str(k) for k in keys or []],
        host=host,
        allowed_hosts=list(allowed_host or []),
        session_wait=session_wait,
        turn_timeout=turn_timeout,
        approvals=list(given.approvals),
        cors_origins=list(cors_origin or []),
        metrics_open=metrics_open,
        engine=given.engine,
        verbose=given.verbose,
        limit_requests=limit_requests,
        limit_turns=limit_turns,
        limit_tokens=limit_tokens,
        limit_cost=limit_cost,
        prices=str(prices) if prices else None,
    )
    try:
        with one_line_errors():
            app = _checked(options, host)
            asyncio.run(_preflight(options))
    except KeyboardInterrupt:
        raise typer.Exit(130) from None
    import uvicorn

    _log_requests()
    settings: dict[str, Any] = {
        "host": host,
        "port": port,
        "timeout_graceful_shutdown": grace,
        "access_log": False,  # harness.serve logs each request once, with its user and time
        "log_level": "info",
    }
    if workers == 1:
        uvicorn.run(app, **settings)
        return
    os.environ[OPTIONS_ENV] = json.dumps(asdict(options))
    # Each worker counts in files here, and a scrape of any worker sums them all. Fresh for
    # each run (totals start at zero, as a single server's do) and removed at exit.
    shared = tempfile.mkdtemp(prefix="harness-metrics-")
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = shared
    try:
        uvicorn.run("harness.cli.serve:worker_app", factory=True, workers=workers, **settings)
    finally:
        shutil.rmtree(shared, ignore_errors=True)


def _checked(options: ServeOptions, host: str) -> Any:
    """The app, once the options are known to be usable: a bad key file is an error now."""
    try:
        import harness.serve.metrics  # noqa: F401  (prometheus-client, also of the extra)
        from harness.serve.http import is_loopback
    except ImportError as exc:
        msg = f"harness serve needs the serve extra: {install_hint('serve')} ({exc})"
        raise ConfigError(msg) from None
    app = _app(options)
    keyless = not options.keys and not os.environ.get("HARNESS_API_KEYS", "").strip()
    if keyless and not is_loopback(host):
        msg = (
            f"refusing to listen on {host} without API keys: anyone who reaches it could use "
            "the agent; pass --keys FILE (harness keys add USER --file FILE) or use 127.0.0.1"
        )
        raise ConfigError(msg)
    return app


async def _preflight(options: ServeOptions) -> None:
    """Build the served agent once and close it, so that a bad option stops serve right here.

    Every worker builds its agent when its server starts, and uvicorn reports a failure there
    as a traceback (a worker of several is even started again and again), after listening. The
    agent is cheap to open: a local model loads, and MCP servers start, at the first call.
    """
    async with opened_agent(_agent_args(options)):
        pass
    if options.engine is not None:  # unreachable or misspelled: said now, not per worker
        await connected_engine(options.engine)


def _log_requests() -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
    log = logging.getLogger("harness.serve")
    log.handlers[:] = [handler]
    log.setLevel(logging.INFO)
    log.propagate = False


@keys_app.command("add")
def add_command(
    user: Annotated[str, typer.Argument(help="The user the key acts for.")],
    file: Annotated[
        Path,
        typer.Option("--file", "-f", help="The key file to append to.", callback=valid_path),
    ],
) -> None:
    """Make a key for USER, append its digest to FILE, and print the key (shown only once)."""
    from harness.serve.keys import add_key

    try:
        key = add_key(file, user)
    except (ConfigError, OSError) as exc:
        err.print(f"error: {one_line(str(exc))}", markup=False, highlight=False, soft_wrap=True)
        raise typer.Exit(2) from None
    out.print(key, markup=False, highlight=False)
    err.print(
        one_line(f"added a key for {user} to {file}; it is not shown again"),
        markup=False,
        highlight=False,
        soft_wrap=True,
    )


KeysFileOpt = Annotated[
    Path, typer.Option("--file", "-f", help="The key file.", callback=valid_path)
]


@keys_app.command("list")
def list_command(
    file: KeysFileOpt,
    as_json: Annotated[bool, typer.Option("--json", help="Print as JSON.")] = False,
) -> None:
    """The users of FILE's keys, with the first digits of each key's digest (never a key)."""
    from harness.serve.keys import list_keys

    with one_line_errors():
        entries = list_keys(file)
    if as_json:
        records = [{"user": e.user, "digest": e.short} for e in entries]
        out.print_json(json.dumps(records))
        return
    width = max((len(e.user) for e in entries), default=4)
    for entry in entries:
        out.print(f"{entry.user:<{width}}  {entry.short}", markup=False, highlight=False)
    if not entries:
        err.print(one_line(f"{file} holds no key"), markup=False, highlight=False, soft_wrap=True)


@keys_app.command("revoke")
def revoke_command(
    user: Annotated[str, typer.Argument(help="The user whose keys to remove.")],
    file: KeysFileOpt,
    digest_prefix: Annotated[
        str | None,
        typer.Option(
            "--digest",
            metavar="PREFIX",
            help="Only the key whose digest starts so (as 'harness keys list' shows it).",
        ),
    ] = None,
) -> None:
    """Remove USER's keys from FILE (or the one --digest names); a running server follows."""
    from harness.serve.keys import revoke_keys

    try:
        with one_line_errors():
            removed = revoke_keys(file, user, digest_prefix)
    except LookupError as exc:
        err.print(f"error: {one_line(str(exc))}", markup=False, highlight=False, soft_wrap=True)
        raise typer.Exit(1) from None
    shown = ", ".join(entry.short for entry in removed)
    err.print(
        one_line(
            f"revoked {len(removed)} key(s) of {user} in {file} ({shown}); a running server "
            "refuses them within a second or two"
        ),
        markup=False,
        highlight=False,
        soft_wrap=True,
    )
