// tmaguard shim: the launching thread's Python frames (CPython 3.9 to 3.13), read the way a sampling profiler reads them: from the thread's
// own frame chain, which is suspended while this thread runs tmaguard's code, without the GIL and without calling
// into Python (it is never initialised, never entered, never waited on). The interpreter is found with dlsym in the
// process; its structures are read by the layout of its version, every read through safe_read (a read of a bad
// address fails instead of faulting), and checked against the interpreter's own type objects before anything is
// believed: a layout tmaguard does not know says so and reads nothing.
#include "callsite/python_frames.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstddef>
#include <cstdio>
#include <cerrno>
#include <cstring>
#include <string>

#include "driver/driver.h"

namespace tmaguard {
namespace {

// ---- reading this process's memory without faulting

// process_vm_readv on ourselves; where a sandbox refuses it, a pipe (write(2) of a bad address returns EFAULT).
bool safe_read(uintptr_t address, void* out, std::size_t n) {
  if (address < 4096 || n == 0) return false;
  static std::atomic<int> use_pipe{0};
  if (!use_pipe.load(std::memory_order_relaxed)) {
    iovec local{out, n}, remote{reinterpret_cast<void*>(address), n};
    const ssize_t got = process_vm_readv(getpid(), &local, 1, &remote, 1, 0);
    if (got == static_cast<ssize_t>(n)) return true;
    if (got >= 0 || errno == EFAULT) return false;
    use_pipe.store(1, std::memory_order_relaxed);  // ENOSYS, EPERM: a sandbox
  }
  int fds[2];
  if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) return false;
  bool ok = true;
  auto* dst = static_cast<uint8_t*>(out);
  for (std::size_t done = 0; ok && done < n;) {
    const std::size_t chunk = std::min<std::size_t>(n - done, 4096);
    const ssize_t w = write(fds[1], reinterpret_cast<const void*>(address + done), chunk);
    ok = w > 0 && read(fds[0], dst + done, static_cast<std::size_t>(w)) == w;
    if (ok) done += static_cast<std::size_t>(w);
  }
  close(fds[0]);
  close(fds[1]);
  return ok;
}

template <typename T>
bool read_value(uintptr_t address, T* out) {
  return safe_read(address, out, sizeof *out);
}

// ---- the layouts tmaguard knows (offsets in bytes; x86-64, default build, no free threading)

// How a version keeps a thread's frames:
//   kFrameObjects   3.9, 3.10: PyThreadState::frame, a PyFrameObject chain (f_back), the instruction as f_lasti
//   kCFrame         3.11, 3.12: PyThreadState::cframe -> current_frame, _PyInterpreterFrame chain (previous)
//   kCurrentFrame   3.13: PyThreadState::current_frame, _PyInterpreterFrame chain
enum class FrameModel { kFrameObjects, kCFrame, kCurrentFrame };

struct Layout {
  int version;  // 309 .. 313
  FrameModel model;
  std::size_t tstate_frame;     // PyThreadState's field that leads to the current frame (frame, cframe, current_frame)
  std::size_t cframe_current;   // kCFrame: _PyCFrame::current_frame
  std::size_t frame_code, frame_previous, frame_instr, frame_owner, frame_size;
  int owner_cstack;             // FRAME_OWNED_BY_CSTACK: an entry frame of the C stack, no code of its own (-1: none)
  std::size_t code_filename, code_name, code_linetable, code_firstlineno, code_adaptive, code_size;
  std::size_t ascii_data, compact_data;  // where a compact str's characters start (ASCII / other)
  int line_format;     // python_line()'s format: 39, 310, 311
  int lasti_per_unit;  // kFrameObjects: f_lasti counts bytes (2) or code units (1)
};
// Offsets from CPython's own headers (Include/cpython/pystate.h, code.h, frameobject.h, internal/pycore_frame.h of
// each version), x86-64, default builds; each one measured in a running interpreter of that version
// (tests/gpu/python_layout.py measures the ones of 3.11 and 3.12). code_name is co_qualname from 3.11 on, co_name
// before (3.9 and 3.10 have no qualified name).
constexpr Layout k309{309, FrameModel::kFrameObjects, 24, 0, 32, 24, 104, 0, 112, -1, 104, 112, 120, 40, 0, 128, 48, 72,
                      39, 2};
constexpr Layout k310{310, FrameModel::kFrameObjects, 24, 0, 32, 24, 96, 0, 104, -1, 104, 112, 120, 40, 0, 128, 48, 72,
                      310, 1};
constexpr Layout k311{311, FrameModel::kCFrame, 56, 8, 32, 48, 56, 69, 72, -1, 112, 128, 136, 72, 184, 184, 48, 72, 311, 0};
constexpr Layout k312{312, FrameModel::kCFrame, 56, 0, 0, 8, 56, 70, 72, 3, 112, 128, 136, 68, 192, 192, 40, 56, 311, 0};
constexpr Layout k313{313, FrameModel::kCurrentFrame, 72, 0, 0, 8, 56, 70, 72, 3, 112, 128, 136, 68, 200, 200, 40, 56,
                      311, 0};

struct Interpreter {
  const Layout* layout = nullptr;
  int (*initialized)() = nullptr;            // Py_IsInitialized
  void* (*this_thread_state)() = nullptr;    // PyGILState_GetThisThreadState: reads a thread-specific key
  uintptr_t code_type = 0, unicode_type = 0, bytes_type = 0;
  std::string version;  // "3.12.3"
  std::string note;     // why frames cannot be read ("" when they can)
};

void* symbol(void* handle, const char* name) { return real_dlsym() ? real_dlsym()(handle, name) : nullptr; }

// A loaded libpython's file name (an interpreter embedded with RTLD_LOCAL is not in the global scope). Only the name
// is taken here: dlopen inside dl_iterate_phdr's callback would wait for the loader's lock while holding the lock a
// dlopen in another thread waits for.
int find_libpython(dl_phdr_info* info, std::size_t, void* out) {
  const char* name = info->dlpi_name;
  if (!name || !std::strstr(name, "libpython3")) return 0;
  *static_cast<std::string*>(out) = name;
  return 1;
}

Interpreter* discover() {
  auto* in = new Interpreter;
  void* handle = RTLD_DEFAULT;  // (a null pointer: the global scope)
  if (!symbol(handle, "Py_IsInitialized")) {
    std::string name;
    dl_iterate_phdr(find_libpython, &name);
    void* lib = name.empty() ? nullptr : dlopen(name.c_str(), RTLD_LAZY | RTLD_NOLOAD);
    handle = lib ? lib : RTLD_DEFAULT;
  }
  if (!symbol(handle, "Py_IsInitialized")) {
    in->note = kNoInterpreter;
    return in;
  }
  in->initialized = reinterpret_cast<int (*)()>(symbol(handle, "Py_IsInitialized"));
  in->this_thread_state = reinterpret_cast<void* (*)()>(symbol(handle, "PyGILState_GetThisThreadState"));
  in->code_type = reinterpret_cast<uintptr_t>(symbol(handle, "PyCode_Type"));
  in->unicode_type = reinterpret_cast<uintptr_t>(symbol(handle, "PyUnicode_Type"));
  in->bytes_type = reinterpret_cast<uintptr_t>(symbol(handle, "PyBytes_Type"));
  int major = 0, minor = 0;
  if (const auto* hex = static_cast<const unsigned long*>(symbol(handle, "Py_Version"))) {  // 3.11 and later
    major = static_cast<int>((*hex >> 24) & 0xff);
    minor = static_cast<int>((*hex >> 16) & 0xff);
    in->version = std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string((*hex >> 8) & 0xff);
  } else if (auto get = reinterpret_cast<const char* (*)()>(symbol(handle, "Py_GetVersion"))) {
    const char* v = get();
    in->version = std::string(v, std::strcspn(v, " "));
    std::sscanf(v, "%d.%d", &major, &minor);
  }
  for (const Layout* l : {&k309, &k310, &k311, &k312, &k313})
    if (major == 3 && minor == l->version % 100) in->layout = l;
  if (!in->layout)
    in->note = "CPython " + (in->version.empty() ? std::string("?") : in->version) +
               ": tmaguard reads the frames of CPython 3.9 to 3.13 only";
  else if (!in->this_thread_state || !in->code_type || !in->unicode_type || !in->bytes_type)
    in->note = "CPython " + in->version + " without the symbols tmaguard needs";
  return in;
}

// How many objects the loader has loaded so far (dl_phdr_info::dlpi_adds): a libpython loaded after a look that
// found none (a C++ host that embeds Python later) is looked for again only when this moved.
int loads_seen(dl_phdr_info* info, std::size_t size, void* out) {
  if (size >= offsetof(dl_phdr_info, dlpi_adds) + sizeof info->dlpi_adds)
    *static_cast<unsigned long long*>(out) = info->dlpi_adds;
  return 1;
}
unsigned long long loader_loads() {
  unsigned long long n = 0;
  dl_iterate_phdr(loads_seen, &n);
  return n;
}

// Whether kPythonRelookMs passed since the last time this said yes (then the next window starts now).
bool relook_due() {
  static std::atomic<int64_t> next_ms{0};
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC_COARSE, &t);
  const int64_t now = static_cast<int64_t>(t.tv_sec) * 1000 + t.tv_nsec / 1000000;
  int64_t due = next_ms.load(std::memory_order_relaxed);
  return now >= due && next_ms.compare_exchange_strong(due, now + kPythonRelookMs, std::memory_order_relaxed);
}

