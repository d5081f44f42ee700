package io.github.mongobench.ycsb;

import com.mongodb.ConnectionString;
import com.mongodb.MongoClientSettings;
import com.mongodb.client.FindIterable;
import com.mongodb.client.MongoClient;
import com.mongodb.client.MongoClients;
import com.mongodb.client.MongoCollection;
import com.mongodb.client.MongoCursor;
import com.mongodb.client.MongoDatabase;
import com.mongodb.client.model.InsertManyOptions;
import com.mongodb.client.model.ReplaceOneModel;
import com.mongodb.client.model.ReplaceOptions;
import com.mongodb.client.model.WriteModel;
import com.mongodb.client.result.DeleteResult;
import com.mongodb.client.result.UpdateResult;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.Vector;
import java.util.concurrent.atomic.AtomicLong;
import javax.net.ssl.SSLContext;
import org.bson.Document;
import org.bson.types.Binary;
import site.ycsb.ByteArrayByteIterator;
import site.ycsb.ByteIterator;
import site.ycsb.DB;
import site.ycsb.DBException;
import site.ycsb.Status;
import site.ycsb.StringByteIterator;

/**
 * YCSB binding for MongoDB, modelled on the upstream YCSB binding but built on the 5.x driver.
 *
 * <p>Properties: {@code mongodb.url} (default {@value MongoUri#DEFAULT_URL}),
 * {@code mongodb.urlfile} (file holding the URI; wins over mongodb.url), {@code mongodb.upsert}
 * (default false), {@code batchsize} (inserts per insertMany, default 1) and
 * {@code mongodb.tlsCAFile} (a PEM file of CA certificates: TLS on, and only those CAs trusted;
 * host names are still checked). Read preference and write concern come from the URI. One
 * MongoClient, which pools connections, serves all threads.
 */
public class MongoDbClient extends DB {

  private static final Integer INCLUDE = 1;
  private static final ReplaceOptions UPSERT = new ReplaceOptions().upsert(true);
  private static final InsertManyOptions UNORDERED = new InsertManyOptions().ordered(false);
  /** Per-operation errors printed at most, so that a dead server cannot flood stderr. */
  private static final long MAX_ERRORS_PRINTED = 20;

  private static final Object LOCK = new Object();
  private static final AtomicLong ERRORS = new AtomicLong();
  // Guarded by LOCK; read without it only between a thread's init() and cleanup().
  private static int refCount;
  private static MongoClient client;
  private static MongoDatabase database;
  private static MongoUri uri;
  private static int batchSize;
  private static boolean useUpsert;
  /** Set when connecting failed, so the other threads fail at once instead of each timing out. */
  private static String connectError;

  private final List<Document> bulkInserts = new ArrayList<>();
  private String bulkTable;

  @Override
  public void init() throws DBException {
    synchronized (LOCK) {
      if (connectError != null) {
        throw new DBException(connectError);
      }
      if (client == null) {
        try {
          connect(getProperties());
        } catch (DBException e) {
          connectError = e.getMessage();
          throw e;
        }
      }
      refCount++;
    }
  }

  private static void connect(Properties props) throws DBException {
    batchSize = parseBatchSize(props.getProperty("batchsize", "1"));
    useUpsert = Boolean.parseBoolean(props.getProperty("mongodb.upsert", "false"));
    MongoUri candidate = MongoUri.fromProperties(props);
    MongoClient created = null;
    try {
      ConnectionString cs = new ConnectionString(candidate.value());
      String db = cs.getDatabase();
      // Upstream treats "admin" as the auth database only, never as the benchmark database.
      String dbName =
          db == null || db.isEmpty() || "admin".equals(db) ? MongoUri.DEFAULT_DATABASE : db;
      created = MongoClients.create(settings(cs, props));
      MongoDatabase selected = created.getDatabase(dbName);
      // Fail in init, once, rather than on every operation if the server or credentials are wrong.
      selected.runCommand(new Document("ping", 1));
      client = created;
      database = selected;
      uri = candidate;
      System.err.println("mongo client connection created with " + candidate.redacted());
    } catch (RuntimeException e) {
      if (created != null) {
        created.close();
      }
      // The cause is not chained: driver messages are scrubbed here, stack traces would not be.
      throw new DBException("cannot connect to " + candidate.redacted() + ": "
          + candidate.scrub(e.toString()));
    }
  }

  static MongoClientSettings settings(ConnectionString cs, Properties props)
      throws DBException {
    MongoClientSettings.Builder builder = MongoClientSettings.builder().applyConnectionString(cs);
    String caFile = props.getProperty(TlsCaFile.PROPERTY);
    if (caFile != null && !caFile.isBlank()) {
      if (Boolean.FALSE.equals(cs.getSslEnabled())) {
        throw new DBException(
            TlsCaFile.PROPERTY + " is set but the connection string says tls=false");
      }
      SSLContext context = TlsCaFile.sslContext(Path.of(caFile.trim()));
      builder.applyToSslSettings(ssl -> ssl.enabled(true).context(context));
    }
    return builder.build();
  }

  private static int parseBatchSize(String value) throws DBException {
    try {
      int n = Integer.parseInt(value.trim());
      if (n >= 1) {
        return n;
      }
    } catch (NumberFormatException e) {
      // fall through to the error below
    }
    throw new DBException("batchsize must be a positive integer, got '" + value + "'");
  }

  @Override
  public void cleanup() throws DBException {
    try {
      flushInserts();
    } catch (RuntimeException e) {
      throw new DBException("flushing " + bulkInserts.size() + " buffered inserts failed: "
          + uri.scrub(e.toString()));
    } finally {
      synchronized (LOCK) {
        if (--refCount == 0) {
          client.close();
          client = null;
          database = null;
        }
      }
    }
  }

