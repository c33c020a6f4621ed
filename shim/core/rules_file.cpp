// tmaguard core: reading a rules file from disk (the library at start and check-rules share this).
#include <fstream>
#include <sstream>

#include "tmaguard/rules.h"

namespace tmaguard {

RulesResult load_rules_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return RulesResult{nullptr, {path + ": cannot read the rules file"}};
  std::stringstream text;
  text << in.rdbuf();
  return parse_rules(text.str(), path);
}

}  // namespace tmaguard
