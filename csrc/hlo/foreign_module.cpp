#include "hlo/foreign_module.h"

#include <cctype>
#include <set>
#include <stdexcept>

namespace torch_tpu::hlo {

namespace {

[[noreturn]] void fail(const std::string& what) { throw std::invalid_argument("foreign StableHLO module: " + what); }

bool is_symbol_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '$' || c == '.'; }

// MLIR text read one piece at a time; brackets are matched with string
// literals skipped, so a `}` inside an attribute string ends nothing.
struct Cursor {
  const std::string& s;
  size_t pos = 0;

  void skip_space() {
    while (pos < s.size() && std::isspace(static_cast<unsigned char>(s[pos]))) ++pos;
  }
  bool at(const std::string& word) const { return s.compare(pos, word.size(), word) == 0; }
  bool take(const std::string& word) {
    skip_space();
    if (!at(word)) return false;
    pos += word.size();
    return true;
  }
  std::string symbol() {
    skip_space();
    if (pos >= s.size() || s[pos] != '@') fail("expected a symbol name at offset " + std::to_string(pos));
    size_t start = ++pos;
    while (pos < s.size() && is_symbol_char(s[pos])) ++pos;
    if (pos == start) fail("a quoted or empty symbol name at offset " + std::to_string(start));
    return s.substr(start, pos - start);
  }
  // From an opening bracket to just past its match; returns what is between.
  std::string balanced(char open, char close) {
    skip_space();
    if (pos >= s.size() || s[pos] != open)
      fail(std::string("expected '") + open + "' at offset " + std::to_string(pos));
    size_t start = pos + 1;
    int depth = 0;
    for (; pos < s.size(); ++pos) {
      char c = s[pos];
      if (c == '"') {
        for (++pos; pos < s.size() && s[pos] != '"'; ++pos) {
          if (s[pos] == '\\') ++pos;
        }
      } else if (c == open) {
        ++depth;
      } else if (c == close && --depth == 0) {
        ++pos;
        return s.substr(start, pos - 1 - start);
      }
    }
    fail(std::string("unbalanced '") + open + "'");
  }
};

// Splits at the commas outside any bracket or string.
std::vector<std::string> split_top_level(const std::string& s) {
  std::vector<std::string> parts;
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (c == '"') {
      for (++i; i < s.size() && s[i] != '"'; ++i) {
        if (s[i] == '\\') ++i;
      }
    } else if (c == '(' || c == '{' || c == '[' || c == '<') {
      ++depth;
    } else if (c == ')' || c == '}' || c == ']' || (c == '>' && (i == 0 || s[i - 1] != '-'))) {
      --depth;
    } else if (c == ',' && depth == 0) {
      parts.push_back(s.substr(start, i - start));
      start = i + 1;
    }
  }
  if (s.find_first_not_of(" \n\t", start) != std::string::npos) parts.push_back(s.substr(start));
  return parts;
}

// The type in `%arg0: tensor<4xf32> {attrs}` (named) or `tensor<4xf32> {attrs}`.
TensorType type_of(const std::string& entry, bool named) {
  size_t at = named ? entry.find(':') : 0;
  if (at == std::string::npos) fail("an argument without a type: " + entry);
  Cursor c{entry, named ? at + 1 : 0};
  c.skip_space();
  size_t start = c.pos;
  if (!c.at("tensor<")) fail("an argument or result that is not a tensor: " + entry);
  c.pos += 6;
  c.balanced('<', '>');
  return parse_tensor_type(entry.substr(start, c.pos - start));
}

}  // namespace

