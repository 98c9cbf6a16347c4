/* Stand-in for the Apple SDK header of this name, for .ci/macos-check only: it lets ring's build
 * script compile its C objects for a macOS target on Linux, where no Apple SDK exists. The objects
 * are never linked (the check only type-checks the Rust code), so nothing here ends up in a
 * binary. Only the macros ring's headers read (include/ring-core/base.h), with their macOS values. */
#ifndef KHARON_CI_TARGET_CONDITIONALS_H
#define KHARON_CI_TARGET_CONDITIONALS_H
#define TARGET_OS_MAC 1
#define TARGET_OS_OSX 1
#define TARGET_OS_IPHONE 0
#define TARGET_OS_IOS 0
#define TARGET_OS_TV 0
#define TARGET_OS_WATCH 0
#define TARGET_OS_SIMULATOR 0
#endif
