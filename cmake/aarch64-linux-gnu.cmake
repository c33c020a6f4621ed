# CMake toolchain file: build tmaguard for aarch64 Linux (Grace hosts) on an x86-64 Debian machine, with Debian's cross
# compiler (g++-aarch64-linux-gnu) and the arm64 multiarch packages of the dependencies (scripts/install-deps.sh
# --arch aarch64 installs both). scripts/build.sh --arch aarch64 passes it; the tests run under qemu-user.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
# Libraries and CMake packages from the arm64 multiarch tree; programs (python3, ctags) from the build machine.
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu /usr/lib/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)
# Test programs run under emulation (ctest, gtest_discover_tests): qemu-aarch64 with the multiarch loader's tree.
find_program(TG_QEMU_AARCH64 NAMES qemu-aarch64-static qemu-aarch64)
if(TG_QEMU_AARCH64)
  set(CMAKE_CROSSCOMPILING_EMULATOR ${TG_QEMU_AARCH64};-L;/usr/aarch64-linux-gnu)
endif()
