/* fuzz_config.c -- libFuzzer target: the attn_train options parser (nn_config_parse_json).
 *
 * Any bytes (made NUL-terminated) must give NN_OK or an error with a non-empty message, and
 * on error the config must be left unchanged. A config that parses must validate, print as
 * JSON (nn_config_to_json) and parse back to the same values. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "nn_internal.h"

#ifndef FUZZ_TRAP
#define FUZZ_TRAP() __builtin_trap()
#endif

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char err[NN_ERR_LEN];
  char *json = malloc(size + 1);
  if (!json) return 0;
  memcpy(json, data, size);
  json[size] = 0;
  nn_config cfg, before;
  nn_config_default(&cfg);
  before = cfg;
  err[0] = 0;
  int rc = nn_config_parse_json(&cfg, json, NULL, err);
  if (rc != NN_OK) {
    if (!err[0] || memchr(err, 0, NN_ERR_LEN) == NULL) FUZZ_TRAP();
    if (memcmp(&cfg, &before, sizeof cfg) != 0) FUZZ_TRAP(); /* unchanged on error */
  } else {
    if (nn_config_validate(&cfg, err) != NN_OK) FUZZ_TRAP();
    char *out = nn_config_to_json(&cfg, NULL);
    if (out) {
      nn_config back;
      nn_config_default(&back);
      if (nn_config_parse_json(&back, out, NULL, err) != NN_OK) FUZZ_TRAP();
      /* the JSON names every option, so none is left for the recipe to size to the data */
      if (back.data_sized != 0) FUZZ_TRAP();
      back.data_sized = cfg.data_sized;
      if (memcmp(&back, &cfg, sizeof cfg) != 0) FUZZ_TRAP(); /* round trip */
      free(out);
    }
  }
  free(json);
  return 0;
}
