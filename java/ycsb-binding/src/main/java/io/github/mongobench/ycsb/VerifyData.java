package io.github.mongobench.ycsb;

import com.mongodb.ConnectionString;
import com.mongodb.client.MongoClient;
import com.mongodb.client.MongoClients;
import com.mongodb.client.MongoCollection;
import com.mongodb.client.model.Filters;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import org.bson.RawBsonDocument;
import site.ycsb.DBException;
import site.ycsb.Utils;

/**
 * Fingerprint of the YCSB data of instances: record count and a SHA-256 over sampled records.
 *
 * <p>Usage: {@code VerifyData FILE...}, each FILE a YCSB property file naming one instance
 * ({@code mongodb.url} or {@code mongodb.urlfile}, {@code mongodb.tlsCAFile}, {@code table},
 * {@code insertstart}, {@code insertcount}, {@code zeropadding}, {@code insertorder}) and {@code
 * mongobench.verify.samples} (default 64). The sampled keys are spread evenly over the key range
 * and named as YCSB's CoreWorkload names them (FNV hash unless insertorder=ordered, "user" prefix,
 * zero padding). For each file one line on stdout:
 *
 * <pre>VERIFY FILE records=N sampled=K found=F sha256=HEX</pre>
 *
 * <p>The digest covers each sampled key and the raw BSON of its document (or a marker when it is
 * missing), in key order: two instances with the same data give the same line. Exit status 1 with
 * a message on stderr when an instance cannot be read.
 */
public final class VerifyData {

  static final String SAMPLES_PROPERTY = "mongobench.verify.samples";

  private VerifyData() {}

  /** The sampled key names of {@code props}' key range, as YCSB names its records. */
  static List<String> sampleKeys(Properties props) {
    long start = Long.parseLong(props.getProperty("insertstart", "0").trim());
    long count =
        Long.parseLong(
            props.getProperty("insertcount", props.getProperty("recordcount", "0")).trim());
    int samples = Integer.parseInt(props.getProperty(SAMPLES_PROPERTY, "64").trim());
    int zeropadding = Integer.parseInt(props.getProperty("zeropadding", "1").trim());
    boolean ordered = "ordered".equals(props.getProperty("insertorder", "hashed").trim());
    Set<String> keys = new LinkedHashSet<>();
    for (int i = 0; i < samples && count > 0; i++) {
      long keynum = start + (long) ((double) i * count / samples);
      keys.add(keyName(ordered ? keynum : Utils.hash(keynum), zeropadding));
    }
    return new ArrayList<>(keys);
  }

  // site.ycsb.workloads.CoreWorkload.buildKeyName of YCSB 0.17 (protected there).
  static String keyName(long keynum, int zeropadding) {
    String value = Long.toString(keynum);
    StringBuilder key = new StringBuilder("user");
    for (int i = value.length(); i < zeropadding; i++) {
      key.append('0');
    }
    return key.append(value).toString();
  }

  static String verify(Properties props) throws DBException {
    MongoUri uri = MongoUri.fromProperties(props);
    ConnectionString cs = new ConnectionString(uri.value());
    String db = cs.getDatabase();
    String dbName =
        db == null || db.isEmpty() || "admin".equals(db) ? MongoUri.DEFAULT_DATABASE : db;
    List<String> keys = sampleKeys(props);
    try (MongoClient client = MongoClients.create(MongoDbClient.settings(cs, props))) {
      MongoCollection<RawBsonDocument> coll =
          client
              .getDatabase(dbName)
              .getCollection(props.getProperty("table", "usertable"), RawBsonDocument.class);
      long records = coll.estimatedDocumentCount();
      Map<String, byte[]> found = new HashMap<>();
      for (RawBsonDocument doc : coll.find(Filters.in("_id", keys))) {
        byte[] bytes = new byte[doc.getByteBuffer().remaining()];
        doc.getByteBuffer().get(bytes);
        found.put(doc.getString("_id").getValue(), bytes);
      }
      MessageDigest sha = MessageDigest.getInstance("SHA-256");
      for (String key : keys) {
        sha.update(key.getBytes(StandardCharsets.UTF_8));
        sha.update((byte) 0);
        byte[] bytes = found.get(key);
        sha.update(bytes == null ? "MISSING".getBytes(StandardCharsets.UTF_8) : bytes);
      }
      return String.format(
          "records=%d sampled=%d found=%d sha256=%s",
          records, keys.size(), found.size(), HexFormat.of().formatHex(sha.digest()));
    } catch (NoSuchAlgorithmException e) {
      throw new DBException("no SHA-256: " + e);
    } catch (RuntimeException e) {
      throw new DBException("cannot read " + uri.redacted() + ": " + uri.scrub(e.toString()));
    }
  }

  public static void main(String[] args) {
    if (args.length == 0) {
      System.err.println("usage: VerifyData PROPERTY_FILE...");
      System.exit(64);
    }
    int status = 0;
    for (String file : args) {
      Properties props = new Properties();
      try (InputStream in = Files.newInputStream(Path.of(file))) {
        props.load(in);
        System.out.println("VERIFY " + file + " " + verify(props));
      } catch (IOException | DBException | RuntimeException e) {
        System.err.println("VerifyData " + file + ": " + e.getMessage());
        status = 1;
      }
    }
    System.out.flush();
    System.exit(status);
  }
}
