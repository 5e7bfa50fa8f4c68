/* model.c -- the model: its parameter table (PyTorch state_dict names and order, one flat
 * buffer with named views), PyTorch's default initialisation, the workspace arena, and the
 * top-level forward/backward that chains embedding -> recurrent layers -> attention -> fc1 ->
 * dropout -> fc2 (recurrent.c and attention.c hold those layers; model_infer.c the tables
 * inference builds once the weights are final).
 *
 * The batch is processed in packed, length-sorted order (see model.h); logits and attention
 * are written back in the caller's row order.
 *
 * Host and backend memory: the model's backend comes from cfg.device (backend_load.c). Its
 * parameters, gradients and activations live in backend memory; host code here only touches
 * host copies: the index arrays are built on the host and uploaded, the dropout mask is drawn
 * on the host and uploaded, logits / attention are downloaded and un-permuted on the host,
 * dlogits permuted on the host and uploaded. For the CPU backend the copies are the buffers
 * themselves (no copying). The public accessors hand out host mirrors of the parameters and
 * gradients (params_state in model.h says which side is newer). */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "model.h"
#include "nn_mem.h"
#include "pool.h"
#include "text.h"

static int on_device(const nn_model *m) { return m->be->device_memory; }

int nn_cell_gates(nn_cell cell) { return cell == NN_CELL_GRU ? 3 : cell == NN_CELL_LSTM ? 4 : 1; }

/* ---------------------------------------------------------------- parameter table */

_Static_assert(NN_MAX_LAYERS == 8, "config.c bounds option \"layers\" to 1..8 = NN_MAX_LAYERS");

static size_t add_tensor(nn_model *m, size_t *offset, const char *name, int64_t rows,
                         int64_t cols) {
  /* NN_MAX_TENSORS covers every configuration the options allow (checked in nn_model_create);
   * a table that would still overflow keeps its last slot and is refused there */
  int i = m->ntensors < NN_MAX_TENSORS ? m->ntensors : NN_MAX_TENSORS - 1;
  m->ntensors++;
  nn_tensor_info *t = &m->tensors[i]; /* m->tensors holds NN_MAX_TENSORS entries */
  snprintf(m->tensor_names[i], sizeof m->tensor_names[i], "%s", name);
  t->name = m->tensor_names[i];
  t->ndim = cols ? 2 : 1;
  t->shape[0] = rows;
  t->shape[1] = cols;
  t->offset = *offset;
  t->size = (size_t)rows * (size_t)(cols ? cols : 1);
  *offset += t->size;
  return t->offset;
}

/* One network's tensors in PyTorch's state_dict order, named prefix + PyTorch's name, with net's
 * offsets set: part 1 is the embedding table, part 2 everything after it. */
static void add_network(nn_model *m, nn_model *net, size_t *off, const char *prefix, int part) {
  char name[48];
  int GH = net->G * net->H;
#define ADD(fmt, ...) (snprintf(name, sizeof name, "%s" fmt, prefix, __VA_ARGS__), name)
  if (part == 1) { /* the member's table of V + S rows: embeddings, then subwords */
    net->emb = add_tensor(m, off, ADD("%s", "embeddings.weight"), net->V, net->E);
    if (net->S > 0) net->subw = add_tensor(m, off, ADD("%s", "subwords.weight"), net->S, net->E);
    return;
  }
  for (int l = 0; l < net->L; l++) {
    int in = l == 0 ? net->E : net->D;
    for (int d = 0; d < net->dirs; d++) {
      const char *sfx = d ? "_reverse" : "";
      nn_rnn_params *p = &net->rnn[l][d];
      p->w_ih = add_tensor(m, off, ADD("rnn.weight_ih_l%d%s", l, sfx), GH, in);
      p->w_hh = add_tensor(m, off, ADD("rnn.weight_hh_l%d%s", l, sfx), GH, net->H);
      p->b_ih = add_tensor(m, off, ADD("rnn.bias_ih_l%d%s", l, sfx), GH, 0);
      p->b_hh = add_tensor(m, off, ADD("rnn.bias_hh_l%d%s", l, sfx), GH, 0);
    }
  }
  int D = net->D;
  switch (net->cfg.attention) {
  case NN_ATTN_LINEAR:
    net->attn_w = add_tensor(m, off, ADD("%s", "attn.weight"), 1, D);
    net->attn_b = add_tensor(m, off, ADD("%s", "attn.bias"), 1, 0);
    break;
  case NN_ATTN_ADDITIVE:
    net->attn_w = add_tensor(m, off, ADD("%s", "attn.proj.weight"), D, D);
    net->attn_b = add_tensor(m, off, ADD("%s", "attn.proj.bias"), D, 0);
    net->attn_v = add_tensor(m, off, ADD("%s", "attn.v.weight"), 1, D);
    break;
  case NN_ATTN_SELF:
    net->attn_q_w = add_tensor(m, off, ADD("%s", "attn.query.weight"), D, D);
    net->attn_q_b = add_tensor(m, off, ADD("%s", "attn.query.bias"), D, 0);
    net->attn_k_w = add_tensor(m, off, ADD("%s", "attn.key.weight"), D, D);
    net->attn_k_b = add_tensor(m, off, ADD("%s", "attn.key.bias"), D, 0);
    net->attn_v_w = add_tensor(m, off, ADD("%s", "attn.value.weight"), D, D);
    net->attn_v_b = add_tensor(m, off, ADD("%s", "attn.value.bias"), D, 0);
    break;
  case NN_ATTN_DOT: /* no parameters */ break;
  }
  if (net->F > 0) {
    net->fc1_w = add_tensor(m, off, ADD("%s", "fc1.weight"), net->F, D);
    net->fc1_b = add_tensor(m, off, ADD("%s", "fc1.bias"), net->F, 0);
  }
  net->fc2_w = add_tensor(m, off, ADD("%s", "fc2.weight"), net->C, net->F > 0 ? net->F : D);
  net->fc2_b = add_tensor(m, off, ADD("%s", "fc2.bias"), net->C, 0);
#undef ADD
}

/* The name prefix of member k's tensors: "" for a single network, "members.k." (PyTorch's
 * nn.ModuleList named members) in an ensemble. */
static void member_prefix(char *out, size_t n, const nn_model *m, int k) {
  if (m->K > 1) snprintf(out, n, "members.%d.", k & 7); /* k < NN_MAX_MEMBERS */
  else out[0] = 0;
}

/* Fill the table (single network: PyTorch's state_dict order; an ensemble: every member's
 * embedding table, then each member's other tensors, see model.h); returns the parameter
 * count. */
static size_t build_tensor_table(nn_model *m) {
  size_t off = 0;
  char prefix[20];
  m->ntensors = 0;
  for (int part = 1; part <= 2; part++)
    for (int k = 0; k < m->K; k++) {
      member_prefix(prefix, sizeof prefix, m, k);
      add_network(m, m->K > 1 ? m->member[k] : m, &off, prefix, part);
    }
  if (m->K > 1) { /* the owner's own views are member 0's */
    const nn_model *first = m->member[0];
    m->emb = first->emb;
    m->subw = first->subw;
    memcpy(m->rnn, first->rnn, sizeof m->rnn);
    m->attn_w = first->attn_w, m->attn_b = first->attn_b, m->attn_v = first->attn_v;
    m->attn_q_w = first->attn_q_w, m->attn_q_b = first->attn_q_b;
    m->attn_k_w = first->attn_k_w, m->attn_k_b = first->attn_k_b;
    m->attn_v_w = first->attn_v_w, m->attn_v_b = first->attn_v_b;
    m->fc1_w = first->fc1_w, m->fc1_b = first->fc1_b;
    m->fc2_w = first->fc2_w, m->fc2_b = first->fc2_b;
  }
  return off;
}

/* The seed of member k's initialisation: the model's seed for member 0 (so that a one-member
 * model is initialised as before ensembles existed), then seed + k. */
static uint64_t member_seed(uint64_t seed, int k) { return seed + (uint64_t)k; }

/* PyTorch defaults: Embedding N(0,1) with the padding row zero (and <UNK>'s, below);
 * RNN/GRU/LSTM U(-1/sqrt(H), 1/sqrt(H)) for every tensor; Linear weight and bias U(-1/sqrt(in),
 * 1/sqrt(in)). Each member draws from its own stream, its embedding first, then its tensors in
 * state_dict order (as a single network seeded with member_seed would). */
_Thread_local nn_interrupt_fn nn_mem_stop = NULL;
_Thread_local void *nn_mem_stop_ctx = NULL;

/* stop(stop_ctx) is asked every this many weights drawn: a table of 2^22 subword rows is
 * hundreds of millions of draws, seconds (about 10 ms between asks) */
#define INIT_STOP_EVERY ((size_t)1 << 18)

/* Fill x (n floats) from rng: N(0, 1) (bound 0) or U(-bound, bound); asks stop(stop_ctx) every
 * INIT_STOP_EVERY values. NN_OK or NN_INTERRUPTED. */
static int init_fill(float *x, size_t n, nn_rng *rng, float bound, nn_interrupt_fn stop,
                     void *stop_ctx) {
  for (size_t lo = 0; lo < n; lo += INIT_STOP_EVERY) {
    size_t hi = n - lo < INIT_STOP_EVERY ? n : lo + INIT_STOP_EVERY;
    if (bound == 0.0f)
      for (size_t j = lo; j < hi; j++) x[j] = nn_rng_normal(rng);
    else
      for (size_t j = lo; j < hi; j++) x[j] = (2.0f * nn_rng_uniform(rng) - 1.0f) * bound;
    if (stop && hi < n && stop(stop_ctx)) return NN_INTERRUPTED;
  }
  return NN_OK;
}

