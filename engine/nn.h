/* nn.h -- public interface of the attnext neural-network engine.
 *
 * The engine trains and runs the attention-RNN text classifier of ext/ARCHITECTURE.md:
 *   text -> tokens -> Embedding -> RNN|GRU|LSTM (layers, bidirectional, packed) ->
 *   attention pooling (linear|additive|self|dot, padding masked) -> fc1 -> dropout -> fc2
 * PyTorch is the reference for every formula, parameter name and gate order.
 *
 * Plain C11, no SQLite, no global state. Every fallible call returns NN_OK (0) or an error
 * status and writes a message (at most NN_ERR_LEN bytes, NUL-terminated) into `err`, a buffer
 * the caller owns. Nothing here calls exit() or abort().
 *
 * Layout of a batch: tokens are (B, T) row-major int32 ids; lengths[b] in 1..T; positions at
 * or beyond lengths[b] are ignored (never read), so padding needs no special value.
 */
#ifndef ATTNEXT_NN_H
#define ATTNEXT_NN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define NN_ERR_LEN 512
#define NN_FORMAT_VERSION 1 /* safetensors __metadata__ "format_version" we write and accept */

enum nn_status {
  NN_OK = 0,
  NN_ERROR = 1,       /* bad input, bad file, bad option: see err */
  NN_NOMEM = 2,       /* allocation failed */
  NN_INTERRUPTED = 3, /* a progress callback asked to stop */
  NN_DONE = 4         /* nn_trainer_epoch: no more epochs to run (not an error) */
};

/* Asked now and then by long work that takes no nn_progress_fn (a model load, building a
 * vocabulary, preparing a training run): return non-zero to stop it; the call then returns
 * NN_INTERRUPTED with err "interrupted" and holds nothing. ext/ passes attn_interrupt_check
 * (ext/attn_ext.h): it steps a tiny statement, which fails once sqlite3_interrupt was called on
 * the connection (sqlite3_is_interrupted is 3.41's; Debian 12 has 3.40). Called from the calling
 * thread only. */
typedef int (*nn_interrupt_fn)(void *ctx);

/* Where the engine's memory comes from. Every object that owns memory (model, vocabulary,
 * workspace, trainer, pool, parsed JSON, string buffer) records the allocator it was made with
 * and frees with it; a function that allocates without such an object takes one. NULL means
 * the C library (malloc / realloc / free). ext/ passes one that calls sqlite3_malloc64,
 * sqlite3_realloc64 and sqlite3_free, so SQLite's memory accounting, its heap limit and the
 * out-of-memory test see the engine's memory too. The allocator must outlive every object made
 * with it; what the engine hands back (a saved BLOB, a JSON text) is freed with it.
 *   alloc: n >= 1 bytes, aligned for any type (8 bytes is enough: the engine aligns its large
 *          float buffers itself), NULL on failure;
 *   resize: as realloc (p NULL: alloc); NULL on failure, p then untouched;
 *   release: as free (p never NULL). */
typedef struct nn_allocator {
  void *(*alloc)(void *ctx, size_t n);
  void *(*resize)(void *ctx, void *p, size_t n);
  void (*release)(void *ctx, void *p);
  void *ctx;
} nn_allocator;

typedef enum { NN_CELL_RNN = 0, NN_CELL_GRU = 1, NN_CELL_LSTM = 2 } nn_cell;
typedef enum {
  NN_ATTN_LINEAR = 0,
  NN_ATTN_ADDITIVE = 1,
  NN_ATTN_SELF = 2,
  NN_ATTN_DOT = 3 /* e_t = y_t . y_last, no parameters */
} nn_attention;
typedef enum { NN_DEVICE_AUTO = 0, NN_DEVICE_CPU = 1, NN_DEVICE_CUDA = 2 } nn_device;
/* How a model's weights are stored in its file (option "storage"): float32 as trained, or
 * IEEE binary16, half the bytes, the trained weights rounded to it (nn_trainer_take_model) and
 * expanded to float32 again when the model is loaded. */
typedef enum { NN_STORAGE_FLOAT32 = 0, NN_STORAGE_FLOAT16 = 1 } nn_storage;
/* The validation figure that picks the best epoch and drives early stopping (option "monitor"):
 * the loss is lower-is-better, F1 (weighted) and accuracy higher-is-better. */
typedef enum {
  NN_MONITOR_VAL_LOSS = 0,
  NN_MONITOR_VAL_F1 = 1,
  NN_MONITOR_VAL_ACCURACY = 2
} nn_monitor;
const char *nn_monitor_name(nn_monitor monitor); /* "val_loss" | "val_f1" | "val_accuracy" */
/* The recipe an options object starts from: the defaults (chosen for accuracy, ext/REFERENCE.md
 * "The default recipe") or the Made-With-ML lesson's recipe exactly. */
typedef enum { NN_RECIPE_DEFAULT = 0, NN_RECIPE_LESSON = 1 } nn_recipe;
/* The learning rate over a training: ReduceLROnPlateau on the validation loss (the lesson), or
 * a cosine from lr down to 0 over the epochs' batches. */
typedef enum { NN_SCHEDULE_PLATEAU = 0, NN_SCHEDULE_COSINE = 1 } nn_lr_schedule;

/* How the rows of a training are split (option "validation"). */
typedef enum {
  NN_VALIDATION_RANDOM = 0, /* per label, round(val_fraction * count) rows at random (default) */
  NN_VALIDATION_LAST = 1,   /* the last round(val_fraction * n) rows, in the order given */
  NN_VALIDATION_NONE = 2,   /* none: every row trains, no early stopping, the last epoch kept */
  NN_VALIDATION_QUERY = 3   /* the last cfg.validation_rows rows given (ext/: the rows of the
                               option "validation_query", appended after the training rows) */
} nn_validation;

