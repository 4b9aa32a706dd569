"""Approvals: a person decides before a dangerous tool runs.

`delete_file` needs approval; `list_files` does not. The first run pauses at the end of the
turn in which the model asks to delete two files: the listing has already run, the deletes
have not. The paused run's state is saved as JSON, a person decides (approve one, deny the
other with a message for the model), and a brand-new agent (as a new process would build)
resumes the run from the JSON. The second part does the same with an approval handler: an
async callback that answers at once, so the run never pauses.

The engine is scripted (it replays what a Qwen3 model would write), so this runs offline:

    python examples/approval.py
"""

from __future__ import annotations

import json
import tempfile

import anyio

import agentkit
from agentkit.approvals import ApprovalHandler, Approve, Deny, PendingApproval, RunState
from agentkit.engine import ScriptedEngine

FILES = {"build.log": "12 MB of build output", "notes.txt": "ideas for the next release"}


@agentkit.tool
def list_files() -> dict[str, str]:
    """List the files in the workspace, with a summary of each."""
    return dict(FILES)


@agentkit.tool(requires_approval=True)
def delete_file(path: str) -> str:
    """Delete a file from the workspace, for good.

    Args:
        path: The file's name.
    """
    del FILES[path]
    return f"deleted {path}"


def call(name: str, **arguments: object) -> str:
    payload = json.dumps({"name": name, "arguments": arguments})
    return f"<tool_call>\n{payload}\n</tool_call>"


SCRIPT = [
    "<think>\nList the files, then delete both to free space.\n</think>\n\n"
    + call("list_files")
    + "\n"
    + call("delete_file", path="build.log")
    + "\n"
    + call("delete_file", path="notes.txt"),
    "<think>\nbuild.log is gone; the user wants to keep notes.txt.\n</think>\n\n"
    "I deleted build.log and kept notes.txt, as you asked.",
]


def new_agent(engine: ScriptedEngine, handler: ApprovalHandler | None = None) -> agentkit.Agent:
    return agentkit.Agent(
        engine=engine,
        tools=[list_files, delete_file],
        profile="qwen3",
        system="You keep the workspace tidy.",
        approval_handler=handler,
    )


def decide(pending: PendingApproval) -> Approve | Deny:
    """The person: logs may go, anything else stays."""
    if pending.arguments.get("path", "").endswith(".log"):
        return Approve()
    return Deny(message="Keep notes.txt, I still need it.")


async def pause_and_resume(saved: anyio.Path) -> None:
    engine = ScriptedEngine(SCRIPT)
    result = await new_agent(engine).run("Free some space in the workspace.")
    if result.state is None:
        raise SystemExit("expected the run to pause for approval")
    print(f"Paused after turn {result.state.turns}; ran already:")
    for done in result.state.tool_results:
        print(f"  {done.name} -> {done.content}")
    print("Waiting for approval:")
    for pending in result.pending_approvals:
        print(f"  {pending.name}({json.dumps(pending.arguments)}): {pending.description}")
    await saved.write_text(result.state.to_json())

    # Later, perhaps in another process: a fresh agent, the state from JSON, the decisions.
    state = RunState.from_json(await saved.read_text())
    decisions = {pending.id: decide(pending) for pending in state.pending_approvals}
    agent = new_agent(ScriptedEngine(SCRIPT[1:]))
    resumed = await agent.resume(state, decisions)
    print(f"Answer: {resumed.output_text}")
    print(f"Files left: {sorted(FILES)}")
    if sorted(FILES) != ["notes.txt"]:
        raise SystemExit("expected build.log deleted and notes.txt kept")


async def with_a_handler() -> None:
    FILES["build.log"] = "12 MB of build output"

    async def handler(pending: PendingApproval) -> Approve | Deny:
        decision = decide(pending)
        print(f"  asked about {pending.name}({json.dumps(pending.arguments)}): {decision.type}")
        return decision

    agent = new_agent(ScriptedEngine(SCRIPT), handler)
    result = await agent.run("Free some space in the workspace.")
    print(f"Answer: {result.output_text}")


async def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        print("== pause, save, resume ==")
        await pause_and_resume(anyio.Path(folder) / "state.json")
    print("\n== an approval handler ==")
    await with_a_handler()


if __name__ == "__main__":
    anyio.run(main)
