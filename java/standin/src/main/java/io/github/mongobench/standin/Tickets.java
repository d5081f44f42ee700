package io.github.mongobench.standin;

import de.bwaldvogel.mongo.bson.Document;
import java.util.concurrent.Semaphore;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * Admission control in mongod's shape (its execution tickets): at most {@code total} reads and
 * {@code total} writes run at once; the others wait. serverStatus reports the tickets in use
 * ({@code queues.execution.{read,write}.out/available/totalTickets}) and the requests waiting
 * ({@code globalLock.currentQueue}), so a client can see a server that holds it up. Off (every
 * request admitted, nothing reported) unless {@code --tickets N} is given; with {@code
 * --ticket-hold-ms M} each admitted read or write keeps its ticket at least M ms, a server whose
 * capacity is known (the project's tests make a server-bound variant with it).
 */
final class Tickets {

  private final int total;
  private final long holdNanos;
  private final Semaphore reads;
  private final Semaphore writes;
  private final AtomicInteger readersWaiting = new AtomicInteger();
  private final AtomicInteger writersWaiting = new AtomicInteger();

  Tickets(int total, long holdMillis) {
    this.total = total;
    this.holdNanos = holdMillis * 1_000_000L;
    this.reads = new Semaphore(total, true);
    this.writes = new Semaphore(total, true);
  }

  /** Runs {@code body} holding a ticket of {@code kind} (commands need none). */
  void run(OpLatencies.Kind kind, Runnable body) {
    if (kind == OpLatencies.Kind.COMMANDS) {
      body.run();
      return;
    }
    boolean read = kind == OpLatencies.Kind.READS;
    Semaphore tickets = read ? reads : writes;
    AtomicInteger waiting = read ? readersWaiting : writersWaiting;
    waiting.incrementAndGet();
    try {
      tickets.acquireUninterruptibly();
    } finally {
      waiting.decrementAndGet();
    }
    long start = System.nanoTime();
    try {
      body.run();
      long left = holdNanos - (System.nanoTime() - start);
      if (left > 0) {
        try {
          Thread.sleep(left / 1_000_000L, (int) (left % 1_000_000L));
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
        }
      }
    } finally {
      tickets.release();
    }
  }

  /** Adds {@code queues.execution} and {@code globalLock.currentQueue} to {@code status}. */
  void report(Document status) {
    Document execution = new Document();
    execution.put("read", kind(reads));
    execution.put("write", kind(writes));
    status.put("queues", new Document("execution", execution));
    int r = readersWaiting.get();
    int w = writersWaiting.get();
    Document queue = new Document("total", r + w);
    queue.put("readers", r);
    queue.put("writers", w);
    status.put("globalLock", new Document("currentQueue", queue));
  }

  private Document kind(Semaphore tickets) {
    int available = tickets.availablePermits();
    Document d = new Document("out", total - available);
    d.put("available", available);
    d.put("totalTickets", total);
    return d;
  }
}