#define NN_PAD 0 /* token id of <PAD> */
#define NN_UNK 1 /* token id of <UNK> */

/* ---------------------------------------------------------------- configuration (config.c) */

/* Every option of attn_train. Field names are the JSON option keys. */
typedef struct nn_config {
  nn_recipe recipe; /* what the other fields started from ("default" | "lesson") */
  /* text */
  int lower;            /* lower-case ASCII letters (default 1) */
  int stopwords;        /* drop the 179 NLTK English stop words (default 1) */
  int drop_parentheses; /* drop text in parentheses, as the lesson (lesson: 1) */
  int char_level;       /* character tokens instead of words (default 0) */
  int unicode;    /* keep non-ASCII letters (UTF-8 sequences) as token characters (default 0) */
  int max_len;    /* truncate to this many tokens (default 64) */
  int vocab_size; /* most frequent tokens kept, <PAD> and <UNK> included (default 5000) */
  int min_count;  /* tokens seen fewer times in the training split are <UNK> (lesson: 1) */
  int subword_buckets; /* hashed character n-gram embeddings of each vocabulary word (0 = none,
                          the lesson); nn_subword_ids */
  int subword_min, subword_max; /* n-gram lengths in characters, inclusive (3, 5) */
  /* network */
  nn_cell cell;           /* "rnn" (default) | "gru" | "lstm" */
  int layers;             /* default 1 */
  int bidirectional;      /* default 0 */
  nn_attention attention; /* "linear" (default) | "additive" | "self" | "dot" */
  int embed_dim;          /* default 100 */
  int hidden;             /* RNN hidden size per direction, default 128 */
  int fc_hidden;          /* fc1 width, default 100; 0 = no fc1 */
  float dropout;          /* default 0.1, in [0, 1) */
  int ensemble;           /* networks averaged (1 = one network, the lesson); 1..8 */
  float embed_dropout;    /* training: inverted dropout on the embedded tokens (P, E), [0, 1) */
  float word_dropout;     /* training: each token replaced by <UNK> with this probability */
  /* training */
  int epochs;                 /* default 20 */
  int batch_size;             /* default 64 */
  float lr;                   /* default 1e-3 */
  float val_fraction;         /* default 0.15, in (0, 0.9] */
  int class_weights;          /* weight classes by 1/count (default 1) */
  float label_smoothing;      /* training loss: targets (1 - s) one-hot + s / C, as PyTorch's
                                 CrossEntropyLoss(label_smoothing=s); [0, 1], lesson 0, default
                                 0.1; the validation loss is smoothed alike */
  int lazy_adam;              /* Adam moves an embedding row (and its moments) only in the steps
                             whose batch holds its token; everything else as Adam (lesson: 0) */
  int patience;               /* early stopping: epochs without a better monitored figure (10) */
  nn_lr_schedule lr_schedule; /* "plateau" (the lesson) | "cosine" */
  int lr_patience;            /* ReduceLROnPlateau patience (default 3) */
  float lr_factor;            /* ReduceLROnPlateau factor (default 0.1) */
  nn_monitor monitor;         /* "val_loss" (default) | "val_f1" | "val_accuracy": picks the best
                             epoch (weights kept) and drives early stopping; ReduceLROnPlateau
                             stays on the validation loss */
  uint64_t seed;              /* default 1234 */
  int threads;                /* CPU threads, 0 = all cores (default 0) */
  nn_device device;           /* "auto" (default) | "cpu" | "cuda" */
  int progress;               /* draw a progress line on a terminal (default 1); used by ext/ */
  nn_validation validation;   /* "random" (default) | "last" | "none" | "query" */
  int validation_rows;        /* NN_VALIDATION_QUERY: how many of the rows given, the last ones, are
                             the validation split. Not an option (no JSON key): set by ext/ */
  int pool_threads;           /* > 0: the trainer's threads instead of `threads` (attn_tune's trials
                             two at a time). Not an option, not stored: results do not depend on
                             the number of threads */
  nn_storage storage;         /* "float32" (default) | "float16": the dtype of the stored weights */
  int pretrain_epochs;        /* skip-gram passes over the training split's and the unlabelled
                             rows' texts before the classifier trains (pretrain.c); 0: none.
                             The default recipe sizes it to the unlabelled rows
                             (NN_SIZED_PRETRAIN) */
  float self_training;        /* unlabelled rows given the classifier's own label, per labelled
                             training row: once the classifier has trained, the unlabelled rows
                             it is surest of (the most probable of each class, in the labelled
                             rows' proportions) join the training rows with its labels, and it
                             trains again from the weights it started from (self_train.c); 0:
                             none. The default recipe sizes it (NN_SIZED_SELF_TRAINING) */
  unsigned data_sized;        /* NN_SIZED_* bits: options still at the recipe's value, which the
                             trainer sizes to the rows (nn_config_size_to_data). Not an option,
                             not stored: the values chosen are */
  unsigned data_sized_done;   /* the NN_SIZED_* bits the trainer sized (the metrics' "sized") */
} nn_config;

/* The options the default recipe sizes to the data (nn_config.data_sized); an option given
 * clears its bit. */
#define NN_SIZED_BATCH 1u    /* batch_size */
#define NN_SIZED_EPOCHS 2u   /* epochs */
#define NN_SIZED_PATIENCE 4u /* patience */
/* validation: "random" becomes "none" (every row trains for the sized epochs, the last kept): a
 * split of a few dozen rows wastes labels and picks epochs by noise, and of thousands it still
 * costs more than the epoch it picks gains (held-out training rows, three corpora: +0.003 to
 * +0.030 without it at 5,000 and 8,000 labels, +0.006 to +0.014 at 8,500 to 25,500). Given
 * "validation", "val_fraction", "monitor", "patience", "lr_patience" or "deploy": "if_better"
 * keep the split, as attn_tune does. */
