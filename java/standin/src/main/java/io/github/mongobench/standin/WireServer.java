package io.github.mongobench.standin;

import de.bwaldvogel.mongo.MongoThreadFactory;
import de.bwaldvogel.mongo.bson.Document;
import de.bwaldvogel.mongo.exception.MongoServerException;
import de.bwaldvogel.mongo.wire.MongoDatabaseHandler;
import de.bwaldvogel.mongo.wire.MongoExceptionHandler;
import de.bwaldvogel.mongo.wire.MongoWireMessageEncoder;
import de.bwaldvogel.mongo.wire.MongoWireProtocolHandler;
import de.bwaldvogel.mongo.wire.MongoWireReplyEncoder;
import de.bwaldvogel.mongo.wire.message.ClientRequest;
import de.bwaldvogel.mongo.wire.message.MongoMessage;
import de.bwaldvogel.mongo.wire.message.MongoQuery;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.buffer.ByteBuf;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.group.ChannelGroup;
import io.netty.channel.group.DefaultChannelGroup;
import io.netty.channel.nio.NioIoHandler;
import io.netty.channel.socket.SocketChannel;
import io.netty.channel.socket.nio.NioServerSocketChannel;
import io.netty.handler.ssl.SslContext;
import java.net.InetSocketAddress;
import java.nio.file.Path;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The network side of the stand-in: mongo-java-server's {@code MongoServer} pipeline (same
 * encoders, decoder and backend handler) with two additions it lacks.
 *
 * <ul>
 *   <li>OP_MSG with the moreToCome flag, which drivers send for unacknowledged (w:0) writes: the
 *       library's decoder refuses any flag but checksumPresent and closes the connection. Here the
 *       message is executed and, as the wire protocol says, not answered. Like mongod, a
 *       NotWritablePrimary failure closes the connection (the driver then rediscovers the
 *       primary); other failures are dropped, the client asked for no answer.
 *   <li>Timing of every request from its decoding to its reply written, for serverStatus's
 *       opLatencies ({@link OpLatencies}).
 *   <li>Optional admission control ({@link Tickets}, {@code --tickets}). A request waiting for a
 *       ticket, or holding one, blocks its thread; mongod runs a thread per connection, so there
 *       it blocks its own connection only. Here, with tickets, each connection's requests run on
 *       a thread of its own, in order: on netty's few event-loop threads, a connection sharing
 *       one with a blocked request waited, and a serverStatus was answered only when its thread
 *       had released its ticket (it read no ticket in use about half the time, with 8 clients
 *       holding the only one).
 * </ul>
 */
final class WireServer {

  private static final Logger log = LoggerFactory.getLogger(WireServer.class);

  private static final int OP_MSG = 2013;
  private static final int MORE_TO_COME = 1 << 1;
  private static final int NOT_WRITABLE_PRIMARY = 10107;

  private final StandinBackend backend;
  private volatile Path dataPath;
  private final SslContext ssl;
  private EventLoopGroup bossGroup;
  private EventLoopGroup workerGroup;
  private ChannelGroup clients;
  private Channel listener;

  /**
   * @param ssl serve TLS only with this context, or null for plain TCP
   */
  WireServer(StandinBackend backend, SslContext ssl) {
    this.backend = backend;
    this.ssl = ssl;
  }

  /** Binds and starts serving; returns the bound port. Netty's errors propagate (unchecked). */
  int bind(String host, int port) {
    bossGroup =
        new MultiThreadIoEventLoopGroup(
            0, new MongoThreadFactory("mongo-server-boss"), NioIoHandler.newFactory());
    workerGroup =
        new MultiThreadIoEventLoopGroup(
            0, new MongoThreadFactory("mongo-server-worker"), NioIoHandler.newFactory());
    clients = new DefaultChannelGroup("mongodb-channels", workerGroup.next());
    backend.clients(clients);
    try {
      listener =
          new ServerBootstrap()
              .group(bossGroup, workerGroup)
              .channel(NioServerSocketChannel.class)
              .option(ChannelOption.SO_BACKLOG, 100)
              .localAddress(new InetSocketAddress(host, port))
              .childOption(ChannelOption.TCP_NODELAY, Boolean.TRUE)
              .childHandler(
                  new ChannelInitializer<SocketChannel>() {
                    @Override
                    public void initChannel(SocketChannel ch) {
                      if (ssl != null) {
                        ch.pipeline().addLast(ssl.newHandler(ch.alloc()));
                      }
                      ch.pipeline().addLast(new MongoWireReplyEncoder());
                      ch.pipeline().addLast(new MongoWireMessageEncoder());
                      ch.pipeline().addLast(new Decoder());
                      ch.pipeline().addLast(new Handler(backend, clients));
                      ch.pipeline().addLast(new MongoExceptionHandler());
                    }
                  })
              .bind()
              .syncUninterruptibly()
              .channel();
    } catch (RuntimeException e) {
      shutdownNow();
      throw e;
    }
    return ((InetSocketAddress) listener.localAddress()).getPort();
  }

