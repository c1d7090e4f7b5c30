/* khost/kit/deprecated.h — how the SDK marks the names it keeps for source compatibility (docs/ABI.md, "Source
 * compatibility"). Silent by default, since third parties build with warnings as errors; define
 * KHOST_WARN_DEPRECATED to have every use of an old name, and every include of an old header path, warn and
 * name its replacement. */
#ifndef KHOST_KIT_DEPRECATED_H
#define KHOST_KIT_DEPRECATED_H

#if defined(KHOST_WARN_DEPRECATED) && (defined(__GNUC__) || defined(__clang__))
#define KH_DEPRECATED(replacement) __attribute__((deprecated("use " replacement " instead")))
#else
#define KH_DEPRECATED(replacement)
#endif

#endif
