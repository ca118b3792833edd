// A small, strict JSON reader and writer, enough for checkpoint headers: objects (keys unique,
// in document order), arrays, strings (every escape, UTF-8 checked), integers as sign plus u64
// magnitude, true/false/null. Floats are refused by name; nesting depth and value count are
// bounded, so hostile input can neither overflow the stack nor make the reader allocate much.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace mdl::io::json {

struct Value {
  enum class Kind : uint8_t { Null, Bool, Int, String, Array, Object };

  Kind kind = Kind::Null;
  bool boolean = false;
  bool negative = false;          // Int: the sign; -0 parses as 0
  uint64_t magnitude = 0;         // Int: |value|
  std::string str;                // String
  std::vector<Value> items;       // Array elements, or Object values
  std::vector<std::string> keys;  // Object keys, parallel to items

  static Value make_string(std::string s);
  static Value make_int(int64_t v);
  static Value make_uint(uint64_t v);
  static Value make_array();
  static Value make_object();

  bool is_object() const { return kind == Kind::Object; }
  bool is_array() const { return kind == Kind::Array; }
  bool is_string() const { return kind == Kind::String; }
  bool is_int() const { return kind == Kind::Int; }
  bool is_uint() const { return kind == Kind::Int && !negative; }
  const char* kind_name() const;  // "object", "array", "string", "integer", "boolean", "null"

  // Object member by key, or null.
  const Value* find(std::string_view key) const;
  // Appends to an array / object (the writer's side; keys are not checked for uniqueness here).
  Value& push(Value v);
  Value& add(std::string key, Value v);
};

struct Limits {
  int max_depth = 64;                   // arrays and objects nested deeper are refused
  size_t max_values = size_t(1) << 20;  // about 100,000 safetensors entries
};

// Parses a whole document (whitespace around it allowed, nothing else). Throws mdl::Error
// "<context>: invalid JSON at byte N: <what>".
Value parse(std::string_view text, std::string_view context = "json", const Limits& limits = {});

// Compact text, keys in insertion order; strings are written as given (see valid_utf8).
std::string dump(const Value& v);
// A JSON string literal for s: quotes, backslash and control characters escaped.
std::string quote(std::string_view s);
// Whether s is well-formed UTF-8 (no overlong forms, surrogates, or code points past U+10FFFF).
bool valid_utf8(std::string_view s);

}  // namespace mdl::io::json
