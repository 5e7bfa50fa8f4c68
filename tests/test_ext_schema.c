/* test_ext_schema.c -- the copy of sql/schema.sql compiled into attnext.so (ext/attn_schema.h)
 * must equal the file byte for byte. Prints the first difference when they do not. */
#include <stdio.h>
#include <string.h>

#include "../ext/attn_schema.h"
#include "check.h"

int main(void) {
  static char file[1 << 16];
  FILE *f = fopen("sql/schema.sql", "rb");
  if (!f) {
    fprintf(stderr, "cannot open sql/schema.sql (run from the repository root)\n");
    return 1;
  }
  size_t n = fread(file, 1, sizeof file - 1, f);
  fclose(f);
  file[n] = 0;
  size_t m = strlen(attn_schema_sql), i = 0;
  while (i < n && i < m && file[i] == attn_schema_sql[i]) i++;
  printf("sql/schema.sql: %zu bytes; ext/attn_schema.h: %zu bytes; equal prefix %zu bytes\n", n, m,
         i);
  CHECK(n == m && i == n, "first difference at byte %zu: file \"%.40s\" vs C copy \"%.40s\"", i,
        file + i, attn_schema_sql + i);
  return check_failures ? 1 : 0;
}
