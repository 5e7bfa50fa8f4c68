/* config.h -- internal helpers of config.c shared with the rest of the engine. */
#ifndef ATTNEXT_CONFIG_H
#define ATTNEXT_CONFIG_H

#include "nn.h"

/* The largest model the options may describe, in floats (parameters only). */
#define NN_MAX_PARAMS ((uint64_t)1 << 30)

/* Number of parameters of the network described by cfg with vocab_size tokens and
 * num_classes classes: embedding + encoder (PyTorch's RNN/GRU/LSTM layout) + attention + fc1 +
 * fc2. Exact for the layouts of DESIGN 2 as far as they are fixed there (attention: linear
 * H'+1, additive H'*H'+2H'+1, self 3(H'*H'+H') with H' = hidden * directions); used as the
 * bound of nn_config_validate with num_classes = 2. */
uint64_t nn_config_param_count(const nn_config *cfg, uint64_t num_classes);

#endif
