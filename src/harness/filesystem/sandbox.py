"""A local workspace whose shell commands run inside a bubblewrap sandbox.

:class:`SandboxFilesystem` is a :class:`~harness.filesystem.local.LocalFilesystem` (its file
operations are the local ones, on the host, namespaced per call) that can also ``execute``.
Every command is ``sh -c <command>`` inside a fresh ``bwrap`` sandbox in which:

- the call's namespace directory is bound at ``/workspace``, is the working directory and
  ``HOME``, and is the ONLY writable place that persists: what a command writes there is what
  the file tools see, and nothing else of the host can be changed;
- the system (``/usr`` and the ``/bin``, ``/sbin``, ``/lib*`` directories or links) is bound
  read-only, and of ``/etc`` only what programs need to start (the dynamic linker's cache,
  ``alternatives``, ``localtime``, ``nsswitch.conf``) plus a made-up ``passwd``, ``group`` and
  ``hosts`` — no ``shadow``, no host accounts, no ``/root`` or ``/home``;
- ``/tmp`` is an empty tmpfs, ``/proc`` and ``/dev`` are the sandbox's own;
- every namespace bubblewrap can unshare is unshared (``--unshare-all``): no network at all
  (only a loopback of its own), its own process ids, host name and IPC;
- the environment is cleared: ``PATH``, ``HOME=/workspace``, ``TMPDIR``, ``LANG`` and the
  backend's ``env`` only;
- ``--new-session`` keeps it from the terminal and ``--die-with-parent`` ends it with us; a
  timeout kills the whole sandbox (:func:`~harness.filesystem.shell.run_command`);
- no capability is kept, even when the harness runs as root (``--cap-drop ALL``), and the
  sandbox's own root directory is read-only, so ``/workspace`` and ``/tmp`` are the only
  writable places.

A call without a user under the ``USER`` scope sees the workspace root, but ``users/`` is
covered by an empty read-only directory, as the file operations refuse it too.

Without bubblewrap nothing is run: ``execute`` answers exit code 127 with how to install it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import stat
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from harness.context import RuntimeContext
from harness.filesystem._beneath import directory_beneath, lstat
from harness.filesystem.base import ExecuteResult, IsolationScope, namespace_prefix
from harness.filesystem.shell import (
    DEFAULT_MAX_OUTPUT_CHARS,
    DEFAULT_TIMEOUT_SECONDS,
    _CommandRunner,
    run_command,
)
from harness.layout import KEPT_BY_HARNESS, USERS_DIR

__all__ = [
    "BWRAP_INSTALL_HINT",
    "MISSING_EXIT_CODE",
    "SANDBOX_PATH",
    "SANDBOX_WORKSPACE",
    "SandboxFilesystem",
]

logger = logging.getLogger(__name__)

SANDBOX_WORKSPACE: Final = "/workspace"
"""Where the call's namespace directory appears inside the sandbox."""

SANDBOX_PATH: Final = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
"""The ``PATH`` of commands in the sandbox."""

MISSING_EXIT_CODE: Final = 127
"""The exit code when the sandbox cannot run at all (as a shell reports a missing command)."""

BWRAP_INSTALL_HINT: Final = (
    "Install it with your package manager (Debian/Ubuntu: `apt-get install bubblewrap`; "
    "Fedora: `dnf install bubblewrap`; Arch: `pacman -S bubblewrap`), or pass the path of the "
    "binary as SandboxFilesystem(bwrap=...)."
)
"""How to get bubblewrap, said whenever it is missing."""

_SYSTEM_DIRS: Final = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
"""Top-level system directories: bound read-only, or recreated as links where the host has
links (merged-/usr systems)."""

_ETC_FILES: Final = (
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/alternatives",
    "/etc/localtime",
    "/etc/nsswitch.conf",
)
"""The host ``/etc`` entries a program needs to start; bound read-only when they exist."""


@dataclass(frozen=True, slots=True)
class _Host:
    """What the sandbox needs to know about the host, looked up once."""

    bwrap: str | None
    system: tuple[str, ...]


def _inspect_host(bwrap: str) -> _Host:
    found = shutil.which(bwrap)
    args: list[str] = []
    for path in _SYSTEM_DIRS:
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    return _Host(bwrap=found, system=tuple(args))


