/* attnext_wire.c -- a client of dqlite's wire protocol (version 1; dqlite's src/protocol.h,
 * request.h, tuple.c), for build/attnext-node: joining a cluster, and the training jobs' writes
 * through whichever node leads (attn_job_runner.c reaches it through attn_job_host).
 *
 *   wire_client *c = wire_client_open("127.0.0.1:9001", "news", 5);
 *   attn_job_value p[1] = {{.type = 1, .i = 7}};
 *   wire_client_exec(c, "UPDATE attn_job_runs SET epoch = 3 WHERE job = ?1", p, 1, &changes, ...);
 *
 * A message is a header (body size in 8-byte words as uint32, type, schema, 2 unused bytes)
 * and a body padded to 8 bytes; integers are little-endian; a text is NUL-terminated and padded;
 * parameters are a tuple (count, one type byte each, padded; then the values), rows a tuple of
 * 4-bit types per column. A QUERY's rows come in batches: each ends with a marker saying
 * whether another batch follows.
 */
#include "attnext_wire.h"

#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#define WIRE_PROTOCOL_VERSION 1
#define WIRE_MAX_RESPONSE ((size_t)64 << 20)
#define WIRE_ROWS_PART 0xeeeeeeeeeeeeeeeeull
#define WIRE_ROWS_DONE 0xffffffffffffffffull
/* dqlite's codes for "this node does not lead (any more)" (src/leader.h) */
#define WIRE_IOERR_NOT_LEADER (10 | (40 << 8))
#define WIRE_IOERR_LEADERSHIP_LOST (10 | (41 << 8))
#define WIRE_NOTFOUND 12

/* ------------------------------------------------------------------ one connection */

