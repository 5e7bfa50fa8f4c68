/* attnext_node.c -- build/attnext-node: a dqlite node (Raft-replicated SQLite) with the attnext
 * extension registered on every connection it opens, so that the model store (attn_models and
 * its log) is replicated to every node and any node that becomes leader serves predictions.
 *
 *   build/attnext-node --id 1 --address 127.0.0.1:9001 --dir /tmp/n1 &              # bootstraps
 *   build/attnext-node --id 2 --address 127.0.0.1:9002 --dir /tmp/n2 --join 127.0.0.1:9001 &
 *   build/attnext-node --id 3 --address 127.0.0.1:9003 --dir /tmp/n3 --join 127.0.0.1:9001 &
 *   dqlite -s 127.0.0.1:9001 news "SELECT attn_predict('news', 'Final tennis tournament')"
 *
 * Node 1 with an empty --dir bootstraps a one-node cluster (dqlite bootstraps only the node
 * whose id is 1). Any other node needs --join the first time: once its own server runs, it asks
 * the leader (found through the --join address) to ADD it and to ASSIGN it the voter role, with
 * the dqlite wire protocol (dqlite 1.11 has no client in its C API). A node restarted with the
 * same --dir already belongs to the cluster and needs no --join (given anyway, it is ignored).
 * SIGTERM or SIGINT stops the node (dqlite_node_stop); it logs to stderr.
 *
 * Why the extension is linked in and not loaded: dqlite opens its connections itself, on its
 * own thread, so the extension must be registered process-wide before the node starts
 * (sqlite3_auto_extension); linking attnext's objects makes the binary self-contained (no
 * attnext.so to find at run time, no dlopen of a file an attacker could replace).
 *
 * The rules a client must follow for training and imports to be replicated are in README.md
 * ("Scaling out"): a statement that saves a model must commit inside a statement that dqlite
 * runs as EXEC, or inside an explicit transaction (BEGIN ... COMMIT) as the go-dqlite shell does.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <dqlite.h>
#include <sqlite3.h>

int sqlite3_attnext_init(sqlite3 *db, char **pzErrMsg, const sqlite3_api_routines *pApi);

/* The wire protocol (dqlite's src/protocol.h, version 1). */
#define WIRE_PROTOCOL_VERSION 1
#define WIRE_REQUEST_LEADER 0
#define WIRE_REQUEST_ADD 12
#define WIRE_REQUEST_ASSIGN 13
#define WIRE_RESPONSE_FAILURE 0
#define WIRE_RESPONSE_SERVER 1
#define WIRE_RESPONSE_EMPTY 8
#define WIRE_ROLE_VOTER 0

#define JOIN_TIMEOUT_S 60 /* how long a joining node keeps trying to reach a leader */

static unsigned long long node_id;

static void node_log(const char *fmt, ...) {
  char stamp[32];
  struct timeval tv;
  struct tm tm;
  gettimeofday(&tv, NULL);
  gmtime_r(&tv.tv_sec, &tm);
  strftime(stamp, sizeof stamp, "%H:%M:%S", &tm);
  fprintf(stderr, "%s.%03ld attnext-node %llu: ", stamp, (long)(tv.tv_usec / 1000), node_id);
  va_list ap;
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
}

static void usage(void) {
  fprintf(stderr,
          "usage: attnext-node --id N --address HOST:PORT --dir DIR [--join HOST:PORT]\n"
          "                    [--latency-ms MS]\n"
          "  --id N          this node's Raft id (1 bootstraps a new cluster)\n"
          "  --address A     the address it serves and other nodes reach it at\n"
          "  --dir DIR       its data directory (created if missing; keep it to restart)\n"
          "  --join A        any node of the cluster: ask the leader to add this node as a voter\n"
          "  --latency-ms MS network latency hint: heartbeat 1.5x, election timeout 15x\n"
          "                  (dqlite's default: heartbeat 500 ms, election 3000 ms)\n");
}

/* ------------------------------------------------------------------ the wire protocol client */

struct wire {
  int fd;
  char err[256];
};

static int wire_write_all(struct wire *w, const void *buf, size_t n) {
  const char *p = buf;
  while (n > 0) {
    ssize_t k = write(w->fd, p, n);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) {
      snprintf(w->err, sizeof w->err, "write: %s", strerror(errno));
      return -1;
    }
    p += k;
    n -= (size_t)k;
  }
  return 0;
}