static int init_params(nn_model *m, float *p, uint64_t seed, nn_interrupt_fn stop, void *stop_ctx) {
  char prefix[20];
  for (int k = 0; k < m->K; k++) {
    nn_rng rng;
    nn_rng_seed(&rng, member_seed(seed, k));
    member_prefix(prefix, sizeof prefix, m, k);
    size_t plen = strlen(prefix);
    const nn_tensor_info *prev = NULL; /* member k's previous tensor */
    for (int i = 0; i < m->ntensors; i++) {
      const nn_tensor_info *t = &m->tensors[i];
      if (strncmp(t->name, prefix, plen) != 0) continue;
      const char *name = t->name + plen;
      float *x = p + t->offset;
      if (strcmp(name, "embeddings.weight") == 0) {
        if (init_fill(x, t->size, &rng, 0.0f, stop, stop_ctx) != NN_OK) return NN_INTERRUPTED;
        memset(x + (size_t)NN_PAD * m->E, 0, sizeof(float) * m->E);
        /* <UNK>'s row is zero in the default recipe without word dropout: with every training
         * word in the vocabulary (the default's vocab_size) only word dropout puts <UNK> in a
         * batch, so the row would never train, and as a random vector each unknown word of a
         * new text reads as noise (AG News, 1,000 labels, held-out accuracy: 0.571 random,
         * 0.631 zero). The lesson keeps PyTorch's draw: its 5,000 words leave rarer ones to
         * train <UNK>. Drawn either way, so the tensors after it draw as before. */
        if (m->cfg.recipe != NN_RECIPE_LESSON && !(m->cfg.word_dropout > 0.0f))
          memset(x + (size_t)NN_UNK * m->E, 0, sizeof(float) * m->E);
        prev = t;
        continue;
      }
      if (strcmp(name, "subwords.weight") == 0) { /* an nn.Embedding too: N(0, 1) */
        if (init_fill(x, t->size, &rng, 0.0f, stop, stop_ctx) != NN_OK) return NN_INTERRUPTED;
        prev = t;
        continue;
      }
      double fan_in;
      if (strncmp(name, "rnn.", 4) == 0) fan_in = m->H;
      else {
        /* a Linear's bias shares the bound of its weight, the member's tensor just before it */
        const nn_tensor_info *w = t->ndim == 2 || !prev ? t : prev;
        fan_in = (double)w->shape[1];
      }
      float bound = (float)(1.0 / sqrt(fan_in));
      if (init_fill(x, t->size, &rng, bound, stop, stop_ctx) != NN_OK) return NN_INTERRUPTED;
      prev = t;
    }
  }
  return NN_OK;
}

/* The subword rows of every vocabulary word (model.h): m->sub_start, m->sub_rows. */
static int build_subwords(nn_model *m) {
  int V = m->V, cap = 64, *ids = nn_mem_alloc(m->mem, (size_t)cap * sizeof *ids);
  size_t total = 0, room = (size_t)V * 8 + 16;
  m->sub_start = nn_mem_alloc(m->mem, ((size_t)V + 1) * sizeof *m->sub_start);
  m->sub_rows = nn_mem_alloc(m->mem, room * sizeof *m->sub_rows);
  if (!ids || !m->sub_start || !m->sub_rows) goto nomem;
  for (int v = 0; v < V; v++) {
    m->sub_start[v] = (int)total;
    int len = 0;
    const char *tok = v > NN_UNK ? nn_vocab_token(m->vocab, v, &len) : NULL;
    int n = tok ? nn_subword_ids(ids, cap, tok, len, &m->cfg, m->mem) : 0;
    if (n > cap) {
      int *grown = nn_mem_realloc(m->mem, ids, (size_t)n * sizeof *ids);
      if (!grown) goto nomem;
      ids = grown;
      cap = n;
      n = nn_subword_ids(ids, cap, tok, len, &m->cfg, m->mem);
    }
    if (n < 0) goto nomem;
    if (total + (size_t)n > (size_t)INT32_MAX) goto nomem;
    if (total + (size_t)n > room) {
      room = (total + (size_t)n) * 2;
      int *grown = nn_mem_realloc(m->mem, m->sub_rows, room * sizeof *grown);
      if (!grown) goto nomem;
      m->sub_rows = grown;
    }
    for (int i = 0; i < n; i++) m->sub_rows[total + (size_t)i] = V + ids[i];
    total += (size_t)n;
    if (n > m->sub_max) m->sub_max = n;
  }
  m->sub_start[V] = (int)total;
  nn_mem_free(m->mem, ids);
  return NN_OK;
nomem:
  nn_mem_free(m->mem, ids);
  return NN_NOMEM;
}

/* A view of one network of m (an ensemble's member, see model.h): m's sizes, config, backend,
 * vocabulary and labels (not owned), no tensor table or tables of its own yet. */
static nn_model *make_view(const nn_model *m) {
  nn_model *v = nn_mem_alloc(m->mem, sizeof *v);
  if (!v) return NULL;
  *v = *m;
  v->tensors = NULL;
  v->tensor_names = NULL;
  v->ntensors = 0;
  v->K = 1;
  memset(v->member, 0, sizeof v->member);
  v->owner = m; /* sub_start / sub_rows: the owner's, shared */
  v->params = v->grads = v->host_params = v->host_grads = NULL;
  v->params_state = NN_PARAMS_SYNCED; /* the owner keeps the state */
  memset(v->fold, 0, sizeof v->fold);
  memset(v->step1, 0, sizeof v->step1);
  v->transposed = NULL;
  memset(v->w_hh_t, 0, sizeof v->w_hh_t);
  v->head_buf = NULL;
  v->head_w = v->head_b = NULL;
  return v;
}

static int model_create(nn_model **out, const nn_config *cfg, nn_vocab *vocab,
                        const char *const *labels, int num_classes, int init, uint64_t seed,
                        nn_interrupt_fn stop, void *stop_ctx, char *err) {
  *out = NULL;
  int rc = nn_config_validate(cfg, err);
  if (rc != NN_OK) {
    nn_vocab_free(vocab);
    return rc;
  }
  if (!vocab || nn_vocab_count(vocab) < 2) {
    snprintf(err, NN_ERR_LEN, "vocabulary must hold at least <PAD> and <UNK>");
    nn_vocab_free(vocab);
    return NN_ERROR;
  }
  if (num_classes < 2 || num_classes > NN_MAX_CLASSES) {
    snprintf(err, NN_ERR_LEN, "number of classes must be from 2 to %d, got %d", NN_MAX_CLASSES,
             num_classes);
    nn_vocab_free(vocab);
    return NN_ERROR;
  }
  nn_model *m = nn_mem_calloc(nn_vocab_allocator(vocab), 1, sizeof *m);
  if (!m) goto nomem;
  m->mem = nn_vocab_allocator(vocab);
  m->K = 1;
  m->cfg = *cfg;
  m->vocab = vocab;
  vocab = NULL;
  rc = nn_backend_for_device(cfg->device, &m->be, err);
  if (rc != NN_OK) {
    nn_model_free(m);
    return rc;
  }
  m->C = num_classes;
  m->V = nn_vocab_count(m->vocab);
  m->E = cfg->embed_dim;
  m->H = cfg->hidden;
  m->dirs = cfg->bidirectional ? 2 : 1;
  m->D = m->H * m->dirs;
  m->F = cfg->fc_hidden;
  m->G = nn_cell_gates(cfg->cell);
  m->L = cfg->layers;
  m->S = cfg->subword_buckets > 0 ? cfg->subword_buckets : 0;
  if (m->L > NN_MAX_LAYERS) {
    snprintf(err, NN_ERR_LEN, "layers must be at most %d", NN_MAX_LAYERS);
    nn_model_free(m);
    return NN_ERROR;
  }
  m->labels = nn_mem_calloc(m->mem, (size_t)num_classes, sizeof *m->labels);
  m->label_lens = nn_mem_calloc(m->mem, (size_t)num_classes, sizeof *m->label_lens);
  if (!m->labels || !m->label_lens) goto nomem;
  for (int c = 0; c < num_classes; c++) {
    size_t n = strlen(labels[c]);
    m->labels[c] = nn_mem_alloc(m->mem, n + 1);
    if (!m->labels[c]) goto nomem;
    memcpy(m->labels[c], labels[c], n + 1);
    m->label_lens[c] = (int)n;
  }
  m->K = cfg->ensemble > 1 ? cfg->ensemble : 1;
  if (m->K > NN_MAX_MEMBERS) {
    snprintf(err, NN_ERR_LEN, "ensemble must be at most %d networks", NN_MAX_MEMBERS);
    nn_model_free(m);
    return NN_ERROR;
  }
  if (m->S > 0 && build_subwords(m) != NN_OK) goto nomem;
  m->tensors = nn_mem_alloc(m->mem, NN_MAX_TENSORS * sizeof *m->tensors);
  m->tensor_names = nn_mem_alloc(m->mem, NN_MAX_TENSORS * sizeof *m->tensor_names);
  if (!m->tensors || !m->tensor_names) goto nomem;
  for (int k = 0; k < m->K && m->K > 1; k++)
    if (!(m->member[k] = make_view(m))) goto nomem;
  m->nparams = build_tensor_table(m);
  if (m->ntensors > NN_MAX_TENSORS) {
    snprintf(err, NN_ERR_LEN, "model has %d tensors, at most %d are supported", m->ntensors,
             NN_MAX_TENSORS);
    nn_model_free(m);
    return NN_ERROR;
  }
  m->params = m->nparams <= SIZE_MAX / sizeof(float)
                  ? nn_backend_alloc(m->mem, m->be, m->nparams * sizeof(float))
                  : NULL;
  if (!m->params) goto nomem;
  if (on_device(m)) { /* drawn on the host, then uploaded */
    /* aligned as the CPU's parameters are: the accessors hand out the same kind of memory */
    m->host_params = m->nparams <= SIZE_MAX / sizeof(float)
                         ? nn_mem_alloc_aligned(m->mem, m->nparams * sizeof(float))
                         : NULL;
    if (!m->host_params) goto nomem;
    for (int k = 0; k < m->K && m->K > 1; k++) { /* the views read the backend's copy */
      m->member[k]->params = m->params;
      m->member[k]->host_params = m->host_params;
    }
    if (init && init_params(m, m->host_params, seed, stop, stop_ctx) != NN_OK) goto interrupted;
    m->params_state = NN_PARAMS_HOST_NEWER;
    rc = nn_model_sync(m, err);
    if (rc != NN_OK) {
      nn_model_free(m);
      return rc;
    }
    m->params_state = NN_PARAMS_SYNCED;
  } else {
    m->host_params = m->params;
    for (int k = 0; k < m->K && m->K > 1; k++)
      m->member[k]->params = m->member[k]->host_params = m->params;
    /* else zero: the backend's alloc zeroes */
    if (init && init_params(m, m->params, seed, stop, stop_ctx) != NN_OK) goto interrupted;
  }
  *out = m;
  return NN_OK;
interrupted:
  nn_model_free(m);
  snprintf(err, NN_ERR_LEN, "interrupted");
  return NN_INTERRUPTED;
nomem:
  nn_vocab_free(vocab);
  nn_model_free(m);
  snprintf(err, NN_ERR_LEN, "out of memory creating the model");
  return NN_NOMEM;
}

