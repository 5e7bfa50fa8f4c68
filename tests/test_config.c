/* test_config.c -- the options of attn_train (engine/config.c): defaults as nn.h documents
 * them, every key parsed, every error message checked by its exact text, *cfg untouched on
 * error, and parse(to_json(c)) == c for the defaults and for random configs. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "json.h"
#include "nn_internal.h"

static int same_config(const nn_config *a, const nn_config *b, char *what, size_t n) {
  if (a->storage != b->storage) {
    snprintf(what, n, "storage differs");
    return 0;
  }
#define SAME(f)                                                                                    \
  if (memcmp(&a->f, &b->f, sizeof a->f) != 0) {                                                    \
    snprintf(what, n, "%s differs", #f);                                                           \
    return 0;                                                                                      \
  }
  // clang-format off
  SAME(lower) SAME(stopwords) SAME(char_level) SAME(unicode) SAME(max_len) SAME(vocab_size)
  SAME(cell) SAME(layers) SAME(bidirectional) SAME(attention) SAME(embed_dim) SAME(hidden)
  SAME(fc_hidden) SAME(dropout) SAME(epochs) SAME(batch_size) SAME(lr) SAME(val_fraction)
  SAME(class_weights) SAME(patience) SAME(lr_patience) SAME(lr_factor) SAME(monitor) SAME(seed)
  SAME(threads) SAME(device) SAME(progress) SAME(validation) SAME(recipe) SAME(ensemble)
  SAME(embed_dropout) SAME(word_dropout) SAME(lazy_adam) SAME(lr_schedule) SAME(min_count)
  SAME(drop_parentheses) SAME(subword_buckets) SAME(subword_min) SAME(subword_max)
#undef SAME
  snprintf(what, n, "same");
  // clang-format on
  return 1;
}

/* Parse json over the defaults; expect an error with exactly `want`, and cfg untouched. */
static void expect_error(const char *json, const char *want) {
  nn_config cfg, before;
  char err[NN_ERR_LEN] = "", what[64];
  nn_config_default(&cfg);
  cfg.hidden = 77; /* a non-default value that must survive the failed parse */
  before = cfg;
  int rc = nn_config_parse_json(&cfg, json, NULL, err);
  CHECK(rc == NN_ERROR, "%s: rc %d, expected NN_ERROR", json, rc);
  CHECK(strcmp(err, want) == 0, "%s:\n  got      %s\n  expected %s", json, err, want);
  CHECK(same_config(&cfg, &before, what, sizeof what), "%s: cfg changed on error: %s", json, what);
}

static nn_config parse_ok(const char *json) {
  nn_config cfg;
  char err[NN_ERR_LEN] = "";
  nn_config_default(&cfg);
  int rc = nn_config_parse_json(&cfg, json, NULL, err);
  CHECK(rc == NN_OK, "%s: rc %d: %s", json, rc, err);
  return cfg;
}

/* parameter count of the network as PyTorch's modules lay it out (independent of config.c):
 * used for the expected numbers of the "too large" messages */
static unsigned long long torch_params(long long V, long long E, long long H, long long L, int bi,
                                       int gates, long long F, long long C) {
  long long D = bi ? 2 : 1, n = V * E;
  for (long long l = 0; l < L; l++) {
    long long in = l ? H * D : E;
    n += D * (gates * H * in + gates * H * H + 2 * gates * H);
  }
  n += H * D + 1; /* linear attention */
  long long width = H * D;
  if (F) n += F * width + F, width = F;
  n += C * width + C;
  return (unsigned long long)n;
}