def _identity_files() -> dict[str, bytes]:
    """A ``passwd``, ``group`` and ``hosts`` that name the sandbox user and nothing of the host."""
    uid, gid = os.getuid(), os.getgid()
    passwd = f"sandbox:x:{uid}:{gid}:sandbox:{SANDBOX_WORKSPACE}:/bin/sh\n"
    group = f"sandbox:x:{gid}:\n"
    if uid != 0:
        passwd = f"root:x:0:0:root:/nonexistent:/bin/sh\n{passwd}"
    if gid != 0:
        group = f"root:x:0:\n{group}"
    hosts = "127.0.0.1\tlocalhost sandbox\n::1\tlocalhost\n"
    return {
        "/etc/passwd": passwd.encode(),
        "/etc/group": group.encode(),
        "/etc/hosts": hosts.encode(),
    }


def hold_kept_directory(namespace_dir: Path) -> int:
    """A descriptor of the namespace's ``agents/``, a real directory reached following no link.

    The sandbox binds this very directory read-only (by descriptor, so no link swapped in can
    redirect the mount): commands read the harness's records but cannot write, replace or
    forge them. Whatever else stands at that name (a file, a FIFO, a link a command made
    before) is moved aside to ``agents.moved-<time>`` with a warning, not deleted, and a
    directory made in its place.
    """
    with directory_beneath(namespace_dir, namespace_dir, create=True) as namespace:
        found = lstat(namespace, KEPT_BY_HARNESS)
        if found is not None and not stat.S_ISDIR(found.st_mode):
            aside = f"{KEPT_BY_HARNESS}.moved-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}"
            os.rename(KEPT_BY_HARNESS, aside, src_dir_fd=namespace, dst_dir_fd=namespace)
            logger.warning(
                "moved %s aside to %s: the harness keeps its records there, in a directory",
                namespace_dir / KEPT_BY_HARNESS,
                aside,
            )
        with contextlib.suppress(FileExistsError):
            os.mkdir(KEPT_BY_HARNESS, 0o755, dir_fd=namespace)
        flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
        return os.open(KEPT_BY_HARNESS, flags, dir_fd=namespace)


def _missing(bwrap: str) -> ExecuteResult:
    return ExecuteResult(
        output=(
            f"Error: bubblewrap ({bwrap!r}) is not installed, so commands cannot run in the "
            f"sandbox. {BWRAP_INSTALL_HINT}"
        ),
        exit_code=MISSING_EXIT_CODE,
    )