int nn_model_create(nn_model **out, const nn_config *cfg, nn_vocab *vocab,
                    const char *const *labels, int num_classes, uint64_t seed, char *err) {
  return model_create(out, cfg, vocab, labels, num_classes, 1, seed, NULL, NULL, err);
}

int nn_model_create_ex(nn_model **out, const nn_config *cfg, nn_vocab *vocab,
                       const char *const *labels, int num_classes, uint64_t seed,
                       nn_interrupt_fn stop, void *stop_ctx, char *err) {
  return model_create(out, cfg, vocab, labels, num_classes, 1, seed, stop, stop_ctx, err);
}

int nn_model_create_uninit(nn_model **out, const nn_config *cfg, nn_vocab *vocab,
                           const char *const *labels, int num_classes, char *err) {
  return model_create(out, cfg, vocab, labels, num_classes, 0, 0, NULL, NULL, err);
}

void nn_model_free(nn_model *m) {
  if (!m) return;
  if (m->owner) { /* a view is freed with its owner */
    return;
  }
  const nn_allocator *mem = m->mem; /* the vocabulary's: freed with it */
  /* model_infer.c owns the inference tables, the members' included; a member (a view) holds
   * nothing else of its own */
  nn_model_drop_inference(m);
  for (int k = 0; k < NN_MAX_MEMBERS; k++) nn_mem_free(mem, m->member[k]);
  nn_mem_free(mem, m->sub_start);
  nn_mem_free(mem, m->sub_rows);
  nn_mem_free(mem, m->tensors);
  nn_mem_free(mem, m->tensor_names);
  nn_vocab_free(m->vocab);
  if (m->labels)
    for (int c = 0; c < m->C; c++) nn_mem_free(mem, m->labels[c]);
  nn_mem_free(mem, m->labels);
  nn_mem_free(mem, m->label_lens);
  if (m->be) {
    if (on_device(m)) {
      nn_mem_free_aligned(mem, m->host_params);
      nn_mem_free_aligned(mem, m->host_grads);
      m->be->error(NULL, 0); /* nothing to report from freeing */
    }
    nn_backend_free(mem, m->be, m->params);
    nn_backend_free(mem, m->be, m->grads);
  }
  nn_mem_free(mem, m);
}

const nn_config *nn_model_config(const nn_model *m) { return &m->cfg; }
const nn_vocab *nn_model_vocab(const nn_model *m) { return m->vocab; }
int nn_model_num_classes(const nn_model *m) { return m->C; }
const char *nn_model_label(const nn_model *m, int c) {
  return c >= 0 && c < m->C ? m->labels[c] : NULL;
}
int nn_model_label_lookup(const nn_model *m, const char *label, int len) {
  for (int c = 0; c < m->C; c++)
    if (m->label_lens[c] == len && memcmp(m->labels[c], label, (size_t)len) == 0) return c;
  return -1;
}
size_t nn_model_param_count(const nn_model *m) { return m->nparams; }

/* ---------------------------------------------------------------- host mirrors */

int nn_backend_check(const nn_backend *be, const char *what, char *err) {
  char msg[NN_ERR_LEN - 64];
  if (!be->error || !be->error(msg, sizeof msg)) return NN_OK;
  snprintf(err, NN_ERR_LEN, "%s: %s", what, msg);
  return NN_ERROR;
}

/* A device model's host mirror brought up to date (a failed download leaves the error for the
 * next computation to report). */
static void params_to_host(nn_model *m) {
  if (!on_device(m) || m->params_state != NN_PARAMS_DEVICE_NEWER) return;
  m->be->download(m->host_params, m->params, m->nparams * sizeof(float));
  m->params_state = NN_PARAMS_SYNCED;
}

/* HOST_NEWER stays until the device changes the weights (nn_model_train_params) or they are
 * declared final (nn_model_prepare_inference): a caller may keep the nn_model_params pointer
 * and write through it between forwards (tests/test_gradcheck.c does), so every computation
 * until then uploads the mirror. */
int nn_model_sync(nn_model *m, char *err) {
  if (!on_device(m) || m->params_state != NN_PARAMS_HOST_NEWER) return NN_OK;
  m->be->upload(m->params, m->host_params, m->nparams * sizeof(float));
  return nn_backend_check(m->be, "uploading the parameters", err);
}

float *nn_model_train_params(nn_model *m) {
  nn_model_drop_inference(m); /* the weights are about to change */
  if (on_device(m)) m->params_state = NN_PARAMS_DEVICE_NEWER;
  return m->params;
}

const float *nn_model_weights(const nn_model *m) {
  params_to_host((nn_model *)m); /* the mirror is a cache: refreshing it changes no value */
  return m->host_params;
}

float *nn_model_params(nn_model *m) {
  nn_model_drop_inference(m); /* the caller may change the weights the table was folded from */
  params_to_host(m);
  if (on_device(m)) m->params_state = NN_PARAMS_HOST_NEWER; /* uploaded before the next use */
  return m->host_params;
}

/* Bytes of one side of the model: host (device = 0) or a device backend's memory (device = 1). */
/* The inference tables of one network (model_infer.c) added to *host and *backend. */
static void table_bytes(const nn_model *m, size_t *host, size_t *backend) {
  size_t GH = (size_t)m->G * m->H, f = sizeof(float);
  for (int d = 0; d < 2; d++)
    *backend += (size_t)m->V * GH * f * ((m->fold[d] ? 1 : 0) + (m->step1[d] ? 1 : 0));
  if (m->head_buf) *backend += (nn_aligned_floats((size_t)m->C * m->D) + (size_t)m->C) * f;
  if (m->transposed) *host += (size_t)m->L * m->dirs * nn_aligned_floats((size_t)m->H * GH) * f;
}

static size_t model_bytes(const nn_model *m, int device) {
  int dev = m->be && m->be->device_memory;
  size_t host = sizeof *m + nn_vocab_memory(m->vocab), backend = 0, f = sizeof(float);
  host += (m->tensors ? NN_MAX_TENSORS * (sizeof *m->tensors + sizeof *m->tensor_names) : 0);
  if (m->sub_start && !m->owner)
    host += ((size_t)m->V + 1 + (size_t)m->sub_start[m->V]) * sizeof(int);
  for (int c = 0; m->labels && c < m->C; c++)
    host += sizeof(char *) + sizeof(int) + (m->labels[c] ? (size_t)m->label_lens[c] + 1 : 0);
  backend += m->nparams * f * (m->params ? 1 : 0) + m->nparams * f * (m->grads ? 1 : 0);
  if (dev) host += m->nparams * f * ((m->host_params ? 1 : 0) + (m->host_grads ? 1 : 0));
  table_bytes(m, &host, &backend);
  for (int k = 0; k < NN_MAX_MEMBERS; k++)
    if (m->member[k]) {
      host += sizeof *m->member[k];
      table_bytes(m->member[k], &host, &backend);
    }
  if (!dev) return device ? 0 : host + backend;
  return device ? backend : host;
}

size_t nn_model_memory(const nn_model *m) { return m ? model_bytes(m, 0) : 0; }
size_t nn_model_device_memory(const nn_model *m) { return m ? model_bytes(m, 1) : 0; }

