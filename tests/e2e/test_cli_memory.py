"""Long-term memory through the command line: what `harness run` remembers, `harness memory`.

Every scenario runs real ``harness`` processes against its own workspace. The scenarios are
independent, so the module starts them all at once on a few threads (each test then waits for
the one it checks), which keeps the module's wall time close to that of its longest scenario.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any, Final, TypeVar

import pytest
from _cli_runner import (
    CONSOLIDATION_PROMPT,
    FLUSH_PROMPT,
    NO_MEMORIES,
    Cli,
    InOrder,
    Result,
    daily_logs,
    last_text,
    make_cli,
    memory_dir,
    read_jsonl,
    read_session,
    sessions_dir,
    split_requests,
    squash,
    text_of,
    visible_files,
    write_script,
)

from harness.cli.memory import memory_app
from harness.memory import FLUSH_SYSTEM_PROMPT

T = TypeVar("T")

Hit = dict[str, Any]

HIT_KEYS: Final = {"path", "line_number", "last_line", "content", "rank"}

ANNA_FACT: Final = "- Anna moved to Berlin in March 2026."
ANNA_QUESTION: Final = "When did Anna move to Berlin?"
# Neither the user's message nor the reply names Berlin, so the daily log's line answers best.
ANNA_MESSAGE: Final = "My friend Anna has news about her new flat."
ANNA_REPLY: Final = "Good news for Anna!"

INDEX_LINE: Final = re.compile(
    r"^Indexed (\d+) files \((\d+) unchanged, (\d+) removed\) in \d+\.\d\d s$"
)


def consolidation_turn(text: str, *, match: str = "") -> dict[str, Any]:
    """A script turn answering every consolidation request with ``text``.

    The text must be drawn from the daily logs the scenario writes: consolidation leaves out
    (and warns about) a line drawn from nothing it was given.
    """
    return {"match": CONSOLIDATION_PROMPT + match, "text": text, "repeat": True}


# --- helpers ----------------------------------------------------------------------------------


def run_all(calls: Sequence[Callable[[], T]]) -> list[T]:
    """Run independent command lines one after another; results in the order of ``calls``."""
    return [call() for call in calls]


def local_days(before: date, after: date) -> set[str]:
    """The names a daily log written between two local dates can have (midnight may pass)."""
    return {f"{before.isoformat()}.md", f"{after.isoformat()}.md"}


def hits_of(result: Result) -> list[Hit]:
    """The hits ``harness memory search --json`` printed, checked to be well-formed."""
    assert (result.returncode, result.stderr) == (0, ""), result
    hits = json.loads(result.stdout)
    assert isinstance(hits, list), result
    for hit in hits:
        assert isinstance(hit, dict)
        assert set(hit) == HIT_KEYS, hit
        assert isinstance(hit["path"], str)
        assert isinstance(hit["line_number"], int)
        assert hit["line_number"] >= 1
        assert hit["last_line"] >= hit["line_number"]
        assert isinstance(hit["content"], str)
        assert isinstance(hit["rank"], float)
    ranks = [hit["rank"] for hit in hits]
    assert ranks == sorted(ranks, reverse=True), "hits are not best first"
    return hits


def by_rank(hits: list[Hit]) -> list[Hit]:
    """``hits`` best first, hits of equal rank by path and line (the CLI orders those by when
    their rows were indexed, which a rebuild changes)."""
    return sorted(hits, key=lambda hit: (-hit["rank"], hit["path"], hit["line_number"]))


def line_at(workspace: Path, hit: Mapping[str, Any]) -> str:
    """The stripped line a hit points at (its path is workspace-relative, its number 1-based)."""
    path: str = hit["path"]
    number: int = hit["line_number"]
    return (workspace / path).read_text(encoding="utf-8").splitlines()[number - 1].strip()


def flush_heading_time(line: str) -> datetime:
    """The time in a ``## Memory Flush — <ISO time>`` heading."""
    match = re.fullmatch(r"## Memory Flush — (\S+)", line)
    assert match, line
    stamp = datetime.fromisoformat(match.group(1))
    assert stamp.tzinfo is not None, line
    return stamp


def indexable(workspace: Path) -> list[Path]:
    """The files the search index covers, in every namespace (see harness.memory.index)."""
    roots = [workspace, *(p for p in (workspace / "users").glob("*") if p.is_dir())]
    found: list[Path] = []
    for root in roots:
        found += [p for p in [root / "MEMORY.md"] if p.is_file()]
        found += (root / "memory").glob("*.md")
        found += (root / "agents").glob("*/sessions/*.log.jsonl")
    return found


