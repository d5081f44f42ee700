package io.github.mongobench.standin;

import io.netty.handler.ssl.SslContext;
import io.netty.handler.ssl.SslContextBuilder;
import java.nio.file.Path;

/**
 * In-memory MongoDB wire-protocol server used by tests in place of a real mongod.
 *
 * <p>Usage: {@code StandinServer [--host H] [--port N] [--users-file FILE] [--tls-cert-key-file
 * PEM] [--replset NAME [--advertise HOST:PORT] | --mongos [--config-db NAME/HOST:PORT,...]]};
 * port 0 lets the OS choose. Once bound it prints {@code LISTENING <host>:<port>} on stdout so a
 * parent process can learn the port.
 *
 * <ul>
 *   <li>{@code --users-file}: JSON list of {@code {"user", "password", "db"}} (db defaults to
 *       admin); turns on SCRAM-SHA-256 authentication. Passwords never go on the command line.
 *   <li>{@code --tls-cert-key-file}: serve TLS only, with this PEM (certificate chain and key,
 *       see {@link PemKeyMaterial}).
 *   <li>{@code --replset}: a simulated replica-set member (see {@link ReplicaSet}), known to the
 *       others as {@code --advertise} (default {@code <host>:<bound port>}, or the config's member
 *       that resolves to this address and port, see {@link ReplicaSet#selfIn}).
 *   <li>{@code --mongos}: a mongos that registers shards and takes the sharding commands but keeps
 *       all data itself (see {@link Mongos}); {@code --config-db}: its config server replica set,
 *       checked before the first sharding command.
 *   <li>{@code --tickets N}: at most N reads and N writes run at once, the rest wait, and
 *       serverStatus reports tickets and queue as mongod does (see {@link Tickets}); {@code
 *       --ticket-hold-ms M}: each holds its ticket at least M ms (a server of known capacity).
 *   <li>{@code --dbpath DIR}: keep the store in a data file in DIR (see {@link DataFiles}): read
 *       at start, written on a clean shutdown (SIGTERM), so the directory can be copied to another
 *       instance as a stopped mongod's dbPath can.
 * </ul>
 */
public final class StandinServer {

  private static final String USAGE =
      "usage: StandinServer [--host H] [--port N] [--users-file FILE] [--tls-cert-key-file PEM]"
          + " [--replset NAME [--advertise HOST:PORT] | --mongos [--config-db NAME/HOST:PORT,...]]"
          + " [--tickets N [--ticket-hold-ms M]] [--dbpath DIR]";

  private StandinServer() {}

  /** Parsed command line. */
  record Options(
      String host,
      int port,
      Path usersFile,
      Path tlsPem,
      String replset,
      String advertise,
      boolean mongos,
      Mongos.SetSeeds configDb,
      int tickets,
      int ticketHoldMs,
      Path dbpath) {

    static Options parse(String[] args) {
      String host = "127.0.0.1";
      int port = 0;
      Path usersFile = null;
      Path tlsPem = null;
      String replset = null;
      String advertise = null;
      boolean mongos = false;
      Mongos.SetSeeds configDb = null;
      int tickets = 0;
      int ticketHoldMs = 0;
      Path dbpath = null;
      for (int i = 0; i < args.length; i++) {
        switch (args[i]) {
          case "--host" -> host = value(args, ++i);
          case "--port" -> port = parsePort(value(args, ++i));
          case "--users-file" -> usersFile = Path.of(value(args, ++i));
          case "--tls-cert-key-file" -> tlsPem = Path.of(value(args, ++i));
          case "--replset" -> replset = nonEmpty(args, ++i);
          case "--advertise" -> advertise = nonEmpty(args, ++i);
          case "--mongos" -> mongos = true;
          case "--config-db" -> configDb = Mongos.SetSeeds.parseConfigDb(nonEmpty(args, ++i));
          case "--tickets" -> tickets = positive(args, ++i);
          case "--ticket-hold-ms" -> ticketHoldMs = positive(args, ++i);
          case "--dbpath" -> dbpath = Path.of(nonEmpty(args, ++i));
          default -> throw new IllegalArgumentException("unknown argument: " + args[i]);
        }
      }
      if (advertise != null && replset == null) {
        throw new IllegalArgumentException("--advertise needs --replset");
      }
      if (mongos && replset != null) {
        throw new IllegalArgumentException("--mongos and --replset exclude each other");
      }
      if (configDb != null && !mongos) {
        throw new IllegalArgumentException("--config-db needs --mongos");
      }
      if (ticketHoldMs > 0 && tickets == 0) {
        throw new IllegalArgumentException("--ticket-hold-ms needs --tickets");
      }
      return new Options(
          host, port, usersFile, tlsPem, replset, advertise, mongos, configDb, tickets,
          ticketHoldMs, dbpath);
    }

    private static int positive(String[] args, int i) {
      String v = value(args, i);
      try {
        int n = Integer.parseInt(v);
        if (n > 0) {
          return n;
        }
      } catch (NumberFormatException e) {
        // fall through
      }
      throw new IllegalArgumentException(args[i - 1] + " needs a positive integer, not " + v);
    }

    private static String value(String[] args, int i) {
      if (i >= args.length) {
        throw new IllegalArgumentException(args[i - 1] + " needs a value");
      }
      return args[i];
    }

    private static String nonEmpty(String[] args, int i) {
      String v = value(args, i);
      if (v.isEmpty()) {
        throw new IllegalArgumentException(args[i - 1] + " needs a non-empty value");
      }
      return v;
    }

    private static int parsePort(String s) {
      try {
        int port = Integer.parseInt(s);
        if (port >= 0 && port <= 65535) {
          return port;
        }
      } catch (NumberFormatException e) {
        // fall through
      }
      throw new IllegalArgumentException("invalid port: " + s);
    }
  }

