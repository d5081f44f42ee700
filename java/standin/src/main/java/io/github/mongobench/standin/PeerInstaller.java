package io.github.mongobench.standin;

import com.mongodb.MongoClientSettings;
import com.mongodb.MongoCommandException;
import com.mongodb.MongoCredential;
import com.mongodb.MongoSecurityException;
import com.mongodb.MongoTimeoutException;
import com.mongodb.ServerAddress;
import com.mongodb.client.MongoClient;
import com.mongodb.client.MongoClients;
import com.mongodb.connection.ClusterConnectionMode;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.security.GeneralSecurityException;
import java.security.cert.X509Certificate;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import javax.net.ssl.SSLContext;
import javax.net.ssl.TrustManager;
import javax.net.ssl.X509TrustManager;
import org.bson.Document;

/**
 * Sends one admin command to the other members of a replica set, all at once, with the Java
 * driver (a direct connection per member). Used by replSetInitiate to push the config.
 */
final class PeerInstaller {

  private static final int CONNECT_TIMEOUT_MS = 3000;
  private static final int SELECTION_TIMEOUT_S = 5;
  private static final int READ_TIMEOUT_S = 20;

  private final boolean tls;

  /** {@code tls}: the members serve TLS only (they share this node's options). */
  PeerInstaller(boolean tls) {
    this.tls = tls;
  }

  /** Runs {@code command} on every host; returns host -> why it failed (empty: all ok). */
  Map<String, String> run(List<String> hosts, Document command, MongoCredential credential) {
    Map<String, String> failures = new LinkedHashMap<>();
    if (hosts.isEmpty()) {
      return failures;
    }
    ExecutorService pool = Executors.newFixedThreadPool(hosts.size());
    try {
      List<Future<String>> results = new ArrayList<>();
      for (String host : hosts) {
        results.add(pool.submit(() -> runOne(host, command, credential)));
      }
      for (int i = 0; i < hosts.size(); i++) {
        String failure;
        try {
          failure = results.get(i).get();
        } catch (ExecutionException e) {
          failure = String.valueOf(e.getCause());
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
          failure = "interrupted";
        }
        if (failure != null) {
          failures.put(hosts.get(i), failure);
        }
      }
    } finally {
      pool.shutdownNow();
    }
    return failures;
  }

  private String runOne(String host, Document command, MongoCredential credential) {
    ServerAddress address;
    try {
      address = new ServerAddress(host);
    } catch (IllegalArgumentException e) {
      return "invalid host:port (" + e.getMessage() + ")";
    }
    // A plain TCP connect first: a refused connection fails in milliseconds instead of after the
    // driver's server-selection timeout, and with a clearer reason.
    try (Socket s = new Socket()) {
      s.connect(new InetSocketAddress(address.getHost(), address.getPort()), CONNECT_TIMEOUT_MS);
    } catch (IOException e) {
      return "cannot connect: " + e.getMessage();
    }
    MongoClientSettings.Builder settings =
        MongoClientSettings.builder()
            .applyToClusterSettings(
                b ->
                    b.hosts(List.of(address))
                        .mode(ClusterConnectionMode.SINGLE)
                        .serverSelectionTimeout(SELECTION_TIMEOUT_S, TimeUnit.SECONDS))
            .applyToSocketSettings(
                b ->
                    b.connectTimeout(CONNECT_TIMEOUT_MS, TimeUnit.MILLISECONDS)
                        .readTimeout(READ_TIMEOUT_S, TimeUnit.SECONDS));
    if (credential != null) {
      settings.credential(credential);
    }
    if (tls) {
      settings.applyToSslSettings(
          b -> b.enabled(true).invalidHostNameAllowed(true).context(trustAll()));
    }
    try (MongoClient client = MongoClients.create(settings.build())) {
      client.getDatabase("admin").runCommand(command);
      return null;
    } catch (MongoCommandException e) {
      return e.getErrorCodeName() + " (" + e.getErrorCode() + "): " + e.getErrorMessage();
    } catch (MongoSecurityException e) {
      return "authentication failed as " + credential.getUserName() + "@" + credential.getSource();
    } catch (MongoTimeoutException e) {
      return "no usable answer within " + SELECTION_TIMEOUT_S + " s (TLS or protocol mismatch?)";
    } catch (RuntimeException e) {
      return e.toString();
    }
  }

  /**
   * Members are test-bed stand-ins whose certificates this node cannot verify (it has no CA
   * file). The exchange carries the config and a SCRAM login, which never sends the password.
   */
  private static SSLContext trustAll() {
    TrustManager trustAll =
        new X509TrustManager() {
          @Override
          public void checkClientTrusted(X509Certificate[] chain, String authType) {}

          @Override
          public void checkServerTrusted(X509Certificate[] chain, String authType) {}

          @Override
          public X509Certificate[] getAcceptedIssuers() {
            return new X509Certificate[0];
          }
        };
    try {
      SSLContext context = SSLContext.getInstance("TLS");
      context.init(null, new TrustManager[] {trustAll}, null);
      return context;
    } catch (GeneralSecurityException e) {
      throw new IllegalStateException("no TLS context", e);
    }
  }
}