#define NN_SIZED_VALIDATION 16u
/* pretrain_epochs: with at least NN_PRETRAIN_ROWS unlabelled rows, skip-gram pretraining over
 * them and the training split, NN_PRETRAIN_TOKEN_PASSES token visits in all (1 to 40 passes) */
#define NN_SIZED_PRETRAIN 32u
/* subword_buckets: 0 when the pretraining runs (hashed n-grams shared by thousands of words
 * blur the vectors it learns: the embedding alone was better on every corpus measured) */
#define NN_SIZED_SUBWORDS 64u
/* self_training: NN_SELF_TRAINING pseudo-labelled rows per labelled row when the pretraining
 * runs over unlabelled rows and fewer than NN_SMALL_ROWS rows are labelled */
#define NN_SIZED_SELF_TRAINING 128u
/* embed_dim: NN_SMALL_EMBED_DIM when fewer than NN_SMALL_ROWS rows train and no pretraining
 * runs */
#define NN_SIZED_EMBED_DIM 256u
/* word_dropout: 0.2 or 0, whichever scores the higher weighted F1 on the labelled rows
 * themselves, two folds each trained on the other (choose.c), when NN_CHOOSE_ROWS to
 * NN_SMALL_ROWS rows train without a validation split, pretraining, self-training or an
 * ensemble, for at most NN_CHOOSE_TOKENS token-epochs */
#define NN_SIZED_WORD_DROPOUT 512u
#define NN_SIZED_ALL 1015u
#define NN_SMALL_EMBED_DIM 128
/* ... and the wider model stays within this many parameters (the default's tables of 100,000
 * words and 16,384 subwords at 128: 14.9 million) */
#define NN_SMALL_WIDE_PARAMS (1u << 24)
#define NN_SELF_TRAINING 6.0f
#define NN_SMALL_ROWS 5000
#define NN_CHOOSE_ROWS 500
#define NN_CHOOSE_TOKENS 1000000 /* epochs x the training rows' tokens, at most */
#define NN_PRETRAIN_ROWS 5000
#define NN_PRETRAIN_TOKEN_PASSES 4000000

/* The default recipe's options sized to a training of n_train training rows (labelled, outside
 * the validation split) and C classes, with n_unlabelled unlabelled rows and `tokens` tokens in
 * the texts the pretraining would read (the training split's and the unlabelled rows'), for
 * those of cfg->data_sized; clears data_sized. Small data sets get smaller batches and more
 * epochs, so that the classifier takes enough optimizer steps; a table with unlabelled rows
 * gets word vectors pretrained on them. */
void nn_config_size_to_data(nn_config *cfg, int n_train, int C, int n_unlabelled, int64_t tokens);

/* Edit distance of a and b (insertions, deletions, substitutions), or (size_t)-1 past 62 bytes:
 * the "did you mean" of an unknown option or model name. */
size_t nn_edit_distance(const char *a, size_t na, const char *b, size_t nb);

/* The default recipe (recipe "default"). */
void nn_config_default(nn_config *cfg);

typedef struct nn_json nn_json;
/* At most this many keys a caller of nn_options_parse reads itself, beside nn_config's. */
#define NN_OPTIONS_MAX_EXTRA 16

/* An options object parsed once (nn_options_parse): the document, and the values of the keys
 * the caller reads itself (extra_names, its own table); nn_options_apply puts the rest into an
 * nn_config. */
typedef struct nn_options {
  nn_json *doc;     /* NULL: no options (NULL, "" or only whitespace) */
  const char *text; /* the text parsed (the caller's; values' spans point in it) */
  const char *extra_names[NN_OPTIONS_MAX_EXTRA]; /* the caller's keys; NULL: not read here */
  const nn_json *extra[NN_OPTIONS_MAX_EXTRA]; /* extra[k]: the value of extra_names[k], or NULL */
  int nextra;
} nn_options;

/* Parse json (NULL or "": no options) as a JSON object: its syntax and that it is an object are
 * checked here (errors as nn_config_parse_json's), its values by nn_options_apply. extra: the
 * names of the nextra (at most NN_OPTIONS_MAX_EXTRA) keys the caller reads itself, by its own
 * numbering (extra[k] NULL: a key this caller does not read); their values are handed back in
 * o->extra[k], any other key that is not nn_config's is an unknown option. A name that is also
 * nn_config's ("class_weights") is the caller's when its value is a JSON object, the engine's
 * otherwise (true / false). The names must outlive o. */
int nn_options_parse(nn_options *o, const char *json, const char *const *extra, int nextra,
                     const nn_allocator *mem, char *err);
/* The engine's options of o over *cfg (nn_config_parse_json's rules and messages), skipping the
 * caller's keys; an unknown one gets "did you mean" among nn_config's keys and the caller's.
 * On error *cfg is left unchanged. */
int nn_options_apply(const nn_options *o, nn_config *cfg, char *err);
void nn_options_free(nn_options *o);

/* A warm start (nn_trainer_args.base) keeps the base model's architecture and vocabulary:
 * NN_ERROR naming the first option of cfg that differs from base on them (cell, layers,
 * bidirectional, attention, embed_dim, hidden, fc_hidden, vocab_size, lower, stopwords,
 * drop_parentheses,
 * char_level, unicode), e.g.
 *   option "hidden" cannot change when training from a model: the base model has 128, got 64
 * Every other option (epochs, lr, dropout, monitor, max_len, seed, device, ...) may change. */
int nn_config_check_warm_start(const nn_config *cfg, const nn_config *base, char *err);