class SandboxFilesystem(_CommandRunner):
    """A local workspace whose ``execute`` runs each command in a bubblewrap sandbox.

    See the module documentation for what a command can and cannot reach. Use it as the
    agent's filesystem together with :class:`~harness.hooks.SandboxLifecycleHook`, which checks
    the sandbox before a call and stops what the call left running after it.

    Args:
        root: The workspace directory on the host.
        scope: Which namespace each call's files (and its ``/workspace``) live in.
        timeout_seconds: The default limit of one command (120 s).
        max_output_chars: How much of a command's output is kept (100,000 characters).
        bwrap: The bubblewrap program, a name looked up on ``PATH`` or a path.
        env: Variables to set in the sandbox, over ``PATH``, ``HOME``, ``TMPDIR`` and ``LANG``.
    """

    def __init__(
        self,
        root: Path | str,
        *,
        scope: IsolationScope = IsolationScope.USER,
        timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS,
        max_output_chars: int = DEFAULT_MAX_OUTPUT_CHARS,
        bwrap: str = "bwrap",
        env: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(
            root, scope=scope, timeout_seconds=timeout_seconds, max_output_chars=max_output_chars
        )
        if not bwrap.strip():
            msg = "bwrap must name the bubblewrap program, got an empty string"
            raise ValueError(msg)
        self.bwrap = bwrap
        self.env: dict[str, str] = {
            "PATH": SANDBOX_PATH,
            "HOME": SANDBOX_WORKSPACE,
            "TMPDIR": "/tmp",  # the sandbox's own, empty tmpfs
            "LANG": "C.UTF-8",
            **(env or {}),
        }
        self._host: _Host | None = None
        self._checked: str | bool | None = False  # False: not yet; None: works; str: problem
        self._check_lock = asyncio.Lock()

    async def _inspect(self) -> _Host:
        if self._host is None:
            self._host = await asyncio.to_thread(_inspect_host, self.bwrap)
        return self._host

    # -- lifecycle ------------------------------------------------------------------------

    async def check(self) -> str | None:
        """Whether the sandbox works here: None, or what is wrong (checked once, then cached).

        Runs ``true`` in a sandbox like the real ones; bubblewrap being missing, or the kernel
        refusing it the namespaces it needs, shows up here.
        """
        async with self._check_lock:
            if self._checked is False:
                result = await self.execute("true", timeout=30)
                self._checked = None if result.exit_code == 0 else result.output
                if self._checked is not None:
                    logger.warning("the bubblewrap sandbox does not work: %s", self._checked)
            return self._checked if isinstance(self._checked, str) else None

    async def start(self, ctx: RuntimeContext | None = None) -> None:
        """Get ready for a call: check the sandbox (once) and create the call's directory.

        A sandbox that does not work is logged, not raised: the call goes on, and a command
        the model runs gets the explanation as its result.
        """
        await self.check()
        await asyncio.to_thread(self._namespace_dir(ctx).mkdir, parents=True, exist_ok=True)

    # -- the sandbox ----------------------------------------------------------------------

    def sandbox_args(
        self,
        namespace_dir: Path,
        subdir: str = "",
        *,
        system: tuple[str, ...] = (),
        data_fds: Mapping[str, int] | None = None,
        hide_users: bool = False,
        kept_fd: int | None = None,
    ) -> list[str]:
        """The bubblewrap options of one command (everything but the program and the command).

        Args:
            namespace_dir: The host directory bound at ``/workspace``.
            subdir: The working directory, relative to ``/workspace``.
            system: The options for the top-level system directories.
            data_fds: Readable descriptors whose data becomes a read-only file, by its path.
            hide_users: Cover ``/workspace/users`` (a call without a user at the shared root).
            kept_fd: A descriptor of the namespace's ``agents/`` (the harness's records),
                bound over it read-only.
        """
        args = [
            "--unshare-all",
            "--die-with-parent",
            "--new-session",
            "--cap-drop",  # bubblewrap started by root would keep them in its user namespace
            "ALL",
            "--hostname",
            "sandbox",
            "--ro-bind",
            "/usr",
            "/usr",
            *system,
        ]
        for path in _ETC_FILES:
            args += ["--ro-bind-try", path, path]
        for path, fd in (data_fds or {}).items():
            args += ["--ro-bind-data", str(fd), path]
        args += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
        args += ["--bind", os.path.abspath(namespace_dir), SANDBOX_WORKSPACE]
        if hide_users:
            users = f"{SANDBOX_WORKSPACE}/{USERS_DIR}"
            args += ["--tmpfs", users, "--remount-ro", users]
        if kept_fd is not None:
            args += ["--ro-bind-fd", str(kept_fd), f"{SANDBOX_WORKSPACE}/{KEPT_BY_HARNESS}"]
        args += ["--remount-ro", "/"]  # the sandbox's own root: nothing new appears at the top
        workdir = f"{SANDBOX_WORKSPACE}/{subdir}" if subdir else SANDBOX_WORKSPACE
        args += ["--chdir", workdir, "--clearenv"]
        for name, value in self.env.items():
            args += ["--setenv", name, value]
        return args

    async def _launch(
        self,
        command: str,
        namespace_dir: Path,
        subdir: str,
        started: set[int],
        timeout: float,  # noqa: ASYNC109 (the command's limit)
        ctx: RuntimeContext | None,
    ) -> ExecuteResult:
        host = await self._inspect()
        if host.bwrap is None:
            return _missing(self.bwrap)
        if isinstance(self._checked, str):
            return ExecuteResult(output=self._checked, exit_code=MISSING_EXIT_CODE)
        data: dict[str, int] = {}
        kept: int | None = None
        try:
            kept = await asyncio.to_thread(hold_kept_directory, namespace_dir)
            for path, content in _identity_files().items():
                read_end, write_end = os.pipe()
                data[path] = read_end
                os.write(write_end, content)  # a few bytes: fits the pipe, never blocks
                os.close(write_end)
            hide_users = (
                ctx is not None
                and self.scope is IsolationScope.USER
                and not namespace_prefix(self.scope, ctx)
            )
            argv = [
                host.bwrap,
                *self.sandbox_args(
                    namespace_dir,
                    subdir,
                    system=host.system,
                    data_fds=data,
                    hide_users=hide_users,
                    kept_fd=kept,
                ),
                "--",
                "/bin/sh",
                "-c",
                command,
            ]
            try:
                return await run_command(
                    argv,
                    timeout=timeout,
                    max_output_chars=self.max_output_chars,
                    env={},
                    pass_fds=(*data.values(), kept),
                    started=started,
                )
            except FileNotFoundError:
                return _missing(self.bwrap)
        finally:
            for fd in [*data.values(), *([] if kept is None else [kept])]:
                os.close(fd)