TensorType parse_tensor_type(const std::string& text) {
  const std::string prefix = "tensor<";
  if (text.size() <= prefix.size() || text.compare(0, prefix.size(), prefix) != 0 || text.back() != '>')
    fail("not a tensor type: " + text);
  std::string inner = text.substr(prefix.size(), text.size() - prefix.size() - 1);
  TensorType t;
  size_t pos = 0;
  while (pos < inner.size() && (std::isdigit(static_cast<unsigned char>(inner[pos])) || inner[pos] == '?')) {
    if (inner[pos] == '?') fail("a dynamic shape: " + text);
    size_t end = inner.find('x', pos);
    if (end == std::string::npos) fail("not a tensor type: " + text);
    t.shape.push_back(std::stoll(inner.substr(pos, end - pos)));
    pos = end + 1;
  }
  const std::string element = inner.substr(pos);
  for (int k = 0; k <= static_cast<int>(ElementType::C128); ++k) {
    if (element == mlir_name(static_cast<ElementType>(k))) {
      t.dtype = static_cast<ElementType>(k);
      return t;
    }
  }
  fail("an element type tpu tensors cannot hold: " + text);
}

ForeignModule parse_foreign_module(const std::string& text) {
  Cursor c{text};
  if (!c.take("module")) fail("the text does not start with `module`");
  c.skip_space();
  if (c.at("@")) c.symbol();
  if (c.take("attributes")) c.balanced('{', '}');
  const std::string body = c.balanced('{', '}');

  ForeignModule m;
  bool has_main = false;
  Cursor f{body};
  for (f.skip_space(); f.pos < body.size(); f.skip_space()) {
    if (!f.take("func.func")) {
      fail("a module-level op that is not a function (only functions can be spliced): " +
           body.substr(f.pos, body.find('\n', f.pos) - f.pos));
    }
    // Every spliced function is private; `main` is called from ours.
    f.skip_space();
    bool is_public = true;
    if (f.take("private")) {
      is_public = false;
    } else if (f.take("public")) {
      is_public = true;
    }
    f.skip_space();
    const size_t name_at = f.pos;
    const std::string name = f.symbol();
    const std::string args = f.balanced('(', ')');
    std::string results;
    if (f.take("->")) {
      f.skip_space();
      if (f.at("(")) {
        results = f.balanced('(', ')');
      } else {
        size_t start = f.pos;
        while (f.pos < body.size() && !std::isspace(static_cast<unsigned char>(body[f.pos]))) {
          if (body[f.pos] == '<') {
            f.balanced('<', '>');
          } else {
            ++f.pos;
          }
        }
        results = body.substr(start, f.pos - start);
      }
    }
    if (f.take("attributes")) f.balanced('{', '}');
    f.balanced('{', '}');
    m.functions += "  func.func private " + body.substr(name_at, f.pos - name_at) + "\n";
    m.names.push_back(name);
    if (name == "main" && is_public) {
      has_main = true;
      for (const std::string& a : split_top_level(args)) m.args.push_back(type_of(a, true));
      for (const std::string& r : split_top_level(results)) m.results.push_back(type_of(r, false));
    }
  }
  if (!has_main) fail("no public function @main");
  return m;
}

std::string renamed_functions(const ForeignModule& module, const std::string& prefix) {
  const std::set<std::string> names(module.names.begin(), module.names.end());
  const std::string& s = module.functions;
  std::string out;
  out.reserve(s.size() + 64);
  for (size_t i = 0; i < s.size();) {
    if (s[i] == '"') {  // attribute strings are copied as they are
      size_t end = i + 1;
      for (; end < s.size() && s[end] != '"'; ++end) {
        if (s[end] == '\\') ++end;
      }
      out.append(s, i, end + 1 - i);
      i = end + 1;
      continue;
    }
    if (s[i] != '@') {
      out += s[i++];
      continue;
    }
    size_t end = i + 1;
    while (end < s.size() && is_symbol_char(s[end])) ++end;
    const std::string name = s.substr(i + 1, end - i - 1);
    // Only the module's own functions: `stablehlo.custom_call @target` names
    // a kernel, not a symbol of the module.
    out += names.count(name) ? "@" + prefix + name : "@" + name;
    i = end;
  }
  return out;
}

}  // namespace torch_tpu::hlo
