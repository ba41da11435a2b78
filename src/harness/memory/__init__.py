"""Long-term memory: daily logs, consolidation into MEMORY.md, transcripts, search, upkeep.

Two layers of markdown are the truth: ``memory/YYYY-MM-DD.md`` (append-only daily logs, written
by the flush after every call and by ``memory_save``) and ``MEMORY.md`` (curated, rewritten by
consolidation without clobbering concurrent edits). Session transcripts keep every message once.
The search index over all of them is a derived cache that can be deleted and rebuilt.
"""

from harness.memory.config import DEFAULT_MEMORY, Clock, MemoryConfig, utc_now
from harness.memory.consolidation import (
    CONSOLIDATION_SYSTEM_PROMPT,
    STATE_PATH,
    ConsolidationResult,
    MemoryConsolidator,
)
from harness.memory.flush import (
    FLUSH_SYSTEM_PROMPT,
    NO_REPLY,
    FlushResult,
    MemoryFlushManager,
    daily_log_path,
    explicit_requests,
)
from harness.memory.gate import PROCESS_GATE, PeriodicGate
from harness.memory.history import HISTORY_DIR, MemoryHistory, MemoryVersion
from harness.memory.index import MemoryIndex, SearchHit
from harness.memory.maintenance import MaintenanceReport, MemoryMaintenance
from harness.memory.provenance import Entry, MemoryBook, Provenance, Trust
from harness.memory.render import SUMMARY_NAME, is_summary, render_content, render_conversation
from harness.memory.transcript import SESSIONS_INDEX, TranscriptWriter, sessions_dir

__all__ = [
    "CONSOLIDATION_SYSTEM_PROMPT",
    "DEFAULT_MEMORY",
    "FLUSH_SYSTEM_PROMPT",
    "HISTORY_DIR",
    "NO_REPLY",
    "PROCESS_GATE",
    "SESSIONS_INDEX",
    "STATE_PATH",
    "SUMMARY_NAME",
    "Clock",
    "ConsolidationResult",
    "Entry",
    "FlushResult",
    "MaintenanceReport",
    "MemoryBook",
    "MemoryConfig",
    "MemoryConsolidator",
    "MemoryFlushManager",
    "MemoryHistory",
    "MemoryIndex",
    "MemoryMaintenance",
    "MemoryVersion",
    "PeriodicGate",
    "Provenance",
    "SearchHit",
    "TranscriptWriter",
    "Trust",
    "daily_log_path",
    "explicit_requests",
    "is_summary",
    "render_content",
    "render_conversation",
    "sessions_dir",
    "utc_now",
]