def set_age(path: Path, days: float) -> None:
    """Make ``path`` look last written ``days`` ago."""
    when = (datetime.now(UTC) - timedelta(days=days)).timestamp()
    os.utime(path, (when, when))


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def index_counts(result: Result) -> tuple[int, int, int]:
    """(indexed, unchanged, removed) from the one line ``harness memory index`` prints."""
    assert (result.returncode, result.stderr) == (0, ""), result
    lines = result.stdout.splitlines()
    assert len(lines) == 1, result
    match = INDEX_LINE.match(lines[0])
    assert match, result
    return int(match[1]), int(match[2]), int(match[3])


# --- scenarios ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class AnnaRun:
    """One `harness run --user alice` whose flush remembers where Anna moved."""

    cli: Cli
    workspace: Path
    log: Path
    result: Result
    started: datetime
    finished: datetime
    days: set[str]


def anna_run(root: Path) -> AnnaRun:
    cli = make_cli(root)
    script = write_script(
        root / "script.json",
        [
            {"match": FLUSH_PROMPT + r"[\s\S]*Anna", "text": ANNA_FACT},
            NO_MEMORIES,
            consolidation_turn("# Memory\n\n" + ANNA_FACT),
            {"match": "Anna", "text": ANNA_REPLY},
        ],
        log="requests.jsonl",
    )
    workspace = root / "ws"
    started, first_day = datetime.now(UTC), date.today()
    model = f"scripted:{script}"
    result = cli.run("run", "-w", workspace, "-s", "trip", "-u", "alice", "-m", model, ANNA_MESSAGE)
    finished, last_day = datetime.now(UTC), date.today()
    days = local_days(first_day, last_day)
    return AnnaRun(cli, workspace, root / "requests.jsonl", result, started, finished, days)


HOSTILE_QUERIES: Final = {
    "quote": '"',
    "star": "*",
    "near": "NEAR(",
    "operators only": "AND OR",
    "emoji": "🦄🚀",
    "ten thousand characters": ("Berlin AND (Anna OR NOT) * " * 400)[:10_000],
    "near with words": "NEAR(Anna Berlin, 2)",
    "column, caret, prefix, quote": 'content:Berlin ^Anna* "moved',
}
"""Queries that would be FTS5 syntax (or worse) if they reached FTS5 as they are."""

FINDS_ANNA: Final = (
    "ten thousand characters",
    "near with words",
    "column, caret, prefix, quote",
)
"""The hostile queries holding words: those are searched as plain words, so they find Anna."""


@dataclass(frozen=True)
class Searches:
    run: AnnaRun
    alice_snippets: Result
    alice_json: Result
    bob_json: Result
    alice_text: Result
    bob_text: Result
    hostile: dict[str, Result]


def searches(run: AnnaRun) -> Searches:
    def search(*args: str, env: Mapping[str, str] | None = None) -> Callable[[], Result]:
        return lambda: run.cli.run("memory", "search", *args, "-w", run.workspace, env=env)

    calls = [  # one line per hit (--lines), but for the first: snippets, the default
        search(ANNA_QUESTION, "--user", "alice", "--json"),
        search(ANNA_QUESTION, "--user", "alice", "--json", "--lines"),
        search(ANNA_QUESTION, "--user", "bob", "--json", "--lines"),
        # Wide enough that the table cells are not cut, so the row can be read back.
        search(ANNA_QUESTION, "--user", "alice", "--lines", env={"COLUMNS": "250"}),
        search(ANNA_QUESTION, "--user", "bob"),
        *(
            search(query, "--user", "alice", "--json", "--lines")
            for query in HOSTILE_QUERIES.values()
        ),
    ]
    alice_snippets, alice_json, bob_json, alice_text, bob_text, *hostile = run_all(calls)
    return Searches(
        run,
        alice_snippets,
        alice_json,
        bob_json,
        alice_text,
        bob_text,
        dict(zip(HOSTILE_QUERIES, hostile, strict=True)),
    )


@dataclass(frozen=True)
class Indexing:
    run: AnnaRun
    files: int
    first: Result
    second: Result
    search_before: Result
    after_delete: Result
    search_after_delete: Result
    rebuild: Result
    after_removing_transcript: Result
    search_after_removing_transcript: Result
    db_was_gone: bool