/* Number of parameters of the network described by cfg with cfg->vocab_size tokens and
 * num_classes classes: embedding + encoder (PyTorch's RNN/GRU/LSTM layout) + attention + fc1 +
 * fc2, as model.c lays them out (attention with P = hidden * directions: linear P+1, additive
 * P*P+2P, self 3(P*P+P), dot 0); test_safetensors checks it equals nn_model_param_count. Used as the
 * bound of nn_config_validate with num_classes = 2, and by ext/ to size a model's file before
 * training it. */
uint64_t nn_config_param_count(const nn_config *cfg, uint64_t num_classes);

/* The config as a JSON object (all keys), from mem (free it with mem), NUL-terminated; NULL
 * when out of memory. */
char *nn_config_to_json(const nn_config *cfg, const nn_allocator *mem);

const char *nn_cell_name(nn_cell cell);           /* "rnn" | "gru" | "lstm" */
const char *nn_attention_name(nn_attention attn); /* "linear" | "additive" | "self" | "dot" */
const char *nn_validation_name(nn_validation v);  /* "random" | "last" | "none" | "query" */
const char *nn_storage_name(nn_storage storage);  /* "float32" | "float16" */

/* ---------------------------------------------------------------- text and vocabulary (text.c) */

/* One token of an encoded text: its id and its byte span [start, end) in the original text;
 * start = end = -1 for a token with no span (a synthetic token, or a char-level space). */
typedef struct nn_token {
  int id;
  int start, end;
} nn_token;

/* Preprocess `text` (len bytes, any bytes, need not be NUL-terminated, invalid UTF-8 allowed)
 * as the lesson (ext/ARCHITECTURE.md) and call `fn` for each resulting token string (tok,
 * tok_len bytes, the cleaned form) with its byte span in the original. Returns the number of tokens (not truncated). */
typedef void (*nn_token_fn)(void *ctx, const char *tok, int tok_len, int start, int end);
int nn_text_tokenize(const char *text, int len, const nn_config *cfg, nn_token_fn fn, void *ctx,
                     const nn_allocator *mem);
/* (returns -1 when memory runs out growing a token longer than 256 bytes: mem's) */

typedef struct nn_vocab nn_vocab; /* token string <-> id; id 0 "<PAD>", id 1 "<UNK>" */

/* The hash of the engine's tables (SipHash-1-3 with a secret key per table, text.c), for any
 * table of strings a database may choose: ext/ interns the labels of training rows with it. */
typedef struct nn_hash_key {
  uint64_t k0, k1;
} nn_hash_key;
nn_hash_key nn_hash_key_new(const void *salt); /* from nn_os_random(); salt: any address */
uint32_t nn_hash_bytes(const nn_hash_key *key, const char *s, int n);

int nn_vocab_count(const nn_vocab *vocab);
const char *nn_vocab_token(const nn_vocab *vocab, int id, int *len);  /* NULL if out of range */
int nn_vocab_lookup(const nn_vocab *vocab, const char *tok, int len); /* NN_UNK when absent */

/* Tokenize and map to ids, truncated to cfg->max_len. Writes at most cfg->max_len tokens to
 * out and returns how many (>= 1: a text with no tokens encodes as one <UNK> with no span). */
int nn_text_encode(nn_token *out, const char *text, int len, const nn_config *cfg,
                   const nn_vocab *vocab);

/* ---------------------------------------------------------------- random numbers (rng.c) */

typedef struct nn_rng {
  uint64_t s[4];
} nn_rng; /* xoshiro256** seeded by splitmix64: same seed, same stream on every machine */

void nn_rng_seed(nn_rng *rng, uint64_t seed);
uint64_t nn_rng_next(nn_rng *rng);
float nn_rng_uniform(nn_rng *rng); /* [0, 1) */

/* ---------------------------------------------------------------- the model (model.c) */

/* A model = network weights + config + vocabulary + labels: everything a prediction needs. */
typedef struct nn_model nn_model;

/* Workspace: activations and scratch for forward/backward, grown on demand. One per thread;
 * a model may be shared read-only by several threads each with its own workspace. */
typedef struct nn_workspace nn_workspace;

typedef struct nn_batch {
  const int *tokens;  /* (B, T) */
  const int *lengths; /* (B) each 1..T */
  const int *labels;  /* (B) class ids, or NULL when not training */
  int B, T;
} nn_batch;

void nn_model_free(nn_model *model);

const nn_config *nn_model_config(const nn_model *model);
const nn_vocab *nn_model_vocab(const nn_model *model);
int nn_model_num_classes(const nn_model *model);
const char *nn_model_label(const nn_model *model, int class_id);
int nn_model_label_lookup(const nn_model *model, const char *label, int len); /* -1 if absent */

const float *nn_model_weights(const nn_model *model); /* read-only access, no side effect */
/* Bytes the model holds in host memory: parameters, the inference tables, vocabulary, labels
 * (for a cache bounded in bytes). A loaded model holds at most about 10 x its BLOB + 16 MB
 * (model.h NN_INFER_TABLES_FACTOR). nn_model_device_memory: bytes in a device backend's memory
 * (0 on the CPU). */
size_t nn_model_memory(const nn_model *model);
size_t nn_model_device_memory(const nn_model *model);
typedef struct nn_tensor_info {
  const char *name; /* e.g. "rnn.weight_ih_l0_reverse" */
  int ndim;         /* 1 or 2 */
  int64_t shape[2];
  size_t offset; /* in floats, into nn_model_params / nn_model_grads */
  size_t size;   /* element count */
} nn_tensor_info;
int nn_model_tensor(const nn_model *model, int index,
                    nn_tensor_info *info); /* NN_ERROR if out of range */

