package io.github.mongobench.standin;

import de.bwaldvogel.mongo.bson.Document;
import java.util.List;
import java.util.Locale;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.LongAdder;

/**
 * serverStatus.opLatencies in mongod's shape: per kind of operation, the total time the server
 * spent on them ({@code latency}, microseconds) and how many there were ({@code ops}), both
 * NumberLong. Kinds as mongod classifies commands:
 *
 * <ul>
 *   <li>reads: find, getMore, count, distinct, aggregate without a $out/$merge stage; also
 *       legacy OP_QUERY reads;
 *   <li>writes: insert, update, delete, findAndModify, and aggregate with $out/$merge (it writes);
 *   <li>commands: everything else, handshakes (hello/isMaster) and serverStatus included;
 *   <li>transactions: always zero, the stand-in has no transactions.
 * </ul>
 */
final class OpLatencies {

  enum Kind {
    READS("reads"),
    WRITES("writes"),
    COMMANDS("commands"),
    TRANSACTIONS("transactions");

    final String field;

    Kind(String field) {
      this.field = field;
    }
  }

  private static final Set<String> READS = Set.of("find", "getmore", "count", "distinct");
  private static final Set<String> WRITES = Set.of("insert", "update", "delete", "findandmodify");

  private final LongAdder[] nanos = new LongAdder[Kind.values().length];
  private final LongAdder[] ops = new LongAdder[Kind.values().length];

  OpLatencies() {
    for (int i = 0; i < nanos.length; i++) {
      nanos[i] = new LongAdder();
      ops[i] = new LongAdder();
    }
  }

  /** The kind of a command, {@code body} being the command document (first key: its name). */
  static Kind classify(String command, Document body) {
    String cmd = command.toLowerCase(Locale.ROOT);
    if (READS.contains(cmd)) {
      return Kind.READS;
    }
    if (WRITES.contains(cmd)) {
      return Kind.WRITES;
    }
    if (cmd.equals("aggregate")) {
      return writesOutput(body.get("pipeline")) ? Kind.WRITES : Kind.READS;
    }
    return Kind.COMMANDS;
  }

  private static boolean writesOutput(Object pipeline) {
    if (pipeline instanceof List<?> stages && !stages.isEmpty()) {
      Object last = stages.get(stages.size() - 1);
      return last instanceof Document d && (d.containsKey("$out") || d.containsKey("$merge"));
    }
    return false;
  }

  void record(Kind kind, long elapsedNanos) {
    nanos[kind.ordinal()].add(elapsedNanos);
    ops[kind.ordinal()].increment();
  }

  /** The serverStatus field's value. */
  Document toDocument() {
    Document doc = new Document();
    for (Kind kind : Kind.values()) {
      // ops first: record() adds the time first, so no counted op lacks its time.
      long count = ops[kind.ordinal()].sum();
      long latency = TimeUnit.NANOSECONDS.toMicros(nanos[kind.ordinal()].sum());
      doc.put(kind.field, new Document("latency", latency).append("ops", count));
    }
    return doc;
  }
}
