// tmaguard shim: where a launch came from: the launching thread's native frames (unwound with the C++ runtime's own
// unwinder, named from the loader's and the file's symbol tables) and its Python frames (python_frames.h). Called
// only when a finding is about to be reported, never on a clean launch.
#include "callsite/capture.h"

#include <cxxabi.h>
#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <sys/stat.h>
#include <unistd.h>
#include <unwind.h>

#include <algorithm>
#include <cerrno>
#include <tuple>
#include <vector>
#include <atomic>
#include <cstdlib>
#include <ctime>
#include <cstring>
#include <map>
#include <mutex>

#include "process/counters.h"
#include "process/fork_locks.h"
#include "callsite/python_frames.h"

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
std::mutex& ids_lock() {
  register_fork_lock(ForkLock::kBuildIds, {[] { g_ids_mu.lock(); }, [] { g_ids_mu.unlock(); }, [] { g_ids_mu.unlock(); }});
  return g_ids_mu;
}
// Build ids by load address, for one naming of a call site only: an object unloaded and another loaded at the same
// address (a library reloaded after it was replaced) has another id, so nothing is kept across namings.
using BuildIds = std::map<uintptr_t, std::string>;
std::string build_id(uintptr_t bias, BuildIds& ids) {
  if (const auto it = ids.find(bias); it != ids.end()) return it->second;
  BuildIdQuery q{bias, {}};
  dl_iterate_phdr(find_build_id, &q);
  return ids[bias] = q.id;
}

// A module file's static symbol table (.symtab): a program built without -rdynamic exports none of its functions,
// but unless it was stripped its file still names them. The file is read with pread, never mapped: a library
// replaced in place (cp over it, shorter) would fault a mapping past its new end (SIGBUS in the job). And only a
// file that is still the loaded object is read: its GNU build id must be the loaded object's (a library replaced by
// rename, or rewritten, names other functions at the same offsets). Where the table sits is kept per file
// identity (device, inode, size, modification time, build id), so a file that changes is looked at afresh.
struct SymbolTable {
  bool usable = false;
  uint64_t syms_off = 0, syms_size = 0, strs_off = 0, strs_size = 0;
};
struct FileIdentity {
  dev_t dev;
  ino_t ino;
  off_t size;
  long mtime_s, mtime_ns;
  std::string build_id;
  bool operator<(const FileIdentity& o) const {
    return std::tie(dev, ino, size, mtime_s, mtime_ns, build_id) <
           std::tie(o.dev, o.ino, o.size, o.mtime_s, o.mtime_ns, o.build_id);
  }
};
std::map<FileIdentity, SymbolTable>* g_tables = nullptr;  // under g_ids_mu; bounded (kMaxTables, then cleared)
constexpr std::size_t kMaxTables = 256;

bool read_at(int fd, void* out, std::size_t n, uint64_t off) {
  auto* p = static_cast<uint8_t*>(out);
  for (std::size_t done = 0; done < n;) {
    const ssize_t r = pread(fd, p + done, n - done, static_cast<off_t>(off + done));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;  // the file ended early (it shrank): nothing past its end is read
    done += static_cast<std::size_t>(r);
  }
  return true;
}

// The file's GNU build id, hex, from its section headers' notes ("" when none or unreadable).
std::string file_build_id(int fd, const ElfW(Ehdr)& eh, const std::vector<ElfW(Shdr)>& sh, uint64_t size) {
  for (const ElfW(Shdr)& s : sh) {
    if (s.sh_type != SHT_NOTE || s.sh_size > 4096 || s.sh_offset + s.sh_size > size) continue;
    std::vector<uint8_t> note(s.sh_size);
    if (!read_at(fd, note.data(), note.size(), s.sh_offset)) return "";
    for (std::size_t at = 0; at + sizeof(ElfW(Nhdr)) <= note.size();) {
      ElfW(Nhdr) n;
      std::memcpy(&n, note.data() + at, sizeof n);
      const std::size_t name_at = at + sizeof n, desc_at = name_at + ((n.n_namesz + 3) & ~3u);
      if (desc_at + n.n_descsz > note.size()) break;
      if (n.n_type == NT_GNU_BUILD_ID && n.n_namesz == 4 && std::memcmp(note.data() + name_at, "GNU", 4) == 0) {
        static const char* const hex = "0123456789abcdef";
        std::string id;
        for (uint32_t k = 0; k < n.n_descsz; ++k) {
          id += hex[note[desc_at + k] >> 4];
          id += hex[note[desc_at + k] & 15];
        }
        return id;
      }
      at = desc_at + ((n.n_descsz + 3) & ~3u);
    }
  }
  (void)eh;
  return "";
}

