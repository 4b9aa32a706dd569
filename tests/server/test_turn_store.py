"""The SQLite turn store: turns (and their aliases) outlive the store that wrote them, within
bounds, scoped to the model that produced them; and the thinking signer's persistent key."""

from __future__ import annotations

import sqlite3
import threading
from contextlib import closing
from pathlib import Path

import pytest

from agentkit.errors import ConfigurationError
from agentkit.server._signing import ThinkingSigner
from agentkit.server._turn_file import SQLiteTurnStore
from agentkit.server._turns import TurnStore
from agentkit.sessions._store import encode_messages
from agentkit.transcript import ContentBlock, Message, ReasoningBlock, TextBlock, ToolCallBlock


def generated(n: int, *, size: int = 1) -> Message:
    return Message(
        role="assistant",
        content=[
            ReasoningBlock(text=f"plan {n}", raw=f"<think>\nplan {n}\n</think>\n\n"),
            TextBlock(text=f"answer {n}" + "." * size, raw=f"answer {n}" + "." * size),
        ],
        token_ids=[n, n + 1, n + 2],
    )


def visible(message: Message) -> list[ContentBlock]:
    """What a client sends back: the blocks without ``raw``."""
    return [block.model_copy(update={"raw": None}) for block in message.content]


def test_turns_survive_a_new_store_on_the_same_file(tmp_path: Path) -> None:
    path = tmp_path / "turns.sqlite"
    with SQLiteTurnStore(path) as store:
        store.remember(generated(1))
    with SQLiteTurnStore(path) as store:
        restored = store.restore(visible(generated(1)))
        assert restored == generated(1)
        assert restored is not None
        assert restored.token_ids == [1, 2, 3]
        assert restored.raw == generated(1).raw
        assert store.restore(visible(generated(2))) is None
        assert len(store) == 1


def test_aliases_survive_and_never_shadow_a_turn(tmp_path: Path) -> None:
    path = tmp_path / "turns.sqlite"
    flat: list[ContentBlock] = [TextBlock(text="plan 1 answer 1.")]
    with SQLiteTurnStore(path) as store:
        store.remember(generated(1))
        store.alias(flat, generated(1))
        store.alias(visible(generated(2)), generated(1))  # another turn's own content
        store.remember(generated(2))
    with SQLiteTurnStore(path) as store:
        assert store.restore(flat) == generated(1)
        assert store.restore(visible(generated(2))) == generated(2)


def test_a_turn_is_found_while_its_write_is_queued(tmp_path: Path) -> None:
    with SQLiteTurnStore(tmp_path / "turns.sqlite", memory_turns=1) as store:
        for n in range(50):
            store.remember(generated(n))
        # Only the last turn is in memory; the others are queued or in the file.
        assert all(store.restore(visible(generated(n))) == generated(n) for n in range(50))


def test_the_least_recently_used_turns_go_beyond_max_turns(tmp_path: Path) -> None:
    path = tmp_path / "turns.sqlite"
    with SQLiteTurnStore(path, max_turns=2, memory_turns=1) as store:
        store.remember(generated(1))
        store.remember(generated(2))
        store.flush()
        assert store.restore(visible(generated(1))) is not None  # 1 is now the most recent
        store.remember(generated(3))
        store.flush()
        assert len(store) == 2
    with SQLiteTurnStore(path, max_turns=2) as store:
        assert store.restore(visible(generated(2))) is None
        assert store.restore(visible(generated(1))) == generated(1)
        assert store.restore(visible(generated(3))) == generated(3)


def test_the_file_is_bounded_in_bytes(tmp_path: Path) -> None:
    path = tmp_path / "turns.sqlite"
    one = len(encode_messages([generated(0, size=1000)]).encode())
    bound = 2 * one + one // 2  # room for two turns, not three
    with SQLiteTurnStore(path, max_bytes=bound) as store:
        for n in range(10):
            store.remember(generated(n, size=1000))
        store.flush()
        assert len(store) == 2
    with SQLiteTurnStore(path, max_bytes=bound) as store:
        assert store.restore(visible(generated(9, size=1000))) is not None
        assert store.restore(visible(generated(0, size=1000))) is None
    with closing(sqlite3.connect(path)) as connection:
        (size,) = connection.execute("SELECT SUM(bytes) FROM turns").fetchone()
    assert size <= bound


def test_turns_are_scoped_to_the_model(tmp_path: Path) -> None:
    path = tmp_path / "turns.sqlite"
    with SQLiteTurnStore(path, scope="model-a") as store:
        store.remember(generated(1))
    with SQLiteTurnStore(path, scope="model-b") as store:
        assert store.restore(visible(generated(1))) is None
    with SQLiteTurnStore(path, scope="model-a") as store:
        assert store.restore(visible(generated(1))) == generated(1)


def test_a_closed_store_keeps_turns_in_memory_only(tmp_path: Path) -> None:
    path = tmp_path / "turns.sqlite"
    store = SQLiteTurnStore(path)
    store.open()
    store.close()
    store.close()
    store.remember(generated(1))
    assert store.restore(visible(generated(1))) == generated(1)
    with SQLiteTurnStore(path) as reopened:
        assert reopened.restore(visible(generated(1))) is None


