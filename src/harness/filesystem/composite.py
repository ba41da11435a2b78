"""One filesystem made of several: path prefixes routed to their own backends.

``CompositeFilesystem(default, {"memory/": store_fs, "agents/main/sessions/": other})`` sends
every path under a route to that route's backend and everything else to ``default``:

- **routing**: routes are directories (``"memory"`` and ``"/memory/"`` are the same route); the
  longest route that contains the path wins. The route's backend gets the rest of the path
  (``memory/2025-01-01.md`` → ``/2025-01-01.md``; the route itself → ``/``), and every path in
  its answer comes back with the route in front, so callers never see the split;
- **shadowing**: a route hides whatever ``default`` holds under the same prefix;
- **listing and search**: ``ls`` of a directory that contains routes (the root, ``.`` and ``""``
  included) merges ``default``'s entries with one directory entry for each route below it;
  ``glob`` and ``grep`` over such a directory search the routed backends too, so a recursive
  search of the root finds everything; the storage contract's ``entries``, ``remove`` and
  ``rename`` are ``ls``/``glob``, ``delete`` and ``move``, routed the same way
  (:class:`~harness.filesystem.base.AbstractFilesystem`);
- **several backends in one request**: ``upload`` and ``download`` split by backend and keep
  the caller's order; ``move`` across backends copies, then deletes the source;
- **commands**: when ``default`` can run commands the composite can too, and ``execute`` goes
  to ``default`` (only ``default``'s files are where the commands run). Constructing a
  composite over a :class:`~harness.filesystem.base.ShellFilesystem` gives a
  :class:`ShellCompositeFilesystem`, so ``isinstance(fs, ShellFilesystem)`` says truthfully
  whether ``execute`` is there;
- **lifecycle**: ``start``, ``release`` and ``aclose`` reach every backend that has them.

The call's :class:`~harness.context.RuntimeContext` is passed to each backend unchanged: every
backend applies its own namespace.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Mapping, Sequence
from typing import Any, Final

from harness.context import RuntimeContext
from harness.errors import PathOutsideWorkspace
from harness.filesystem._semantics import Glob, grep_result
from harness.filesystem.base import (
    AbstractFilesystem,
    Appender,
    EditResult,
    ExecuteResult,
    FileInfo,
    GrepMatch,
    GrepResult,
    IsolationScope,
    ListResult,
    ReadResult,
    ShellFilesystem,
    TransferResult,
    Version,
    WriteResult,
    check_path,
    namespace_prefix,
)
from harness.layout import USERS_DIR
from harness.paths import normalize

__all__ = ["CompositeFilesystem", "ShellCompositeFilesystem"]

_NAMESPACE_DIRS: Final = {IsolationScope.USER: USERS_DIR, IsolationScope.SESSION: "sessions"}
"""Where each scope keeps its namespaces, as a call that sees the whole workspace names them."""


def _below(path: str, directory: str) -> str | None:
    """``path`` relative to ``directory`` (both normalized), or None when it is not under it."""
    if not directory:
        return path
    if path == directory:
        return ""
    if path.startswith(directory + "/"):
        return path[len(directory) + 1 :]
    return None


def _normal_or_none(path: str) -> str | None:
    try:
        return normalize(path)
    except PathOutsideWorkspace:
        return None


def _glob(pattern: str) -> Glob:
    """The paths a glob pattern selects, as every backend reads it.

    ``*``, ``?`` and ``[...]`` match within a name, ``**`` spans directories and ``**/x`` also
    matches ``x`` at the top.
    """
    parts = [
        part for part in pattern.replace("\\", "/").strip().split("/") if part not in ("", ".")
    ]
    return Glob("/".join(parts))


class CompositeFilesystem(AbstractFilesystem):
    """A filesystem that routes path prefixes to backends (see the module documentation).

    Args:
        default: The backend of every path no route claims.
        routes: Directory prefixes and their backends; the longest matching prefix wins.

    Raises:
        ValueError: A route is empty (the root belongs to ``default``), climbs out with ``..``,
            or is given twice.
        TypeError: A backend is not an :class:`AbstractFilesystem`.
    """

    def __new__(
        cls,
        default: AbstractFilesystem,
        routes: Mapping[str, AbstractFilesystem] | None = None,
    ) -> CompositeFilesystem:
        target: type[CompositeFilesystem] = cls
        if cls is CompositeFilesystem and isinstance(default, ShellFilesystem):
            target = ShellCompositeFilesystem
        return super().__new__(target)

    def __init__(
        self,
        default: AbstractFilesystem,
        routes: Mapping[str, AbstractFilesystem] | None = None,
    ) -> None:
        if not isinstance(default, AbstractFilesystem):
            msg = f"CompositeFilesystem default must be an AbstractFilesystem, got {default!r}"
            raise TypeError(msg)
        table: dict[str, AbstractFilesystem] = {}
        for prefix, backend in (routes or {}).items():
            if not isinstance(backend, AbstractFilesystem):
                msg = f"route {prefix!r} must map to an AbstractFilesystem, got {backend!r}"
                raise TypeError(msg)
            try:
                key = normalize(prefix)
            except PathOutsideWorkspace as exc:
                msg = f"route {prefix!r} is not a path inside the workspace: {exc}"
                raise ValueError(msg) from exc
            if not key:
                msg = f"route {prefix!r} is the root, which belongs to the default backend"
                raise ValueError(msg)
            if key in table:
                msg = f"route {prefix!r} is given twice (as {key!r}); give each prefix once"
                raise ValueError(msg)
            table[key] = backend
        self.default = default
        self.routes: dict[str, AbstractFilesystem] = dict(
            sorted(table.items(), key=lambda item: (-len(item[0]), item[0]))
        )
        self.scope = default.scope

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.default!r}, {self.routes!r})"

    # -- routing --------------------------------------------------------------------------

    def _split(self, rel: str, ctx: RuntimeContext | None) -> tuple[str, str]:
        """A normalized path as (namespace directory, path inside the namespace).

        A call that sees the whole workspace (``ctx=None``) names a user's files as
        ``users/<id>/...``: routes apply inside each namespace, so ``users/alice/memory/x``
        is ``memory/x`` of alice's namespace, the same file alice reaches as ``memory/x``.
        """
        top = _NAMESPACE_DIRS.get(self.scope)
        if top is None or namespace_prefix(self.scope, ctx):
            return "", rel
        parts = rel.split("/", 2)
        if len(parts) >= 2 and parts[0] == top:
            return f"{parts[0]}/{parts[1]}/", parts[2] if len(parts) == 3 else ""
        return "", rel

    def _route(self, path: str, ctx: RuntimeContext | None) -> tuple[AbstractFilesystem, str, str]:
        """The backend of ``path``, its route (``""``: the default) and the path it gets there.

        A path that does not normalize (``..``, ``~``) goes to ``default`` as it is, which
        refuses it the way it refuses any bad path.
        """
        try:
            rel = normalize(path)
        except PathOutsideWorkspace:
            return self.default, "", path
        namespace, local = self._split(rel, ctx)
        for prefix, backend in self.routes.items():
            rest = _below(local, prefix)
            if rest is not None:
                return backend, prefix, "/" + f"{namespace}{rest}".rstrip("/")
        return self.default, "", path

    def _outer(self, route: str, inner: str, ctx: RuntimeContext | None) -> str | None:
        """A routed backend's path seen from outside, or None for a namespace directory.

        The route goes in after the namespace: ``users/alice/x`` of the ``memory`` route is
        ``users/alice/memory/x``.
        """
        if not route:
            return inner
        namespace, local = self._split(inner.strip("/"), ctx)
        if not namespace and local == _NAMESPACE_DIRS.get(self.scope) and self._splits(ctx):
            return None  # the directory of every namespace, not a file of this one
        return f"{namespace}{route}/{local}" if local else f"{namespace}{route}"

    def _splits(self, ctx: RuntimeContext | None) -> bool:
        return self.scope in _NAMESPACE_DIRS and not namespace_prefix(self.scope, ctx)

    def _routes_under(self, directory: str, ctx: RuntimeContext | None) -> list[str]:
        """The next name towards each route strictly below ``directory`` (normalized)."""
        try:
            check_path(directory, self.scope, ctx)
        except PathOutsideWorkspace:
            return []  # a directory the caller may not see has no routes for them either
        _, local = self._split(directory, ctx)
        if directory == _NAMESPACE_DIRS.get(self.scope) and self._splits(ctx):
            return []
        names = []
        for prefix in self.routes:
            rest = _below(prefix, local)
            if rest:
                names.append(rest.split("/", 1)[0])
        return names

    def _backends(self) -> list[AbstractFilesystem]:
        """Every distinct backend, the default first."""
        seen: list[AbstractFilesystem] = [self.default]
        for backend in self.routes.values():
            if all(backend is not known for known in seen):
                seen.append(backend)
        return seen

    def _map_entries(
        self, entries: list[FileInfo], route: str, ctx: RuntimeContext | None, under: str
    ) -> list[FileInfo]:
        """Routed entries with their outside paths, only those under ``under``."""
        out = []
        for info in entries:
            path = self._outer(route, info.path, ctx)
            if path is not None and _below(path, under) is not None:
                out.append(FileInfo(path, info.is_dir, info.size, info.modified_at))
        return out

    # -- tool operations ------------------------------------------------------------------

    async def ls(self, path: str = "/", ctx: RuntimeContext | None = None) -> ListResult:
        """The entries of a directory; routes below it show as directories."""
        backend, route, inner = self._route(path, ctx)
        result = await backend.ls(inner, ctx)
        directory = _normal_or_none(path)
        if result.error is not None or directory is None:
            return result
        entries = {
            info.path: info for info in self._map_entries(result.entries, route, ctx, directory)
        }
        for name in self._routes_under(directory, ctx):
            shown = f"{directory}/{name}" if directory else name
            entries[shown] = FileInfo(shown, is_dir=True)
        return ListResult(sorted(entries.values(), key=lambda info: info.path))

    async def read(
        self,
        path: str,
        offset: int = 0,
        limit: int | None = None,
        ctx: RuntimeContext | None = None,
    ) -> ReadResult:
        """Lines of a file, from its route's backend."""
        backend, _, inner = self._route(path, ctx)
        return await backend.read(inner, offset, limit, ctx)

    async def write(
        self, path: str, content: str, ctx: RuntimeContext | None = None
    ) -> WriteResult:
        """Create a new file in its route's backend."""
        backend, route, inner = self._route(path, ctx)
        return self._map_write(await backend.write(inner, content, ctx), route, ctx)

    async def edit(
        self,
        path: str,
        old: str,
        new: str,
        replace_all: bool = False,
        ctx: RuntimeContext | None = None,
    ) -> EditResult:
        """Replace text in a file of its route's backend."""
        backend, route, inner = self._route(path, ctx)
        result = await backend.edit(inner, old, new, replace_all, ctx)
        shown = self._outer(route, result.path, ctx) if route and result.path else None
        if shown is None:
            return result
        return EditResult(shown, result.occurrences, result.error)

    def _map_write(
        self, result: WriteResult, route: str, ctx: RuntimeContext | None
    ) -> WriteResult:
        shown = self._outer(route, result.path, ctx) if route and result.path else None
        return result if shown is None else WriteResult(shown, result.error)

    async def grep(
        self,
        pattern: str,
        path: str = "/",
        glob: str | None = None,
        ctx: RuntimeContext | None = None,
    ) -> GrepResult:
        """Lines containing ``pattern`` under ``path``, the routed backends below it included."""
        backend, route, inner = self._route(path, ctx)
        result = await backend.grep(pattern, inner, glob, ctx)
        directory = _normal_or_none(path)
        if result.error is not None or directory is None:
            return result
        matches = self._map_matches(result.matches, route, ctx, directory)
        by_path = glob is not None and "/" in glob.strip().strip("/")
        matcher = _glob(glob) if glob is not None and by_path else None
        others = self._others(route, directory, ctx)
        answers = await asyncio.gather(
            *(
                self.routes[prefix].grep(
                    pattern, self._namespace_of(directory, ctx), None if by_path else glob, ctx
                )
                for prefix in others
            )
        )
        for prefix, answer in zip(others, answers, strict=True):
            for m in self._map_matches(answer.matches, prefix, ctx, directory):
                if matcher is None or matcher.fullmatch(_below(m.path, directory) or ""):
                    matches.append(m)
        cut = result.truncated or any(answer.truncated for answer in answers)
        return grep_result(matches, truncated=cut)

    def _namespace_of(self, directory: str, ctx: RuntimeContext | None) -> str:
        """Where a routed backend is searched for ``directory``: the namespace it lies in.

        A search never crosses namespaces, in a routed backend as in any other: a search of a
        user's files (``users/<id>/...``, from ``ctx=None``) searches that user's directory of
        the routed backend, and a search of the shared root its root.
        """
        namespace, _ = self._split(directory, ctx)
        return "/" + namespace.rstrip("/")

    def _others(self, route: str, directory: str, ctx: RuntimeContext | None) -> list[str]:
        """The routes other than ``route`` whose files can lie under ``directory``."""
        return [
            prefix
            for prefix in self.routes
            if prefix != route and self._may_hold(prefix, directory, ctx)
        ]

    def _map_matches(
        self, matches: list[GrepMatch], route: str, ctx: RuntimeContext | None, under: str | None
    ) -> list[GrepMatch]:
        out = []
        for m in matches:
            shown = self._outer(route, m.path, ctx)
            if shown is None or not self._owns(route, shown, ctx):
                continue
            if under is not None and _below(shown, under) is None:
                continue
            out.append(GrepMatch(shown, m.line, m.text))
        return out

    def _owns(self, route: str, path: str, ctx: RuntimeContext | None) -> bool:
        """Whether ``route`` is the route of ``path`` (no longer route claims it)."""
        return self._route(path, ctx)[1] == route

    def _may_hold(self, route: str, directory: str, ctx: RuntimeContext | None) -> bool:
        """Whether files of ``route`` can lie under ``directory`` (searched from outside it)."""
        namespace, local = self._split(directory, ctx)
        if not local:
            return True  # the root, or a namespace's root
        if namespace or not self._splits(ctx):
            return _below(route, local) is not None
        return local == _NAMESPACE_DIRS.get(self.scope) or _below(route, local) is not None

    async def glob(
        self, pattern: str, path: str = "/", ctx: RuntimeContext | None = None
    ) -> ListResult:
        """Files under ``path`` matching ``pattern``, the routed backends below it included."""
        backend, route, inner = self._route(path, ctx)
        result = await backend.glob(pattern, inner, ctx)
        directory = _normal_or_none(path)
        if result.error is not None or directory is None:
            return result
        found = [
            info
            for info in self._map_entries(result.entries, route, ctx, directory)
            if self._owns(route, info.path, ctx)
        ]
        matcher = _glob(pattern)
        others = self._others(route, directory, ctx)
        answers = await asyncio.gather(
            *(
                self.routes[prefix].glob("**", self._namespace_of(directory, ctx), ctx)
                for prefix in others
            )
        )
        for prefix, answer in zip(others, answers, strict=True):
            for info in self._map_entries(answer.entries, prefix, ctx, directory):
                below = _below(info.path, directory) or ""
                if self._owns(prefix, info.path, ctx) and matcher.fullmatch(below):
                    found.append(info)
        return ListResult(sorted(found, key=lambda info: info.path))

    async def upload(
        self, files: Sequence[tuple[str, bytes]], ctx: RuntimeContext | None = None
    ) -> list[TransferResult]:
        """Write files, each through its route's backend; results in the caller's order."""
        groups: dict[int, tuple[AbstractFilesystem, list[int], list[tuple[str, bytes]]]] = {}
        for index, (path, data) in enumerate(files):
            backend, _, inner = self._route(path, ctx)
            group = groups.setdefault(id(backend), (backend, [], []))
            group[1].append(index)
            group[2].append((inner, data))
        return await self._transfer(
            [path for path, _ in files],
            [(indexes, backend.upload(batch, ctx)) for backend, indexes, batch in groups.values()],
        )

    async def download(
        self, paths: Sequence[str], ctx: RuntimeContext | None = None
    ) -> list[TransferResult]:
        """The bytes of files, each from its route's backend; results in the caller's order."""
        groups: dict[int, tuple[AbstractFilesystem, list[int], list[str]]] = {}
        for index, path in enumerate(paths):
            backend, _, inner = self._route(path, ctx)
            group = groups.setdefault(id(backend), (backend, [], []))
            group[1].append(index)
            group[2].append(inner)
        return await self._transfer(
            list(paths),
            [
                (indexes, backend.download(batch, ctx))
                for backend, indexes, batch in groups.values()
            ],
        )

    async def _transfer(
        self,
        paths: list[str],
        batches: list[tuple[list[int], Coroutine[Any, Any, list[TransferResult]]]],
    ) -> list[TransferResult]:
        """Run each backend's share at once; answer in the caller's order, with its paths."""
        answers = await asyncio.gather(*(batch for _, batch in batches))
        out: list[TransferResult | None] = [None] * len(paths)
        for (indexes, _), answer in zip(batches, answers, strict=True):
            for index, result in zip(indexes, answer, strict=True):
                out[index] = TransferResult(paths[index], result.content, result.error)
        return [result for result in out if result is not None]

    async def exists(self, path: str, ctx: RuntimeContext | None = None) -> bool:
        """Whether a file or directory is there; a route and its parents always are."""
        backend, route, inner = self._route(path, ctx)
        directory = _normal_or_none(path)
        if not route and directory is not None and self._routes_under(directory, ctx):
            return True
        return await backend.exists(inner, ctx)

    async def delete(self, path: str, ctx: RuntimeContext | None = None) -> WriteResult:
        """Delete a file in its route's backend."""
        backend, route, inner = self._route(path, ctx)
        return self._map_write(await backend.delete(inner, ctx), route, ctx)

    async def move(
        self, source: str, target: str, ctx: RuntimeContext | None = None
    ) -> WriteResult:
        """Move a file; across backends, copy it and then delete the source."""
        from_backend, from_route, from_inner = self._route(source, ctx)
        to_backend, to_route, to_inner = self._route(target, ctx)
        if from_backend is to_backend and from_route == to_route:
            moved = await from_backend.move(from_inner, to_inner, ctx)
            return self._map_write(moved, to_route, ctx)
        (got,) = await from_backend.download([from_inner], ctx)
        if got.error is not None or got.content is None:
            return WriteResult(source, got.error)
        (put,) = await to_backend.upload([(to_inner, got.content)], ctx)
        if put.error is not None:
            return WriteResult(target, put.error)
        removed = await from_backend.delete(from_inner, ctx)
        if removed.error is not None:
            return WriteResult(source, removed.error)
        return WriteResult(target)

    # -- storage operations ---------------------------------------------------------------

    async def get(
        self, path: str, ctx: RuntimeContext | None = None, *, limit: int | None = None
    ) -> tuple[bytes, Version] | None:
        """A whole file and its version, from its route's backend."""
        backend, _, inner = self._route(path, ctx)
        return await backend.get(inner, ctx, limit=limit)

    async def get_many(
        self, paths: Sequence[str], ctx: RuntimeContext | None = None, *, limit: int | None = None
    ) -> list[tuple[bytes, Version] | None]:
        """Files and versions, in one round trip to their backend when they share one."""
        routes = [self._route(path, ctx) for path in paths]
        if routes and all(route[0] is routes[0][0] for route in routes):
            return await routes[0][0].get_many([inner for _, _, inner in routes], ctx, limit=limit)
        return [await backend.get(inner, ctx, limit=limit) for backend, _, inner in routes]

    async def put(
        self,
        path: str,
        data: bytes,
        ctx: RuntimeContext | None = None,
        *,
        if_version: Version | None = None,
    ) -> Version | None:
        """Replace a file in its route's backend (compare-and-set with ``if_version``)."""
        backend, _, inner = self._route(path, ctx)
        return await backend.put(inner, data, ctx, if_version=if_version)

    async def append(self, path: str, data: bytes, ctx: RuntimeContext | None = None) -> None:
        """Append one record to a file of its route's backend."""
        backend, _, inner = self._route(path, ctx)
        await backend.append(inner, data, ctx)

    async def sync(self, path: str, ctx: RuntimeContext | None = None) -> None:
        """Sync a file on its route's backend (:meth:`Storage.sync`)."""
        backend, _, inner = self._route(path, ctx)
        await backend.sync(inner, ctx)

    def appender(self, path: str, ctx: RuntimeContext | None = None) -> Appender:
        """The appender of a file's route's backend (:meth:`Storage.appender`)."""
        backend, _, inner = self._route(path, ctx)
        return backend.appender(inner, ctx)

    # -- lifecycle ------------------------------------------------------------------------

    async def start(self, ctx: RuntimeContext | None = None) -> None:
        """Start every backend that has a per-call lifecycle (a sandbox)."""
        for backend in self._backends():
            start = getattr(backend, "start", None)
            if start is not None:
                await start(ctx)

    async def release(self, ctx: RuntimeContext | None = None) -> None:
        """Release what every backend with a per-call lifecycle holds for the call."""
        for backend in self._backends():
            release = getattr(backend, "release", None)
            if release is not None:
                await release(ctx)

    async def aclose(self) -> None:
        """Close every backend."""
        for backend in self._backends():
            await backend.aclose()


class ShellCompositeFilesystem(CompositeFilesystem, ShellFilesystem):
    """A :class:`CompositeFilesystem` whose default backend runs commands.

    ``CompositeFilesystem(default, routes)`` returns one of these when ``default`` is a
    :class:`~harness.filesystem.base.ShellFilesystem`.
    """

    async def execute(
        self,
        command: str,
        timeout: float | None = None,  # noqa: ASYNC109 (the command's limit, not ours)
        working_directory: str | None = None,
        ctx: RuntimeContext | None = None,
    ) -> ExecuteResult:
        """Run ``command`` on the default backend (routed files are not where it runs)."""
        default = self.default
        assert isinstance(default, ShellFilesystem)  # chosen in __new__ for this reason
        return await default.execute(command, timeout, working_directory, ctx)