// The interpreter as last found. One that was not there is looked for again after the loader loads anything more
// (at most kLooks times: each look that finds none is kept, since raw call sites point into its note); with
// `recent_look`, the loader is asked at most every kPythonRelookMs.
const Interpreter& interpreter(bool recent_look) {
  constexpr int kLooks = 64;
  static std::atomic<Interpreter*> cached{nullptr};
  static std::atomic<unsigned long long> loads_then{0};
  static std::atomic<int> looks{0};
  Interpreter* in = cached.load(std::memory_order_acquire);
  if (in && (in->note != kNoInterpreter || looks.load(std::memory_order_relaxed) >= kLooks)) return *in;
  const bool due = relook_due();  // a look made once the window is over starts the next one
  if (in && recent_look && !due) return *in;
  const unsigned long long loads = loader_loads();
  if (in && loads == loads_then.load(std::memory_order_relaxed)) return *in;
  Interpreter* fresh = discover();
  looks.fetch_add(1, std::memory_order_relaxed);
  if (cached.compare_exchange_strong(in, fresh, std::memory_order_acq_rel)) {
    loads_then.store(loads, std::memory_order_relaxed);
    return *fresh;  // the one it replaced stays allocated: notes taken from it may still be read
  }
  delete fresh;
  return *in;
}

