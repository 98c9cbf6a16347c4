/* Stand-in for the Apple SDK's string.h, for .ci/macos-check only (see TargetConditionals.h here):
 * the C objects it helps compile are never linked. The declarations ring's C code calls. */
#ifndef KHARON_CI_STRING_H
#define KHARON_CI_STRING_H
#include <stddef.h>
void *memcpy(void *dst, const void *src, size_t n);
void *memmove(void *dst, const void *src, size_t n);
void *memset(void *dst, int c, size_t n);
int memcmp(const void *a, const void *b, size_t n);
size_t strlen(const char *s);
#endif
