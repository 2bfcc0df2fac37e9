# Cross-compiling tern for Linux aarch64 from x86-64 Debian (GCC 12 cross
# compiler from crossbuild-essential-arm64). The sysroot comes from
# scripts/setup_arm64.sh; ARM64_SYSROOT overrides where it is.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
if(DEFINED ENV{ARM64_SYSROOT})
  set(CMAKE_SYSROOT $ENV{ARM64_SYSROOT})
else()
  set(CMAKE_SYSROOT ${CMAKE_CURRENT_LIST_DIR}/../.cache/sysroot-arm64)
endif()
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
set(ENV{PKG_CONFIG_SYSROOT_DIR} ${CMAKE_SYSROOT})
set(ENV{PKG_CONFIG_LIBDIR}
    "${CMAKE_SYSROOT}/usr/lib/aarch64-linux-gnu/pkgconfig:${CMAKE_SYSROOT}/usr/share/pkgconfig")
set(ENV{PKG_CONFIG_PATH} "")
# gtest discovery and ctest run the binaries under qemu-user (binfmt_misc is
# not assumed). QEMU_CPU in the environment overrides -cpu (scripts/test_arm64.sh
# runs the tests at several CPU models).
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64 -L ${CMAKE_SYSROOT})