/* The workspace and what it grows to come from mem (NULL: the C library). */
int nn_workspace_create(nn_workspace **out, const nn_allocator *mem, char *err);
void nn_workspace_free(nn_workspace *ws);

/* Forward pass. training=1 applies dropout (drawing from rng) and keeps what backward needs
 * in ws; training=0 is inference (rng may be NULL).
 *   logits: (B, C) out
 *   attn:   (B, T) out or NULL: attention weights, 0 at positions >= lengths[b], rows sum to 1 */
int nn_model_forward(nn_model *model, nn_workspace *ws, const nn_batch *batch, int training,
                     nn_rng *rng, float *logits, float *attn, char *err);

/* Inference (training=0) that also gives each row's attention-pooled representation, the
 * context vector that attention pooling makes of the recurrent outputs and fc1 (or fc2) reads:
 *   pooled: (B, nn_model_pooled_dim) out, in the caller's row order; an ensemble's members'
 *           contexts side by side (member k in columns [k D, (k+1) D))
 * logits as nn_model_forward. (attn_embed.) */
int nn_model_forward_pooled(nn_model *model, nn_workspace *ws, const nn_batch *batch, float *logits,
                            float *pooled, char *err);
/* Width of the pooled representation: hidden x directions (the recurrent output's) x the
 * ensemble's members. */
int nn_model_pooled_dim(const nn_model *model);
/* The last layer's (fc2's) input of each row from its pooled representation: fc1's output
 * W1 c + b1 (no activation lies between fc1 and fc2), or the context itself without fc1; an
 * ensemble's members' side by side. out: (B, nn_model_head_input_dim). The CPU backend's
 * product on the weights' host copy, whatever the model's backend (attn_uncertain's diverse
 * order: a sample of rows already on the host). */
int nn_model_head_input_dim(const nn_model *model);
void nn_model_head_input(const nn_model *model, const float *pooled /*(B, pooled_dim)*/, int B,
                         float *out);

/* Softmax of each row of logits (B, C) into probs (may alias). */
void nn_softmax_rows(float *probs, const float *logits, int B, int C);

/* ---------------------------------------------------------------- Adam (adam.c) */

typedef struct nn_adam {
  float lr, beta1, beta2, eps; /* PyTorch defaults: 1e-3, 0.9, 0.999, 1e-8 */
  float weight_decay;          /* always 0: the lesson's recipe has none; not applied */
  int64_t step;
  float *m, *v; /* (nparams) each, owned */
  size_t n;
  const nn_allocator *mem; /* of m and v (nn_adam_init: NULL, the C library) */
} nn_adam;

/* ---------------------------------------------------------------- metrics (metrics.c) */

typedef struct nn_class_metrics {
  double precision, recall, f1;
  int64_t support;
} nn_class_metrics;

/* The same from per-class counts, O(C) memory (no C x C matrix: up to 10,000 classes):
 *   true_positive[c] = rows of class c predicted c, predicted[c] = rows predicted c,
 *   support[c] = rows of class c. per_class may be NULL. */
void nn_metrics_from_counts(nn_class_metrics *per_class /*(C) or NULL*/, nn_class_metrics *weighted,
                            double *accuracy, const int64_t *true_positive /*(C)*/,
                            const int64_t *predicted /*(C)*/, const int64_t *support /*(C)*/,
                            int C);

/* ---------------------------------------------------------------- the monitor (metrics.c) */

/* A model's figures on validation rows: the mean loss, the accuracy and the weighted F1. */
typedef struct nn_figures {
  double loss, accuracy, f1;
} nn_figures;

/* The figure of f that monitor reads: the loss, the F1 or the accuracy. */
double nn_monitor_figure(nn_monitor monitor, const nn_figures *f);
/* Whether a is better than b under monitor: the one rule that picks the best epoch of a training,
 * the version option "deploy": "if_better" keeps and the trial attn_tune chooses.
 *   - the monitored figure decides, strictly: a lower loss, a higher F1 or accuracy;
 *   - an F1 or accuracy that only equals b's is better when its loss is lower (on easy data the
 *     first model to reach the top F1 is seldom the most confident, and a prediction's
 *     probability is what thresholds and attn_curve read; nn_monitor_tie says when this decides);
 *   - NaN is never better: a NaN figure loses to any number and ties nothing, and a NaN loss
 *     never breaks a tie; a number is better than a NaN figure (a run that diverged never keeps
 *     the choice). */
int nn_monitor_better(nn_monitor monitor, const nn_figures *a, const nn_figures *b);
/* Whether a's F1 or accuracy equals b's (monitor a rate, neither NaN), so that the loss decides
 * nn_monitor_better. 0 for the loss monitor. */
int nn_monitor_tie(nn_monitor monitor, const nn_figures *a, const nn_figures *b);

/* Every figure of BigQuery ML's ML.EVALUATE for a classifier (attn_metrics), each as
 * scikit-learn 1.2 computes it from the same predictions (tests/gen_metrics_fixtures.py checks
 * them to 1e-6), y_pred being the argmax (first maximum) of each row of probabilities:
 *   accuracy                  accuracy_score(y_true, y_pred)
 *   macro_* / weighted_*      precision_recall_fscore_support(y_true, y_pred, average="macro" /
 *                             "weighted", zero_division=0): the macro mean runs over the classes
 *                             in y_true or y_pred (sklearn's default labels); the weighted mean
 *                             weighs by support
 *   log_loss                  log_loss(y_true, probs, labels=range(C)) with float64
 *                             probabilities: clipped to [eps, 1 - eps], eps = 2^-52 (float64's
 *                             machine epsilon, sklearn 1.2's eps="auto"), each row renormalised
 *                             to sum 1, then the mean of -log p[y_true]
 *   roc_auc                   one-vs-rest, macro: the mean over classes c of
 *                             roc_auc_score(y_true == c, probs[:, c]) (the trapezoidal area under
 *                             roc_curve: tied scores count one half); with 2 classes the AUC of
 *                             class 1 alone, as roc_auc_score(y_true, probs[:, 1]). A class
 *                             absent from y_true (or present in every row) has no AUC: sklearn
 *                             raises an error there; here it is left out of the mean and
 *                             roc_auc_classes counts the classes averaged. roc_auc is NaN when
 *                             none has one (all rows of one class). */