static void test_defaults(void) {
  nn_config c;
  memset(&c, 0xAB, sizeof c);
  nn_config_default(&c);
  CHECK(c.lower == 1 && c.stopwords == 1 && c.char_level == 0 && c.unicode == 0,
        "text defaults %d %d %d %d", c.lower, c.stopwords, c.char_level, c.unicode);
  CHECK(c.max_len == 64 && c.vocab_size == 100000 && c.min_count == 1 && c.drop_parentheses == 0,
        "max_len %d vocab_size %d min_count %d drop_parentheses %d", c.max_len, c.vocab_size,
        c.min_count, c.drop_parentheses);
  CHECK(c.subword_buckets == 16384 && c.subword_min == 3 && c.subword_max == 5 && c.ensemble == 1,
        "subwords %d %d..%d ensemble %d", c.subword_buckets, c.subword_min, c.subword_max,
        c.ensemble);
  CHECK(c.cell == NN_CELL_GRU && c.layers == 1 && c.bidirectional == 0, "cell %d layers %d bi %d",
        c.cell, c.layers, c.bidirectional);
  CHECK(c.attention == NN_ATTN_LINEAR && c.embed_dim == 64 && c.hidden == 64 && c.fc_hidden == 100,
        "attention %d embed %d hidden %d fc %d", c.attention, c.embed_dim, c.hidden, c.fc_hidden);
  CHECK(c.dropout == 0.5f && c.embed_dropout == 0.5f && c.word_dropout == 0.2f && c.lr == 3e-3f &&
            c.val_fraction == 0.15f && c.lr_factor == 0.1f,
        "dropout %g embed_dropout %g word_dropout %g lr %g val %g factor %g", c.dropout,
        c.embed_dropout, c.word_dropout, c.lr, c.val_fraction, c.lr_factor);
  CHECK(c.epochs == 15 && c.batch_size == 64 && c.class_weights == 0 && c.patience == 10 &&
            c.lr_patience == 3 && c.monitor == NN_MONITOR_VAL_F1,
        "epochs %d batch %d cw %d patience %d lr_patience %d monitor %d", c.epochs, c.batch_size,
        c.class_weights, c.patience, c.lr_patience, c.monitor);
  /* the lesson's recipe, exactly (Made-With-ML "Attention": lr 1e-4, 50 epochs, ...) */
  nn_config l;
  memset(&l, 0xAB, sizeof l);
  nn_config_lesson(&l);
  CHECK(l.recipe == NN_RECIPE_LESSON && l.cell == NN_CELL_RNN && l.embed_dim == 100 &&
            l.hidden == 128 && l.fc_hidden == 100 && l.dropout == 0.1f && l.lr == 1e-4f &&
            l.epochs == 50 && l.patience == 10 && l.lr_patience == 3 && l.lr_factor == 0.1f &&
            l.class_weights == 1 && l.monitor == NN_MONITOR_VAL_LOSS && l.vocab_size == 5000 &&
            l.drop_parentheses == 1 && l.subword_buckets == 0 && l.embed_dropout == 0.0f &&
            l.word_dropout == 0.0f && l.ensemble == 1,
        "lesson recipe: cell %d embed %d hidden %d lr %g epochs %d", l.cell, l.embed_dim, l.hidden,
        l.lr, l.epochs);
  nn_config pl = parse_ok("{\"recipe\":\"lesson\"}");
  char lwhat[64];
  CHECK(same_config(&pl, &l, lwhat, sizeof lwhat),
        "{\"recipe\":\"lesson\"} vs nn_config_lesson: %s", lwhat);
  CHECK(pl.lr == 1e-4f && pl.epochs == 50 && pl.cell == NN_CELL_RNN && pl.subword_buckets == 0,
        "{\"recipe\":\"lesson\"}: lr %g epochs %d", pl.lr, pl.epochs);
  CHECK(c.seed == 1234 && c.threads == 0 && c.device == NN_DEVICE_AUTO && c.progress == 1,
        "seed %llu threads %d device %d progress %d", (unsigned long long)c.seed, c.threads,
        c.device, c.progress);
  char err[NN_ERR_LEN] = "";
  CHECK(nn_config_validate(&c, err) == NN_OK, "defaults validate: %s", err);

  CHECK(strcmp(nn_cell_name(NN_CELL_RNN), "rnn") == 0 &&
            strcmp(nn_cell_name(NN_CELL_GRU), "gru") == 0 &&
            strcmp(nn_cell_name(NN_CELL_LSTM), "lstm") == 0,
        "cell names");
  CHECK(strcmp(nn_attention_name(NN_ATTN_LINEAR), "linear") == 0 &&
            strcmp(nn_attention_name(NN_ATTN_ADDITIVE), "additive") == 0 &&
            strcmp(nn_attention_name(NN_ATTN_SELF), "self") == 0 &&
            strcmp(nn_attention_name(NN_ATTN_DOT), "dot") == 0,
        "attention names");
  CHECK(c.monitor == NN_MONITOR_VAL_F1 &&
            strcmp(nn_monitor_name(NN_MONITOR_VAL_LOSS), "val_loss") == 0 &&
            strcmp(nn_monitor_name(NN_MONITOR_VAL_F1), "val_f1") == 0 &&
            strcmp(nn_monitor_name(NN_MONITOR_VAL_ACCURACY), "val_accuracy") == 0,
        "monitor: default val_f1, names");
  nn_config mon = parse_ok("{\"monitor\":\"val_f1\",\"attention\":\"dot\"}");
  CHECK(mon.monitor == NN_MONITOR_VAL_F1 && mon.attention == NN_ATTN_DOT, "monitor %d attention %d",
        mon.monitor, mon.attention);
  mon = parse_ok("{\"monitor\":\"val_accuracy\"}");
  CHECK(mon.monitor == NN_MONITOR_VAL_ACCURACY, "monitor %d", mon.monitor);
  CHECK(c.validation == NN_VALIDATION_RANDOM, "validation: default random (%d)", c.validation);
  CHECK(c.storage == NN_STORAGE_FLOAT32, "storage: default float32 (%d)", c.storage);
  mon = parse_ok("{\"storage\":\"float16\"}");
  CHECK(mon.storage == NN_STORAGE_FLOAT16 && strcmp(nn_storage_name(mon.storage), "float16") == 0,
        "storage \"float16\" (%d)", mon.storage);
  mon = parse_ok("{\"recipe\":\"lesson\"}");
  CHECK(mon.storage == NN_STORAGE_FLOAT32, "the lesson's storage: float32 (%d)", mon.storage);
  mon = parse_ok("{\"validation\":\"none\"}");
  CHECK(mon.validation == NN_VALIDATION_NONE &&
            strcmp(nn_validation_name(mon.validation), "none") == 0,
        "validation \"none\" (%d)", mon.validation);
  CHECK(strcmp(nn_device_name(NN_DEVICE_AUTO), "auto") == 0 &&
            strcmp(nn_device_name(NN_DEVICE_CPU), "cpu") == 0 &&
            strcmp(nn_device_name(NN_DEVICE_CUDA), "cuda") == 0,
        "device names");

  /* no options */
  nn_config d = parse_ok(NULL), e = parse_ok(""), f = parse_ok(" \n\t "), g = parse_ok("{}");
  char what[64];
  CHECK(same_config(&d, &c, what, sizeof what), "NULL options: %s", what);
  CHECK(same_config(&e, &c, what, sizeof what), "\"\" options: %s", what);
  CHECK(same_config(&f, &c, what, sizeof what), "blank options: %s", what);
  CHECK(same_config(&g, &c, what, sizeof what), "{} options: %s", what);

  char *json = nn_config_to_json(&c, NULL);
  const char *want =
      "{\"recipe\":\"default\",\"cell\":\"gru\",\"layers\":1,\"bidirectional\":false,"
      "\"attention\":\"linear\",\"embed_dim\":64,\"hidden\":64,\"fc_hidden\":100,\"dropout\":0.5,"
      "\"ensemble\":1,\"embed_dropout\":0.5,\"word_dropout\":0.2,\"epochs\":15,\"batch_size\":64,"
      "\"lr\":0.003,\"val_fraction\":0.15,\"class_weights\":false,\"label_smoothing\":0.1,"
      "\"lazy_adam\":false,"
      "\"patience\":10,\"lr_schedule\":\"plateau\",\"lr_patience\":3,\"lr_factor\":0.1,"
      "\"monitor\":\"val_f1\",\"seed\":1234,\"threads\":0,\"device\":\"auto\",\"progress\":true,"
      "\"lower\":true,\"stopwords\":true,\"drop_parentheses\":false,\"char_level\":false,"
      "\"unicode\":false,\"max_len\":64,\"vocab_size\":100000,\"min_count\":1,"
      "\"subword_buckets\":16384,\"subword_min\":3,\"subword_max\":5,\"validation\":\"random\","
      "\"pretrain_epochs\":0,\"self_training\":0,\"storage\":\"float32\"}";
  CHECK(json && strcmp(json, want) == 0, "defaults as JSON:\n  got      %s\n  expected %s", json,
        want);
  free(json);
}

