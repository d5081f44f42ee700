"""SCRAM-SHA-256 / SCRAM-SHA-1 client side (RFC 5802, RFC 7677); no secret in repr or errors."""

from __future__ import annotations

import base64
import functools
import hashlib
import hmac
import os

from mongobench.driver.protocol import AuthError

try:  # pymongo's SASLprep (RFC 4013); without it passwords go as they are, as in pymongo
    from pymongo.saslprep import HAVE_STRINGPREP, saslprep
except ImportError:  # pragma: no cover - very old pymongo
    HAVE_STRINGPREP, saslprep = False, None

SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-1")


# ---------------------------------------------------------------------------- SCRAM


def _scram_name(name: str) -> str:
    return name.replace("=", "=3D").replace(",", "=2C")


def _fields(message: bytes) -> dict[str, str]:
    out = {}
    for part in message.decode("utf-8").split(","):
        key, sep, value = part.partition("=")
        if sep:
            out[key] = value
    return out


class ScramClient:
    """The client side of one SCRAM conversation (RFC 5802; RFC 7677 for SHA-256).

    `secret` is the password as SCRAM hashes it; `for_mongodb` derives it the
    way MongoDB does. No channel binding. Nothing derived from the secret
    appears in an exception or a repr.
    """

    MIN_ITERATIONS = 4096

    def __init__(self, digest: str, username: str, secret: bytes, nonce: str | None = None):
        self.digest = digest
        self._secret = secret
        self.nonce = nonce or base64.b64encode(os.urandom(24)).decode()
        self.first_bare = f"n={_scram_name(username)},r={self.nonce}"
        self._server_signature: bytes | None = None

    @classmethod
    def for_mongodb(cls, mechanism: str, username: str, password: str, nonce=None):
        """SCRAM-SHA-256 SASLprep's the password; MongoDB's SCRAM-SHA-1 hashes
        the hex MD5 of "user:mongo:password" instead of the password."""
        if mechanism == "SCRAM-SHA-256":
            return cls("sha256", username, _saslprep(password).encode("utf-8"), nonce)
        if mechanism == "SCRAM-SHA-1":
            md5 = hashlib.md5(f"{username}:mongo:{password}".encode()).hexdigest()
            return cls("sha1", username, md5.encode(), nonce)
        raise AuthError(f"unsupported mechanism {mechanism}")

    def __repr__(self) -> str:
        return f"ScramClient({self.digest})"

    def first(self) -> bytes:
        return f"n,,{self.first_bare}".encode()

    def _hmac(self, key: bytes, msg: bytes) -> bytes:
        return hmac.new(key, msg, self.digest).digest()

    def final(self, server_first: bytes, who: str = "the user") -> bytes:
        """The client-final message for the server-first message."""
        f = _fields(server_first)
        try:
            nonce, salt, iterations = f["r"], base64.b64decode(f["s"]), int(f["i"])
        except (KeyError, ValueError) as e:
            raise AuthError(f"authentication of {who}: malformed server-first message") from e
        if not nonce.startswith(self.nonce) or len(nonce) == len(self.nonce):
            raise AuthError(f"authentication of {who}: the server's nonce does not extend ours")
        if iterations < self.MIN_ITERATIONS:
            raise AuthError(f"authentication of {who}: iteration count {iterations} < 4096")
        salted = _salted_password(self.digest, self._secret, salt, iterations)
        client_key = self._hmac(salted, b"Client Key")
        stored_key = hashlib.new(self.digest, client_key).digest()
        without_proof = f"c=biws,r={nonce}"  # biws = base64("n,,"): no channel binding
        auth_message = f"{self.first_bare},{server_first.decode()},{without_proof}".encode()
        signature = self._hmac(stored_key, auth_message)
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        self._server_signature = self._hmac(self._hmac(salted, b"Server Key"), auth_message)
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def verify(self, server_final: bytes, who: str = "the user") -> None:
        """Checks the server's signature: the server knew the password too."""
        f = _fields(server_final)
        if "e" in f:
            raise AuthError(f"authentication of {who} failed: {f['e']}")
        if "v" not in f:
            raise AuthError(f"authentication of {who}: malformed server-final message")
        # Compared as text: a non-canonical base64 of the right bytes is refused too.
        expected = base64.b64encode(self._server_signature or b"").decode()
        if self._server_signature is None or not hmac.compare_digest(f["v"], expected):
            raise AuthError(
                f"authentication of {who}: the server's signature is wrong"
                " (it does not know the password: not the expected server?)"
            )


@functools.lru_cache(maxsize=8)
def _salted_password(digest: str, secret: bytes, salt: bytes, iterations: int) -> bytes:
    # Every connection of a run logs in with the same salt: derive the key once
    # (as pymongo does), not once per connection inside the timed phase.
    return hashlib.pbkdf2_hmac(digest, secret, salt, iterations)


def _saslprep(password: str) -> str:
    if saslprep is None or not HAVE_STRINGPREP:
        return password
    # Queries (not stored strings): unassigned code points are allowed, as in pymongo.
    # Its errors name the failed check, never the text.
    return saslprep(password, prohibit_unassigned_code_points=False)
