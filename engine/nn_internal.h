/* nn_internal.h -- the engine's functions that ext/ does not call: the model's building blocks
 * (creation, parameters, backward, loss, Adam), the vocabulary and tokenizer pieces, random
 * numbers, safetensors parsing and config helpers. The engine's own files, the unit and golden
 * tests, the fuzzers and the bench tools include this header; ext/ includes nn.h alone, the
 * surface it is built on (nn.h keeps only what ext/ uses, so that the surface stays small). */
#ifndef NN_INTERNAL_H
#define NN_INTERNAL_H

#include "nn.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The Made-With-ML "Attention" lesson's recipe (recipe "lesson"): rnn 128, embedding 100, fc1
 * 100, dropout 0.1, vocabulary 5000, the lesson's preprocessing, Adam lr 1e-4 for 50 epochs,
 * ReduceLROnPlateau(0.1, 3), early stopping patience 10 on the validation loss, class weights.
 * Also what a weights file's config starts from (nn_model_load): a file that leaves an option
 * out means the lesson's value, whatever the defaults become. */
void nn_config_lesson(nn_config *cfg);
/* Parse a JSON object of options over the current values of *cfg (call nn_config_default
 * first). Unknown keys, wrong types and out-of-range values are errors naming the key, e.g.
 *   option "hidden" must be an integer from 1 to 4096, got "big"
 * Bounds are chosen so that no combination can make the engine allocate without limit.
 * json may be NULL or "" (no options). On error *cfg is left unchanged. */
int nn_config_parse_json(nn_config *cfg, const char *json, const nn_allocator *mem, char *err);
/* Check ranges of an already filled config (used after parse and after loading a file). */
int nn_config_validate(const nn_config *cfg, char *err);
/* The default recipe's sizes (nn_config_size_to_data): the batch for n_train training rows, the
 * epochs for `batches` batches an epoch. */
int nn_config_sized_batch(int n_train);
int nn_config_sized_epochs(int batches);
const char *nn_device_name(nn_device device);             /* "auto" | "cpu" | "cuda" */
const char *nn_recipe_name(nn_recipe recipe);             /* "default" | "lesson" */
const char *nn_lr_schedule_name(nn_lr_schedule schedule); /* "plateau" | "cosine" */
/* The cleaned text (tokens joined by one space; for char level the cleaned string), as the
 * lesson's preprocess() returns it, from mem, NUL-terminated; NULL when out of memory. */
char *nn_text_clean(const char *text, int len, const nn_config *cfg, const nn_allocator *mem);
/* Build from training texts: the cfg->vocab_size - 2 most frequent tokens, ties broken by
 * first occurrence (as Python's Counter.most_common), after <PAD> and <UNK>; tokens seen fewer
 * than cfg->min_count times are left out. */
int nn_vocab_build(nn_vocab **out, const char *const *texts, const int *lens, int n,
                   const nn_config *cfg, char *err);
/* From an explicit id-ordered list (tokens[0] = "<PAD>", tokens[1] = "<UNK>"); used by load. */
int nn_vocab_from_list(nn_vocab **out, const char *const *tokens, const int *lens, int n,
                       char *err);
void nn_vocab_free(nn_vocab *vocab);
/* The character n-grams of a token (fastText's subwords): every run of n characters (UTF-8
 * sequences), subword_min <= n <= subword_max, of "<" + token + ">", in order of start then
 * length, each hashed with 32-bit FNV-1a over its bytes modulo cfg->subword_buckets. Writes at
 * most cap ids to out and returns how many there are (0 when cfg->subword_buckets is 0). */
int nn_subword_ids(int *out, int cap, const char *tok, int len, const nn_config *cfg,
                   const nn_allocator *mem);    /* -1: out of memory (a token of over 63 chars) */
float nn_rng_normal(nn_rng *rng);               /* N(0, 1) */
uint32_t nn_rng_below(nn_rng *rng, uint32_t n); /* uniform integer in [0, n), unbiased */
/* mask[i] = nn_rng_uniform(rng) < keep ? scale : 0 for i < n: the same stream and values as
 * that loop, with the state held in registers (6 ns -> ~1.5 ns a value) */
void nn_rng_dropout_mask(nn_rng *rng, float *mask, size_t n, float keep, float scale);
/* Create a model with PyTorch's default initialisation drawn from `seed`. Takes ownership of
 * vocab (freed with the model, also on error). labels: num_classes strings (copied). The model's
 * memory comes from vocab's allocator (nn_vocab_build_ex). */
int nn_model_create(nn_model **out, const nn_config *cfg, nn_vocab *vocab,
                    const char *const *labels, int num_classes, uint64_t seed, char *err);
/* The same, asking stop(stop_ctx) (may be NULL) while it draws the weights (every 2^18):
 * NN_INTERRUPTED (nothing made, vocab freed) once it says so. */
