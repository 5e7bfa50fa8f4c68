/* stopwords.c -- the 179 English stop words of NLTK (nltk_data corpora/stopwords/english, as
 * `stopwords.words("english")` returns them; the list the Made-With-ML lesson removes), in NLTK's
 * order. The order matters: the lesson removes them with the regex alternation
 * \b(i|me|my|...)\b\s*, where the first alternative that matches wins (e.g. "don" before
 * "don't"), and engine/text.c reproduces that rule by comparing indices.
 * Lookup: binary search over an index sorted by byte value (checked by tests/test_text.c). */
#include <string.h>

#include "text.h"

static const char *const stopwords[NN_STOPWORD_COUNT] = {
  "i", "me", "my", "myself", "we", "our", "ours", "ourselves", "you", "you're", "you've",
  "you'll", "you'd", "your", "yours", "yourself", "yourselves", "he", "him", "his", "himself",
  "she", "she's", "her", "hers", "herself", "it", "it's", "its", "itself", "they", "them",
  "their", "theirs", "themselves", "what", "which", "who", "whom", "this", "that", "that'll",
  "these", "those", "am", "is", "are", "was", "were", "be", "been", "being", "have", "has",
  "had", "having", "do", "does", "did", "doing", "a", "an", "the", "and", "but", "if", "or",
  "because", "as", "until", "while", "of", "at", "by", "for", "with", "about", "against",
  "between", "into", "through", "during", "before", "after", "above", "below", "to", "from",
  "up", "down", "in", "out", "on", "off", "over", "under", "again", "further", "then", "once",
  "here", "there", "when", "where", "why", "how", "all", "any", "both", "each", "few", "more",
  "most", "other", "some", "such", "no", "nor", "not", "only", "own", "same", "so", "than",
  "too", "very", "s", "t", "can", "will", "just", "don", "don't", "should", "should've", "now",
  "d", "ll", "m", "o", "re", "ve", "y", "ain", "aren", "aren't", "couldn", "couldn't", "didn",
  "didn't", "doesn", "doesn't", "hadn", "hadn't", "hasn", "hasn't", "haven", "haven't", "isn",
  "isn't", "ma", "mightn", "mightn't", "mustn", "mustn't", "needn", "needn't", "shan", "shan't",
  "shouldn", "shouldn't", "wasn", "wasn't", "weren", "weren't", "won", "won't", "wouldn",
  "wouldn't",
};

/* Indices into stopwords[], sorted by the words' bytes (memcmp order, shorter first on ties). */
static const unsigned char sorted_index[NN_STOPWORD_COUNT] = {
  60, 76, 84, 83, 96, 77, 143, 106, 44, 61, 63, 107, 46, 144, 145, 68, 72, 49, 67, 50, 82, 51,
  85, 78, 108, 64, 73, 128, 146, 147, 136, 58, 148, 149, 56, 57, 150, 151, 59, 131, 132, 89, 81,
  109, 110, 74, 87, 97, 54, 152, 153, 53, 154, 155, 52, 156, 157, 55, 17, 23, 100, 24, 25, 18,
  20, 19, 105, 0, 65, 90, 79, 45, 158, 159, 26, 27, 28, 29, 130, 137, 138, 160, 1, 161, 162,
  111, 112, 163, 164, 2, 3, 165, 166, 116, 117, 118, 135, 139, 71, 93, 92, 99, 119, 66, 113, 5,
  6, 7, 91, 94, 120, 140, 126, 121, 167, 168, 21, 22, 133, 134, 169, 170, 122, 114, 115, 127,
  123, 40, 41, 62, 32, 33, 31, 34, 98, 101, 42, 30, 39, 43, 80, 86, 124, 95, 69, 88, 141, 125,
  47, 171, 172, 4, 48, 173, 174, 35, 102, 103, 36, 70, 37, 38, 104, 129, 75, 175, 176, 177, 178,
  142, 8, 12, 11, 9, 10, 13, 14, 15, 16,
};

const char *nn_stopword(int index) {
  return index >= 0 && index < NN_STOPWORD_COUNT ? stopwords[index] : NULL;
}

int nn_stopword_find(const char *word, int len) {
  if (len < 1 || len > NN_STOPWORD_MAX_LEN) return -1;
  int lo = 0, hi = NN_STOPWORD_COUNT - 1;
  while (lo <= hi) {
    int mid = (lo + hi) / 2;
    const char *s = stopwords[sorted_index[mid]];
    int slen = (int)strlen(s);
    int c = memcmp(word, s, (size_t)(len < slen ? len : slen));
    if (c == 0) c = len - slen;
    if (c < 0) hi = mid - 1;
    else if (c > 0) lo = mid + 1;
    else return sorted_index[mid];
  }
  return -1;
}