static int wire_read_all(struct wire *w, void *buf, size_t n) {
  char *p = buf;
  while (n > 0) {
    ssize_t k = read(w->fd, p, n);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) {
      snprintf(w->err, sizeof w->err, "read: %s", k == 0 ? "connection closed" : strerror(errno));
      return -1;
    }
    p += k;
    n -= (size_t)k;
  }
  return 0;
}

static void put_u64(unsigned char *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t get_u64(const unsigned char *p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
  return v;
}

/* Connect to HOST:PORT (TCP) and send the protocol version. */
static int wire_connect(struct wire *w, const char *address) {
  char host[256];
  const char *colon = strrchr(address, ':');
  struct addrinfo hints = {0}, *res = NULL;
  unsigned char version[8];
  w->fd = -1;
  if (!colon || colon == address || (size_t)(colon - address) >= sizeof host) {
    snprintf(w->err, sizeof w->err, "bad address \"%s\" (expected HOST:PORT)", address);
    return -1;
  }
  memcpy(host, address, (size_t)(colon - address));
  host[colon - address] = 0;
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  int rc = getaddrinfo(host, colon + 1, &hints, &res);
  if (rc != 0) {
    snprintf(w->err, sizeof w->err, "%s: %s", address, gai_strerror(rc));
    return -1;
  }
  w->fd = socket(res->ai_family, res->ai_socktype, res->ai_protocol);
  if (w->fd < 0 || connect(w->fd, res->ai_addr, res->ai_addrlen) != 0) {
    snprintf(w->err, sizeof w->err, "connect to %s: %s", address, strerror(errno));
    if (w->fd >= 0) close(w->fd);
    w->fd = -1;
    freeaddrinfo(res);
    return -1;
  }
  freeaddrinfo(res);
  struct timeval tv = {.tv_sec = 120}; /* ASSIGN waits for the new node to catch up */
  setsockopt(w->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  put_u64(version, WIRE_PROTOCOL_VERSION);
  return wire_write_all(w, version, sizeof version);
}

static void wire_close(struct wire *w) {
  if (w->fd >= 0) close(w->fd);
  w->fd = -1;
}

/* One request: header (body size in 8-byte words, type, schema 0, 2 unused bytes), body padded
 * to 8 bytes. Then one response; its body is returned in *body (malloc'd), its type in *type. */
static int wire_roundtrip(struct wire *w, int req_type, const unsigned char *body, size_t len,
                          int *type, unsigned char **out, size_t *out_len) {
  unsigned char header[8] = {0};
  uint32_t words = (uint32_t)(len / 8);
  for (int i = 0; i < 4; i++) header[i] = (unsigned char)(words >> (8 * i));
  header[4] = (unsigned char)req_type;
  if (wire_write_all(w, header, 8) != 0 || wire_write_all(w, body, len) != 0) return -1;
  if (wire_read_all(w, header, 8) != 0) return -1;
  words = (uint32_t)header[0] | (uint32_t)header[1] << 8 | (uint32_t)header[2] << 16 |
          (uint32_t)header[3] << 24;
  *type = header[4];
  *out_len = (size_t)words * 8;
  if (*out_len > (1u << 20)) {
    snprintf(w->err, sizeof w->err, "response of %zu bytes: not a dqlite node?", *out_len);
    return -1;
  }
  *out = calloc(1, *out_len + 1);
  if (!*out) {
    snprintf(w->err, sizeof w->err, "out of memory");
    return -1;
  }
  if (wire_read_all(w, *out, *out_len) != 0) {
    free(*out);
    *out = NULL;
    return -1;
  }
  return 0;
}

/* A body of one uint64 and an optional text (NUL-terminated, padded to 8 bytes). */
static size_t wire_body(unsigned char *buf, size_t cap, uint64_t a, const char *text,
                        int has_b, uint64_t b) {
  size_t n = 8;
  put_u64(buf, a);
  if (text) {
    size_t t = strlen(text) + 1, padded = (t + 7) / 8 * 8;
    if (n + padded + 8 > cap) return 0;
    memset(buf + n, 0, padded);
    memcpy(buf + n, text, t);
    n += padded;
  }
  if (has_b) {
    put_u64(buf + n, b);
    n += 8;
  }
  return n;
}

/* Send a request and expect `want`; a FAILURE is turned into its message. Returns 0 on the
 * wanted response, 1 on FAILURE (message in w->err), -1 on a transport error. */
static int wire_request(struct wire *w, int req_type, const unsigned char *body, size_t len,
                        int want, unsigned char **out, size_t *out_len) {
  int type;
  if (wire_roundtrip(w, req_type, body, len, &type, out, out_len) != 0) return -1;
  if (type == want) return 0;
  if (type == WIRE_RESPONSE_FAILURE && *out_len >= 8) {
    snprintf(w->err, sizeof w->err, "%s (code %llu)", (char *)*out + 8,
             (unsigned long long)get_u64(*out));
  } else {
    snprintf(w->err, sizeof w->err, "unexpected response type %d", type);
  }
  free(*out);
  *out = NULL;
  return 1;
}

/* The leader's address as known by the node at `address`; "" while there is none. */
static int wire_find_leader(const char *address, char *leader, size_t cap, char *err,
                            size_t errcap) {
  struct wire w = {.fd = -1};
  unsigned char body[8], *out = NULL;
  size_t out_len = 0;
  int rc = wire_connect(&w, address);
  if (rc == 0) {
    wire_body(body, sizeof body, 0, NULL, 0, 0);
    rc = wire_request(&w, WIRE_REQUEST_LEADER, body, 8, WIRE_RESPONSE_SERVER, &out, &out_len);
  }
  if (rc == 0) {
    snprintf(leader, cap, "%s", out_len > 8 ? (char *)out + 8 : "");
  } else {
    snprintf(err, errcap, "%s", w.err);
  }
  free(out);
  wire_close(&w);
  return rc;
}

/* Ask the leader to add this node and make it a voter. Tolerates "already done". */
static int join_cluster(const char *join, unsigned long long id, const char *address) {
  time_t deadline = time(NULL) + JOIN_TIMEOUT_S;
  char leader[256], err[256] = "";
  int added = 0, logged_wait = 0;
  while (time(NULL) < deadline) {
    leader[0] = 0;
    if (wire_find_leader(join, leader, sizeof leader, err, sizeof err) != 0 || !leader[0]) {
      if (!logged_wait)
        node_log("join: no leader known at %s yet (%s); retrying", join, err[0] ? err : "none");
      logged_wait = 1;
      err[0] = 0;
      usleep(200 * 1000);
      continue;
    }
    struct wire w = {.fd = -1};
    unsigned char body[320], *out = NULL;
    size_t len, out_len;
    int rc = wire_connect(&w, leader);
    if (rc == 0 && !added) {
      len = wire_body(body, sizeof body, id, address, 0, 0);
      rc = wire_request(&w, WIRE_REQUEST_ADD, body, len, WIRE_RESPONSE_EMPTY, &out, &out_len);
      if (rc == 0) node_log("join: added to the cluster by the leader %s", leader);
      if (rc == 1 && strstr(w.err, "already in use")) {
        node_log("join: already a member (%s)", w.err);
        rc = 0;
      }
      if (rc == 0) added = 1;
      free(out);
      out = NULL;
    }
    if (rc == 0) {
      len = wire_body(body, sizeof body, id, NULL, 1, WIRE_ROLE_VOTER);
      rc = wire_request(&w, WIRE_REQUEST_ASSIGN, body, len, WIRE_RESPONSE_EMPTY, &out, &out_len);
      if (rc == 1 && strstr(w.err, "bad role")) { /* already a voter */
        node_log("join: already a voter");
        rc = 0;
      }
      free(out);
      if (rc == 0) {
        node_log("join: voter (leader %s)", leader);
        wire_close(&w);
        return 0;
      }
    }
    node_log("join: leader %s: %s; retrying", leader, w.err);
    wire_close(&w);
    usleep(300 * 1000);
  }
  node_log("join: gave up after %d s", JOIN_TIMEOUT_S);
  return -1;
}

/* ------------------------------------------------------------------ main */

static int dir_has_raft_state(const char *dir) {
  char path[4096];
  struct stat st;
  snprintf(path, sizeof path, "%s/metadata1", dir);
  if (stat(path, &st) == 0) return 1;
  snprintf(path, sizeof path, "%s/metadata2", dir);
  return stat(path, &st) == 0;
}

int main(int argc, char **argv) {
  const char *address = NULL, *dir = NULL, *join = NULL;
  unsigned latency_ms = 0;
  dqlite_node *node = NULL;
  int rc;

  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      usage();
      return 0;
    }
    if (!v) {
      fprintf(stderr, "attnext-node: %s needs a value\n", a);
      usage();
      return 2;
    }
    char *end = NULL;
    if (!strcmp(a, "--id")) {
      errno = 0;
      node_id = strtoull(v, &end, 10);
      if (errno || !*v || *end || node_id == 0) {
        fprintf(stderr, "attnext-node: --id must be a positive integer, got \"%s\"\n", v);
        return 2;
      }
    } else if (!strcmp(a, "--address")) {
      address = v;
    } else if (!strcmp(a, "--dir")) {
      dir = v;
    } else if (!strcmp(a, "--join")) {
      join = v;
    } else if (!strcmp(a, "--latency-ms")) {
      long ms = strtol(v, &end, 10);
      if (!*v || *end || ms < 1 || ms > 3600000) {
        fprintf(stderr, "attnext-node: --latency-ms must be from 1 to 3600000, got \"%s\"\n", v);
        return 2;
      }
      latency_ms = (unsigned)ms;
    } else {
      fprintf(stderr, "attnext-node: unknown option %s\n", a);
      usage();
      return 2;
    }
    i++;
  }
  if (!node_id || !address || !dir) {
    usage();
    return 2;
  }
  if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
    node_log("cannot create %s: %s", dir, strerror(errno));
    return 1;
  }
  int restarted = dir_has_raft_state(dir);
  if (!restarted && !join && node_id != 1) {
    node_log("%s holds no cluster state and no --join was given: only node 1 bootstraps a new "
             "cluster; give --join HOST:PORT of a node of the cluster",
             dir);
    return 2;
  }

  /* SIGTERM/SIGINT are blocked here, before dqlite starts its threads (they inherit the mask),
   * and taken by sigwait below. */
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, NULL);
  signal(SIGPIPE, SIG_IGN);

  rc = sqlite3_auto_extension((void (*)(void))sqlite3_attnext_init);
  if (rc != SQLITE_OK) {
    node_log("sqlite3_auto_extension: %s", sqlite3_errstr(rc));
    return 1;
  }
  rc = dqlite_node_create(node_id, address, dir, &node);
  if (rc != 0) {
    node_log("dqlite_node_create: %s", node ? dqlite_node_errmsg(node) : "failed");
    dqlite_node_destroy(node);
    return 1;
  }
  rc = dqlite_node_set_bind_address(node, address);
  if (rc == 0 && latency_ms) rc = dqlite_node_set_network_latency_ms(node, latency_ms);
  if (rc != 0) {
    node_log("cannot listen on %s: %s", address, dqlite_node_errmsg(node));
    dqlite_node_destroy(node);
    return 1;
  }
  rc = dqlite_node_start(node);
  if (rc != 0) {
    node_log("dqlite_node_start: %s", dqlite_node_errmsg(node));
    dqlite_node_destroy(node);
    return 1;
  }
  node_log("serving %s (dir %s, dqlite %d, SQLite %s, %s)", address, dir, dqlite_version_number(),
           sqlite3_libversion(),
           restarted ? "restarted from its data" : join ? "joining" : "new cluster");

  if (join && restarted) {
    /* Its Raft state names the cluster already; asking again could wait on a stale leader. */
    node_log("%s holds this node's Raft state: it rejoins by itself, --join ignored", dir);
  } else if (join && join_cluster(join, node_id, address) != 0) {
    node_log("could not join the cluster through %s; stopping", join);
    dqlite_node_stop(node);
    dqlite_node_destroy(node);
    return 1;
  }

  int sig = 0;
  while (sigwait(&stop_signals, &sig) != 0) {
  }
  node_log("signal %d: stopping", sig);
  rc = dqlite_node_stop(node);
  if (rc != 0) node_log("dqlite_node_stop: %s", dqlite_node_errmsg(node));
  dqlite_node_destroy(node);
  node_log("stopped");
  return rc == 0 ? 0 : 1;
}
