package io.github.mongobench.standin;

import de.bwaldvogel.mongo.bson.Document;
import de.bwaldvogel.mongo.wire.bson.BsonDecoder;
import de.bwaldvogel.mongo.wire.bson.BsonEncoder;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.channel.embedded.EmbeddedChannel;
import java.io.BufferedInputStream;
import java.io.BufferedOutputStream;
import java.io.DataInputStream;
import java.io.EOFException;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.List;

/**
 * The stand-in's store as a data file in its dbpath ({@code --dbpath}), so a test bed can copy
 * one instance's data files to others as it would a stopped mongod's.
 *
 * <p>On a clean shutdown (SIGTERM) every collection of every database (except {@code system.*}
 * collections) is written to {@value #FILE}: per collection a header document {@code {"ns":
 * "db.coll", "count": n}} followed by its n documents, all as BSON (first to a temporary file,
 * then renamed, so a killed stand-in leaves the previous file or none). At start the file, if
 * present, is read back before the server listens. Only documents are kept: secondary indexes
 * are not (the {@code _id} index is rebuilt by the inserts).
 */
final class DataFiles {

  static final String FILE = "standin-data.bson";
  private static final int BATCH = 1000;

  private DataFiles() {}

  /** Writes every collection of {@code backend} to {@code dir}/{@value #FILE}; returns documents. */
  static long save(StandinBackend backend, Path dir) throws IOException {
    Files.createDirectories(dir);
    Path tmp = dir.resolve(FILE + ".tmp");
    Channel channel = new EmbeddedChannel();
    long total = 0;
    try (OutputStream out = new BufferedOutputStream(Files.newOutputStream(tmp), 1 << 20)) {
      for (String db : backend.databaseNames()) {
        for (String coll : collectionNames(backend, channel, db)) {
          List<Document> docs = backend.allDocuments(db, coll);
          write(out, new Document("ns", db + "." + coll).append("count", docs.size()));
          for (Document doc : docs) {
            write(out, doc);
          }
          total += docs.size();
        }
      }
    } finally {
      channel.close();
    }
    Files.move(tmp, dir.resolve(FILE), StandardCopyOption.REPLACE_EXISTING,
        StandardCopyOption.ATOMIC_MOVE);
    return total;
  }

  /** Reads {@code dir}/{@value #FILE} into {@code backend} if it exists; returns documents. */
  static long load(StandinBackend backend, Path dir) throws IOException {
    Path file = dir.resolve(FILE);
    if (!Files.exists(file)) {
      return 0;
    }
    Channel channel = new EmbeddedChannel();
    long total = 0;
    try (DataInputStream in =
        new DataInputStream(new BufferedInputStream(Files.newInputStream(file), 1 << 20))) {
      Document header;
      while ((header = read(in, true)) != null) {
        String ns = (String) header.get("ns");
        int count = ((Number) header.get("count")).intValue();
        int dot = ns.indexOf('.');
        String db = ns.substring(0, dot);
        String coll = ns.substring(dot + 1);
        backend.createCollection(channel, db, coll);
        List<Document> batch = new ArrayList<>();
        for (int i = 0; i < count; i++) {
          batch.add(read(in, false));
          if (batch.size() == BATCH || i == count - 1) {
            backend.insertDocuments(channel, db, coll, batch);
            batch = new ArrayList<>();
          }
        }
        total += count;
      }
    } finally {
      channel.close();
    }
    return total;
  }

  private static List<String> collectionNames(StandinBackend backend, Channel channel, String db) {
    List<String> names = new ArrayList<>();
    for (Object o : backend.collectionInfos(channel, db)) {
      String name = (String) ((Document) o).get("name");
      if (name != null && !name.startsWith("system.")) {
        names.add(name);
      }
    }
    return names;
  }

  private static void write(OutputStream out, Document doc) throws IOException {
    ByteBuf buf = Unpooled.buffer();
    try {
      BsonEncoder.encodeDocument(doc, buf);
      buf.readBytes(out, buf.readableBytes());
    } finally {
      buf.release();
    }
  }

  /** The next BSON document, or null at the end of the file when {@code endOk}. */
  private static Document read(InputStream in, boolean endOk) throws IOException {
    byte[] size = new byte[4];
    int got = in.readNBytes(size, 0, 4);
    if (got == 0 && endOk) {
      return null;
    }
    if (got < 4) {
      throw new EOFException(FILE + " ends inside a document");
    }
    int length =
        (size[0] & 0xff) | (size[1] & 0xff) << 8 | (size[2] & 0xff) << 16 | (size[3] & 0xff) << 24;
    if (length < 5) {
      throw new IOException(FILE + " holds a document of " + length + " bytes");
    }
    byte[] bytes = new byte[length];
    System.arraycopy(size, 0, bytes, 0, 4);
    if (in.readNBytes(bytes, 4, length - 4) != length - 4) {
      throw new EOFException(FILE + " ends inside a document");
    }
    ByteBuf buf = Unpooled.wrappedBuffer(bytes);
    try {
      return BsonDecoder.decodeBson(buf);
    } finally {
      buf.release();
    }
  }
}
