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
 * (sqlite3_auto_extension of attn_node_init, attn_jobs.c: attnext with the jobs' hooks and SQL
 * functions attn_jobs, attn_cancel and attn_job_commit, which only the node has); linking
 * attnext's objects makes the binary self-contained (no attnext.so to find at run time, no
 * dlopen of a file an attacker could replace).
 *
 * Training runs as a job beside Raft, not on dqlite's event loop: in a node attn_fit, attn_train
 * and attn_tune record a job and return its id at once; the job runner
 * (attn_job_runner.c) trains in a thread of its own on a copy of the database and commits
 * the model through the leader like any client, with the wire client of attnext_wire.c that
 * this file hands it (attn_job_host). SIGTERM stops the jobs first (marked failed), then the node.
 *
 * The rules a client must follow for writes to be replicated are in ext/node/README.md: a
 * statement that writes the store (a model, a job) must commit inside a statement that dqlite
 * runs as EXEC, or inside an explicit transaction (BEGIN ... COMMIT) as the go-dqlite shell does.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <dqlite.h>
#include <sqlite3.h>

#include "attn_job_host.h"
#include "attnext_wire.h"

/* attnext registered with the jobs' hooks and SQL functions (attn_jobs.c; its header includes
 * SQLite's extension header, whose macros would send this file's calls through the routine
 * table). */
int attn_node_init(sqlite3 *db, char **pzErrMsg, const sqlite3_api_routines *pApi);

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

/* ------------------------------------------------------------------ joining */

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
    wire w = {.fd = -1};
    unsigned char body[320], *out = NULL;
    size_t len, out_len;
    int rc = wire_connect(&w, leader, 120); /* ASSIGN waits for the new node to catch up */
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

/* ------------------------------------------------------------------ the jobs' host */

/* What the job runner (attn_job_runner.c) uses to reach the cluster: clients of
 * the leader over the wire protocol, asked through this node's own address. */
static char host_address[256];

static attn_job_client *host_open(void *ctx, const char *database) {
  return (attn_job_client *)wire_client_open(host_address, database, 10);
}

static void host_close(attn_job_client *client) { wire_client_close((wire_client *)client); }

static int host_exec(attn_job_client *client, const char *sql, const attn_job_value *params, int n,
                     int64_t *changes, int *code, char *msg, size_t cap) {
  return wire_client_exec((wire_client *)client, sql, params, n, changes, code, msg, cap);
}

static int host_query(attn_job_client *client, const char *sql, const attn_job_value *params, int n,
                      attn_job_rows *rows, char *msg, size_t cap) {
  return wire_client_query((wire_client *)client, sql, params, n, rows, msg, cap);
}

static int host_is_leader(void *ctx) {
  char leader[256] = "", err[512];
  return wire_find_leader(host_address, leader, sizeof leader, err, sizeof err) == 0 &&
         strcmp(leader, host_address) == 0;
}

static int host_alive(void *ctx, const char *address) { return wire_alive(address); }

/* ------------------------------------------------------------------ main */

static int dir_has_raft_state(const char *dir) {
  char path[4096];
  struct stat st;
  snprintf(path, sizeof path, "%s/metadata1", dir);
  if (stat(path, &st) == 0) return 1;
  snprintf(path, sizeof path, "%s/metadata2", dir);
  return stat(path, &st) == 0;
}

/* The command line's options; node_id is a global (node_log prints it). */
typedef struct node_options {
  const char *address, *dir, *join;
  unsigned latency_ms;
} node_options;

/* Read the command line into node_id and *o. Returns -1 to go on, else main's exit status (0
 * after --help, 2 for a command line it cannot run). */
static int parse_args(int argc, char **argv, node_options *o) {
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
      o->address = v;
    } else if (!strcmp(a, "--dir")) {
      o->dir = v;
    } else if (!strcmp(a, "--join")) {
      o->join = v;
    } else if (!strcmp(a, "--latency-ms")) {
      long ms = strtol(v, &end, 10);
      if (!*v || *end || ms < 1 || ms > 3600000) {
        fprintf(stderr, "attnext-node: --latency-ms must be from 1 to 3600000, got \"%s\"\n", v);
        return 2;
      }
      o->latency_ms = (unsigned)ms;
    } else {
      fprintf(stderr, "attnext-node: unknown option %s\n", a);
      usage();
      return 2;
    }
    i++;
  }
  if (!node_id || !o->address || !o->dir) {
    usage();
    return 2;
  }
  return -1;
}

