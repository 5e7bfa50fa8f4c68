/* config.h -- internal helpers of config.c shared with the rest of the engine. */
#ifndef ATTNEXT_CONFIG_H
#define ATTNEXT_CONFIG_H

#include "nn_internal.h"

/* The limits of a model, the same for training (attn_train) and for loading a file
 * (nn_model_load): a file cannot describe a model training would refuse to make. */
#define NN_MAX_CLASSES 10000 /* distinct labels */
#define NN_MAX_VOCAB 1000000 /* the "vocab_size" option's bound: tokens, <PAD> and <UNK> included */
#define NN_MAX_SUBWORD_BUCKETS (1 << 22) /* the "subword_buckets" option's bound */

/* The largest model the options may describe, in floats (parameters only). */
#define NN_MAX_PARAMS ((uint64_t)1 << 30)

/* nn_config_param_count: in nn.h (ext/ sizes a model before training it) */

#endif
