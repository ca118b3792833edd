// The strict JSON reader (recursive descent with a depth guard) and the compact writer.
// Every error names the caller's context and the byte where parsing stopped.
#include "io/json.h"

#include <cstdio>
#include <unordered_set>

#include "tensor/error.h"

namespace mdl::io::json {

namespace {

// Length of the well-formed UTF-8 sequence at s[i], or 0.
size_t utf8_length(std::string_view s, size_t i) {
  auto byte = [&](size_t k) { return i + k < s.size() ? uint8_t(s[i + k]) : uint8_t(0); };
  auto cont = [&](size_t k) { return (byte(k) & 0xC0) == 0x80; };
  uint8_t c = byte(0);
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) return cont(1) ? 2 : 0;
  if (c >= 0xE0 && c <= 0xEF) {
    uint8_t c1 = byte(1);
    if (c == 0xE0 && c1 < 0xA0) return 0;   // overlong
    if (c == 0xED && c1 >= 0xA0) return 0;  // surrogate
    return cont(1) && cont(2) ? 3 : 0;
  }
  if (c >= 0xF0 && c <= 0xF4) {
    uint8_t c1 = byte(1);
    if (c == 0xF0 && c1 < 0x90) return 0;   // overlong
    if (c == 0xF4 && c1 >= 0x90) return 0;  // past U+10FFFF
    return cont(1) && cont(2) && cont(3) ? 4 : 0;
  }
  return 0;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += char(cp);
  } else if (cp < 0x800) {
    out += char(0xC0 | (cp >> 6));
    out += char(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += char(0xE0 | (cp >> 12));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  } else {
    out += char(0xF0 | (cp >> 18));
    out += char(0x80 | ((cp >> 12) & 0x3F));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  }
}

std::string describe(char c) {
  char buf[16];
  if (c >= 0x21 && c <= 0x7E) std::snprintf(buf, sizeof buf, "'%c'", c);
  else std::snprintf(buf, sizeof buf, "byte 0x%02X", unsigned(uint8_t(c)));
  return buf;
}

class Parser {
 public:
  Parser(std::string_view text, std::string_view context, const Limits& limits)
      : s_(text), context_(context), limits_(limits) {}

  Value document() {
    skip_ws();
    Value v = value(0);
    skip_ws();
    if (pos_ < s_.size()) fail("unexpected ", describe(s_[pos_]), " after the document");
    return v;
  }

 private:
  template <class... Args>
  [[noreturn]] void fail(const Args&... what) const {
    MDL_FAIL(context_, ": invalid JSON at byte ", pos_, ": ", what...);
  }

