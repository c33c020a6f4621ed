// Benchmark helper: the address of a function as a shared library defines it, found by walking the library's
// dynamic symbol table, so neither dlsym nor an LD_PRELOAD interposer is in the way. Lets one process time
// "through tmaguard" against "straight to the driver", call by call.
#pragma once
#include <dlfcn.h>
#include <elf.h>
#include <link.h>

#include <cstring>

inline void* direct_symbol(void* handle, const char* name) {
  link_map* lm = nullptr;
  if (!handle || dlinfo(handle, RTLD_DI_LINKMAP, &lm) != 0 || !lm) return nullptr;
  const ElfW(Sym)* symtab = nullptr;
  const char* strtab = nullptr;
  std::size_t strsz = 0;
  for (const ElfW(Dyn)* d = lm->l_ld; d->d_tag != DT_NULL; ++d) {
    // glibc has already relocated these entries to absolute addresses.
    if (d->d_tag == DT_SYMTAB) symtab = reinterpret_cast<const ElfW(Sym)*>(d->d_un.d_ptr);
    if (d->d_tag == DT_STRTAB) strtab = reinterpret_cast<const char*>(d->d_un.d_ptr);
    if (d->d_tag == DT_STRSZ) strsz = d->d_un.d_val;
  }
  if (!symtab || !strtab || reinterpret_cast<const char*>(symtab) >= strtab) return nullptr;
  // The symbol table ends where the string table begins in every library built by a standard linker.
  const auto count = static_cast<std::size_t>(strtab - reinterpret_cast<const char*>(symtab)) / sizeof(ElfW(Sym));
  for (std::size_t i = 0; i < count; ++i) {
    const ElfW(Sym)& s = symtab[i];
    if (s.st_name >= strsz) continue;
    if (s.st_shndx != SHN_UNDEF && ELF64_ST_TYPE(s.st_info) == STT_FUNC && std::strcmp(strtab + s.st_name, name) == 0)
      return reinterpret_cast<void*>(lm->l_addr + s.st_value);
  }
  return nullptr;
}
