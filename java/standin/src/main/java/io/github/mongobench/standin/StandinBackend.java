package io.github.mongobench.standin;

import com.mongodb.MongoCredential;
import de.bwaldvogel.mongo.MongoVersion;
import de.bwaldvogel.mongo.backend.QueryResult;
import de.bwaldvogel.mongo.backend.Utils;
import de.bwaldvogel.mongo.backend.memory.MemoryBackend;
import de.bwaldvogel.mongo.bson.BinData;
import de.bwaldvogel.mongo.bson.Document;
import de.bwaldvogel.mongo.exception.MongoServerError;
import de.bwaldvogel.mongo.exception.MongoServerException;
import de.bwaldvogel.mongo.wire.message.MongoQuery;
import io.netty.channel.Channel;
import io.netty.channel.group.ChannelGroup;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Supplier;
import java.util.stream.Collectors;

/**
 * mongo-java-server's memory backend plus what the test beds need of a real mongod:
 * SCRAM-SHA-256 authentication with users (createUser/dropUser), a replica-set simulation (see
 * {@link ReplicaSet}: discovery and initiation, no replication) and a mongos role (see {@link
 * Mongos}: shard registration and sharding commands, no routing).
 *
 * <p>Every command passes through {@link #handleCommand}; per-connection state (who logged in, the
 * SASL conversation) is keyed by the Netty channel and dropped in {@link #handleClose}. Handlers
 * here return error documents instead of throwing: the library logs the whole command of a
 * failing request, and createUser carries a password.
 */
final class StandinBackend extends MemoryBackend {

  static final String INSTALL_COMMAND = "mongobenchReplSetInstall";

  /**
   * The MongoDB release the stand-in claims in hello (maxWireVersion), buildInfo and serverStatus.
   * The library's default, wire version 8 (MongoDB 4.2, though it says "5.0.0"), is below what
   * current drivers accept (pymongo 4.16+ needs 9, MongoDB 4.4). 7.0 is a release current drivers
   * support for years yet, and below 8.0, whose new commands (bulkWrite) the library lacks.
   */
  static final MongoVersion VERSION =
      new MongoVersion() {
        @Override
        public List<Integer> getVersionArray() {
          return List.of(7, 0, 0);
        }

        @Override
        public int getWireVersion() {
          return 21;
        }
      };

  // What drivers send before they log in (handshake, mechanism negotiation, SASL, cleanup).
  private static final Set<String> OPEN_COMMANDS =
      Set.of(
          "hello",
          "ismaster",
          "ping",
          "buildinfo",
          "saslstart",
          "saslcontinue",
          "endsessions",
          "getnonce");

  // MongoDB's localhost exception, open to any client here: while no user exists, the first user
  // can be created, and a replica set initiated (MongoDB's documented order for keyfile-secured
  // sets: rs.initiate() first, then the first user).
  private static final Set<String> NO_USERS_YET_COMMANDS =
      Set.of(
          "createuser",
          "dropuser",
          "replsetinitiate",
          "replsetgetstatus",
          "replsetgetconfig",
          INSTALL_COMMAND.toLowerCase(Locale.ROOT));

  // Commands a secondary refuses with NotWritablePrimary, as mongod does.
  private static final Set<String> WRITE_COMMANDS =
      Set.of(
          "insert",
          "update",
          "delete",
          "findandmodify",
          "create",
          "createindexes",
          "drop",
          "dropindexes",
          "dropdatabase",
          "renamecollection",
          "collmod");

  /** Per connection: authenticated users and the SASL conversation in progress. */
  private static final class Session {
    final Set<Users.User> authenticated = new LinkedHashSet<>();
    Scram.Conversation conversation;
    String conversationDb;
    int conversationId;
  }

  private final Users users;
  private final boolean authRequired;
  private final ReplicaSet replSet;
  private final Mongos mongos;
  private final PeerInstaller peers;
  private final Object initiateLock = new Object();
  private final Map<Channel, Session> sessions = new ConcurrentHashMap<>();
  private final OpLatencies opLatencies = new OpLatencies();
  private volatile ChannelGroup clients;