float *nn_model_grads(nn_model *m) {
  if (!on_device(m) || !m->grads) return m->grads;
  if (!m->host_grads && !(m->host_grads = nn_mem_alloc_aligned(m->mem, m->nparams * sizeof(float))))
    return NULL;
  m->be->download(m->host_grads, m->grads, m->nparams * sizeof(float));
  return m->host_grads;
}
int nn_model_tensor_count(const nn_model *m) { return m->ntensors; }
int nn_model_tensor(const nn_model *m, int index, nn_tensor_info *info) {
  if (index < 0 || index >= m->ntensors) return NN_ERROR;
  *info = m->tensors[index];
  return NN_OK;
}
int nn_model_tensor_find(const nn_model *m, const char *name) {
  for (int i = 0; i < m->ntensors; i++)
    if (strcmp(m->tensors[i].name, name) == 0) return i;
  return -1;
}

int nn_model_zero_grads(nn_model *m, char *err) {
  if (!m->grads) {
    m->grads = nn_backend_alloc(m->mem, m->be, m->nparams * sizeof(float));
    if (!m->grads) {
      if (nn_backend_check(m->be, "allocating gradients", err) == NN_OK)
        snprintf(err, NN_ERR_LEN, "out of memory allocating gradients");
      return NN_NOMEM;
    }
    return NN_OK; /* alloc zeroes */
  }
  m->be->zero(m->grads, m->nparams);
  return nn_backend_check(m->be, "zeroing gradients", err);
}

/* ---------------------------------------------------------------- workspace */

int nn_workspace_create(nn_workspace **out, const nn_allocator *mem, char *err) {
  *out = nn_mem_calloc(mem, 1, sizeof **out);
  if (!*out) {
    snprintf(err, NN_ERR_LEN, "out of memory creating a workspace");
    return NN_NOMEM;
  }
  (*out)->be = nn_backend_cpu();
  (*out)->mem = mem;
  return NN_OK;
}

void nn_workspace_free(nn_workspace *ws) {
  if (!ws) return;
  const nn_allocator *mem = ws->mem;
  for (int k = 0; k < NN_MAX_MEMBERS; k++) nn_workspace_free(ws->member_ws[k]);
  nn_mem_free(mem, ws->ens_buf);
  nn_backend_free(mem, ws->be, ws->buf);
  nn_backend_free(mem, ws->be, ws->dibuf);
  if (ws->be->error) ws->be->error(NULL, 0); /* nothing to report from freeing */
  nn_mem_free(mem, ws->ibuf);
  nn_mem_free(mem, ws->hbuf);
  nn_mem_free(mem, ws->emb_last);
  nn_mem_free(mem, ws);
}

/* Carve consecutive pieces out of the arena; with base == NULL only counts. */
typedef struct carver {
  float *base;
  size_t used;
} carver;
static float *carve(carver *cv, size_t n) {
  float *p = cv->base ? cv->base + cv->used : NULL;
  cv->used += (n + 15) & ~(size_t)15; /* 64-byte aligned pieces */
  return p;
}

static void carve_all(nn_workspace *ws, const nn_model *m, carver *cv) {
  size_t P = (size_t)ws->P, B = (size_t)ws->B, D = (size_t)m->D, H = (size_t)m->H;
  size_t GH = (size_t)m->G * H, FD = (size_t)(m->F > 0 ? m->F : m->D);
  int train = ws->training;
  /* Training keeps every layer's activations for backward. Inference keeps only what the next
   * layer reads: the embeddings only when the first layer is not folded, two layer outputs
   * used in turn, and one set of per-direction activations for all layers (its reverse input
   * sized for the wider of E and D). */
  ws->x0 = carve(cv, !train && m->fold[0] ? 0 : P * m->E);
  ws->emb_mask = train && m->cfg.embed_dropout > 0.0f ? carve(cv, P * m->E) : NULL;
  int compose = m->S > 0 && (train || !m->fold[0]); /* subwords: x0 is composed (forward_batch) */
  /* the gathered rows: a device backend's only (the host adds them in place) */
  ws->sub_tmp =
      compose && ws->Q > 0 && m->be->device_memory ? carve(cv, (size_t)ws->Q * m->E) : NULL;
  ws->sub_scale = compose ? carve(cv, P * m->E) : NULL;
  size_t widest = D > (size_t)m->E ? D : (size_t)m->E;
  for (int l = 0; l < m->L; l++) {
    ws->y[l] = train || l < 2 ? carve(cv, P * D) : ws->y[l - 2];
    size_t in = l == 0 ? (size_t)m->E : D;
    for (int d = 0; d < m->dirs; d++) {
      nn_rnn_acts *a = &ws->acts[l][d];
      if (!train && l > 0) {
        *a = ws->acts[0][d];
        continue;
      }
      a->x = d ? carve(cv, P * (train ? in : widest)) : NULL;
      a->pre = carve(cv, P * GH);
      a->hw = m->cfg.cell == NN_CELL_GRU ? carve(cv, P * GH) : NULL;
      a->h = carve(cv, P * H);
      a->c = m->cfg.cell == NN_CELL_LSTM ? carve(cv, P * H) : NULL;
    }
  }
  ws->scores = carve(cv, P);
  ws->alpha = carve(cv, P);
  ws->seg_scratch = carve(cv, 2 * B);
  ws->att_u = m->cfg.attention == NN_ATTN_ADDITIVE ? carve(cv, P * D) : NULL;
  if (m->cfg.attention == NN_ATTN_SELF) {
    ws->att_q = carve(cv, B * D);
    ws->att_k = carve(cv, P * D);
    ws->att_v = carve(cv, P * D);
  }
  if (m->cfg.attention == NN_ATTN_SELF || m->cfg.attention == NN_ATTN_DOT)
    ws->y_last = carve(cv, B * D);
  ws->ctx = carve(cv, B * D);
  ws->z1 = m->F > 0 ? carve(cv, B * m->F) : NULL;
  ws->mask = train && m->cfg.dropout > 0.0f ? carve(cv, B * FD) : NULL;
  ws->zd = carve(cv, B * FD);
  ws->logits = carve(cv, B * m->C);
  if (!train) return;
  size_t maxin = D > (size_t)m->E ? D : (size_t)m->E;
  ws->d_logits = carve(cv, B * m->C);
  ws->d_zd = carve(cv, B * FD);
  ws->d_z1 = m->F > 0 ? carve(cv, B * m->F) : NULL;
  ws->d_ctx = carve(cv, B * D);
  ws->d_scores = carve(cv, P);
  ws->d_alpha = carve(cv, P);
  ws->d_u = carve(cv, P * D);
  ws->d_q = carve(cv, B * D);
  ws->d_k = carve(cv, P * D);
  ws->d_v = carve(cv, P * D);
  ws->d_y = carve(cv, P * maxin);
  ws->d_x = carve(cv, P * maxin);
  ws->d_h = carve(cv, P * H);
  ws->d_c = carve(cv, P * H);
  ws->d_pre = carve(cv, P * GH);
  ws->d_hw = carve(cv, P * GH);
  ws->h_prev = carve(cv, P * H);
  ws->d_xdir = carve(cv, P * maxin);
}

/* The batch's tokens in *P (each row's length checked against 1..T) and, after the switch to
 * m's backend, its (row, subword table row) pairs in *Q (model.h); either over 2^28: an error. */
static int batch_count_tokens(const nn_workspace *ws, const nn_batch *batch, long long *P,
                              char *err) {
  int B = batch->B, T = batch->T;
  *P = 0;
  for (int b = 0; b < B; b++) {
    int len = batch->lengths[b];
    if (len < 1 || len > T) {
      snprintf(err, NN_ERR_LEN, "length %d of batch row %d is outside 1..%d", len, b + ws->row_base,
               T);
      return NN_ERROR;
    }
    *P += len;
  }
  if (*P > (1LL << 28)) {
    snprintf(err, NN_ERR_LEN, "batch too large (%lld tokens)", *P);
    return NN_ERROR;
  }
  return NN_OK;
}

static int batch_count_subwords(const nn_model *m, const nn_batch *batch, long long *Q, char *err) {
  int B = batch->B, T = batch->T;
  *Q = 0;
  if (m->S > 0)
    for (int b = 0; b < B; b++)
      for (int t = 0; t < batch->lengths[b]; t++) {
        int id = batch->tokens[(size_t)b * T + t];
        if (id >= 0 && id < m->V) *Q += m->sub_start[id + 1] - m->sub_start[id];
      }
  if (*Q > (1LL << 28)) {
    snprintf(err, NN_ERR_LEN, "batch too large (%lld subwords)", *Q);
    return NN_ERROR;
  }
  return NN_OK;
}

/* Lay out the index arena for B rows of at most T steps, P tokens and Q subword pairs: order
 * (B), nstep (T), then what the backend reads: last_row (B), ids, emb_link, rev, ids_rev,
 * row_sample (P each), lens (B), off (T+1) -- ids followed by emb_link, row_sample followed by
 * lens and off: the layouts of backend.h -- and the subword pairs: pair_row, pair_src (Q each;
 * for a device backend each followed by its Q links, the layout of embedding_backward).
 * *backend_part: where the backend's part starts, *emb_link and *pairs: those pieces. */
