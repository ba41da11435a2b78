"""Saved conversations, one directory per (user, agent, session).

In the workspace (on whatever filesystem backend it uses)::

    [users/<user>/]agents/<agent>/context/<session>/messages.jsonl
    [users/<user>/]agents/<agent>/context/<session>/state.json

one :class:`~harness.kernel.Msg` per line, as JSON, and the session's
:class:`~harness.kernel.SessionState` (what hooks keep about it from call to call: the memory
snapshot its system prompt shows, the notes it was given) as one JSON object, so any process
or worker continues the session as the one before it would have. A save appends when the saved
messages only grew and otherwise replaces the file atomically, so a crash leaves the old file or
the new one.
Calls on one session hold its lease (:mod:`harness.session.lease`), so a session has one
writer at a time, across processes and workers; the holder keeps the file open for its call
(:meth:`SessionStore.holding`), so a step's append is one write, not a walk to the file.

A damaged file is repaired on load, never silently shortened:

- a line that cannot be parsed (a torn write, a hand edit) is first copied to
  ``quarantine.jsonl`` beside the session (with its line number and the time), with a warning
  naming both files; only then may the next save rewrite the file without it;
- a file whose last line lost its final newline is rewritten whole at the next save (an append
  would otherwise glue the next message onto that line);
- a tool call whose result is missing (its line was lost) gets an explicit error result saying
  so, so the conversation stays valid for the provider.

The state is rewritten whole (atomically) when a hook changed it, which is rare: when a session
starts, when the workspace's memory files change under it, after a compaction. A call writes it
with the step's messages, in the same trip to the storage, and without ``fsync`` unless
``fsync`` asks (its loss costs no message). It is read at every load (a call elsewhere may have
changed it without changing the messages), and parsed
only when its bytes changed. A state file that cannot be read is logged and the session goes
on with an empty state: the hooks then start afresh, as for a new session, and no message is
lost.

Messages are treated as values: a hook that changes a message replaces it with a new object
(``model_copy``) rather than editing it in place. That lets the store remember, per file, the
message objects it last read or wrote together with the file's size and last bytes. While the
file is unchanged, a load returns those messages without parsing, and a save whose list starts
with exactly those objects appends only the new ones. Any other change, here or in another
worker, falls back to parsing or to a full rewrite.

A load returns a :class:`~harness.kernel.History`, the list the agent's call then grows. The
store keeps that very list, its length and its count of rewrites at each save, so the save
before each step knows in constant time that only messages were added (a rewrite anywhere in
it, ``memory[1] = ...`` or a compaction's ``memory[:] = ...``, moves the count on and the save
rewrites the file whole): a step's save costs the same at 2,000 messages as at 20. Another
list is compared message by message, as before.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
from collections.abc import AsyncIterator, Collection, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final, Literal

from pydantic import ValidationError

from harness.context import RuntimeContext
from harness.filesystem import Appender
from harness.kernel import LOST_RESULT, History, Msg, SessionState, ToolResultBlock
from harness.workspace import WorkspaceManager, session_dir

__all__ = [
    "EVERY_CALL",
    "LOST_RESULT",
    "MESSAGES_FILE",
    "QUARANTINE_FILE",
    "STATE_FILE",
    "SessionFsync",
    "SessionStore",
]

logger = logging.getLogger(__name__)

MESSAGES_FILE: Final = "messages.jsonl"
"""The file, in a session's directory, holding its messages."""

STATE_FILE: Final = "state.json"
"""The file, in a session's directory, holding its :class:`~harness.kernel.SessionState`."""

QUARANTINE_FILE: Final = "quarantine.jsonl"
"""Where, beside the messages, the lines that could not be read are kept."""


SessionFsync = Literal["step", "turn"] | None
"""When a session's appends are synced to the disk (``fsync``), beyond surviving a crash.

``None`` (the default): a save survives the process being killed, not a power loss or a
kernel crash (its append may still wait in the page cache). ``"step"``: every save is on the
disk before the next model request, so a power loss keeps every completed step. ``"turn"``:
the save at the end of a call (and after a failed one) syncs what the call appended; a power
loss in the middle of a call may lose that call's steps, never an earlier call's. Rewrites are
synced in every mode (temporary file, ``fsync``, rename).
"""

