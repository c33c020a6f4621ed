// The launch room's declared-tensor table, without a process: a thread's declarations as a stack of blocks, their
// seed, and what a change does to the thread's memo.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "fakecuda.h"
#include "launch/declared.h"
#include "memo/memo.h"

namespace tmaguard {
namespace {

DeclaredTensor tensor(const char* name, uint64_t data, int64_t inner_stride = 1) {
  DeclaredTensor t;
  std::strncpy(t.name, name, kDeclaredNameBytes - 1);
  t.data = data;
  t.rank = 2;
  t.shape = {4, 8};
  t.strides = {8 * inner_stride, inner_stride};
  t.element_size = 2;
  return t;
}

std::vector<std::string> declare(std::vector<DeclaredTensor> ts) {
  std::vector<std::string> problems;
  DeclarationBatch batch;
  for (const DeclaredTensor& t : ts) problems.push_back(batch.add(t));
  return problems;
}

struct Clean : ::testing::Test {
  void SetUp() override { end_declarations_to(0); }
  void TearDown() override { end_declarations_to(0); }
};
using Declared = Clean;

TEST_F(Declared, ABlockStacksOnTheOuterOneAndItsEndGivesTheOuterOneBackWithItsSeed) {
  declare({tensor("q", 0x10000), tensor("k", 0x20000)});
  const std::size_t outer = declared_depth();
  const uint64_t outer_seed = declared_seed();
  ASSERT_EQ(outer, 2u);
  ASSERT_NE(outer_seed, 0u);
  declare({tensor("dq", 0x30000)});
  EXPECT_EQ(declared_depth(), 3u);
  EXPECT_NE(declared_seed(), outer_seed);
  EXPECT_STREQ(declared_tensors().tensors[2].name, "dq");
  end_declarations_to(outer);
  EXPECT_EQ(declared_depth(), 2u);
  EXPECT_EQ(declared_seed(), outer_seed) << "the outer block's seed, as it was";
  EXPECT_STREQ(declared_tensors().tensors[1].name, "k");
  end_declarations_to(5);  // deeper than the table: nothing to end
  EXPECT_EQ(declared_depth(), 2u);
  end_declarations_to(0);
  EXPECT_EQ(declared_seed(), 0u);
  EXPECT_TRUE(declared_tensors().empty());
}

TEST_F(Declared, TheSeedIsTheDeclarationsNotTheirHistory) {
  declare({tensor("q", 0x10000), tensor("k", 0x20000)});
  const uint64_t seed = declared_seed();
  end_declarations_to(0);
  declare({tensor("q", 0x10000)});
  declare({tensor("k", 0x20000)});
  EXPECT_EQ(declared_seed(), seed) << "one block or two, the same tensors in the same order";
  end_declarations_to(0);
  DeclaredTensor dirty = tensor("q", 0x10000);
  std::memset(dirty.name + 2, 0x55, kDeclaredNameBytes - 3);  // bytes after the name's NUL (the caller's stack)
  dirty.name[1] = '\0';
  declare({dirty, tensor("k", 0x20000)});
  EXPECT_EQ(declared_seed(), seed) << "...only the name up to its NUL";
  end_declarations_to(0);
  const std::vector<DeclaredTensor> others = {tensor("k", 0x20000), tensor("q", 0x10000)};  // swapped
  declare(others);
  EXPECT_NE(declared_seed(), seed);
  end_declarations_to(0);
  declare({tensor("q", 0x10000, 2), tensor("k", 0x20000)});  // another stride
  EXPECT_NE(declared_seed(), seed);
}

TEST_F(Declared, ARefusedTensorSaysWhyAndChangesNothingAndTheTableHoldsSixteen) {
  DeclaredTensor bad = tensor("bad", 0x10000);
  bad.strides[0] = -1;
  EXPECT_NE(declare({bad})[0].find("neither may be negative"), std::string::npos);
  EXPECT_EQ(declared_depth(), 0u);
  EXPECT_EQ(declared_seed(), 0u);
  std::vector<DeclaredTensor> many;
  for (int i = 0; i < 17; ++i) many.push_back(tensor(("t" + std::to_string(i)).c_str(), 0x10000 * (i + 1)));
  const std::vector<std::string> problems = declare(many);
  EXPECT_EQ(declared_depth(), kMaxDeclared);
  for (std::size_t i = 0; i < kMaxDeclared; ++i) EXPECT_EQ(problems[i], "") << i;
  EXPECT_NE(problems[16].find("already declares 16 tensors"), std::string::npos) << problems[16];
}

TEST_F(Declared, AChangeForgetsTheThreadsMemoEntriesAndNoChangeKeepsThem) {
  const std::size_t sizes[] = {8};
  const auto f = static_cast<CUfunction>(fakecuda_define_kernel("declared_memo_kernel", 1, sizes, 0));
  const auto entries_held = [] {
    int n = 0;
    for (const MemoEntry& e : this_memo().entries) n += e.f != nullptr;
    return n;
  };
  MemoEntry& before = entry(f, nullptr, declared_seed());  // as the full check asks
  ASSERT_EQ(before.identity, kernel_identity(before.info));
  ASSERT_EQ(entries_held(), 1);
  declare({});  // an empty block changes nothing
  end_declarations_to(declared_depth());
  EXPECT_EQ(entries_held(), 1);
  declare({tensor("q", 0x10000)});
  EXPECT_EQ(entries_held(), 0) << "entries made with the old seed survived a declaration";
  MemoEntry& under = entry(f, nullptr, declared_seed());  // as the full check asks
  EXPECT_EQ(under.identity, kernel_identity(under.info) ^ declared_seed()) << "made afresh, with the new seed";
  end_declarations_to(0);
  EXPECT_EQ(entries_held(), 0) << "entries made under the block survived its end";
}

}  // namespace
}  // namespace tmaguard
