/* config_base.h -- the configuration the engine's unit tests start from.
 * These tests (and the PyTorch fixtures of tests/golden/) were written against attnext 0.1.0's
 * defaults: the lesson's network (RNN 128 over 100-wide embeddings, 5,000 words, no subwords,
 * dropout 0.1, class weights) at lr 1e-3 for 20 epochs. They check mechanisms with explicit
 * options over that base; the default recipe itself is checked by test_config, and its parts
 * (subwords, the dropouts, GRU) by test_gradcheck, test_accuracy_options and the SQL tests. */
#ifndef ATTNEXT_CONFIG_BASE_H
#define ATTNEXT_CONFIG_BASE_H
#include "config.h"

static inline void test_config_base(nn_config *cfg) {
  nn_config_lesson(cfg);
  cfg->recipe = NN_RECIPE_DEFAULT; /* as a model trained then stored it */
  cfg->lr = 1e-3f;
  cfg->epochs = 20;
}
#endif