  /**
   * @param users the users (possibly empty); createUser adds to them
   * @param authRequired refuse commands on connections that have not logged in (--users-file)
   * @param replSet replica-set membership, or null
   * @param mongos true: act as a mongos (exclusive with replSet)
   * @param configDb the mongos's config server replica set to check, or null
   * @param tls the other stand-ins (members, shards, config servers) serve TLS
   */
  StandinBackend(
      Users users,
      boolean authRequired,
      ReplicaSet replSet,
      boolean mongos,
      Mongos.SetSeeds configDb,
      boolean tls) {
    if (replSet != null && mongos) {
      throw new IllegalArgumentException("a replica-set member cannot be a mongos");
    }
    this.users = users;
    this.authRequired = authRequired;
    this.replSet = replSet;
    this.peers = new PeerInstaller(tls);
    this.mongos = mongos ? new Mongos(configDb, peers) : null;
    version(VERSION);
  }

  @Override
  public Document handleCommand(Channel channel, String db, String command, Document query) {
    Document own;
    try {
      own = handleOwnCommand(channel, db, command, query);
    } catch (MongoServerException e) { // the library's own errors (drop of a missing collection)
      throw e;
    } catch (Mongos.MirrorException e) {
      own = error(8, "UnknownError", command + ": " + e.getMessage());
    } catch (RuntimeException e) { // malformed arguments (e.g. a wrong type): never the command
      own = error(2, "BadValue", command + ": " + e.getClass().getSimpleName());
    }
    return own != null ? own : super.handleCommand(channel, db, command, query);
  }

  /** The reply of a command handled here, or null for the memory backend's handling. */
  private Document handleOwnCommand(Channel channel, String db, String command, Document query) {
    String cmd = command.toLowerCase(Locale.ROOT);
    switch (cmd) {
      case "hello", "ismaster" -> {
        return hello(channel, db, query);
      }
      case "saslstart" -> {
        return saslStart(channel, db, query);
      }
      case "saslcontinue" -> {
        return saslContinue(channel, db, query);
      }
      default -> {}
    }
    if (authRequired
        && !isAuthenticated(channel)
        && !OPEN_COMMANDS.contains(cmd)
        && !(users.isEmpty() && NO_USERS_YET_COMMANDS.contains(cmd))) {
      return error(13, "Unauthorized", "command " + command + " requires authentication");
    }
    if (mongos != null) {
      Document reply = mongosCommand(channel, db, command, cmd, query);
      if (reply != null) {
        return reply;
      }
    }
    switch (cmd) {
      case "createuser" -> {
        return createUser(db, command, query);
      }
      case "dropuser" -> {
        return dropUser(db, command, query);
      }
      case "usersinfo" -> {
        return usersInfo(db, query.get(command));
      }
      case "connectionstatus" -> {
        return connectionStatus(channel);
      }
      case "replsetinitiate" -> {
        return replSetInitiate(channel, query.get(command));
      }
      case "replsetgetstatus" -> {
        return replSetDocument(false);
      }
      case "replsetgetconfig" -> {
        return replSetDocument(true);
      }
      default -> {}
    }
    if (cmd.equals(INSTALL_COMMAND.toLowerCase(Locale.ROOT))) {
      return installConfig(query.get(command), Utils.isTrue(query.get("dryRun")));
    }
    if (replSet != null
        && WRITE_COMMANDS.contains(cmd)
        && !db.equals("local")
        && !replSet.isWritablePrimary()) {
      return error(10107, "NotWritablePrimary", "not primary");
    }
    return null;
  }

  private volatile Tickets tickets;

  /** Admission control of reads and writes ({@code --tickets}), or null: none. */
  Tickets tickets() {
    return tickets;
  }

  void tickets(Tickets t) {
    tickets = t;
  }

  /** The open client connections (the wire layer's channel group): serverStatus's count. */
  void clients(ChannelGroup group) {
    clients = group;
  }

  /** Filled by the wire layer ({@link WireServer}), which times every request. */
  OpLatencies opLatencies() {
    return opLatencies;
  }

