/* model.h -- the model and workspace structures, shared by the engine's layer files.
 *
 * Packed layout (as PyTorch's PackedSequence): a batch is sorted by length, longest first
 * (order[j] = the caller's row of sorted sample j). Time step t holds the n[t] samples with
 * length > t, in rows off[t] .. off[t] + n[t] of every (P, .) activation, P = sum of lengths.
 * Row r = off[t] + j is sample j at position t. The previous step of row r is row
 * off[t-1] + j, so the recurrent GEMM at step t reads the first n[t] rows of step t-1.
 *
 * The reverse direction runs the same forward recurrence over its input permuted by rev[]:
 * rev[off[t] + j] = off[len_j - 1 - t] + j (an involution), so it starts at each sequence's
 * last real token, as packed sequences do, and padding is never read.
 */
#ifndef ATTNEXT_MODEL_H
#define ATTNEXT_MODEL_H

#include "backend.h"
#include "nn_internal.h"

#define NN_MAX_LAYERS 8
#define NN_MAX_MEMBERS 8 /* the "ensemble" option's bound (config.c) */
/* one network: embedding + 4 per layer and direction + at most 6 for attention (self) + fc1 +
 * fc2; an ensemble has one set per member */
#define NN_NET_TENSORS (2 + 4 * 2 * NN_MAX_LAYERS + 6 + 2 + 2) /* + subwords */
#define NN_MAX_TENSORS (NN_MAX_MEMBERS * NN_NET_TENSORS)
#define NN_MAX_HIDDEN                                                                              \
  4096 /* the options' bound on hidden (config.c); sizes backend_cpu.c's zero row */

typedef struct nn_rnn_params { /* offsets (in floats) into params / grads */
  size_t w_ih, w_hh, b_ih, b_hh;
} nn_rnn_params;

struct nn_model {
  nn_config cfg;
  nn_vocab *vocab;
  char **labels;
  int *label_lens;
  int C;                /* classes */
  int V, E, H, D, F, G; /* vocab, embed, hidden, D = H * dirs, fc1 width, gates per cell */
  int L, dirs;          /* layers, directions */
  int S;                /* subword buckets (cfg.subword_buckets); 0: none */
  /* subwords: each vocabulary word's rows of the member's table of V + S rows (embeddings.weight
   * then subwords.weight, adjacent in the buffer): sub_rows[sub_start[v] .. sub_start[v + 1])
   * are V + its n-gram buckets (nn_subword_ids); <PAD> and <UNK> have none. Host memory, the
   * owner's (views share it). A word's input vector is the mean of its row and these rows. */
  int *sub_start, *sub_rows;
  int sub_max;             /* the most subword rows of one word */
  const nn_backend *be;    /* from cfg.device (backend_load.c) */
  const nn_allocator *mem; /* the model's host memory and host-backend memory (its vocab's) */
  float *params, *grads;   /* (nparams) each, backend memory */
  size_t nparams;
  /* Host mirrors for the public accessors (nn_model_params / weights / grads). With a
   * host-memory backend they are params / grads themselves; with a device backend they are
   * copies, kept in step by params_state (see model.c). */
  float *host_params, *host_grads;
  int params_state;        /* NN_PARAMS_SYNCED | NN_PARAMS_DEVICE_NEWER | NN_PARAMS_HOST_NEWER */
  nn_tensor_info *tensors; /* (NN_MAX_TENSORS), the model's; NULL in a member view */
  char (*tensor_names)[48];
  int ntensors;
  /* An ensemble (cfg.ensemble = K > 1) is K networks of the same shape in one parameter
   * buffer: every member's embedding table first (members.0.embeddings.weight, ...), then each
   * member's other tensors. member[k] is a view of network k: an nn_model whose offsets below
   * are member k's, sharing the owner's params, vocabulary and labels, owning only its
   * inference tables; the owner's own offsets are member 0's. Inference averages the members'
   * probabilities (and attention); training runs each member on its own loss (train.c).
   * K = 1: no views, member[] NULL. */
  int K;
  struct nn_model *member[NN_MAX_MEMBERS];
  const struct nn_model *owner; /* a view: the ensemble it belongs to; NULL otherwise */
  /* named views (offsets) */
  size_t emb;
  size_t subw; /* subwords.weight (S, E), right after embeddings.weight */
  nn_rnn_params rnn[NN_MAX_LAYERS][2];
  size_t attn_w, attn_b; /* linear: (1,D), (1); additive proj: (D,D), (D) */
  size_t attn_v;         /* additive: (1,D) */
  size_t attn_q_w, attn_q_b, attn_k_w, attn_k_b, attn_v_w, attn_v_b; /* self: (D,D), (D) */
  size_t fc1_w, fc1_b;                                               /* (F,D), (F) when F > 0 */
  size_t fc2_w, fc2_b;                                               /* (C, F or D), (C) */
  float *fold[2]; /* (V, G*H) per direction of layer 0, or NULL: see nn_model_prepare_inference */
  /* (V, G*H) per direction of layer 0, or NULL: h_0 W_hh^T of a sequence whose first token (in
   * the direction's order) is v. h_0 = cell(fold[v], 0) depends on that token alone, so step 1's
   * recurrent product is a lookup: one step's multiply-adds less per sequence at inference. */
  float *step1[2];
  /* Transposed copies for inference on the host (NULL otherwise), one 64-byte aligned
   * allocation, each piece aligned: W_hh^T (H, G*H) per layer and direction. A one-row product
   * x W^T then reads W^T row by row (y += x[k] W^T[k, :]), with no horizontal sums. */
  float *transposed;
  const float *w_hh_t[NN_MAX_LAYERS][2];
  /* The head of inference, fc2 . fc1 folded into one layer: head_w (C, D) = W2 W1,
   * head_b (C) = W2 b1 + b2 (no activation lies between fc1 and fc2, and dropout is the identity
   * at inference), in head_buf (backend memory); without fc1, fc2's own weights. NULL unless
   * prepared (nn_model_prepare_inference). */
  float *head_buf;
  const float *head_w, *head_b;
};

