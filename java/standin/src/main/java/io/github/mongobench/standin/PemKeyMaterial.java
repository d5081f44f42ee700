package io.github.mongobench.standin;

import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.GeneralSecurityException;
import java.security.KeyFactory;
import java.security.PrivateKey;
import java.security.cert.CertificateFactory;
import java.security.cert.X509Certificate;
import java.security.spec.PKCS8EncodedKeySpec;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The server's certificate chain and private key from one PEM file, as mongod's
 * {@code net.tls.certificateKeyFile}: CERTIFICATE blocks (server first) plus one unencrypted key,
 * PKCS#8 ({@code BEGIN PRIVATE KEY}: RSA, EC or Ed25519) or PKCS#1 ({@code BEGIN RSA PRIVATE
 * KEY}). Encrypted keys and SEC1 EC keys ({@code BEGIN EC PRIVATE KEY}) are refused; convert
 * them with {@code openssl pkcs8 -topk8 -nocrypt}.
 */
record PemKeyMaterial(PrivateKey key, X509Certificate[] chain) {

  private static final Pattern BLOCK =
      Pattern.compile("-----BEGIN ([A-Z0-9 ]+)-----([^-]*)-----END \\1-----");

  static PemKeyMaterial load(Path file) throws IOException {
    String text = Files.readString(file, StandardCharsets.US_ASCII);
    List<X509Certificate> certs = new ArrayList<>();
    PrivateKey key = null;
    Matcher m = BLOCK.matcher(text);
    try {
      CertificateFactory cf = CertificateFactory.getInstance("X.509");
      while (m.find()) {
        String type = m.group(1);
        byte[] der = Base64.getMimeDecoder().decode(m.group(2));
        switch (type) {
          case "CERTIFICATE" ->
              certs.add((X509Certificate) cf.generateCertificate(new ByteArrayInputStream(der)));
          case "PRIVATE KEY", "RSA PRIVATE KEY" -> {
            if (key != null) {
              throw new IllegalArgumentException("more than one private key");
            }
            key = type.equals("PRIVATE KEY") ? pkcs8(der) : pkcs8Rsa(pkcs1ToPkcs8(der));
          }
          case "ENCRYPTED PRIVATE KEY" ->
              throw new IllegalArgumentException("encrypted private keys are not supported");
          case "EC PRIVATE KEY" ->
              throw new IllegalArgumentException(
                  "SEC1 EC keys are not supported; convert: openssl pkcs8 -topk8 -nocrypt");
          default -> {} // e.g. EC PARAMETERS, DH PARAMETERS: not needed
        }
      }
    } catch (GeneralSecurityException | IllegalArgumentException e) {
      throw new IllegalArgumentException("cannot read " + file + ": " + e.getMessage(), e);
    }
    if (certs.isEmpty() || key == null) {
      throw new IllegalArgumentException(
          file + " needs a CERTIFICATE block and a PRIVATE KEY (or RSA PRIVATE KEY) block");
    }
    return new PemKeyMaterial(key, certs.toArray(new X509Certificate[0]));
  }

  private static PrivateKey pkcs8(byte[] der) throws GeneralSecurityException {
    GeneralSecurityException last = null;
    for (String algorithm : List.of("RSA", "EC", "Ed25519", "RSASSA-PSS")) {
      try {
        return KeyFactory.getInstance(algorithm).generatePrivate(new PKCS8EncodedKeySpec(der));
      } catch (GeneralSecurityException e) {
        last = e;
      }
    }
    throw new GeneralSecurityException("unsupported private key algorithm", last);
  }

  private static PrivateKey pkcs8Rsa(byte[] der) throws GeneralSecurityException {
    return KeyFactory.getInstance("RSA").generatePrivate(new PKCS8EncodedKeySpec(der));
  }

  /** Wraps a PKCS#1 RSAPrivateKey in a PKCS#8 PrivateKeyInfo (version 0, rsaEncryption). */
  static byte[] pkcs1ToPkcs8(byte[] pkcs1) {
    byte[] algorithm = {
      0x30, 0x0d, 0x06, 0x09, 0x2a, (byte) 0x86, 0x48, (byte) 0x86, (byte) 0xf7, 0x0d, 0x01, 0x01,
      0x01, 0x05, 0x00
    };
    byte[] version = {0x02, 0x01, 0x00};
    byte[] octets = derTlv(0x04, pkcs1);
    byte[] body = new byte[version.length + algorithm.length + octets.length];
    System.arraycopy(version, 0, body, 0, version.length);
    System.arraycopy(algorithm, 0, body, version.length, algorithm.length);
    System.arraycopy(octets, 0, body, version.length + algorithm.length, octets.length);
    return derTlv(0x30, body);
  }

  private static byte[] derTlv(int tag, byte[] value) {
    int len = value.length;
    byte[] lenBytes;
    if (len < 0x80) {
      lenBytes = new byte[] {(byte) len};
    } else {
      int n = (32 - Integer.numberOfLeadingZeros(len) + 7) / 8;
      lenBytes = new byte[n + 1];
      lenBytes[0] = (byte) (0x80 | n);
      for (int i = 0; i < n; i++) {
        lenBytes[n - i] = (byte) (len >>> (8 * i));
      }
    }
    byte[] out = new byte[1 + lenBytes.length + len];
    out[0] = (byte) tag;
    System.arraycopy(lenBytes, 0, out, 1, lenBytes.length);
    System.arraycopy(value, 0, out, 1 + lenBytes.length, len);
    return out;
  }
}
