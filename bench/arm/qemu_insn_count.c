// A qemu-user TCG plugin that counts guest instructions retired, per thread
// and in total, and prints them at exit: the whole-program instruction counts
// of bench/arm/insn_count.sh (tern vs llama.cpp, both cross-built for
// aarch64). Instruction counts under emulation are a proxy for work, not a
// timing: they ignore cache misses, issue width and latencies.
//
// Build (host compiler; Debian ships qemu-user with plugin support but not the
// plugin header, so the few entry points of the stable plugin ABI, version 1
// as in qemu 7.2, are declared here):
//   cc -O2 -shared -fPIC -o qemu_insn_count.so bench/arm/qemu_insn_count.c
// Use:
//   qemu-aarch64 -L SYSROOT -cpu max -plugin ./qemu_insn_count.so,out=FILE ./prog
// FILE gets "total N" (and "thread I N" per guest thread).
#include <inttypes.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef uint64_t qemu_plugin_id_t;
typedef struct qemu_info_t qemu_info_t;  // not read
struct qemu_plugin_tb;
typedef void (*qemu_plugin_vcpu_tb_trans_cb_t)(qemu_plugin_id_t id, struct qemu_plugin_tb* tb);
typedef void (*qemu_plugin_vcpu_udata_cb_t)(unsigned int vcpu_index, void* userdata);
typedef void (*qemu_plugin_udata_cb_t)(qemu_plugin_id_t id, void* userdata);
enum qemu_plugin_cb_flags { QEMU_PLUGIN_CB_NO_REGS };

void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id, qemu_plugin_vcpu_tb_trans_cb_t cb);
void qemu_plugin_register_vcpu_tb_exec_cb(struct qemu_plugin_tb* tb, qemu_plugin_vcpu_udata_cb_t cb,
                                          enum qemu_plugin_cb_flags flags, void* userdata);
size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb* tb);
void qemu_plugin_register_atexit_cb(qemu_plugin_id_t id, qemu_plugin_udata_cb_t cb, void* userdata);

__attribute__((visibility("default"))) int qemu_plugin_version = 1;

#define MAX_THREADS 1024
static _Atomic uint64_t counts[MAX_THREADS];
static char out_path[512];

static void on_exec(unsigned int vcpu, void* n) {
  // Each guest thread is a vCPU in user mode; its slot is written by it alone.
  atomic_fetch_add_explicit(&counts[vcpu % MAX_THREADS], (uint64_t)(uintptr_t)n,
                            memory_order_relaxed);
}

static void on_translate(qemu_plugin_id_t id, struct qemu_plugin_tb* tb) {
  qemu_plugin_register_vcpu_tb_exec_cb(tb, on_exec, QEMU_PLUGIN_CB_NO_REGS,
                                       (void*)(uintptr_t)qemu_plugin_tb_n_insns(tb));
}

static void on_plugin_exit(qemu_plugin_id_t id, void* p) {
  uint64_t total = 0;
  for (int i = 0; i < MAX_THREADS; ++i) total += atomic_load(&counts[i]);
  FILE* f = out_path[0] ? fopen(out_path, "w") : stderr;
  if (!f) f = stderr;
  fprintf(f, "total %" PRIu64 "\n", total);
  for (int i = 0; i < MAX_THREADS; ++i) {
    const uint64_t c = atomic_load(&counts[i]);
    if (c) fprintf(f, "thread %d %" PRIu64 "\n", i, c);
  }
  if (f != stderr) fclose(f);
}

__attribute__((visibility("default"))) int qemu_plugin_install(qemu_plugin_id_t id,
                                                               const qemu_info_t* info, int argc,
                                                               char** argv) {
  for (int i = 0; i < argc; ++i) {
    if (strncmp(argv[i], "out=", 4) == 0) snprintf(out_path, sizeof(out_path), "%s", argv[i] + 4);
  }
  qemu_plugin_register_vcpu_tb_trans_cb(id, on_translate);
  qemu_plugin_register_atexit_cb(id, on_plugin_exit, NULL);
  return 0;
}
