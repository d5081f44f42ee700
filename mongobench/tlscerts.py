"""Throwaway TLS material for one benchmark run: a private CA and one server certificate.

Made with the `openssl` command-line tool (1.1.1 or 3.x). The pure functions return the
OpenSSL config text and the argv lists; `generate` runs them in a private directory. Keys
only ever pass through files (mode 0600 in a 0700 directory): no key material is on a
command line, in a log line or in an exception message.

The server certificate names every address the clients use (subjectAltName IP entries;
host names as DNS entries), so clients verify the server's identity against the CA, with
host-name checking on. Both certificates start an hour before "now" (`openssl ca
-startdate`), so a VM whose clock is behind the PKB host's still accepts them. The
server's PEM holds its certificate, then its unencrypted PKCS#8 key (`genpkey` writes
PKCS#8): the one-file layout mongod's net.tls.certificateKeyFile wants. The CA's key is
deleted once the server certificate is signed: nothing can be signed with it afterwards.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
import re
import secrets
import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

CONFIG = "openssl.cnf"
CA_KEY = "ca.key"
CA_CSR = "ca.csr"
CA_CERT = "ca.pem"
SERVER_KEY = "server.key"
SERVER_CSR = "server.csr"
SERVER_CERT = "server.crt"
SERVER_PEM = "server.pem"  # certificate + PKCS#8 key
ISSUED_DIR = "issued"  # openssl ca keeps a copy of each certificate it signs here
CA_NAME = "mongobench throwaway CA"
DEFAULT_DAYS = 30
DEFAULT_BACKDATE = dt.timedelta(hours=1)
KEY_BITS = 2048  # RSA: every TLS stack involved (OpenSSL in mongod, JSSE, Netty) takes it

_DNS_NAME = re.compile(
    r"(?=.{1,253}$)[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,62})(?:\.[A-Za-z0-9_-]{1,63})*"
)


@dataclass(frozen=True)
class SubjectAltNames:
    ips: tuple[str, ...]
    dns: tuple[str, ...]

    def entries(self) -> list[str]:
        """As `openssl x509 -ext subjectAltName` prints them: 'IP Address:...', 'DNS:...'."""
        return [f"IP Address:{i}" for i in self.ips] + [f"DNS:{d}" for d in self.dns]


def subject_alt_names(addresses: Iterable[str]) -> SubjectAltNames:
    """IP addresses and host names (in the order given, without repeats). Raises ValueError
    for anything that is neither (e.g. a URL, a name with spaces)."""
    ips: list[str] = []
    dns: list[str] = []
    for raw in addresses:
        a = str(raw).strip().strip("[]")
        if not a:
            continue
        try:
            ip = str(ipaddress.ip_address(a))
        except ValueError:
            if not _DNS_NAME.fullmatch(a):
                raise ValueError(f"not an IP address or host name: {raw!r}") from None
            if a.lower() not in (d.lower() for d in dns):
                dns.append(a)
            continue
        if ip not in ips:
            ips.append(ip)
    if not ips and not dns:
        raise ValueError("a server certificate needs at least one address or host name")
    return SubjectAltNames(tuple(ips), tuple(dns))


def new_serial() -> str:
    """A random 128-bit serial for `openssl ca`'s serial file: an even number of hex digits
    (openssl refuses odd ones) and a leading 1, so it is positive and never starts with 0."""
    return "1" + secrets.token_hex(16).upper()[1:]


def _cert_time(t: dt.datetime) -> str:
    """`openssl ca -startdate/-enddate` format: UTCTime YYMMDDHHMMSSZ up to 2049 (RFC 5280),
    GeneralizedTime YYYYMMDDHHMMSSZ from 2050."""
    t = t.astimezone(dt.timezone.utc)
    return t.strftime("%y%m%d%H%M%SZ" if t.year < 2050 else "%Y%m%d%H%M%SZ")


def validity(
    now: dt.datetime, *, days: int = DEFAULT_DAYS, backdate: dt.timedelta = DEFAULT_BACKDATE
) -> tuple[str, str]:
    """(start, end) for `openssl ca`: from `backdate` before `now` to `days` after it."""
    if now.tzinfo is None:
        raise ValueError("now must be timezone-aware")
    if days < 1:
        raise ValueError("days must be >= 1")
    return _cert_time(now - backdate), _cert_time(now + dt.timedelta(days=days))


def openssl_config(sans: SubjectAltNames) -> str:
    """One config for every step (run in the material's directory, so it holds no path):
    `req` for the requests, a minimal `ca` (index file, serial file, any subject) for
    signing, and the extensions of the CA (may sign server certificates only: pathlen 0)
    and of the server (serverAuth, and clientAuth for a replica set member that presents
    it to the others; its subjectAltName)."""
    alt = [f"IP.{k} = {ip}" for k, ip in enumerate(sans.ips, 1)]
    alt += [f"DNS.{k} = {name}" for k, name in enumerate(sans.dns, 1)]
    return "\n".join(
        [
            "[ req ]",
            "distinguished_name = req_dn",
            "prompt = no",
            "utf8 = yes",
            "[ req_dn ]",
            f"CN = {CA_NAME}",
            "",
            "[ ca ]",
            "default_ca = throwaway_ca",
            "[ throwaway_ca ]",
            "dir = .",
            "database = $dir/index.txt",
            f"new_certs_dir = $dir/{ISSUED_DIR}",
            "serial = $dir/serial",
            "default_md = sha256",
            "policy = any_subject",
            "unique_subject = no",
            "email_in_dn = no",
            "copy_extensions = none",
            "[ any_subject ]",
            "commonName = supplied",
            "",
            "[ v3_ca ]",
            "basicConstraints = critical, CA:TRUE, pathlen:0",
            "keyUsage = critical, keyCertSign, cRLSign",
            "subjectKeyIdentifier = hash",
            "",
            "[ v3_server ]",
            "basicConstraints = critical, CA:FALSE",
            "keyUsage = critical, digitalSignature, keyEncipherment",
            "extendedKeyUsage = serverAuth, clientAuth",
            "subjectKeyIdentifier = hash",
            "authorityKeyIdentifier = keyid",
            "subjectAltName = @alt_names",
            "[ alt_names ]",
            *alt,
            "",
        ]
    )


def _subject(cn: str) -> str:
    # `-subj` syntax: '/' and '\' would start a new field or escape; names never need them
    if re.search(r"[/\\\n=+,]", cn):
        raise ValueError(f"unsupported character in a certificate name: {cn!r}")
    return f"/CN={cn}"


def openssl_commands(
    sans: SubjectAltNames,
    *,
    start: str,
    end: str,
    key_bits: int = KEY_BITS,
    openssl: str = "openssl",
) -> list[list[str]]:
    """argv lists, run in order in the material's directory (with CONFIG, an empty
    index.txt, a serial file and ISSUED_DIR in place): the CA's key, its self-signed
    certificate, the server's key, its request and its certificate signed by the CA, then a
    check of the chain. Only file names are arguments, never key material."""
    genkey = [openssl, "genpkey", "-algorithm", "RSA", "-pkeyopt", f"rsa_keygen_bits:{key_bits}"]
    server_cn = (sans.dns or sans.ips)[0]
    sign = [openssl, "ca", "-batch", "-config", CONFIG, "-notext", "-startdate", start]
    sign += ["-enddate", end]
    return [
        [*genkey, "-out", CA_KEY],
        [openssl, "req", "-new", "-config", CONFIG, "-key", CA_KEY, "-subj", _subject(CA_NAME)]
        + ["-out", CA_CSR],
        [*sign, "-selfsign", "-keyfile", CA_KEY, "-extensions", "v3_ca"]
        + ["-in", CA_CSR, "-out", CA_CERT],
        [*genkey, "-out", SERVER_KEY],
        [openssl, "req", "-new", "-config", CONFIG, "-key", SERVER_KEY]
        + ["-subj", _subject(server_cn), "-out", SERVER_CSR],
        [*sign, "-cert", CA_CERT, "-keyfile", CA_KEY, "-extensions", "v3_server"]
        + ["-in", SERVER_CSR, "-out", SERVER_CERT],
        [openssl, "verify", "-CAfile", CA_CERT, SERVER_CERT],
    ]


def server_pem(certificate: str, pkcs8_key: str) -> str:
    """The one-file PEM mongod (net.tls.certificateKeyFile) and the stand-in take: the
    certificate, then the key. Raises ValueError unless the key is unencrypted PKCS#8."""
    if "-----BEGIN CERTIFICATE-----" not in certificate:
        raise ValueError("no PEM certificate")
    if "-----BEGIN PRIVATE KEY-----" not in pkcs8_key:
        raise ValueError("the key is not an unencrypted PKCS#8 PEM (BEGIN PRIVATE KEY)")
    return certificate.strip() + "\n" + pkcs8_key.strip() + "\n"


