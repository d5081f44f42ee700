"""SCRAM client of the pipelined driver against published example conversations."""

import pytest

from mongobench.driver import protocol, scram

# RFC 7677, section 3: SCRAM-SHA-256, user "user", password "pencil".
RFC7677 = {
    "nonce": "rOprNGfwEbeRWgbNEkqO",
    "client_first": b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO",
    "server_first": b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
    b"s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096",
    "client_final": b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
    b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
    "server_final": b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=",
}


def rfc7677_client():
    return scram.ScramClient.for_mongodb("SCRAM-SHA-256", "user", "pencil", RFC7677["nonce"])


def test_rfc7677_conversation():
    c = rfc7677_client()
    assert c.first() == RFC7677["client_first"]
    assert c.final(RFC7677["server_first"]) == RFC7677["client_final"]
    c.verify(RFC7677["server_final"])  # accepted: no exception


@pytest.mark.parametrize(
    "server_final",
    [
        b"v=7rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=",  # one bit flipped
        b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G5=",  # same bytes, non-canonical base64
        b"v=" + b"A" * 44,
        b"v=",
    ],
)
def test_a_wrong_server_signature_is_refused(server_final):
    c = rfc7677_client()
    c.final(RFC7677["server_first"])
    with pytest.raises(protocol.AuthError, match="signature is wrong") as e:
        c.verify(server_final, "user 'user' on admin")
    assert "pencil" not in str(e.value) and "pencil" not in repr(c)


def test_server_errors_and_bad_server_first_messages():
    c = rfc7677_client()
    c.final(RFC7677["server_first"])
    with pytest.raises(protocol.AuthError, match="failed: invalid-proof"):
        c.verify(b"e=invalid-proof")
    with pytest.raises(protocol.AuthError, match="does not extend ours"):
        rfc7677_client().final(b"r=someoneElsesNonce,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
    with pytest.raises(protocol.AuthError, match="iteration count 1 < 4096"):
        rfc7677_client().final(b"r=rOprNGfwEbeRWgbNEkqOxyz,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=1")
    with pytest.raises(protocol.AuthError, match="malformed server-first"):
        rfc7677_client().final(b"r=rOprNGfwEbeRWgbNEkqOxyz")
    with pytest.raises(protocol.AuthError, match="malformed server-final"):
        c.verify(b"nothing")


def test_rfc5802_sha1_conversation():
    """RFC 5802, section 5 (plain SCRAM-SHA-1: the password is used as is)."""
    c = scram.ScramClient("sha1", "user", b"pencil", "fyko+d2lbbFgONRv9qkxdawL")
    server_first = b"r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,s=QSXCR+Q6sek8bf92,i=4096"
    assert c.final(server_first) == (
        b"c=biws,r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,p=v0X8v3Bz2T0CJGbJQyF0X+HI4Ts="
    )
    c.verify(b"v=rmF9pqV8S7suAoZWja4dJRkFsKQ=")


def test_mongodb_sha1_hashes_user_mongo_password():
    """MongoDB's SCRAM-SHA-1 example (driver authentication spec): the SCRAM password
    is the hex MD5 of "user:mongo:pencil"."""
    c = scram.ScramClient.for_mongodb("SCRAM-SHA-1", "user", "pencil", "fyko+d2lbbFgONRv9qkxdawL")
    server_first = (
        b"r=fyko+d2lbbFgONRv9qkxdawLHo+Vgk7qvUOKUwuWLIWg4l/9SraGMHEE,"
        b"s=rQ9ZY3MntBeuP3E1TDVC4w==,i=10000"
    )
    assert c.final(server_first) == (
        b"c=biws,r=fyko+d2lbbFgONRv9qkxdawLHo+Vgk7qvUOKUwuWLIWg4l/9SraGMHEE,"
        b"p=MC2T8BvbmWRckDw8oWl5IVghwCY="
    )
    c.verify(b"v=UMWeI25JD1yNYZRMpZ4VHvhZ9e0=")


def test_names_are_escaped_and_passwords_saslprepped():
    c = scram.ScramClient.for_mongodb("SCRAM-SHA-256", "a=b,c", "pencil", "n0nce")
    assert c.first() == b"n,,n=a=3Db=2Cc,r=n0nce"
    # SASLprep maps U+00A0 (no-break space) to a space: both give the same proof.
    first = b"r=n0nceSERVER,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    a = scram.ScramClient.for_mongodb("SCRAM-SHA-256", "u", "pen cil", "n0nce").final(first)
    b = scram.ScramClient.for_mongodb("SCRAM-SHA-256", "u", "pen\u00a0cil", "n0nce").final(first)
    assert a == b
    with pytest.raises(ValueError, match="prohibited") as e:
        scram.ScramClient.for_mongodb("SCRAM-SHA-256", "u", "pw\u0000secret")
    assert "secret" not in str(e.value)
    assert (
        len({scram.ScramClient.for_mongodb("SCRAM-SHA-256", "u", "p").nonce for _ in range(3)}) == 3
    )
