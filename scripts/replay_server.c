/* A replay server for scripts/bench_client.py --replay: the client's own cost at saturation.

   It answers each request with the reply a real server (the stand-in) gave to it when
   the bench recorded the variant (scripts/replay.py records through a proxy), so the
   server's own work is a table look-up and a copy: on its own core it is never the limit,
   and the client on the other cores is measured alone.

     replay_server PAIRS [CPU]   PAIRS: a file of recorded messages, request then reply,
                                 each whole (by its length prefix); CPU: the core to pin
                                 this process to (sched_setaffinity)

   It listens on 127.0.0.1 on a free port and prints "<port>" on stdout once ready. Each
   request is looked up:
     1. by its whole content after the header (the same request recorded): the replies
        recorded for it, in turn (round the list when the client sends it more often);
     2. else by its shape (the command's first field name, and its value when a string:
        "find" on "usertable"): the replies recorded for that shape, in turn;
     3. else an error reply (ok: 0, "replay: nothing recorded for this request").
   A reply goes out with its responseTo patched to the request's id and its own id
   counted; a connection's replies go out in the order of its requests. An OP_MSG with
   moreToCome gets no reply. On SIGTERM (or when its parent dies) it prints
   "<requests> <exact> <by shape> <missed>" on stdout and exits; the first few requests
   missed are named on stderr. */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#define OP_QUERY 2004
#define OP_MSG 2013

static int die(const char *what) {
  fprintf(stderr, "replay_server: %s: %s\n", what, strerror(errno));
  exit(2);
}

static uint32_t le32(const unsigned char *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void put32(unsigned char *p, uint32_t v) {
  p[0] = (unsigned char)v;
  p[1] = (unsigned char)(v >> 8);
  p[2] = (unsigned char)(v >> 16);
  p[3] = (unsigned char)(v >> 24);
}

static uint64_t hash(const unsigned char *p, size_t n) {
  uint64_t h = 0x9E3779B97F4A7C15ull ^ n, w;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    memcpy(&w, p + i, 8);
    h = (h ^ w) * 0xFF51AFD7ED558CCDull;
    h ^= h >> 29;
  }
  for (; i < n; i++) h = (h ^ p[i]) * 0x100000001B3ull;
  return h ^ (h >> 31);
}

/* A table from keys (byte strings) to the replies recorded for them, taken in turn. */
struct slot {
  const unsigned char *key;
  size_t len;
  uint64_t h;
  size_t *replies, n, cap, next;
};
struct table {
  struct slot *s;
  size_t cap;
};

static struct slot *find(struct table *t, const unsigned char *key, size_t len, int add) {
  uint64_t h = hash(key, len);
  for (size_t i = h & (t->cap - 1);; i = (i + 1) & (t->cap - 1)) {
    struct slot *s = &t->s[i];
    if (!s->key) {
      if (!add) return NULL;
      s->key = key, s->len = len, s->h = h;
      return s;
    }
    if (s->h == h && s->len == len && !memcmp(s->key, key, len)) return s;
  }
}

static void add(struct table *t, const unsigned char *key, size_t len, size_t reply) {
  struct slot *s = find(t, key, len, 1);
  if (s->n == s->cap) {
    s->cap = s->cap ? 2 * s->cap : 4;
    s->replies = realloc(s->replies, s->cap * sizeof *s->replies);
    if (!s->replies) die("realloc");
  }
  s->replies[s->n++] = reply;
}

/* The shape of a request, written into `out` (its length, 0 without one): the first
   field's name of the command document, and its value when it is a string. */
static size_t shape(const unsigned char *m, size_t len, unsigned char *out, size_t cap) {
  const unsigned char *doc = NULL, *end = m + len;
  uint32_t op = le32(m + 12);
  if (op == OP_MSG && len > 21) {
    for (const unsigned char *p = m + 20; p + 5 < end;) {
      if (*p == 0) {
        doc = p + 1;
        break;
      }
      p += 1 + le32(p + 1); /* kind 1: a document sequence, sized */
    }
    out[0] = 'M';
  } else if (op == OP_QUERY && len > 20) {
    const unsigned char *p = m + 20;
    while (p < end && *p) p++;
    doc = p + 9; /* the collection's NUL, numberToSkip, numberToReturn */
    out[0] = 'Q';
  }
  if (!doc || doc + 6 > end) return 0;
  const unsigned char *name = doc + 5, *p = name;
  while (p < end && *p) p++;
  size_t n = (size_t)(p - name), at = 1;
  if (p >= end || n + 2 > cap) return 0;
  memcpy(out + at, name, n + 1);
  at += n + 1;
  if (doc[4] == 2 && p + 5 <= end) { /* a string: int32 length (with its NUL), bytes */
    size_t sl = le32(p + 1);
    if (sl > 0 && p + 5 + sl <= end && at + sl <= cap) {
      memcpy(out + at, p + 5, sl);
      at += sl;
    }
  }
  return at;
}