# ----------------------------------------------------------------------------- runner


@dataclass(frozen=True)
class TlsMaterial:
    """What `generate` left: the CA certificate (for clients), the server's PEM (secret:
    certificate + key) and the names the server certificate covers."""

    directory: str
    ca_cert: str
    server_pem: str
    sans: SubjectAltNames
    not_before: str
    not_after: str

    def metadata(self) -> dict:
        return {
            "tls_ca": "throwaway (generated for this run)",
            "tls_server_names": ",".join(self.sans.ips + self.sans.dns),
            "tls_key": f"RSA {KEY_BITS}",
        }


def generate(
    directory: str,
    addresses: Sequence[str],
    *,
    now: dt.datetime | None = None,
    days: int = DEFAULT_DAYS,
    key_bits: int = KEY_BITS,
    openssl: str = "openssl",
    timeout_s: float = 120,
) -> TlsMaterial:
    """Makes the CA and the server certificate for `addresses` in `directory` (created
    0700; must not hold material already). Raises RuntimeError naming the failed step."""
    sans = subject_alt_names(addresses)
    start, end = validity(now or dt.datetime.now(dt.timezone.utc), days=days)
    os.makedirs(directory, mode=0o700, exist_ok=True)
    os.chmod(directory, 0o700)
    if os.path.exists(os.path.join(directory, CA_CERT)):
        raise RuntimeError(f"{directory} already holds TLS material")
    os.makedirs(os.path.join(directory, ISSUED_DIR), mode=0o700, exist_ok=True)
    _write(directory, CONFIG, openssl_config(sans))
    _write(directory, "index.txt", "")
    _write(directory, "serial", new_serial() + "\n")
    old_umask = os.umask(0o077)  # keys are created 0600
    try:
        for argv in openssl_commands(
            sans, start=start, end=end, key_bits=key_bits, openssl=openssl
        ):
            try:
                p = subprocess.run(
                    argv,
                    cwd=directory,
                    stdin=subprocess.DEVNULL,
                    capture_output=True,
                    text=True,
                    timeout=timeout_s,
                    check=False,
                )
            except (OSError, subprocess.TimeoutExpired) as e:
                raise RuntimeError(f"openssl {argv[1]} failed: {e}") from e
            if p.returncode != 0:
                # openssl's messages name files and errors, never key bytes
                raise RuntimeError(
                    f"openssl {argv[1]} failed (exit {p.returncode}): {p.stderr.strip()[-800:]}"
                )
    finally:
        os.umask(old_umask)
    with open(os.path.join(directory, SERVER_CERT)) as f:
        cert = f.read()
    with open(os.path.join(directory, SERVER_KEY)) as f:
        key = f.read()
    _write(directory, SERVER_PEM, server_pem(cert, key))
    for name in (CA_KEY, SERVER_KEY):  # the key now lives in server.pem only; the CA's is done
        os.remove(os.path.join(directory, name))
    return TlsMaterial(
        directory,
        os.path.join(directory, CA_CERT),
        os.path.join(directory, SERVER_PEM),
        sans,
        start,
        end,
    )


def _write(directory: str, name: str, text: str) -> None:
    path = os.path.join(directory, name)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