// A str object's text (compact strings: every identifier and file name), UTF-8; "?" when it cannot be read.
std::string read_str(const Interpreter& in, uintptr_t obj) {
  struct {
    uintptr_t refcnt, type;
    int64_t length;
    int64_t hash;
    uint32_t state;
  } head{};
  if (!read_value(obj, &head) || head.type != in.unicode_type || head.length < 0 || head.length > 4096) return "?";
  const unsigned kind = (head.state >> 2) & 7, compact = (head.state >> 5) & 1, ascii = (head.state >> 6) & 1;
  if (!compact || (kind != 1 && kind != 2 && kind != 4)) return "?";
  const std::size_t n = static_cast<std::size_t>(head.length);
  std::string raw(n * kind, '\0');
  if (!safe_read(obj + (ascii ? in.layout->ascii_data : in.layout->compact_data), raw.data(), raw.size())) return "?";
  if (ascii) return raw;
  std::string out;
  for (std::size_t i = 0; i < n; ++i) {
    uint32_t c = 0;
    std::memcpy(&c, raw.data() + i * kind, kind);
    if (c < 0x80) {
      out += static_cast<char>(c);
    } else if (c < 0x800) {
      out += static_cast<char>(0xc0 | (c >> 6));
      out += static_cast<char>(0x80 | (c & 0x3f));
    } else if (c < 0x10000) {
      out += static_cast<char>(0xe0 | (c >> 12));
      out += static_cast<char>(0x80 | ((c >> 6) & 0x3f));
      out += static_cast<char>(0x80 | (c & 0x3f));
    } else {
      out += static_cast<char>(0xf0 | (c >> 18));
      out += static_cast<char>(0x80 | ((c >> 12) & 0x3f));
      out += static_cast<char>(0x80 | ((c >> 6) & 0x3f));
      out += static_cast<char>(0x80 | (c & 0x3f));
    }
  }
  return out;
}

// One frame's code object, read and checked: false when it is not a code object of this interpreter.
bool read_frame(const Interpreter& in, uintptr_t code, uintptr_t instr, PythonFrame& out) {
  const Layout& L = *in.layout;
  uint8_t co[256];
  if (L.code_size > sizeof co || !safe_read(code, co, L.code_size)) return false;
  auto field = [&](std::size_t at) {
    uintptr_t v;
    std::memcpy(&v, co + at, sizeof v);
    return v;
  };
  if (field(8) != in.code_type) return false;  // ob_type
  int first_line = 0;
  std::memcpy(&first_line, co + L.code_firstlineno, sizeof first_line);
  out.file = read_str(in, field(L.code_filename));
  out.function = read_str(in, field(L.code_name));
  const uintptr_t table = field(L.code_linetable);
  struct {
    uintptr_t refcnt, type;
    int64_t size;
  } bytes{};
  out.line = 0;
  if (read_value(table, &bytes) && bytes.type == in.bytes_type && bytes.size == 0) {
    out.line = first_line;  // a code object of one line (3.9's lambdas): its table is empty
  } else if (read_value(table, &bytes) && bytes.type == in.bytes_type && bytes.size > 0 && bytes.size < (1 << 20)) {
    std::string t(static_cast<std::size_t>(bytes.size), '\0');
    // The instruction as an index in code units: from the frame's instruction pointer (3.11 on), or its f_lasti
    // (3.9: bytes, 3.10: code units).
    const int64_t index = L.model == FrameModel::kFrameObjects
                              ? static_cast<int64_t>(static_cast<int32_t>(instr)) / L.lasti_per_unit
                              : static_cast<int64_t>(instr - (code + L.code_adaptive)) / 2;
    if (safe_read(table + 32, t.data(), t.size()) && index >= 0 && index < (1 << 28))
      out.line = python_line(reinterpret_cast<const uint8_t*>(t.data()), t.size(), first_line,
                             static_cast<int>(index), L.line_format);
  }
  return true;
}

}  // namespace

