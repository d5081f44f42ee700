"""Throwaway CA and server certificate, made with the cryptography package and checked
independently: by the openssl CLI, by a TLS handshake with Python's ssl, and by
cryptography's own RFC 5280 path validation."""

import datetime as dt
import ipaddress
import os
import shutil
import socket
import ssl
import stat
import subprocess
import threading

import pytest
from cryptography import x509
from cryptography.x509 import verification
from cryptography.x509.oid import ExtendedKeyUsageOID

from mongobench.remote import tlscerts

NOW = dt.datetime(2026, 11, 22, 18, 30, 5, tzinfo=dt.timezone.utc)
needs_openssl = pytest.mark.skipif(shutil.which("openssl") is None, reason="no openssl CLI")


def test_subject_alt_names_split_ips_from_names_in_order():
    sans = tlscerts.subject_alt_names(
        ["10.0.1.5", "10.0.0.5", "10.0.1.5", "db-1.internal", "DB-1.internal", "[fd00::2]", " "]
    )
    assert sans.ips == ("10.0.1.5", "10.0.0.5", "fd00::2")
    assert sans.dns == ("db-1.internal",)
    assert sans.entries() == [
        "IP Address:10.0.1.5",
        "IP Address:10.0.0.5",
        "IP Address:fd00::2",
        "DNS:db-1.internal",
    ]
    for bad in (["mongodb://10.0.0.5"], ["a b"], ["host/x"], []):
        with pytest.raises(ValueError):
            tlscerts.subject_alt_names(bad)


def test_validity_is_backdated_utc_whole_seconds():
    utc = dt.timezone.utc
    assert tlscerts.validity(NOW.replace(microsecond=700)) == (
        dt.datetime(2026, 11, 22, 17, 30, 5, tzinfo=utc),
        dt.datetime(2026, 12, 22, 18, 30, 5, tzinfo=utc),
    )
    assert tlscerts.validity(NOW, days=2, backdate=dt.timedelta(0)) == (
        NOW,
        dt.datetime(2026, 11, 24, 18, 30, 5, tzinfo=utc),
    )
    cet = dt.timezone(dt.timedelta(hours=1))
    assert tlscerts.validity(NOW.astimezone(cet)) == tlscerts.validity(NOW)
    with pytest.raises(ValueError, match="timezone"):
        tlscerts.validity(dt.datetime(2026, 1, 1))
    with pytest.raises(ValueError, match="days"):
        tlscerts.validity(NOW, days=0)


def test_server_pem_is_certificate_then_pkcs8_key():
    cert = "-----BEGIN CERTIFICATE-----\nAAA\n-----END CERTIFICATE-----\n"
    key = "-----BEGIN PRIVATE KEY-----\nBBB\n-----END PRIVATE KEY-----\n"
    assert tlscerts.server_pem(cert, key) == cert + key
    with pytest.raises(ValueError, match="PKCS#8"):
        tlscerts.server_pem(cert, key.replace("PRIVATE KEY", "RSA PRIVATE KEY"))
    with pytest.raises(ValueError, match="certificate"):
        tlscerts.server_pem(key, key)


def _openssl(*args):
    return subprocess.run(["openssl", *args], capture_output=True, text=True, check=True).stdout


def _handshake(material, server_hostname, *, cafile):
    """One TLS handshake on loopback: the server presents server.pem, the client verifies it
    against `cafile` with host-name checking. Returns the client's error, or None."""
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(material.server_pem)  # certificate and key from one file
    client_ctx = ssl.create_default_context(cafile=cafile)
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]

        def serve():
            conn, _ = listener.accept()
            try:
                with server_ctx.wrap_socket(conn, server_side=True) as tls:
                    tls.recv(1)
            except (ssl.SSLError, OSError):
                pass

        t = threading.Thread(target=serve, daemon=True)
        t.start()
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
                with client_ctx.wrap_socket(raw, server_hostname=server_hostname) as tls:
                    tls.sendall(b"x")
            return None
        except ssl.SSLError as e:
            return e
        finally:
            t.join(10)


@needs_openssl
def test_generate_makes_a_chain_clients_verify(tmp_path):
    d = tmp_path / "tls"
    m = tlscerts.generate(str(d), ["127.0.0.1", "10.0.0.5", "db.example"])
    # private: the directory 0700, every file 0600; no key file but the server's PEM
    assert stat.S_IMODE(os.stat(d).st_mode) == 0o700
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in d.iterdir() if p.is_file())
    assert sorted(p.name for p in d.iterdir()) == sorted([tlscerts.CA_CERT, tlscerts.SERVER_PEM])
    pem = open(m.server_pem).read()
    assert pem.index("BEGIN CERTIFICATE") < pem.index("BEGIN PRIVATE KEY")
    assert "PRIVATE KEY" not in open(m.ca_cert).read()

    sans = _openssl("x509", "-in", m.server_pem, "-noout", "-ext", "subjectAltName")
    assert sans.split("\n", 1)[1].strip().split(", ") == m.sans.entries()
    assert "Certificate Sign" in _openssl("x509", "-in", m.ca_cert, "-noout", "-ext", "keyUsage")
    assert _openssl("verify", "-CAfile", m.ca_cert, m.server_pem).strip().endswith("OK")
    start = _openssl("x509", "-in", m.server_pem, "-noout", "-startdate").strip()
    not_before = dt.datetime.strptime(start, "notBefore=%b %d %H:%M:%S %Y GMT")
    ahead = dt.datetime.now(dt.timezone.utc).replace(tzinfo=None) - not_before
    assert dt.timedelta(minutes=59) < ahead < dt.timedelta(minutes=61)  # a slow clock accepts it
    assert m.metadata()["tls_server_names"] == "127.0.0.1,10.0.0.5,db.example"

    assert _handshake(m, "127.0.0.1", cafile=m.ca_cert) is None
    err = _handshake(m, "10.0.0.6", cafile=m.ca_cert)  # an address the certificate lacks
    assert isinstance(err, ssl.SSLCertVerificationError) and "mismatch" in str(err).lower()
    other = tlscerts.generate(str(tmp_path / "other"), ["127.0.0.1"])
    err = _handshake(m, "127.0.0.1", cafile=other.ca_cert)  # another run's CA
    assert isinstance(err, ssl.SSLCertVerificationError)

    with pytest.raises(RuntimeError, match="already holds"):
        tlscerts.generate(str(d), ["127.0.0.1"])