typedef struct nn_evaluation {
  double accuracy;
  double macro_precision, macro_recall, macro_f1;
  double weighted_precision, weighted_recall, weighted_f1;
  double log_loss;
  double roc_auc;      /* NaN when no class has both positive and negative rows */
  int roc_auc_classes; /* classes whose AUC went into roc_auc */
  int64_t rows;
} nn_evaluation;

/* From y_true (N class ids in 0..C-1) and probs (N, C) (finite, >= 0; each row a distribution,
 * as nn_softmax_rows gives it), N >= 1, 2 <= C. O(N C) memory for nothing but an (N) scratch;
 * the AUC sorts N scores per class (the scratch from mem): asks stop(stop_ctx) between classes
 * (stop may be NULL;
 * NN_INTERRUPTED with err "interrupted"). NN_ERROR on bad input (a class id out of range, a
 * probability that is negative or not finite), naming the row. */
int nn_metrics_evaluate(nn_evaluation *out, const int *y_true /*(N)*/,
                        const float *probs /*(N, C)*/, int64_t N, int C, nn_interrupt_fn stop,
                        void *stop_ctx, const nn_allocator *mem, char *err);

/* ------------------------------------------------------ a diverse batch to label (diverse.c) */

/* BADGE's order (Ash et al., 2020): up to k of n rows, each row's gradient embedding
 * (probs_i - onehot(top_i)) outer feat_i (the gradient of the loss at the predicted class with
 * respect to the last layer, feat its input), the first pick the longest, each next drawn with
 * probability proportional to its squared distance to the nearest pick (k-means++ seeding) from
 * an nn_rng seeded by seed. order (k) gets the row indices in pick order, *picked their count
 * (fewer than k when fewer rows are usable: a row with a number that is not finite, or top out
 * of 0..C-1, is never picked). O(n (C + F)) a pick, 16 bytes a row of scratch from mem; asks
 * stop(stop_ctx) between picks (may be NULL; NN_INTERRUPTED with err "interrupted", the picks
 * so far in order). */
int nn_diverse_order(const float *probs /*(n, C)*/, const int *top /*(n)*/,
                     const float *feat /*(n, F)*/, int64_t n, int C, int F, int k, uint64_t seed,
                     nn_interrupt_fn stop, void *stop_ctx, const nn_allocator *mem,
                     int64_t *order /*(k)*/, int *picked, char *err);

/* ---------------------------------------------------------------- curves (curve.c) */

/* A point of one class's ROC / precision-recall curve: at `threshold` (the class is predicted
 * when its probability >= threshold), tp rows of the class and fp rows of other classes are
 * predicted it. */
typedef struct nn_curve_point {
  double threshold;
  int64_t tp, fp;
} nn_curve_point;

/* The curve of class c against the rest from y_true (N class ids) and probs (N, C), as
 * scikit-learn 1.2's _binary_clf_curve(y_true == c, probs[:, c]) (the points of roc_curve with
 * drop_intermediate=False, less its first (0, 0), and of precision_recall_curve, less its last
 * (1, 0), in reverse): one point per distinct probability, descending, with the cumulative
 * counts. points (N) is the work space and the result: *npoints (<= N) points, *positives the
 * rows of class c (the last point's tp; its fp: the other rows). NN_ERROR naming the row for a
 * probability that is not finite. */
int nn_curve_class(nn_curve_point *points /*(N)*/, int64_t *npoints, int64_t *positives,
                   const float *probs /*(N, C)*/, const int *y_true /*(N)*/, int64_t N, int C,
                   int c, char *err);
/* tp and fp at any threshold t (rows scoring >= t) from the n points of nn_curve_class. */
void nn_curve_at(const nn_curve_point *points, int64_t n, double t, int64_t *tp, int64_t *fp);
/* Areas, as sklearn's roc_auc_score(y_true == c, probs[:, c]) and
 * average_precision_score(...) (sum over thresholds of (R_k - R_k-1) P_k); NaN when the class
 * has no rows (or, for the AUC, every row). */
double nn_curve_roc_auc(const nn_curve_point *points, int64_t n);
double nn_curve_average_precision(const nn_curve_point *points, int64_t n);

/* ---------------------------------------------------------------- training (train.c) */

typedef struct nn_epoch_stats {
  int epoch;                                         /* 1-based */
  double train_loss, val_loss, val_accuracy, val_f1; /* val_f1: weighted F1 */
  double lr;                                         /* learning rate used during this epoch */
  double seconds;                                    /* wall time of the epoch */
  int best; /* 1 if this epoch has the best monitored figure so far (cfg.monitor: the
                   * validation loss by default) */
} nn_epoch_stats;

/* Called after each batch; return non-zero to stop training (NN_INTERRUPTED). loss is NaN for
 * work that computes none (self-training's scoring of the unlabelled rows). */
typedef int (*nn_progress_fn)(void *ctx, int batches_done, int batches_total, double loss,
                              double rows_per_second);

typedef struct nn_trainer nn_trainer;

/* Row i's text or label, *len bytes (NULL with *len 0: empty); see nn_trainer_args. */
typedef const char *(*nn_row_fn)(void *ctx, int i, int *len);

