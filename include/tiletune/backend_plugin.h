/* tiletune backend plug-in interface, ABI version 1.1.
 *
 * A backend is a shared library that exports one function, tt_plugin_init, which fills a
 * tt_plugin table. tiletune loads it with `--backend-plugin PATH.so` (CLI, daemon and worker)
 * and registers it under its name beside the in-tree backends; from then on the tuner treats
 * it like any other: it asks it to describe its target, emit source for lowered loop nests,
 * build, load and run candidates (in an isolated measuring process), and time them.
 *
 * Export only tt_plugin_init (an export map: -fvisibility=hidden alone still exports C++
 * template instances of the standard library).
 *
 * Rules of the interface:
 * - C only: plain structs, integers, doubles, char strings (UTF-8) and opaque pointers.
 * - Functions report failure by returning non-zero (or NULL) and writing a NUL-terminated
 *   message of at most err_size bytes into err; they never throw or abort.
 * - Strings tiletune passes are valid for the call only. Strings a plug-in returns in
 *   tt_target stay valid until destroy; text returned by emit is freed with free_text.
 * - A plug-in instance (create) is used from one thread at a time, except build, which
 *   tiletune calls from several threads at once for different artifacts.
 * - Every kernel (load) is unloaded before the instance that loaded it is destroyed.
 * - run reports a positive, finite time; anything else fails the candidate.
 *
 * The program a plug-in emits code for is JSON (program_json in emit), documented in
 * README.md ("Add a backend"): the op's buffers, and per stage its axes, its right-hand side
 * as an expression tree and its loops after scheduling (tile loops in order, the reduction
 * loops of the micro-kernel, the register tile). Knobs a backend cannot use (packing,
 * vectorization, parallel loops, row fusion) may be ignored: every one of them leaves the
 * results unchanged.
 *
 * Minor versions add to the program what a plug-in must understand to emit a correct kernel;
 * a plug-in says in abi_minor which it reads, and tiletune never sends it a program that needs
 * a later one (the op is refused by name instead). A table from before abi_minor existed
 * (struct_size without it) reads minor 0.
 * - 1.0: f32 tensors, no padded inputs.
 * - 1.1: padded inputs and element types.
 *   - A buffer's "pad" (a number, "inf" or "-inf"; null for none): a load of that input at an
 *     index outside its shape, in any dimension, yields the pad value.
 *   - A buffer's "dtype": "f32", "bf16", "f16", "i32", "i8" or "u8". tensors[i] points at
 *     elements of that type (bf16 and f16 as 16-bit words, IEEE binary16 for f16), and
 *     tensor_floats[i] in load counts elements. The workspace stays in 4-byte units.
 *   - Every expression node has a "type", "f32" or "i32": the type it computes in. Its
 *     operands have that type already, except that both sides of a comparison share a type
 *     of their own (its value is 1 or 0 in the node's type) and a select's condition has its
 *     own (non-zero selects the second operand). A load widens its element exactly; a
 *     constant is written in the node's type.
 *   - A "cast" node (one operand, "type" the result) converts: i32 to f32 as C does; f32 to
 *     i32 rounding to nearest even, saturating, NaN giving 0.
 *   - A stage's "accumulate" ("f32" or "i32") is the type its body's value and its reduction
 *     have; the epilogue's value has the epilogue_body's root type.
 *   - Storing a value into an element rounds to nearest even and saturates: f32 to bf16/f16
 *     rounds (NaN stays NaN); f32 or i32 into i8, u8 or i32 rounds, clamps to the type's range,
 *     and NaN stores 0. A reduction into a narrower type than its accumulator must sum in the
 *     accumulator's type and store once.
 */
#ifndef TILETUNE_BACKEND_PLUGIN_H
#define TILETUNE_BACKEND_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TT_PLUGIN_ABI_VERSION 1u
#define TT_PLUGIN_ABI_MINOR 1u /* the latest minor version, see above */
#define TT_PLUGIN_ENTRY "tt_plugin_init"

/* Flags of tt_plugin.run. */
#define TT_RUN_UPLOAD 1u   /* the input tensors changed since the last run: copy them in */
#define TT_RUN_DOWNLOAD 2u /* the caller reads the outputs after this run: copy them out */

/* What the device offers to the schedule space (the tuner derives its knobs from these). */
typedef struct tt_target {
  const char* fingerprint_json; /* device and toolchain, everything that changes timings */
  const char* family_json;      /* device identity without the toolchain */
  int32_t vector_lanes;         /* f32 SIMD lanes a kernel may use; 1 for none */
  int32_t vector_registers;
  int32_t threads;        /* cores or compute units */
  int32_t max_group_size; /* > 0: a GPU-style device running work-groups of at most this many items */
  int64_t local_bytes;    /* work-group shared memory, 0 when there is none */
  int64_t l1_bytes, l2_bytes, l3_bytes;
} tt_target;

typedef struct tt_plugin {
  uint32_t abi_version; /* TT_PLUGIN_ABI_VERSION as the plug-in was compiled */
  uint32_t struct_size; /* sizeof(tt_plugin) as the plug-in was compiled */
  const char* name;     /* the backend's name, [a-z0-9_-]+ */
  const char* description;
  const char* source_extension; /* of emitted source, ".c" */

  /* One backend instance. options_json: {"threads": N (0: all), "compiler": "", "device": ""}.
   * Keep it cheap and independent of the toolchain: a measuring worker creates an instance
   * only to load and run artifacts. */
  void* (*create)(const char* options_json, char* err, size_t err_size);
  void (*destroy)(void* backend);
  /* Fills *out; strings stay owned by the instance. */
  int (*describe)(void* backend, tt_target* out, char* err, size_t err_size);
  /* Source of one candidate; NULL on failure (an invalid or unsupported config). */
  char* (*emit)(void* backend, const char* program_json, char* err, size_t err_size);
  void (*free_text)(char* text);
  /* Compiles source_path into artifact_path; non-zero on failure with the compiler's log in log. */
  int (*build)(void* backend, const char* source_path, const char* artifact_path, char* log, size_t log_size);
  /* Loads an artifact for tensors of tensor_floats[i] elements (inputs, then outputs: floats
   * before 1.1) and a workspace of workspace_floats; NULL on failure. */
  void* (*load)(void* backend, const char* artifact_path, const int64_t* tensor_floats, int32_t tensor_count,
                int64_t workspace_floats, char* err, size_t err_size);
  /* Runs once on host tensors (and a host workspace the kernel may use); *seconds is the time
   * the device spent. TT_RUN_UPLOAD: copy every tensor in (outputs arrive NaN-filled, so that a
   * kernel that skips an element is caught); TT_RUN_DOWNLOAD: copy every tensor back.
   * Non-zero on failure. */
  int (*run)(void* kernel, float* const* tensors, float* workspace, uint32_t flags, double* seconds, char* err,
             size_t err_size);
  void (*unload)(void* kernel);

  /* Since 1.1. The minor version of the program this plug-in reads (at most the host's,
   * TT_PLUGIN_ABI_MINOR of the header it was built against, or lower to decline features). */
  uint32_t abi_minor;
} tt_plugin;

/* The one symbol tiletune looks up. host_abi_version is TT_PLUGIN_ABI_VERSION of tiletune;
 * a plug-in that cannot serve it returns non-zero with a message. */
typedef int (*tt_plugin_init_fn)(uint32_t host_abi_version, tt_plugin* out, char* err, size_t err_size);

#ifdef __cplusplus
}
#endif

#endif /* TILETUNE_BACKEND_PLUGIN_H */
