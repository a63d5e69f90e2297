"""`assocdb.Client` itself: what it refuses before any request is sent."""

from __future__ import annotations

import pytest

from assocdb import Client, InvalidRequest

pytest.importorskip("httpx")


@pytest.mark.parametrize("token", ["", "   "])
def test_an_empty_token_is_refused_when_the_client_is_made(token: str) -> None:
    # It was `Unavailable: … Illegal header value b'Bearer '` at the first request,
    # which reads as "the server is down".
    with pytest.raises(InvalidRequest, match="token is empty"):
        Client("http://127.0.0.1:1", token=token)


@pytest.mark.parametrize("token", ["secret\n", " secret", "sécret", "se\x00cret"])
def test_a_token_no_header_can_carry_is_refused_when_the_client_is_made(token: str) -> None:
    with pytest.raises(InvalidRequest, match="token must be printable ASCII"):
        Client("http://127.0.0.1:1", token=token)


def test_a_token_that_is_not_a_string_is_refused() -> None:
    with pytest.raises(InvalidRequest, match="token must be a string, got bytes"):
        Client("http://127.0.0.1:1", token=b"secret")  # type: ignore[arg-type]


def test_a_good_token_or_none_makes_a_client() -> None:
    for token in ("0123456789abcdef", None):
        Client("http://127.0.0.1:1", token=token).close()
