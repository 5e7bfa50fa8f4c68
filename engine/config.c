/* config.c -- the options of attn_train: defaults, JSON parsing with exact error messages,
 * range validation and JSON output.
 *
 *   nn_config cfg; nn_config_default(&cfg);
 *   nn_config_parse_json(&cfg, "{\"cell\":\"gru\",\"hidden\":256}", NULL, err);
 *   -> on a bad value: option "hidden" must be an integer from 1 to 4096, got "big"
 *
 * One table (config_options) lists every option of nn_config with its kind, bounds and field;
 * parsing, validation and JSON output are loops over it. The keys a caller reads itself (ext/'s
 * "from", "deploy", ...) are its own table's, handed to nn_options_parse: the engine hands their
 * values back and offers their names in "did you mean". Bounds keep every allocation the options
 * drive finite; on top of them the whole network must stay within NN_MAX_PARAMS floats. */
#include "config.h"
#include "json.h"
#include "model.h" /* NN_MAX_LAYERS, NN_MAX_HIDDEN, nn_model_create_uninit */

#include <locale.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum {
  OPT_BOOL,  /* int 0/1: true/false (or 0/1) */
  OPT_INT,   /* int in [imin, imax] */
  OPT_SEED,  /* uint64 in [imin, imax] */
  OPT_FLOAT, /* float in an interval; open ends flagged */
  OPT_CELL,  /* the enums: int, one of a list of names (enum_names) */
  OPT_ATTENTION,
  OPT_DEVICE,
  OPT_MONITOR,
  OPT_RECIPE,
  OPT_SCHEDULE,
  OPT_VALIDATION,
  OPT_STORAGE
} opt_kind;

typedef struct config_option {
  const char *name;
  opt_kind kind;
  size_t offset;
  int64_t imin, imax;
  double fmin, fmax;
  int min_open, max_open; /* OPT_FLOAT: interval ends excluded */
} config_option;

