package io.github.mongobench.ycsb;

import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.Properties;
import site.ycsb.WorkloadException;
import site.ycsb.workloads.CoreWorkload;

/**
 * YCSB's CoreWorkload that ends its run early, as its {@code maxexecutiontime} does, once the
 * file named by {@value #PROPERTY} exists: a daemon thread looks for it every 200 ms and then
 * calls {@link #requestStop()}. The client threads finish their operation in progress and the
 * Client exports its summary and histograms as at the end of a full run (a SIGTERM would lose
 * them: YCSB 0.17 has no shutdown hook). The stress steps' steady-state stop creates the file.
 */
public class StoppableCoreWorkload extends CoreWorkload {

  public static final String PROPERTY = "mongobench.stopfile";
  static final long POLL_MS = 200;

  @Override
  public void init(Properties p) throws WorkloadException {
    super.init(p);
    String name = p.getProperty(PROPERTY, "");
    if (name.isEmpty()) {
      return;
    }
    Path stop = Paths.get(name);
    Thread watcher = new Thread(() -> {
      while (!isStopRequested()) {
        if (Files.exists(stop)) {
          System.err.println("mongobench: stop file " + stop + " found, ending the run");
          requestStop();
          return;
        }
        try {
          Thread.sleep(POLL_MS);
        } catch (InterruptedException e) {
          return;
        }
      }
    }, "mongobench-stopfile");
    watcher.setDaemon(true);
    watcher.start();
  }
}