static int index_arena_layout(nn_workspace *ws, const nn_model *m, int B, int T, long long P,
                              long long Q, int **backend_part, int **emb_link, int **pairs) {
  int linked = m->be->device_memory; /* the pairs' links (batch_pair_links) */
  size_t ineed = 3 * (size_t)B + 2 * (size_t)T + 1 + 5 * (size_t)P + (linked ? 4 : 2) * (size_t)Q +
                 (Q > 0 || m->S > 0 ? (size_t)P : 0); /* + sub_n, host only */
  if (ineed > ws->icap) {
    int *p = nn_mem_realloc(ws->mem, ws->ibuf, ineed * sizeof(int));
    if (!p) return NN_NOMEM;
    ws->ibuf = p;
    ws->icap = ineed;
  }
  int *ip = ws->ibuf;
  ws->order = ip, ip += B;
  ws->nstep = ip, ip += T;
  ws->sub_n = m->S > 0 ? ip : NULL; /* each row's subword count (host only) */
  ip += m->S > 0 ? P : 0;
  *backend_part = ip; /* host copies, uploaded for a device backend */
  ws->last_row = ip, ip += B;
  ws->ids = ip, ip += P;
  *emb_link = ip;
  ip += P;
  ws->rev = ip, ip += P;
  ws->ids_rev = ip, ip += P;
  ws->row_sample = ip, ip += P;
  ws->lens = ip, ip += B;
  ws->off = ip, ip += T + 1;
  *pairs = ip; /* pair_row, then pair_src; each followed by its links on a device */
  ws->pair_row = ip, ip += linked ? 2 * Q : Q;
  ws->pair_src = ip, ip += linked ? 2 * Q : Q;
  ws->Q = (int)Q;
  return NN_OK;
}

/* The packed index arrays of the batch: rows sorted by length (counting sort, descending,
 * stable in the caller's order), per step the rows still running, each packed row's token,
 * its reverse and its sample, each sample's last row, and the subword pairs in row order.
 * *Tmax: the longest row. A token id outside the vocabulary: an error. */
static int batch_pack(nn_workspace *ws, const nn_model *m, const nn_batch *batch, long long P,
                      int *Tmax, char *err) {
  int B = batch->B, T = batch->T;
  int *nstep = ws->nstep, *off = ws->off;
  memset(nstep, 0, sizeof(int) * (size_t)T);
  for (int b = 0; b < B; b++) nstep[batch->lengths[b] - 1]++; /* histogram of lengths */
  int pos = 0;
  for (int len = T; len >= 1; len--) { /* start index of each length bucket */
    int count = nstep[len - 1];
    nstep[len - 1] = pos;
    pos += count;
  }
  for (int b = 0; b < B; b++) ws->order[nstep[batch->lengths[b] - 1]++] = b;
  for (int j = 0; j < B; j++) ws->lens[j] = batch->lengths[ws->order[j]];
  *Tmax = ws->lens[0];
  for (int t = 0; t < *Tmax; t++) { /* n[t] = samples longer than t */
    int n = 0;
    while (n < B && ws->lens[n] > t) n++;
    nstep[t] = n;
  }
  off[0] = 0;
  for (int t = 0; t < *Tmax; t++) off[t + 1] = off[t] + nstep[t];
  for (int t = 0; t < *Tmax; t++)
    for (int j = 0; j < nstep[t]; j++) {
      int r = off[t] + j, id = batch->tokens[(size_t)ws->order[j] * T + t];
      if (id < 0 || id >= m->V) {
        snprintf(err, NN_ERR_LEN, "token id %d at row %d position %d is outside 0..%d", id,
                 ws->order[j] + ws->row_base, t, m->V - 1);
        return NN_ERROR;
      }
      ws->ids[r] = id;
      ws->rev[r] = off[ws->lens[j] - 1 - t] + j;
      ws->row_sample[r] = j;
    }
  for (int j = 0; j < B; j++) ws->last_row[j] = off[ws->lens[j] - 1] + j;
  for (long long r = 0; r < P; r++) ws->ids_rev[r] = ws->ids[ws->rev[r]];
  for (long long r = 0, q = 0; r < P && m->S > 0; r++) { /* row order: deterministic sums */
    int id = ws->ids[r];
    ws->sub_n[r] = m->sub_start[id + 1] - m->sub_start[id];
    for (int i = m->sub_start[id]; i < m->sub_start[id + 1]; i++, q++) {
      ws->pair_row[q] = (int)r;
      ws->pair_src[q] = m->sub_rows[i];
    }
  }
  return NN_OK;
}

/* link (backend.h, embedding_backward) of the n rows of ids, targets in 0..R-1: each row's next
 * row with the same target and whether it is the target's first, through a per-target "last row
 * seen" table (ws->emb_last, left all -1). */
static int batch_links(nn_workspace *ws, const int *ids, int *link, long long n, size_t R) {
  if (R > ws->emb_cap) {
    int *p = nn_mem_realloc(ws->mem, ws->emb_last, R * sizeof(int));
    if (!p) return NN_NOMEM;
    for (size_t v = ws->emb_cap; v < R; v++) p[v] = -1;
    ws->emb_last = p;
    ws->emb_cap = R;
  }
  for (long long r = n - 1; r >= 0; r--) {
    int id = ids[r];
    link[r] = (ws->emb_last[id] + 1) << 1; /* next + 1 (0: none), head bit below */
    ws->emb_last[id] = (int)r;
  }
  for (long long r = 0; r < n; r++) {
    int id = ids[r];
    if (ws->emb_last[id] == (int)r) link[r] |= 1; /* the first row of its target */
    ws->emb_last[id] = -1;
  }
  return NN_OK;
}

/* A device backend sums the subword pairs through embedding_backward, whose links give each
 * target its rows in pair order: the CPU's sums, bit for bit, and the same at every run (atomic
 * additions into a row that several pairs share would add in whatever order the GPU ran them).
 * pair_row's links serve the forward pass (a token's rows, contiguous); pair_src's, over the
 * table's V + S rows, the backward (a subword row shared by many tokens). */
static int batch_pair_links(nn_workspace *ws, const nn_model *m, long long Q, int training) {
  if (Q <= 0) return NN_OK;
  int *row_link = ws->pair_row + Q, *src_link = ws->pair_src + Q;
  for (long long q = 0; q < Q; q++) { /* pair_row ascends: a row's pairs are contiguous */
    int next = q + 1 < Q && ws->pair_row[q + 1] == ws->pair_row[q];
    int head = q == 0 || ws->pair_row[q - 1] != ws->pair_row[q];
    row_link[q] = (next ? (int)(q + 2) << 1 : 0) | head;
  }
  if (!training) { /* uploaded, never read */
    memset(src_link, 0, (size_t)Q * sizeof *src_link);
    return NN_OK;
  }
  return batch_links(ws, ws->pair_src, src_link, Q, (size_t)m->V + (size_t)m->S);
}

/* A device backend: the backend's part of the index arena (from backend_part; the subword pairs
 * from pairs) uploaded to device memory, the workspace's index pointers moved there, and the
 * host buffer that draws or fills what the device reads sized. */
static int batch_upload(nn_workspace *ws, const nn_model *m, const int *backend_part,
                        const int *pairs, long long P, long long Q, int training) {
  int B = ws->B;
  size_t dneed = 2 * (size_t)B + 5 * (size_t)P + (size_t)ws->Tmax + 1 + 4 * (size_t)Q;
  size_t FD = (size_t)(m->F > 0 ? m->F : m->D);
  if (dneed > ws->dicap) { /* grows only */
    nn_backend_free(ws->mem, ws->be, ws->dibuf);
    ws->dibuf = nn_backend_alloc(ws->mem, ws->be, dneed * sizeof(int));
    ws->dicap = ws->dibuf ? dneed : 0;
    if (!ws->dibuf) return NN_NOMEM;
  }
  ws->be->upload(ws->dibuf, backend_part, (dneed - 4 * (size_t)Q) * sizeof(int));
  if (Q > 0) /* the pairs and their links after the rest (the host arena has off's T + 1 slots
              * before them) */
    ws->be->upload(ws->dibuf + dneed - 4 * (size_t)Q, pairs, 4 * (size_t)Q * sizeof(int));
  ws->pair_row = ws->dibuf + dneed - 4 * (size_t)Q;
  ws->pair_src = ws->pair_row + 2 * Q;
  int *dp = ws->dibuf;
  ws->last_row = dp, dp += B;
  ws->ids = dp, dp += 2 * P; /* followed by emb_link */
  ws->rev = dp, dp += P;
  ws->ids_rev = dp, dp += P;
  ws->row_sample = dp; /* followed by lens and off */
  size_t hneed = (size_t)B * (m->C > (int)FD ? (size_t)m->C : FD);
  if ((size_t)P > hneed) hneed = (size_t)P;
  if ((training && m->cfg.embed_dropout > 0.0f) || Q > 0)   /* drawn / filled on the host */
    if ((size_t)P * m->E > hneed) hneed = (size_t)P * m->E; /* embed_dropout, sub_scale */
  if (hneed > ws->hcap) {
    float *h = nn_mem_realloc(ws->mem, ws->hbuf, hneed * sizeof(float));
    if (!h) return NN_NOMEM;
    ws->hbuf = h;
    ws->hcap = hneed;
  }
  return NN_OK;
}

/* The activation arena: measured by a dry run of carve_all, grown when it is too small, then
 * carved. */
static int arena_carve(nn_workspace *ws, const nn_model *m) {
  carver cv = {NULL, 0};
  carve_all(ws, m, &cv);
  if (cv.used > ws->cap) {
    nn_backend_free(ws->mem, ws->be, ws->buf);
    ws->buf = nn_backend_alloc(ws->mem, ws->be, cv.used * sizeof(float));
    ws->cap = ws->buf ? cv.used : 0;
    if (!ws->buf) return NN_NOMEM;
  }
  cv.base = ws->buf;
  cv.used = 0;
  carve_all(ws, m, &cv);
  return NN_OK;
}

/* Sort the batch by length (longest first, stable), build the packed index arrays and size
 * the arena for this batch. */