  /** The library's serverStatus (host, version, uptime, connections, cursors) and opLatencies. */
  @Override
  public Document getServerStatus() {
    Document status = super.getServerStatus();
    Object ok = status.remove("ok"); // stays last, as in mongod's reply
    status.put("opLatencies", opLatencies.toDocument());
    ChannelGroup open = clients;
    if (open != null && status.get("connections") instanceof Document conn) {
      // the library's figure counts less than mongod's (every open client connection)
      conn.put("current", open.size());
    }
    Tickets t = tickets;
    if (t != null) {
      t.report(status);
    }
    status.put("ok", ok);
    return status;
  }

  // Legacy OP_QUERY reads (drivers for wire version >= 6 use OP_MSG commands instead).
  @Override
  public QueryResult handleQuery(MongoQuery query) {
    if (authRequired && !isAuthenticated(query.getChannel())) {
      throw new MongoServerError(13, "Unauthorized", "query requires authentication");
    }
    return super.handleQuery(query);
  }

  @Override
  public void handleClose(Channel channel) {
    sessions.remove(channel);
    super.handleClose(channel);
  }

  // ---- data files (DataFiles: --dbpath) -----------------------------------------------------

  /** Names of the databases that exist. */
  List<String> databaseNames() {
    return new ArrayList<>(listDatabaseNames());
  }

  /** listCollections' entries of {@code db} (the library's own command, no auth check). */
  List<?> collectionInfos(Channel channel, String db) {
    Document reply =
        super.handleCommand(channel, db, "listCollections", new Document("listCollections", 1));
    Document cursor = (Document) reply.get("cursor");
    return cursor == null ? List.of() : (List<?>) cursor.get("firstBatch");
  }

  /** Every document of {@code db.coll}, in the collection's order. */
  List<Document> allDocuments(String db, String coll) {
    var collection = resolveDatabase(db).resolveCollection(coll, false);
    List<Document> docs = new ArrayList<>();
    if (collection != null) {
      collection.queryAll().forEach(docs::add);
    }
    return docs;
  }

  void createCollection(Channel channel, String db, String coll) {
    super.handleCommand(channel, db, "create", new Document("create", coll));
  }

  void insertDocuments(Channel channel, String db, String coll, List<Document> docs) {
    Document reply =
        super.handleCommand(
            channel, db, "insert", new Document("insert", coll).append("documents", docs));
    Object written = reply.get("n");
    if (!(written instanceof Number n) || n.intValue() != docs.size()) {
      throw new IllegalStateException(
          "restoring " + db + "." + coll + " from the data file: " + reply);
    }
  }

  private Session session(Channel channel) {
    return sessions.computeIfAbsent(channel, c -> new Session());
  }

  private boolean isAuthenticated(Channel channel) {
    Session s = sessions.get(channel);
    if (s == null) {
      return false;
    }
    synchronized (s) {
      return !s.authenticated.isEmpty();
    }
  }

  static Document error(int code, String codeName, String message) {
    return new Document("ok", 0.0)
        .append("errmsg", message)
        .append("code", code)
        .append("codeName", codeName);
  }

  private static Document ok() {
    return new Document("ok", 1.0);
  }

  // ---- hello -------------------------------------------------------------------------------

  private Document hello(Channel channel, String db, Document query) {
    // The library's isMaster reply: wire versions, size limits, localTime.
    Document reply = super.handleCommand(channel, db, "ismaster", query);
    reply.remove("ok");
    reply.put("isWritablePrimary", reply.get("ismaster"));
    if (Utils.isTrue(query.get("helloOk"))) {
      reply.put("helloOk", true); // as mongod 4.4.2+: drivers then monitor with hello
    }
    if (replSet != null) {
      replSet.addHelloFields(reply);
    }
    if (mongos != null) {
      Mongos.addHelloFields(reply);
    }
    if (query.get("saslSupportedMechs") instanceof String) {
      // Listed for unknown users too, so drivers pick SCRAM-SHA-256 and get a plain
      // AuthenticationFailed rather than a fallback to SCRAM-SHA-1.
      reply.put("saslSupportedMechs", List.of(Scram.MECHANISM));
    }
    if (query.get("speculativeAuthenticate") instanceof Document spec
        && Scram.MECHANISM.equals(spec.get("mechanism"))) {
      String authDb = spec.get("db") instanceof String s ? s : db;
      Document first = saslStart(channel, authDb, spec);
      // On failure drivers run the normal conversation, which reports the error.
      if (Utils.isTrue(first.get("ok"))) {
        first.remove("ok");
        reply.put("speculativeAuthenticate", first);
      }
    }
    reply.put("ok", 1.0);
    return reply;
  }

