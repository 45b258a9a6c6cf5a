/* ckpt/export.h: marks ckpt's public API for export from libckpt, which is built with
   -fvisibility=hidden. Usable from C and C++. */
#ifndef CKPT_EXPORT_H
#define CKPT_EXPORT_H
#if defined(__GNUC__) || defined(__clang__)
#define CKPT_API __attribute__((visibility("default")))
#else
#define CKPT_API
#endif
#endif
