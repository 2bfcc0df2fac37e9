// The NEON + SDOT kernel table (Armv8.2 dotprod: Cortex-A76, Neoverse N1,
// Apple M1): every matrix product with SDOT's indexed form, 8 activation rows
// x 8 channels (or 16 rows x 4) a GEMM micro-kernel and 4 tiles a GEMV one
// (gemm_neon.inl).
// Compiled with -march=armv8.2-a+dotprod; chosen only when HWCAP_ASIMDDP says so.
#include "dispatch.h"
#include "gemm_neon.inl"
#include "ops_neon.h"

namespace tern::kernels {

const KernelTable* dotprod_kernels() {
  static const KernelTable t =
      neon::table("neon-dotprod", arm::gemm_tiles<arm::SdotDot, arm::SdotDot>);
  return &t;
}

}  // namespace tern::kernels
