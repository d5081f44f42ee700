package io.github.mongobench.standin;

import de.bwaldvogel.mongo.backend.Utils;
import de.bwaldvogel.mongo.bson.Document;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.stream.Collectors;

/**
 * The mongos role of one stand-in ({@code --mongos}): a router that does not route.
 *
 * <p>It answers hello as a mongos ({@code msg: "isdbgrid"}, so drivers treat the deployment as
 * sharded), registers shards with {@code addShard} after asking their members over the network
 * who they are, and keeps the sharding metadata of {@code enableSharding} and {@code
 * shardCollection}. Every document, however, stays in this process's own memory backend: nothing
 * is sent to the shards, there are no chunks, no balancer, no targeting. It checks deployment
 * plumbing (shard registration against live shard replica sets, the sharding commands, drivers
 * connecting through a mongos), not data distribution.
 *
 * <p>With {@code --config-db cfg/h:p,...} the config server replica set is checked before the
 * first sharding command (the order of start-up and initiation does not matter): its first
 * reachable member must report that set name and {@code configsvr}. The metadata is kept here,
 * not on the config servers, and mirrored into this process's {@code config} database ({@code
 * config.shards}, {@code config.databases}, {@code config.collections}, mongod's field names) so
 * clients can check what is sharded as on a real cluster; writing those collections directly
 * changes nothing here. Dropping a collection or its database forgets its sharding, as mongos
 * does.
 */
final class Mongos {

  static final String CONFIG_DB = "config";

  /** Runs a command on this process's memory backend (for collections and the mirror). */
  interface Backend {
    Document command(String db, String command, Document query);
  }

  /** A replica set as mongos names it: {@code setName/host:port,...} (--config-db, addShard). */
  record SetSeeds(String setName, List<String> hosts) {

    /** null when {@code value} is not of that form. */
    static SetSeeds parse(String value) {
      int slash = value.indexOf('/');
      if (slash <= 0) {
        return null;
      }
      List<String> hosts =
          Arrays.stream(value.substring(slash + 1).split(","))
              .map(String::trim)
              .filter(h -> !h.isEmpty())
              .toList();
      return hosts.isEmpty() ? null : new SetSeeds(value.substring(0, slash), hosts);
    }

    static SetSeeds parseConfigDb(String value) {
      SetSeeds seeds = parse(value);
      if (seeds == null) {
        throw new IllegalArgumentException(
            "--config-db takes the config server replica set as setName/host:port[,host:port...]");
      }
      return seeds;
    }

    @Override
    public String toString() {
      return setName + "/" + String.join(",", hosts);
    }
  }

  record Shard(String name, String setName, List<String> hosts) {
    String host() {
      return setName + "/" + String.join(",", hosts);
    }
  }

  record ShardedCollection(List<Map.Entry<String, Object>> key, boolean unique) {
    Document keyDocument() {
      Document doc = new Document();
      key.forEach(e -> doc.append(e.getKey(), e.getValue()));
      return doc;
    }
  }

