"""Running shell commands for a filesystem backend, and the unsandboxed :class:`LocalShell`.

Everything about running one command lives in :func:`run_command`, which the bubblewrap sandbox
(:mod:`harness.filesystem.sandbox`) and :class:`LocalShell` share:

- stdout and stderr are read by the event loop *while* the process runs (a subprocess
  protocol), so a command that prints megabytes never blocks on a full pipe; the original read
  them only after the process ended and deadlocked until its timeout;
- what is kept is capped (``max_output_chars``); the rest is read and dropped, and the result
  says it was truncated;
- the command runs in a process group of its own; when it ends, times out or is cancelled the
  whole group is killed, so nothing it started in the background outlives it;
- a timeout gives exit code 124 (as ``timeout(1)`` does) and a line saying what happened.

The output is stdout, then each stderr line prefixed ``[stderr] ``, as in the original; a
command that printed nothing answers ``<no output>``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from harness.context import RuntimeContext
from harness.errors import PathOutsideWorkspace
from harness.filesystem.base import ExecuteResult, IsolationScope, ShellFilesystem, check_path
from harness.filesystem.local import LocalFilesystem
from harness.paths import normalize, resolve_inside

__all__ = [
    "DEFAULT_MAX_OUTPUT_CHARS",
    "DEFAULT_TIMEOUT_SECONDS",
    "NO_OUTPUT",
    "STDERR_PREFIX",
    "TIMEOUT_EXIT_CODE",
    "USAGE_EXIT_CODE",
    "LocalShell",
    "run_command",
]

logger = logging.getLogger(__name__)

DEFAULT_TIMEOUT_SECONDS: Final = 120.0
"""How long a command may run before it is killed (the original's default)."""

DEFAULT_MAX_OUTPUT_CHARS: Final = 100_000
"""How much of a command's output is kept (the original's default)."""

TIMEOUT_EXIT_CODE: Final = 124
"""The exit code of a command that was killed at its timeout, as ``timeout(1)`` reports it."""

USAGE_EXIT_CODE: Final = 2
"""The exit code of a request refused before anything ran (a bad directory or timeout)."""

STDERR_PREFIX: Final = "[stderr] "
"""What each line of a command's stderr starts with in the combined output."""

NO_OUTPUT: Final = "<no output>"
"""The output of a command that printed nothing."""

_KILL_GRACE_SECONDS: Final = 5.0
"""How long to wait for the pipes to close once the process group has been killed."""

_BYTES_PER_CHAR: Final = 4
"""The most bytes one character takes in UTF-8: how many bytes to keep for a character cap."""


@dataclass(slots=True)
class _Capture(asyncio.SubprocessProtocol):
    """Collects a process's stdout and stderr as they arrive, up to ``limit`` bytes each."""

    limit: int
    exited: asyncio.Future[None]
    closed: asyncio.Future[None]
    out: bytearray = field(default_factory=bytearray)
    err: bytearray = field(default_factory=bytearray)
    dropped: bool = False
    open_pipes: int = 2

    def pipe_data_received(self, fd: int, data: bytes | bytearray) -> None:
        buffer = self.out if fd == 1 else self.err
        room = self.limit - len(buffer)
        if len(data) > room:
            self.dropped = True
            data = data[: max(room, 0)]
        buffer.extend(data)

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        self.open_pipes -= 1
        if self.open_pipes <= 0 and not self.closed.done():
            self.closed.set_result(None)

    def process_exited(self) -> None:
        if not self.exited.done():
            self.exited.set_result(None)


def _kill_group(pgid: int) -> None:
    """SIGKILL a process group; one that is already gone is fine."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def _combine(out: bytes, err: bytes) -> str:
    parts: list[str] = []
    stdout = out.decode("utf-8", errors="replace").rstrip("\n")
    if stdout:
        parts.append(stdout)
    stderr = err.decode("utf-8", errors="replace").rstrip("\n")
    if stderr:
        parts.append("\n".join(STDERR_PREFIX + line for line in stderr.split("\n")))
    return "\n".join(parts)


async def run_command(
    argv: Sequence[str],
    *,
    timeout: float,  # noqa: ASYNC109 (the command's limit, enforced by killing it)
    max_output_chars: int,
    cwd: Path | str | None = None,
    env: Mapping[str, str] | None = None,
    pass_fds: Sequence[int] = (),
    started: set[int] | None = None,
) -> ExecuteResult:
    """Run ``argv`` to completion or ``timeout``, reading its output as it comes.

    Args:
        argv: The program and its arguments (no shell is added here).
        timeout: Seconds before the process group is killed and 124 returned.
        max_output_chars: How many characters of combined output to keep.
        cwd: The directory to start in.
        env: The whole environment of the process (nothing is inherited when given).
        pass_fds: File descriptors the process inherits (bubblewrap's ``--ro-bind-data``).
        started: A set the process group id is added to while it runs, so an owner can kill
            it from outside (:meth:`LocalShell.release`).

    Raises:
        OSError: The program could not be started (``FileNotFoundError`` when it is missing).
    """
    loop = asyncio.get_running_loop()
    capture = _Capture(
        limit=max_output_chars * _BYTES_PER_CHAR,
        exited=loop.create_future(),
        closed=loop.create_future(),
    )
    transport, _ = await loop.subprocess_exec(
        lambda: capture,
        *argv,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=cwd,
        env=None if env is None else dict(env),
        start_new_session=True,  # its own process group, so the whole tree can be killed
        pass_fds=tuple(pass_fds),
    )
    pgid = transport.get_pid()
    if started is not None:
        started.add(pgid)
    timed_out = False
    try:
        try:
            async with asyncio.timeout(timeout):
                await asyncio.shield(capture.exited)
        except TimeoutError:
            timed_out = True
    finally:
        # Whatever is left of the group (background jobs holding the pipes open, or the whole
        # tree after a timeout or a cancellation) goes now.
        _kill_group(pgid)
        try:
            async with asyncio.timeout(_KILL_GRACE_SECONDS):
                await asyncio.shield(capture.exited)
                await asyncio.shield(capture.closed)
        except TimeoutError:
            logger.warning("process group %d did not close its pipes after SIGKILL", pgid)
        finally:
            transport.close()
            if started is not None:
                started.discard(pgid)

    output = _combine(bytes(capture.out), bytes(capture.err))
    truncated = capture.dropped or len(output) > max_output_chars
    if truncated:
        output = (
            output[:max_output_chars] + f"\n... Output truncated at {max_output_chars} characters."
        )
    if timed_out:
        note = (
            f"Command timed out after {timeout:g}s; it and every process it started were killed. "
            "Give it a longer timeout, or run less at once."
        )
        return ExecuteResult(
            output=f"{output}\n{note}" if output else note,
            exit_code=TIMEOUT_EXIT_CODE,
            truncated=truncated,
        )
    code = transport.get_returncode()
    if code is None:
        code = 128 + signal.SIGKILL  # killed from outside (release) and not reaped in time
    elif code < 0:
        code = 128 - code  # killed by a signal: reported as a shell reports it
    return ExecuteResult(
        output=output or NO_OUTPUT,
        exit_code=code,
        truncated=truncated,
    )


def _refused(message: str) -> ExecuteResult:
    return ExecuteResult(output=f"Error: {message}", exit_code=USAGE_EXIT_CODE)


class _CommandRunner(LocalFilesystem, ShellFilesystem):
    """What :class:`LocalShell` and the sandbox share: limits, checks and process tracking.

    Subclasses say how a command is launched (:meth:`_launch`); this class checks the
    request, makes sure the namespace directory exists and runs it with :func:`run_command`.
    """

    def __init__(
        self,
        root: Path | str,
        *,
        scope: IsolationScope = IsolationScope.USER,
        timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS,
        max_output_chars: int = DEFAULT_MAX_OUTPUT_CHARS,
    ) -> None:
        super().__init__(root, scope=scope)
        if not timeout_seconds > 0:
            msg = f"timeout_seconds must be a positive number of seconds, got {timeout_seconds!r}"
            raise ValueError(msg)
        if max_output_chars < 1:
            msg = f"max_output_chars must be at least 1, got {max_output_chars!r}"
            raise ValueError(msg)
        self.timeout_seconds = float(timeout_seconds)
        self.max_output_chars = max_output_chars
        # Process groups still running, by call (user, session): what release() kills.
        self._running: dict[tuple[str | None, str | None], set[int]] = {}

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self.root)!r}, scope={self.scope.value!r})"

    # -- the launch, per subclass ---------------------------------------------------------

    async def _launch(
        self,
        command: str,
        namespace_dir: Path,
        subdir: str,
        started: set[int],
        timeout: float,  # noqa: ASYNC109 (the command's limit)
        ctx: RuntimeContext | None,
    ) -> ExecuteResult:
        raise NotImplementedError

    def _subdir(self, working_directory: str | None) -> str:
        """``working_directory`` as a namespace-relative path; raises if it may not be used."""
        if working_directory is None or not working_directory.strip():
            return ""
        text = working_directory.strip()
        if text.startswith("/"):
            msg = (
                f"working_directory {working_directory!r} is an absolute path; give a "
                "directory relative to the workspace"
            )
            raise PathOutsideWorkspace(msg)
        try:
            return normalize(text)
        except PathOutsideWorkspace as exc:
            msg = f"working_directory: {exc}"
            raise PathOutsideWorkspace(msg) from exc

    # -- ShellFilesystem ------------------------------------------------------------------

    def _namespace_dir(self, ctx: RuntimeContext | None) -> Path:
        """The host directory of the call's namespace (the command's ``/workspace``)."""
        return Path(self.root) / check_path("", self.scope, ctx)

    async def execute(
        self,
        command: str,
        timeout: float | None = None,  # noqa: ASYNC109 (the command's limit, not ours)
        working_directory: str | None = None,
        ctx: RuntimeContext | None = None,
    ) -> ExecuteResult:
        """Run ``command`` with ``sh -c`` in the namespace's directory (or a subdirectory).

        A bad ``working_directory`` (absolute, ``..``, ``~``, missing, a symbolic link that
        leads out) or a non-positive ``timeout`` is refused with exit code 2 and nothing runs.
        """
        limit = self.timeout_seconds if timeout is None else timeout
        if not limit > 0:
            return _refused(f"timeout must be a positive number of seconds, got {timeout!r}")
        try:
            subdir = self._subdir(working_directory)
            namespace_dir = self._namespace_dir(ctx)
        except PathOutsideWorkspace as exc:
            return _refused(str(exc))
        problem = await asyncio.to_thread(_prepare_directory, namespace_dir, subdir)
        if problem is not None:
            return _refused(problem)
        key = _call_key(ctx)
        started = self._running.setdefault(key, set())
        try:
            return await self._launch(command, namespace_dir, subdir, started, limit, ctx)
        finally:
            if not started and self._running.get(key) is started:
                del self._running[key]

    async def release(self, ctx: RuntimeContext | None = None) -> None:
        """Kill whatever the call's commands started that is still running."""
        for pgid in self._running.pop(_call_key(ctx), set()):
            _kill_group(pgid)

    async def aclose(self) -> None:
        """Kill every command still running."""
        running, self._running = self._running, {}
        for groups in running.values():
            for pgid in groups:
                _kill_group(pgid)
        await super().aclose()


def _call_key(ctx: RuntimeContext | None) -> tuple[str | None, str | None]:
    return (None, None) if ctx is None else (ctx.user_id, ctx.session_id)


def _prepare_directory(namespace_dir: Path, subdir: str) -> str | None:
    """Create the namespace directory; check the working directory. Returns the problem."""
    namespace_dir.mkdir(parents=True, exist_ok=True)
    if not subdir:
        return None
    try:
        target = resolve_inside(namespace_dir, subdir)
    except PathOutsideWorkspace as exc:
        return f"working_directory: {exc}"
    if not target.is_dir():
        what = "is not a directory" if target.exists() else "does not exist"
        return f"working_directory {subdir!r} {what}; create it first or run from the workspace"
    return None


class LocalShell(_CommandRunner):
    """A :class:`LocalFilesystem` that runs commands on the host, WITHOUT any sandbox.

    Commands run as ``sh -c`` in the call's namespace directory with this process's user,
    files and network: they can read and change anything that user can. Use it only for
    trusted agents on a machine you own (a developer's own tools); for anything else use
    :class:`~harness.filesystem.SandboxFilesystem`. It is never chosen by default.

    The environment is not inherited unless asked for (as in the original), so the harness's
    own secrets (``OPENAI_API_KEY`` and the like) do not reach the commands: they get ``PATH``,
    ``HOME`` (the namespace directory) and ``LANG``, plus ``env``.

    Args:
        root: The workspace directory.
        scope: Which namespace each call's paths (and its working directory) live in.
        timeout_seconds: The default limit of one command.
        max_output_chars: How much output is kept.
        env: Variables to add to the commands' environment.
        inherit_env: Start from this process's whole environment instead.
    """

    def __init__(
        self,
        root: Path | str,
        *,
        scope: IsolationScope = IsolationScope.USER,
        timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS,
        max_output_chars: int = DEFAULT_MAX_OUTPUT_CHARS,
        env: Mapping[str, str] | None = None,
        inherit_env: bool = False,
    ) -> None:
        super().__init__(
            root, scope=scope, timeout_seconds=timeout_seconds, max_output_chars=max_output_chars
        )
        self.env: dict[str, str] = dict(env or {})
        self.inherit_env = inherit_env

    async def _launch(
        self,
        command: str,
        namespace_dir: Path,
        subdir: str,
        started: set[int],
        timeout: float,  # noqa: ASYNC109 (the command's limit)
        ctx: RuntimeContext | None,
    ) -> ExecuteResult:
        return await run_command(
            ["/bin/sh", "-c", command],
            timeout=timeout,
            max_output_chars=self.max_output_chars,
            cwd=namespace_dir / subdir if subdir else namespace_dir,
            env=self._environment(namespace_dir),
            started=started,
        )

    def _environment(self, namespace_dir: Path) -> dict[str, str]:
        if self.inherit_env:
            return {**os.environ, **self.env}
        base = {
            "PATH": os.environ.get("PATH", os.defpath),
            "HOME": str(namespace_dir),
            "LANG": "C.UTF-8",
        }
        return {**base, **self.env}