/* Per-layer, per-direction activations kept for backward. */
typedef struct nn_rnn_acts {
  float *x;   /* (P, In) the direction's input in its step order (reverse: permuted copy) */
  float *pre; /* (P, G*H) activated gates (lstm, gru) or unused (rnn) */
  float *hw;  /* (P, 3H) gru only: h_prev W_hh^T + b_hh */
  float *h;   /* (P, H) hidden states in step order */
  float *c;   /* (P, H) lstm cell states */
} nn_rnn_acts;

struct nn_workspace {
  /* an ensemble's forward runs member k on member_ws[k] (created on first use) and averages
   * in ens_buf (host memory, grown on demand) */
  struct nn_workspace *member_ws[NN_MAX_MEMBERS];
  float *ens_buf;
  size_t ens_cap; /* floats */
  float *buf;     /* one arena for all float activations of the current batch */
  size_t cap;     /* floats */
  int *ibuf;      /* one arena for the index arrays */
  size_t icap;    /* ints */
  const nn_backend *be;
  const nn_allocator *mem; /* nn_workspace_create's */
  /* shape of the batch in the arena */
  int B, T, P, Tmax, training;
  int row_base; /* inference split into row ranges: the caller's row of this part's row 0 */
  int *order, *lens, *nstep, *off; /* host memory: host-side loops */
  /* backend memory (uploaded from ibuf for a device backend; in ibuf itself otherwise) */
  int *ids, *rev, *row_sample, *last_row;
  int *ids_rev; /* (P) ids[rev[r]]: the token each reverse-direction step reads */
  /* subwords (model.h, struct nn_model): the batch's Q (row, table row) pairs, backend memory */
  int *pair_row, *pair_src, Q;
  int *sub_n;    /* (P) host memory: each row's subword count */
  int *dibuf;    /* device backends: the backend copy of the index arrays */
  size_t dicap;  /* ints */
  float *hbuf;   /* device backends: host scratch for logits, attention, dropout mask, dlogits */
  size_t hcap;   /* floats */
  int *emb_last; /* device backends, training: (V) -1, or the row last seen of each token */
  size_t emb_cap;
  /* activations */
  float *x0;                  /* (P, E) embeddings */
  float *sub_tmp, *sub_scale; /* subwords: (Q, E) gathered rows, (P, E) 1 / (1 + n) */
  float *emb_mask;            /* (P, E) embed_dropout mask, NULL when none */
  float *y[NN_MAX_LAYERS];    /* (P, D) layer outputs, position order */
  nn_rnn_acts acts[NN_MAX_LAYERS][2];
  float *scores, *alpha;                 /* (P) */
  float *seg_scratch;                    /* (2B) for the segment softmax */
  float *att_u;                          /* (P, D) additive: tanh(proj) */
  float *att_q, *att_k, *att_v, *y_last; /* self: (B,D), (P,D), (P,D), (B,D) */
  float *ctx;                            /* (B, D) */
  float *z1;                             /* (B, F) fc1 output */
  float *mask;                           /* (B, F or D) dropout mask, NULL when no dropout */
  float *zd;                             /* (B, F or D) after dropout */
  float *logits;                         /* (B, C) sorted order */
  float *grads;                          /* where backward accumulates parameter gradients */
  /* backward scratch */
  float *d_logits, *d_zd, *d_z1, *d_ctx, *d_scores, *d_alpha, *d_u, *d_q, *d_k, *d_v;
  float *d_y; /* (P, max(E, D)) gradient of a layer's output */
  float *d_x; /* (P, max(E, D)) gradient of a layer's input */
  float *d_h, *d_c, *d_pre, *d_hw, *h_prev, *d_xdir; /* per direction scratch */
};