static unsigned char *data;
static size_t *msg_at, n_msgs;
static struct table exact, shapes;
static unsigned char error_reply[128];
static size_t error_len;
static long served, hits, shaped, missed;
static volatile sig_atomic_t stop;

static void on_term(int sig) {
  (void)sig;
  stop = 1;
}

/* An OP_MSG reply {ok: 0.0, errmsg: "...", code: 8} (ids patched when sent). */
static void make_error(void) {
  static const char msg[] = "replay: nothing recorded for this request";
  unsigned char doc[100], *p = doc + 4;
  *p++ = 1, memcpy(p, "ok", 3), p += 3, memset(p, 0, 8), p += 8;
  *p++ = 2, memcpy(p, "errmsg", 7), p += 7, put32(p, sizeof msg), p += 4;
  memcpy(p, msg, sizeof msg), p += sizeof msg;
  *p++ = 16, memcpy(p, "code", 5), p += 5, put32(p, 8), p += 4;
  *p++ = 0;
  put32(doc, (uint32_t)(p - doc));
  size_t dl = (size_t)(p - doc);
  error_len = 16 + 4 + 1 + dl;
  memset(error_reply, 0, 21);
  put32(error_reply, (uint32_t)error_len);
  put32(error_reply + 12, OP_MSG);
  memcpy(error_reply + 21, doc, dl);
}

static void load(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) die(path);
  fseek(f, 0, SEEK_END);
  long size = ftell(f);
  rewind(f);
  data = malloc((size_t)size + 1);
  if (!data || fread(data, 1, (size_t)size, f) != (size_t)size) die("read the recording");
  fclose(f);
  msg_at = malloc(sizeof(size_t) * ((size_t)size / 16 + 1));
  for (long at = 0; at + 16 <= size && le32(data + at) >= 16 && at + le32(data + at) <= size;
       at += le32(data + at))
    msg_at[n_msgs++] = (size_t)at;
  if (n_msgs < 2 || n_msgs % 2) {
    fprintf(stderr, "replay_server: %s: not pairs of whole messages\n", path);
    exit(2);
  }
  size_t pairs = n_msgs / 2, cap = 64;
  while (cap < 4 * pairs) cap <<= 1;
  exact.cap = shapes.cap = cap;
  exact.s = calloc(cap, sizeof *exact.s);
  shapes.s = calloc(cap, sizeof *shapes.s);
  unsigned char *keys = malloc(pairs * 256);
  for (size_t i = 0; i < pairs; i++) {
    const unsigned char *req = data + msg_at[2 * i];
    size_t len = le32(req);
    add(&exact, req + 16, len - 16, 2 * i + 1);
    size_t sl = shape(req, len, keys + 256 * i, 256);
    if (sl) add(&shapes, keys + 256 * i, sl, 2 * i + 1);
  }
}

/* The recorded reply to `req` (NULL: none recorded), counted. */
static const unsigned char *lookup(const unsigned char *req, size_t len) {
  struct slot *s = find(&exact, req + 16, len - 16, 0);
  if (s) {
    hits++;
  } else {
    unsigned char key[256];
    size_t sl = shape(req, len, key, sizeof key);
    s = sl ? find(&shapes, key, sl, 0) : NULL;
    if (!s) return NULL;
    shaped++;
  }
  size_t r = s->replies[s->next];
  s->next = (s->next + 1) % s->n;
  return data + msg_at[r];
}

struct conn {
  int fd;
  unsigned char *in, *out;
  size_t in_cap, in_got, out_cap, out_len, out_sent;
  int want_out; /* registered for EPOLLOUT */
};

static void append(struct conn *c, const unsigned char *m, size_t len) {
  if (c->out_len + len > c->out_cap) {
    while (c->out_len + len > c->out_cap) c->out_cap *= 2;
    c->out = realloc(c->out, c->out_cap);
    if (!c->out) die("realloc");
  }
  memcpy(c->out + c->out_len, m, len);
  c->out_len += len;
}

static uint32_t next_id;