int nn_workspace_prepare(nn_workspace *ws, const nn_model *m, const nn_batch *batch, int training,
                         char *err) {
  /* until this batch is fully laid out, the workspace holds no batch a backward could use */
  ws->training = 0;
  ws->B = ws->T = 0;
  int B = batch->B, T = batch->T;
  if (B < 1 || T < 1 || !batch->tokens || !batch->lengths) {
    snprintf(err, NN_ERR_LEN, "empty batch (B=%d, T=%d)", B, T);
    return NN_ERROR;
  }
  long long P = 0, Q = 0;
  int rc = batch_count_tokens(ws, batch, &P, err);
  if (rc != NN_OK) return rc;
  /* the workspace follows its model's backend */
  if (ws->be != m->be) {
    nn_backend_free(ws->mem, ws->be, ws->buf);
    nn_backend_free(ws->mem, ws->be, ws->dibuf);
    ws->buf = NULL;
    ws->dibuf = NULL;
    ws->cap = ws->dicap = 0;
    ws->be = m->be;
  }
  rc = batch_count_subwords(m, batch, &Q, err);
  if (rc != NN_OK) return rc;
  int *backend_part, *emb_link, *pairs, Tmax;
  if (index_arena_layout(ws, m, B, T, P, Q, &backend_part, &emb_link, &pairs) != NN_OK) goto nomem;
  rc = batch_pack(ws, m, batch, P, &Tmax, err);
  if (rc != NN_OK) return rc;
  ws->B = B;
  ws->T = T;
  ws->P = (int)P;
  ws->Tmax = Tmax;
  ws->training = training;
  if (m->be->device_memory && training &&
      batch_links(ws, ws->ids, emb_link, P, (size_t)m->V) != NN_OK)
    goto nomem;
  if (m->be->device_memory && batch_pair_links(ws, m, Q, training) != NN_OK) goto nomem;
  if (m->be->device_memory && batch_upload(ws, m, backend_part, pairs, P, Q, training) != NN_OK)
    goto nomem;
  if (arena_carve(ws, m) != NN_OK) goto nomem;
  rc = nn_backend_check(ws->be, "preparing the batch", err);
  if (rc != NN_OK) ws->training = ws->B = ws->T = 0;
  return rc;
nomem:
  ws->training = ws->B = ws->T = 0;
  if (nn_backend_check(ws->be, "preparing the batch", err) == NN_OK)
    snprintf(err, NN_ERR_LEN, "out of memory for a batch of %d rows and %lld tokens", B, P);
  return NN_NOMEM;
}

/* ---------------------------------------------------------------- subwords */

/* x0 (P, E) holds each row's word vector; make it the mean of that vector and the row's
 * subword vectors (model.h): x0[r] = (E[id] + sum_q S[pair_src[q]]) / (1 + n_r). The pairs are
 * in row order and summed in that order (on a device through the links of batch_pair_links), so
 * the sums are deterministic. */
static void subwords_forward(const nn_model *m, nn_workspace *ws) {
  const nn_backend *be = m->be;
  int E = m->E;
  size_t PE = (size_t)ws->P * E;
  float *scale = be->device_memory ? ws->hbuf : ws->sub_scale; /* filled on the host */
  for (int r = 0; r < ws->P; r++) {
    float s = 1.0f / (float)(1 + ws->sub_n[r]);
    for (int e = 0; e < E; e++) scale[(size_t)r * E + e] = s;
  }
  if (be->device_memory) be->upload(ws->sub_scale, scale, PE * sizeof(float));
  const float *table = m->params + m->emb; /* the member's V + S rows */
  if (ws->Q > 0 && !be->device_memory) {   /* host memory: one pass, the same sums in order */
    for (int q = 0; q < ws->Q; q++) {
      float *x = ws->x0 + (size_t)ws->pair_row[q] * E;
      const float *s = table + (size_t)ws->pair_src[q] * E;
      for (int e = 0; e < E; e++) x[e] += s[e];
    }
  } else if (ws->Q > 0) { /* each row's subword vectors summed in pair order (the links) */
    be->gather_rows(ws->sub_tmp, E, table, E, ws->pair_src, ws->Q, E);
    be->embedding_backward(ws->x0, ws->sub_tmp, ws->pair_row, ws->Q, E, -1);
  }
  be->mul(ws->x0, ws->x0, ws->sub_scale, PE);
}

/* d_x (P, E), already scaled by 1 / (1 + n) (backward_into), into the subword rows' gradients
 * (accumulated): dS[pair_src[q]] += d_x[pair_row[q]], in pair order. */
static void subwords_backward(const nn_model *m, nn_workspace *ws, float *grads) {
  if (ws->Q == 0) return;
  const nn_backend *be = m->be;
  int E = m->E;
  if (!be->device_memory) { /* host memory: one pass, the same sums in order */
    for (int q = 0; q < ws->Q; q++) {
      float *g = grads + m->emb + (size_t)ws->pair_src[q] * E;
      const float *d = ws->d_x + (size_t)ws->pair_row[q] * E;
      for (int e = 0; e < E; e++) g[e] += d[e];
    }
    return;
  }
  be->gather_rows(ws->sub_tmp, E, ws->d_x, E, ws->pair_row, ws->Q, E);
  be->embedding_backward(grads + m->emb, ws->sub_tmp, ws->pair_src, ws->Q, E, -1);
}

/* ---------------------------------------------------------------- classifier head */

/* fc1 -> dropout -> fc2 on the attention context.  ctx (B, D) -> logits (B, C) */
static void head_forward(const nn_model *m, nn_workspace *ws, nn_rng *rng) {
  const nn_backend *be = m->be;
  const float *p = m->params;
  int B = ws->B, FD = m->F > 0 ? m->F : m->D;
  if (!ws->training && m->head_w) { /* inference: the folded head (model.h) */
    be->sgemm(0, 1, B, m->C, m->D, 1.0f, ws->ctx, m->D, m->head_w, m->D, 0.0f, ws->logits, m->C);
    be->add_bias(ws->logits, m->C, m->head_b, B, m->C);
    return;
  }
  const float *z = ws->ctx;
  if (m->F > 0) { /* z1 (B,F) = ctx W1^T + b1 */
    be->sgemm(0, 1, B, m->F, m->D, 1.0f, ws->ctx, m->D, p + m->fc1_w, m->D, 0.0f, ws->z1, m->F);
    be->add_bias(ws->z1, m->F, p + m->fc1_b, B, m->F);
    z = ws->z1;
  }
  if (ws->mask) { /* inverted dropout, as torch.nn.Dropout */
    float keep = 1.0f - m->cfg.dropout, scale = 1.0f / keep;
    size_t n = (size_t)B * FD;
    float *mask = be->device_memory ? ws->hbuf : ws->mask; /* drawn on the host */
    nn_rng_dropout_mask(rng, mask, n, keep, scale);
    if (be->device_memory) be->upload(ws->mask, mask, n * sizeof(float));
    be->mul(ws->zd, z, ws->mask, n);
  } else {
    be->gather_rows(ws->zd, FD, z, FD, NULL, B, FD);
  }
  be->sgemm(0, 1, B, m->C, FD, 1.0f, ws->zd, FD, p + m->fc2_w, FD, 0.0f, ws->logits, m->C);
  be->add_bias(ws->logits, m->C, p + m->fc2_b, B, m->C);
}

/* d_logits (B, C) -> d_ctx (B, D); parameter gradients accumulate */
static void head_backward(const nn_model *m, nn_workspace *ws) {
  const nn_backend *be = m->be;
  const float *p = m->params;
  float *g = ws->grads;
  int B = ws->B, FD = m->F > 0 ? m->F : m->D;
  be->sgemm(1, 0, m->C, FD, B, 1.0f, ws->d_logits, m->C, ws->zd, FD, 1.0f, g + m->fc2_w, FD);
  be->bias_grad(g + m->fc2_b, ws->d_logits, m->C, B, m->C);
  be->sgemm(0, 0, B, FD, m->C, 1.0f, ws->d_logits, m->C, p + m->fc2_w, FD, 0.0f, ws->d_zd, FD);
  float *dz = m->F > 0 ? ws->d_z1 : ws->d_ctx;
  if (ws->mask) be->mul(dz, ws->d_zd, ws->mask, (size_t)B * FD);
  else be->gather_rows(dz, FD, ws->d_zd, FD, NULL, B, FD);
  if (m->F > 0) {
    be->sgemm(1, 0, m->F, m->D, B, 1.0f, ws->d_z1, m->F, ws->ctx, m->D, 1.0f, g + m->fc1_w, m->D);
    be->bias_grad(g + m->fc1_b, ws->d_z1, m->F, B, m->F);
    be->sgemm(0, 0, B, m->D, m->F, 1.0f, ws->d_z1, m->F, p + m->fc1_w, m->D, 0.0f, ws->d_ctx, m->D);
  }
}

/* ---------------------------------------------------------------- the whole model */

nn_model *nn_model_member(const nn_model *m, int k) {
  return (nn_model *)(m->K > 1 ? m->member[k] : m);
}

nn_workspace *nn_workspace_member(nn_workspace *ws, int k) {
  if (k <= 0) return ws;
  if (!ws->member_ws[k]) {
    char err[NN_ERR_LEN];
    if (nn_workspace_create(&ws->member_ws[k], ws->mem, err) != NN_OK) return NULL;
  }
  return ws->member_ws[k];
}

/* Inference of an ensemble: each member's forward on its own workspace, the softmax
 * probabilities averaged (logits = their log, so that softmax(logits) gives the average back)
 * and the attention averaged. Members run one after another, member 0 first, so the result is
 * the same for any number of threads. */