static void test_every_key(void) {
  nn_config c =
      parse_ok("{\"cell\":\"lstm\",\"layers\":3,\"bidirectional\":true,\"attention\":\"self\","
               "\"embed_dim\":32,\"hidden\":48,\"fc_hidden\":0,\"dropout\":0.25,\"epochs\":7,"
               "\"batch_size\":16,\"lr\":0.01,\"val_fraction\":0.2,\"class_weights\":false,"
               "\"patience\":4,\"lr_patience\":0,\"lr_factor\":0.5,\"seed\":42,\"threads\":3,"
               "\"device\":\"cpu\",\"progress\":false,\"lower\":false,\"stopwords\":false,"
               "\"char_level\":true,\"unicode\":true,\"max_len\":200,\"vocab_size\":300}");
  CHECK(c.cell == NN_CELL_LSTM && c.layers == 3 && c.bidirectional == 1 &&
            c.attention == NN_ATTN_SELF,
        "network keys: cell %d layers %d bi %d attention %d", c.cell, c.layers, c.bidirectional,
        c.attention);
  CHECK(c.embed_dim == 32 && c.hidden == 48 && c.fc_hidden == 0 && c.dropout == 0.25f,
        "sizes: %d %d %d %g", c.embed_dim, c.hidden, c.fc_hidden, c.dropout);
  CHECK(c.epochs == 7 && c.batch_size == 16 && c.lr == 0.01f && c.val_fraction == 0.2f &&
            c.class_weights == 0,
        "training keys: %d %d %g %g %d", c.epochs, c.batch_size, c.lr, c.val_fraction,
        c.class_weights);
  CHECK(c.patience == 4 && c.lr_patience == 0 && c.lr_factor == 0.5f && c.seed == 42 &&
            c.threads == 3,
        "schedule keys: %d %d %g %llu %d", c.patience, c.lr_patience, c.lr_factor,
        (unsigned long long)c.seed, c.threads);
  CHECK(c.device == NN_DEVICE_CPU && c.progress == 0 && c.lower == 0 && c.stopwords == 0 &&
            c.char_level == 1 && c.unicode == 1 && c.max_len == 200 && c.vocab_size == 300,
        "text keys: %d %d %d %d %d %d %d %d", c.device, c.progress, c.lower, c.stopwords,
        c.char_level, c.unicode, c.max_len, c.vocab_size);

  /* other spellings of the same values */
  c = parse_ok("{\"cell\":\"gru\",\"attention\":\"additive\",\"device\":\"cuda\",\"lower\":0,"
               "\"unicode\":1,\"epochs\":1e2,\"seed\":9007199254740992,\"hidden\":4096.0,"
               "\"fc_hidden\":0,\"dropout\":0,\"lr\":10,\"val_fraction\":0.9,\"lr_factor\":1e-3}");
  CHECK(c.cell == NN_CELL_GRU && c.attention == NN_ATTN_ADDITIVE && c.device == NN_DEVICE_CUDA,
        "enums %d %d %d", c.cell, c.attention, c.device);
  CHECK(c.lower == 0 && c.unicode == 1 && c.epochs == 100 && c.hidden == 4096,
        "0/1 booleans and integral numbers: %d %d %d %d", c.lower, c.unicode, c.epochs, c.hidden);
  CHECK(c.seed == 9007199254740992ull, "seed 2^53: %llu", (unsigned long long)c.seed);
  CHECK(c.dropout == 0.0f && c.lr == 10.0f && c.val_fraction == 0.9f && c.lr_factor == 1e-3f,
        "interval ends: %g %g %g %g", c.dropout, c.lr, c.val_fraction, c.lr_factor);
  /* options apply over the current values */
  nn_config base;
  char err[NN_ERR_LEN] = "";
  nn_config_default(&base);
  base.hidden = 9;
  CHECK(nn_config_parse_json(&base, "{\"layers\":2}", NULL, err) == NN_OK && base.hidden == 9 &&
            base.layers == 2,
        "parse over current values: hidden %d layers %d (%s)", base.hidden, base.layers, err);
}

