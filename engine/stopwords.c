/* stopwords.c -- the 179 English stop words of NLTK (nltk_data corpora/stopwords/english, as
 * `stopwords.words("english")` returns them; the list the Made-With-ML lesson removes), in NLTK's
 * order. The order matters: the lesson removes them with the regex alternation
 * \b(i|me|my|...)\b\s*, where the first alternative that matches wins (e.g. "don" before
 * "don't"), and engine/text.c reproduces that rule by comparing indices.
 * Lookup: the words grouped by (length, first letter); a group holds at most a few words.
 * (The grouping tables were generated from the list; tests/test_text.c checks every word.) */
#include <stddef.h>

#include "text.h"

static const char *const stopwords[NN_STOPWORD_COUNT] = {
    "i",         "me",        "my",         "myself",   "we",      "our",     "ours",
    "ourselves", "you",       "you're",     "you've",   "you'll",  "you'd",   "your",
    "yours",     "yourself",  "yourselves", "he",       "him",     "his",     "himself",
    "she",       "she's",     "her",        "hers",     "herself", "it",      "it's",
    "its",       "itself",    "they",       "them",     "their",   "theirs",  "themselves",
    "what",      "which",     "who",        "whom",     "this",    "that",    "that'll",
    "these",     "those",     "am",         "is",       "are",     "was",     "were",
    "be",        "been",      "being",      "have",     "has",     "had",     "having",
    "do",        "does",      "did",        "doing",    "a",       "an",      "the",
    "and",       "but",       "if",         "or",       "because", "as",      "until",
    "while",     "of",        "at",         "by",       "for",     "with",    "about",
    "against",   "between",   "into",       "through",  "during",  "before",  "after",
    "above",     "below",     "to",         "from",     "up",      "down",    "in",
    "out",       "on",        "off",        "over",     "under",   "again",   "further",
    "then",      "once",      "here",       "there",    "when",    "where",   "why",
    "how",       "all",       "any",        "both",     "each",    "few",     "more",
    "most",      "other",     "some",       "such",     "no",      "nor",     "not",
    "only",      "own",       "same",       "so",       "than",    "too",     "very",
    "s",         "t",         "can",        "will",     "just",    "don",     "don't",
    "should",    "should've", "now",        "d",        "ll",      "m",       "o",
    "re",        "ve",        "y",          "ain",      "aren",    "aren't",  "couldn",
    "couldn't",  "didn",      "didn't",     "doesn",    "doesn't", "hadn",    "hadn't",
    "hasn",      "hasn't",    "haven",      "haven't",  "isn",     "isn't",   "ma",
    "mightn",    "mightn't",  "mustn",      "mustn't",  "needn",   "needn't", "shan",
    "shan't",    "shouldn",   "shouldn't",  "wasn",     "wasn't",  "weren",   "weren't",
    "won",       "won't",     "wouldn",     "wouldn't",
};

/* Indices into stopwords[] ordered by (length, word). */
static const unsigned char by_length[NN_STOPWORD_COUNT] = {
    60,  136, 0,   138, 139, 126, 127, 142, 44,  61,  68,  72,  49,  73,  56,  17,  65,  90,
    45,  26,  137, 160, 1,   2,   116, 71,  92,  66,  140, 122, 86,  88,  141, 4,   143, 106,
    63,  107, 46,  64,  128, 58,  131, 110, 74,  54,  53,  23,  18,  19,  105, 158, 28,  117,
    118, 135, 93,  5,   91,  120, 21,  62,  124, 47,  37,  104, 175, 8,   144, 50,  108, 148,
    57,  89,  109, 87,  152, 154, 52,  100, 24,  79,  27,  130, 111, 112, 99,  119, 6,   94,
    121, 167, 114, 115, 123, 40,  31,  98,  30,  39,  125, 171, 48,  35,  102, 38,  129, 75,
    13,  76,  84,  83,  96,  51,  85,  150, 59,  132, 156, 159, 163, 165, 113, 22,  32,  101,
    42,  43,  95,  69,  173, 103, 36,  70,  176, 12,  14,  145, 82,  146, 149, 81,  153, 155,
    55,  29,  161, 3,   168, 133, 33,  172, 177, 11,  9,   10,  77,  67,  78,  151, 97,  157,
    25,  20,  164, 166, 169, 41,  80,  174, 147, 162, 178, 15,  7,   134, 170, 34,  16,
};

/* group_start[(len - 1) * 26 + (first - 'a')]: where the words of that length and first letter
 * begin in by_length (they end where the next group begins; largest group: 7 words). */
static const unsigned char group_start[NN_STOPWORD_MAX_LEN * 26 + 1] = {
    0,   1,   1,   1,   2,   2,   2,   2,   2,   3,   3,   3,   3,   4,   4,   5,   5,   5,   5,
    6,   7,   7,   7,   7,   7,   8,   8,   12,  14,  14,  15,  15,  15,  15,  16,  20,  20,  20,
    21,  24,  25,  28,  28,  28,  29,  30,  31,  32,  33,  34,  34,  34,  34,  39,  40,  41,  43,
    43,  45,  45,  51,  53,  53,  53,  53,  53,  56,  60,  60,  60,  60,  61,  63,  63,  63,  67,
    67,  68,  68,  69,  71,  71,  74,  75,  76,  76,  81,  83,  84,  84,  84,  86,  86,  90,  90,
    90,  90,  94,  100, 100, 101, 108, 108, 109, 109, 113, 115, 115, 118, 118, 118, 118, 119, 120,
    120, 120, 120, 121, 122, 123, 123, 123, 123, 124, 128, 130, 130, 135, 135, 137, 137, 138, 139,
    140, 142, 142, 142, 142, 145, 146, 146, 146, 146, 148, 148, 148, 148, 148, 148, 150, 151, 151,
    151, 153, 153, 156, 156, 157, 159, 159, 160, 160, 161, 161, 164, 164, 164, 164, 164, 165, 166,
    166, 166, 166, 166, 167, 169, 169, 169, 170, 170, 170, 170, 170, 170, 171, 171, 171, 171, 171,
    171, 171, 171, 171, 171, 172, 172, 172, 172, 172, 172, 172, 172, 172, 172, 173, 173, 174, 174,
    174, 174, 174, 174, 174, 174, 174, 174, 174, 174, 174, 174, 174, 174, 175, 175, 175, 175, 177,
    177, 177, 177, 177, 177, 177, 177, 177, 177, 177, 177, 177, 177, 177, 177, 177, 177, 177, 177,
    177, 177, 177, 177, 177, 177, 177, 178, 178, 178, 178, 178, 179, 179,
};

const char *nn_stopword(int index) {
  return index >= 0 && index < NN_STOPWORD_COUNT ? stopwords[index] : NULL;
}

int nn_stopword_find(const char *word, int len) {
  if (len < 1 || len > NN_STOPWORD_MAX_LEN || word[0] < 'a' || word[0] > 'z') return -1;
  int group = (len - 1) * 26 + (word[0] - 'a');
  for (int i = group_start[group]; i < group_start[group + 1]; i++) {
    const char *s = stopwords[by_length[i]];
    int k = 1;
    while (k < len && s[k] == word[k]) k++;
    if (k == len) return by_length[i];
  }
  return -1;
}