/* Answers every whole request buffered on `c`; 0, or -1 when the connection is done. */
static int answer(struct conn *c) {
  size_t at = 0;
  while (c->in_got - at >= 16) {
    unsigned char *req = c->in + at;
    size_t len = le32(req);
    if (len < 16 || len > (48u << 20)) return -1;
    if (c->in_got - at < len) {
      if (len > c->in_cap) {
        memmove(c->in, req, c->in_got - at);
        c->in_got -= at, at = 0;
        c->in_cap = len;
        c->in = realloc(c->in, c->in_cap);
        if (!c->in) die("realloc");
      }
      break;
    }
    served++;
    int more_to_come = le32(req + 12) == OP_MSG && len >= 20 && (le32(req + 16) & 2);
    const unsigned char *reply = lookup(req, len);
    size_t rl = error_len;
    if (reply) {
      rl = le32(reply);
    } else {
      if (++missed <= 5) { /* what was missed, for the bench's message */
        unsigned char key[256];
        size_t sl = shape(req, len, key, sizeof key);
        fprintf(stderr, "missed: opcode %u, %s\n", le32(req + 12), sl ? (char *)key + 1 : "?");
      }
      reply = error_reply;
    }
    if (!more_to_come) {
      size_t start = c->out_len;
      append(c, reply, rl);
      put32(c->out + start + 4, ++next_id);
      memcpy(c->out + start + 8, req + 4, 4); /* responseTo: the request's id */
    }
    at += len;
  }
  memmove(c->in, c->in + at, c->in_got - at);
  c->in_got -= at;
  return 0;
}

/* Sends what `c` has to send; 1 when some is left (EPOLLOUT), -1 on failure. */
static int flush(struct conn *c) {
  while (c->out_sent < c->out_len) {
    ssize_t k = send(c->fd, c->out + c->out_sent, c->out_len - c->out_sent, MSG_NOSIGNAL);
    if (k > 0) {
      c->out_sent += (size_t)k;
    } else if (k < 0 && (errno == EAGAIN || errno == EINTR)) {
      return 1;
    } else {
      return -1;
    }
  }
  c->out_len = c->out_sent = 0;
  return 0;
}

static void drop(int ep, struct conn *c) {
  epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
  close(c->fd);
  free(c->in);
  free(c->out);
  free(c);
}

int main(int argc, char **argv) {
  if (argc < 2 || argc > 3) {
    fprintf(stderr, "usage: replay_server PAIRS [CPU]\n");
    return 2;
  }
  prctl(PR_SET_PDEATHSIG, SIGTERM);
  signal(SIGTERM, on_term);
  signal(SIGINT, on_term);
  signal(SIGPIPE, SIG_IGN);
  if (argc == 3) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(atoi(argv[2]), &set);
    if (sched_setaffinity(0, sizeof set, &set)) die("sched_setaffinity");
  }
  make_error();
  load(argv[1]);

  int ls = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0), one = 1;
  setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t al = sizeof a;
  if (bind(ls, (struct sockaddr *)&a, sizeof a) || listen(ls, 512)) die("listen");
  getsockname(ls, (struct sockaddr *)&a, &al);
  int ep = epoll_create1(0);
  struct epoll_event e = {.events = EPOLLIN, .data.ptr = NULL};
  epoll_ctl(ep, EPOLL_CTL_ADD, ls, &e);
  printf("%d\n", ntohs(a.sin_port));
  fflush(stdout);

  struct epoll_event evs[256];
  while (!stop) {
    int k = epoll_wait(ep, evs, 256, 1000);
    if (k < 0 && errno != EINTR) die("epoll_wait");
    for (int j = 0; j < k; j++) {
      struct conn *c = evs[j].data.ptr;
      if (!c) { /* the listener */
        int fd;
        while ((fd = accept4(ls, NULL, NULL, SOCK_NONBLOCK)) >= 0) {
          setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
          c = calloc(1, sizeof *c);
          c->fd = fd;
          c->in_cap = c->out_cap = 1 << 16;
          c->in = malloc(c->in_cap);
          c->out = malloc(c->out_cap);
          struct epoll_event ce = {.events = EPOLLIN, .data.ptr = c};
          epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ce);
        }
        continue;
      }
      int bad = 0;
      if (evs[j].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
        for (;;) {
          ssize_t r = recv(c->fd, c->in + c->in_got, c->in_cap - c->in_got, 0);
          if (r < 0 && (errno == EAGAIN || errno == EINTR)) break;
          if (r <= 0) {
            bad = 1;
            break;
          }
          c->in_got += (size_t)r;
          if (answer(c)) {
            bad = 1;
            break;
          }
          if ((size_t)r < 4096) break; /* most likely all there was: saves a recv */
        }
      }
      int left = bad ? -1 : flush(c);
      if (left < 0) {
        drop(ep, c);
        continue;
      }
      if (left != c->want_out) {
        c->want_out = left;
        struct epoll_event ce = {.events = EPOLLIN | (left ? EPOLLOUT : 0), .data.ptr = c};
        epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ce);
      }
    }
  }
  printf("%ld %ld %ld %ld\n", served, hits, shaped, missed);
  return 0;
}