static int ensemble_forward(nn_model *m, nn_workspace *ws, const nn_batch *batch, float *logits,
                            float *attn, float *pooled, char *err) {
  int rc = nn_model_sync(m, err);
  if (rc != NN_OK) return rc;
  size_t BC = (size_t)batch->B * m->C, BT = attn ? (size_t)batch->B * batch->T : 0;
  size_t BD = pooled ? (size_t)batch->B * m->D : 0;
  size_t need = 2 * BC + 2 * BT + BD;
  if (need > ws->ens_cap) {
    float *p = nn_mem_realloc(ws->mem, ws->ens_buf, need * sizeof *p);
    if (!p) {
      snprintf(err, NN_ERR_LEN, "out of memory for a batch of %d rows", batch->B);
      return NN_NOMEM;
    }
    ws->ens_buf = p;
    ws->ens_cap = need;
  }
  float *probs = ws->ens_buf, *member_logits = probs + BC, *sum_attn = member_logits + BC;
  float *member_attn = sum_attn + BT, *member_pooled = member_attn + BT;
  memset(probs, 0, BC * sizeof *probs);
  if (attn) memset(sum_attn, 0, BT * sizeof *sum_attn);
  for (int k = 0; k < m->K; k++) {
    nn_workspace *wk = nn_workspace_member(ws, k);
    if (!wk) {
      snprintf(err, NN_ERR_LEN, "out of memory creating a workspace");
      return NN_NOMEM;
    }
    if (pooled) { /* member k's context is columns [k D, (k+1) D) of each row */
      rc = nn_model_forward_pooled(m->member[k], wk, batch, member_logits, member_pooled, err);
      for (int b = 0; rc == NN_OK && b < batch->B; b++)
        memcpy(pooled + ((size_t)b * m->K + k) * m->D, member_pooled + (size_t)b * m->D,
               (size_t)m->D * sizeof *pooled);
    } else {
      rc = nn_model_forward(m->member[k], wk, batch, 0, NULL, member_logits,
                            attn ? member_attn : NULL, err);
    }
    if (rc != NN_OK) return rc;
    nn_softmax_rows(member_logits, member_logits, batch->B, m->C);
    for (size_t i = 0; i < BC; i++) probs[i] += member_logits[i];
    for (size_t i = 0; i < BT; i++) sum_attn[i] += member_attn[i];
  }
  float inv = 1.0f / (float)m->K;
  for (size_t i = 0; i < BC; i++) {
    float p = probs[i] * inv;
    logits[i] = logf(p > FLT_MIN ? p : FLT_MIN); /* a probability that underflowed: ~-87 */
  }
  for (size_t i = 0; i < BT; i++) attn[i] = sum_attn[i] * inv;
  return NN_OK;
}

static int forward_batch(nn_model *m, nn_workspace *ws, const nn_batch *batch, int training,
                         nn_rng *rng, float *logits, float *attn, char *err);

/* Bytes of the workspace (float arena and index arrays) of a batch of B rows, P tokens. */
static size_t workspace_bytes(const nn_model *m, size_t P, int B, int T, int training) {
  nn_workspace shape;
  memset(&shape, 0, sizeof shape);
  shape.P = (int)P;
  size_t most = P * (size_t)m->sub_max; /* at most: every token the most subwords */
  shape.Q = most > ((size_t)1 << 28) ? 1 << 28 : (int)most;
  shape.B = B;
  shape.training = training;
  carver cv = {NULL, 0};
  carve_all(&shape, m, &cv);
  return cv.used * sizeof(float) + (3 * (size_t)B + 2 * (size_t)T + 1 + 5 * P) * sizeof(int);
}

/* Inference on the host runs the batch in row ranges whose workspace stays within
 * NN_INFER_WORKSPACE_MAX (model.h): a batch of long texts on a deep model would otherwise take
 * gigabytes. Rows are independent at inference, so the results are those of the whole batch.
 * A device backend runs the batch whole: its memory is the device's, and a batch too large
 * for it fails cleanly (cudaMalloc), as tests/test_cuda.c checks. */
int nn_model_forward(nn_model *m, nn_workspace *ws, const nn_batch *batch, int training,
                     nn_rng *rng, float *logits, float *attn, char *err) {
  if (m->K > 1) {
    if (training) {
      snprintf(err, NN_ERR_LEN, "an ensemble trains through its members (nn_model_member)");
      return NN_ERROR;
    }
    return ensemble_forward(m, ws, batch, logits, attn, NULL, err);
  }
  ws->row_base = 0;
  int B = batch->B, T = batch->T;
  if (training || m->be->device_memory || B <= 1 || T < 1 || !batch->tokens || !batch->lengths)
    return forward_batch(m, ws, batch, training, rng, logits, attn, err);
  size_t P = 0;
  for (int b = 0; b < B; b++)
    P += batch->lengths[b] >= 1 && batch->lengths[b] <= T ? (size_t)batch->lengths[b] : 1;
  if (workspace_bytes(m, P, B, T, 0) <= NN_INFER_WORKSPACE_MAX)
    return forward_batch(m, ws, batch, training, rng, logits, attn, err);
  int rc = NN_OK;
  for (int b0 = 0, b1; b0 < B && rc == NN_OK; b0 = b1) {
    size_t rows_P = 0;
    for (b1 = b0; b1 < B; b1++) {
      int len = batch->lengths[b1];
      size_t next = rows_P + (len >= 1 && len <= T ? (size_t)len : 1);
      if (b1 > b0 && workspace_bytes(m, next, b1 - b0 + 1, T, 0) > NN_INFER_WORKSPACE_MAX) break;
      rows_P = next;
    }
    nn_batch part = {batch->tokens + (size_t)b0 * T, batch->lengths + b0, NULL, b1 - b0, T};
    ws->row_base = b0;
    rc = forward_batch(m, ws, &part, 0, rng, logits + (size_t)b0 * m->C,
                       attn ? attn + (size_t)b0 * T : NULL, err);
  }
  ws->row_base = 0;
  return rc;
}

/* The attention context of the batch just run (ws->ctx, sorted order) into pooled (B, D) in the
 * caller's row order. */
static int copy_pooled(const nn_model *m, nn_workspace *ws, float *pooled, char *err) {
  size_t D = (size_t)m->D;
  for (int j = 0; j < ws->B; j++) {
    float *dst = pooled + (size_t)ws->order[j] * D;
    if (m->be->device_memory) m->be->download(dst, ws->ctx + (size_t)j * D, D * sizeof(float));
    else memcpy(dst, ws->ctx + (size_t)j * D, D * sizeof(float));
  }
  return nn_backend_check(m->be, "forward", err);
}

int nn_model_forward_pooled(nn_model *m, nn_workspace *ws, const nn_batch *batch, float *logits,
                            float *pooled, char *err) {
  if (m->K > 1) return ensemble_forward(m, ws, batch, logits, NULL, pooled, err);
  ws->row_base = 0;
  int B = batch->B, T = batch->T, rc = NN_OK;
  if (m->be->device_memory || B <= 1 || T < 1 || !batch->tokens || !batch->lengths) {
    rc = forward_batch(m, ws, batch, 0, NULL, logits, NULL, err);
    return rc == NN_OK ? copy_pooled(m, ws, pooled, err) : rc;
  }
  /* row ranges whose workspace fits NN_INFER_WORKSPACE_MAX, as nn_model_forward */
  for (int b0 = 0, b1; b0 < B && rc == NN_OK; b0 = b1) {
    size_t rows_P = 0;
    for (b1 = b0; b1 < B; b1++) {
      int len = batch->lengths[b1];
      size_t next = rows_P + (len >= 1 && len <= T ? (size_t)len : 1);
      if (b1 > b0 && workspace_bytes(m, next, b1 - b0 + 1, T, 0) > NN_INFER_WORKSPACE_MAX) break;
      rows_P = next;
    }
    nn_batch part = {batch->tokens + (size_t)b0 * T, batch->lengths + b0, NULL, b1 - b0, T};
    ws->row_base = b0;
    rc = forward_batch(m, ws, &part, 0, NULL, logits + (size_t)b0 * m->C, NULL, err);
    if (rc == NN_OK) rc = copy_pooled(m, ws, pooled + (size_t)b0 * m->D, err);
  }
  ws->row_base = 0;
  return rc;
}

int nn_model_pooled_dim(const nn_model *m) { return m->K * m->D; } /* members side by side */

int nn_model_head_input_dim(const nn_model *m) { return m->K * (m->F > 0 ? m->F : m->D); }

void nn_model_head_input(const nn_model *m, const float *pooled, int B, float *out) {
  const float *w = nn_model_weights(m);     /* the members' views share the whole's parameters */
  const nn_backend *cpu = nn_backend_cpu(); /* host memory, whatever the model's backend */
  int PD = nn_model_pooled_dim(m), HD = nn_model_head_input_dim(m);
  for (int k = 0; k < m->K; k++) {
    const nn_model *mk = nn_model_member(m, k);
    int D = mk->D, F = mk->F;
    const float *c = pooled + (size_t)k * D;
    float *o = out + (size_t)k * (F > 0 ? F : D);
    if (F <= 0) {
      cpu->gather_rows(o, HD, c, PD, NULL, B, D);
      continue;
    }
    /* fc1: c W1^T + b1, W1 (F, D) as PyTorch's Linear */
    cpu->sgemm(0, 1, B, F, D, 1.0f, c, PD, w + mk->fc1_w, D, 0.0f, o, HD);
    cpu->add_bias(o, HD, w + mk->fc1_b, B, F);
  }
}