  /** Closes the listener and every client connection, stops the threads, drops the data. */
  void shutdownNow() {
    if (listener != null) {
      listener.close().syncUninterruptibly();
      listener = null;
    }
    if (clients != null) {
      clients.close().syncUninterruptibly();
    }
    for (EventLoopGroup group : new EventLoopGroup[] {bossGroup, workerGroup}) {
      if (group != null) {
        group.shutdownGracefully(0, 5, TimeUnit.SECONDS).syncUninterruptibly();
      }
    }
    if (dataPath != null) {
      try {
        long saved = DataFiles.save(backend, dataPath);
        System.err.println("saved " + saved + " documents to " + dataPath);
      } catch (Exception e) {
        System.err.println("cannot write the data file in " + dataPath + ": " + e);
      }
      dataPath = null;
    }
    backend.close();
  }

  /** Where shutdownNow writes the store (DataFiles), or null: nowhere. */
  void dataPath(Path dir) {
    dataPath = dir;
  }

  /** An OP_MSG sent with moreToCome: executed, never answered. */
  static final class Unacknowledged extends MongoMessage {
    Unacknowledged(MongoMessage message) {
      super(message.getChannel(), message.getHeader(), message.getDocument());
    }
  }

  /**
   * The library's decoder, shown moreToCome messages with that flag cleared (on a copy of the
   * frame: the receive buffer is not ours to change); their result is marked {@link
   * Unacknowledged}.
   */
  static final class Decoder extends MongoWireProtocolHandler {
    @Override
    protected ClientRequest decode(ChannelHandlerContext ctx, ByteBuf in) throws Exception {
      int start = in.readerIndex();
      // Header: messageLength, requestID, responseTo, opCode; then OP_MSG's flagBits.
      if (in.readableBytes() < 20
          || in.getIntLE(start + 12) != OP_MSG
          || (in.getIntLE(start + 16) & MORE_TO_COME) == 0) {
        return super.decode(ctx, in);
      }
      int length = in.getIntLE(start);
      if (length < 20 || length > MAX_MESSAGE_SIZE_BYTES) {
        return super.decode(ctx, in); // its size checks and errors
      }
      if (in.readableBytes() < length) {
        return null; // wait for the whole message
      }
      ByteBuf frame = in.copy(start, length);
      try {
        frame.setIntLE(16, frame.getIntLE(16) & ~MORE_TO_COME);
        ClientRequest request = super.decode(ctx, frame);
        in.skipBytes(length);
        return new Unacknowledged((MongoMessage) request);
      } finally {
        frame.release();
      }
    }
  }

  /** The library's handler, timed, and silent for unacknowledged messages. */
  static final class Handler extends MongoDatabaseHandler {
    private final StandinBackend backend;
    private ExecutorService connectionThread; // with tickets: this connection's requests, in order

    Handler(StandinBackend backend, ChannelGroup clients) {
      super(backend, clients);
      this.backend = backend;
    }

    @Override
    protected void channelRead0(ChannelHandlerContext ctx, ClientRequest request) {
      if (backend.tickets() == null) {
        handle(ctx, request);
        return;
      }
      if (connectionThread == null) {
        connectionThread =
            Executors.newSingleThreadExecutor(
                runnable -> {
                  Thread t = new Thread(runnable, "standin-connection");
                  t.setDaemon(true);
                  return t;
                });
      }
      connectionThread.execute(
          () -> {
            try {
              handle(ctx, request);
            } catch (RuntimeException e) {
              ctx.fireExceptionCaught(e); // as a failure on the event loop: the exception handler
            }
          });
    }

    @Override
    public void channelInactive(ChannelHandlerContext ctx) throws Exception {
      if (connectionThread != null) {
        connectionThread.shutdown(); // its queued requests still run; then the thread ends
      }
      super.channelInactive(ctx);
    }

    private void handle(ChannelHandlerContext ctx, ClientRequest request) {
      long start = System.nanoTime();
      OpLatencies.Kind kind = kind(request);
      try {
        Tickets tickets = backend.tickets();
        if (tickets == null) {
          execute(ctx, request);
        } else {
          tickets.run(kind, () -> execute(ctx, request));
        }
      } finally {
        backend.opLatencies().record(kind, System.nanoTime() - start);
      }
    }

    private void execute(ChannelHandlerContext ctx, ClientRequest request) {
      if (request instanceof Unacknowledged message) {
        executeUnacknowledged(ctx, message);
      } else {
        super.channelRead0(ctx, request); // executes and writes the reply
      }
    }

    private void executeUnacknowledged(ChannelHandlerContext ctx, Unacknowledged message) {
      Document reply;
      try {
        reply = backend.handleMessage(message);
      } catch (MongoServerException e) {
        log.debug("unacknowledged request failed: {}", e.getMessageWithoutErrorCode());
        return;
      } catch (RuntimeException e) {
        log.warn("unacknowledged request failed", e);
        return;
      }
      if (reply != null && reply.get("code") instanceof Number code) {
        if (code.intValue() == NOT_WRITABLE_PRIMARY) {
          ctx.close();
        }
      }
    }

    private static OpLatencies.Kind kind(ClientRequest request) {
      Document body;
      if (request instanceof MongoMessage message) {
        body = message.getDocument();
      } else if (request instanceof MongoQuery query) {
        if (!query.getCollectionName().startsWith("$cmd")) {
          return OpLatencies.Kind.READS; // a legacy OP_QUERY read
        }
        body = query.getQuery();
        if (body.get("$query") instanceof Document wrapped) {
          body = wrapped;
        }
      } else {
        return OpLatencies.Kind.COMMANDS;
      }
      if (body == null || body.isEmpty()) {
        return OpLatencies.Kind.COMMANDS;
      }
      return OpLatencies.classify(body.keySet().iterator().next(), body);
    }
  }
}