def indexing(root: Path) -> Indexing:
    run = anna_run(root)
    assert run.result.returncode == 0, run.result
    ws = run.workspace

    def cmd(*args: str) -> Result:
        return run.cli.run("memory", *args, "-w", ws)

    def search() -> Result:
        return cmd("search", ANNA_QUESTION, "--user", "alice", "--json", "--lines")

    files = len(indexable(ws))
    first, second = cmd("index"), cmd("index")
    search_before = search()
    for db in root.glob("memory_index.db*"):  # with its -wal and -shm files, if any
        db.unlink()
    db_was_gone = not (root / "memory_index.db").exists()
    after_delete = cmd("index")
    search_after_delete = search()
    rebuild = cmd("index", "--rebuild")
    (sessions_dir(ws, user="alice") / "trip.log.jsonl").unlink()
    after_removing = cmd("index")
    search_after_removing = search()
    return Indexing(
        run,
        files,
        first,
        second,
        search_before,
        after_delete,
        search_after_delete,
        rebuild,
        after_removing,
        search_after_removing,
        db_was_gone,
    )


@dataclass(frozen=True)
class Remember:
    workspace: Path
    log: Path
    result: Result
    days: set[str]


LOCKER: Final = "Please remember that my locker code is 4312"


def remember(root: Path) -> Remember:
    cli = make_cli(root)
    script = write_script(
        root / "script.json",
        [
            NO_MEMORIES,
            consolidation_turn("# Memory\n\n- Alice's locker code is 4312."),
            {"match": "locker", "text": "Got it."},
        ],
        log="requests.jsonl",
    )
    first_day = date.today()
    result = cli.run(
        "run", "-w", root / "ws", "--user", "alice", "-m", f"scripted:{script}", LOCKER
    )
    return Remember(
        root / "ws", root / "requests.jsonl", result, local_days(first_day, date.today())
    )


TOM_BORN: Final = "My brother Tom was born on 12 May 1990."
TOM_CHESS: Final = "He plays chess every Sunday."
TOM_FACTS: Final = (
    "- Tom, the user's brother, was born on 12 May 1990.\n- Tom plays chess on Sundays."
)


@dataclass(frozen=True)
class Retry:
    workspace: Path
    failed: Result
    log_after_failure: list[Path]
    transcript_after_failure: list[dict[str, Any]]
    retried: Result
    second_log: Path
    days: set[str]


def retry(root: Path) -> Retry:
    cli = make_cli(root)
    ws = root / "ws"
    # No turn answers the flush: the memory model fails after the agent has replied.
    first = write_script(root / "first.json", [{"match": "^My brother Tom", "text": "Noted."}])
    # The flush turn fits only a request that holds the first call's turn as well.
    second = write_script(
        root / "second.json",
        [
            {"match": rf"{FLUSH_PROMPT}[\s\S]*12 May 1990[\s\S]*every Sunday", "text": TOM_FACTS},
            consolidation_turn("# Memory\n\n" + TOM_FACTS),
            {"match": "chess", "text": "Nice hobby."},
        ],
        log="second.jsonl",
    )
    common = ("run", "-w", ws, "-s", "family", "--user", "alice")
    first_day = date.today()
    failed = cli.run(*common, "-m", f"scripted:{first}", TOM_BORN)
    logs = daily_logs(ws, user="alice")
    transcript = read_jsonl(sessions_dir(ws, user="alice") / "family.jsonl")
    retried = cli.run(*common, "-m", f"scripted:{second}", TOM_CHESS)
    days = local_days(first_day, date.today())
    return Retry(ws, failed, logs, transcript, retried, root / "second.jsonl", days)


@dataclass(frozen=True)
class Consolidation:
    workspace: Path
    log: Path
    no_model: Result
    files_after_no_model: list[str]
    first: Result
    memory_after_first: str
    state_after_first: str
    second: Result
    memory_after_second: str
    state_after_second: str
    started: datetime
    finished: datetime


CONSOLIDATED_TOM: Final = "# Memory\n\n## Family\n- Brother Tom (born 12 May 1990) plays chess."