/* What a trainer is made of: the options, the n rows, and where it starts from. */
typedef struct nn_trainer_args {
  const nn_config *cfg;
  /* NULL: a new model. Else a warm start: a trainer whose model starts as `base` -- its
   * vocabulary, labels, architecture and weights (copied: base stays the caller's, unchanged,
   * and may be freed once nn_trainer_create returns) -- and trains on the rows given, split,
   * encoded and weighted as for a new model but with base's vocabulary (words it lacks are
   * <UNK>) and base's label set.
   *   cfg: start from *nn_model_config(base) and parse the user's options over it
   *        (nn_config_parse_json), so that what is not given is the base model's recipe. The
   *        options that fix the architecture or the vocabulary (see nn_config_check_warm_start)
   *        must equal base's: a differing one is REFUSED with an error naming it (not ignored).
   *        Training options (epochs, lr, batch_size, dropout, monitor, patience, val_fraction,
   *        class_weights, seed, threads, device, max_len, ...) apply; seed draws no weights here
   *        (split, shuffling and dropout only).
   *   labels: each must be one of base's labels (the model keeps all of them, also those with
   *        no row here: their class weight is 0 and no loss reads it); the first that is not is
   *        an error: label "x" of row 5 is not one of the base model's 4 labels: ...
   * The metrics JSON records "warm_start":true. Pretrained embeddings (nn_trainer_set_embedding)
   * would overwrite rows of base's embedding: ext/ refuses "embeddings" with a warm start;
   * nn_trainer_freeze_embeddings works as usual. */
  const nn_model *base;
  const char *const *texts; /* (n) texts[i] of text_lens[i] bytes (text_lens NULL: strlen) */
  const int *text_lens;
  const char *const *labels; /* (n) labels[i] of label_lens[i] bytes (label_lens NULL: strlen) */
  const int *label_lens;
  /* Or, with texts and labels NULL, the rows read through functions: row_text(rows_ctx, i,
   * &len) and row_label(...) give row i's bytes (NULL with len 0: empty), in any order, any
   * number of times while nn_trainer_create runs, never after; each pointer stays valid until
   * it returns. So a caller can keep millions of rows packed (ext/ does: attn_train_rows)
   * instead of building arrays of pointers and lengths. */
  nn_row_fn row_text, row_label;
  void *rows_ctx;
  /* Optional, with row_text: rows_done(rows_ctx, first, end, keep, nkeep) is called once rows
   * first .. end - 1 are encoded (in order; the unlabelled rows follow the labelled ones): none
   * of them is read again, so the caller may free their texts while the rest are encoded -- the
   * texts of a large table then never sit beside all of their ids. keep (ascending, nkeep of
   * them) lists those rows of the range that are in the validation split, for a caller that
   * scores them itself later (nn_trainer_validation_rows). */
  void (*rows_done)(void *rows_ctx, int first, int end, const int *keep, int nkeep);
  int n;
  /* Unlabelled rows: texts n .. n + n_unlabelled - 1 (texts[] or row_text; no label is asked
   * for them). They join the vocabulary and the pretraining (cfg.pretrain_epochs), never the
   * classifier's loss or the validation split; without pretraining they are not read. */
  int n_unlabelled;
  /* asked between the stages and every few thousand texts while it counts tokens, builds the
   * vocabulary and encodes the rows; NULL: never stopped */
  nn_interrupt_fn stop;
  void *stop_ctx;
  /* the trainer's memory and its model's (NULL: the C library); nn_trainer_take_model's model
   * keeps it */
  const nn_allocator *mem;
} nn_trainer_args;

/* Prepare a training run over the rows of a: sorted label set, stratified train/validation
 * split, vocabulary from the training split, encoding, class weights, model initialisation
 * (or a->base's weights). */
int nn_trainer_create(nn_trainer **out, const nn_trainer_args *a, char *err);
/* The pretraining (cfg.pretrain_epochs skip-gram passes over the training split's and the
 * unlabelled rows' texts, learning the embedding and subword tables), with fn called every few
 * hundred rows and, within long rows, by work done (batches_done / batches_total count rows of
 * all passes; loss: the skip-gram's).
 * The first nn_trainer_epoch runs it when it has not run; a caller that reports phases calls it
 * first. Nothing to do (NN_OK) with pretrain_epochs 0, a warm start or pretrained embeddings. */
int nn_trainer_pretrain(nn_trainer *tr, nn_progress_fn fn, void *ctx, char *err);
/* The choice of word dropout (NN_SIZED_WORD_DROPOUT, choose.c): two settings, each trained
 * twice, on either half of the labelled rows, and scored on the other half; fn is called as
 * training epochs call it (batches_done / batches_total count the batches of all four). The
 * first nn_trainer_epoch runs it when it has not run; a caller that reports phases calls it
 * first. Nothing to do (NN_OK) when the recipe does not choose. */
int nn_trainer_choose(nn_trainer *tr, nn_progress_fn fn, void *ctx, char *err);
/* 1 when nn_trainer_choose has a choice to make. */
int nn_trainer_choosing(const nn_trainer *tr);
/* Run one epoch. Returns NN_OK with *stats filled, NN_DONE when training is over (epochs
 * reached or early stopping; *stats untouched), or an error / NN_INTERRUPTED. */
int nn_trainer_epoch(nn_trainer *tr, nn_epoch_stats *stats, nn_progress_fn fn, void *ctx,
                     char *err);
/* 1 when no epoch is left to run (the last one was the final epoch or early stopping
 * triggered): the caller can store the model as the last epoch's row is returned. */
