"""Authenticated encryption for state a stateless client carries between requests.

The OpenAI Responses API hands each reasoning item to the client with an opaque
``encrypted_content``, and a client that keeps no server state (``store: false``) sends it
back with the next request. agentkit puts the exact turn there (the reasoning text, the raw
output and its token ids), sealed under a key only the server holds: the client can neither
read nor alter it, and the server can tell its own sealed data from a tampered or foreign one.

A sealed token is ``"aks1."`` and base64url (unpadded) of::

    scheme (1 byte) | key id (8 bytes) | nonce | ciphertext and tag

* Scheme 1, AES-256-GCM (12-byte nonce, 16-byte tag), from the ``cryptography`` package.
* Scheme 2, the standard-library stopgap used when ``cryptography`` is not installed:
  encrypt-then-MAC with HMAC-SHA256 as a pseudorandom function in counter mode for the
  keystream (16-byte nonce) and an HMAC-SHA256 tag (32 bytes) over everything before it.
  Sound, but slower and less reviewed than AES-GCM: install ``cryptography``.

Both schemes bind the header and a caller-chosen ``purpose`` as associated data, and derive
their keys from one master key, so either opens what the other sealed as long as its
implementation is present. The key id (an HMAC of the master key) tells "sealed under another
key" (:attr:`SealError.reason` ``"foreign"``) apart from "altered" (``"tampered"``).

A sealer may be **bound** to a context (:meth:`Sealer.bound`; the server binds the served
model's name and profile): its keys, key id included, are derived from the master key and the
context, so what one context sealed is foreign to every other. Two servers sharing a machine's
default key but serving different models thus cannot open, and splice into their prompts,
each other's token ids.

The master key comes from, in order: the ``key`` argument, the ``AGENTKIT_SEALING_KEY``
environment variable (its UTF-8 bytes, at least 16), or a 32-byte random key persisted in
``$AGENTKIT_CACHE_DIR/sealing.key`` (default ``~/.cache/agentkit/sealing.key``), created once
with mode 0600 so that restarts keep sessions valid.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import Literal, Protocol

from agentkit._logging import get_logger
from agentkit.errors import AgentkitError, ConfigurationError

__all__ = [
    "KEY_ENV",
    "SealError",
    "Sealer",
    "default_key_path",
    "load_sealing_key",
]

_log = get_logger("agentkit.server")

KEY_ENV = "AGENTKIT_SEALING_KEY"
_CACHE_ENV = "AGENTKIT_CACHE_DIR"
_PREFIX = "aks1."
_AES_GCM = 1
_HMAC_CTR = 2
_KEY_ID_BYTES = 8
_NONCES = {_AES_GCM: 12, _HMAC_CTR: 16}
_TAGS = {_AES_GCM: 16, _HMAC_CTR: 32}

SealErrorReason = Literal["malformed", "foreign", "tampered", "unsupported"]


class SealError(AgentkitError):
    """A sealed token that cannot be opened. ``reason``: ``"malformed"`` (not a token of this
    server's kind), ``"foreign"`` (sealed under another key), ``"tampered"`` (this key's, but
    altered), ``"unsupported"`` (its scheme's implementation is not installed)."""

    def __init__(self, reason: SealErrorReason, message: str) -> None:
        super().__init__(message)
        self.reason: SealErrorReason = reason


def default_key_path() -> Path:
    """``$AGENTKIT_CACHE_DIR/sealing.key``, or ``~/.cache/agentkit/sealing.key``."""
    root = os.environ.get(_CACHE_ENV)
    base = Path(root).expanduser() if root else Path.home() / ".cache" / "agentkit"
    return base / "sealing.key"


def load_sealing_key(key: bytes | None = None, *, path: Path | None = None) -> bytes:
    """The master key: ``key``, else ``$AGENTKIT_SEALING_KEY``, else the key file (``path``
    or :func:`default_key_path`), created with 32 random bytes and mode 0600 if missing."""
    if key is not None:
        if len(key) < 16:
            raise ConfigurationError("the sealing key must be at least 16 bytes")
        return bytes(key)
    env = os.environ.get(KEY_ENV)
    if env:
        if len(env.encode()) < 16:
            raise ConfigurationError(f"${KEY_ENV} must be at least 16 bytes long")
        return env.encode()
    return _key_file(path or default_key_path())


def _key_file(path: Path) -> bytes:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        data = b""
    except OSError as error:
        raise ConfigurationError(f"cannot read the sealing key {path}: {error}") from error
    if data:
        return _checked_key(data, path)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    # Written to a private temporary name, then linked into place: a concurrent server either
    # wins the link or reads the winner's complete key.
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(descriptor, "wb") as file:
            file.write(secrets.token_bytes(32))
            file.flush()
            os.fsync(file.fileno())
        try:
            os.link(temporary, path)
            _log.info("created the sealing key", path=str(path))
        except FileExistsError:
            pass
    finally:
        temporary.unlink(missing_ok=True)
    return _checked_key(path.read_bytes(), path)


def _checked_key(data: bytes, path: Path) -> bytes:
    if len(data) < 16:
        raise ConfigurationError(f"the sealing key {path} is shorter than 16 bytes")
    if os.name == "posix" and path.stat().st_mode & 0o077:
        _log.warning("the sealing key is readable by other users", path=str(path))
    return data


class Sealer:
    """Seals and opens bytes under one master key (see the module docstring).

    Args:
        key: the master key; ``None`` loads it with :func:`load_sealing_key` on first use.
        scheme: ``"aes-gcm"``, ``"hmac"`` (the standard-library stopgap) or ``"auto"``
            (AES-GCM when ``cryptography`` is installed).
    """

    def __init__(
        self,
        key: bytes | None = None,
        *,
        scheme: Literal["auto", "aes-gcm", "hmac"] = "auto",
        context: str = "",
    ) -> None:
        self._master = load_sealing_key(key) if key is not None else None
        self._context = context
        if scheme == "auto":
            self._scheme = _AES_GCM if _aesgcm_class() is not None else _HMAC_CTR
        elif scheme == "aes-gcm":
            if _aesgcm_class() is None:
                raise ConfigurationError("AES-GCM sealing needs the 'cryptography' package")
            self._scheme = _AES_GCM
        else:
            self._scheme = _HMAC_CTR
        self._keys: dict[bytes, bytes] = {}

    def load(self) -> None:
        """Load the key now (it is loaded on first use otherwise): a missing or unreadable
        key file is then a :class:`ConfigurationError` here rather than mid-request."""
        self._derive(b"key-id")

    @property
    def scheme(self) -> str:
        return "aes-gcm" if self._scheme == _AES_GCM else "hmac"

    def bound(self, context: str) -> Sealer:
        """A sealer under the same master key and scheme whose keys are derived for
        ``context`` as well (appended to this sealer's own): it opens only what a sealer bound
        to the same context sealed; anything else is ``"foreign"``."""
        if not context:
            return self
        combined = f"{self._context}\0{context}" if self._context else context
        scheme: Literal["aes-gcm", "hmac"] = "aes-gcm" if self._scheme == _AES_GCM else "hmac"
        return Sealer(self._master, scheme=scheme, context=combined)

    def _derive(self, label: bytes) -> bytes:
        derived = self._keys.get(label)
        if derived is None:
            if self._master is None:
                self._master = load_sealing_key()
            info = b"agentkit-sealing\0" + label
            if self._context:
                info += b"\0" + self._context.encode("utf-8", "surrogatepass")
            derived = hmac.new(self._master, info, "sha256").digest()
            self._keys[label] = derived
        return derived

    def seal(self, plaintext: bytes, *, purpose: bytes) -> str:
        """``plaintext`` encrypted and authenticated, bound to ``purpose``."""
        scheme = self._scheme
        nonce = secrets.token_bytes(_NONCES[scheme])
        header = bytes([scheme]) + self._derive(b"key-id")[:_KEY_ID_BYTES] + nonce
        if scheme == _AES_GCM:
            aesgcm = _aesgcm_class()
            assert aesgcm is not None
            body = aesgcm(self._derive(b"aes-256-gcm")).encrypt(nonce, plaintext, header + purpose)
        else:
            ciphertext = _xor(plaintext, self._keystream(nonce, len(plaintext)))
            body = ciphertext + self._tag(header, purpose, ciphertext)
        return _PREFIX + base64.urlsafe_b64encode(header + body).rstrip(b"=").decode("ascii")

    def open(self, token: str, *, purpose: bytes) -> bytes:
        """The plaintext ``token`` seals, or :class:`SealError` saying why not."""
        if not token.startswith(_PREFIX):
            raise SealError("malformed", "not encrypted content issued by agentkit")
        encoded = token[len(_PREFIX) :]
        try:
            data = base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4))
        except (binascii.Error, ValueError):
            raise SealError("malformed", "the encrypted content is not valid base64") from None
        scheme = data[0] if data else 0
        if scheme not in _NONCES or len(data) < 1 + _KEY_ID_BYTES + _NONCES[scheme] + _TAGS[scheme]:
            raise SealError("malformed", "the encrypted content is truncated or of unknown kind")
        split = 1 + _KEY_ID_BYTES + _NONCES[scheme]
        header, body = data[:split], data[split:]
        key_id = header[1 : 1 + _KEY_ID_BYTES]
        if not hmac.compare_digest(key_id, self._derive(b"key-id")[:_KEY_ID_BYTES]):
            raise SealError(
                "foreign",
                "the encrypted content was sealed under another key, or for another model",
            )
        nonce = header[1 + _KEY_ID_BYTES :]
        if scheme == _AES_GCM:
            aesgcm = _aesgcm_class()
            if aesgcm is None:
                raise SealError("unsupported", "opening AES-GCM content needs 'cryptography'")
            from cryptography.exceptions import (  # type: ignore[import-not-found, unused-ignore]
                InvalidTag,
            )

            try:
                return bytes(
                    aesgcm(self._derive(b"aes-256-gcm")).decrypt(nonce, body, header + purpose)
                )
            except InvalidTag:
                raise SealError("tampered", "the encrypted content was altered") from None
        ciphertext, tag = body[: -_TAGS[scheme]], body[-_TAGS[scheme] :]
        if not hmac.compare_digest(tag, self._tag(header, purpose, ciphertext)):
            raise SealError("tampered", "the encrypted content was altered")
        return _xor(ciphertext, self._keystream(nonce, len(ciphertext)))

    def _keystream(self, nonce: bytes, length: int) -> bytes:
        key = self._derive(b"hmac-ctr-encrypt")
        blocks = (length + 31) // 32
        return b"".join(
            hmac.new(key, nonce + i.to_bytes(8, "big"), hashlib.sha256).digest()
            for i in range(blocks)
        )[:length]

    def _tag(self, header: bytes, purpose: bytes, ciphertext: bytes) -> bytes:
        key = self._derive(b"hmac-ctr-mac")
        message = len(purpose).to_bytes(4, "big") + purpose + header + ciphertext
        return hmac.new(key, message, hashlib.sha256).digest()


def _xor(data: bytes, stream: bytes) -> bytes:
    if not data:
        return b""
    value = int.from_bytes(data, "big") ^ int.from_bytes(stream, "big")
    return value.to_bytes(len(data), "big")


class _Aead(Protocol):
    def encrypt(self, nonce: bytes, data: bytes, associated_data: bytes | None) -> bytes: ...

    def decrypt(self, nonce: bytes, data: bytes, associated_data: bytes | None) -> bytes: ...


def _aesgcm_class() -> Callable[[bytes], _Aead] | None:
    """``cryptography``'s AES-GCM, imported when first needed, or ``None`` without it."""
    try:
        from cryptography.hazmat.primitives.ciphers.aead import (  # type: ignore[import-not-found, unused-ignore]
            AESGCM,
        )
    except ImportError:
        return None
    aesgcm: Callable[[bytes], _Aead] = AESGCM
    return aesgcm
