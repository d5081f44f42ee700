package io.github.mongobench.standin;

import de.bwaldvogel.mongo.MongoServer;
import de.bwaldvogel.mongo.backend.memory.MemoryBackend;

/**
 * In-memory MongoDB wire-protocol server used by tests in place of a real mongod.
 *
 * <p>Usage: {@code StandinServer [--host H] [--port N]}; port 0 lets the OS choose. Once bound it
 * prints {@code LISTENING <host>:<port>} on stdout so a parent process can learn the port.
 */
public final class StandinServer {

  private static final String USAGE = "usage: StandinServer [--host H] [--port N]";

  private StandinServer() {}

  /** Parsed command line. */
  record Options(String host, int port) {

    static Options parse(String[] args) {
      String host = "127.0.0.1";
      int port = 0;
      for (int i = 0; i < args.length; i++) {
        switch (args[i]) {
          case "--host" -> host = value(args, ++i);
          case "--port" -> port = parsePort(value(args, ++i));
          default -> throw new IllegalArgumentException("unknown argument: " + args[i]);
        }
      }
      return new Options(host, port);
    }

    private static String value(String[] args, int i) {
      if (i >= args.length) {
        throw new IllegalArgumentException(args[i - 1] + " needs a value");
      }
      return args[i];
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

    MongoServer server = new MongoServer(new MemoryBackend());
    try {
      server.bind(options.host(), options.port());
    } catch (Exception e) { // Netty rethrows the checked BindException undeclared.
      System.err.println("cannot bind " + options.host() + ":" + options.port() + ": " + e);
      // Netty's non-daemon event loop threads would otherwise keep the JVM alive.
      System.exit(2);
      return;
    }
    Runtime.getRuntime().addShutdownHook(new Thread(server::shutdownNow, "standin-shutdown"));

    System.out.println("LISTENING " + options.host() + ":" + server.getLocalAddress().getPort());
    System.out.flush();
  }
}
