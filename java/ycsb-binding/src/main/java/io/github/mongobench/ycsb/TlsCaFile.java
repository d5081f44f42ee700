package io.github.mongobench.ycsb;

import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.GeneralSecurityException;
import java.security.KeyStore;
import java.security.cert.Certificate;
import java.security.cert.CertificateFactory;
import java.util.Collection;
import javax.net.ssl.SSLContext;
import javax.net.ssl.TrustManagerFactory;
import site.ycsb.DBException;

/**
 * An SSLContext that trusts exactly the CA certificate(s) of one PEM file, built with the JDK
 * alone. The Java driver ignores {@code tlsCAFile} in a connection string (it reads trust from
 * the JVM's trust store), so a private CA, such as the throwaway one of a benchmark run, comes
 * in through the {@value #PROPERTY} property instead, without touching the JVM's cacerts.
 */
final class TlsCaFile {

  static final String PROPERTY = "mongodb.tlsCAFile";

  private TlsCaFile() {}

  /** Trust for {@code pem}: every certificate in it is a trust anchor, nothing else is. */
  static SSLContext sslContext(Path pem) throws DBException {
    Collection<? extends Certificate> certs;
    try (InputStream in = Files.newInputStream(pem)) {
      certs = CertificateFactory.getInstance("X.509").generateCertificates(in);
    } catch (IOException | GeneralSecurityException e) {
      throw new DBException("cannot read the CA certificate(s) of " + PROPERTY + " '" + pem
          + "': " + e);
    }
    if (certs.isEmpty()) {
      throw new DBException(PROPERTY + " '" + pem + "' holds no PEM certificate");
    }
    try {
      KeyStore trusted = KeyStore.getInstance(KeyStore.getDefaultType());
      trusted.load(null, null);
      int i = 0;
      for (Certificate cert : certs) {
        trusted.setCertificateEntry("ca-" + i++, cert);
      }
      TrustManagerFactory tmf =
          TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
      tmf.init(trusted);
      SSLContext context = SSLContext.getInstance("TLS");
      context.init(null, tmf.getTrustManagers(), null);
      System.err.println("TLS: trusting only the " + certs.size() + " CA certificate(s) of "
          + pem);
      return context;
    } catch (IOException | GeneralSecurityException e) {
      throw new DBException("cannot build a TLS context from " + PROPERTY + " '" + pem + "': "
          + e);
    }
  }
}