def consolidation(root: Path) -> Consolidation:
    cli = make_cli(root)
    ws = root / "ws"
    today = date.today()
    alice = memory_dir(ws, user="alice")
    write(
        alice / f"{(today - timedelta(days=1)).isoformat()}.md",
        "\n## Memory Flush — x\n" + TOM_FACTS.split("\n")[0] + "\n",
    )
    write(
        alice / f"{today.isoformat()}.md",
        "\n## Memory Flush — y\n" + TOM_FACTS.split("\n")[1] + "\n",
    )
    # Shared memory is another namespace: consolidating alice's must not take it in.
    write(memory_dir(ws) / f"{today.isoformat()}.md", "- The office closes at 18:00.\n")
    script = write_script(
        root / "script.json",
        [consolidation_turn(CONSOLIDATED_TOM, match=r"(?=[\s\S]*born on 12 May)(?=[\s\S]*chess)")],
        log="requests.jsonl",
    )
    common = ("memory", "consolidate", "-w", ws, "--user", "alice")
    no_model = cli.run(*common)
    files_after_no_model = sorted(p.relative_to(ws).as_posix() for p in ws.rglob("*"))
    started = datetime.now(UTC)
    first = cli.run(*common, "--model", f"scripted:{script}")
    finished = datetime.now(UTC)
    memory_md = ws / "users/alice/MEMORY.md"
    state = alice / ".consolidation_state"

    def read(path: Path) -> str:
        return path.read_text(encoding="utf-8") if path.exists() else ""

    memory_after_first, state_after_first = read(memory_md), read(state)
    second = cli.run(*common, "--model", f"scripted:{script}")
    memory_after_second, state_after_second = read(memory_md), read(state)
    return Consolidation(
        ws,
        root / "requests.jsonl",
        no_model,
        files_after_no_model,
        first,
        memory_after_first,
        state_after_first,
        second,
        memory_after_second,
        state_after_second,
        started,
        finished,
    )


@dataclass(frozen=True)
class Maintenance:
    workspace: Path
    recent_alice: str
    old_alice: str
    old_shared: str
    search_before: Result
    result: Result
    search_after: Result


def maintenance(root: Path) -> Maintenance:
    cli = make_cli(root)
    ws = root / "ws"
    today = date.today()
    old_alice = f"{(today - timedelta(days=100)).isoformat()}.md"
    old_shared = f"{(today - timedelta(days=120)).isoformat()}.md"
    alice = memory_dir(ws, user="alice")
    recent_alice = f"{today.isoformat()}.md"
    write(alice / recent_alice, "- Alice's cat is called Miso.\n")
    set_age(write(alice / old_alice, "- Alice planted tomatoes in the garden.\n"), 100)
    set_age(write(memory_dir(ws) / old_shared, "- The team used to meet on Fridays.\n"), 120)
    # Not named by a date: kept, however old.
    set_age(write(alice / "notes.md", "- Notes kept by hand.\n"), 400)
    sessions = sessions_dir(ws, user="alice")
    entry = {
        "type": "message",
        "id": "m1",
        "parent_id": None,
        "timestamp": "2025-01-01T00:00:00+00:00",
        "role": "user",
    }
    for name, days in (("old", 200), ("recent", 0)):
        for suffix in (".jsonl", ".log.jsonl"):
            line = json.dumps({**entry, "content": f"{name} talk about tomatoes"}) + "\n"
            set_age(write(sessions / f"{name}{suffix}", line), days)
    set_age(write(sessions / "sessions.json", '{"sessions": {}, "version": 1}\n'), 200)

    def search(query: str) -> Result:
        return cli.run("memory", "search", query, "-w", ws, "--user", "alice", "--json", "--lines")

    before = search("tomatoes garden")
    result = cli.run("memory", "maintain", "-w", ws)
    return Maintenance(
        ws,
        recent_alice,
        old_alice,
        old_shared,
        before,
        result,
        search("tomatoes garden"),
    )


@dataclass(frozen=True)
class MaintenanceWithModel:
    workspace: Path
    result: Result


def maintenance_with_model(root: Path) -> MaintenanceWithModel:
    cli = make_cli(root)
    ws = root / "ws"
    write(
        memory_dir(ws, user="alice") / f"{date.today().isoformat()}.md",
        "- Alice's cat is called Miso.\n",
    )
    script = write_script(
        root / "script.json", [consolidation_turn("# Memory\n\n- Alice has a cat, Miso.")]
    )
    # The model comes from HARNESS_MODEL, as for the other commands.
    result = cli.run("memory", "maintain", "-w", ws, env={"HARNESS_MODEL": f"scripted:{script}"})
    return MaintenanceWithModel(ws, result)


