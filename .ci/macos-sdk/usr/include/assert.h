/* Stand-in for the Apple SDK's assert.h, for .ci/macos-check only (see TargetConditionals.h here):
 * the C objects it helps compile are never linked. */
#ifndef KHARON_CI_ASSERT_H
#define KHARON_CI_ASSERT_H
#ifdef NDEBUG
#define assert(e) ((void)0)
#else
#define assert(e) ((e) ? (void)0 : __builtin_trap())
#endif
#endif
