/* attention.c -- attention pooling over the encoder outputs of each sequence, padding masked
 * (only a sequence's real rows take part in its softmax):
 *   linear:   e_t = w . y_t + b                         ctx = sum_t softmax(e)_t y_t
 *   additive: e_t = v . tanh(W y_t + b)                 ctx = sum_t softmax(e)_t y_t
 *   self:     q = Wq y_last + bq, k_t = Wk y_t + bk, v_t = Wv y_t + bv,
 *             e_t = q . k_t / sqrt(D)                   ctx = sum_t softmax(e)_t v_t
 *   dot:      e_t = y_t . y_last (unscaled, no parameters: the self-attention of the last step)
 *                                                       ctx = sum_t softmax(e)_t y_t
 * where y_last is the output at the sequence's last real token (the self-attention of the whole
 * sequence read at that position; bidirectional: the concatenated output there, whose reverse
 * half is the reverse direction's first step, as packed sequences give it).
 * nn_attention_forward / nn_attention_backward. Every kind is composed of backend operations,
 * so it runs on every backend. */
#include <math.h>

#include "model.h"

void nn_attention_forward(const nn_model *m, nn_workspace *ws) {
  const nn_backend *be = m->be;
  const float *p = m->params;
  const float *y = ws->y[m->L - 1]; /* (P, D) */
  int P = ws->P, B = ws->B, D = m->D;
  const float *values = y;
  switch (m->cfg.attention) {
  case NN_ATTN_LINEAR:
    be->sgemm(0, 1, P, 1, D, 1.0f, y, D, p + m->attn_w, D, 0.0f, ws->scores, 1);
    be->add_bias(ws->scores, 1, p + m->attn_b, P, 1);
    break;
  case NN_ATTN_ADDITIVE:
    be->sgemm(0, 1, P, D, D, 1.0f, y, D, p + m->attn_w, D, 0.0f, ws->att_u, D);
    be->add_bias(ws->att_u, D, p + m->attn_b, P, D);
    be->tanh_forward(ws->att_u, (size_t)P * D);
    be->sgemm(0, 1, P, 1, D, 1.0f, ws->att_u, D, p + m->attn_v, D, 0.0f, ws->scores, 1);
    break;
  case NN_ATTN_SELF:
    be->gather_rows(ws->y_last, D, y, D, ws->last_row, B, D);
    be->sgemm(0, 1, B, D, D, 1.0f, ws->y_last, D, p + m->attn_q_w, D, 0.0f, ws->att_q, D);
    be->add_bias(ws->att_q, D, p + m->attn_q_b, B, D);
    be->sgemm(0, 1, P, D, D, 1.0f, y, D, p + m->attn_k_w, D, 0.0f, ws->att_k, D);
    be->add_bias(ws->att_k, D, p + m->attn_k_b, P, D);
    be->sgemm(0, 1, P, D, D, 1.0f, y, D, p + m->attn_v_w, D, 0.0f, ws->att_v, D);
    be->add_bias(ws->att_v, D, p + m->attn_v_b, P, D);
    be->segment_dot(ws->scores, ws->att_q, ws->att_k, D, ws->row_sample, P, D,
                    1.0f / sqrtf((float)D));
    values = ws->att_v;
    break;
  case NN_ATTN_DOT:
    be->gather_rows(ws->y_last, D, y, D, ws->last_row, B, D);
    be->segment_dot(ws->scores, ws->y_last, y, D, ws->row_sample, P, D, 1.0f);
    break;
  }
  be->segment_softmax(ws->alpha, ws->scores, ws->row_sample, P, B, ws->seg_scratch);
  be->segment_weighted_sum(ws->ctx, ws->alpha, values, D, ws->row_sample, P, B, D);
}