static int wire_write_all(wire *w, const void *buf, size_t n) {
  const char *p = buf;
  while (n > 0) {
    ssize_t k = send(w->fd, p, n, MSG_NOSIGNAL);
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

static int wire_read_all(wire *w, void *buf, size_t n) {
  char *p = buf;
  while (n > 0) {
    ssize_t k = read(w->fd, p, n);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) {
      snprintf(w->err, sizeof w->err, "read: %s",
               k == 0                                    ? "connection closed"
               : errno == EAGAIN || errno == EWOULDBLOCK ? "no answer in time"
                                                         : strerror(errno));
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

/* A TCP connection to HOST:PORT, or -1 with w->err; *refused set when nothing listens there. */
static int wire_open_socket(wire *w, const char *address, int timeout_s, int *refused) {
  char host[256];
  const char *colon = strrchr(address, ':');
  struct addrinfo hints, *res = NULL;
  memset(&hints, 0, sizeof hints);
  w->fd = -1;
  if (refused) *refused = 0;
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
  if (w->fd >= 0) {
    /* Linux bounds connect() by the send timeout too */
    struct timeval tv = {.tv_sec = timeout_s};
    setsockopt(w->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(w->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  }
  if (w->fd < 0 || connect(w->fd, res->ai_addr, res->ai_addrlen) != 0) {
    if (refused) *refused = errno == ECONNREFUSED;
    snprintf(w->err, sizeof w->err, "connect to %s: %s", address, strerror(errno));
    if (w->fd >= 0) close(w->fd);
    w->fd = -1;
    freeaddrinfo(res);
    return -1;
  }
  freeaddrinfo(res);
  return 0;
}

int wire_connect(wire *w, const char *address, int timeout_s) {
  unsigned char version[8];
  if (wire_open_socket(w, address, timeout_s, NULL) != 0) return -1;
  put_u64(version, WIRE_PROTOCOL_VERSION);
  if (wire_write_all(w, version, sizeof version) != 0) {
    wire_close(w);
    return -1;
  }
  return 0;
}

void wire_close(wire *w) {
  if (w->fd >= 0) close(w->fd);
  w->fd = -1;
}

int wire_alive(const char *address) {
  wire w;
  int refused = 0;
  if (wire_open_socket(&w, address, 2, &refused) != 0) return !refused;
  wire_close(&w);
  return 1;
}

static int wire_send(wire *w, int req_type, const unsigned char *body, size_t len) {
  unsigned char header[8] = {0};
  uint32_t words = (uint32_t)(len / 8);
  for (int i = 0; i < 4; i++) header[i] = (unsigned char)(words >> (8 * i));
  header[4] = (unsigned char)req_type;
  return wire_write_all(w, header, 8) != 0 || wire_write_all(w, body, len) != 0 ? -1 : 0;
}

/* One response: its type and body (malloc'd, NUL-terminated past its end). */
static int wire_receive(wire *w, int *type, unsigned char **out, size_t *out_len) {
  unsigned char header[8];
  *out = NULL;
  if (wire_read_all(w, header, 8) != 0) return -1;
  uint32_t words = (uint32_t)header[0] | (uint32_t)header[1] << 8 | (uint32_t)header[2] << 16 |
                   (uint32_t)header[3] << 24;
  *type = header[4];
  *out_len = (size_t)words * 8;
  if (*out_len > WIRE_MAX_RESPONSE) {
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

int wire_request(wire *w, int req_type, const unsigned char *body, size_t len, int want,
                 unsigned char **out, size_t *out_len) {
  int type;
  *out = NULL;
  w->code = 0;
  if (wire_send(w, req_type, body, len) != 0) return -1;
  if (wire_receive(w, &type, out, out_len) != 0) return -1;
  if (type == want) return 0;
  if (type == WIRE_RESPONSE_FAILURE && *out_len >= 8) {
    w->code = get_u64(*out);
    snprintf(w->err, sizeof w->err, "%s", (char *)*out + 8);
  } else {
    snprintf(w->err, sizeof w->err, "unexpected response type %d", type);
  }
  free(*out);
  *out = NULL;
  return 1;
}

size_t wire_body(unsigned char *buf, size_t cap, uint64_t a, const char *text, int has_b,
                 uint64_t b) {
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

int wire_find_leader(const char *address, char *leader, size_t cap, char *err, size_t errcap) {
  wire w = {.fd = -1};
  unsigned char body[8], *out = NULL;
  size_t out_len = 0;
  int rc = wire_connect(&w, address, 5);
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

/* ------------------------------------------------------------------ requests with a body */

typedef struct wire_buf {
  unsigned char *p;
  size_t n, cap;
  int failed;
} wire_buf;

static unsigned char *buf_grow(wire_buf *b, size_t more) {
  if (b->failed) return NULL;
  if (b->n + more > b->cap) {
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->n + more) cap *= 2;
    unsigned char *p = realloc(b->p, cap);
    if (!p) {
      b->failed = 1;
      return NULL;
    }
    b->p = p;
    b->cap = cap;
  }
  unsigned char *at = b->p + b->n;
  b->n += more;
  return at;
}

static void buf_u64(wire_buf *b, uint64_t v) {
  unsigned char *p = buf_grow(b, 8);
  if (p) put_u64(p, v);
}

/* bytes then zeros up to a multiple of 8 */
static void buf_padded(wire_buf *b, const void *data, size_t n, size_t extra_zeros) {
  size_t padded = (n + extra_zeros + 7) / 8 * 8;
  unsigned char *p = buf_grow(b, padded);
  if (!p) return;
  if (n) memcpy(p, data, n);
  memset(p + n, 0, padded - n);
}

static void buf_text(wire_buf *b, const char *s) { buf_padded(b, s, strlen(s), 1); }

/* The parameters tuple: count, a type byte each (padded with the count to 8 bytes), values. */
static int buf_params(wire_buf *b, const attn_job_value *params, int n, char *msg, size_t cap) {
  if (n > 255) {
    snprintf(msg, cap, "more than 255 parameters");
    return -1;
  }
  unsigned char types[256];
  types[0] = (unsigned char)n;
  for (int i = 0; i < n; i++) types[1 + i] = (unsigned char)params[i].type;
  buf_padded(b, types, (size_t)n + 1, 0);
  for (int i = 0; i < n; i++) {
    const attn_job_value *v = &params[i];
    union {
      double d;
      uint64_t u;
    } bits;
    switch (v->type) {
    case 1: buf_u64(b, (uint64_t)v->i); break;
    case 2:
      bits.d = v->d;
      buf_u64(b, bits.u);
      break;
    case 3: buf_text(b, v->p ? (const char *)v->p : ""); break;
    case 4:
      buf_u64(b, (uint64_t)v->n);
      buf_padded(b, v->p, (size_t)v->n, 0);
      break;
    case 5: buf_u64(b, 0); break;
    default: snprintf(msg, cap, "parameter %d has type %d", i + 1, v->type); return -1;
    }
  }
  return 0;
}

/* ------------------------------------------------------------------ rows */

typedef struct wire_reader {
  const unsigned char *p, *end;
} wire_reader;

static int read_u64(wire_reader *r, uint64_t *v) {
  if (r->end - r->p < 8) return -1;
  *v = get_u64(r->p);
  r->p += 8;
  return 0;
}

/* a padded NUL-terminated text: *s points into the body */
static int read_text(wire_reader *r, const char **s, size_t *len) {
  const unsigned char *nul = memchr(r->p, 0, (size_t)(r->end - r->p));
  if (!nul) return -1;
  *s = (const char *)r->p;
  *len = (size_t)(nul - r->p);
  size_t padded = (*len + 1 + 7) / 8 * 8;
  if ((size_t)(r->end - r->p) < padded) return -1;
  r->p += padded;
  return 0;
}

typedef struct rows_storage {
  unsigned char **bodies; /* the responses the values point into */
  int n, cap;
  size_t nvalues, cap_values;
} rows_storage;

static int storage_keep(rows_storage *s, unsigned char *body) {
  if (s->n == s->cap) {
    int cap = s->cap ? 2 * s->cap : 4;
    unsigned char **p = realloc(s->bodies, sizeof *p * (size_t)cap);
    if (!p) return -1;
    s->bodies = p;
    s->cap = cap;
  }
  s->bodies[s->n++] = body;
  return 0;
}

void wire_rows_free(attn_job_rows *rows) {
  rows_storage *s = rows->storage;
  if (s) {
    for (int i = 0; i < s->n; i++) free(s->bodies[i]);
    free(s->bodies);
    free(s);
  }
  free(rows->values);
  memset(rows, 0, sizeof *rows);
}

/* Append one batch of rows (body) to out. Returns 1 when another batch follows, 0 at the end,
 * -1 when the body cannot be read. */
static int rows_batch(attn_job_rows *out, const unsigned char *body, size_t len, int first) {
  rows_storage *s = out->storage;
  wire_reader r = {body, body + len};
  uint64_t ncols;
  if (read_u64(&r, &ncols) != 0 || ncols > 4096) return -1;
  if (first) out->ncols = (int)ncols;
  if ((int)ncols != out->ncols) return -1;
  for (uint64_t i = 0; i < ncols; i++) { /* column names */
    const char *name;
    size_t n;
    if (read_text(&r, &name, &n) != 0) return -1;
  }
  for (;;) {
    if (r.end - r.p < 8) return -1;
    uint64_t marker = get_u64(r.p);
    if (marker == WIRE_ROWS_DONE || marker == WIRE_ROWS_PART) return marker == WIRE_ROWS_PART;
    size_t hsize = ((size_t)ncols + 1) / 2, hpadded = (hsize + 7) / 8 * 8;
    if ((size_t)(r.end - r.p) < hpadded) return -1;
    const unsigned char *header = r.p;
    r.p += hpadded;
    if (s->nvalues + ncols > s->cap_values) {
      size_t cap = s->cap_values ? 2 * s->cap_values : 64;
      while (cap < s->nvalues + ncols) cap *= 2;
      attn_job_value *v = realloc(out->values, sizeof *v * cap);
      if (!v) return -1;
      out->values = v;
      s->cap_values = cap;
    }
    for (uint64_t i = 0; i < ncols; i++) {
      attn_job_value *v = &out->values[s->nvalues + i];
      int type = (header[i / 2] >> (4 * (i % 2))) & 0xF;
      uint64_t u;
      size_t n;
      const char *text;
      memset(v, 0, sizeof *v);
      switch (type) {
      case 1:
      case 9:
      case 11: /* integer, unix time, boolean */
        if (read_u64(&r, &u) != 0) return -1;
        v->type = 1;
        v->i = (int64_t)u;
        break;
      case 2: {
        union {
          double d;
          uint64_t u;
        } bits;
        if (read_u64(&r, &bits.u) != 0) return -1;
        v->type = 2;
        v->d = bits.d;
        break;
      }
      case 3:
      case 10: /* text, ISO 8601 */
        if (read_text(&r, &text, &n) != 0) return -1;
        v->type = 3;
        v->p = text;
        v->n = (int64_t)n;
        break;
      case 4:
        if (read_u64(&r, &u) != 0 || u > (uint64_t)(r.end - r.p)) return -1;
        v->type = 4;
        v->p = r.p;
        v->n = (int64_t)u;
        r.p += (u + 7) / 8 * 8 <= (uint64_t)(r.end - r.p) ? (u + 7) / 8 * 8 : u;
        break;
      case 5:
        if (read_u64(&r, &u) != 0) return -1;
        v->type = 5;
        break;
      default: return -1;
      }
    }
    s->nvalues += ncols;
    out->nrows++;
  }
}

/* ------------------------------------------------------------------ the client */

struct wire_client {
  char self[256], database[256];
  int timeout_s;
  wire w;
  int connected;
  uint32_t db_id;
};

wire_client *wire_client_open(const char *self, const char *database, int timeout_s) {
  wire_client *c = calloc(1, sizeof *c);
  if (!c) return NULL;
  snprintf(c->self, sizeof c->self, "%s", self);
  snprintf(c->database, sizeof c->database, "%s", database);
  c->timeout_s = timeout_s;
  c->w.fd = -1;
  return c;
}

void wire_client_close(wire_client *c) {
  if (!c) return;
  wire_close(&c->w);
  free(c);
}

static void client_drop(wire_client *c) {
  wire_close(&c->w);
  c->connected = 0;
}

/* Connected to the leader with the database open, or ATTN_HOST_UNREACHABLE with msg. */
static int client_ensure(wire_client *c, char *msg, size_t cap) {
  char leader[256] = "", err[512] = "";
  unsigned char *out = NULL;
  size_t out_len = 0;
  if (c->connected) return ATTN_HOST_OK;
  if (wire_find_leader(c->self, leader, sizeof leader, err, sizeof err) != 0) {
    snprintf(msg, cap, "cannot ask %s for the leader: %s", c->self, err);
    return ATTN_HOST_UNREACHABLE;
  }
  if (!leader[0]) {
    snprintf(msg, cap, "no leader now (an election?)");
    return ATTN_HOST_UNREACHABLE;
  }
  if (wire_connect(&c->w, leader, c->timeout_s) != 0) {
    snprintf(msg, cap, "%s", c->w.err);
    return ATTN_HOST_UNREACHABLE;
  }
  wire_buf b = {0};
  buf_text(&b, c->database);
  buf_u64(&b, 0);
  buf_text(&b, "volatile");
  int rc = b.failed
               ? -1
               : wire_request(&c->w, WIRE_REQUEST_OPEN, b.p, b.n, WIRE_RESPONSE_DB, &out, &out_len);
  free(b.p);
  if (rc != 0 || out_len < 4) {
    snprintf(msg, cap, "open %s on %s: %s", c->database, leader,
             b.failed ? "out of memory" : c->w.err);
    free(out);
    client_drop(c);
    return ATTN_HOST_UNREACHABLE;
  }
  c->db_id =
      (uint32_t)out[0] | (uint32_t)out[1] << 8 | (uint32_t)out[2] << 16 | (uint32_t)out[3] << 24;
  free(out);
  c->connected = 1;
  return ATTN_HOST_OK;
}

/* Send EXEC_SQL or QUERY_SQL; on the first response type `want` returns 0 with its body. A
 * FAILURE that says this node does not lead, and a lost connection, are UNREACHABLE (the
 * connection is dropped: the next call finds the leader again). */
static int client_send(wire_client *c, int req, int want, const char *sql,
                       const attn_job_value *params, int n, unsigned char **out, size_t *out_len,
                       int *code, char *msg, size_t cap) {
  int rc = client_ensure(c, msg, cap);
  if (rc != ATTN_HOST_OK) return rc;
  wire_buf b = {0};
  buf_u64(&b, c->db_id);
  buf_text(&b, sql);
  if (buf_params(&b, params, n, msg, cap) != 0) {
    free(b.p);
    return ATTN_HOST_SQL_ERROR;
  }
  if (b.failed) {
    snprintf(msg, cap, "out of memory");
    return ATTN_HOST_SQL_ERROR;
  }
  rc = wire_request(&c->w, req, b.p, b.n, want, out, out_len);
  free(b.p);
  if (code) *code = (int)c->w.code;
  /* a node that lost the leadership also answers "no database opened" (SQLITE_NOTFOUND) on a
   * connection opened while it led: go-dqlite's driver takes it the same way */
  if (rc < 0 ||
      (rc == 1 && (c->w.code == WIRE_IOERR_NOT_LEADER || c->w.code == WIRE_IOERR_LEADERSHIP_LOST ||
                   c->w.code == WIRE_NOTFOUND))) {
    snprintf(msg, cap, "%s", c->w.err);
    client_drop(c);
    return ATTN_HOST_UNREACHABLE;
  }
  if (rc == 1) {
    snprintf(msg, cap, "%s", c->w.err);
    return ATTN_HOST_SQL_ERROR;
  }
  return ATTN_HOST_OK;
}

int wire_client_exec(wire_client *c, const char *sql, const attn_job_value *params, int n,
                     int64_t *changes, int *code, char *msg, size_t cap) {
  unsigned char *out = NULL;
  size_t out_len = 0;
  if (code) *code = 0;
  int rc = client_send(c, WIRE_REQUEST_EXEC_SQL, WIRE_RESPONSE_RESULT, sql, params, n, &out,
                       &out_len, code, msg, cap);
  if (rc == ATTN_HOST_OK && changes) *changes = out_len >= 16 ? (int64_t)get_u64(out + 8) : 0;
  free(out);
  return rc;
}

int wire_client_query(wire_client *c, const char *sql, const attn_job_value *params, int n,
                      attn_job_rows *rows, char *msg, size_t cap) {
  unsigned char *out = NULL;
  size_t out_len = 0;
  memset(rows, 0, sizeof *rows);
  int rc = client_send(c, WIRE_REQUEST_QUERY_SQL, WIRE_RESPONSE_ROWS, sql, params, n, &out,
                       &out_len, NULL, msg, cap);
  if (rc != ATTN_HOST_OK) return rc;
  rows->storage = calloc(1, sizeof(rows_storage));
  int more = rows->storage ? rows_batch(rows, out, out_len, 1) : -1;
  if (rows->storage && storage_keep(rows->storage, out) != 0) {
    free(out);
    more = -1;
  }
  while (more == 1) { /* the next batch comes unasked */
    int type;
    if (wire_receive(&c->w, &type, &out, &out_len) != 0 || type != WIRE_RESPONSE_ROWS) {
      free(out);
      more = -1;
      break;
    }
    more = rows_batch(rows, out, out_len, 0);
    if (storage_keep(rows->storage, out) != 0) {
      free(out);
      more = -1;
    }
  }
  if (more < 0) {
    snprintf(msg, cap, "cannot read the rows of %s: %s", c->database,
             c->w.err[0] ? c->w.err : "malformed response");
    wire_rows_free(rows);
    client_drop(c);
    return ATTN_HOST_UNREACHABLE;
  }
  return ATTN_HOST_OK;
}
