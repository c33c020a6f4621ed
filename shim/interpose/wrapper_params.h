// tmaguard shim: a generated wrapper's parameter list, from its row's PFN type (driver/entry_points.def): the
// exported function then has the driver's exact signature without anyone writing it out (a row whose type changes
// changes its wrapper with it).
//
//   CUresult TG_WRAPPER(cuFoo)(TG_PARAMS_3(tg_pfn_cuFoo)) { return Entry::wrapper(TG_ARGS_3); }
#pragma once

#include <cstddef>
#include <tuple>

namespace tmaguard {

template <typename Fn>
struct Params;
template <typename R, typename... A>
struct Params<R (*)(A...)> {
  static constexpr std::size_t kCount = sizeof...(A);
  template <std::size_t I>
  using At = std::tuple_element_t<I, std::tuple<A...>>;
};
//! The type of parameter I of a function pointer type.
template <typename Fn, std::size_t I>
using ParamOf = typename Params<Fn>::template At<I>;

}  // namespace tmaguard

#define TG_P(pfn, i) ::tmaguard::ParamOf<pfn, i> a##i
#define TG_PARAMS_2(pfn) TG_P(pfn, 0), TG_P(pfn, 1)
#define TG_PARAMS_3(pfn) TG_PARAMS_2(pfn), TG_P(pfn, 2)
#define TG_PARAMS_4(pfn) TG_PARAMS_3(pfn), TG_P(pfn, 3)
#define TG_PARAMS_5(pfn) TG_PARAMS_4(pfn), TG_P(pfn, 4)
#define TG_PARAMS_6(pfn) TG_PARAMS_5(pfn), TG_P(pfn, 5)
#define TG_PARAMS_7(pfn) TG_PARAMS_6(pfn), TG_P(pfn, 6)
#define TG_PARAMS_8(pfn) TG_PARAMS_7(pfn), TG_P(pfn, 7)
#define TG_PARAMS_9(pfn) TG_PARAMS_8(pfn), TG_P(pfn, 8)
#define TG_PARAMS_10(pfn) TG_PARAMS_9(pfn), TG_P(pfn, 9)
#define TG_PARAMS_11(pfn) TG_PARAMS_10(pfn), TG_P(pfn, 10)
#define TG_ARGS_2 a0, a1
#define TG_ARGS_3 TG_ARGS_2, a2
#define TG_ARGS_4 TG_ARGS_3, a3
#define TG_ARGS_5 TG_ARGS_4, a4
#define TG_ARGS_6 TG_ARGS_5, a5
#define TG_ARGS_7 TG_ARGS_6, a6
#define TG_ARGS_8 TG_ARGS_7, a7
#define TG_ARGS_9 TG_ARGS_8, a8
#define TG_ARGS_10 TG_ARGS_9, a9
#define TG_ARGS_11 TG_ARGS_10, a10
//! The exported wrapper of row `name`, of `n` parameters, whose body hands them to `entry`'s wrapper(); a row whose
//! PFN type does not take `n` parameters does not compile.
#define TG_GENERATED_WRAPPER(name, n, entry)                                                          \
  static_assert(::tmaguard::Params<tg_pfn_##name>::kCount == n, #name " does not take " #n " parameters"); \
  CUresult TG_WRAPPER(name)(TG_PARAMS_##n(tg_pfn_##name)) { return entry::wrapper(TG_ARGS_##n); }