static void test_errors(void) {
  expect_error("{\"hidden\":\"big\"}",
               "option \"hidden\" must be an integer from 1 to 4096, got \"big\"");
  expect_error("{\"hidden\":0}", "option \"hidden\" must be an integer from 1 to 4096, got 0");
  expect_error("{\"hidden\":4097}",
               "option \"hidden\" must be an integer from 1 to 4096, got 4097");
  expect_error("{\"hidden\":12.5}",
               "option \"hidden\" must be an integer from 1 to 4096, got 12.5");
  expect_error("{\"hidden\":true}",
               "option \"hidden\" must be an integer from 1 to 4096, got true");
  expect_error("{\"hidden\":null}",
               "option \"hidden\" must be an integer from 1 to 4096, got null");
  expect_error("{\"hidden\":[1]}",
               "option \"hidden\" must be an integer from 1 to 4096, got an array");
  expect_error("{\"hidden\":{}}",
               "option \"hidden\" must be an integer from 1 to 4096, got an object");
  expect_error("{\"hidden\":99999999999999999999999}",
               "option \"hidden\" must be an integer from 1 to 4096, got 99999999999999999999999");
  expect_error("{\"embed_dim\":0}",
               "option \"embed_dim\" must be an integer from 1 to 4096, got 0");
  expect_error("{\"fc_hidden\":-1}",
               "option \"fc_hidden\" must be an integer from 0 to 4096, got -1");
  expect_error("{\"layers\":9}", "option \"layers\" must be an integer from 1 to 8, got 9");
  expect_error("{\"vocab_size\":2}",
               "option \"vocab_size\" must be an integer from 3 to 1000000, got 2");
  expect_error("{\"vocab_size\":1000001}",
               "option \"vocab_size\" must be an integer from 3 to 1000000, got 1000001");
  expect_error("{\"max_len\":4097}",
               "option \"max_len\" must be an integer from 1 to 4096, got 4097");
  expect_error("{\"epochs\":0}", "option \"epochs\" must be an integer from 1 to 100000, got 0");
  expect_error("{\"batch_size\":65537}",
               "option \"batch_size\" must be an integer from 1 to 65536, got 65537");
  expect_error("{\"patience\":0}",
               "option \"patience\" must be an integer from 1 to 100000, got 0");
  expect_error("{\"lr_patience\":-1}",
               "option \"lr_patience\" must be an integer from 0 to 100000, got -1");
  expect_error("{\"threads\":1025}",
               "option \"threads\" must be an integer from 0 to 1024, got 1025");
  expect_error(
      "{\"seed\":9007199254740993}",
      "option \"seed\" must be an integer from 0 to 9007199254740992, got 9007199254740993");
  expect_error("{\"seed\":-1}",
               "option \"seed\" must be an integer from 0 to 9007199254740992, got -1");
  expect_error("{\"seed\":\"1\"}",
               "option \"seed\" must be an integer from 0 to 9007199254740992, got \"1\"");
  /* numbers */
  expect_error("{\"lr\":\"1e-3\"}", "option \"lr\" must be a number in (0, 10], got \"1e-3\"");
  expect_error("{\"lr\":0}", "option \"lr\" must be a number in (0, 10], got 0");
  expect_error("{\"lr\":10.5}", "option \"lr\" must be a number in (0, 10], got 10.5");
  expect_error("{\"lr\":-1e-3}", "option \"lr\" must be a number in (0, 10], got -1e-3");
  expect_error("{\"lr\":1e-50}",
               "option \"lr\" must be a number in (0, 10], got 1e-50"); /* 0 as float */
  expect_error("{\"lr\":1e999}", "option \"lr\" must be a number in (0, 10], got 1e999");
  expect_error("{\"dropout\":1}", "option \"dropout\" must be a number in [0, 1), got 1");
  expect_error("{\"dropout\":0.99999999999}",
               "option \"dropout\" must be a number in [0, 1), got 0.99999999999"); /* 1 as float */
  expect_error("{\"dropout\":-0.1}", "option \"dropout\" must be a number in [0, 1), got -0.1");
  expect_error("{\"val_fraction\":0}",
               "option \"val_fraction\" must be a number in (0, 0.9], got 0");
  expect_error("{\"val_fraction\":0.95}",
               "option \"val_fraction\" must be a number in (0, 0.9], got 0.95");
  expect_error("{\"lr_factor\":1}", "option \"lr_factor\" must be a number in (0, 1), got 1");
  expect_error("{\"lr_factor\":false}",
               "option \"lr_factor\" must be a number in (0, 1), got false");
  /* booleans and names */
  expect_error("{\"lower\":2}", "option \"lower\" must be true or false, got 2");
  expect_error("{\"bidirectional\":\"yes\"}",
               "option \"bidirectional\" must be true or false, got \"yes\"");
  expect_error("{\"stopwords\":null}", "option \"stopwords\" must be true or false, got null");
  expect_error("{\"class_weights\":0.5}",
               "option \"class_weights\" must be true or false, got 0.5");
  expect_error("{\"cell\":\"GRU\"}",
               "option \"cell\" must be \"rnn\", \"gru\" or \"lstm\", got \"GRU\"");
  expect_error("{\"cell\":1}", "option \"cell\" must be \"rnn\", \"gru\" or \"lstm\", got 1");
  expect_error("{\"attention\":\"dotted\"}",
               "option \"attention\" must be \"linear\", \"additive\", \"self\" or \"dot\", got "
               "\"dotted\"");
  expect_error("{\"attention\":3}",
               "option \"attention\" must be \"linear\", \"additive\", \"self\" or \"dot\", got 3");
  expect_error(
      "{\"monitor\":\"f1\"}",
      "option \"monitor\" must be \"val_loss\", \"val_f1\" or \"val_accuracy\", got \"f1\"");
  expect_error("{\"monitor\":\"VAL_LOSS\"}",
               "option \"monitor\" must be \"val_loss\", \"val_f1\" or "
               "\"val_accuracy\", got \"VAL_LOSS\"");
  expect_error("{\"monitor\":1}",
               "option \"monitor\" must be \"val_loss\", \"val_f1\" or \"val_accuracy\", got 1");
  expect_error("{\"validation\":\"first\"}", "option \"validation\" must be \"random\", \"last\", "
                                             "\"none\" or \"query\", got \"first\"");
  expect_error("{\"validation\":0}", "option \"validation\" must be \"random\", \"last\", "
                                     "\"none\" or \"query\", got 0");
  expect_error("{\"device\":\"gpu\"}",
               "option \"device\" must be \"auto\", \"cpu\" or \"cuda\", got \"gpu\"");
  expect_error("{\"device\":\"cpu\\u0000\"}",
               "option \"device\" must be \"auto\", \"cpu\" or \"cuda\", got \"cpu\\x00\"");
  expect_error("{\"storage\":\"float8\"}",
               "option \"storage\" must be \"float32\" or \"float16\", got \"float8\"");
  expect_error("{\"storage\":16}", "option \"storage\" must be \"float32\" or \"float16\", got 16");
  /* keys */
  expect_error("{\"hiden\":128}", "unknown option \"hiden\" (did you mean \"hidden\"?)");
  expect_error("{\"epoch\":3}", "unknown option \"epoch\" (did you mean \"epochs\"?)");
  expect_error("{\"Hidden\":3}", "unknown option \"Hidden\" (did you mean \"hidden\"?)");
  expect_error("{\"learning_rate\":0.1}", "unknown option \"learning_rate\"");
  expect_error("{\"\":1}", "unknown option \"\"");
  expect_error("{\"a\\\"b\\u0001\":1}", "unknown option \"a\\\"b\\x01\"");
  expect_error("{\"hidden\":64,\"layers\":99}",
               "option \"layers\" must be an integer from 1 to 8, got 99");
  /* not an object, not JSON */
  expect_error("[1]", "options must be a JSON object");
  expect_error("3", "options must be a JSON object");
  expect_error("\"hidden\"", "options must be a JSON object");
  expect_error("null", "options must be a JSON object");
  expect_error("{",
               "options must be a JSON object (invalid JSON at byte 1: expected a string key)");
  expect_error("{\"hidden\":64,}",
               "options must be a JSON object (invalid JSON at byte 13: expected a string key)");
  expect_error("{\"lr\":NaN}",
               "options must be a JSON object (invalid JSON at byte 6: expected a value)");
  expect_error("{\"lr\":Infinity}",
               "options must be a JSON object (invalid JSON at byte 6: expected a value)");
  expect_error("{\"lr\":-Infinity}",
               "options must be a JSON object (invalid JSON at byte 7: expected a digit)");
  expect_error("{\"hidden\":012}",
               "options must be a JSON object (invalid JSON at byte 11: leading zero in number)");
  expect_error("{'hidden':1}",
               "options must be a JSON object (invalid JSON at byte 1: expected a string key)");
  expect_error(
      "{\"hidden\":1} x",
      "options must be a JSON object (invalid JSON at byte 13: unexpected text after the value)");
  expect_error("{\"hidden\":1,\"hidden\":2}",
               "options must be a JSON object (invalid JSON at byte 0: duplicate key \"hidden\")");

  /* the combined size bound names the option that makes the model big (expect_error starts
   * from hidden = 77 over the default GRU, whose subword table adds 16384 rows to the
   * vocabulary's) */
  char want[NN_ERR_LEN];
  snprintf(want, sizeof want,
           "option \"vocab_size\" = 1000000 makes the model too large: %llu parameters, at most "
           "1073741824",
           torch_params(1000000, 2048, 77, 1, 0, 3, 100, 2));
  expect_error("{\"vocab_size\":1000000,\"embed_dim\":2048,\"subword_buckets\":0}", want);
  snprintf(
      want, sizeof want,
      "option \"embed_dim\" = 4096 makes the model too large: %llu parameters, at most 1073741824",
      torch_params(300000 + 16384, 4096, 77, 1, 0, 3, 100, 2));
  expect_error("{\"vocab_size\":300000,\"embed_dim\":4096}", want);
  snprintf(
      want, sizeof want,
      "option \"hidden\" = 4096 makes the model too large: %llu parameters, at most 1073741824",
      torch_params(100000 + 16384, 64, 4096, 8, 1, 4, 100, 2));
  expect_error("{\"cell\":\"lstm\",\"hidden\":4096,\"layers\":8,\"bidirectional\":true}", want);
  /* just under the bound is fine: 262144 x 4096 = 2^30 would be over with the rest */
  parse_ok("{\"vocab_size\":200000,\"embed_dim\":4096}");
  /* char_level turns the default's subwords off; naming both is refused */
  nn_config ch = parse_ok("{\"char_level\":true}");
  CHECK(ch.char_level == 1 && ch.subword_buckets == 0, "char_level: subword_buckets %d",
        ch.subword_buckets);
  expect_error("{\"char_level\":true,\"subword_buckets\":1024}",
               "option \"subword_buckets\" needs word tokens: it cannot go with \"char_level\"");

  /* validate on a filled struct */
  nn_config c;
  char err[NN_ERR_LEN] = "";
  nn_config_default(&c);
  c.dropout = 1.0f;
  CHECK(nn_config_validate(&c, err) == NN_ERROR &&
            strcmp(err, "option \"dropout\" must be a number in [0, 1), got 1") == 0,
        "validate dropout: %s", err);
  nn_config_default(&c);
  c.cell = (nn_cell)5;
  CHECK(nn_config_validate(&c, err) == NN_ERROR &&
            strcmp(err, "option \"cell\" must be \"rnn\", \"gru\" or \"lstm\", got 5") == 0,
        "validate cell: %s", err);
  nn_config_default(&c);
  c.lr = NAN;
  CHECK(nn_config_validate(&c, err) == NN_ERROR &&
            strcmp(err, "option \"lr\" must be a number in (0, 10], got nan") == 0,
        "validate lr NaN: %s", err);
  nn_config_default(&c);
  c.progress = 2;
  CHECK(nn_config_validate(&c, err) == NN_ERROR &&
            strcmp(err, "option \"progress\" must be true or false, got 2") == 0,
        "validate progress: %s", err);
  nn_config_default(&c);
  c.seed = (1ull << 53) + 1;
  CHECK(nn_config_validate(&c, err) == NN_ERROR &&
            strcmp(err, "option \"seed\" must be an integer from 0 to 9007199254740992, got "
                        "9007199254740993") == 0,
        "validate seed: %s", err);
}