/* The inference tables of nn_model_prepare_inference (fold, step1 and the step-1 table's
 * scratch while it is built) are built only within NN_INFER_TABLES_FACTOR x the parameters'
 * bytes + NN_INFER_TABLES_SLACK: a loaded model then holds at most about
 * (2 + NN_INFER_TABLES_FACTOR) x its BLOB's bytes + 16 MB (parameters, transposed W_hh, tables);
 * twice that for a "storage": "float16" BLOB, which holds 2 bytes a parameter, not 4.
 * The lesson's AG News model (rnn 128, 5000 tokens) needs 2.4x for both tables; a large
 * vocabulary with a tiny embedding (a crafted model's case: tests/test_resource_bounds.c) runs
 * without them. */
#define NN_INFER_TABLES_FACTOR 8
#define NN_INFER_TABLES_SLACK (16.0 * 1024 * 1024)
double nn_model_table_budget(const nn_model *m); /* bytes */
/* model_infer.c: free the inference tables, the members' too (the weights are about to change,
 * or the model is freed); a no-op when there are none. */
void nn_model_drop_inference(nn_model *m);
/* n rounded up to a multiple of 16 floats (64 bytes): the inference tables' piece size */
static inline size_t nn_aligned_floats(size_t n) { return (n + 15) & ~(size_t)15; }

/* Inference splits a batch into row ranges whose workspace (float arena + index arrays) stays
 * within this many bytes; a single row runs whatever its size (at most max_len tokens). */
#define NN_INFER_WORKSPACE_MAX ((size_t)64 * 1024 * 1024)

/* Member k of an ensemble (a view, see struct nn_model), or the model itself when it is a single
 * network (k = 0). */
nn_model *nn_model_member(const nn_model *m, int k);
/* The workspace member k of an ensemble runs on: ws itself for a single network, else the
 * member's own, created on first use (NULL when out of memory). */
nn_workspace *nn_workspace_member(nn_workspace *ws, int k);

/* Gates per cell: rnn 1, gru 3, lstm 4. */
int nn_cell_gates(nn_cell cell);

/* Layers (forward/backward pairs). */
int nn_workspace_prepare(nn_workspace *ws, const nn_model *m, const nn_batch *batch, int training,
                         char *err);