SUBCOMMANDS: Final = {
    (c.name or c.callback.__name__): c.callback
    for c in memory_app.registered_commands
    if c.callback
}


def helps(root: Path) -> dict[str, Result]:
    cli = make_cli(root)
    names = ["", *SUBCOMMANDS]

    def help_of(name: str) -> Callable[[], Result]:
        return lambda: cli.run("memory", *[name] if name else [], "--help")

    return dict(zip(names, run_all([help_of(name) for name in names]), strict=True))


# --- fixtures -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Started:
    """Every scenario of the module, each run once for the tests that read it."""

    anna: Future[AnnaRun]
    searches: Future[Searches]
    indexing: Future[Indexing]
    remember: Future[Remember]
    retry: Future[Retry]
    consolidation: Future[Consolidation]
    maintenance: Future[Maintenance]
    maintenance_with_model: Future[MaintenanceWithModel]
    helps: Future[dict[str, Result]]


@pytest.fixture(scope="module")
def started(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Started]:
    def root(name: str) -> Path:
        return tmp_path_factory.mktemp(name)

    # The commands run in this process, on its main thread, so one after another (InOrder).
    with InOrder() as pool:
        anna = pool.submit(anna_run, root("anna"))
        yield Started(
            anna=anna,
            searches=pool.submit(lambda: searches(anna.result())),
            indexing=pool.submit(indexing, root("indexing")),
            remember=pool.submit(remember, root("remember")),
            retry=pool.submit(retry, root("retry")),
            consolidation=pool.submit(consolidation, root("consolidation")),
            maintenance=pool.submit(maintenance, root("maintenance")),
            maintenance_with_model=pool.submit(maintenance_with_model, root("maintenance-model")),
            helps=pool.submit(helps, root("help")),
        )


# --- the flush, through `harness run` -----------------------------------------------------------


def test_run_flushes_a_new_fact_into_the_users_daily_log(started: Started) -> None:
    run = started.anna.result()

    assert (run.result.returncode, run.result.stdout, run.result.stderr) == (
        0,
        ANNA_REPLY + "\n",
        "",
    ), run.result
    (log,) = daily_logs(run.workspace, user="alice")
    assert log.name in run.days  # named by the local date
    lines = log.read_text(encoding="utf-8").splitlines()
    at = lines.index(ANNA_FACT)
    stamp = flush_heading_time(lines[at - 1])
    assert run.started.replace(microsecond=0) <= stamp <= run.finished
    assert [line for line in lines if line.startswith("## ")] == [lines[at - 1]]
    # Only alice's namespace holds it.
    assert daily_logs(run.workspace) == []
    assert not (run.workspace / "users/bob").exists()


def test_flush_asks_the_memory_model_about_the_new_turn(started: Started) -> None:
    run = started.anna.result()

    requests = split_requests(run.log)
    assert len(requests.agent) == 1
    (flush,) = requests.flush
    assert [m["role"] for m in flush] == ["system", "user"]
    assert text_of(flush[0]) == FLUSH_SYSTEM_PROMPT
    window = last_text(flush).split(FLUSH_PROMPT, 1)[1]
    assert f"[USER]: {ANNA_MESSAGE}" in window
    assert f"[ASSISTANT]: {ANNA_REPLY}" in window


def test_run_writes_the_session_transcript(started: Started) -> None:
    run = started.anna.result()

    sessions = sessions_dir(run.workspace, user="alice")
    assert visible_files(sessions) == [
        "sessions.json",
        "trip.flush.json",
        "trip.jsonl",
        "trip.log.jsonl",
    ]
    transcript = read_jsonl(sessions / "trip.jsonl")
    assert [(e["role"], e["content"]) for e in transcript] == [
        ("user", ANNA_MESSAGE),
        ("assistant", ANNA_REPLY),
    ]
    saved = read_session(run.workspace, "trip", user="alice")
    assert [e["id"] for e in transcript] == [m["id"] for m in saved]
    assert read_jsonl(sessions / "trip.log.jsonl") == transcript
    index = json.loads((sessions / "sessions.json").read_text(encoding="utf-8"))
    assert index["sessions"]["trip"]["title"] == ANNA_MESSAGE
    assert index["sessions"]["trip"]["messages"] == 2
    assert not sessions_dir(run.workspace).exists()


