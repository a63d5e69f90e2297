"""The console's login: a signed session cookie and the CSRF token of its forms.

A person pastes a token once into the login form (a POST: never in a URL);
the server checks it has the admin scope and answers with a cookie holding
`name.issued.fingerprint.nonce`, signed with HMAC-SHA256. The cookie never
holds the token: the fingerprint is an HMAC of the token's secret under the
session key, so a cookie stays valid only while that very token is
configured. Cookies are `HttpOnly` (no script reads them), `SameSite=Strict`
(no other site's page sends them) and expire after `MAX_AGE`.

Every action is a POST carrying a CSRF token: the HMAC of the session's
nonce, so only a page the server rendered for this session knows it.

The session key comes from the serve command (one per start, shared by its
workers through their environment), or is made here for an app built in
process; restarting the server logs everyone out.

Logging out revokes the session on the server, not only in the browser: a
copy of the cookie must not open the console for the rest of its 12 hours.
A revoked session's nonce is an empty file in the serve command's sessions
directory (shared by its workers: one `stat` per console request), or, for
an app built in process without one, a set in memory.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import secrets
import time
from pathlib import Path
from typing import NamedTuple

from ...core.errors import PermissionDenied, Unauthenticated
from ..auth import Tokens

COOKIE = "assocdb_console"
MAX_AGE = 12 * 3600  # seconds a login lasts


class Session(NamedTuple):
    name: str  # the token's name ("open" on a server without tokens)
    nonce: str


class Sessions:
    """Makes and checks session cookies and CSRF tokens under one key."""

    def __init__(
        self, tokens: Tokens, key: bytes | None = None, revoked: Path | None = None
    ) -> None:
        self._tokens = tokens
        self._key = key or secrets.token_bytes(32)
        self._revoked = Revoked(revoked)

    def logout(self, session: Session) -> None:
        """Revoke the session: its cookie opens nothing from now on, on any worker."""
        if session.nonce:
            self._revoked.add(session.nonce)

    def login(self, secret: str) -> str:
        """The cookie value for an admin token (Unauthenticated or PermissionDenied if not)."""
        secret = secret.strip()
        name = self._tokens.authorize(f"Bearer {secret}", "admin") or "open"
        fields = (_b64(name.encode()), str(int(time.time())), self._fingerprint(secret))
        body = ".".join((*fields, secrets.token_urlsafe(16)))
        return f"{_b64(body.encode())}.{self._sign(body)}"

    def check(self, cookie: str | None) -> Session:
        """The session of a valid cookie; Unauthenticated otherwise."""
        if not cookie or "." not in cookie:
            raise Unauthenticated("log in with an admin token")
        encoded, _, signature = cookie.rpartition(".")
        try:
            body = _unb64(encoded).decode()
        except (ValueError, UnicodeDecodeError):
            raise Unauthenticated("the session cookie is malformed; log in again") from None
        if not _same(signature, self._sign(body)):
            raise Unauthenticated("the session cookie is not ours; log in again")
        try:
            encoded_name, issued, fingerprint, nonce = body.split(".", 3)
            name = _unb64(encoded_name).decode()
            age = time.time() - int(issued)
        except (ValueError, UnicodeDecodeError):
            raise Unauthenticated("the session cookie is malformed; log in again") from None
        if age > MAX_AGE:
            raise Unauthenticated("the session has expired; log in again")
        if self._tokens.enabled and not self._still_configured(name, fingerprint):
            raise Unauthenticated("the session's token is no longer configured; log in again")
        if nonce in self._revoked:
            raise Unauthenticated("this session was logged out; log in again")
        return Session(name, nonce)

    def csrf(self, session: Session) -> str:
        """The CSRF token of the session's forms."""
        return self._sign(f"csrf.{session.nonce}")

    def check_csrf(self, session: Session, offered: str | None) -> None:
        if not offered or not _same(offered, self.csrf(session)):
            raise PermissionDenied("the form's CSRF token is missing or wrong; reload the page")

    def _still_configured(self, name: str, fingerprint: str) -> bool:
        return any(
            _same(fingerprint, self._fingerprint(token.secret.decode()))
            and token.name == name
            and "admin" in token.scopes
            for token in self._tokens.all()
        )

    def _fingerprint(self, secret: str) -> str:
        return self._sign(f"token.{secret}")[:22]

    def _sign(self, text: str) -> str:
        return _b64(hmac.new(self._key, text.encode(), hashlib.sha256).digest())


class Revoked:
    """The nonces of logged-out sessions: files in `directory`, or a set in memory."""

    def __init__(self, directory: Path | None) -> None:
        self._directory = directory
        self._memory: set[str] = set()

    def add(self, nonce: str) -> None:
        if self._directory is None:
            self._memory.add(nonce)
            return
        self._forget_expired()
        (self._directory / _file_name(nonce)).touch()

    def __contains__(self, nonce: str) -> bool:
        if self._directory is None:
            return nonce in self._memory
        return (self._directory / _file_name(nonce)).exists()

    def _forget_expired(self) -> None:
        """Drop revocations older than any cookie could be (the cookie has expired)."""
        assert self._directory is not None
        oldest = time.time() - MAX_AGE - 60
        for entry in os.scandir(self._directory):
            try:
                if entry.stat().st_mtime < oldest:
                    os.unlink(entry.path)
            except FileNotFoundError:  # another worker dropped it first
                pass


def _file_name(nonce: str) -> str:
    """The nonce as a file name (it is signed, so ours, and url-safe base64: still, no '/')."""
    return "s-" + _b64(nonce.encode())


def _same(offered: str, expected: str) -> bool:
    """`hmac.compare_digest` of the texts' bytes: given str, it raises TypeError for
    non-ASCII characters, which a forged cookie or form may hold."""
    return hmac.compare_digest(offered.encode(), expected.encode())


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text.encode() + b"=" * (-len(text) % 4))
