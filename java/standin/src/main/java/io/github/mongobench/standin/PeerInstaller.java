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
 * Sends admin commands to other stand-ins, all at once, with the Java driver (a direct connection
 * per host). replSetInitiate pushes its config to the other members with {@link #run}; a mongos
 * asks shards and config servers who they are with {@link #ask}.
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

  /**
   * Runs each command on every host, one command after the other: the next only when every host
   * accepted the previous one. Returns host -> why it failed (empty: all ok).
   */
  Map<String, String> run(List<String> hosts, List<Document> commands, MongoCredential credential) {
    Map<String, String> failures = new LinkedHashMap<>();
    if (hosts.isEmpty()) {
      return failures;
    }
    ExecutorService pool = Executors.newFixedThreadPool(hosts.size());
    Map<String, MongoClient> clients = new LinkedHashMap<>();
    try {
      Map<String, Future<Object>> connecting = new LinkedHashMap<>();
      for (String host : hosts) {
        connecting.put(host, pool.submit(() -> connect(host, credential)));
      }
      for (Map.Entry<String, Future<Object>> e : connecting.entrySet()) {
        Object result = await(e.getValue());
        if (result instanceof MongoClient client) {
          clients.put(e.getKey(), client);
        } else {
          failures.put(e.getKey(), String.valueOf(result));
        }
      }
      for (Document command : commands) {
        if (!failures.isEmpty()) {
          break;
        }
        Map<String, Future<Object>> running = new LinkedHashMap<>();
        clients.forEach(
            (host, client) ->
                running.put(host, pool.submit(() -> runOne(client, command, credential))));
        for (Map.Entry<String, Future<Object>> e : running.entrySet()) {
          Object failure = await(e.getValue());
          if (failure != null) {
            failures.put(e.getKey(), String.valueOf(failure));
          }
        }
      }
    } finally {
      clients.values().forEach(MongoClient::close);
      pool.shutdownNow();
    }
    return failures;
  }

  /**
   * Runs {@code command} on every host at once. Returns host -> its reply (a {@link Document}) or
   * why there is none (a String).
   */
  Map<String, Object> ask(List<String> hosts, Document command, MongoCredential credential) {
    Map<String, Object> answers = new LinkedHashMap<>();
    List<String> distinct = hosts.stream().distinct().toList();
    if (distinct.isEmpty()) {
      return answers;
    }
    ExecutorService pool = Executors.newFixedThreadPool(distinct.size());
    try {
      Map<String, Future<Object>> asking = new LinkedHashMap<>();
      for (String host : distinct) {
        asking.put(host, pool.submit(() -> askOne(host, command, credential)));
      }
      asking.forEach((host, future) -> answers.put(host, await(future)));
    } finally {
      pool.shutdownNow();
    }
    return answers;
  }

  private Object askOne(String host, Document command, MongoCredential credential) {
    Object connected = connect(host, credential);
    if (!(connected instanceof MongoClient client)) {
      return connected;
    }
    try (client) {
      return client.getDatabase("admin").runCommand(command);
    } catch (RuntimeException e) {
      return reason(e, credential);
    }
  }

  private static Object await(Future<Object> future) {
    try {
      return future.get();
    } catch (ExecutionException e) {
      return String.valueOf(e.getCause());
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return "interrupted";
    }
  }

  /** A client for one member, or the reason why there is none. */
  private Object connect(String host, MongoCredential credential) {
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
    return MongoClients.create(settings.build());
  }

  /** null when the command succeeded, else why not. */
  private static String runOne(MongoClient client, Document command, MongoCredential credential) {
    try {
      client.getDatabase("admin").runCommand(command);
      return null;
    } catch (RuntimeException e) {
      return reason(e, credential);
    }
  }

  private static String reason(RuntimeException e, MongoCredential credential) {
    if (e instanceof MongoCommandException c) {
      return c.getErrorCodeName() + " (" + c.getErrorCode() + "): " + c.getErrorMessage();
    }
    if (e instanceof MongoSecurityException && credential != null) {
      return "authentication failed as " + credential.getUserName() + "@" + credential.getSource();
    }
    if (e instanceof MongoTimeoutException) {
      return "no usable answer within " + SELECTION_TIMEOUT_S + " s (TLS or protocol mismatch?)";
    }
    return e.toString();
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