  static String hostPort(String host, int port) {
    return (host.contains(":") && !host.startsWith("[") ? "[" + host + "]" : host) + ":" + port;
  }

  public static void main(String[] args) {
    // slf4j-simple reads this on first use: only warnings and errors reach stderr.
    if (System.getProperty("org.slf4j.simpleLogger.defaultLogLevel") == null) {
      System.setProperty("org.slf4j.simpleLogger.defaultLogLevel", "warn");
    }
    Options options;
    try {
      options = Options.parse(args);
    } catch (IllegalArgumentException e) {
      System.err.println(e.getMessage());
      System.err.println(USAGE);
      System.exit(64);
      return;
    }

    Users users = new Users();
    PemKeyMaterial tls = null;
    try {
      if (options.usersFile() != null) {
        users = Users.load(options.usersFile());
      }
      if (options.tlsPem() != null) {
        tls = PemKeyMaterial.load(options.tlsPem());
      }
    } catch (Exception e) { // IOException or IllegalArgumentException; messages hold no secret
      System.err.println(e.getMessage());
      System.exit(66);
      return;
    }
    ReplicaSet replSet =
        options.replset() == null
            ? null
            : new ReplicaSet(options.replset(), options.advertise(), options.host());
    if (replSet != null && options.port() != 0) {
      replSet.bound(options.port()); // before the first client can connect
    }

    SslContext ssl = null;
    if (tls != null) {
      try {
        ssl = SslContextBuilder.forServer(tls.key(), null, tls.chain()).build();
      } catch (Exception e) { // SSLException: the key does not fit the certificate, or similar
        System.err.println("cannot use the TLS certificate and key: " + e.getMessage());
        System.exit(66);
        return;
      }
    }
    StandinBackend backend =
        new StandinBackend(
            users,
            options.usersFile() != null,
            replSet,
            options.mongos(),
            options.configDb(),
            tls != null);
    if (options.tickets() > 0) {
      backend.tickets(new Tickets(options.tickets(), options.ticketHoldMs()));
    }
    if (options.dbpath() != null) {
      try {
        long restored = DataFiles.load(backend, options.dbpath());
        if (restored > 0) {
          System.err.println("restored " + restored + " documents from " + options.dbpath());
        }
      } catch (Exception e) { // IOException, or a file that is not the stand-in's
        System.err.println("cannot read the data file in " + options.dbpath() + ": " + e);
        System.exit(66);
        return;
      }
    }
    WireServer server = new WireServer(backend, ssl);
    int port;
    try {
      port = server.bind(options.host(), options.port());
    } catch (Exception e) { // Netty rethrows the checked BindException undeclared.
      System.err.println("cannot bind " + options.host() + ":" + options.port() + ": " + e);
      // Netty's non-daemon event loop threads would otherwise keep the JVM alive.
      System.exit(2);
      return;
    }
    server.dataPath(options.dbpath()); // bound: a clean shutdown now writes the data file
    Runtime.getRuntime().addShutdownHook(new Thread(server::shutdownNow, "standin-shutdown"));
    if (replSet != null && options.port() == 0) {
      replSet.bound(port);
    }

    System.out.println("LISTENING " + options.host() + ":" + port);
    System.out.flush();
  }
}
