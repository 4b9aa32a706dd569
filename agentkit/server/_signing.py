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

__all__ = ["ThinkingSigner"]

_PREFIX = "ak1."
"""Marks an agentkit signature (version 1), so a foreign one is told apart at a glance."""
_DOMAIN = b"agentkit-thinking\0"
"""Keeps these MACs apart from anything else the same key might ever sign."""


class ThinkingSigner:
    """Signs and verifies thinking text.

    Args:
        key: the HMAC key. ``None`` draws a random 32-byte key, good for one server process;
            configure a fixed key to keep signatures valid across restarts.
    """

    def __init__(self, key: bytes | None = None) -> None:
        if key is not None and not key:
            raise ValueError("the thinking signature key must not be empty")
        self._key = secrets.token_bytes(32) if key is None else bytes(key)

    def sign(self, text: str) -> str:
        """The signature of ``text``: ``"ak1."`` and a base64url HMAC-SHA256, unpadded."""
        mac = hmac.new(self._key, _DOMAIN + text.encode("utf-8"), hashlib.sha256).digest()
        return _PREFIX + base64.urlsafe_b64encode(mac).rstrip(b"=").decode("ascii")

    def verify(self, text: str, signature: str | None) -> bool:
        """Whether ``signature`` is this signer's signature of ``text`` (constant time)."""
        if not signature or not signature.startswith(_PREFIX):
            return False
        return hmac.compare_digest(self.sign(text).encode(), signature.encode("utf-8", "replace"))
