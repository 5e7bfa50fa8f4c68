/* config.h -- internal helpers of config.c shared with the rest of the engine. */
#ifndef ATTNEXT_CONFIG_H
#define ATTNEXT_CONFIG_H

#include "nn_internal.h"

/* The limits of a model, the same for training (attn_train) and for loading a file
 * (nn_model_load): a file cannot describe a model training would refuse to make. */
#define NN_MAX_CLASSES 10000  /* distinct labels */
#define NN_MAX_VOCAB 1000000  /* the "vocab_size" option's bound: tokens, <PAD> and <UNK> included */
#define NN_MAX_SUBWORD_BUCKETS (1 << 22) /* the "subword_buckets" option's bound */

/* The largest model the options may describe, in floats (parameters only). */
#define NN_MAX_PARAMS ((uint64_t)1 << 30)

/* Number of parameters of the network described by cfg with cfg->vocab_size tokens and
 * num_classes classes: embedding + encoder (PyTorch's RNN/GRU/LSTM layout) + attention + fc1 +
 * fc2, as model.c lays them out (attention with P = hidden * directions: linear P+1, additive
 * P*P+2P, self 3(P*P+P), dot 0); test_safetensors checks it equals nn_model_param_count. Used as the
 * bound of nn_config_validate with num_classes = 2. */
uint64_t nn_config_param_count(const nn_config *cfg, uint64_t num_classes);

#endif