def test_a_store_never_used_creates_no_file(tmp_path: Path) -> None:
    store = SQLiteTurnStore(tmp_path / "turns.sqlite")
    store.close()
    assert not (tmp_path / "turns.sqlite").exists()


def test_a_newer_schema_or_a_bad_path_is_a_configuration_error(tmp_path: Path) -> None:
    path = tmp_path / "turns.sqlite"
    with closing(sqlite3.connect(path)) as connection:
        connection.execute("PRAGMA user_version = 99")
    store = SQLiteTurnStore(path)
    with pytest.raises(ConfigurationError, match="version 99"):
        store.open()
    store.close()
    (tmp_path / "file").write_text("")
    store = SQLiteTurnStore(tmp_path / "file" / "turns.sqlite")
    with pytest.raises(ConfigurationError, match="cannot open the turn store"):
        store.open()
    store.close()


def test_only_assistant_messages_are_remembered(tmp_path: Path) -> None:
    with (
        SQLiteTurnStore(tmp_path / "turns.sqlite") as store,
        pytest.raises(ValueError, match="assistant"),
    ):
        store.remember(Message(role="user", content=[TextBlock(text="hi")]))
    with pytest.raises(ValueError, match="max_bytes"):
        SQLiteTurnStore(tmp_path / "turns.sqlite", max_bytes=0)


def test_the_memory_store_resolves_aliases() -> None:
    store = TurnStore()
    call = Message(
        role="assistant",
        content=[
            ReasoningBlock(text="a", raw="<think>a</think>"),
            ToolCallBlock(id="c", name="f", arguments={}, raw="<call>"),
            ReasoningBlock(text="b", raw="<think>b</think>"),
        ],
        token_ids=[1],
    )
    store.remember(call)
    flat: list[ContentBlock] = [ReasoningBlock(text="ab"), ToolCallBlock(id="c", name="f")]
    assert store.restore(flat) is None
    store.alias(flat, call)
    assert store.restore(flat) == call
    store.alias(visible(call), call)  # its own content: nothing to do
    assert store.restore(visible(call)) == call


def test_the_persistent_signer_key_survives_and_falls_back() -> None:
    def master() -> bytes:
        return b"m" * 32

    before, after = ThinkingSigner.persistent(master), ThinkingSigner.persistent(master)
    after.load()
    assert after.verify("thought", before.sign("thought"))
    assert not ThinkingSigner(b"m" * 32).verify("thought", before.sign("thought"))

    def unreadable() -> bytes:
        raise ConfigurationError("cannot read the sealing key")

    alone = ThinkingSigner.persistent(unreadable)
    assert alone.verify("thought", alone.sign("thought"))
    assert not ThinkingSigner.persistent(unreadable).verify("thought", alone.sign("thought"))


@pytest.mark.parametrize(
    ("flag", "expected"),
    [
        ([], "cache/turns.sqlite"),
        (["--turn-store", "memory"], None),
        (["--turn-store", "elsewhere.db"], "elsewhere.db"),
    ],
)
def test_the_serve_flag(
    flag: list[str], expected: str | None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """``agentkit serve`` persists turns in the cache directory unless told otherwise."""
    from agentkit import cli
    from agentkit.server import _serve

    class Stop(Exception):
        pass

    seen: list[_serve.ServeOptions] = []

    def build_app(options: _serve.ServeOptions) -> None:
        seen.append(options)
        raise Stop

    monkeypatch.setenv("AGENTKIT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(_serve, "build_app", build_app)
    script = tmp_path / "script.jsonl"
    script.write_text('{"output": "hi"}\n', encoding="utf-8")
    with pytest.raises(Stop):
        cli.main(["serve", "--engine", "scripted", "--script", str(script), *flag])
    (options,) = seen
    if expected is None:
        assert options.turn_store is None
    else:
        assert options.turn_store is not None
        assert options.turn_store.as_posix().endswith(expected)


def test_concurrent_remember_restore_and_close(tmp_path: Path) -> None:
    """Remembering (the event loop) and restoring (worker threads) at once, then closing:
    nothing raises, and every turn remembered before the close is in the file."""
    path = tmp_path / "turns.sqlite"
    store = SQLiteTurnStore(path, memory_turns=2)
    store.open()
    errors: list[BaseException] = []

    def remember(offset: int) -> None:
        try:
            for n in range(offset, 200, 2):
                store.remember(generated(n))
        except BaseException as error:
            errors.append(error)

    def restore() -> None:
        try:
            for n in range(200):
                found = store.restore(visible(generated(n)))
                assert found is None or found.token_ids == [n, n + 1, n + 2]
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=remember, args=(i,)) for i in (0, 1)]
    threads += [threading.Thread(target=restore) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    store.close()
    assert errors == []
    with SQLiteTurnStore(path) as reopened:
        assert len(reopened) == 200
        assert all(reopened.restore(visible(generated(n))) is not None for n in range(200))
