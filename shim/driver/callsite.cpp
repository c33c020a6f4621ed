// tmaguard shim: where a launch came from: the launching thread's native frames (unwound with the C++ runtime's own
// unwinder, named from the loader's and the file's symbol tables) and its Python frames (python_frames.h). Called
// only when a finding is about to be reported, never on a clean launch.
#include "driver/callsite.h"

#include <cxxabi.h>
#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <unwind.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <ctime>
#include <cstring>
#include <map>
#include <mutex>

#include "base/counters.h"
#include "base/fork_locks.h"
#include "driver/python_frames.h"

namespace tmaguard {
namespace {

constexpr std::size_t kMaxNativeFrames = 32, kMaxPythonFrames = 32;

struct Unwound {
  uintptr_t pcs[kMaxNativeFrames + 8];
  std::size_t n = 0;
  std::size_t limit = kMaxNativeFrames + 8;  // frames to unwind at most (tmaguard's own included)
};

_Unwind_Reason_Code collect(_Unwind_Context* ctx, void* arg) {
  auto* u = static_cast<Unwound*>(arg);
  if (u->n >= u->limit) return _URC_END_OF_STACK;
  const uintptr_t pc = _Unwind_GetIP(ctx);
  if (!pc) return _URC_END_OF_STACK;
  u->pcs[u->n++] = pc;
  return _URC_NO_REASON;
}

std::string demangle(const char* name) {
  int status = 0;
  char* d = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  std::string out = status == 0 && d ? d : name;
  std::free(d);
  return out;
}

// The GNU build id of the object loaded at `bias`, hex ("" when none); cached by load address.
struct BuildIdQuery {
  uintptr_t bias;
  std::string id;
};
int find_build_id(dl_phdr_info* info, std::size_t, void* arg) {
  auto* q = static_cast<BuildIdQuery*>(arg);
  if (info->dlpi_addr != q->bias) return 0;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_NOTE) continue;
    const auto* p = reinterpret_cast<const uint8_t*>(info->dlpi_addr + ph.p_vaddr);
    const uint8_t* end = p + ph.p_memsz;
    while (p + sizeof(ElfW(Nhdr)) <= end) {
      const auto* n = reinterpret_cast<const ElfW(Nhdr)*>(p);
      const uint8_t* name = p + sizeof *n;
      const uint8_t* desc = name + ((n->n_namesz + 3) & ~3u);
      if (n->n_type == NT_GNU_BUILD_ID && n->n_namesz == 4 && std::memcmp(name, "GNU", 4) == 0) {
        static const char* const hex = "0123456789abcdef";
        for (uint32_t k = 0; k < n->n_descsz && desc + k < end; ++k) {
          q->id += hex[desc[k] >> 4];
          q->id += hex[desc[k] & 15];
        }
        return 1;
      }
      p = desc + ((n->n_descsz + 3) & ~3u);
    }
  }
  return 1;
}
std::mutex g_ids_mu;
std::map<uintptr_t, std::string>* g_ids = nullptr;  // under g_ids_mu
std::mutex& ids_lock() {
  register_fork_lock(ForkLock::kBuildIds, {[] { g_ids_mu.lock(); }, [] { g_ids_mu.unlock(); }, [] { g_ids_mu.unlock(); }});
  return g_ids_mu;
}
std::string build_id(uintptr_t bias) {
  {
    std::lock_guard<std::mutex> lock(ids_lock());
    if (!g_ids) g_ids = new std::map<uintptr_t, std::string>;
    if (const auto it = g_ids->find(bias); it != g_ids->end()) return it->second;
  }
  BuildIdQuery q{bias, {}};
  dl_iterate_phdr(find_build_id, &q);
  std::lock_guard<std::mutex> lock(ids_lock());
  return (*g_ids)[bias] = q.id;
}

// A module file's static symbol table (.symtab), mapped read-only once per file and kept (nullptr syms: the file has
// none, or is no ELF file tmaguard can read): a program built without -rdynamic exports none of its functions, but
// unless it was stripped its file still names them.
struct SymbolTable {
  const ElfW(Sym)* syms = nullptr;
  std::size_t n = 0;
  const char* strs = nullptr;
  std::size_t strs_size = 0;
};
std::map<std::string, SymbolTable>* g_tables = nullptr;  // under g_ids_mu

SymbolTable load_symbol_table(const std::string& path) {
  SymbolTable t;
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return t;
  struct stat st;
  if (fstat(fd, &st) != 0 || st.st_size <= static_cast<off_t>(sizeof(ElfW(Ehdr)))) {
    close(fd);
    return t;
  }
  const auto size = static_cast<std::size_t>(st.st_size);
  void* map = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (map == MAP_FAILED) return t;
  const auto* base = static_cast<const uint8_t*>(map);
  const auto* eh = reinterpret_cast<const ElfW(Ehdr)*>(base);
  const bool elf = std::memcmp(eh->e_ident, ELFMAG, SELFMAG) == 0 && eh->e_ident[EI_CLASS] == ELFCLASS64 &&
                   eh->e_shoff && eh->e_shentsize == sizeof(ElfW(Shdr)) &&
                   eh->e_shoff + uint64_t{eh->e_shnum} * sizeof(ElfW(Shdr)) <= size;
  const auto* sh = elf ? reinterpret_cast<const ElfW(Shdr)*>(base + eh->e_shoff) : nullptr;
  for (unsigned s = 0; sh && s < eh->e_shnum; ++s) {
    if (sh[s].sh_type != SHT_SYMTAB || sh[s].sh_link >= eh->e_shnum) continue;
    const ElfW(Shdr)& strs = sh[sh[s].sh_link];
    if (sh[s].sh_offset + sh[s].sh_size > size || strs.sh_offset + strs.sh_size > size) continue;
    t.syms = reinterpret_cast<const ElfW(Sym)*>(base + sh[s].sh_offset);
    t.n = sh[s].sh_size / sizeof(ElfW(Sym));
    t.strs = reinterpret_cast<const char*>(base + strs.sh_offset);
    t.strs_size = strs.sh_size;
    return t;  // stays mapped: later lookups in this file read it again
  }
  munmap(map, size);
  return t;
}