  @Override
  public Status read(String table, String key, Set<String> fields,
      Map<String, ByteIterator> result) {
    try {
      FindIterable<Document> found = database.getCollection(table).find(new Document("_id", key));
      if (fields != null) {
        found.projection(projection(fields));
      }
      Document doc = found.first();
      if (doc == null) {
        return Status.NOT_FOUND;
      }
      fillMap(result, doc);
      return Status.OK;
    } catch (RuntimeException e) {
      return error("read", key, e);
    }
  }

  @Override
  public Status scan(String table, String startkey, int recordcount, Set<String> fields,
      Vector<HashMap<String, ByteIterator>> result) {
    Document query = new Document("_id", new Document("$gte", startkey));
    try {
      FindIterable<Document> found = database.getCollection(table).find(query)
          .sort(new Document("_id", INCLUDE))
          .limit(recordcount);
      if (fields != null) {
        found.projection(projection(fields));
      }
      result.ensureCapacity(recordcount);
      try (MongoCursor<Document> cursor = found.iterator()) {
        // Upstream reports ERROR here; an empty range past the last key is not a failure.
        if (!cursor.hasNext()) {
          return Status.NOT_FOUND;
        }
        while (cursor.hasNext()) {
          HashMap<String, ByteIterator> row = new HashMap<>();
          fillMap(row, cursor.next());
          result.add(row);
        }
      }
      return Status.OK;
    } catch (RuntimeException e) {
      return error("scan", startkey, e);
    }
  }

  @Override
  public Status update(String table, String key, Map<String, ByteIterator> values) {
    try {
      Document set = new Document("$set", withValues(new Document(), values));
      UpdateResult res = database.getCollection(table).updateOne(new Document("_id", key), set);
      return res.wasAcknowledged() && res.getMatchedCount() == 0 ? Status.NOT_FOUND : Status.OK;
    } catch (RuntimeException e) {
      return error("update", key, e);
    }
  }

  @Override
  public Status insert(String table, String key, Map<String, ByteIterator> values) {
    Document doc = withValues(new Document("_id", key), values);
    if (batchSize > 1) {
      return insertBatched(table, doc);
    }
    try {
      MongoCollection<Document> collection = database.getCollection(table);
      if (useUpsert) {
        collection.replaceOne(new Document("_id", key), doc, UPSERT);
      } else {
        collection.insertOne(doc);
      }
      return Status.OK;
    } catch (RuntimeException e) {
      return error("insert", key, e);
    }
  }

  /** Buffers inserts; the one that fills the batch writes it and reports the batch's outcome. */
  private Status insertBatched(String table, Document doc) {
    bulkTable = table;
    bulkInserts.add(doc);
    if (bulkInserts.size() < batchSize) {
      return Status.BATCHED_OK;
    }
    try {
      writeBatch(database.getCollection(table), bulkInserts);
      return Status.OK;
    } catch (RuntimeException e) {
      return error("insert batch ending", String.valueOf(doc.get("_id")), e);
    } finally {
      // As upstream: a failed batch is dropped, not retried with every later insert.
      bulkInserts.clear();
    }
  }

  @Override
  public Status delete(String table, String key) {
    try {
      DeleteResult res = database.getCollection(table).deleteOne(new Document("_id", key));
      return res.wasAcknowledged() && res.getDeletedCount() == 0 ? Status.NOT_FOUND : Status.OK;
    } catch (RuntimeException e) {
      return error("delete", key, e);
    }
  }

  /** Writes this thread's partial batch; YCSB calls cleanup() once per thread. */
  private void flushInserts() {
    if (bulkInserts.isEmpty()) {
      return;
    }
    writeBatch(database.getCollection(bulkTable), bulkInserts);
    bulkInserts.clear();
  }

  private static void writeBatch(MongoCollection<Document> collection, List<Document> docs) {
    if (useUpsert) {
      List<WriteModel<Document>> models = new ArrayList<>(docs.size());
      for (Document doc : docs) {
        models.add(new ReplaceOneModel<>(new Document("_id", doc.get("_id")), doc, UPSERT));
      }
      collection.bulkWrite(models);
    } else {
      collection.insertMany(docs, UNORDERED);
    }
  }

  private static Document projection(Set<String> fields) {
    Document projection = new Document();
    for (String field : fields) {
      projection.put(field, INCLUDE);
    }
    return projection;
  }

  /** Field values are stored as BSON binary, as the upstream binding does. */
  private static Document withValues(Document doc, Map<String, ByteIterator> values) {
    for (Map.Entry<String, ByteIterator> entry : values.entrySet()) {
      doc.put(entry.getKey(), entry.getValue().toArray());
    }
    return doc;
  }

  private static void fillMap(Map<String, ByteIterator> result, Document doc) {
    for (Map.Entry<String, Object> entry : doc.entrySet()) {
      Object value = entry.getValue();
      if (value instanceof Binary binary) {
        result.put(entry.getKey(), new ByteArrayByteIterator(binary.getData()));
      } else if (value instanceof String text && !"_id".equals(entry.getKey())) {
        result.put(entry.getKey(), new StringByteIterator(text));
      }
    }
  }

  private static Status error(String op, String key, RuntimeException e) {
    long n = ERRORS.incrementAndGet();
    if (n <= MAX_ERRORS_PRINTED) {
      String suffix = n == MAX_ERRORS_PRINTED ? " (further errors not printed)" : "";
      System.err.println(op + " " + key + " failed: " + uri.scrub(e.toString()) + suffix);
    }
    return Status.ERROR;
  }
}
