/* test_locale.c -- options and weight files mean the same in every locale.
 * A host process may call setlocale(): with a German locale the decimal point is ',' and with
 * a Persian one it is the two-byte U+066B. JSON numbers always use '.', so "dropout": 0.25 must
 * parse as 0.25 under both (it once parsed as 0 under a multi-byte decimal point). The locales
 * are compiled with localedef (libc-bin) into a temporary directory named by LOCPATH. */
#include <locale.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "nn_internal.h"

int main(void) {
  char dir[] = "/tmp/attnext-locale-XXXXXX";
  if (!mkdtemp(dir)) return test_skip("cannot make a temporary directory");
  setenv("LOCPATH", dir, 1);
  const char *locales[][2] = {{"de_DE", "de_DE.UTF-8"}, {"ps_AF", "ps_AF.UTF-8"}};
  for (int i = 0; i < 2; i++) {
    char cmd[512];
    snprintf(cmd, sizeof cmd, "localedef -i %s -f UTF-8 %s/%s 2>/dev/null", locales[i][0], dir,
             locales[i][1]);
    int made = system(cmd) == 0;
    const char *set = made ? setlocale(LC_ALL, locales[i][1]) : NULL;
    CHECK(set != NULL, "locale %s compiled and set", locales[i][1]);
    if (!set) continue;
    const char *point = localeconv()->decimal_point;
    printf("%s: decimal point \"%s\" (%zu bytes)\n", locales[i][1], point, strlen(point));
    CHECK(strcmp(point, ".") != 0, "%s has a decimal point other than '.'", locales[i][1]);
    char err[NN_ERR_LEN];
    nn_config cfg;
    nn_config_default(&cfg);
    int rc = nn_config_parse_json(&cfg, "{\"dropout\":0.25,\"lr\":0.002,\"val_fraction\":0.2}",
                                  NULL, err);
    CHECK(rc == NN_OK, "%s: options parse: %s", locales[i][1], err);
    CHECK(cfg.dropout == 0.25f, "%s: dropout %g, want 0.25", locales[i][1], cfg.dropout);
    CHECK(cfg.lr == 0.002f, "%s: lr %g, want 0.002", locales[i][1], cfg.lr);
    CHECK(cfg.val_fraction == 0.2f, "%s: val_fraction %g, want 0.2", locales[i][1],
          cfg.val_fraction);
    /* and the config written out reads back the same */
    char *json = nn_config_to_json(&cfg, NULL);
    nn_config back;
    nn_config_default(&back);
    CHECK(json && nn_config_parse_json(&back, json, NULL, err) == NN_OK, "%s: round trip: %s",
          locales[i][1], err);
    CHECK(back.dropout == cfg.dropout && back.lr == cfg.lr, "%s: round trip values", locales[i][1]);
    CHECK(json && strstr(json, "0.25") != NULL, "%s: written with '.': %s", locales[i][1], json);
    free(json);
    /* a training run's metrics JSON (stored in attn_models.metrics) */
    const char *texts[8] = {"good fun", "great joy", "fine day",  "nice one",
                            "bad end",  "sad loss",  "poor show", "grim news"};
    const char *labels[8] = {"pos", "pos", "pos", "pos", "neg", "neg", "neg", "neg"};
    nn_config tc;
    nn_config_default(&tc);
    nn_config_parse_json(&tc, "{\"epochs\":1,\"hidden\":4,\"embed_dim\":3,\"val_fraction\":0.5}",
                         NULL, err);
    nn_trainer *tr = NULL;
    CHECK(nn_trainer_create(
              &tr, &(nn_trainer_args){.cfg = &tc, .texts = texts, .labels = labels, .n = 8}, err) ==
              NN_OK,
          "%s: trainer: %s", locales[i][1], err);
    if (tr) {
      nn_epoch_stats st;
      nn_trainer_epoch(tr, &st, NULL, NULL, err);
      char *metrics = nn_trainer_metrics_json(tr);
      nn_config probe;
      /* a valid JSON object: the config parser rejects it for its keys, not its syntax */
      nn_config_default(&probe);
      int prc = metrics ? nn_config_parse_json(&probe, metrics, NULL, err) : NN_ERROR;
      CHECK(metrics && prc == NN_ERROR && strstr(err, "unknown option") != NULL,
            "%s: metrics JSON is valid JSON: %s (%s)", locales[i][1], metrics ? metrics : "NULL",
            err);
      free(metrics);
      nn_trainer_free(tr);
    }
    setlocale(LC_ALL, "C");
  }
  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
  return check_finish("test_locale");
}
