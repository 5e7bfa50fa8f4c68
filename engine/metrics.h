/* metrics.h -- classification metrics from per-class counts (nn_metrics_from_counts), for
 * callers that do not keep a C x C confusion matrix (the trainer, attn_evaluate with up to
 * 10,000 classes). Declared in nn.h since issue 17 (ext/ may use it); kept for the includes. */
#ifndef ATTNEXT_METRICS_H
#define ATTNEXT_METRICS_H

#include "nn_internal.h"

#endif