// The function of the file's .symtab that covers `vaddr` (an address in the file's own terms).
bool symtab_lookup(const std::string& path, uint64_t vaddr, std::string* name, uint64_t* offset) {
  SymbolTable t;
  {
    std::lock_guard<std::mutex> lock(ids_lock());
    if (!g_tables) g_tables = new std::map<std::string, SymbolTable>;
    const auto it = g_tables->find(path);
    if (it != g_tables->end()) {
      t = it->second;
    } else {
      t = load_symbol_table(path);
      (*g_tables)[path] = t;
    }
  }
  for (std::size_t i = 0; i < t.n; ++i) {
    const ElfW(Sym)& sym = t.syms[i];
    if (ELF64_ST_TYPE(sym.st_info) != STT_FUNC || vaddr < sym.st_value || vaddr >= sym.st_value + sym.st_size ||
        sym.st_name >= t.strs_size)
      continue;
    *name = demangle(std::string(t.strs + sym.st_name, strnlen(t.strs + sym.st_name, t.strs_size - sym.st_name)).c_str());
    *offset = vaddr - sym.st_value;
    return true;
  }
  return false;
}

NativeFrame describe(uintptr_t pc) {
  NativeFrame f;
  Dl_info info{};
  link_map* lm = nullptr;
  // pc - 1: a return address may be the first byte of the next function.
  if (!dladdr1(reinterpret_cast<void*>(pc - 1), &info, reinterpret_cast<void**>(&lm), RTLD_DL_LINKMAP) || !lm) {
    f.offset = pc;
    return f;
  }
  f.module = info.dli_fname && *info.dli_fname ? info.dli_fname : "?";
  f.offset = pc - lm->l_addr;
  f.build_id = build_id(lm->l_addr);
  if (info.dli_sname && info.dli_saddr) {
    f.symbol = demangle(info.dli_sname);
    f.symbol_offset = pc - reinterpret_cast<uintptr_t>(info.dli_saddr);
  } else {
    std::string path = f.module;
    if (path == "?" || path.empty()) path = "/proc/self/exe";
    if (lm->l_name && !*lm->l_name) path = "/proc/self/exe";  // the main program: its link_map has no name
    symtab_lookup(path, f.offset - 1, &f.symbol, &f.symbol_offset);
    if (!f.symbol.empty()) ++f.symbol_offset;
  }
  return f;
}

// This library's own code, [first, end) of its loaded segments: its frames (the wrapper, the check) are not the job's.
// Found once; a frame is then told by two compares, not a loader lookup.
struct Range {
  uintptr_t first = 0, end = 0;
};
int own_segments(dl_phdr_info* info, std::size_t, void* arg) {
  auto* r = static_cast<Range*>(arg);
  const auto self = reinterpret_cast<uintptr_t>(&own_segments);
  uintptr_t lo = ~uintptr_t{0}, hi = 0;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD) continue;
    lo = std::min<uintptr_t>(lo, info->dlpi_addr + ph.p_vaddr);
    hi = std::max<uintptr_t>(hi, info->dlpi_addr + ph.p_vaddr + ph.p_memsz);
  }
  if (self < lo || self >= hi) return 0;
  *r = {lo, hi};
  return 1;
}
Range own_range() {
  static std::atomic<uintptr_t> first{0}, end{0};
  if (end.load(std::memory_order_acquire)) return {first.load(std::memory_order_relaxed), end.load()};
  Range r;
  dl_iterate_phdr(own_segments, &r);
  first.store(r.first, std::memory_order_relaxed);
  end.store(r.end, std::memory_order_release);
  return r;
}

}  // namespace

RawCallSite capture_raw_call_site(StackMode mode, std::size_t max_native) {
  RawCallSite raw;
  if (mode == StackMode::kNative || mode == StackMode::kAll) {
    raw.native = true;
    Unwound u;
    u.limit = std::min(max_native, kMaxNativeFrames) + 8;
    _Unwind_Backtrace(collect, &u);
    const Range self = own_range();
    for (std::size_t i = 0; i < u.n && raw.n < std::min(max_native, kMaxNativeFrames); ++i) {
      if (u.pcs[i] > self.first && u.pcs[i] <= self.end) continue;  // tmaguard's own frames
      raw.pcs[raw.n++] = u.pcs[i];
    }
  }
  if (mode == StackMode::kPython || mode == StackMode::kAll) read_python_raw(raw.python);
  return raw;
}

CallSite resolve_call_site(const RawCallSite& raw) {
  CallSite site;
  site.native_taken = raw.native;
  for (std::size_t i = 0; i < raw.n; ++i) site.native.push_back(describe(raw.pcs[i]));
  resolve_python(raw.python, site);
  return site;
}

CallSite capture_call_site(StackMode mode) {
  timespec t0{}, t1{};
  clock_gettime(CLOCK_MONOTONIC, &t0);
  CallSite site = resolve_call_site(capture_raw_call_site(mode));
  clock_gettime(CLOCK_MONOTONIC, &t1);
  if (mode != StackMode::kOff)
    count_call_site(static_cast<uint64_t>((t1.tv_sec - t0.tv_sec) * 1000000000LL + (t1.tv_nsec - t0.tv_nsec)));
  return site;
}

}  // namespace tmaguard
