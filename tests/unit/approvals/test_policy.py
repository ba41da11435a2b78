"""The operator's policy: which tools a rule gates, what it stands for, and what it refuses."""

from __future__ import annotations

import pytest

from harness.approvals import ApprovalPolicy, ApprovalRule, ReviewerDecision, requires_approval


def test_rules_gate_by_name_by_pattern_and_by_the_tools_own_mark() -> None:
    exact, mcp = ApprovalRule(description="exact"), ApprovalRule(description="mcp")
    policy = ApprovalPolicy(rules={"deploy": exact, "github__*": mcp})

    @requires_approval(description="marked")
    def pay() -> str:
        return "paid"

    def read() -> str:
        return "read"

    assert policy.rule_for("deploy", None) is exact
    assert policy.rule_for("github__create_issue", None) is mcp  # an MCP server's tool
    assert policy.rule_for("github", None) is None
    assert policy.rule_for("deploy_all", None) is None  # a name is not a prefix
    marked = policy.rule_for("pay", pay)
    assert marked is not None
    assert marked.description == "marked"
    assert policy.rule_for("read", read) is None


def test_what_approvals_accepts_and_refuses() -> None:
    assert ApprovalPolicy.of(None) is None
    assert set(ApprovalPolicy.of(["a", "b"]).rules) == {"a", "b"}  # type: ignore[union-attr]
    policy = ApprovalPolicy.of({"a": True, "b": False, "c": ApprovalRule()})
    assert policy is not None
    assert set(policy.rules) == {"a", "c"}
    with pytest.raises(TypeError, match="tool names as a list, not one string"):
        ApprovalPolicy.of("deploy")
    with pytest.raises(TypeError, match="must be an ApprovalRule or True"):
        ApprovalPolicy.of({"a": "yes"})
    with pytest.raises(ValueError, match="non-empty subset"):
        ApprovalRule(decisions=frozenset({"maybe"}))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="positive"):
        ApprovalRule(expires_after=0)
    with pytest.raises(ValueError, match="JSON object"):
        ReviewerDecision("edit")
    with pytest.raises(ValueError, match="text the model reads"):
        ReviewerDecision("respond", message="  ")