/* xorshift for random configs */
static uint64_t rnd_state = 88172645463325252ull;
static uint64_t rnd(void) {
  rnd_state ^= rnd_state << 13;
  rnd_state ^= rnd_state >> 7;
  rnd_state ^= rnd_state << 17;
  return rnd_state;
}
static int rnd_int(int lo, int hi) { return lo + (int)(rnd() % (uint64_t)(hi - lo + 1)); }
static float rnd_float(float lo, float hi) {
  float x;
  do x = lo + (hi - lo) * (float)((rnd() >> 11) * (1.0 / 9007199254740992.0));
  while (!(x > lo && x < hi));
  return x;
}

static void test_round_trip(void) {
  int ok = 0;
  for (int k = 0; k < 2000; k++) {
    nn_config c;
    nn_config_default(&c);
    c.lower = rnd_int(0, 1), c.stopwords = rnd_int(0, 1), c.char_level = rnd_int(0, 1);
    c.unicode = rnd_int(0, 1), c.max_len = rnd_int(1, 4096), c.vocab_size = rnd_int(3, 1000);
    c.cell = (nn_cell)rnd_int(0, 2), c.layers = rnd_int(1, 8), c.bidirectional = rnd_int(0, 1);
    c.attention = (nn_attention)rnd_int(0, 3), c.embed_dim = rnd_int(1, 300);
    c.monitor = (nn_monitor)rnd_int(0, 2);
    c.validation = (nn_validation)rnd_int(0, 3);
    c.hidden = rnd_int(1, 300), c.fc_hidden = rnd_int(0, 300), c.dropout = k ? rnd_float(0, 1) : 0;
    c.epochs = rnd_int(1, 100000), c.batch_size = rnd_int(1, 65536), c.lr = rnd_float(0, 10);
    c.val_fraction = rnd_float(0, 0.9f), c.class_weights = rnd_int(0, 1);
    c.patience = rnd_int(1, 100000), c.lr_patience = rnd_int(0, 100000);
    c.lr_factor = k % 7 ? rnd_float(0, 1) : 1e-30f, c.seed = k ? rnd() >> 11 : 1ull << 53;
    c.threads = rnd_int(0, 1024), c.device = (nn_device)rnd_int(0, 2), c.progress = rnd_int(0, 1);
    c.subword_buckets = c.char_level ? 0 : rnd_int(0, 3) * 4096; /* subwords need word tokens */
    c.storage = (nn_storage)rnd_int(0, 1);
    char err[NN_ERR_LEN] = "", what[64] = "";
    char *json = nn_config_to_json(&c, NULL);
    nn_config back;
    memset(&back, 0, sizeof back);
    nn_config_default(&back);
    int rc = json ? nn_config_parse_json(&back, json, NULL, err) : NN_NOMEM;
    int same = rc == NN_OK && same_config(&back, &c, what, sizeof what);
    if (same) ok++;
    else CHECK(same, "round trip %d: rc %d %s, %s\n  %s", k, rc, err, what, json ? json : "(null)");
    free(json);
  }
  printf("round trip: %d of 2000 random configs identical after parse(to_json(c))\n", ok);
  CHECK(ok == 2000, "%d round trips", ok);
}