int nn_model_create_ex(nn_model **out, const nn_config *cfg, nn_vocab *vocab,
                       const char *const *labels, int num_classes, uint64_t seed,
                       nn_interrupt_fn stop, void *stop_ctx, char *err);
/* Parameters: one contiguous float buffer; the tensors are views into it, in state_dict
 * order, named as PyTorch names them. */
size_t nn_model_param_count(const nn_model *model);
/* Mutable access: also drops the folded inference table (nn_model_prepare_inference). */
float *nn_model_params(nn_model *model);
/* Fold embedding x W_ih^T + biases of the first layer into a (V, G*H) table per direction, so
 * inference looks its input projection up instead of multiplying (ext/ARCHITECTURE.md: a
 * prediction). Call once the
 * weights are final (nn_model_load does); forward(training=0) then uses it. Skipped, not an
 * error, when the table would exceed 64M floats or 8 x the parameters' bytes + 16 MB (results
 * are the same without it). Not thread-safe against running forwards. */
int nn_model_prepare_inference(nn_model *model, char *err);
float *nn_model_grads(nn_model *model); /* same layout; NULL until training allocates it */
int nn_model_tensor_count(const nn_model *model);
int nn_model_tensor_find(const nn_model *model, const char *name); /* index or -1 */
/* Backward pass after nn_model_forward(training=1) on the same batch and workspace.
 * dlogits: (B, C). Parameter gradients ACCUMULATE (+=) into nn_model_grads (allocated on first
 * use; zero them with nn_model_zero_grads). */
int nn_model_backward(nn_model *model, nn_workspace *ws, const nn_batch *batch,
                      const float *dlogits, char *err);
int nn_model_zero_grads(nn_model *model, char *err);
/* Class-weighted cross-entropy as torch.nn.CrossEntropyLoss(weight=w) with mean reduction
 * (precondition, not checked: every labels[b] is in 0..C-1 -- the trainer guarantees it):
 *   loss = sum_b w[y_b] * -log softmax(logits_b)[y_b] / sum_b w[y_b]
 * dlogits (B, C) is overwritten with d loss / d logits. class_weights may be NULL (all 1). */
float nn_cross_entropy(float *dlogits, const float *logits, const int *labels,
                       const float *class_weights, int B, int C);
/* The same with label smoothing s in [0, 1] (torch.nn.CrossEntropyLoss(weight=w,
 * label_smoothing=s)); s = 0 is nn_cross_entropy, bit for bit. */
float nn_cross_entropy_smoothed(float *dlogits, const float *logits, const int *labels,
                                const float *class_weights, int B, int C, float smoothing);
int nn_adam_init(nn_adam *adam, size_t nparams, float lr, char *err);
/* One step of lazy Adam (the "lazy_adam" option): parameters [0, tables) are `count` embedding
 * tables of `table` floats each, rows of E floats; only the rows listed (ids, the same in every
 * table) take the Adam update (parameters and moments), every other row keeps its values; the
 * parameters from `tables` on take the dense update. The update of a row is bit for bit
 * nn_adam_step's, so a lazy step equals a dense step on the listed rows and no step elsewhere.
 * Host memory (nn_adam_step_lazy_on in model.h for a backend's). */
void nn_adam_step_lazy(nn_adam *adam, float *params, const float *grads, size_t tables,
                       size_t table, int E, const int *rows, int nrows);
void nn_adam_free(nn_adam *adam);
/* One step of torch.optim.Adam over the flat buffers. */
void nn_adam_step(nn_adam *adam, float *params, const float *grads);
/* From a C x C confusion matrix (row = actual, column = predicted), per-class metrics as
 * sklearn's classification_report (0 where undefined) and their support-weighted average. */
void nn_metrics_from_confusion(nn_class_metrics *per_class /*(C)*/, nn_class_metrics *weighted,
                               double *accuracy, const int64_t *confusion, int C);
/* The file's names and metadata come from mem (nn_st_free frees them with it). */
int nn_st_parse(nn_st_file *out, const unsigned char *blob, size_t len, const nn_allocator *mem,
                char *err);
const nn_st_tensor *nn_st_find(const nn_st_file *file, const char *name);
const char *nn_st_meta(const nn_st_file *file, const char *key);
void nn_st_free(nn_st_file *file);

/* IEEE binary16 (float16.c): round to nearest, ties to even; overflow to infinity, subnormals,
 * NaN payloads kept. nn_float16_round rounds values in place to the nearest half, a finite value
 * that would round to infinity (65520 or more) clamped to NN_FLOAT16_MAX; returns how many
 * were clamped. */
#define NN_FLOAT16_MAX 65504.0f
uint16_t nn_float16_from_float(float f);
float nn_float16_to_float(uint16_t h);
size_t nn_float16_round(float *values, size_t n);

#ifdef __cplusplus
}
#endif
#endif