  // ---- SCRAM-SHA-256 -------------------------------------------------------------------------

  private static byte[] payload(Object value) {
    if (value instanceof BinData b) {
      return b.getData();
    }
    if (value instanceof String s) {
      return s.getBytes(StandardCharsets.UTF_8);
    }
    throw new IllegalArgumentException("payload must be binary");
  }

  private Document saslStart(Channel channel, String db, Document query) {
    Object mechanism = query.get("mechanism");
    if (!Scram.MECHANISM.equals(mechanism)) {
      return error(
          334,
          "MechanismUnavailable",
          "Received authentication for mechanism " + mechanism + " which is not enabled");
    }
    boolean skipEmptyExchange =
        query.get("options") instanceof Document o && Utils.isTrue(o.get("skipEmptyExchange"));
    Scram.Conversation conversation;
    try {
      conversation =
          Scram.Conversation.start(users, db, payload(query.get("payload")), skipEmptyExchange);
    } catch (Scram.SaslException e) {
      return error(e.code, e.codeName, e.getMessage());
    }
    Session s = session(channel);
    int id;
    synchronized (s) {
      id = ++s.conversationId;
      s.conversation = conversation;
      s.conversationDb = db;
    }
    return new Document("conversationId", id)
        .append("done", false)
        .append("payload", new BinData(conversation.serverFirstMessage()))
        .append("ok", 1.0);
  }

  private Document saslContinue(Channel channel, String db, Document query) {
    Session s = session(channel);
    synchronized (s) {
      Object id = query.get("conversationId");
      Scram.Conversation conversation = s.conversation;
      if (conversation == null
          || !(id instanceof Number n)
          || n.intValue() != s.conversationId
          || !db.equals(s.conversationDb)) {
        return error(17, "ProtocolError", "No SASL session state found");
      }
      byte[] answer;
      try {
        answer = conversation.next(payload(query.get("payload")));
      } catch (Scram.SaslException e) {
        s.conversation = null;
        return error(e.code, e.codeName, e.getMessage());
      }
      if (conversation.done()) {
        s.conversation = null;
        s.authenticated.add(conversation.user);
      }
      return new Document("conversationId", s.conversationId)
          .append("done", conversation.done())
          .append("payload", new BinData(answer))
          .append("ok", 1.0);
    }
  }

  // ---- users -------------------------------------------------------------------------------

  // Roles are stored and echoed, never enforced: the stand-in has no authorization model.
  private Document createUser(String db, String command, Document query) {
    if (!(query.get(command) instanceof String name) || name.isEmpty()) {
      return error(2, "BadValue", "createUser needs a non-empty user name");
    }
    if (db.equals("$external")) {
      return error(2, "BadValue", "the stand-in has no $external users");
    }
    if (!(query.get("pwd") instanceof String pwd)) {
      return error(2, "BadValue", "Must provide a 'pwd' field for all user documents");
    }
    if (Boolean.FALSE.equals(query.get("digestPassword"))) {
      return error(2, "BadValue", "Use of SCRAM-SHA-256 requires undigested passwords");
    }
    if (!(query.get("roles") instanceof List<?> roles)) {
      return error(2, "BadValue", "\"createUser\" command requires a \"roles\" array");
    }
    boolean added;
    try {
      added = users.add(db, name, pwd, new ArrayList<>(roles));
    } catch (IllegalArgumentException e) { // messages never quote the password
      return error(2, "BadValue", e.getMessage());
    }
    if (!added) {
      return error(51003, "Location51003", "User \"" + name + "@" + db + "\" already exists");
    }
    return ok();
  }

