"""Bearer tokens with scopes: who may read, write, or administer.

Tokens come from a TOML file (`--tokens-file` or `ASSOCDB_TOKENS_FILE`) or,
for a single all-powerful token, from `ASSOCDB_TOKEN`; never from the command
line, where `ps` and shell history would show them:

    [[token]]
    name = "web"                # for logs and metrics; never the secret
    secret = "…"                # 16+ characters, e.g. secrets.token_urlsafe()
    scopes = ["read", "write"]  # read, write, admin (admin may do everything)

A request's token is compared with every configured secret in constant time
(`hmac.compare_digest`, without stopping at the first match), so response
times say nothing about which bytes were right.
"""

from __future__ import annotations

import hmac
import ipaddress
import logging
import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import NamedTuple

from ..core.errors import InvalidRequest, PermissionDenied, Unauthenticated

log = logging.getLogger("assocdb.server")

SCOPES = ("read", "write", "admin")
MIN_SECRET = 16


class Token(NamedTuple):
    name: str
    secret: bytes
    scopes: frozenset[str]


class Tokens:
    """The configured tokens; with none, the server is open (and bound to loopback)."""

    def __init__(self, tokens: list[Token]) -> None:
        self._tokens = tokens

    @property
    def enabled(self) -> bool:
        return bool(self._tokens)

    @classmethod
    def load(
        cls, path: str | Path | None = None, environ: Mapping[str, str] = os.environ
    ) -> Tokens:
        """Tokens from `path`, else `ASSOCDB_TOKENS_FILE`, else `ASSOCDB_TOKEN`, else none.

        A tokens file that is given must define at least one token: a file
        that yields none would leave the server open to anyone.
        """
        path = path or environ.get("ASSOCDB_TOKENS_FILE")
        if path:
            return cls.from_file(Path(path))
        single = environ.get("ASSOCDB_TOKEN")
        if single:
            return cls([_token("ASSOCDB_TOKEN", single, list(SCOPES))])
        return cls([])

    @classmethod
    def from_file(cls, path: Path) -> Tokens:
        """The tokens of the TOML file at `path` (InvalidRequest if it defines none)."""
        try:
            text = path.read_bytes().decode("utf-8")
            mode = path.stat().st_mode
        except UnicodeDecodeError:
            raise InvalidRequest(f"the tokens file {path} is not UTF-8 text") from None
        except OSError as exc:
            raise InvalidRequest(f"cannot read the tokens file {path}: {exc.strerror}") from None
        if mode & 0o077:
            log.warning(
                "the tokens file %s can be read by other users (mode %o): chmod 600 it",
                path,
                mode & 0o777,
            )
        tokens = cls.from_toml(text, str(path))
        if not tokens.enabled:
            raise InvalidRequest(
                f"the tokens file {path} defines no token: add a [[token]] table "
                "with name, secret and scopes"
            )
        return tokens

    @classmethod
    def from_toml(cls, text: str, where: str = "the tokens file") -> Tokens:
        try:
            doc = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise InvalidRequest(f"{where} is not valid TOML: {exc}") from None
        unknown = sorted(set(doc) - {"token"})
        if unknown:
            raise InvalidRequest(
                f"{where}: unknown table or key {unknown[0]!r}; tokens are [[token]] tables"
            )
        entries = doc.get("token", [])
        if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
            raise InvalidRequest(f"{where} holds [[token]] tables")
        return cls(
            [
                _token(e.get("name", f"token{n}"), e.get("secret"), e.get("scopes"))
                for n, e in enumerate(entries)
            ]
        )

    def all(self) -> list[Token]:
        """The configured tokens (for the console's sessions, which outlive a request)."""
        return list(self._tokens)

    def authenticate(self, header: str | None) -> None:
        """Raise Unauthenticated unless the header carries a known token (any scope)."""
        self.authorize(header, None)

    def authorize(self, header: str | None, scope: str | None) -> str | None:
        """The token's name if it may act in `scope` (None: in any);
        Unauthenticated or PermissionDenied if not."""
        if not self._tokens:
            return None
        if not header or not header.startswith("Bearer "):
            raise Unauthenticated("send 'Authorization: Bearer <token>'")
        offered = header[len("Bearer ") :].strip().encode()
        found = None
        for token in self._tokens:  # every comparison runs: constant time
            if hmac.compare_digest(offered, token.secret) and found is None:
                found = token
        if found is None:
            raise Unauthenticated("unknown token")
        if scope is not None and scope not in found.scopes and "admin" not in found.scopes:
            raise PermissionDenied(
                f"this token can {_can(found.scopes)} but not {_VERBS.get(scope, scope)}"
            )
        return found.name


#: A scope as what its holder may do.
_VERBS = {"read": "read", "write": "write", "admin": "administer"}


def _can(scopes: frozenset[str]) -> str:
    """What a token's scopes allow, in words: "read and write"."""
    verbs = [_VERBS.get(s, s) for s in sorted(scopes, key=list(_VERBS).index)]
    return ", ".join(verbs[:-1]) + " and " + verbs[-1] if len(verbs) > 1 else verbs[0]


def _token(name: object, secret: object, scopes: object) -> Token:
    if not isinstance(secret, str) or len(secret) < MIN_SECRET:
        raise InvalidRequest(f"token {name!r} needs a secret of at least {MIN_SECRET} characters")
    if not isinstance(scopes, list) or not scopes or not set(scopes) <= set(SCOPES):
        raise InvalidRequest(f"token {name!r} needs scopes, a list of {', '.join(SCOPES)}")
    return Token(str(name), secret.encode(), frozenset(scopes))


def is_loopback(host: str) -> bool:
    """Whether a host name or address is this machine's loopback: `localhost`, a
    `*.localhost` name (RFC 6761: always loopback) or a loopback IP address."""
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
