// tmaguard shim: the x86-64 launch thunk (hooks_launch.cpp builds each launch entry with it). A launch entry is a few
// instructions: it saves the six argument registers, asks the memo (tg_passed_<name>, given the handle and
// kernelParams), restores them and jumps to the driver's function (the memo passed the launch) or to the next stage
// (tg_slow_<name>), the caller's stack untouched either way. Written in C++, the wrapper held all eleven cuLaunchKernel
// arguments in registers beside the memo's own: about thirty loads, stores, pushes and pops on every launch, and spills
// inside the memo's look. `setup` puts the handle in %rdi and kernelParams in %rsi, with the stack 56 bytes below the
// caller's (six registers and an 8-byte pad for the call's alignment).
#pragma once

#if defined(__x86_64__) && !defined(TMAGUARD_PORTABLE_CPU)
#if defined(__CET__)
#define TG_THUNK_ENDBR "endbr64\n"
#else
#define TG_THUNK_ENDBR ""
#endif
#define TG_THUNK_PUSH(r) "push %" r "\n.cfi_adjust_cfa_offset 8\n"
#define TG_THUNK_POP(r) "pop %" r "\n.cfi_adjust_cfa_offset -8\n"
#define TG_CPU_LAUNCH_THUNK(name, setup)                                                                           \
  __asm__(".text\n.p2align 4\n.globl " #name "\n.type " #name ",@function\n" #name ":\n.cfi_startproc\n"             \
          TG_THUNK_ENDBR TG_THUNK_PUSH("rdi") TG_THUNK_PUSH("rsi") TG_THUNK_PUSH("rdx") TG_THUNK_PUSH("rcx")         \
          TG_THUNK_PUSH("r8") TG_THUNK_PUSH("r9") "sub $8, %rsp\n.cfi_adjust_cfa_offset 8\n" setup                 \
          "call tg_passed_" #name "\nadd $8, %rsp\n.cfi_adjust_cfa_offset -8\n" TG_THUNK_POP("r9")                 \
          TG_THUNK_POP("r8") TG_THUNK_POP("rcx") TG_THUNK_POP("rdx") TG_THUNK_POP("rsi") TG_THUNK_POP("rdi")        \
          "test %rax, %rax\njz 1f\njmp *%rax\n1:\njmp tg_slow_" #name "\n.cfi_endproc\n.size " #name ", .-" #name  \
          "\n");
// cuLaunchKernel and cuLaunchCooperativeKernel: the handle in %rdi, kernelParams the fourth stack argument (32
// bytes above the return address).
#define TG_CPU_THUNK_STACK_PARAMS "mov 88(%rsp), %rsi\n"
// cuLaunchKernelEx: the handle in %rsi, kernelParams in %rdx.
#define TG_CPU_THUNK_EX_PARAMS "mov %rsi, %rdi\nmov %rdx, %rsi\n"
#endif