  private Document dropUser(String db, String command, Document query) {
    if (!(query.get(command) instanceof String name)) {
      return error(2, "BadValue", "dropUser needs a user name");
    }
    if (!users.remove(db, name)) {
      return error(11, "UserNotFound", "User '" + name + "@" + db + "' not found");
    }
    return ok();
  }

  private Document usersInfo(String db, Object arg) {
    List<Users.User> found = new ArrayList<>();
    List<?> wanted = arg instanceof List<?> list ? list : List.of(arg);
    for (Object w : wanted) {
      if (w instanceof Number) {
        found.addAll(users.inDatabase(db));
      } else if (w instanceof String name) {
        addIfPresent(found, users.get(db, name));
      } else if (w instanceof Document d && d.get("user") instanceof String name) {
        addIfPresent(found, users.get(d.get("db") instanceof String udb ? udb : db, name));
      } else {
        return error(2, "BadValue", "usersInfo takes 1, a user name, or {user, db}");
      }
    }
    List<Document> docs = new ArrayList<>();
    for (Users.User u : found) {
      docs.add(
          new Document("_id", u.db() + "." + u.name())
              .append("user", u.name())
              .append("db", u.db())
              .append("roles", u.roles())
              .append("mechanisms", List.of(Scram.MECHANISM)));
    }
    return new Document("users", docs).append("ok", 1.0);
  }

  private static void addIfPresent(List<Users.User> list, Users.User user) {
    if (user != null && !list.contains(user)) {
      list.add(user);
    }
  }

  private Document connectionStatus(Channel channel) {
    List<Document> who = new ArrayList<>();
    Session s = sessions.get(channel);
    if (s != null) {
      synchronized (s) {
        for (Users.User u : s.authenticated) {
          who.add(new Document("user", u.name()).append("db", u.db()));
        }
      }
    }
    return new Document(
            "authInfo",
            new Document("authenticatedUsers", who).append("authenticatedUserRoles", List.of()))
        .append("ok", 1.0);
  }

  // ---- mongos --------------------------------------------------------------------------------

  /** The reply of a command a mongos handles differently, or null. */
  private Document mongosCommand(
      Channel channel, String db, String command, String cmd, Document query) {
    Mongos.Backend backend = (d, c, q) -> ownBackendCommand(channel, d, c, q);
    Object arg = query.get(command);
    switch (cmd) {
      case "addshard" -> {
        return adminOnly(db, command, () -> mongos.addShard(arg, query.get("name"), backend));
      }
      case "listshards" -> {
        return adminOnly(db, command, mongos::listShards);
      }
      case "enablesharding" -> {
        return adminOnly(db, command, () -> mongos.enableSharding(arg, backend));
      }
      case "shardcollection" -> {
        return adminOnly(db, command, () -> mongos.shardCollection(arg, query, backend));
      }
      case "drop" -> {
        try {
          return super.handleCommand(channel, db, command, query);
        } finally { // also when the library reports a missing collection
          if (arg instanceof String coll) {
            mongos.dropped(db, coll, backend);
          }
        }
      }
      case "dropdatabase" -> {
        try {
          return super.handleCommand(channel, db, command, query);
        } finally {
          mongos.droppedDatabase(db, backend);
        }
      }
      default -> {}
    }
    if (cmd.startsWith("replset") || cmd.equals(INSTALL_COMMAND.toLowerCase(Locale.ROOT))) {
      return error(59, "CommandNotFound", "no such command: '" + command + "'");
    }
    return null;
  }

  /** A command on the memory backend, its errors as error replies (the library throws them). */
  private Document ownBackendCommand(Channel channel, String db, String command, Document query) {
    try {
      return super.handleCommand(channel, db, command, query);
    } catch (MongoServerError e) {
      return error(e.getCode(), e.getCodeName(), e.getMessageWithoutErrorCode());
    } catch (MongoServerException e) {
      return error(8, "UnknownError", e.getMessageWithoutErrorCode());
    }
  }

