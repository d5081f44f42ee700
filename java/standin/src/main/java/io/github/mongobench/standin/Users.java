package io.github.mongobench.standin;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.SecureRandom;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentMap;
import org.bson.BsonArray;
import org.bson.BsonDocument;
import org.bson.BsonValue;

/**
 * In-memory users with SCRAM-SHA-256 credentials: read from the users file at start, changed by
 * createUser/dropUser, never written back.
 *
 * <p>Roles are kept only to echo them back: the stand-in has no authorization model, so every
 * authenticated user may run every command.
 */
final class Users {

  static final int ITERATIONS = 15000;
  private static final int SALT_BYTES = 32;
  private static final SecureRandom RANDOM = new SecureRandom();

  /**
   * One user. {@code password} is kept (in memory only) so that replSetInitiate can log in to the
   * other members as the user who ran it; SCRAM itself needs only the derived keys.
   */
  record User(
      String db,
      String name,
      byte[] salt,
      int iterations,
      byte[] storedKey,
      byte[] serverKey,
      String password,
      List<Object> roles) {

    @Override
    public String toString() { // never the password or keys
      return name + "@" + db;
    }
  }

  private final ConcurrentMap<String, User> users = new ConcurrentHashMap<>();

  private static String key(String db, String name) {
    return db + "\u0000" + name;
  }

  boolean isEmpty() {
    return users.isEmpty();
  }

  User get(String db, String name) {
    return users.get(key(db, name));
  }

  List<User> inDatabase(String db) {
    List<User> result = new ArrayList<>();
    for (User u : users.values()) {
      if (u.db().equals(db)) {
        result.add(u);
      }
    }
    result.sort((a, b) -> a.name().compareTo(b.name()));
    return result;
  }

  /**
   * Adds a user; false when it exists. IllegalArgumentException when the password is empty or
   * SASLprep rejects it (the message never quotes the password).
   */
  boolean add(String db, String name, String password, List<Object> roles) {
    User user = derive(db, name, password, roles);
    return users.putIfAbsent(key(db, name), user) == null;
  }

  boolean remove(String db, String name) {
    return users.remove(key(db, name)) != null;
  }

  static User derive(String db, String name, String password, List<Object> roles) {
    if (name == null || name.isEmpty()) {
      throw new IllegalArgumentException("user name must not be empty");
    }
    if (password == null || password.isEmpty()) {
      throw new IllegalArgumentException("password of " + name + "@" + db + " must not be empty");
    }
    String prepared;
    try {
      prepared = SaslPrep.prepare(password);
    } catch (IllegalArgumentException e) {
      throw new IllegalArgumentException("password of " + name + "@" + db + ": " + e.getMessage());
    }
    if (prepared.isEmpty()) {
      throw new IllegalArgumentException(
          "password of " + name + "@" + db + " is empty after SASLprep");
    }
    byte[] salt = new byte[SALT_BYTES];
    RANDOM.nextBytes(salt);
    byte[] salted = Scram.saltedPassword(prepared, salt, ITERATIONS);
    byte[] storedKey = Scram.sha256(Scram.hmac(salted, "Client Key"));
    byte[] serverKey = Scram.hmac(salted, "Server Key");
    return new User(
        db, name, salt, ITERATIONS, storedKey, serverKey, password, List.copyOf(roles));
  }

  /**
   * Reads a JSON list of {@code {"user": ..., "password": ..., "db": "admin"}} (db optional,
   * "roles" accepted and ignored). Error messages name the entry, never its password, and do not
   * quote the file's text.
   */
  static Users load(Path file) throws IOException {
    String text = Files.readString(file, StandardCharsets.UTF_8);
    BsonArray entries;
    try {
      entries = BsonArray.parse(text);
    } catch (RuntimeException e) { // the parser's message may quote a token of the file
      throw new IllegalArgumentException(
          "users file " + file + " is not a JSON list of {\"user\", \"password\", \"db\"} objects");
    }
    Users users = new Users();
    for (int i = 0; i < entries.size(); i++) {
      BsonValue entry = entries.get(i);
      String where = "users file " + file + ", entry " + i;
      if (!entry.isDocument()) {
        throw new IllegalArgumentException(where + ": not an object");
      }
      BsonDocument doc = entry.asDocument();
      for (String field : doc.keySet()) {
        if (!List.of("user", "password", "db", "roles").contains(field)) {
          throw new IllegalArgumentException(where + ": unknown field \"" + field + "\"");
        }
      }
      String name = string(doc, "user", where);
      String password = string(doc, "password", where);
      String db = doc.containsKey("db") ? string(doc, "db", where) : "admin";
      if (name == null || password == null || db.isEmpty()) {
        throw new IllegalArgumentException(where + ": needs a non-empty \"user\" and \"password\"");
      }
      if (!users.add(db, name, password, List.of())) {
        throw new IllegalArgumentException(where + ": duplicate user " + name + "@" + db);
      }
    }
    return users;
  }

  private static String string(BsonDocument doc, String field, String where) {
    BsonValue v = doc.get(field);
    if (v == null) {
      return null;
    }
    if (!v.isString()) {
      throw new IllegalArgumentException(where + ": \"" + field + "\" must be a string");
    }
    return v.asString().getValue();
  }
}