  /** The config database mirror could not be written (a bug, reported with its reason). */
  static final class MirrorException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    MirrorException(String message) {
      super(message);
    }
  }

  private final SetSeeds configDb; // null: not checked
  private final PeerInstaller peers;
  private boolean configChecked;
  private final Map<String, Shard> shards = new LinkedHashMap<>();
  private final Set<String> databases = new LinkedHashSet<>();
  private final Map<String, ShardedCollection> collections = new LinkedHashMap<>();

  Mongos(SetSeeds configDb, PeerInstaller peers) {
    this.configDb = configDb;
    this.peers = peers;
  }

  /** hello/isMaster as a mongos answers it: writable, no replica-set fields. */
  static void addHelloFields(Document reply) {
    reply.put("ismaster", true);
    reply.put("isWritablePrimary", true);
    reply.put("msg", "isdbgrid");
  }

  // ---- config servers ------------------------------------------------------------------------

  /** null when the config servers are fine (or not given), else the error reply. */
  private Document checkConfigDb() {
    if (configDb == null || configChecked) {
      return null;
    }
    Map<String, Object> answers =
        peers.ask(configDb.hosts(), new org.bson.Document("hello", 1), null);
    List<String> reasons = new ArrayList<>();
    for (String host : configDb.hosts()) {
      Object answer = answers.get(host);
      if (!(answer instanceof org.bson.Document hello)) {
        reasons.add(host + ": " + answer);
        continue;
      }
      // The first reachable member decides, as mongos trusts whichever member answers.
      Object setName = hello.get("setName");
      if (setName == null) {
        reasons.add(host + ": " + describe(hello));
        break;
      }
      if (!configDb.setName().equals(setName)) {
        return StandinBackend.error(
            96,
            "OperationFailed",
            "config server "
                + host
                + " belongs to replica set "
                + setName
                + ", not to "
                + configDb.setName()
                + " (--config-db "
                + configDb
                + ")");
      }
      if (hello.get("configsvr") == null) {
        return StandinBackend.error(
            96,
            "OperationFailed",
            "replica set "
                + setName
                + " (--config-db) is not a config server replica set: it was not initiated with"
                + " configsvr: true");
      }
      configChecked = true;
      return null;
    }
    return StandinBackend.error(
        133,
        "FailedToSatisfyReadPreference",
        "no usable member of the config server replica set "
            + configDb
            + ": "
            + String.join("; ", reasons));
  }

  /** What a hello reply says a server is, for error messages. */
  private static String describe(org.bson.Document hello) {
    if ("isdbgrid".equals(hello.get("msg"))) {
      return "a mongos, not a replica set member";
    }
    if (hello.get("setName") instanceof String name) {
      return "a member of replica set " + name;
    }
    if (Boolean.TRUE.equals(hello.get("isreplicaset"))) {
      return "a replica set member that is not initiated yet (run replSetInitiate first)";
    }
    return "a standalone server, not a replica set member";
  }

  // ---- shards --------------------------------------------------------------------------------

  synchronized Document addShard(Object arg, Object nameArg, Backend backend) {
    if (!(arg instanceof String spec)) {
      return StandinBackend.error(2, "BadValue", "addShard takes a connection string");
    }
    SetSeeds seeds = SetSeeds.parse(spec);
    if (seeds == null) {
      return StandinBackend.error(
          96,
          "OperationFailed",
          "addShard needs a replica set, as setName/host:port[,host:port...] (shards are replica"
              + " sets since MongoDB 3.6), not "
              + spec);
    }
    String setName = seeds.setName();
    List<String> hosts = seeds.hosts();
    if (nameArg != null && !(nameArg instanceof String)) {
      return StandinBackend.error(2, "BadValue", "addShard: name must be a string");
    }
    String name = nameArg == null ? setName : (String) nameArg;
    if (name.isEmpty() || name.equals(CONFIG_DB)) {
      return StandinBackend.error(2, "BadValue", "invalid shard name: '" + name + "'");
    }
    Document configError = checkConfigDb();
    if (configError != null) {
      return configError;
    }
    Map<String, Object> answers = peers.ask(hosts, new org.bson.Document("hello", 1), null);
    List<String> reasons = new ArrayList<>();
    org.bson.Document found = null;
    for (String host : hosts) {
      Object answer = answers.get(host);
      if (!(answer instanceof org.bson.Document hello)) {
        reasons.add(host + ": " + answer);
      } else if (!setName.equals(hello.get("setName"))) {
        reasons.add(host + ": " + describe(hello));
      } else if (hello.get("configsvr") != null) {
        return StandinBackend.error(
            96,
            "OperationFailed",
            "cannot add " + spec + " as a shard: it is the config server replica set");
      } else {
        found = hello;
        break;
      }
    }
    if (found == null) {
      return StandinBackend.error(
          96,
          "OperationFailed",
          "cannot add shard "
              + name
              + ": no member of "
              + spec
              + " is an initiated member of replica set "
              + setName
              + " ("
              + String.join("; ", reasons)
              + ")");
    }
    // As mongos records it: the set's own member list, not the seed list given.
    List<String> members = new ArrayList<>(stringList(found.get("hosts")));
    members.addAll(stringList(found.get("passives")));
    Shard shard = new Shard(name, setName, members.isEmpty() ? hosts : List.copyOf(members));
    Shard existing = shards.get(name);
    if (existing != null) {
      if (existing.equals(shard)) {
        return new Document("shardAdded", name).append("ok", 1.0);
      }
      return StandinBackend.error(
          20,
          "IllegalOperation",
          "A shard named " + name + " already exists, as " + existing.host());
    }
    for (Shard s : shards.values()) {
      if (s.setName().equals(setName)) {
        return StandinBackend.error(
            20,
            "IllegalOperation",
            "replica set " + setName + " is already a member of the existing shard " + s.name());
      }
    }
    shards.put(name, shard);
    mirror(
        backend,
        "shards",
        name,
        new Document("_id", name).append("host", shard.host()).append("state", 1));
    return new Document("shardAdded", name).append("ok", 1.0);
  }

  private static List<String> stringList(Object value) {
    List<String> out = new ArrayList<>();
    if (value instanceof List<?> list) {
      for (Object o : list) {
        if (o instanceof String s) {
          out.add(s);
        }
      }
    }
    return out;
  }

  synchronized Document listShards() {
    Document configError = checkConfigDb();
    if (configError != null) {
      return configError;
    }
    List<Document> docs = new ArrayList<>();
    for (Shard s : shards.values()) {
      docs.add(new Document("_id", s.name()).append("host", s.host()).append("state", 1));
    }
    return new Document("shards", docs).append("ok", 1.0);
  }

  private Document noShards(String what) {
    return StandinBackend.error(70, "ShardNotFound", "No shards found: addShard before " + what);
  }

  // ---- databases and collections ---------------------------------------------------------

  private static Document checkDatabaseName(String db) {
    if (db.isEmpty() || db.contains(".") || db.contains("$") || db.contains("/")) {
      return StandinBackend.error(73, "InvalidNamespace", "invalid database name: '" + db + "'");
    }
    if (db.equals("admin") || db.equals("local") || db.equals(CONFIG_DB)) {
      return StandinBackend.error(72, "InvalidOptions", "cannot shard the " + db + " database");
    }
    return null;
  }

  synchronized Document enableSharding(Object arg, Backend backend) {
    if (!(arg instanceof String db)) {
      return StandinBackend.error(2, "BadValue", "enableSharding takes a database name");
    }
    Document invalid = checkDatabaseName(db);
    if (invalid != null) {
      return invalid;
    }
    Document configError = checkConfigDb();
    if (configError != null) {
      return configError;
    }
    if (shards.isEmpty()) {
      return noShards("enableSharding " + db);
    }
    enable(db, backend);
    return new Document("ok", 1.0);
  }

  private void enable(String db, Backend backend) {
    if (databases.add(db)) {
      String primary = shards.keySet().iterator().next();
      mirror(
          backend,
          "databases",
          db,
          new Document("_id", db).append("primary", primary).append("partitioned", true));
    }
  }

  synchronized Document shardCollection(Object arg, Document query, Backend backend) {
    if (!(arg instanceof String ns)) {
      return StandinBackend.error(2, "BadValue", "shardCollection takes a namespace db.collection");
    }
    int dot = ns.indexOf('.');
    if (dot <= 0 || dot == ns.length() - 1) {
      return StandinBackend.error(
          73, "InvalidNamespace", "Invalid namespace specified '" + ns + "'");
    }
    String db = ns.substring(0, dot);
    String coll = ns.substring(dot + 1);
    Document invalid = checkDatabaseName(db);
    if (invalid != null) {
      return invalid;
    }
    if (!(query.get("key") instanceof Document keyDoc)) {
      return StandinBackend.error(2, "BadValue", "shardCollection needs a key document");
    }
    Object uniqueArg = query.get("unique");
    boolean unique = uniqueArg != null && Utils.isTrue(uniqueArg);
    List<Map.Entry<String, Object>> key = new ArrayList<>();
    String bad = parseKey(keyDoc, unique, key);
    if (bad != null) {
      return StandinBackend.error(2, "BadValue", bad);
    }
    Document configError = checkConfigDb();
    if (configError != null) {
      return configError;
    }
    if (shards.isEmpty()) {
      return noShards("shardCollection " + ns);
    }
    ShardedCollection wanted = new ShardedCollection(List.copyOf(key), unique);
    ShardedCollection existing = collections.get(ns);
    if (existing != null) {
      if (existing.equals(wanted)) {
        return new Document("collectionsharded", ns).append("ok", 1.0);
      }
      return StandinBackend.error(
          23,
          "AlreadyInitialized",
          "sharding already enabled for collection "
              + ns
              + " with options { key: "
              + existing.keyDocument().toString()
              + ", unique: "
              + existing.unique()
              + " }");
    }
    Document created = backend.command(db, "create", new Document("create", coll));
    if (!Utils.isTrue(created.get("ok")) && !Objects.equals(created.get("code"), 48)) {
      return created; // 48 NamespaceExists: sharding an existing collection is fine
    }
    enable(db, backend);
    collections.put(ns, wanted);
    mirror(
        backend,
        "collections",
        ns,
        new Document("_id", ns)
            .append("lastmod", Instant.now())
            .append("key", wanted.keyDocument())
            .append("unique", unique)
            .append("noBalance", false));
    return new Document("collectionsharded", ns).append("ok", 1.0);
  }

  /** Checks a shard key as mongod does; fills {@code out}; returns why it is invalid, or null. */
  private static String parseKey(
      Document keyDoc, boolean unique, List<Map.Entry<String, Object>> out) {
    if (keyDoc.isEmpty()) {
      return "shard key pattern must not be empty";
    }
    int hashed = 0;
    for (Map.Entry<String, Object> e : keyDoc.entrySet()) {
      String field = e.getKey();
      Object kind = e.getValue();
      if (field.isEmpty() || field.startsWith("$") || field.startsWith(".")
          || field.endsWith(".")) {
        return "invalid shard key field name: '" + field + "'";
      }
      if ("hashed".equals(kind)) {
        hashed++;
        out.add(Map.entry(field, "hashed"));
      } else if (kind instanceof Number n && n.doubleValue() == 1.0) {
        out.add(Map.entry(field, 1)); // 1, 1L and 1.0 are the same key
      } else {
        return "Shard key "
            + keyDoc
            + ": field "
            + field
            + " must be 1 or 'hashed', not "
            + kind;
      }
    }
    if (hashed > 1) {
      return "Shard key " + keyDoc + " can contain at most one 'hashed' field";
    }
    if (hashed == 1 && unique) {
      return "hashed shard keys cannot be declared unique";
    }
    return null;
  }

  /** drop: the collection is no longer sharded (a later shardCollection starts afresh). */
  synchronized void dropped(String db, String coll, Backend backend) {
    String ns = db + "." + coll;
    if (collections.remove(ns) != null) {
      unmirror(backend, "collections", ns);
    }
  }

  /** dropDatabase: its collections and the database itself are forgotten. */
  synchronized void droppedDatabase(String db, Backend backend) {
    List<String> gone =
        collections.keySet().stream()
            .filter(ns -> ns.startsWith(db + "."))
            .collect(Collectors.toList());
    for (String ns : gone) {
      collections.remove(ns);
      unmirror(backend, "collections", ns);
    }
    if (databases.remove(db)) {
      unmirror(backend, "databases", db);
    }
  }

  // ---- the config database mirror ------------------------------------------------------------

  private static void mirror(Backend backend, String collection, String id, Document doc) {
    unmirror(backend, collection, id);
    check(
        backend.command(
            CONFIG_DB,
            "insert",
            new Document("insert", collection).append("documents", List.of(doc))));
  }

  private static void unmirror(Backend backend, String collection, String id) {
    Document delete = new Document("q", new Document("_id", id)).append("limit", 0);
    check(
        backend.command(
            CONFIG_DB,
            "delete",
            new Document("delete", collection).append("deletes", List.of(delete))));
  }

  private static void check(Document reply) {
    if (!Utils.isTrue(reply.get("ok"))) {
      throw new MirrorException("config database mirror: " + reply.get("errmsg"));
    }
  }
}