def _load(material):
    with open(material.ca_cert, "rb") as f:
        ca = x509.load_pem_x509_certificate(f.read())
    with open(material.server_pem, "rb") as f:
        server = x509.load_pem_x509_certificate(f.read())  # the first PEM block
    return ca, server


def _verify(ca, server, name, at):
    builder = verification.PolicyBuilder().store(verification.Store([ca])).time(at)
    return builder.build_server_verifier(name).verify(server, [])


def test_server_certificate_verifies_against_the_ca_with_cryptography(tmp_path):
    m = tlscerts.generate(str(tmp_path / "tls"), ["10.0.0.5", "db.example"], now=NOW, days=2)
    ca, server = _load(m)
    at = NOW + dt.timedelta(hours=1)
    chain = _verify(ca, server, x509.IPAddress(ipaddress.ip_address("10.0.0.5")), at)
    assert chain == [server, ca]
    assert _verify(ca, server, x509.DNSName("db.example"), at) == [server, ca]
    with pytest.raises(verification.VerificationError):  # a name it does not cover
        _verify(ca, server, x509.DNSName("other.example"), at)
    with pytest.raises(verification.VerificationError):  # after not-after
        _verify(ca, server, x509.DNSName("db.example"), NOW + dt.timedelta(days=3))
    other = tlscerts.generate(str(tmp_path / "other"), ["10.0.0.5"], now=NOW)
    with pytest.raises(verification.VerificationError):  # another run's CA
        _verify(_load(other)[0], server, x509.DNSName("db.example"), at)

    # validity: backdated an hour, `days` after now
    for cert in (ca, server):
        assert cert.not_valid_before_utc == NOW - dt.timedelta(hours=1) == m.not_before
        assert cert.not_valid_after_utc == NOW + dt.timedelta(days=2) == m.not_after
    # the CA: CA:TRUE (server certificates only), signs certificates
    bc = ca.extensions.get_extension_for_class(x509.BasicConstraints)
    assert bc.critical and bc.value.ca and bc.value.path_length == 0
    assert ca.extensions.get_extension_for_class(x509.KeyUsage).value.key_cert_sign
    assert ca.subject == ca.issuer == server.issuer
    # the server: not a CA, serverAuth, every address in the given order
    assert not server.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    eku = server.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert ExtendedKeyUsageOID.SERVER_AUTH in eku
    ku = server.extensions.get_extension_for_class(x509.KeyUsage).value
    assert ku.digital_signature and not ku.key_cert_sign
    san = server.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert list(san) == [
        x509.IPAddress(ipaddress.ip_address("10.0.0.5")),
        x509.DNSName("db.example"),
    ]
    assert server.public_key().key_size == tlscerts.KEY_BITS
    assert m.metadata()["tls_key"] == "RSA 2048"


def test_a_name_too_long_for_a_common_name_still_gets_a_certificate(tmp_path):
    long_name = ".".join(["a" * 60, "b" * 60, "example"])
    m = tlscerts.generate(str(tmp_path / "tls"), [long_name, "10.0.0.5"], now=NOW)
    ca, server = _load(m)
    cn = server.subject.get_attributes_for_oid(x509.oid.NameOID.COMMON_NAME)[0].value
    assert cn == tlscerts.SERVER_NAME
    at = NOW + dt.timedelta(hours=1)
    assert _verify(ca, server, x509.DNSName(long_name), at) == [server, ca]


def test_serials_are_positive_and_fit_20_octets(tmp_path):
    # RFC 5280 4.1.2.2: positive, at most 20 octets in DER (two's complement, so < 2**159)
    serials = {tlscerts.new_serial() for _ in range(5000)}
    assert len(serials) == 5000
    assert all(0 < s < 2**159 for s in serials)
    assert max(s.bit_length() for s in serials) > 150  # random over the whole range
    seen = set()
    for k in range(3):
        m = tlscerts.generate(str(tmp_path / str(k)), ["127.0.0.1"], key_bits=1024)
        for cert in _load(m):
            assert 0 < cert.serial_number < 2**159
            seen.add(cert.serial_number)
    assert len(seen) == 6  # every certificate its own serial, the CA's too


def test_generate_rejects_bad_input_before_writing(tmp_path):
    with pytest.raises(ValueError, match="not an IP address"):
        tlscerts.generate(str(tmp_path / "a"), ["mongodb://10.0.0.5"])
    with pytest.raises(ValueError, match="days"):
        tlscerts.generate(str(tmp_path / "b"), ["10.0.0.5"], days=0)
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()
