/* attnext_wire.h -- a client of dqlite's wire protocol (version 1), enough for build/attnext-node:
 * joining a cluster (LEADER, ADD, ASSIGN) and the node's training jobs writing through whichever
 * node leads (OPEN, EXEC_SQL and QUERY_SQL with parameters and rows). dqlite 1.11 has no client
 * in its C API. See attnext_wire.c. */
#ifndef ATTNEXT_WIRE_H
#define ATTNEXT_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "attn_job_host.h"

#define WIRE_REQUEST_LEADER 0
#define WIRE_REQUEST_OPEN 3
#define WIRE_REQUEST_EXEC_SQL 8
#define WIRE_REQUEST_QUERY_SQL 9
#define WIRE_REQUEST_ADD 12
#define WIRE_REQUEST_ASSIGN 13
#define WIRE_RESPONSE_FAILURE 0
#define WIRE_RESPONSE_SERVER 1
#define WIRE_RESPONSE_DB 4
#define WIRE_RESPONSE_RESULT 6
#define WIRE_RESPONSE_ROWS 7
#define WIRE_RESPONSE_EMPTY 8
#define WIRE_ROLE_VOTER 0

/* One TCP connection to a node. */
typedef struct wire {
  int fd;
  uint64_t code; /* the code of the last FAILURE response */
  char err[512];
} wire;

/* Connect to HOST:PORT, with this many seconds for the connection and for each response, and
 * send the protocol version. 0 or -1 (w->err). */
int wire_connect(wire *w, const char *address, int timeout_s);
void wire_close(wire *w);
/* Send a request and expect response type `want`; its body in *out (malloc'd). 0 on the wanted
 * response, 1 on FAILURE (message in w->err, code in w->code), -1 on a transport error. */
int wire_request(wire *w, int req_type, const unsigned char *body, size_t len, int want,
                 unsigned char **out, size_t *out_len);
/* A body of one uint64, an optional text (NUL-terminated, padded to 8 bytes) and an optional
 * second uint64; 0 when it does not fit in cap. */
size_t wire_body(unsigned char *buf, size_t cap, uint64_t a, const char *text, int has_b,
                 uint64_t b);
/* The leader's address as known by the node at `address` ("" while there is none). 0, or the
 * error of wire_request with the message in err. */
int wire_find_leader(const char *address, char *leader, size_t cap, char *err, size_t errcap);
/* 0 when the connection to address is refused (nothing listens: that process is gone). */
int wire_alive(const char *address);

/* A client of one database through the leader, found by asking the node at `self` (a member
 * knows the leader whenever there is one); it reconnects after a lost connection or a leader
 * change. The functions follow attn_job_host's exec, query and free_rows. */
typedef struct wire_client wire_client;
wire_client *wire_client_open(const char *self, const char *database, int timeout_s);
void wire_client_close(wire_client *c);
int wire_client_exec(wire_client *c, const char *sql, const attn_job_value *params, int n,
                     int64_t *changes, int *code, char *msg, size_t cap);
int wire_client_query(wire_client *c, const char *sql, const attn_job_value *params, int n,
                      attn_job_rows *rows, char *msg, size_t cap);
void wire_rows_free(attn_job_rows *rows);

#endif