int nn_trainer_done(const nn_trainer *tr);
/* 1 when the next epoch (or the one running) is self-training's second round (cfg.self_training:
 * the unlabelled rows the classifier is surest of train with its labels): its first epoch scores
 * the unlabelled rows first. The config's epochs then count both rounds. */
int nn_trainer_self_training(const nn_trainer *tr);
/* The trainer's options: those given, with what the recipe sized to the rows
 * (nn_config_size_to_data). */
const nn_config *nn_trainer_config(const nn_trainer *tr);
/* The model with the best validation weights; ownership passes to the caller. Call once. With
 * "storage": "float16" the weights are rounded to float16 first and the best epoch's validation
 * figures scored again on them (the metrics JSON then has "storage" and the "..._float32"
 * figures as trained). */
int nn_trainer_take_model(nn_trainer *tr, nn_model **out, char *err);
/* Summary of the run as a JSON object (best epoch, best val metrics, train/val sizes, ...),
 * from the trainer's allocator (free it with that); NULL when out of memory. */
char *nn_trainer_metrics_json(const nn_trainer *tr);
void nn_trainer_free(nn_trainer *tr);
/* The rows of the validation split, as indices into the rows given to nn_trainer_create
 * (*rows valid while the trainer lives; *n 0 with "validation": "none"). */
void nn_trainer_validation_rows(const nn_trainer *tr, const int **rows, int *n);
/* How many of the rows (labelled and unlabelled) had a text of more than max_len tokens, read
 * up to its max_len-th token. */
int nn_trainer_truncated_rows(const nn_trainer *tr);
/* Per-class loss weights by label (attn_train's "class_weights": {"label": weight}), replacing
 * the automatic 1/count: the classes named get their weight (finite, > 0), the others 1. Before
 * the first epoch. NN_ERROR naming a label that is not one of the model's. */
int nn_trainer_set_class_weights(nn_trainer *tr, const char *const *labels, const int *lens,
                                 const double *weights, int n, char *err);
/* Where the trainer runs, e.g. "cpu (x86-64-v3 kernels)" or "cuda (NVIDIA H100 80GB HBM3, ...)";
 * written into buf (len bytes), which is returned. */
const char *nn_trainer_backend(const nn_trainer *tr, char *buf, size_t len);
/* Parameters of the model being trained (every member of an ensemble): its file holds 4 bytes
 * each, 2 with "storage": "float16" (nn_model_save), so a caller can refuse a model its store cannot hold before training. */
size_t nn_trainer_param_count(const nn_trainer *tr);

/* Pretrained word vectors (attn_train's "embeddings" option); call after nn_trainer_create,
 * before the first epoch. Sets the embedding row of `word` (len bytes, matched exactly against
 * the vocabulary) to vector (dim floats; dim must equal the config's embed_dim). *found = 1 when
 * the word is in the vocabulary (<PAD> and <UNK> are never set), else 0 and nothing changes.
 * Rows not set keep their initialisation (N(0, 1), as PyTorch's nn.Embedding). */
int nn_trainer_set_embedding(nn_trainer *tr, const char *word, int len, const float *vector,
                             int dim, int *found, char *err);
/* freeze = 1 keeps embeddings.weight as it is during training (its gradient is zeroed before
 * every Adam step). The metrics JSON then records "pretrained_words" and "freeze_embeddings". */
int nn_trainer_freeze_embeddings(nn_trainer *tr, int freeze, char *err);

/* ---------------------------------------------------------------- safetensors (safetensors.c) */

/* Serialise the model as a self-contained safetensors file: F32 tensors named as
 * nn_model_tensor gives them, __metadata__ = {"format_version": "1", "config": <json>,
 * "vocab": <json array>, "labels": <json array>} (safetensors metadata values are strings).
 * *out comes from the model's allocator: free it with that (free() for NULL). */
int nn_model_save(const nn_model *model, unsigned char **out, size_t *out_len, char *err);

/* Parse and validate a safetensors BLOB (header size, JSON, dtypes, shapes against the config,
 * offsets inside the buffer and non-overlapping, metadata) and build a model. Never reads
 * outside [blob, blob + len). */
int nn_model_load(nn_model **out, const unsigned char *blob, size_t len, char *err);
/* The same, asking stop(stop_ctx) between its stages and every few thousand tokens or
 * tensors (stop may be NULL), with the model and what loading it takes from mem (nn_model_load:
 * NULL, the C library). */
int nn_model_load_ex(nn_model **out, const unsigned char *blob, size_t len, nn_interrupt_fn stop,
                     void *stop_ctx, const nn_allocator *mem, char *err);

/* Generic reader, used by tests (fixtures) and by nn_model_load. */
typedef enum {
  NN_DTYPE_F32 = 0,
  NN_DTYPE_I32 = 1,
  NN_DTYPE_I64 = 2,
  NN_DTYPE_F64 = 3,
  NN_DTYPE_F16 = 4 /* IEEE binary16: the weights of a "storage": "float16" model */
} nn_dtype;
typedef struct nn_st_tensor {
  char *name;
  nn_dtype dtype;
  int ndim; /* 0..4 */
  int64_t shape[4];
  const unsigned char *data; /* points into the blob; may be unaligned: memcpy to read */
  size_t nbytes;
} nn_st_tensor;
typedef struct nn_st_file {
  nn_st_tensor *tensors;
  int count;
  char **meta_keys, **meta_values; /* __metadata__ */
  int meta_count;
  const nn_allocator *mem; /* of the above (nn_st_parse's) */
} nn_st_file;

/* ---------------------------------------------------------------- about the build */

/* e.g. "attnext 0.2.0; backends: cpu (OpenBLAS 0.3.21, 2 threads); cuda: not built" */
const char *nn_version_string(char *buf, size_t len);

#ifdef __cplusplus
}
#endif
#endif