// Where the .symtab of the open file sits, if the file is the loaded object (`loaded_id`: its build id, "" when it
// has none: then the file is taken as it is).
SymbolTable locate_symbol_table(int fd, uint64_t size, const std::string& loaded_id) {
  SymbolTable t;
  ElfW(Ehdr) eh;
  if (size <= sizeof eh || !read_at(fd, &eh, sizeof eh, 0)) return t;
  const bool elf = std::memcmp(eh.e_ident, ELFMAG, SELFMAG) == 0 && eh.e_ident[EI_CLASS] == ELFCLASS64 &&
                   eh.e_shoff && eh.e_shentsize == sizeof(ElfW(Shdr)) &&
                   eh.e_shoff + uint64_t{eh.e_shnum} * sizeof(ElfW(Shdr)) <= size;
  if (!elf) return t;
  std::vector<ElfW(Shdr)> sh(eh.e_shnum);
  if (!read_at(fd, sh.data(), sh.size() * sizeof(ElfW(Shdr)), eh.e_shoff)) return t;
  if (file_build_id(fd, eh, sh, size) != loaded_id) return t;  // not the file that was loaded any more
  for (const ElfW(Shdr)& s : sh) {
    if (s.sh_type != SHT_SYMTAB || s.sh_link >= sh.size()) continue;
    const ElfW(Shdr)& strs = sh[s.sh_link];
    if (s.sh_offset + s.sh_size > size || strs.sh_offset + strs.sh_size > size) continue;
    t = {true, s.sh_offset, s.sh_size, strs.sh_offset, strs.sh_size};
    return t;
  }
  return t;
}

// The function of the file's .symtab that covers `vaddr` (an address in the file's own terms), read in chunks.
bool scan_symbols(int fd, const SymbolTable& t, uint64_t vaddr, std::string* name, uint64_t* offset) {
  constexpr std::size_t kChunk = 4096;
  std::vector<ElfW(Sym)> syms(kChunk);
  const uint64_t n = t.syms_size / sizeof(ElfW(Sym));
  for (uint64_t first = 0; first < n; first += kChunk) {
    const std::size_t count = static_cast<std::size_t>(std::min<uint64_t>(kChunk, n - first));
    if (!read_at(fd, syms.data(), count * sizeof(ElfW(Sym)), t.syms_off + first * sizeof(ElfW(Sym)))) return false;
    for (std::size_t i = 0; i < count; ++i) {
      const ElfW(Sym)& sym = syms[i];
      if (ELF64_ST_TYPE(sym.st_info) != STT_FUNC || vaddr < sym.st_value || vaddr >= sym.st_value + sym.st_size ||
          sym.st_name >= t.strs_size)
        continue;
      char buf[1024];
      const std::size_t want = static_cast<std::size_t>(std::min<uint64_t>(sizeof buf - 1, t.strs_size - sym.st_name));
      if (!read_at(fd, buf, want, t.strs_off + sym.st_name)) return false;
      buf[want] = 0;
      *name = demangle(buf);
      *offset = vaddr - sym.st_value;
      return true;
    }
  }
  return false;
}

bool symtab_lookup(const std::string& path, const std::string& loaded_id, uint64_t vaddr, std::string* name,
                   uint64_t* offset) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  struct stat st;
  bool found = false;
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
    const FileIdentity id{st.st_dev, st.st_ino, st.st_size, st.st_mtim.tv_sec, st.st_mtim.tv_nsec, loaded_id};
    SymbolTable t;
    bool known = false;
    {
      std::lock_guard<std::mutex> lock(ids_lock());
      if (!g_tables) g_tables = new std::map<FileIdentity, SymbolTable>;
      if (const auto it = g_tables->find(id); it != g_tables->end()) t = it->second, known = true;
    }
    if (!known) {
      t = locate_symbol_table(fd, static_cast<uint64_t>(st.st_size), loaded_id);
      std::lock_guard<std::mutex> lock(ids_lock());
      if (g_tables->size() >= kMaxTables) g_tables->clear();
      (*g_tables)[id] = t;
    }
    found = t.usable && scan_symbols(fd, t, vaddr, name, offset);
  }
  close(fd);
  return found;
}

NativeFrame describe(uintptr_t pc, BuildIds& ids) {
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
  f.build_id = build_id(lm->l_addr, ids);
  if (info.dli_sname && info.dli_saddr) {
    f.symbol = demangle(info.dli_sname);
    f.symbol_offset = pc - reinterpret_cast<uintptr_t>(info.dli_saddr);
  } else {
    std::string path = f.module;
    if (path == "?" || path.empty()) path = "/proc/self/exe";
    if (lm->l_name && !*lm->l_name) path = "/proc/self/exe";  // the main program: its link_map has no name
    symtab_lookup(path, f.build_id, f.offset - 1, &f.symbol, &f.symbol_offset);
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

RawCallSite capture_raw_call_site(StackMode mode, std::size_t max_native, bool recent_look) {
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
  if (mode == StackMode::kPython || mode == StackMode::kAll) read_python_raw(raw.python, recent_look);
  return raw;
}

CallSite resolve_call_site(const RawCallSite& raw) {
  CallSite site;
  site.native_taken = raw.native;
  BuildIds ids;
  for (std::size_t i = 0; i < raw.n; ++i) site.native.push_back(describe(raw.pcs[i], ids));
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
