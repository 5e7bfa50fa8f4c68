/* metrics.h -- internal: classification metrics from per-class counts, for callers that do not
 * keep a C x C confusion matrix (the trainer, with up to 10,000 classes). */
#ifndef ATTNEXT_METRICS_H
#define ATTNEXT_METRICS_H

#include "nn.h"

/* As nn_metrics_from_confusion, from counts per class c:
 *   true_positive[c] = rows of class c predicted c, predicted[c] = rows predicted c,
 *   support[c] = rows of class c.
 * per_class may be NULL (only the weighted average and accuracy are wanted). */
void nn_metrics_from_counts(nn_class_metrics *per_class /*(C) or NULL*/,
                            nn_class_metrics *weighted, double *accuracy,
                            const int64_t *true_positive /*(C)*/, const int64_t *predicted /*(C)*/,
                            const int64_t *support /*(C)*/, int C);

#endif
