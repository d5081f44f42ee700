"""Throwaway CA and server certificate: the openssl config and commands, and the real thing
(openssl run here, the result checked by openssl and by a TLS handshake with Python's ssl)."""

import datetime as dt
import os
import shutil
import socket
import ssl
import stat
import subprocess
import threading

import pytest

from mongobench import tlscerts

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


def test_validity_is_backdated_and_uses_the_asn1_time_forms():
    assert tlscerts.validity(NOW) == ("261122173005Z", "261222183005Z")
    assert tlscerts.validity(NOW, days=2, backdate=dt.timedelta(0)) == (
        "261122183005Z",
        "261124183005Z",
    )
    later = dt.datetime(2049, 12, 31, 23, 0, tzinfo=dt.timezone.utc)  # UTCTime ends with 2049
    assert tlscerts.validity(later, days=1) == ("491231220000Z", "20500101230000Z")
    cet = dt.timezone(dt.timedelta(hours=1))
    assert tlscerts.validity(NOW.astimezone(cet)) == tlscerts.validity(NOW)
    with pytest.raises(ValueError, match="timezone"):
        tlscerts.validity(dt.datetime(2026, 1, 1))


def test_openssl_config_names_every_address_and_holds_no_path():
    sans = tlscerts.subject_alt_names(["10.0.0.5", "10.0.1.5", "db.example"])
    text = tlscerts.openssl_config(sans)
    alt = text.split("[ alt_names ]\n", 1)[1].strip().splitlines()
    assert alt == ["IP.1 = 10.0.0.5", "IP.2 = 10.0.1.5", "DNS.1 = db.example"]
    server = text.split("[ v3_server ]\n", 1)[1].split("[", 1)[0]
    assert "CA:FALSE" in server and "serverAuth, clientAuth" in server
    assert "subjectAltName = @alt_names" in server
    assert "CA:TRUE, pathlen:0" in text.split("[ v3_ca ]\n", 1)[1].split("[", 1)[0]
    assert "dir = .\n" in text and "/" not in text.replace("$dir/", "")


def test_openssl_commands_take_file_names_only():
    sans = tlscerts.subject_alt_names(["10.0.0.5"])
    cmds = tlscerts.openssl_commands(sans, start="261122173005Z", end="261222183005Z")
    assert [c[1] for c in cmds] == ["genpkey", "req", "ca", "genpkey", "req", "ca", "verify"]
    ca_sign, server_sign = cmds[2], cmds[5]
    for c in (ca_sign, server_sign):
        assert c[c.index("-startdate") + 1] == "261122173005Z"
        assert c[c.index("-enddate") + 1] == "261222183005Z"
    assert "-selfsign" in ca_sign and ca_sign[ca_sign.index("-extensions") + 1] == "v3_ca"
    assert server_sign[server_sign.index("-cert") + 1] == tlscerts.CA_CERT
    assert server_sign[server_sign.index("-extensions") + 1] == "v3_server"
    assert cmds[4][cmds[4].index("-subj") + 1] == "/CN=10.0.0.5"
    for c in cmds:
        assert not any("PRIVATE" in a or "\n" in a for a in c)
    with pytest.raises(ValueError, match="unsupported character"):
        tlscerts.openssl_commands(tlscerts.SubjectAltNames((), ("a/CN=b",)), start="x", end="y")


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
    # private: the directory 0700, every file 0600; the loose keys and the CA's key are gone
    assert stat.S_IMODE(os.stat(d).st_mode) == 0o700
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in d.iterdir() if p.is_file())
    assert not (d / tlscerts.CA_KEY).exists() and not (d / tlscerts.SERVER_KEY).exists()
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


@needs_openssl
def test_generate_reports_the_failed_step(tmp_path):
    with pytest.raises(RuntimeError, match=r"openssl genpkey failed \(exit 1\)"):
        tlscerts.generate(str(tmp_path / "a"), ["127.0.0.1"], openssl="false")
    with pytest.raises(RuntimeError, match="openssl genpkey failed"):
        tlscerts.generate(str(tmp_path / "b"), ["127.0.0.1"], openssl=str(tmp_path / "none"))


def test_serials_suit_openssl_ca():
    # openssl ca refuses a serial file with an odd number of hex digits (stripping a leading
    # zero once made 1 run in 16 fail)
    serials = {tlscerts.new_serial() for _ in range(2000)}
    assert len(serials) == 2000
    for s in serials:
        assert len(s) == 32 and s[0] == "1" and int(s, 16) > 0