void nn_recurrent_forward(const nn_model *m, nn_workspace *ws);
void nn_recurrent_backward(const nn_model *m, nn_workspace *ws);
void nn_attention_forward(const nn_model *m, nn_workspace *ws);
void nn_attention_backward(const nn_model *m, nn_workspace *ws);

#define NN_PARAMS_SYNCED 0
#define NN_PARAMS_DEVICE_NEWER 1 /* a backend op (Adam) changed them: download before reading */
/* nn_model_params was handed out: the host may write through it at any time, so every
 * computation uploads first, until nn_model_train_params or nn_model_prepare_inference. With
 * a device backend, a pointer from nn_model_params / nn_model_weights / nn_model_grads is a
 * snapshot: after training steps on the device, ask again to read current values. */
#define NN_PARAMS_HOST_NEWER 2

/* Device backends: upload the host mirror of the parameters if it is newer (a forward does it
 * itself). NN_ERROR with the backend's message on failure. */
int nn_model_sync(nn_model *m, char *err);
/* The parameters in backend memory for an in-place update by backend operations (Adam); the
 * host mirror is then stale until the next nn_model_params / nn_model_weights. */
float *nn_model_train_params(nn_model *m);
/* nn_model_create without the random initialisation (parameters zero), for a loader that
 * overwrites every parameter: the draw was ~85% of a model load. */
int nn_model_create_uninit(nn_model **out, const nn_config *cfg, nn_vocab *vocab,
                           const char *const *labels, int num_classes, char *err);
/* NN_ERROR "<what>: <message>" when the backend recorded an error on this thread, else NN_OK. */
int nn_backend_check(const nn_backend *be, const char *what, char *err);

/* Adam with its moments in a backend's memory (adam.c): a host-memory backend runs exactly
 * nn_adam_init / nn_adam_step / nn_adam_free; a device backend its adam_step operation. */
int nn_adam_init_on(nn_adam *adam, const nn_backend *be, const nn_allocator *mem, size_t nparams,
                    float lr, char *err);
/* One Adam step split over parameter slices (threads), host memory: nn_adam_step_begin advances
 * the step and returns its scalars, nn_adam_step_range updates [lo, hi). Element-wise, so any
 * split gives the bits of nn_adam_step. */
typedef struct nn_adam_step_scalars {
  float beta1, one_minus_beta1, beta2, one_minus_beta2, bc2_sqrt, eps, neg_step_size;
} nn_adam_step_scalars;
nn_adam_step_scalars nn_adam_step_begin(nn_adam *adam);
void nn_adam_step_range(nn_adam *adam, const nn_adam_step_scalars *k, float *params,
                        const float *grads, size_t lo, size_t hi);
int nn_adam_step_on(nn_adam *adam, const nn_backend *be, float *params, const float *grads,
                    char *err);
void nn_adam_free_on(nn_adam *adam, const nn_backend *be);
/* nn_adam_step_lazy with the moments in a backend's memory. */
int nn_adam_step_lazy_on(nn_adam *adam, const nn_backend *be, float *params, const float *grads,
                         size_t tables, size_t table, int E, const int *rows, int nrows, char *err);

/* nn_cross_entropy in parts, so shards of a batch can each take theirs: the batch's weight sum
 * (the normaliser), then per shard the unnormalised loss sum_b w[y_b] * nll_b with dlogits
 * already divided by the batch's normaliser (the same bits as nn_cross_entropy's). */
double nn_cross_entropy_weight_sum(const int *labels, const float *class_weights, int B);
double nn_cross_entropy_part(float *dlogits, const float *logits, const int *labels,
                             const float *class_weights, int B, int C, double wsum,
                             float smoothing);

/* Backward into an explicit gradient buffer (nparams floats of backend memory, accumulated +=), so several
 * threads can each run a shard of a batch on a shared, read-only model. */
int nn_model_backward_into(const nn_model *m, nn_workspace *ws, const nn_batch *batch,
                           const float *dlogits, float *grads, char *err);

#endif
