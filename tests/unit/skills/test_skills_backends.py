"""Skills on every filesystem backend: found, resolved per user, loaded and readable."""

from __future__ import annotations

from pathlib import Path

from harness.context import RuntimeContext
from harness.filesystem import AbstractFilesystem
from harness.skills import SkillRepository
from harness.tools import FilesystemTools, SkillTools
from harness.workspace import WorkspaceManager


async def put(fs: AbstractFilesystem, path: str, text: str) -> None:
    await fs.put(path, text.encode("utf-8"))


def skill_md(name: str, description: str, body: str) -> str:
    return f"---\nname: {name}\ndescription: {description}\n---\n{body}\n"


async def test_skills_work_on_every_backend(
    fs: AbstractFilesystem,
    tmp_path: Path,
    alice: RuntimeContext,
    bob: RuntimeContext,
) -> None:
    await put(fs, "skills/report/SKILL.md", skill_md("report", "Shared report.", "shared body"))
    await put(fs, "skills/report/templates/t.md", "shared template")
    await put(fs, "skills/lint/SKILL.md", skill_md("lint", "Lints.", "lint body"))
    await put(fs, "users/alice/skills/report/SKILL.md", skill_md("report", "Mine.", "alice body"))
    await put(fs, "users/alice/skills/report/templates/t.md", "alice template")
    repository = SkillRepository(WorkspaceManager(tmp_path / "root", fs), refresh_seconds=0)
    skill_tools = SkillTools(repository)
    file_tools = FilesystemTools(fs)

    alice_skills = await repository.skills("alice")
    assert {name: s.description for name, s in alice_skills.items()} == {
        "lint": "Lints.",
        "report": "Mine.",
    }
    assert (await repository.skills("bob"))["report"].description == "Shared report."

    for ctx, expected in ((alice, "alice"), (bob, "shared")):
        out = await skill_tools.load_skill("report", ctx)
        assert f"{expected} body" in out
        assert out.splitlines()[-1] == "- skills/report/templates/t.md"
        read = await file_tools.read_file("skills/report/templates/t.md", ctx)
        assert read.splitlines()[0] == f"1\t{expected} template"