def test_explicit_request_to_remember_is_logged_despite_no_reply(started: Started) -> None:
    remembered = started.remember.result()

    assert (remembered.result.returncode, remembered.result.stdout) == (0, "Got it.\n")
    assert remembered.result.stderr == "", remembered.result
    requests = split_requests(remembered.log)
    assert len(requests.flush) == 1  # answered NO_REPLY by the script
    (log,) = daily_logs(remembered.workspace, user="alice")
    assert log.name in remembered.days
    lines = log.read_text(encoding="utf-8").splitlines()
    (bullet,) = [line for line in lines if LOCKER in line]
    assert bullet.startswith("- ")
    flush_heading_time(lines[lines.index(bullet) - 1])


def test_failed_flush_does_not_fail_the_run(started: Started) -> None:
    scenario = started.retry.result()
    failed = scenario.failed

    assert (failed.returncode, failed.stdout) == (0, "Noted.\n"), failed
    (warning,) = failed.stderr_lines
    assert warning.startswith("WARNING "), failed
    assert "memory flush" in warning
    assert "retry" in warning
    assert "Traceback" not in failed.stderr
    assert scenario.log_after_failure == []
    # The transcript does not depend on the flush.
    assert [(e["role"], e["content"]) for e in scenario.transcript_after_failure] == [
        ("user", TOM_BORN),
        ("assistant", "Noted."),
    ]


def test_next_run_retries_the_failed_flush(started: Started) -> None:
    scenario = started.retry.result()
    retried = scenario.retried

    assert (retried.returncode, retried.stdout, retried.stderr) == (0, "Nice hobby.\n", ""), retried
    (flush,) = split_requests(scenario.second_log).flush
    window = last_text(flush).split(FLUSH_PROMPT, 1)[1]
    assert window.index(f"[USER]: {TOM_BORN}") < window.index(f"[USER]: {TOM_CHESS}")
    (log,) = daily_logs(scenario.workspace, user="alice")
    assert log.name in scenario.days
    text = log.read_text(encoding="utf-8")
    assert TOM_FACTS in text
    assert text.count("## Memory Flush — ") == 1


# --- harness memory search ----------------------------------------------------------------------


def test_search_json_finds_the_flushed_line_first(started: Started) -> None:
    found = started.searches.result()
    run = found.run

    hits = hits_of(found.alice_json)
    assert hits, found.alice_json
    (log,) = daily_logs(run.workspace, user="alice")
    # The flushed line, in the daily log or, once consolidation ran before `harness run`
    # exited (it may or may not have), in MEMORY.md as well: the same words rank the same.
    where = [f"users/alice/memory/{log.name}", "users/alice/MEMORY.md"]
    assert hits[0]["path"] in where, hits[0]
    lines = (run.workspace / hits[0]["path"]).read_text(encoding="utf-8").splitlines()
    assert hits[0] == {
        "path": hits[0]["path"],
        "line_number": lines.index(ANNA_FACT) + 1,
        "last_line": lines.index(ANNA_FACT) + 1,
        "content": ANNA_FACT,
        "rank": hits[0]["rank"],
    }
    assert hits[0]["rank"] > 0
    # Every hit is a line of alice's (or shared) memory, where it says it is.
    for hit in hits:
        assert hit["path"].startswith("users/alice/"), hit
        assert line_at(run.workspace, hit) == hit["content"] or hit["path"].endswith(".jsonl")


def test_search_json_returns_snippets_with_their_line_range(started: Started) -> None:
    found = started.searches.result()
    hits = hits_of(found.alice_snippets)
    best = next(hit for hit in hits if ANNA_FACT in hit["content"].split("\n"))
    lines = (found.run.workspace / best["path"]).read_text(encoding="utf-8").splitlines()
    span = lines[best["line_number"] - 1 : best["last_line"]]
    assert best["content"] == "\n".join(line.strip() for line in span if line.strip())
    assert sum(len(hit["content"]) for hit in hits) <= 300 * 10  # the default budget


def test_search_for_another_user_finds_nothing_of_alices(started: Started) -> None:
    found = started.searches.result()

    assert hits_of(found.bob_json) == []
    assert found.bob_text.returncode == 0, found.bob_text
    stdout = found.bob_text.stdout
    assert stdout.startswith(f"No matching memories found for: {ANNA_QUESTION} (in user 'bob'")