static int forward_batch(nn_model *m, nn_workspace *ws, const nn_batch *batch, int training,
                         nn_rng *rng, float *logits, float *attn, char *err) {
  if (training && (m->cfg.dropout > 0.0f || m->cfg.embed_dropout > 0.0f) && !rng) {
    snprintf(err, NN_ERR_LEN, "training forward with dropout needs a random generator");
    return NN_ERROR;
  }
  int rc = nn_model_sync(m, err);
  if (rc != NN_OK) return rc;
  rc = nn_workspace_prepare(ws, m, batch, training, err);
  if (rc != NN_OK) return rc;
  const nn_backend *be = m->be;
  if (training || !m->fold[0]) /* a folded first layer needs no embeddings */
    be->embedding_forward(ws->x0, m->params + m->emb, ws->ids, ws->P, m->E); /* (P, E) */
  if (ws->sub_scale) subwords_forward(m, ws);
  if (ws->emb_mask) { /* embed_dropout: inverted dropout on x0, in place (drawn first) */
    float keep = 1.0f - m->cfg.embed_dropout;
    size_t n = (size_t)ws->P * m->E;
    float *mask = be->device_memory ? ws->hbuf : ws->emb_mask;
    nn_rng_dropout_mask(rng, mask, n, keep, 1.0f / keep);
    if (be->device_memory) be->upload(ws->emb_mask, mask, n * sizeof(float));
    be->mul(ws->x0, ws->x0, ws->emb_mask, n);
  }
  nn_recurrent_forward(m, ws); /* (P, D) */
  nn_attention_forward(m, ws); /* (B, D) */
  head_forward(m, ws, rng);    /* (B, C) */
  /* back to the caller's row order, through host copies for a device backend */
  const float *z = ws->logits;
  if (be->device_memory) {
    be->download(ws->hbuf, ws->logits, sizeof(float) * (size_t)ws->B * m->C);
    z = ws->hbuf;
  }
  rc = nn_backend_check(be, "forward", err);
  if (rc != NN_OK) return rc;
  for (int j = 0; j < ws->B; j++)
    memcpy(logits + (size_t)ws->order[j] * m->C, z + (size_t)j * m->C, sizeof(float) * m->C);
  if (attn) {
    const float *alpha = ws->alpha;
    if (be->device_memory) {
      be->download(ws->hbuf, ws->alpha, sizeof(float) * (size_t)ws->P);
      alpha = ws->hbuf;
      rc = nn_backend_check(be, "forward", err);
      if (rc != NN_OK) return rc;
    }
    memset(attn, 0, sizeof(float) * (size_t)ws->B * ws->T);
    for (int t = 0; t < ws->Tmax; t++)
      for (int j = 0; j < ws->nstep[t]; j++)
        attn[(size_t)ws->order[j] * ws->T + t] = alpha[ws->off[t] + j];
  }
  return NN_OK;
}

int nn_model_backward_into(const nn_model *m, nn_workspace *ws, const nn_batch *batch,
                           const float *dlogits, float *grads, char *err) {
  if (m->K > 1) {
    snprintf(err, NN_ERR_LEN, "an ensemble trains through its members (nn_model_member)");
    return NN_ERROR;
  }
  if (!ws->training || ws->B != batch->B || ws->T != batch->T) {
    snprintf(err, NN_ERR_LEN, "backward needs a training forward of the same batch first");
    return NN_ERROR;
  }
  ws->grads = grads;
  const nn_backend *be = m->be;
  float *dl = be->device_memory ? ws->hbuf : ws->d_logits; /* permuted on the host */
  for (int j = 0; j < ws->B; j++)
    memcpy(dl + (size_t)j * m->C, dlogits + (size_t)ws->order[j] * m->C, sizeof(float) * m->C);
  if (be->device_memory) be->upload(ws->d_logits, dl, sizeof(float) * (size_t)ws->B * m->C);
  head_backward(m, ws);         /* -> d_ctx (B, D) */
  nn_attention_backward(m, ws); /* -> d_y (P, D) of the last layer */
  nn_recurrent_backward(m, ws); /* -> d_x (P, E) */
  if (ws->emb_mask) be->mul(ws->d_x, ws->d_x, ws->emb_mask, (size_t)ws->P * m->E);
  if (ws->sub_scale) be->mul(ws->d_x, ws->d_x, ws->sub_scale, (size_t)ws->P * m->E);
  be->embedding_backward(grads + m->emb, ws->d_x, ws->ids, ws->P, m->E, NN_PAD);
  if (ws->sub_scale) subwords_backward(m, ws, grads);
  return nn_backend_check(be, "backward", err);
}

int nn_model_backward(nn_model *m, nn_workspace *ws, const nn_batch *batch, const float *dlogits,
                      char *err) {
  if (!m->grads) {
    int rc = nn_model_zero_grads(m, err);
    if (rc != NN_OK) return rc;
  }
  return nn_model_backward_into(m, ws, batch, dlogits, m->grads, err);
}

/* ---------------------------------------------------------------- loss */

void nn_softmax_rows(float *probs, const float *logits, int B, int C) {
  for (int b = 0; b < B; b++) {
    const float *z = logits + (size_t)b * C;
    float *p = probs + (size_t)b * C;
    float mx = z[0];
    for (int c = 1; c < C; c++) mx = z[c] > mx ? z[c] : mx;
    float sum = 0.0f;
    for (int c = 0; c < C; c++) sum += (p[c] = expf(z[c] - mx));
    for (int c = 0; c < C; c++) p[c] /= sum;
  }
}

/* log sum_c exp(z[c]), shifted by the row's maximum (in double) */
static double row_logsumexp(const float *z, int C) {
  float mx = z[0];
  for (int c = 1; c < C; c++) mx = z[c] > mx ? z[c] : mx;
  double sum = 0.0;
  for (int c = 0; c < C; c++) sum += exp((double)z[c] - mx);
  return log(sum) + mx;
}

/* Label smoothing (torch.nn.CrossEntropyLoss(weight=w, label_smoothing=s), mean reduction):
 *   loss_b = (1 - s) w[y_b] nll_b(y_b) + s / C sum_c w[c] nll_b(c),  nll_b(c) = -log p_b[c]
 * summed over the batch and divided by sum_b w[y_b] (PyTorch normalises the smoothing term by
 * the same weight sum); d loss_b / d z_b[j] = (1 - s) w[y] (p[j] - [j = y]) + s / C (W p[j] -
 * w[j]), W = sum_c w[c]. */
static double cross_entropy_smoothed_part(float *dlogits, const float *logits, const int *labels,
                                          const float *class_weights, int B, int C, double wsum,
                                          float smoothing) {
  double s = smoothing, loss = 0.0, W = 0.0;
  for (int c = 0; c < C; c++) W += class_weights ? class_weights[c] : 1.0f;
  for (int b = 0; b < B; b++) {
    const float *z = logits + (size_t)b * C;
    float *d = dlogits + (size_t)b * C;
    int y = labels[b];
    double wy = class_weights ? class_weights[y] : 1.0f;
    double logsum = row_logsumexp(z, C), smooth = 0.0;
    for (int c = 0; c < C; c++)
      smooth += (class_weights ? class_weights[c] : 1.0f) * (logsum - z[c]);
    loss += (1.0 - s) * wy * (logsum - z[y]) + s / C * smooth;
    for (int c = 0; c < C; c++) {
      double p = exp((double)z[c] - logsum), wc = class_weights ? class_weights[c] : 1.0f;
      d[c] = (float)(((1.0 - s) * wy * (p - (c == y ? 1.0 : 0.0)) + s / C * (W * p - wc)) / wsum);
    }
  }
  return loss;
}

double nn_cross_entropy_weight_sum(const int *labels, const float *class_weights, int B) {
  double wsum = 0.0;
  for (int b = 0; b < B; b++) wsum += class_weights ? class_weights[labels[b]] : 1.0f;
  return wsum;
}

double nn_cross_entropy_part(float *dlogits, const float *logits, const int *labels,
                             const float *class_weights, int B, int C, double wsum,
                             float smoothing) {
  if (smoothing > 0.0f)
    return cross_entropy_smoothed_part(dlogits, logits, labels, class_weights, B, C, wsum,
                                       smoothing);
  double loss = 0.0;
  for (int b = 0; b < B; b++) {
    const float *z = logits + (size_t)b * C;
    float *d = dlogits + (size_t)b * C;
    int y = labels[b];
    float w = class_weights ? class_weights[y] : 1.0f;
    double logsum = row_logsumexp(z, C);
    loss += w * (logsum - z[y]);
    for (int c = 0; c < C; c++)
      d[c] = (float)(w / wsum * (exp((double)z[c] - logsum) - (c == y ? 1.0 : 0.0)));
  }
  return loss;
}

float nn_cross_entropy(float *dlogits, const float *logits, const int *labels,
                       const float *class_weights, int B, int C) {
  return nn_cross_entropy_smoothed(dlogits, logits, labels, class_weights, B, C, 0.0f);
}

float nn_cross_entropy_smoothed(float *dlogits, const float *logits, const int *labels,
                                const float *class_weights, int B, int C, float smoothing) {
  double wsum = nn_cross_entropy_weight_sum(labels, class_weights, B);
  double sum = nn_cross_entropy_part(dlogits, logits, labels, class_weights, B, C, wsum, smoothing);
  return (float)(sum / wsum);
}
