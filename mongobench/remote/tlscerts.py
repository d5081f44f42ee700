"""Throwaway TLS material for one benchmark run: a private CA and one server certificate.

Made in-process with the `cryptography` package (its X.509 builder), not the openssl
command line: no generated config, no serial file, and the PKB host needs no openssl binary.
The CA's key never leaves memory, so nothing can be signed with it once `generate` returns;
the server's key is written once, into its PEM (mode 0600 in a 0700 directory). No key
material is on a command line, in a log line or in an exception message.

The server certificate names every address the clients use (subjectAltName IP entries;
host names as DNS entries), so clients verify the server's identity against the CA, with
host-name checking on. Both certificates start an hour before "now", so a VM whose clock is
behind the PKB host's still accepts them. The server's PEM holds its certificate, then its
unencrypted PKCS#8 key: the one-file layout mongod's net.tls.certificateKeyFile wants.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from mongobench.core.files import write_private

CA_CERT = "ca.pem"
SERVER_PEM = "server.pem"  # certificate + PKCS#8 key
CA_NAME = "mongobench throwaway CA"
SERVER_NAME = "mongobench server"  # the subject CN when the first name is too long for one
DEFAULT_DAYS = 30
DEFAULT_BACKDATE = dt.timedelta(hours=1)
KEY_BITS = 2048  # RSA: every TLS stack involved (OpenSSL in mongod, JSSE, Netty) takes it
_CN_MAX = 64  # RFC 5280 ub-common-name; the names themselves live in subjectAltName

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

    def general_names(self) -> list[x509.GeneralName]:
        """The certificate's subjectAltName entries, in the order of `entries`."""
        names: list[x509.GeneralName] = [x509.IPAddress(ipaddress.ip_address(i)) for i in self.ips]
        return names + [x509.DNSName(d) for d in self.dns]


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


def new_serial() -> int:
    """A random serial: positive and at most 159 bits, so its DER encoding fits the 20
    octets RFC 5280 allows (the builder would take an int, unlike `openssl ca`'s hex file
    whose odd lengths once failed 1 run in 16)."""
    return x509.random_serial_number()


def validity(
    now: dt.datetime, *, days: int = DEFAULT_DAYS, backdate: dt.timedelta = DEFAULT_BACKDATE
) -> tuple[dt.datetime, dt.datetime]:
    """(not before, not after) in UTC, whole seconds (what X.509 times hold): from
    `backdate` before `now` to `days` after it."""
    if now.tzinfo is None:
        raise ValueError("now must be timezone-aware")
    if days < 1:
        raise ValueError("days must be >= 1")
    now = now.astimezone(dt.timezone.utc).replace(microsecond=0)
    return now - backdate, now + dt.timedelta(days=days)


def server_pem(certificate: str, pkcs8_key: str) -> str:
    """The one-file PEM mongod (net.tls.certificateKeyFile) and the stand-in take: the
    certificate, then the key. Raises ValueError unless the key is unencrypted PKCS#8."""
    if "-----BEGIN CERTIFICATE-----" not in certificate:
        raise ValueError("no PEM certificate")
    if "-----BEGIN PRIVATE KEY-----" not in pkcs8_key:
        raise ValueError("the key is not an unencrypted PKCS#8 PEM (BEGIN PRIVATE KEY)")
    return certificate.strip() + "\n" + pkcs8_key.strip() + "\n"


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _builder(
    subject: x509.Name, issuer: x509.Name, public_key, start: dt.datetime, end: dt.datetime
) -> x509.CertificateBuilder:
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(new_serial())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public_key), critical=False)
    )


def _key_usage(**enabled: bool) -> x509.KeyUsage:
    usages = (
        "digital_signature",
        "content_commitment",
        "key_encipherment",
        "data_encipherment",
        "key_agreement",
        "key_cert_sign",
        "crl_sign",
        "encipher_only",
        "decipher_only",
    )
    return x509.KeyUsage(**{u: enabled.get(u, False) for u in usages})


def build(
    sans: SubjectAltNames,
    *,
    start: dt.datetime,
    end: dt.datetime,
    key_bits: int = KEY_BITS,
) -> tuple[x509.Certificate, x509.Certificate, rsa.RSAPrivateKey]:
    """(CA certificate, server certificate, server key). The CA may sign server certificates
    only (pathlen 0); the server certificate is for serverAuth, and clientAuth for a replica
    set member that presents it to the others. The CA's key is dropped on return."""
    ca_key = rsa.generate_private_key(public_exponent=65537, key_size=key_bits)
    ca_name = _name(CA_NAME)
    ca_cert = (
        _builder(ca_name, ca_name, ca_key.public_key(), start, end)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_key_usage(key_cert_sign=True, crl_sign=True), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = rsa.generate_private_key(public_exponent=65537, key_size=key_bits)
    first = (sans.dns or sans.ips)[0]
    cert = (
        _builder(
            _name(first if len(first) <= _CN_MAX else SERVER_NAME),
            ca_name,
            key.public_key(),
            start,
            end,
        )
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_key_usage(digital_signature=True, key_encipherment=True), critical=True)
        .add_extension(
            x509.ExtendedKeyUsage(
                [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
            ),
            critical=False,
        )
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
        .add_extension(x509.SubjectAlternativeName(sans.general_names()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    # what `openssl verify` used to check: the CA's key signed it and the names chain up
    cert.verify_directly_issued_by(ca_cert)
    return ca_cert, cert, key


# ----------------------------------------------------------------------------- runner


@dataclass(frozen=True)
class TlsMaterial:
    """What `generate` left: the CA certificate (for clients), the server's PEM (secret:
    certificate + key) and the names the server certificate covers."""

    directory: str
    ca_cert: str
    server_pem: str
    sans: SubjectAltNames
    not_before: dt.datetime
    not_after: dt.datetime
    key_bits: int = KEY_BITS

    def metadata(self) -> dict:
        return {
            "tls_ca": "throwaway (generated for this run)",
            "tls_server_names": ",".join(self.sans.ips + self.sans.dns),
            "tls_key": f"RSA {self.key_bits}",
        }


def generate(
    directory: str,
    addresses: Sequence[str],
    *,
    now: dt.datetime | None = None,
    days: int = DEFAULT_DAYS,
    key_bits: int = KEY_BITS,
) -> TlsMaterial:
    """Makes the CA and the server certificate for `addresses` in `directory` (created
    0700; must not hold material already). Raises ValueError for bad addresses or
    parameters, RuntimeError when the directory already holds material."""
    sans = subject_alt_names(addresses)
    start, end = validity(now or dt.datetime.now(dt.timezone.utc), days=days)
    os.makedirs(directory, mode=0o700, exist_ok=True)
    os.chmod(directory, 0o700)
    if os.path.exists(os.path.join(directory, CA_CERT)):
        raise RuntimeError(f"{directory} already holds TLS material")
    ca_cert, cert, key = build(sans, start=start, end=end, key_bits=key_bits)
    pem = serialization.Encoding.PEM
    key_pem = key.private_bytes(
        pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    write_private(os.path.join(directory, CA_CERT), ca_cert.public_bytes(pem).decode())
    write_private(
        os.path.join(directory, SERVER_PEM), server_pem(cert.public_bytes(pem).decode(), key_pem)
    )
    return TlsMaterial(
        directory,
        os.path.join(directory, CA_CERT),
        os.path.join(directory, SERVER_PEM),
        sans,
        start,
        end,
        key_bits,
    )