  private static Document adminOnly(String db, String command, Supplier<Document> run) {
    if (!db.equals("admin")) {
      return error(13, "Unauthorized", command + " may only be run against the admin database.");
    }
    return run.get();
  }

  // ---- replica set ---------------------------------------------------------------------------

  private static Document noReplication() {
    return error(76, "NoReplicationEnabled", "This node was not started with replication enabled.");
  }

  private Document replSetDocument(boolean config) {
    if (replSet == null) {
      return noReplication();
    }
    try {
      return config
          ? new Document("config", replSet.configDocument()).append("ok", 1.0)
          : replSet.status();
    } catch (ReplicaSet.ReplSetException e) {
      return error(e.code, e.codeName, e.getMessage());
    }
  }

  private Document replSetInitiate(Channel channel, Object arg) {
    if (replSet == null) {
      return noReplication();
    }
    synchronized (initiateLock) {
      if (replSet.config() != null) {
        return error(23, "AlreadyInitialized", "already initialized");
      }
      ReplicaSet.Config cfg;
      try {
        cfg = arg instanceof Document d ? replSet.parse(d) : replSet.defaultConfig();
      } catch (ReplicaSet.ReplSetException e) {
        return error(e.code, e.codeName, e.getMessage());
      }
      List<String> others;
      try {
        String me = replSet.selfIn(cfg.members());
        others =
            cfg.members().stream()
                .map(ReplicaSet.Member::host)
                .filter(h -> !h.equals(me))
                .collect(Collectors.toList());
      } catch (ReplicaSet.ReplSetException e) {
        return error(e.code, e.codeName, e.getMessage());
      }
      MongoCredential credential = peerCredential(channel);
      // Like mongod's quorum check: every member must accept before anyone installs.
      List<org.bson.Document> steps =
          List.of(installCommand(cfg, true), installCommand(cfg, false));
      Map<String, String> failed = peers.run(others, steps, credential);
      if (!failed.isEmpty()) {
        return error(
            74,
            "NodeNotFound",
            "replSetInitiate quorum check failed because not all proposed set members responded"
                + " affirmatively: "
                + failed.entrySet().stream()
                    .map(e -> e.getKey() + " failed with " + e.getValue())
                    .collect(Collectors.joining(", ")));
      }
      try {
        replSet.install(cfg);
      } catch (ReplicaSet.ReplSetException e) {
        return error(e.code, e.codeName, e.getMessage());
      }
    }
    return ok();
  }

  private static org.bson.Document installCommand(ReplicaSet.Config cfg, boolean dryRun) {
    return new org.bson.Document(INSTALL_COMMAND, cfg.toBson()).append("dryRun", dryRun);
  }

  /** The initiating connection's login, replayed on the other members (same users file). */
  private MongoCredential peerCredential(Channel channel) {
    Session s = sessions.get(channel);
    if (s == null) {
      return null;
    }
    synchronized (s) {
      for (Users.User u : s.authenticated) {
        return MongoCredential.createScramSha256Credential(
            u.name(), u.db(), u.password().toCharArray());
      }
    }
    return null;
  }

  /** The internal command replSetInitiate sends to the other members. */
  private Document installConfig(Object arg, boolean dryRun) {
    if (replSet == null) {
      return noReplication();
    }
    if (!(arg instanceof Document d)) {
      return error(2, "BadValue", INSTALL_COMMAND + " takes a replica set config");
    }
    try {
      ReplicaSet.Config cfg = replSet.parse(d);
      ReplicaSet.Config current = replSet.config();
      if (current != null && !current.equals(cfg)) {
        return error(23, "AlreadyInitialized", "already initialized with a different config");
      }
      if (!dryRun) {
        replSet.install(cfg);
      }
    } catch (ReplicaSet.ReplSetException e) {
      return error(e.code, e.codeName, e.getMessage());
    }
    return ok();
  }
}