namespace {
// Set once a walk of this interpreter's frames, read safely, found real code objects where its layout says they are:
// from then on this thread's own frame chain (valid memory: the thread is running tmaguard's code above it) is read
// with plain loads, which cost nothing beside a system call per frame. Code objects and strings, which a later
// resolution may find freed, are always read safely.
std::atomic<bool> g_layout_verified{false};

bool read_frame_bytes(uintptr_t frame, void* out, std::size_t n) {
  if (g_layout_verified.load(std::memory_order_acquire)) {
    std::memcpy(out, reinterpret_cast<const void*>(frame), n);
    return true;
  }
  return safe_read(frame, out, n);
}
uintptr_t read_word(uintptr_t address) {
  if (address < 4096) return 0;
  uintptr_t v = 0;
  return read_frame_bytes(address, &v, sizeof v) ? v : 0;
}
}  // namespace

bool read_python_raw(RawPython& raw, bool recent_look) {
  raw = RawPython{};
  raw.taken = true;
  const Interpreter& in = interpreter(recent_look);
  if (!in.note.empty()) {
    raw.note = in.note.c_str();
    return false;
  }
  if (!in.initialized()) {
    raw.note = "the Python interpreter is not running";
    return false;
  }
  const uintptr_t tstate = reinterpret_cast<uintptr_t>(in.this_thread_state());
  if (!tstate) {
    raw.note = "this thread never ran Python code (a thread of a C++ runtime)";
    return false;
  }
  const Layout& L = *in.layout;
  uintptr_t frame = read_word(tstate + L.tstate_frame);
  if (L.model == FrameModel::kCFrame) frame = frame ? read_word(frame + L.cframe_current) : 0;
  for (std::size_t guard = 0; frame >= 4096 && raw.n < kMaxRawPythonFrames && guard < 4 * kMaxRawPythonFrames;
       ++guard) {
    uint8_t f[128];
    if (L.frame_size > sizeof f || !read_frame_bytes(frame, f, L.frame_size)) break;
    uintptr_t code, previous, instr = 0;
    std::memcpy(&code, f + L.frame_code, sizeof code);
    std::memcpy(&previous, f + L.frame_previous, sizeof previous);
    if (L.model == FrameModel::kFrameObjects) {
      int32_t lasti;  // f_lasti
      std::memcpy(&lasti, f + L.frame_instr, sizeof lasti);
      instr = static_cast<uint32_t>(lasti);
    } else {
      std::memcpy(&instr, f + L.frame_instr, sizeof instr);
    }
    if (L.owner_cstack < 0 || static_cast<signed char>(f[L.frame_owner]) != L.owner_cstack)
      raw.frames[raw.n++] = {code, instr};
    frame = previous;
  }
  if (raw.n == 0) raw.note = "no Python frames on this thread (it runs no Python code now)";
  if (raw.n && !g_layout_verified.load(std::memory_order_relaxed)) {
    uintptr_t type = 0;  // the innermost frame's code object is one of this interpreter's
    if (read_value(raw.frames[0].code + 8, &type) && type == in.code_type)
      g_layout_verified.store(true, std::memory_order_release);
  }
  return raw.n != 0;
}

void resolve_python(const RawPython& raw, CallSite& site) {
  if (!raw.taken) return;
  site.python_taken = true;
  if (raw.note) site.python_note = raw.note;
  const Interpreter& in = interpreter(false);
  for (std::size_t i = 0; i < raw.n && in.layout; ++i) {
    PythonFrame pf;
    if (!read_frame(in, raw.frames[i].code, raw.frames[i].instr, pf)) {
      site.python_note = "CPython " + in.version + ": a frame that is not laid out as tmaguard expects; stopped there";
      break;
    }
    site.python.push_back(std::move(pf));
  }
}

}  // namespace tmaguard