/* nn_options: one parse hands the caller's keys back and applies the engine's; a key of the
 * caller's table it does not read (NULL) is an unknown option; "class_weights" as an object is
 * the caller's, true/false the engine's. The keys, numbered as a caller (ext/) numbers them: */
enum { KEY_FROM, KEY_DEPLOY, KEY_CLASS_WEIGHTS, KEY_EMBEDDINGS, KEY_TRIALS, KEY_COUNT };
static const char *const tune_keys[KEY_COUNT] = {"from", "deploy", "class_weights", "embeddings",
                                                 "trials"};
static const char *const train_keys[KEY_COUNT] = {"from", "deploy", "class_weights", "embeddings",
                                                  NULL};

static void test_ext_keys(void) {
  const char *json = "{\"hidden\":8, \"from\":\"news\",\"deploy\":[ \"always\" ],"
                     "\"class_weights\":{\"a\" : 2},\"trials\":3}";
  char err[NN_ERR_LEN] = "";
  nn_options o;
  nn_config c;
  nn_config_default(&c);
  CHECK(nn_options_parse(&o, json, tune_keys, KEY_COUNT, NULL, err) == NN_OK, "parse: %s", err);
  const nn_json *from = o.extra[KEY_FROM], *deploy = o.extra[KEY_DEPLOY];
  CHECK(from && from->type == NN_JSON_STRING && strcmp(from->str, "news") == 0, "from handed back");
  CHECK(o.extra[KEY_TRIALS] && o.extra[KEY_TRIALS]->integer == 3, "trials handed back");
  CHECK(o.extra[KEY_CLASS_WEIGHTS] && !o.extra[KEY_EMBEDDINGS], "class_weights object handed back");
  nn_strbuf sb;
  nn_strbuf_init(&sb, NULL);
  nn_strbuf_append_json_compact(&sb, deploy, o.text);
  nn_strbuf_append_json_compact(&sb, o.extra[KEY_CLASS_WEIGHTS], o.text);
  CHECK(sb.data && strcmp(sb.data, "[\"always\"]{\"a\":2}") == 0, "compact: %s", sb.data);
  nn_strbuf_free(&sb);
  CHECK(nn_options_apply(&o, &c, err) == NN_OK && c.hidden == 8 && c.class_weights == 0,
        "apply: %s, hidden %d", err, c.hidden);
  nn_options_free(&o);
  /* attn_train reads no "trials": unknown there */
  CHECK(nn_options_parse(&o, json, train_keys, KEY_COUNT, NULL, err) == NN_OK &&
            !o.extra[KEY_TRIALS],
        "parse");
  CHECK(nn_options_apply(&o, &c, err) == NN_ERROR && strcmp(err, "unknown option \"trials\"") == 0,
        "trials in attn_train: %s", err);
  nn_options_free(&o);
  /* a misspelt ext/ key is offered its name, where the caller reads it */
  CHECK(nn_options_parse(&o, "{\"froom\":1}", train_keys, KEY_COUNT, NULL, err) == NN_OK, "parse");
  CHECK(nn_options_apply(&o, &c, err) == NN_ERROR &&
            strcmp(err, "unknown option \"froom\" (did you mean \"from\"?)") == 0,
        "froom: %s", err);
  nn_options_free(&o);
  expect_error("{\"from\":\"news\"}", "unknown option \"from\"");
  expect_error("{\"class_weights\":{\"a\":2}}",
               "option \"class_weights\" must be true or false, got an object");
  CHECK(nn_options_parse(&o, "[1]", train_keys, KEY_COUNT, NULL, err) == NN_ERROR &&
            strcmp(err, "options must be a JSON object") == 0 && !o.doc,
        "not an object: %s", err);
  CHECK(nn_options_parse(&o, " ", train_keys, KEY_COUNT, NULL, err) == NN_OK && !o.doc &&
            nn_options_apply(&o, &c, err) == NN_OK,
        "only spaces: no options");
  const char *many[NN_OPTIONS_MAX_EXTRA + 1] = {"from"};
  CHECK(nn_options_parse(&o, "{}", many, NN_OPTIONS_MAX_EXTRA + 1, NULL, err) == NN_ERROR && !o.doc,
        "more keys than nn_options holds: %s", err);
  printf("ext keys: handed back, applied, refused where not read\n");
}

int main(void) {
  test_defaults();
  test_ext_keys();
  test_every_key();
  test_errors();
  test_round_trip();
  return check_finish("test_config");
}
