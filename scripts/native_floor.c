/* The native floor under a multiplexed client's cost, for scripts/bench_client.py.

   What any client must pay on this machine, written without Python: how much CPU
   a process spends per operation when it only sends pre-encoded OP_MSG requests
   and reads their replies, one in flight per connection, nothing checked. The
   bench passes it connected, authenticated sockets (it does the handshake), so
   this loop has no protocol of its own beyond the message length.

     native_floor loop N REQS FD...   N requests and their replies over the sockets
                                      FD...; REQS is a file of pre-encoded requests,
                                      sent in turn (round the file if N is larger)
     native_floor wake IDLE_S N       CPU of N wake-ups of a process blocked in
                                      epoll, woken by a byte sent every IDLE_S

   Prints one line: "<us of CPU per reply or wake-up> <replies or wake-ups>", and for a
   loop a third field: the wall time of the replies in us, from the first send to the
   last reply. */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double wall_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static double cpu_s(void) {
  struct rusage r;
  getrusage(RUSAGE_SELF, &r);
  return r.ru_utime.tv_sec + r.ru_utime.tv_usec / 1e6 + r.ru_stime.tv_sec +
         r.ru_stime.tv_usec / 1e6;
}

static int die(const char *what) {
  fprintf(stderr, "native_floor: %s: %s\n", what, strerror(errno));
  return 2;
}

static int32_t le32(const unsigned char *p) {
  return (int32_t)((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
                   (uint32_t)p[3] << 24);
}

struct conn {
  int fd;
  unsigned char *buf;
  size_t cap, got;
};

static unsigned char *reqs;
static size_t *req_at, n_reqs, next_req;
static long sent, to_send;

/* Sends the next request on `c`, if any is left of the N to send. */
static int send_next(struct conn *c) {
  if (sent == to_send) return 0;
  sent++;
  const unsigned char *m = reqs + req_at[next_req];
  size_t len = (size_t)le32(m), off = 0;
  next_req = (next_req + 1) % n_reqs;
  while (off < len) {
    ssize_t k = send(c->fd, m + off, len - off, 0);
    if (k > 0) {
      off += (size_t)k;
    } else if (k < 0 && (errno == EAGAIN || errno == EINTR)) {
      struct pollfd p = {c->fd, POLLOUT, 0};
      poll(&p, 1, 5000);
    } else {
      return -1;
    }
  }
  return 0;
}

static int loop(long n, const char *path, int nfds, char **fds) {
  FILE *f = fopen(path, "rb");
  if (!f) return die(path);
  fseek(f, 0, SEEK_END);
  long size = ftell(f);
  rewind(f);
  reqs = malloc((size_t)size);
  if (!reqs || fread(reqs, 1, (size_t)size, f) != (size_t)size) return die("read requests");
  fclose(f);
  req_at = malloc(sizeof(size_t) * (size_t)size / 16 + 1);
  for (long at = 0; at + 16 <= size && le32(reqs + at) >= 16; at += le32(reqs + at))
    req_at[n_reqs++] = (size_t)at;
  if (!n_reqs) return die("no request in the file");

  int ep = epoll_create1(0);
  struct conn *conns = calloc((size_t)nfds, sizeof *conns);
  for (int i = 0; i < nfds; i++) {
    conns[i].fd = atoi(fds[i]);
    conns[i].cap = 1 << 16;
    conns[i].buf = malloc(conns[i].cap);
    struct epoll_event e = {.events = EPOLLIN, .data.ptr = &conns[i]};
    if (epoll_ctl(ep, EPOLL_CTL_ADD, conns[i].fd, &e)) return die("epoll_ctl");
  }
  to_send = n;
  double c0 = cpu_s(), w0 = wall_s();
  for (int i = 0; i < nfds; i++)
    if (send_next(&conns[i])) return die("send");
  long done = 0;
  struct epoll_event evs[256];
  while (done < n) {
    int k = epoll_wait(ep, evs, 256, 60000);
    if (k <= 0) return die(k ? "epoll_wait" : "no reply in 60 s");
    for (int j = 0; j < k; j++) {
      struct conn *c = evs[j].data.ptr;
      for (;;) {
        ssize_t r = recv(c->fd, c->buf + c->got, c->cap - c->got, 0);
        if (r < 0 && (errno == EAGAIN || errno == EINTR)) break;
        if (r <= 0) return die("recv");
        c->got += (size_t)r;
        size_t want = c->got >= 4 ? (size_t)le32(c->buf) : 0;
        if (want > c->cap) {
          c->cap = want;
          c->buf = realloc(c->buf, c->cap);
        }
        if (want && c->got >= want) {
          c->got = 0;
          done++;
          if (send_next(c)) return die("send");
          break;
        }
      }
    }
  }
  double cpu = cpu_s() - c0, wall = wall_s() - w0;
  printf("%.3f %ld %.1f\n", cpu * 1e6 / (double)done, done, wall * 1e6);
  return 0;
}

static int wake(double idle_s, long n) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv)) return die("socketpair");
  pid_t pid = fork();
  if (pid == 0) {
    close(sv[0]);
    struct timespec ts = {(time_t)idle_s, (long)((idle_s - (time_t)idle_s) * 1e9)};
    for (long i = 0; i < n; i++) {
      nanosleep(&ts, NULL);
      if (write(sv[1], "x", 1) != 1) _exit(1);
    }
    _exit(0);
  }
  close(sv[1]);
  int ep = epoll_create1(0);
  struct epoll_event e = {.events = EPOLLIN, .data.fd = sv[0]}, ev;
  epoll_ctl(ep, EPOLL_CTL_ADD, sv[0], &e);
  char b[64];
  long got = 0;
  double c0 = cpu_s();
  while (got < n && epoll_wait(ep, &ev, 1, 5000) > 0) {
    ssize_t r = read(sv[0], b, sizeof b);
    if (r <= 0) break;
    got += r;
  }
  double used = cpu_s() - c0;
  waitpid(pid, NULL, 0);
  printf("%.3f %ld\n", used * 1e6 / (double)(got ? got : 1), got);
  return 0;
}

int main(int argc, char **argv) {
  if (argc >= 5 && !strcmp(argv[1], "loop")) return loop(atol(argv[2]), argv[3], argc - 4, argv + 4);
  if (argc == 4 && !strcmp(argv[1], "wake")) return wake(atof(argv[2]), atol(argv[3]));
  fprintf(stderr, "usage: native_floor loop N REQS FD... | native_floor wake IDLE_S N\n");
  return 2;
}
