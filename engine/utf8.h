/* utf8.h -- the one UTF-8 decoder of attnext, used by the tokenizer (engine/text.c), JSON
 * messages (engine/json.c) and the SVG writer (ext/attn_svg.c). Header-only: a static inline
 * function, so that the tokenizer's inner loop keeps it inlined. */
#ifndef ATTNEXT_UTF8_H
#define ATTNEXT_UTF8_H

#include <stddef.h>
#include <stdint.h>

/* Length (1 to 4) of the valid UTF-8 sequence at s (n bytes available) and its code point in
 * *cp; 0 when the bytes at s are not a valid sequence or n is 0 (*cp then unchanged). Valid is
 * what Unicode and Python's strict decoder accept: no overlong forms, no surrogates
 * (U+D800..U+DFFF), nothing past U+10FFFF, no sequence cut short by the end of the bytes. */
static inline int nn_utf8_decode(const unsigned char *s, size_t n, uint32_t *cp) {
  if (n == 0) return 0;
  unsigned char b = s[0];
  int need;
  uint32_t c, lo = 0x80, hi = 0xbf; /* allowed range of the second byte */
  if (b < 0x80) {
    *cp = b;
    return 1;
  } else if (b >= 0xc2 && b <= 0xdf) {
    need = 1;
    c = b & 0x1f;
  } else if (b >= 0xe0 && b <= 0xef) {
    need = 2;
    c = b & 0x0f;
    if (b == 0xe0) lo = 0xa0; /* overlong below U+0800 */
    if (b == 0xed) hi = 0x9f; /* surrogates */
  } else if (b >= 0xf0 && b <= 0xf4) {
    need = 3;
    c = b & 0x07;
    if (b == 0xf0) lo = 0x90; /* overlong below U+10000 */
    if (b == 0xf4) hi = 0x8f; /* past U+10FFFF */
  } else {
    return 0; /* a continuation byte, 0xc0, 0xc1 (always overlong) or 0xf5..0xff */
  }
  if (n < (size_t)need + 1) return 0;
  for (int i = 1; i <= need; i++) {
    unsigned char t = s[i];
    if (i == 1 ? (t < lo || t > hi) : (t < 0x80 || t > 0xbf)) return 0;
    c = (c << 6) | (t & 0x3f);
  }
  *cp = c;
  return need + 1;
}

#endif
