/* ckpt/export.h: marks ckpt's public API for export from libckpt, which is built with
   -fvisibility=hidden. Usable from C and C++. */
#ifndef CKPT_EXPORT_H
#define CKPT_EXPORT_H
#if defined(__GNUC__) || defined(__clang__)
#define CKPT_API __attribute__((visibility("default")))
/* A member of an exported class that only libckpt itself calls (a private constructor taking an
   internal state type): kept out of the exported symbols. */
#define CKPT_LOCAL __attribute__((visibility("hidden")))
#else
#define CKPT_API
#define CKPT_LOCAL
#endif
#endif