/* The node, listening on o's address with its latency hint, into *node. 0, or 1 with the reason
 * logged and nothing left to destroy. */
static int node_create(dqlite_node **node, const node_options *o) {
  int rc = dqlite_node_create(node_id, o->address, o->dir, node);
  if (rc != 0) {
    node_log("dqlite_node_create: %s", *node ? dqlite_node_errmsg(*node) : "failed");
    dqlite_node_destroy(*node);
    return 1;
  }
  rc = dqlite_node_set_bind_address(*node, o->address);
  if (rc == 0 && o->latency_ms) rc = dqlite_node_set_network_latency_ms(*node, o->latency_ms);
  if (rc != 0) {
    node_log("cannot listen on %s: %s", o->address, dqlite_node_errmsg(*node));
    dqlite_node_destroy(*node);
    return 1;
  }
  return 0;
}

/* Training jobs (attn_job_runner.c): registered before the node serves statements. A node
 * that stops hearing from a job's node for `lease` seconds fails the job: longer than an
 * election (15 x latency; dqlite's default election timeout is 3 s) can take. 0, or -1 when its
 * thread does not start. */
static int jobs_start(const node_options *o) {
  snprintf(host_address, sizeof host_address, "%s", o->address);
  double election_s = o->latency_ms ? 15.0 * o->latency_ms / 1000.0 : 3.0;
  attn_job_host host = {
      .ctx = NULL,
      .node_id = node_id,
      .address = host_address,
      .lease = 10 * election_s > 30 ? 10 * election_s : 30,
      .open = host_open,
      .close = host_close,
      .exec = host_exec,
      .query = host_query,
      .free_rows = wire_rows_free,
      .is_leader = host_is_leader,
      .alive = host_alive,
  };
  return attn_jobs_start(&host); /* it keeps a copy */
}

int main(int argc, char **argv) {
  node_options o = {NULL, NULL, NULL, 0};
  dqlite_node *node = NULL;
  int rc = parse_args(argc, argv, &o);
  if (rc >= 0) return rc;
  const char *address = o.address, *dir = o.dir, *join = o.join;
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

  rc = sqlite3_auto_extension((void (*)(void))attn_node_init);
  if (rc != SQLITE_OK) {
    node_log("sqlite3_auto_extension: %s", sqlite3_errstr(rc));
    return 1;
  }
  if (node_create(&node, &o) != 0) return 1;
  if (jobs_start(&o) != 0) {
    node_log("cannot start the job runner's thread");
    dqlite_node_destroy(node);
    return 1;
  }
  rc = dqlite_node_start(node);
  if (rc != 0) {
    node_log("dqlite_node_start: %s", dqlite_node_errmsg(node));
    attn_jobs_stop();
    dqlite_node_destroy(node);
    return 1;
  }
  node_log("serving %s (dir %s, dqlite %d, SQLite %s, %s)", address, dir, dqlite_version_number(),
           sqlite3_libversion(),
           restarted ? "restarted from its data"
           : join    ? "joining"
                     : "new cluster");

  if (join && restarted) {
    /* Its Raft state names the cluster already; asking again could wait on a stale leader. */
    node_log("%s holds this node's Raft state: it rejoins by itself, --join ignored", dir);
  } else if (join && join_cluster(join, node_id, address) != 0) {
    node_log("could not join the cluster through %s; stopping", join);
    attn_jobs_stop();
    dqlite_node_stop(node);
    dqlite_node_destroy(node);
    return 1;
  }

  int sig = 0;
  while (sigwait(&stop_signals, &sig) != 0) {
  }
  node_log("signal %d: stopping", sig);
  attn_jobs_stop(); /* jobs first: they write their end through the cluster */
  rc = dqlite_node_stop(node);
  if (rc != 0) node_log("dqlite_node_stop: %s", dqlite_node_errmsg(node));
  dqlite_node_destroy(node);
  node_log("stopped");
  return rc == 0 ? 0 : 1;
}