_TAIL: Final = 64
_PARSE_IN_THREAD: Final = 64 * 1024
"""Sessions bigger than this are parsed in a worker thread, off the event loop."""


@dataclass(frozen=True, slots=True)
class _Known:
    """What the store last read or wrote: the file's size and last bytes, and its messages.

    The messages are the first ``count`` of ``source``: a tuple, or the :class:`History` that
    was saved, which may have grown since (still valid) or been rewritten (its ``rewrites``
    moved on: then they are unknown).
    """

    size: int
    tail: bytes
    source: Sequence[Msg]
    count: int
    rewrites: int

    def matches(self, data: bytes) -> bool:
        return len(data) == self.size and data.endswith(self.tail)

    def messages(self) -> Sequence[Msg] | None:
        """The messages the file holds, or None when the list they were kept in was rewritten."""
        source = self.source
        if isinstance(source, History):
            if source.rewrites != self.rewrites or len(source) < self.count:
                return None
            return source[: self.count]
        return source

    def continued_by(self, source: Sequence[Msg], rewrites: int) -> bool:
        """Whether ``source`` starts with exactly these messages (the same objects).

        In constant time for the :class:`History` saved last, which only grew since;
        otherwise by comparing the messages one by one.
        """
        if source is self.source and isinstance(source, History):
            return rewrites == self.rewrites and len(source) >= self.count
        kept = self.messages()
        return kept is not None and _starts_with(source, kept)


