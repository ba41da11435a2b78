"""Compaction: long conversations become a summary plus a verbatim tail, and nothing is lost.

- :class:`CompactionConfig` and :class:`TruncateArgsConfig`: when and how;
- :class:`ConversationCompactor`: saves, summarizes and replaces (see its module);
- :func:`truncate_args`: shortens long arguments of old tool calls without a model;
- :func:`estimate_tokens` and :func:`count_tokens`: the fast estimate, and the estimate
  corrected by the provider's reported usage;
- :class:`ToolResultEvictionConfig`: tool results too large for the context moved to files.
"""

from harness.compaction.compactor import (
    SUMMARY_METADATA_KEY,
    CompactionPlan,
    CompactionResult,
    ConversationCompactor,
    StepOutcome,
    extractive_summary,
    first_request,
    is_interruption,
    render_for_summary,
    safe_cut,
    summary_input,
    summary_message_text,
    tightened,
)
from harness.compaction.config import (
    DEFAULT_MAX_SUMMARY_INPUT_TOKENS,
    DEFAULT_SUMMARY_PROMPT,
    TRUNCATION_TEXT,
    CompactionConfig,
    TruncateArgsConfig,
)
from harness.compaction.eviction import (
    DEFAULT_TOOL_RESULT_EVICTION,
    ToolResultEvictionConfig,
    delete_old_evictions,
    evict_tool_result,
    evictions_cleanup,
)
from harness.compaction.tokens import (
    CHARS_PER_TOKEN,
    count_tokens,
    estimate_message,
    estimate_text,
    estimate_tokens,
    usage_anchor,
)
from harness.compaction.truncation import (
    Truncation,
    keep_start,
    should_truncate,
    truncate_args,
    truncate_message_args,
    truncate_value,
)

__all__ = [
    "CHARS_PER_TOKEN",
    "DEFAULT_MAX_SUMMARY_INPUT_TOKENS",
    "DEFAULT_SUMMARY_PROMPT",
    "DEFAULT_TOOL_RESULT_EVICTION",
    "SUMMARY_METADATA_KEY",
    "TRUNCATION_TEXT",
    "CompactionConfig",
    "CompactionPlan",
    "CompactionResult",
    "ConversationCompactor",
    "StepOutcome",
    "ToolResultEvictionConfig",
    "TruncateArgsConfig",
    "Truncation",
    "count_tokens",
    "delete_old_evictions",
    "estimate_message",
    "estimate_text",
    "estimate_tokens",
    "evict_tool_result",
    "evictions_cleanup",
    "extractive_summary",
    "first_request",
    "is_interruption",
    "keep_start",
    "render_for_summary",
    "safe_cut",
    "should_truncate",
    "summary_input",
    "summary_message_text",
    "tightened",
    "truncate_args",
    "truncate_message_args",
    "truncate_value",
    "usage_anchor",
]
