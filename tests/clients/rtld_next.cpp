// RTLD_NEXT probe: tg_next_b's tg_probe_next() asks dlsym(RTLD_NEXT, "tg_probe") and must get tg_next_a's.
#include <dlfcn.h>

#include <cstdio>

extern "C" int tg_probe();
#if defined(TG_NEXT_A)
extern "C" int tg_probe() { return 1; }
#elif defined(TG_NEXT_B)
extern "C" int tg_probe() { return 2; }
extern "C" int tg_probe_next() {
  auto f = reinterpret_cast<int (*)()>(dlsym(RTLD_NEXT, "tg_probe"));
  return f ? f() : -1;
}
#else
extern "C" int tg_probe_next();
int main() {
  std::printf("%d\n", tg_probe_next());
  return 0;
}
#endif