#define OPT_B(f)                                                                                   \
  { #f, OPT_BOOL, offsetof(nn_config, f), 0, 1, 0, 0, 0, 0 }
#define OPT_I(f, lo, hi)                                                                           \
  { #f, OPT_INT, offsetof(nn_config, f), lo, hi, 0, 0, 0, 0 }
#define OPT_F(f, lo, hi, lo_open, hi_open)                                                         \
  { #f, OPT_FLOAT, offsetof(nn_config, f), 0, 0, lo, hi, lo_open, hi_open }
#define OPT_E(f, kind)                                                                             \
  { #f, kind, offsetof(nn_config, f), 0, 0, 0, 0, 0, 0 }
#define SEED_MAX ((int64_t)1 << 53)
_Static_assert(sizeof(nn_cell) == sizeof(int) && sizeof(nn_attention) == sizeof(int) &&
                   sizeof(nn_device) == sizeof(int) && sizeof(nn_monitor) == sizeof(int) &&
                   sizeof(nn_recipe) == sizeof(int) && sizeof(nn_lr_schedule) == sizeof(int) &&
                   sizeof(nn_validation) == sizeof(int) && sizeof(nn_storage) == sizeof(int),
               "config.c reads the enum fields as int");

/* In the order nn_config_to_json writes them. */
static const config_option config_options[] = {
    OPT_E(recipe, OPT_RECIPE), /* parsed first, whatever its place (nn_config_parse_json) */
    OPT_E(cell, OPT_CELL),
    OPT_I(layers, 1, NN_MAX_LAYERS),
    OPT_B(bidirectional),
    OPT_E(attention, OPT_ATTENTION),
    OPT_I(embed_dim, 1, 4096),
    OPT_I(hidden, 1, NN_MAX_HIDDEN),
    OPT_I(fc_hidden, 0, 4096),
    OPT_F(dropout, 0.0, 1.0, 0, 1),
    OPT_I(ensemble, 1, NN_MAX_MEMBERS),
    OPT_F(embed_dropout, 0.0, 1.0, 0, 1),
    OPT_F(word_dropout, 0.0, 1.0, 0, 1),
    OPT_I(epochs, 1, 100000),
    OPT_I(batch_size, 1, 65536),
    OPT_F(lr, 0.0, 10.0, 1, 0),
    OPT_F(val_fraction, 0.0, 0.9, 1, 0),
    OPT_B(class_weights),
    OPT_F(label_smoothing, 0.0, 1.0, 0, 0),
    OPT_B(lazy_adam),
    OPT_I(patience, 1, 100000),
    OPT_E(lr_schedule, OPT_SCHEDULE),
    OPT_I(lr_patience, 0, 100000),
    OPT_F(lr_factor, 0.0, 1.0, 1, 1),
    OPT_E(monitor, OPT_MONITOR),
    {"seed", OPT_SEED, offsetof(nn_config, seed), 0, SEED_MAX, 0, 0, 0, 0},
    OPT_I(threads, 0, 1024),
    OPT_E(device, OPT_DEVICE),
    OPT_B(progress),
    OPT_B(lower),
    OPT_B(stopwords),
    OPT_B(drop_parentheses),
    OPT_B(char_level),
    OPT_B(unicode),
    OPT_I(max_len, 1, 4096),
    OPT_I(vocab_size, 3, NN_MAX_VOCAB),
    OPT_I(min_count, 1, 1000000000),
    OPT_I(subword_buckets, 0, NN_MAX_SUBWORD_BUCKETS),
    OPT_I(subword_min, 1, 16),
    OPT_I(subword_max, 1, 16),
    OPT_E(validation, OPT_VALIDATION),
    OPT_I(pretrain_epochs, 0, 1000),
    OPT_F(self_training, 0.0, 10.0, 0, 0),
    OPT_E(storage, OPT_STORAGE),
};
#define NUM_OPTIONS (sizeof config_options / sizeof config_options[0])

static const char *const cell_names[] = {"rnn", "gru", "lstm"};
static const char *const attention_names[] = {"linear", "additive", "self", "dot"};
static const char *const device_names[] = {"auto", "cpu", "cuda"};
static const char *const monitor_names[] = {"val_loss", "val_f1", "val_accuracy"};
static const char *const recipe_names[] = {"default", "lesson"};
static const char *const schedule_names[] = {"plateau", "cosine"};
static const char *const validation_names[] = {"random", "last", "none", "query"};
static const char *const storage_names[] = {"float32", "float16"};
#define COUNT(a) ((int)(sizeof a / sizeof a[0]))

/* The names of an enum option's values, in enum order; *count of them. */
static const char *const *enum_names(opt_kind kind, int *count) {
  switch (kind) {
  case OPT_CELL: *count = COUNT(cell_names); return cell_names;
  case OPT_ATTENTION: *count = COUNT(attention_names); return attention_names;
  case OPT_DEVICE: *count = COUNT(device_names); return device_names;
  case OPT_MONITOR: *count = COUNT(monitor_names); return monitor_names;
  case OPT_RECIPE: *count = COUNT(recipe_names); return recipe_names;
  case OPT_SCHEDULE: *count = COUNT(schedule_names); return schedule_names;
  case OPT_VALIDATION: *count = COUNT(validation_names); return validation_names;
  case OPT_STORAGE: *count = COUNT(storage_names); return storage_names;
  default: *count = 0; return NULL;
  }
}

static const char *enum_name(opt_kind kind, int value) {
  int count;
  const char *const *names = enum_names(kind, &count);
  return value >= 0 && value < count ? names[value] : "?";
}

const char *nn_cell_name(nn_cell cell) { return enum_name(OPT_CELL, (int)cell); }
const char *nn_attention_name(nn_attention attn) { return enum_name(OPT_ATTENTION, (int)attn); }
const char *nn_device_name(nn_device device) { return enum_name(OPT_DEVICE, (int)device); }
const char *nn_monitor_name(nn_monitor monitor) { return enum_name(OPT_MONITOR, (int)monitor); }
const char *nn_recipe_name(nn_recipe recipe) { return enum_name(OPT_RECIPE, (int)recipe); }
const char *nn_lr_schedule_name(nn_lr_schedule schedule) {
  return enum_name(OPT_SCHEDULE, (int)schedule);
}
const char *nn_validation_name(nn_validation v) { return enum_name(OPT_VALIDATION, (int)v); }
const char *nn_storage_name(nn_storage storage) { return enum_name(OPT_STORAGE, (int)storage); }

void nn_config_lesson(nn_config *cfg) {
  memset(cfg, 0, sizeof *cfg);
  cfg->recipe = NN_RECIPE_LESSON;
  cfg->lower = 1;
  cfg->stopwords = 1;
  cfg->drop_parentheses = 1;
  cfg->char_level = 0;
  cfg->unicode = 0;
  cfg->max_len = 64;
  cfg->vocab_size = 5000;
  cfg->min_count = 1;
  cfg->subword_buckets = 0;
  cfg->subword_min = 3;
  cfg->subword_max = 5;
  cfg->cell = NN_CELL_RNN;
  cfg->layers = 1;
  cfg->bidirectional = 0;
  cfg->attention = NN_ATTN_LINEAR;
  cfg->embed_dim = 100;
  cfg->hidden = 128;
  cfg->fc_hidden = 100;
  cfg->dropout = 0.1f;
  cfg->embed_dropout = 0.0f;
  cfg->word_dropout = 0.0f;
  cfg->ensemble = 1;
  cfg->epochs = 50;
  cfg->batch_size = 64;
  cfg->lr = 1e-4f;
  cfg->val_fraction = 0.15f;
  cfg->class_weights = 1;
  cfg->patience = 10;
  cfg->lr_patience = 3;
  cfg->lr_factor = 0.1f;
  cfg->monitor = NN_MONITOR_VAL_LOSS;
  cfg->seed = 1234;
  cfg->threads = 0;
  cfg->device = NN_DEVICE_AUTO;
  cfg->progress = 1;
  cfg->validation = NN_VALIDATION_RANDOM;
  cfg->validation_rows = 0;
  cfg->storage = NN_STORAGE_FLOAT32;
}

/* The default recipe: the lesson's network, chosen by validation weighted F1 on three corpora
 * (AG News titles, Debian package descriptions, WordNet glosses; tests/bench/quality.py) within
 * 3x the time of the old default (the lesson's network at lr 1e-3, 20 epochs). Each change from
 * the lesson, with what it gave on validation (ext/REFERENCE.md, "The default recipe"):
 * a GRU of 64 over 64-wide embeddings plus hashed character n-grams (subword_buckets), so a
 * word seen once or twice shares what its spelling has in common with other words; word, embedding and fc dropout against the overfitting a small corpus
 * invites; lr 3e-3 for 15 epochs, keeping the epoch with the best validation F1; the whole
 * vocabulary, parentheses kept (a package name in brackets is often the label's best clue);
 * unweighted loss (weighting raised recall of rare classes at the cost of weighted F1), with
 * label smoothing 0.1 (a model less sure of its training rows: validation F1 on AG News +0.007,
 * the mean of three seeds; neutral on the other two). */
void nn_config_default(nn_config *cfg) {
  nn_config_lesson(cfg);
  cfg->recipe = NN_RECIPE_DEFAULT;
  cfg->cell = NN_CELL_GRU;
  cfg->embed_dim = 64;
  cfg->hidden = 64;
  cfg->subword_buckets = 16384;
  cfg->dropout = 0.5f;
  cfg->embed_dropout = 0.5f;
  cfg->word_dropout = 0.2f;
  cfg->lr = 3e-3f;
  cfg->epochs = 15;
  cfg->monitor = NN_MONITOR_VAL_F1;
  cfg->vocab_size = 100000;
  cfg->drop_parentheses = 0;
  cfg->class_weights = 0;
  cfg->label_smoothing = 0.1f;
  cfg->data_sized = NN_SIZED_ALL;
}

int nn_config_sized_batch(int n_train) { /* about 32 batches an epoch, 8 to 64 rows each */
  int b = 8;
  while (b < 64 && b * 32 < n_train) b *= 2;
  return b;
}

int nn_config_sized_epochs(int batches) { /* at least 1,000 optimizer steps, 15 to 60 epochs */
  int e = (1000 + batches - 1) / (batches > 0 ? batches : 1);
  return e < 15 ? 15 : e > 60 ? 60 : e;
}

void nn_config_size_to_data(nn_config *cfg, int n_train, int C, int n_unlabelled, int64_t tokens) {
  unsigned sized = cfg->data_sized;
  cfg->data_sized = 0;
  cfg->data_sized_done |= sized;
  if (n_train < 1) n_train = 1;
  if (sized & NN_SIZED_BATCH) cfg->batch_size = nn_config_sized_batch(n_train);
  int batches = (n_train + cfg->batch_size - 1) / cfg->batch_size;
  if (sized & NN_SIZED_EPOCHS) cfg->epochs = nn_config_sized_epochs(batches);
  if (sized & NN_SIZED_PATIENCE) { /* a third of the epochs, at least 10 */
    int p = cfg->epochs / 3;
    cfg->patience = p < 10 ? 10 : p;
  }
  /* Skip-gram vectors of the table's own texts: from a few hundred labels, the classifier reads
   * words no label reached in the places of words it learnt (AG News, 200 labels and 7,800
   * unlabelled titles: 0.51 -> 0.66 on held-out training rows). Small corpora want many passes
   * (10 passes over 8,000 titles gave 0.55, 20 0.66, 40 and 80 no better than 40); large ones
   * fewer, so that the work stays bounded. Too few texts teach vectors worse than none: with
   * 200 labels, 1,000 unlabelled rows lost 0.09 on Debian descriptions and 3,000 still 0.01,
   * 5,000 gained on all three corpora measured (NN_PRETRAIN_ROWS). */
  if ((sized & NN_SIZED_PRETRAIN) && n_unlabelled >= NN_PRETRAIN_ROWS && tokens > 0) {
    int64_t p = NN_PRETRAIN_TOKEN_PASSES / tokens;
    cfg->pretrain_epochs = p < 1 ? 1 : p > 40 ? 40 : (int)p;
  } else {
    cfg->data_sized_done &= ~NN_SIZED_PRETRAIN;
  }
  if ((sized & NN_SIZED_SUBWORDS) && cfg->pretrain_epochs > 0 && tokens > 0)
    cfg->subword_buckets = 0;
  else cfg->data_sized_done &= ~NN_SIZED_SUBWORDS;
  /* Self-training: the classifier, once trained on the few labels and the pretrained vectors,
   * labels the unlabelled rows it is surest of, and trains again on both. On held-out training
   * rows (200, 500 and 1,000 labels, 7,000 to 7,800 unlabelled rows; AG News titles, Debian
   * package descriptions, WordNet glosses; 3 seeds) 6 pseudo-labelled rows per labelled row
   * gained 0.040 / 0.030 / 0.013 on average, 3 rows 0.030 / 0.024 / 0.016 (tests/bench/
   * RESULTS.md, "Self-training"). With many labels the split validates and the unlabelled rows
   * teach less: not sized there. */
  if ((sized & NN_SIZED_SELF_TRAINING) && cfg->pretrain_epochs > 0 && n_unlabelled > 0 &&
      n_train < NN_SMALL_ROWS)
    cfg->self_training = NN_SELF_TRAINING;
  else cfg->data_sized_done &= ~NN_SIZED_SELF_TRAINING;
  /* Word vectors 128 wide for 64 when fewer than NN_SMALL_ROWS rows are labelled and nothing
   * pretrains them: learnt from the labels alone, a wider table holds more of what a few hundred
   * rows say about each word. On held-out training rows (500, 1,000 and 2,500 labels; AG News
   * titles, Debian package descriptions, WordNet glosses; three seeds) +0.006 weighted F1 on
   * average, WordNet +0.008 to +0.020, and the fit still takes seconds; with the pretraining
   * (its 64-wide vectors learnt on the unlabelled rows) 128 measured no better and slower
   * (tests/bench/RESULTS.md, "Wider word vectors for few labels"). */
  nn_config wide = *cfg;
  wide.embed_dim = NN_SMALL_EMBED_DIM;
  /* tables made larger by options (subword_buckets, vocab_size, ensemble) keep their width:
   * the recipe never takes a model past a size the options alone stayed within */
  if ((sized & NN_SIZED_EMBED_DIM) && n_train < NN_SMALL_ROWS && cfg->pretrain_epochs == 0 &&
      nn_config_param_count(&wide, (uint64_t)(C > 0 ? C : 1)) <= NN_SMALL_WIDE_PARAMS)
    cfg->embed_dim = NN_SMALL_EMBED_DIM;
  else cfg->data_sized_done &= ~NN_SIZED_EMBED_DIM;
  /* Word dropout 0.2 or 0, chosen on the labelled rows (choose.c): a lever of the corpus, not
   * of its size. Without it, package descriptions whose section one word names gained
   * 0.02-0.03 weighted F1 at 200-2,500 labels, and news titles lost 0.03-0.04 (held-out
   * training rows and the test splits; tests/bench/RESULTS.md, "Word dropout, chosen on the
   * labelled rows"). Measured from NN_CHOOSE_ROWS rows: halves of fewer rows score by noise.
   * Only where every labelled row trains the one network for a fixed schedule, the case
   * measured: the folds then train as the model will. Its four trainings read twice the
   * tokens the training does: up to NN_CHOOSE_TOKENS token-epochs (gcloud's descriptions of a
   * few sentences, 2,500 rows: 0.86 million, the choice 5.8 s and the fit 9.3 s on two cores),
   * so that longer texts, whose training alone nears the time a fit of a few thousand rows
   * should take, are not made to take three times as long. */
  if ((sized & NN_SIZED_WORD_DROPOUT) && n_train >= NN_CHOOSE_ROWS && n_train < NN_SMALL_ROWS &&
      cfg->validation == NN_VALIDATION_NONE && cfg->pretrain_epochs == 0 &&
      !(cfg->self_training > 0.0f) && cfg->ensemble <= 1 && cfg->word_dropout > 0.0f &&
      (int64_t)cfg->epochs * tokens <= NN_CHOOSE_TOKENS)
    ; /* chosen by the trainer, before the first epoch */
  else cfg->data_sized_done &= ~NN_SIZED_WORD_DROPOUT;
}

/* The recipe a config starts from (the "recipe" option). */
static void config_recipe(nn_config *cfg, nn_recipe recipe) {
  if (recipe == NN_RECIPE_LESSON) nn_config_lesson(cfg);
  else nn_config_default(cfg);
}

/* ------------------------------------------------------------------------------- size */

uint64_t nn_config_param_count(const nn_config *cfg, uint64_t num_classes) {
  uint64_t V = (uint64_t)(cfg->vocab_size > 0 ? cfg->vocab_size : 0);
  uint64_t E = (uint64_t)(cfg->embed_dim > 0 ? cfg->embed_dim : 0);
  uint64_t H = (uint64_t)(cfg->hidden > 0 ? cfg->hidden : 0);
  uint64_t L = (uint64_t)(cfg->layers > 0 ? cfg->layers : 0);
  uint64_t F = (uint64_t)(cfg->fc_hidden > 0 ? cfg->fc_hidden : 0);
  uint64_t D = cfg->bidirectional ? 2 : 1;
  uint64_t G = cfg->cell == NN_CELL_LSTM ? 4 : cfg->cell == NN_CELL_GRU ? 3 : 1;
  /* every factor is below 2^21, so no product here overflows 64 bits */
  uint64_t S = (uint64_t)(cfg->subword_buckets > 0 ? cfg->subword_buckets : 0);
  uint64_t n = (V + S) * E; /* embeddings and subwords tables */
  for (uint64_t l = 0; l < L; l++) {
    uint64_t in = l == 0 ? E : H * D;
    n += D * (G * H * in + G * H * H + 2 * G * H);
  }
  uint64_t P = H * D; /* width of the encoder output */
  switch (cfg->attention) {
  case NN_ATTN_ADDITIVE: n += P * P + 2 * P; break; /* proj (P,P) + (P), v (1,P) */
  case NN_ATTN_SELF: n += 3 * (P * P + P); break;   /* query, key, value (P,P) + (P) */
  case NN_ATTN_DOT: break;                          /* no parameters */
  default: n += P + 1; break;                       /* linear (1,P) + (1) */
  }
  if (F) {
    n += F * P + F;
    P = F;
  }
  n += num_classes * P + num_classes;
  return n * (uint64_t)(cfg->ensemble > 1 ? cfg->ensemble : 1); /* an ensemble: K networks */
}

/* ------------------------------------------------------------------------------- messages */

static void range_text(char *out, size_t n, const config_option *o) {
  switch (o->kind) {
  case OPT_BOOL: snprintf(out, n, "true or false"); break;
  case OPT_INT:
  case OPT_SEED:
    snprintf(out, n, "an integer from %lld to %lld", (long long)o->imin, (long long)o->imax);
    break;
  case OPT_FLOAT:
    snprintf(out, n, "a number in %c%g, %g%c", o->min_open ? '(' : '[', o->fmin, o->fmax,
             o->max_open ? ')' : ']');
    break;
  case OPT_CELL:
  case OPT_ATTENTION:
  case OPT_DEVICE:
  case OPT_MONITOR:
  case OPT_RECIPE:
  case OPT_SCHEDULE:
  case OPT_VALIDATION:
  case OPT_STORAGE: { /* "a", "b" or "c" */
    int count;
    const char *const *names = enum_names(o->kind, &count);
    size_t used = 0;
    out[0] = 0;
    for (int k = 0; k < count && used < n; k++)
      used += (size_t)snprintf(out + used, n - used, "%s\"%s\"",
                               k == 0           ? ""
                               : k == count - 1 ? " or "
                                                : ", ",
                               names[k]);
    break;
  }
  }
}

/* option "NAME" must be RANGE, got GOT */
static int option_error(char *err, const config_option *o, const char *got) {
  char range[96];
  range_text(range, sizeof range, o);
  snprintf(err, NN_ERR_LEN, "option \"%s\" must be %s, got %s", o->name, range, got);
  return NN_ERROR;
}

/* How a JSON value is shown after "got": strings quoted, numbers and literals as written,
 * arrays and objects by kind. */
static void got_text(char *out, size_t n, const nn_json *v, const char *json) {
  switch (v->type) {
  case NN_JSON_STRING: nn_json_quote_for_message(out, n, v->str, v->str_len); break;
  case NN_JSON_ARRAY: snprintf(out, n, "an array"); break;
  case NN_JSON_OBJECT: snprintf(out, n, "an object"); break;
  default: {
    size_t len = v->end - v->start;
    if (len > 40) snprintf(out, n, "%.40s...", json + v->start);
    else snprintf(out, n, "%.*s", (int)len, json + v->start);
  }
  }
}

size_t nn_edit_distance(const char *a, size_t na, const char *b, size_t nb) {
  size_t row[64];
  if (na >= 63 || nb >= 63) return (size_t)-1;
  for (size_t j = 0; j <= nb; j++) row[j] = j;
  for (size_t i = 1; i <= na; i++) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= nb; j++) {
      size_t up = row[j];
      size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      size_t best = diag + cost;
      if (up + 1 < best) best = up + 1;
      if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
      row[j] = best;
      diag = up;
    }
  }
  return row[nb];
}

/* The "did you mean" of an unknown key: the nearest of nn_config's keys, then of the caller's
 * (o->extra_names: the keys it reads), the first at the smallest distance. */
static int unknown_option_error(char *err, const char *key, size_t key_len, const nn_options *o) {
  char quoted[128];
  nn_json_quote_for_message(quoted, sizeof quoted, key, key_len);
  const char *best = NULL;
  size_t best_d = 3;
  for (size_t i = 0; i < NUM_OPTIONS + (size_t)o->nextra; i++) {
    const char *name = i < NUM_OPTIONS ? config_options[i].name : o->extra_names[i - NUM_OPTIONS];
    if (!name) continue;
    size_t d = nn_edit_distance(key, key_len, name, strlen(name));
    if (d < best_d && d < strlen(name) / 2 + 1) best_d = d, best = name;
  }
  if (best) snprintf(err, NN_ERR_LEN, "unknown option %s (did you mean \"%s\"?)", quoted, best);
  else snprintf(err, NN_ERR_LEN, "unknown option %s", quoted);
  return NN_ERROR;
}

/* ------------------------------------------------------------------------------- validate */

static int float_in_range(const config_option *o, double x) {
  if (!isfinite(x)) return 0;
  if (o->min_open ? !(x > o->fmin) : !(x >= o->fmin)) return 0;
  if (o->max_open ? !(x < o->fmax) : !(x <= o->fmax)) return 0;
  return 1;
}

static int check_size(const nn_config *cfg, char *err) {
  uint64_t total = nn_config_param_count(cfg, 2);
  if (total <= NN_MAX_PARAMS) return NN_OK;
  /* blame the option whose smallest value shrinks the model the most */
  static const char *const culprits[] = {"vocab_size", "embed_dim", "hidden",         "layers",
                                         "fc_hidden",  "ensemble",  "subword_buckets"};
  const char *name = culprits[0];
  uint64_t best = total;
  int value = 0;
  for (int i = 0; i < 7; i++) {
    nn_config c = *cfg;
    int *field = NULL;
    int small = 1;
    for (size_t k = 0; k < NUM_OPTIONS; k++)
      if (strcmp(config_options[k].name, culprits[i]) == 0) {
        field = (int *)((char *)&c + config_options[k].offset);
        small = (int)config_options[k].imin;
      }
    int old = *field;
    *field = small;
    uint64_t t = nn_config_param_count(&c, 2);
    if (t < best) best = t, name = culprits[i], value = old;
  }
  if (best == total) value = cfg->vocab_size;
  snprintf(err, NN_ERR_LEN,
           "option \"%s\" = %d makes the model too large: %llu parameters, at most %llu", name,
           value, (unsigned long long)total, (unsigned long long)NN_MAX_PARAMS);
  return NN_ERROR;
}

int nn_config_validate(const nn_config *cfg, char *err) {
  char got[64];
  for (size_t i = 0; i < NUM_OPTIONS; i++) {
    const config_option *o = &config_options[i];
    const char *field = (const char *)cfg + o->offset;
    switch (o->kind) {
    case OPT_BOOL:
    case OPT_INT: {
      int x;
      memcpy(&x, field, sizeof x);
      if (x < o->imin || x > o->imax) {
        snprintf(got, sizeof got, "%d", x);
        return option_error(err, o, got);
      }
      break;
    }
    case OPT_SEED: {
      uint64_t x;
      memcpy(&x, field, sizeof x);
      if (x > (uint64_t)o->imax) {
        snprintf(got, sizeof got, "%llu", (unsigned long long)x);
        return option_error(err, o, got);
      }
      break;
    }
    case OPT_FLOAT: {
      float x;
      memcpy(&x, field, sizeof x);
      if (!float_in_range(o, x)) {
        snprintf(got, sizeof got, "%.9g", (double)x);
        return option_error(err, o, got);
      }
      break;
    }
    case OPT_CELL:
    case OPT_ATTENTION:
    case OPT_DEVICE:
    case OPT_MONITOR:
    case OPT_RECIPE:
    case OPT_SCHEDULE:
    case OPT_VALIDATION:
    case OPT_STORAGE: {
      int x, count; /* the enums are int-sized */
      memcpy(&x, field, sizeof x);
      enum_names(o->kind, &count);
      if (x < 0 || x >= count) {
        snprintf(got, sizeof got, "%d", x);
        return option_error(err, o, got);
      }
      break;
    }
    }
  }
  if (cfg->subword_buckets > 0 && cfg->subword_min > cfg->subword_max) {
    snprintf(err, NN_ERR_LEN, "option \"subword_min\" (%d) must not exceed \"subword_max\" (%d)",
             cfg->subword_min, cfg->subword_max);
    return NN_ERROR;
  }
  if (cfg->subword_buckets > 0 && cfg->char_level) {
    snprintf(err, NN_ERR_LEN,
             "option \"subword_buckets\" needs word tokens: it cannot go with \"char_level\"");
    return NN_ERROR;
  }
  return check_size(cfg, err);
}

/* ------------------------------------------------------------------------------- parse */

/* The number as written, read straight to float (no double rounding). */
static float json_float(const nn_json *v, const char *json) {
  char buf[64];
  size_t n = v->end - v->start;
  if (n >= sizeof buf) return (float)v->number;
  memcpy(buf, json + v->start, n);
  buf[n] = 0;
  return nn_strtof_c(buf);
}

static int parse_option(nn_config *cfg, const config_option *o, const nn_json *v, const char *json,
                        char *err) {
  char got[160];
  got_text(got, sizeof got, v, json);
  char *field = (char *)cfg + o->offset;
  int64_t i;
  switch (o->kind) {
  case OPT_BOOL: {
    int x;
    if (v->type == NN_JSON_TRUE) x = 1;
    else if (v->type == NN_JSON_FALSE) x = 0;
    else if (nn_json_integral(v, &i) && (i == 0 || i == 1)) x = (int)i;
    else return option_error(err, o, got);
    memcpy(field, &x, sizeof x);
    return NN_OK;
  }
  case OPT_INT: {
    if (!nn_json_integral(v, &i) || i < o->imin || i > o->imax) return option_error(err, o, got);
    int x = (int)i;
    memcpy(field, &x, sizeof x);
    return NN_OK;
  }
  case OPT_SEED: {
    if (!nn_json_integral(v, &i) || i < o->imin || i > o->imax) return option_error(err, o, got);
    uint64_t x = (uint64_t)i;
    memcpy(field, &x, sizeof x);
    return NN_OK;
  }
  case OPT_FLOAT: {
    if (v->type != NN_JSON_NUMBER) return option_error(err, o, got);
    float x = json_float(v, json);
    if (!float_in_range(o, v->number) || !float_in_range(o, x)) return option_error(err, o, got);
    memcpy(field, &x, sizeof x);
    return NN_OK;
  }
  case OPT_CELL:
  case OPT_ATTENTION:
  case OPT_DEVICE:
  case OPT_MONITOR:
  case OPT_RECIPE:
  case OPT_SCHEDULE:
  case OPT_VALIDATION:
  case OPT_STORAGE: {
    int count;
    const char *const *names = enum_names(o->kind, &count);
    if (v->type != NN_JSON_STRING) return option_error(err, o, got);
    for (int k = 0; k < count; k++)
      if (v->str_len == strlen(names[k]) && memcmp(v->str, names[k], v->str_len) == 0) {
        memcpy(field, &k, sizeof k);
        return NN_OK;
      }
    return option_error(err, o, got);
  }
  }
  return option_error(err, o, got);
}

/* The NN_SIZED_* bit of the option named name (0: none). */
static unsigned sized_bit(const char *name) {
  return !strcmp(name, "batch_size")        ? NN_SIZED_BATCH
         : !strcmp(name, "epochs")          ? NN_SIZED_EPOCHS
         : !strcmp(name, "patience")        ? NN_SIZED_PATIENCE | NN_SIZED_VALIDATION
         : !strcmp(name, "pretrain_epochs") ? NN_SIZED_PRETRAIN
         : !strcmp(name, "subword_buckets") ? NN_SIZED_SUBWORDS
         : !strcmp(name, "self_training")   ? NN_SIZED_SELF_TRAINING
         : !strcmp(name, "embed_dim")       ? NN_SIZED_EMBED_DIM
         : !strcmp(name, "word_dropout")    ? NN_SIZED_WORD_DROPOUT
         : !strcmp(name, "validation") || !strcmp(name, "val_fraction") ||
                 !strcmp(name, "monitor") || !strcmp(name, "lr_patience")
             ? NN_SIZED_VALIDATION
             : 0u;
}

/* The table's entry named key (len bytes), or NULL. */
static const config_option *find_option(const char *key, size_t len) {
  for (size_t i = 0; i < NUM_OPTIONS; i++)
    if (len == strlen(config_options[i].name) && memcmp(key, config_options[i].name, len) == 0)
      return &config_options[i];
  return NULL;
}

int nn_options_parse(nn_options *o, const char *json, const char *const *extra, int nextra,
                     const nn_allocator *mem, char *err) {
  memset(o, 0, sizeof *o);
  o->text = json;
  if (nextra < 0 || nextra > NN_OPTIONS_MAX_EXTRA) {
    snprintf(err, NN_ERR_LEN, "options: %d keys of the caller's, at most %d", nextra,
             NN_OPTIONS_MAX_EXTRA);
    return NN_ERROR;
  }
  for (int k = 0; k < nextra; k++) o->extra_names[k] = extra[k];
  o->nextra = nextra;
  if (!json) return NN_OK;
  size_t len = strlen(json), k = 0;
  while (k < len && (json[k] == ' ' || json[k] == '\t' || json[k] == '\n' || json[k] == '\r')) k++;
  if (k == len) return NN_OK; /* "" or only whitespace: no options */
  char jerr[NN_ERR_LEN];
  int rc = nn_json_parse(&o->doc, json, len, mem, jerr);
  if (rc != NN_OK) {
    if (rc == NN_NOMEM) snprintf(err, NN_ERR_LEN, "%s", jerr);
    else snprintf(err, NN_ERR_LEN, "options must be a JSON object (%.400s)", jerr);
    return rc;
  }
  if (o->doc->type != NN_JSON_OBJECT) {
    snprintf(err, NN_ERR_LEN, "options must be a JSON object");
    nn_json_free(o->doc);
    o->doc = NULL;
    return NN_ERROR;
  }
  for (size_t m = 0; m < o->doc->count; m++) { /* the keys are distinct (nn_json_parse) */
    const nn_json *member = &o->doc->items[m];
    const config_option *opt = find_option(member->key, member->key_len);
    for (int k = 0; k < nextra; k++) {
      const char *name = o->extra_names[k];
      if (!name || member->key_len != strlen(name) || memcmp(member->key, name, member->key_len))
        continue;
      /* a name nn_config has too ("class_weights": true / false) is the caller's as an object */
      if (!opt || member->type == NN_JSON_OBJECT) o->extra[k] = member;
    }
  }
  return NN_OK;
}

void nn_options_free(nn_options *o) {
  nn_json_free(o->doc);
  memset(o, 0, sizeof *o);
}

/* Whether member is one of the caller's keys (handed back, not the engine's). */
static int is_extra_member(const nn_options *o, const nn_json *member) {
  for (int k = 0; k < o->nextra; k++)
    if (o->extra[k] == member) return 1;
  return 0;
}

int nn_options_apply(const nn_options *o, nn_config *cfg, char *err) {
  const nn_json *doc = o->doc;
  const char *json = o->text;
  if (!doc) return NN_OK;
  nn_config c = *cfg;
  int rc = NN_OK;
  /* "recipe" first, wherever it stands: it replaces every field, the other keys then apply */
  const nn_json *recipe = nn_json_get(doc, "recipe");
  if (recipe) {
    rc = parse_option(&c, &config_options[0], recipe, json, err);
    if (rc == NN_OK) config_recipe(&c, c.recipe);
  }
  for (size_t m = 0; m < doc->count && rc == NN_OK; m++) {
    const nn_json *member = &doc->items[m];
    if (member == recipe || is_extra_member(o, member)) continue;
    const config_option *opt = find_option(member->key, member->key_len);
    if (!opt) rc = unknown_option_error(err, member->key, member->key_len, o);
    else rc = parse_option(&c, opt, member, json, err);
    if (opt) c.data_sized &= ~sized_bit(opt->name); /* given: not sized to the data */
  }
  /* a character model has no words to split: asking for char_level turns the default's
   * subwords off, unless the options name subword_buckets too (then validation decides) */
  if (rc == NN_OK && c.char_level && nn_json_get(doc, "char_level") &&
      !nn_json_get(doc, "subword_buckets"))
    c.subword_buckets = 0;
  if (rc == NN_OK) rc = nn_config_validate(&c, err);
  if (rc == NN_OK) *cfg = c;
  return rc;
}

int nn_config_parse_json(nn_config *cfg, const char *json, const nn_allocator *mem, char *err) {
  nn_options o;
  int rc = nn_options_parse(&o, json, NULL, 0, mem, err);
  if (rc == NN_OK) rc = nn_options_apply(&o, cfg, err);
  nn_options_free(&o);
  return rc;
}

/* ------------------------------------------------------------------------------- output */

char *nn_config_to_json(const nn_config *cfg, const nn_allocator *mem) {
  nn_strbuf sb;
  nn_strbuf_init(&sb, mem);
  nn_strbuf_puts(&sb, "{");
  for (size_t i = 0; i < NUM_OPTIONS; i++) {
    const config_option *o = &config_options[i];
    const char *field = (const char *)cfg + o->offset;
    nn_strbuf_printf(&sb, "%s\"%s\":", i ? "," : "", o->name);
    switch (o->kind) {
    case OPT_BOOL: {
      int x;
      memcpy(&x, field, sizeof x);
      if (x == 0 || x == 1) nn_strbuf_puts(&sb, x ? "true" : "false");
      else nn_strbuf_printf(&sb, "%d", x); /* invalid, but shown as it is */
      break;
    }
    case OPT_INT: {
      int x;
      memcpy(&x, field, sizeof x);
      nn_strbuf_printf(&sb, "%d", x);
      break;
    }
    case OPT_SEED: {
      uint64_t x;
      memcpy(&x, field, sizeof x);
      nn_strbuf_printf(&sb, "%llu", (unsigned long long)x);
      break;
    }
    case OPT_FLOAT: {
      float x;
      memcpy(&x, field, sizeof x);
      nn_strbuf_append_float(&sb, x);
      break;
    }
    case OPT_CELL:
    case OPT_ATTENTION:
    case OPT_DEVICE:
    case OPT_MONITOR:
    case OPT_RECIPE:
    case OPT_SCHEDULE:
    case OPT_VALIDATION:
    case OPT_STORAGE: {
      int x;
      memcpy(&x, field, sizeof x);
      nn_strbuf_printf(&sb, "\"%s\"", enum_name(o->kind, x));
      break;
    }
    }
  }
  nn_strbuf_puts(&sb, "}");
  return nn_strbuf_take(&sb);
}

/* ------------------------------------------------------------------------------- warm start */

/* One option's value of cfg as JSON writes it (names quoted), for messages. */
static void value_text(char *out, size_t n, const config_option *o, const nn_config *cfg) {
  const char *field = (const char *)cfg + o->offset;
  int x;
  switch (o->kind) {
  case OPT_SEED: {
    uint64_t u;
    memcpy(&u, field, sizeof u);
    snprintf(out, n, "%llu", (unsigned long long)u);
    return;
  }
  case OPT_FLOAT: {
    float f;
    memcpy(&f, field, sizeof f);
    nn_json_format_double(out, n, nn_decimal_double(f));
    return;
  }
  case OPT_BOOL:
    memcpy(&x, field, sizeof x);
    snprintf(out, n, "%s", x ? "true" : "false");
    return;
  case OPT_INT:
    memcpy(&x, field, sizeof x);
    snprintf(out, n, "%d", x);
    return;
  default:
    memcpy(&x, field, sizeof x);
    snprintf(out, n, "\"%s\"", enum_name(o->kind, x));
    return;
  }
}

/* The keys that fix the network's shape or what its vocabulary means: a warm start keeps the
 * base model's. */
static const char *const architecture_keys[] = {
    "cell",       "layers",   "bidirectional",   "attention",   "embed_dim",  "hidden",
    "fc_hidden",  "ensemble", "vocab_size",      "lower",       "stopwords",  "drop_parentheses",
    "char_level", "unicode",  "subword_buckets", "subword_min", "subword_max"};

int nn_config_check_warm_start(const nn_config *cfg, const nn_config *base, char *err) {
  for (size_t k = 0; k < sizeof architecture_keys / sizeof *architecture_keys; k++)
    for (size_t i = 0; i < NUM_OPTIONS; i++) {
      const config_option *o = &config_options[i];
      if (strcmp(o->name, architecture_keys[k]) != 0) continue;
      size_t size = o->kind == OPT_SEED ? sizeof(uint64_t) : sizeof(int);
      if (memcmp((const char *)cfg + o->offset, (const char *)base + o->offset, size) == 0)
        continue;
      char got[64], has[64];
      value_text(got, sizeof got, o, cfg);
      value_text(has, sizeof has, o, base);
      snprintf(err, NN_ERR_LEN,
               "option \"%s\" cannot change when training from a model: the base model has %s, "
               "got %s",
               o->name, has, got);
      return NN_ERROR;
    }
  return NN_OK;
}