class SessionStore:
    """Loads and saves the conversations of one agent in a workspace."""

    def __init__(
        self, workspace: WorkspaceManager, agent: str, *, fsync: SessionFsync = None
    ) -> None:
        if fsync not in ("step", "turn", None):
            msg = f'fsync must be "step", "turn" or None, got {fsync!r}'
            raise ValueError(msg)
        self.workspace = workspace
        self.agent = agent
        self.fsync: SessionFsync = fsync
        self._unsynced: set[str] = set()
        self._known: dict[str, _Known] = {}
        self._states: dict[str, tuple[bytes, SessionState]] = {}
        self._appenders: dict[str, Appender] = {}

    @contextlib.asynccontextmanager
    async def holding(self, ctx: RuntimeContext) -> AsyncIterator[None]:
        """Keep the session's file open for appending while the block (a call) runs.

        For the holder of the session's lease: each step's save is then one write to the file
        already open (:meth:`~harness.filesystem.Storage.appender`), not a walk to it.
        """
        path = self.path(ctx)
        appender = self._appenders[path] = self.workspace.appender(path)
        try:
            yield
        finally:
            if self._appenders.get(path) is appender:
                del self._appenders[path]
            await appender.aclose()

    def directory(self, ctx: RuntimeContext) -> str:
        """The workspace directory of the context's session: what one lease guards."""
        if ctx.session_id is None:
            msg = "a session id is needed to locate a saved session"
            raise ValueError(msg)
        return session_dir(self.agent, ctx.session_id, ctx.user_id)

    def path(self, ctx: RuntimeContext) -> str:
        """The workspace path of the context's session file."""
        return f"{self.directory(ctx)}/{MESSAGES_FILE}"

    async def load(self, ctx: RuntimeContext, *, waiting: Collection[str] = ()) -> list[Msg]:
        """The saved messages of the session; empty for a new session.

        ``waiting``: ids of tool calls that wait for a decision (the approval ledger's), left
        without a result for the call that decides them; every other missing result is
        answered with :data:`LOST_RESULT`.
        """
        path = self.path(ctx)
        return await self._loaded(path, await self.workspace.get_bytes(path), waiting)

    async def load_state(self, ctx: RuntimeContext) -> SessionState:
        """The session's saved state; empty for a new session or an unreadable file."""
        path = self._state_path(ctx)
        return self._state_of(ctx, path, await self.workspace.get_bytes(path))

    async def restore(
        self, ctx: RuntimeContext, *, waiting: Collection[str] = ()
    ) -> tuple[History, SessionState]:
        """:meth:`load` and :meth:`load_state` together, both files read in one round trip.

        What a call does first: on the local disk it costs one worker-thread hop, new session
        or not (:meth:`~harness.filesystem.Storage.get_many`).
        """
        path, state_path = self.path(ctx), self._state_path(ctx)
        found, found_state = await self.workspace.get_many_bytes([path, state_path])
        messages = await self._loaded(path, found, waiting)
        return messages, self._state_of(ctx, state_path, found_state)

    async def _loaded(
        self, path: str, found: tuple[bytes, str] | None, waiting: Collection[str]
    ) -> History:
        data = found[0] if found is not None else b""
        known = self._known.get(path)
        kept = known.messages() if known is not None and known.matches(data) else None
        if known is not None and kept is not None:
            history = History(kept)
            self._known[path] = _Known(known.size, known.tail, history, len(history), 0)
            return history
        if len(data) > _PARSE_IN_THREAD:
            messages, bad = await asyncio.to_thread(_parse, data)
        else:
            messages, bad = _parse(data)
        if bad:
            await self._quarantine(path, bad)
        repaired = History(_answer_lost_calls(messages, waiting))
        if not bad and len(repaired) == len(messages) and (not data or data.endswith(b"\n")):
            self._known[path] = _Known(len(data), data[-_TAIL:], repaired, len(repaired), 0)
        else:  # the next save rewrites the file whole, from what was kept and repaired
            self._known.pop(path, None)
        return repaired

    def _state_path(self, ctx: RuntimeContext) -> str:
        return f"{self.directory(ctx)}/{STATE_FILE}"

    def _state_of(
        self, ctx: RuntimeContext, path: str, found: tuple[bytes, str] | None
    ) -> SessionState:
        if found is None:
            self._states.pop(path, None)
            return SessionState()
        data = found[0]
        cached = self._states.get(path)
        if cached is not None and cached[0] == data:
            return cached[1].copy()  # the values, and what hooks decoded them into
        try:
            values = json.loads(data)
            if not isinstance(values, dict):
                raise ValueError("not a JSON object")
        except ValueError as exc:
            logger.warning(
                "%s cannot be read (%s); session %r goes on with a fresh state",
                path,
                exc,
                ctx.session_id,
            )
            return SessionState()
        state = SessionState(values)
        self._states[path] = (data, state)
        return state.copy()

    async def save_state(self, ctx: RuntimeContext, state: SessionState) -> None:
        """Persist the session's state if a hook changed it since it was loaded or saved.

        A call saves it with its messages instead (:meth:`save`'s ``state``): one trip.
        """
        data = _state_bytes(state)
        if data is None:
            return
        path = self._state_path(ctx)
        try:
            appender = self._appenders.get(self.path(ctx))
            if appender is not None:  # a call's: no fsync unless session_fsync asks
                await appender.write(replace={STATE_FILE: data}, sync=self.fsync is not None)
            else:
                await self.workspace.put_bytes(path, data)
        except BaseException:
            self._states.pop(path, None)
            raise
        state.changed = False
        self._states[path] = (data, state)

    async def read(self, ctx: RuntimeContext) -> list[Msg]:
        """The saved messages as they are now, changing nothing: for readers without the lease.

        :meth:`load` is for the call that holds the session: it quarantines lines it cannot
        parse and answers lost tool calls. A reader beside a running call (a served history,
        say) may meet the line that call is appending right now, so it only skips what does not
        parse, and leaves the file and this store's cache as they were.
        """
        found = await self.workspace.get_bytes(self.path(ctx))
        data = found[0] if found is not None else b""
        if len(data) > _PARSE_IN_THREAD:
            return (await asyncio.to_thread(_parse, data))[0]
        return _parse(data)[0]

    async def save(
        self,
        ctx: RuntimeContext,
        messages: Sequence[Msg],
        *,
        exclusive: bool = False,
        end: bool = False,
        state: SessionState | None = None,
    ) -> None:
        """Persist the session's messages (append when they only grew, else atomic rewrite).

        ``exclusive``: the caller holds the session's lease (:mod:`harness.session.lease`)
        since it loaded or saved it here, so nobody else wrote it meanwhile and a save that
        only grew the messages appends without reading the file first. The agent saves this
        way before every step. ``end``: the save that ends a call (with ``fsync="turn"`` it
        syncs the call's appends to the disk; otherwise the held file is let go in the same
        trip). ``state``: the session's state, written too if a hook changed it, in the same
        trip as the messages while the call holds the file (:meth:`holding`): a step costs
        one worker-thread hop on the local disk, a new session's first step too. The state
        is then replaced atomically without ``fsync`` unless ``fsync`` is set: a crash keeps
        the old state or the new one, and a power loss at worst the old one, which only makes
        the hooks start afresh (no message depends on it).
        """
        path = self.path(ctx)
        # A History is kept as it is (it says when it was rewritten); anything else is copied.
        source = messages if isinstance(messages, History) else tuple(messages)
        rewrites = messages.rewrites if isinstance(messages, History) else 0
        state_data = _state_bytes(state) if state is not None else None
        state_path = self._state_path(ctx)
        # The held file is let go with the call's last write; a sync goes in the same trip.
        durable = self.fsync == "step" or (self.fsync == "turn" and end)
        try:
            await self._save(
                path,
                source,
                rewrites,
                exclusive=exclusive,
                state=state_data,
                release=end,
                durable=durable,
            )
            if durable and path in self._unsynced:  # not synced by the write itself
                appender = self._appenders.get(path)
                await (appender.sync() if appender else self.workspace.sync(path))
                self._unsynced.discard(path)
        except BaseException:
            # The write may have landed or not (a lost reply, a cancelled call): what the file
            # holds is unknown now, so the next save reads it and rewrites it if it differs,
            # instead of appending the same messages a second time.
            self._known.pop(path, None)
            if state_data is not None:
                self._states.pop(state_path, None)
            raise
        if state is not None and state_data is not None:
            state.changed = False
            self._states[state_path] = (state_data, state)

    async def _save(
        self,
        path: str,
        source: Sequence[Msg],
        rewrites: int,
        *,
        exclusive: bool,
        state: bytes | None = None,
        release: bool = False,
        durable: bool = False,
    ) -> None:
        count = len(source)
        known = self._known.get(path)
        if exclusive and known is not None and known.continued_by(source, rewrites):
            new = _serialize(source[known.count : count])
            await self._write(path, new, state, release=release, durable=durable)
            tail = (known.tail + new)[-_TAIL:]
            self._known[path] = _Known(known.size + len(new), tail, source, count, rewrites)
            return
        found = await self.workspace.get_bytes(path)
        data = found[0] if found is not None else b""
        if known is not None and known.matches(data) and known.continued_by(source, rewrites):
            new = _serialize(source[known.count : count])
            await self._write(path, new, state, release=release, durable=durable)
            data += new
        else:
            data = _serialize(source[:count])
            await self._rewrite(path, data, state, release=release)
            self._unsynced.discard(path)  # a rewrite is synced (temporary file, fsync, rename)
        self._known[path] = _Known(len(data), data[-_TAIL:], source, count, rewrites)

    async def _write(
        self, path: str, data: bytes, state: bytes | None, *, release: bool, durable: bool
    ) -> None:
        """Append ``data`` and replace the state (when given), in one trip if the file is held.

        ``durable``: the session's appends are to be synced too (``fsync``), in that trip.
        """
        if data and self.fsync is not None:
            self._unsynced.add(path)
        appender = self._appenders.get(path)
        if appender is None:  # not a call's save: one operation each
            if data:
                await self.workspace.append_bytes(path, data)
            if state is not None:
                await self.workspace.put_bytes(path.rsplit("/", 1)[0] + "/" + STATE_FILE, state)
            return
        sync_append = durable and path in self._unsynced
        if data or state is not None or release or sync_append:
            await appender.write(
                data,
                replace={STATE_FILE: state} if state is not None else None,
                sync=self.fsync is not None,
                release=release,
                sync_append=sync_append,
            )
            if sync_append:
                self._unsynced.discard(path)

    async def _rewrite(self, path: str, data: bytes, state: bytes | None, *, release: bool) -> None:
        """Replace the messages, and the state when given, in one trip if the file is held.

        Synced in every mode (a power loss must not cost the conversation); rewrites are rare
        (a compaction, a repaired file), so this costs a step nothing.
        """
        appender = self._appenders.get(path)
        if appender is None:
            await self.workspace.put_bytes(path, data)
            if state is not None:
                await self.workspace.put_bytes(path.rsplit("/", 1)[0] + "/" + STATE_FILE, state)
            return
        replace = {MESSAGES_FILE: data} | ({STATE_FILE: state} if state is not None else {})
        await appender.write(replace=replace, sync=True, release=release)

    async def _quarantine(self, path: str, bad: list[_BadLine]) -> None:
        """Copy unreadable lines beside the session before any save can drop them.

        Raises:
            StorageError: The copy could not be written (then nothing is rewritten either).
        """
        target = path.rsplit("/", 1)[0] + "/" + QUARANTINE_FILE
        kept = await self.workspace.get_bytes(target)
        seen = {
            record.get("sha256")
            for record in _records(kept[0] if kept is not None else b"")
            if isinstance(record, dict)
        }
        fresh = [line for line in bad if line.digest not in seen]
        for line in bad:
            logger.warning(
                "%s:%d: a line that cannot be read (%s) is kept in %s and left out of the session",
                path,
                line.number,
                line.problem,
                target,
            )
        if fresh:
            now = datetime.now(UTC).isoformat()
            records = "".join(
                json.dumps(
                    {"file": path, "line": line.number, "at": now, "problem": line.problem,
                     "sha256": line.digest, "text": line.text},
                    ensure_ascii=False,
                )
                + "\n"
                for line in fresh
            )  # fmt: skip
            await self.workspace.append_bytes(target, records.encode("utf-8"))


