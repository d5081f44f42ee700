package io.github.mongobench.standin;

import de.bwaldvogel.mongo.bson.Document;
import de.bwaldvogel.mongo.bson.ObjectId;
import com.mongodb.ServerAddress;
import java.io.IOException;
import java.net.InetAddress;
import java.net.NetworkInterface;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashSet;
import java.util.List;
import java.util.Set;

/**
 * Replica-set membership of one stand-in ({@code --replset NAME}): the installed config and the
 * documents derived from it (hello fields, replSetGetStatus, replSetGetConfig).
 *
 * <p>A simulation of deployment plumbing, not of replication: there are no elections, heartbeats
 * or oplog, and data is not replicated. Every member holds the same config (replSetInitiate pushes
 * it to the others), so every member computes the same primary: the highest priority, ties to
 * the lowest {@code _id}. Every member is reported healthy.
 */
final class ReplicaSet {

  // Constant: there is only ever one term, so drivers never see a stale primary.
  static final ObjectId ELECTION_ID = new ObjectId("7fffffff0000000000000001");

  record Member(int id, String host, double priority) {}

  record Config(String name, List<Member> members, boolean configsvr) {

    Member primary() {
      return members.stream()
          .filter(m -> m.priority() > 0)
          .min(
              Comparator.comparingDouble((Member m) -> -m.priority())
                  .thenComparingInt(Member::id))
          .orElseThrow();
    }

    Member member(String host) {
      return members.stream().filter(m -> m.host().equals(host)).findFirst().orElse(null);
    }

    /** The config as replSetInitiate takes it, for the other members (driver BSON). */
    org.bson.Document toBson() {
      List<org.bson.Document> docs = new ArrayList<>();
      for (Member m : members) {
        docs.add(
            new org.bson.Document("_id", m.id())
                .append("host", m.host())
                .append("priority", m.priority()));
      }
      org.bson.Document doc = new org.bson.Document("_id", name).append("members", docs);
      if (configsvr) {
        doc.append("configsvr", true);
      }
      return doc;
    }
  }

  /** A rejected command, as a MongoDB error code and message. */
  static final class ReplSetException extends Exception {
    private static final long serialVersionUID = 1L;
    final int code;
    final String codeName;

    ReplSetException(int code, String codeName, String message) {
      super(message, null, false, false);
      this.code = code;
      this.codeName = codeName;
    }

    static ReplSetException invalid(String message) {
      return new ReplSetException(93, "InvalidReplicaSetConfig", message);
    }

    static ReplSetException notYetInitialized() {
      return new ReplSetException(94, "NotYetInitialized", "no replset config has been received");
    }
  }

  private final String name;
  private final String advertise; // null: <bind host>:<port>, or whichever member is local
  private final String bindHost;
  private final Instant started = Instant.now();
  private volatile int port;
  private volatile String self;
  private volatile Config config;
  private volatile Instant installedAt;

  /**
   * @param advertise the host:port this member is known by in the config (--advertise), or null
   * @param bindHost the address the server binds (--host)
   */
  ReplicaSet(String name, String advertise, String bindHost) {
    this.name = name;
    this.advertise = advertise;
    this.bindHost = bindHost;
  }

  String name() {
    return name;
  }

  /** Called once the port is known (it may be chosen by the OS). */
  void bound(int port) {
    this.port = port;
    this.self = advertise != null ? advertise : StandinServer.hostPort(bindHost, port);
  }

  /** This member's host:port: the default or --advertise, then its name in the config. */
  String self() {
    return self;
  }

