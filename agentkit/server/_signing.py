"""Signatures for the thinking blocks this server sends.

Anthropic clients hand every ``thinking`` block back with the ``signature`` the server gave
it. Here a signature is an HMAC of the block's text under a key only this server holds, so a
block that comes back with a signature that verifies is reasoning this server produced, word
for word. The request side uses that to explain a replay that could not be restored from the
turn store (the reasoning is ours but the turn was evicted, or the client edited something
else) apart from one that never was ours. A signature says nothing about the other blocks.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from collections.abc import Callable

from agentkit._logging import get_logger
from agentkit.errors import ConfigurationError

__all__ = ["ThinkingSigner"]

_PREFIX = "ak1."
"""Marks an agentkit signature (version 1), so a foreign one is told apart at a glance."""
_DOMAIN = b"agentkit-thinking\0"
"""Keeps these MACs apart from anything else the same key might ever sign."""
_DERIVATION = b"agentkit-thinking-signing-key\0"
"""Keeps the key derived from the sealing key apart from the sealer's own derived keys."""

_log = get_logger("agentkit.server")


class ThinkingSigner:
    """Signs and verifies thinking text.

    Args:
        key: the HMAC key. ``None`` draws a random 32-byte key, good for one server process;
            configure a fixed key to keep signatures valid across restarts.
    """

    def __init__(self, key: bytes | None = None) -> None:
        if key is not None and not key:
            raise ValueError("the thinking signature key must not be empty")
        self._key: bytes | None = secrets.token_bytes(32) if key is None else bytes(key)
        self._loader: Callable[[], bytes] | None = None

    @classmethod
    def persistent(cls, master: Callable[[], bytes] | None = None) -> ThinkingSigner:
        """A signer whose key is derived from the sealing master key (``master()``; default
        :func:`~agentkit.server._sealing.load_sealing_key`), loaded on first use or by
        :meth:`load`. If it cannot be loaded, a random key is used for this process with a
        warning: signatures only explain replay misses, they are no reason to fail."""
        if master is None:
            from agentkit.server._sealing import load_sealing_key

            master = load_sealing_key
        signer = cls()
        signer._key = None
        signer._loader = master
        return signer

    def load(self) -> None:
        """Load the key now (at startup) rather than on the first signature."""
        self._current()

    def _current(self) -> bytes:
        key = self._key
        if key is None:
            assert self._loader is not None
            try:
                key = hmac.new(self._loader(), _DERIVATION, hashlib.sha256).digest()
            except ConfigurationError as error:
                _log.warning(
                    "thinking signatures hold for this process only: no sealing key",
                    error=str(error),
                )
                key = secrets.token_bytes(32)
            self._key = key
        return key

    def sign(self, text: str) -> str:
        """The signature of ``text``: ``"ak1."`` and a base64url HMAC-SHA256, unpadded."""
        mac = hmac.new(self._current(), _DOMAIN + text.encode("utf-8"), hashlib.sha256).digest()
        return _PREFIX + base64.urlsafe_b64encode(mac).rstrip(b"=").decode("ascii")

    def verify(self, text: str, signature: str | None) -> bool:
        """Whether ``signature`` is this signer's signature of ``text`` (constant time)."""
        if not signature or not signature.startswith(_PREFIX):
            return False
        return hmac.compare_digest(self.sign(text).encode(), signature.encode("utf-8", "replace"))