@dataclass(frozen=True, slots=True)
class _BadLine:
    number: int
    text: str
    problem: str
    digest: str


def _parse(data: bytes) -> tuple[list[Msg], list[_BadLine]]:
    """The file's messages, and the lines that did not parse."""
    messages: list[Msg] = []
    bad: list[_BadLine] = []
    for number, line in enumerate(data.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            messages.append(Msg.model_validate_json(line))
        except ValidationError as exc:
            text = line.decode("utf-8", errors="replace")
            digest = hashlib.sha256(line).hexdigest()
            bad.append(_BadLine(number, text, exc.errors()[0]["msg"], digest))
    return messages, bad


def _records(data: bytes) -> list[object]:
    found = []
    for line in data.splitlines():
        try:
            found.append(json.loads(line))
        except ValueError:
            continue
    return found


class _EveryCall(Collection[str]):
    """Every tool-call id: what a durable agent leaves unanswered on load (its gate decides)."""

    def __contains__(self, item: object) -> bool:
        return True

    def __iter__(self) -> Iterator[str]:
        return iter(())

    def __len__(self) -> int:
        return 0


EVERY_CALL: Final[Collection[str]] = _EveryCall()
"""``waiting`` for a durable agent: every unanswered call of the last turn is left for the
approvals gate's journal, which knows whether it ran (:mod:`harness.approvals.gate`)."""


def _answer_lost_calls(messages: list[Msg], waiting: Collection[str] = ()) -> list[Msg]:
    """``messages`` with an error result after every tool call whose result is missing.

    Except the calls of the last assistant turn that are ``waiting`` (for an approval).
    """
    repaired: list[Msg] = []
    index = 0
    while index < len(messages):
        message = messages[index]
        repaired.append(message)
        index += 1
        if message.role != "assistant" or not message.tool_uses:
            continue
        answered: set[str] = set()
        while index < len(messages) and messages[index].role == "tool":
            answered.update(result.id for result in messages[index].tool_results)
            repaired.append(messages[index])
            index += 1
        last = index == len(messages)
        for call in message.tool_uses:
            if call.id not in answered and not (last and call.id in waiting):
                lost = ToolResultBlock(
                    id=call.id, name=call.name, output=LOST_RESULT, is_error=True
                )
                repaired.append(Msg.tool_result(lost))
    return repaired if len(repaired) != len(messages) else messages


def _starts_with(messages: Sequence[Msg], prefix: Sequence[Msg]) -> bool:
    return len(messages) >= len(prefix) and all(
        a is b for a, b in zip(messages, prefix, strict=False)
    )


def _state_bytes(state: SessionState) -> bytes | None:
    """The state's file, or None when no hook changed it since it was loaded or saved."""
    if not state.changed:
        return None
    # ASCII escapes keep every string exact, lone surrogates included.
    return json.dumps(state.values(), separators=(",", ":")).encode("ascii")


def _serialize(messages: Sequence[Msg]) -> bytes:
    return "".join(m.model_dump_json() + "\n" for m in messages).encode("utf-8")