/* d_ctx (B, D) -> d_y (P, D) (=); parameter gradients accumulate. */
void nn_attention_backward(const nn_model *m, nn_workspace *ws) {
  const nn_backend *be = m->be;
  const float *p = m->params;
  float *g = ws->grads;
  const float *y = ws->y[m->L - 1];
  int P = ws->P, B = ws->B, D = m->D;
  float *dy = ws->d_y;
  switch (m->cfg.attention) {
  case NN_ATTN_LINEAR:
    be->segment_weighted_sum_backward(dy, D, 0, ws->d_alpha, ws->d_ctx, ws->alpha, y,
                                      ws->row_sample, P, B, D);
    be->segment_softmax_backward(ws->d_scores, ws->d_alpha, ws->alpha, ws->row_sample, P, B,
                                 ws->seg_scratch);
    be->sgemm(1, 0, 1, D, P, 1.0f, ws->d_scores, 1, y, D, 1.0f, g + m->attn_w, D);
    be->bias_grad(g + m->attn_b, ws->d_scores, 1, P, 1);
    be->sgemm(0, 0, P, D, 1, 1.0f, ws->d_scores, 1, p + m->attn_w, D, 1.0f, dy, D);
    break;
  case NN_ATTN_ADDITIVE:
    be->segment_weighted_sum_backward(dy, D, 0, ws->d_alpha, ws->d_ctx, ws->alpha, y,
                                      ws->row_sample, P, B, D);
    be->segment_softmax_backward(ws->d_scores, ws->d_alpha, ws->alpha, ws->row_sample, P, B,
                                 ws->seg_scratch);
    be->sgemm(1, 0, 1, D, P, 1.0f, ws->d_scores, 1, ws->att_u, D, 1.0f, g + m->attn_v, D);
    be->sgemm(0, 0, P, D, 1, 1.0f, ws->d_scores, 1, p + m->attn_v, D, 0.0f, ws->d_u, D);
    be->tanh_backward(ws->d_u, ws->d_u, ws->att_u, (size_t)P * D);
    be->sgemm(1, 0, D, D, P, 1.0f, ws->d_u, D, y, D, 1.0f, g + m->attn_w, D);
    be->bias_grad(g + m->attn_b, ws->d_u, D, P, D);
    be->sgemm(0, 0, P, D, D, 1.0f, ws->d_u, D, p + m->attn_w, D, 1.0f, dy, D);
    break;
  case NN_ATTN_SELF: {
    float scale = 1.0f / sqrtf((float)D);
    be->segment_weighted_sum_backward(ws->d_v, D, 0, ws->d_alpha, ws->d_ctx, ws->alpha, ws->att_v,
                                      ws->row_sample, P, B, D);
    be->segment_softmax_backward(ws->d_scores, ws->d_alpha, ws->alpha, ws->row_sample, P, B,
                                 ws->seg_scratch);
    be->zero(ws->d_q, (size_t)B * D);
    be->segment_dot_backward(ws->d_q, ws->d_k, ws->d_scores, ws->att_q, ws->att_k, D,
                             ws->row_sample, P, B, D, scale);
    be->sgemm(1, 0, D, D, P, 1.0f, ws->d_v, D, y, D, 1.0f, g + m->attn_v_w, D);
    be->bias_grad(g + m->attn_v_b, ws->d_v, D, P, D);
    be->sgemm(0, 0, P, D, D, 1.0f, ws->d_v, D, p + m->attn_v_w, D, 0.0f, dy, D);
    be->sgemm(1, 0, D, D, P, 1.0f, ws->d_k, D, y, D, 1.0f, g + m->attn_k_w, D);
    be->bias_grad(g + m->attn_k_b, ws->d_k, D, P, D);
    be->sgemm(0, 0, P, D, D, 1.0f, ws->d_k, D, p + m->attn_k_w, D, 1.0f, dy, D);
    be->sgemm(1, 0, D, D, B, 1.0f, ws->d_q, D, ws->y_last, D, 1.0f, g + m->attn_q_w, D);
    be->bias_grad(g + m->attn_q_b, ws->d_q, D, B, D);
    /* d y_last (B, D) reuses d_ctx, which is spent */
    be->sgemm(0, 0, B, D, D, 1.0f, ws->d_q, D, p + m->attn_q_w, D, 0.0f, ws->d_ctx, D);
    be->scatter_add_rows(dy, D, ws->d_ctx, D, ws->last_row, B, D);
    break;
  }
  case NN_ATTN_DOT:
    /* y takes part three times: as the values, as the keys and (at the last row) the query */
    be->segment_weighted_sum_backward(dy, D, 0, ws->d_alpha, ws->d_ctx, ws->alpha, y,
                                      ws->row_sample, P, B, D);
    be->segment_softmax_backward(ws->d_scores, ws->d_alpha, ws->alpha, ws->row_sample, P, B,
                                 ws->seg_scratch);
    be->zero(ws->d_q, (size_t)B * D);
    be->segment_dot_backward(ws->d_q, ws->d_k, ws->d_scores, ws->y_last, y, D, ws->row_sample, P, B,
                             D, 1.0f);
    be->scatter_add_rows(dy, D, ws->d_k, D, NULL, P, D);
    be->scatter_add_rows(dy, D, ws->d_q, D, ws->last_row, B, D);
    break;
  }
}
