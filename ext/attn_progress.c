/* attn_progress.c -- the progress line of a training epoch on standard error.
 *
 *   SELECT * FROM attn_train('news', 'SELECT title, category FROM headlines');
 *   epoch 3/20  [########------------]  61/143 batches  loss 0.8123  9120 rows/s  0:04 left
 *
 * Drawn with a carriage return (at most 10 times a second) only when standard error is a
 * terminal and the option "progress" is true, and cleared before the epoch's row is returned,
 * so the shell's output stays clean.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "attn_ext.h"

static double attn_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void attn_progress_begin(attn_progress *p, int want, int epoch, int epochs) {
  memset(p, 0, sizeof *p);
  p->enabled = want && isatty(STDERR_FILENO);
  p->epoch = epoch;
  p->epochs = epochs;
  p->start = attn_now();
}

void attn_progress_update(attn_progress *p, int batches_done, int batches_total, double loss,
                          double rows_per_second) {
  if (!p->enabled || batches_total <= 0) return;
  double now = attn_now();
  if (p->drawn && now - p->last_draw < 0.1 && batches_done < batches_total) return;
  p->last_draw = now;
  char bar[21];
  int filled = (int)(20.0 * batches_done / batches_total);
  if (filled > 20) filled = 20;
  for (int i = 0; i < 20; i++) bar[i] = i < filled ? '#' : '-';
  bar[20] = 0;
  double elapsed = now - p->start;
  double left = batches_done > 0 ? elapsed * (batches_total - batches_done) / batches_done : 0;
  int secs = (int)(left + 0.5);
  fprintf(stderr, "\r\033[Kepoch %d/%d  [%s]  %d/%d batches  loss %.4f  %.0f rows/s  %d:%02d left",
          p->epoch, p->epochs, bar, batches_done, batches_total, loss, rows_per_second, secs / 60,
          secs % 60);
  fflush(stderr);
  p->drawn = 1;
}

void attn_progress_clear(attn_progress *p) {
  if (p->drawn) {
    fputs("\r\033[K", stderr);
    fflush(stderr);
  }
  p->drawn = 0;
}