def test_search_text_output_is_a_table_of_hits(started: Started) -> None:
    found = started.searches.result()
    result = found.alice_text

    assert (result.returncode, result.stderr) == (0, ""), result
    rows = [
        [cell.strip() for cell in line.strip("│┃ ").split("│" if "│" in line else "┃")]
        for line in result.stdout.splitlines()
        if line.startswith(("│", "┃"))
    ]
    assert rows[0] == ["path", "lines", "content", "rank"]
    first = hits_of(found.alice_json)[0]
    span = f"{first['line_number']}-{first['last_line']}"
    if first["line_number"] == first["last_line"]:
        span = str(first["line_number"])
    assert rows[1][:2] == [first["path"], span]
    assert rows[1][2] in first["content"]  # a cell shows the first line of a snippet
    assert len(rows) == 1 + len(hits_of(found.alice_json))


@pytest.mark.parametrize("name", HOSTILE_QUERIES)
def test_search_treats_any_query_as_plain_words(started: Started, name: str) -> None:
    found = started.searches.result()

    hits = hits_of(found.hostile[name])
    if name in FINDS_ANNA:
        assert ANNA_FACT in [hit["content"] for hit in hits], found.hostile[name]


# --- harness memory index -----------------------------------------------------------------------


def test_index_summarizes_and_skips_unchanged_files(started: Started) -> None:
    done = started.indexing.result()

    assert done.files >= 2  # the daily log and the transcript, at least
    indexed, unchanged, removed = index_counts(done.first)
    assert (indexed + unchanged, removed) == (done.files, 0)
    assert index_counts(done.second) == (0, done.files, 0)


def test_deleted_index_is_rebuilt_with_the_same_results(started: Started) -> None:
    done = started.indexing.result()

    before = hits_of(done.search_before)
    assert before, done.search_before
    assert before[0]["content"] == ANNA_FACT
    assert done.db_was_gone
    assert index_counts(done.after_delete) == (done.files, 0, 0)
    assert (done.run.workspace.parent / "memory_index.db").is_file()
    # The same lines with the same ranks, in the same order but among equal ranks.
    assert by_rank(hits_of(done.search_after_delete)) == by_rank(before)


def test_rebuild_indexes_every_file_anew(started: Started) -> None:
    done = started.indexing.result()

    assert index_counts(done.rebuild) == (done.files, 0, 0)


def test_index_forgets_a_deleted_file(started: Started) -> None:
    done = started.indexing.result()

    assert index_counts(done.after_removing_transcript) == (0, done.files - 1, 1)
    transcript = "users/alice/agents/harness/sessions/trip.log.jsonl"

    def lines(hits: list[Hit]) -> set[tuple[str, int, str]]:
        return {(hit["path"], hit["line_number"], hit["content"]) for hit in hits}

    before = lines(hits_of(done.search_before))
    after = hits_of(done.search_after_removing_transcript)
    assert any(path == transcript for path, _, _ in before)
    # The same lines but the transcript's (ranks change with the rows left to compare with).
    assert lines(after) == {hit for hit in before if hit[0] != transcript}
    assert after[0]["content"] == ANNA_FACT


# --- harness memory consolidate -----------------------------------------------------------------


def test_consolidate_without_a_model_is_a_configuration_error(started: Started) -> None:
    done = started.consolidation.result()
    result = done.no_model

    assert result.returncode == 2, result
    assert result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert line.startswith("error: no model configured"), result
    assert "--model" in line
    assert "HARNESS_MODEL" in line
    assert "users/alice/MEMORY.md" not in done.files_after_no_model
    assert "users/alice/memory/.consolidation_state" not in done.files_after_no_model


def test_consolidate_rewrites_the_users_memory(started: Started) -> None:
    done = started.consolidation.result()

    assert (done.first.returncode, done.first.stderr) == (0, ""), done.first
    assert done.first.stdout == "MEMORY.md updated from 2 daily logs\n"
    assert done.memory_after_first == CONSOLIDATED_TOM + "\n"
    assert not (done.workspace / "MEMORY.md").exists()  # the shared namespace is left alone
    watermark = datetime.fromisoformat(done.state_after_first.strip())
    assert done.started <= watermark <= done.finished
    (request,) = split_requests(done.log).consolidation
    assert "18:00" not in last_text(request)  # the shared daily log is not alice's