  /**
   * This node's entry in a member list. With --advertise only that exact host:port; otherwise
   * {@code <bind host>:<port>}, else, as mongod decides "isSelf", the one member with this port
   * whose host resolves to the bound address (any local address when bound to the wildcard).
   */
  String selfIn(List<Member> members) throws ReplSetException {
    String fallback = self;
    if (members.stream().anyMatch(m -> m.host().equals(fallback))) {
      return fallback;
    }
    List<String> local = new ArrayList<>();
    if (advertise == null) {
      for (Member m : members) {
        if (isLocal(m.host())) {
          local.add(m.host());
        }
      }
    }
    if (local.size() == 1) {
      return local.get(0);
    }
    if (local.size() > 1) {
      throw ReplSetException.invalid("several members map to this node: " + local);
    }
    throw new ReplSetException(
        74,
        "NodeNotFound",
        "No host described in new configuration for replica set "
            + name
            + " maps to this node ("
            + fallback
            + (advertise == null ? ", or any local address with port " + port : "")
            + ")");
  }

  private boolean isLocal(String hostPort) {
    try {
      ServerAddress address = new ServerAddress(hostPort);
      if (address.getPort() != port) {
        return false;
      }
      InetAddress bound = InetAddress.getByName(bindHost);
      for (InetAddress a : InetAddress.getAllByName(address.getHost())) {
        if (bound.isAnyLocalAddress()
            ? a.isLoopbackAddress() || NetworkInterface.getByInetAddress(a) != null
            : a.equals(bound)) {
          return true;
        }
      }
    } catch (IOException | RuntimeException e) { // unresolvable or malformed: not this node
      return false;
    }
    return false;
  }

  Config config() {
    return config;
  }

  /** replSetInitiate without a config: this node alone, as mongod does. */
  Config defaultConfig() {
    return new Config(name, List.of(new Member(0, self, 1.0)), false);
  }

  /** Validates a replSetInitiate document against this node's set name and address. */
  Config parse(Document doc) throws ReplSetException {
    if (!(doc.get("_id") instanceof String setName) || setName.isEmpty()) {
      throw ReplSetException.invalid("replica set config needs a string _id (the set name)");
    }
    if (!setName.equals(name)) {
      throw ReplSetException.invalid(
          "Attempting to initiate a replica set with name "
              + setName
              + ", but command line reports "
              + name
              + "; rejecting");
    }
    if (!(doc.get("members") instanceof List<?> list) || list.isEmpty()) {
      throw ReplSetException.invalid("replica set config needs a non-empty members array");
    }
    List<Member> members = new ArrayList<>();
    Set<Integer> ids = new HashSet<>();
    Set<String> hosts = new HashSet<>();
    for (Object o : list) {
      if (!(o instanceof Document m)) {
        throw ReplSetException.invalid("members must be documents");
      }
      if (!(m.get("_id") instanceof Number id) || id.doubleValue() != id.intValue()) {
        throw ReplSetException.invalid("every member needs an integer _id");
      }
      if (!(m.get("host") instanceof String host) || host.isEmpty()) {
        throw ReplSetException.invalid("member " + id + " needs a host");
      }
      double priority = 1.0;
      if (m.containsKey("priority")) {
        if (!(m.get("priority") instanceof Number p) || p.doubleValue() < 0) {
          throw ReplSetException.invalid("priority of member " + id + " must be a number >= 0");
        }
        priority = p.doubleValue();
      }
      if (Boolean.TRUE.equals(m.get("arbiterOnly"))) {
        throw ReplSetException.invalid(
            "the stand-in does not simulate arbiters (member " + id + ")");
      }
      if (!ids.add(id.intValue())) {
        throw ReplSetException.invalid("duplicate member _id " + id);
      }
      if (!hosts.add(host)) {
        throw ReplSetException.invalid("duplicate member host " + host);
      }
      members.add(new Member(id.intValue(), host, priority));
    }
    if (members.stream().noneMatch(m -> m.priority() > 0)) {
      throw ReplSetException.invalid("no electable member (every priority is 0)");
    }
    selfIn(members);
    return new Config(name, List.copyOf(members), Boolean.TRUE.equals(doc.get("configsvr")));
  }

  /** Installs the config; an equal config again is a no-op, a different one AlreadyInitialized. */
  synchronized void install(Config cfg) throws ReplSetException {
    if (config != null) {
      if (config.equals(cfg)) {
        return;
      }
      throw new ReplSetException(23, "AlreadyInitialized", "already initialized");
    }
    self = selfIn(cfg.members());
    installedAt = Instant.now();
    config = cfg;
  }