  bool at_end() const { return pos_ >= s_.size(); }
  char peek() const { return at_end() ? '\0' : s_[pos_]; }
  void skip_ws() {
    while (!at_end() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r')) ++pos_;
  }
  void expect(char c) {
    if (at_end()) fail("unexpected end of input, expected '", c, "'");
    if (s_[pos_] != c) fail("expected '", c, "', got ", describe(s_[pos_]));
    ++pos_;
  }
  void count_value() {
    if (++values_ > limits_.max_values) fail("more than ", limits_.max_values, " values");
  }

  Value value(int depth) {
    count_value();
    if (at_end()) fail("unexpected end of input, expected a value");
    char c = s_[pos_];
    if (c == '{' || c == '[') {
      if (depth >= limits_.max_depth) fail("nested deeper than ", limits_.max_depth, " levels");
      return c == '{' ? object(depth + 1) : array(depth + 1);
    }
    if (c == '"') return Value::make_string(string());
    if (c == '-' || (c >= '0' && c <= '9')) return number();
    if (literal("true")) {
      Value v;
      v.kind = Value::Kind::Bool;
      v.boolean = true;
      return v;
    }
    if (literal("false")) {
      Value v;
      v.kind = Value::Kind::Bool;
      return v;
    }
    if (literal("null")) return Value{};
    fail("unexpected ", describe(c), ", expected a value");
  }

  bool literal(std::string_view word) {
    if (s_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }

  Value object(int depth) {
    Value v = Value::make_object();
    std::unordered_set<std::string> seen;
    ++pos_;
    skip_ws();
    if (peek() == '}') {
      ++pos_;
      return v;
    }
    for (;;) {
      skip_ws();
      if (peek() != '"') {
        if (at_end()) fail("unexpected end of input, expected a key");
        fail("expected a string key, got ", describe(peek()));
      }
      size_t key_pos = pos_;
      std::string key = string();
      if (!seen.insert(key).second) {
        pos_ = key_pos;
        fail("duplicate key '", key, "'");
      }
      skip_ws();
      expect(':');
      skip_ws();
      Value member = value(depth);
      v.add(std::move(key), std::move(member));
      skip_ws();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      if (peek() == '}') {
        ++pos_;
        return v;
      }
      if (at_end()) fail("unexpected end of input, expected ',' or '}'");
      fail("expected ',' or '}', got ", describe(peek()));
    }
  }

  Value array(int depth) {
    Value v = Value::make_array();
    ++pos_;
    skip_ws();
    if (peek() == ']') {
      ++pos_;
      return v;
    }
    for (;;) {
      skip_ws();
      v.push(value(depth));
      skip_ws();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      if (peek() == ']') {
        ++pos_;
        return v;
      }
      if (at_end()) fail("unexpected end of input, expected ',' or ']'");
      fail("expected ',' or ']', got ", describe(peek()));
    }
  }

  uint32_t hex4() {
    if (s_.size() - pos_ < 4) fail("unexpected end of input in a \\u escape");
    uint32_t cp = 0;
    for (int k = 0; k < 4; ++k) {
      char c = s_[pos_];
      uint32_t d = c >= '0' && c <= '9'   ? uint32_t(c - '0')
                   : c >= 'a' && c <= 'f' ? uint32_t(c - 'a' + 10)
                   : c >= 'A' && c <= 'F' ? uint32_t(c - 'A' + 10)
                                          : 16u;
      if (d == 16) fail("bad hex digit ", describe(c), " in a \\u escape");
      cp = cp * 16 + d;
      ++pos_;
    }
    return cp;
  }

  std::string string() {
    std::string out;
    ++pos_;
    for (;;) {
      if (at_end()) fail("unterminated string");
      char c = s_[pos_];
      if (c == '"') {
        ++pos_;
        return out;
      }
      if (uint8_t(c) < 0x20) fail("unescaped control character ", describe(c), " in a string");
      if (c == '\\') {
        ++pos_;
        if (at_end()) fail("unterminated string");
        char e = s_[pos_++];
        switch (e) {
          case '"': out += '"'; break;
          case '\\': out += '\\'; break;
          case '/': out += '/'; break;
          case 'b': out += '\b'; break;
          case 'f': out += '\f'; break;
          case 'n': out += '\n'; break;
          case 'r': out += '\r'; break;
          case 't': out += '\t'; break;
          case 'u': {
            uint32_t cp = hex4();
            if (cp >= 0xDC00 && cp <= 0xDFFF) fail("lone low surrogate in a \\u escape");
            if (cp >= 0xD800 && cp <= 0xDBFF) {
              if (s_.substr(pos_, 2) != "\\u") fail("high surrogate not followed by a low surrogate");
              pos_ += 2;
              uint32_t lo = hex4();
              if (lo < 0xDC00 || lo > 0xDFFF) fail("high surrogate not followed by a low surrogate");
              cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            }
            append_utf8(out, cp);
            break;
          }
          default: --pos_; fail("unknown escape ", describe(e), " after a backslash");
        }
        continue;
      }
      size_t n = utf8_length(s_, pos_);
      if (n == 0) fail("invalid UTF-8 ", describe(c), " in a string");
      out.append(s_.substr(pos_, n));
      pos_ += n;
    }
  }

  Value number() {
    size_t start = pos_;
    Value v;
    v.kind = Value::Kind::Int;
    if (peek() == '-') {
      v.negative = true;
      ++pos_;
    }
    if (!(peek() >= '0' && peek() <= '9')) fail("expected a digit after '-'");
    if (peek() == '0' && pos_ + 1 < s_.size() && s_[pos_ + 1] >= '0' && s_[pos_ + 1] <= '9')
      fail("leading zeros are not allowed");
    while (peek() >= '0' && peek() <= '9') {
      uint64_t d = uint64_t(s_[pos_] - '0');
      if (v.magnitude > (UINT64_MAX - d) / 10) {
        pos_ = start;
        fail("integer out of range (more than 64 bits)");
      }
      v.magnitude = v.magnitude * 10 + d;
      ++pos_;
    }
    if (peek() == '.' || peek() == 'e' || peek() == 'E') {
      pos_ = start;
      fail("floating-point numbers are not supported");
    }
    if (v.negative && v.magnitude > uint64_t(INT64_MAX) + 1) {
      pos_ = start;
      fail("integer out of range (below -2^63)");
    }
    if (v.magnitude == 0) v.negative = false;
    return v;
  }

  std::string_view s_;
  std::string_view context_;
  Limits limits_;
  size_t pos_ = 0;
  size_t values_ = 0;
};

void dump_to(std::string& out, const Value& v) {
  switch (v.kind) {
    case Value::Kind::Null: out += "null"; break;
    case Value::Kind::Bool: out += v.boolean ? "true" : "false"; break;
    case Value::Kind::Int:
      if (v.negative) out += '-';
      out += std::to_string(v.magnitude);
      break;
    case Value::Kind::String: out += quote(v.str); break;
    case Value::Kind::Array:
      out += '[';
      for (size_t i = 0; i < v.items.size(); ++i) {
        if (i) out += ',';
        dump_to(out, v.items[i]);
      }
      out += ']';
      break;
    case Value::Kind::Object:
      out += '{';
      for (size_t i = 0; i < v.items.size(); ++i) {
        if (i) out += ',';
        out += quote(v.keys[i]);
        out += ':';
        dump_to(out, v.items[i]);
      }
      out += '}';
      break;
  }
}

}  // namespace

Value Value::make_string(std::string s) {
  Value v;
  v.kind = Kind::String;
  v.str = std::move(s);
  return v;
}
Value Value::make_int(int64_t x) {
  Value v;
  v.kind = Kind::Int;
  v.negative = x < 0;
  v.magnitude = x < 0 ? uint64_t(0) - uint64_t(x) : uint64_t(x);
  return v;
}
Value Value::make_uint(uint64_t x) {
  Value v;
  v.kind = Kind::Int;
  v.magnitude = x;
  return v;
}
Value Value::make_array() {
  Value v;
  v.kind = Kind::Array;
  return v;
}
Value Value::make_object() {
  Value v;
  v.kind = Kind::Object;
  return v;
}

const char* Value::kind_name() const {
  switch (kind) {
    case Kind::Null: return "null";
    case Kind::Bool: return "boolean";
    case Kind::Int: return "integer";
    case Kind::String: return "string";
    case Kind::Array: return "array";
    case Kind::Object: return "object";
  }
  return "?";
}

const Value* Value::find(std::string_view key) const {
  for (size_t i = 0; i < keys.size(); ++i)
    if (keys[i] == key) return &items[i];
  return nullptr;
}

Value& Value::push(Value v) {
  items.push_back(std::move(v));
  return items.back();
}

Value& Value::add(std::string key, Value v) {
  keys.push_back(std::move(key));
  items.push_back(std::move(v));
  return items.back();
}

Value parse(std::string_view text, std::string_view context, const Limits& limits) {
  return Parser(text, context, limits).document();
}

std::string dump(const Value& v) {
  std::string out;
  dump_to(out, v);
  return out;
}

std::string quote(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (uint8_t(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04X", unsigned(c));
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

bool valid_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    size_t n = utf8_length(s, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

}  // namespace mdl::io::json