def test_second_consolidate_changes_nothing(started: Started) -> None:
    done = started.consolidation.result()

    assert (done.second.returncode, done.second.stderr) == (0, ""), done.second
    assert done.second.stdout.startswith("MEMORY.md unchanged")
    assert len(done.second.stdout.splitlines()) == 1
    assert done.memory_after_second == done.memory_after_first
    assert done.state_after_second == done.state_after_first
    assert len(split_requests(done.log).consolidation) == 1  # the model was not asked again


# --- harness memory maintain --------------------------------------------------------------------


def test_maintain_without_a_model_archives_prunes_and_says_so(started: Started) -> None:
    done = started.maintenance.result()
    result = done.result

    assert (result.returncode, result.stderr) == (0, ""), result
    lines = result.stdout.splitlines()
    assert lines[:5] == [
        "archived 2 daily logs",
        "consolidated nothing (no model configured)",
        "pruned 2 transcript files",
        "deleted 0 old task, trace and subagent registry files",
        "deleted 0 old evicted tool results",
    ]
    assert len(lines) == 6
    assert re.fullmatch(r"re-indexed \d+ files", lines[5]), result


def test_maintain_moves_old_daily_logs_to_the_archive(started: Started) -> None:
    done = started.maintenance.result()
    ws = done.workspace

    # Kept: the recent log, and the old file that is not named by a date.
    assert [p.name for p in daily_logs(ws, user="alice")] == sorted([done.recent_alice, "notes.md"])
    archived = memory_dir(ws, user="alice") / "archive" / done.old_alice
    assert archived.read_text(encoding="utf-8") == "- Alice planted tomatoes in the garden.\n"
    assert (memory_dir(ws) / "archive" / done.old_shared).is_file()
    assert daily_logs(ws) == []


def test_maintain_prunes_old_transcripts_only(started: Started) -> None:
    done = started.maintenance.result()

    sessions = sessions_dir(done.workspace, user="alice")
    assert visible_files(sessions) == ["recent.jsonl", "recent.log.jsonl", "sessions.json"]


def test_archived_and_pruned_memory_leaves_search(started: Started) -> None:
    done = started.maintenance.result()

    before = {hit["path"] for hit in hits_of(done.search_before)}
    assert f"users/alice/memory/{done.old_alice}" in before
    assert "users/alice/agents/harness/sessions/old.log.jsonl" in before
    after = {hit["path"] for hit in hits_of(done.search_after)}
    assert after == {"users/alice/agents/harness/sessions/recent.log.jsonl"}


def test_maintain_consolidates_with_a_model(started: Started) -> None:
    done = started.maintenance_with_model.result()
    result = done.result

    assert (result.returncode, result.stderr) == (0, ""), result
    lines = result.stdout.splitlines()
    assert lines[:3] == ["archived 0 daily logs", "consolidated alice", "pruned 0 transcript files"]
    assert len(lines) == 6
    memory = (done.workspace / "users/alice/MEMORY.md").read_text(encoding="utf-8")
    assert memory == "# Memory\n\n- Alice has a cat, Miso.\n"


# --- help ---------------------------------------------------------------------------------------


def test_memory_subcommands_are_the_documented_ten() -> None:
    assert list(SUBCOMMANDS) == [
        "index",
        "search",
        "consolidate",
        "history",
        "restore",
        "maintain",
        "review",
        "promote",
        "reject",
        "adopt",
    ]


def test_memory_help_lists_every_subcommand(started: Started) -> None:
    result = started.helps.result()[""]

    assert (result.returncode, result.stderr) == (0, ""), result
    for name in SUBCOMMANDS:
        assert re.search(rf"\b{name} {{2,}}\w", result.stdout), f"{name} missing:\n{result.stdout}"


@pytest.mark.parametrize("name", list(SUBCOMMANDS))
def test_memory_subcommand_help_shows_its_description(started: Started, name: str) -> None:
    result = started.helps.result()[name]

    assert (result.returncode, result.stderr) == (0, ""), result
    lines = result.stdout.splitlines()
    usage = next(i for i, line in enumerate(lines) if f"Usage: harness memory {name}" in line)
    panel = next(i for i, line in enumerate(lines) if line.startswith("╭"))
    description = squash("\n".join(lines[usage + 1 : panel]))
    doc = SUBCOMMANDS[name].__doc__
    assert doc
    assert description == squash(doc)