  boolean isWritablePrimary() {
    Config cfg = config;
    return cfg != null && cfg.primary().host().equals(self);
  }

  /** hello/isMaster fields of a replica-set member, before and after initiation. */
  void addHelloFields(Document reply) {
    Config cfg = config;
    if (cfg == null) {
      reply.put("ismaster", false);
      reply.put("isWritablePrimary", false);
      reply.put("secondary", false);
      reply.put("isreplicaset", true);
      reply.put("info", "Does not have a valid replica set config");
      return;
    }
    String primary = cfg.primary().host();
    boolean isPrimary = primary.equals(self);
    List<String> hosts = new ArrayList<>();
    List<String> passives = new ArrayList<>();
    for (Member m : cfg.members()) {
      (m.priority() > 0 ? hosts : passives).add(m.host());
    }
    reply.put("ismaster", isPrimary);
    reply.put("isWritablePrimary", isPrimary);
    reply.put("secondary", !isPrimary);
    reply.put("setName", cfg.name());
    reply.put("setVersion", 1);
    reply.put("hosts", hosts);
    if (!passives.isEmpty()) {
      reply.put("passives", passives);
    }
    reply.put("primary", primary);
    reply.put("me", self);
    if (cfg.configsvr()) {
      // mongod says so on config servers; a mongos checks it (--config-db) and refuses to add
      // the config servers as a shard.
      reply.put("configsvr", 2);
    }
    if (isPrimary) {
      reply.put("electionId", ELECTION_ID);
    }
    // No topologyVersion on purpose: with it, drivers switch to streaming (exhaust) hellos,
    // which mongo-java-server does not implement.
  }

  /** replSetGetStatus, shaped like mongod's (tests/data/rs_status). */
  Document status() throws ReplSetException {
    Config cfg = config;
    if (cfg == null) {
      throw ReplSetException.notYetInitialized();
    }
    String primary = cfg.primary().host();
    Instant now = Instant.now();
    List<Document> members = new ArrayList<>();
    for (Member m : cfg.members()) {
      boolean isPrimary = m.host().equals(primary);
      boolean isSelf = m.host().equals(self);
      Instant since = isSelf ? started : installedAt;
      Document doc =
          new Document("_id", m.id())
              .append("name", m.host())
              .append("health", 1.0)
              .append("state", isPrimary ? 1 : 2)
              .append("stateStr", isPrimary ? "PRIMARY" : "SECONDARY")
              .append("uptime", (int) Duration.between(since, now).toSeconds())
              .append("syncSourceHost", isPrimary ? "" : primary)
              .append("configVersion", 1)
              .append("configTerm", 1);
      if (isSelf) {
        doc.append("self", true);
      }
      members.add(doc);
    }
    return new Document("set", cfg.name())
        .append("date", now)
        .append("myState", isWritablePrimary() ? 1 : 2)
        .append("term", 1L)
        .append("heartbeatIntervalMillis", 2000L)
        .append("members", members)
        .append("ok", 1.0);
  }

  /** replSetGetConfig's config document, with mongod's defaults filled in. */
  Document configDocument() throws ReplSetException {
    Config cfg = config;
    if (cfg == null) {
      throw ReplSetException.notYetInitialized();
    }
    List<Document> members = new ArrayList<>();
    for (Member m : cfg.members()) {
      members.add(
          new Document("_id", m.id())
              .append("host", m.host())
              .append("arbiterOnly", false)
              .append("buildIndexes", true)
              .append("hidden", false)
              .append("priority", m.priority())
              .append("tags", new Document())
              .append("secondaryDelaySecs", 0L)
              .append("votes", 1));
    }
    Document doc =
        new Document("_id", cfg.name())
            .append("version", 1)
            .append("term", 1)
            .append("protocolVersion", 1L)
            .append("members", members);
    if (cfg.configsvr()) {
      doc.append("configsvr", true);
    }
    return doc;
  }
}
