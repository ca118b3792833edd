// CsvLog and read_csv (RFC 4180 quoting: fields with a comma, quote or newline are quoted).
#include "train/csv_log.h"

#include <unistd.h>

#include <charconv>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <sstream>
#include <string_view>

#include "tensor/error.h"

namespace mdl::train {
namespace {

std::string quote(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

std::string field_text(const CsvLog::Field& f) {
  if (auto* d = std::get_if<double>(&f)) {
    char b[40];
    std::snprintf(b, sizeof b, "%.9g", *d);
    return b;
  }
  if (auto* i = std::get_if<int64_t>(&f)) return std::to_string(*i);
  return quote(std::get<std::string>(f));
}

}  // namespace

CsvLog::CsvLog(const std::string& path, std::vector<std::string> columns, bool append)
    : path_(path), columns_(std::move(columns)) {
  MDL_CHECK(!columns_.empty(), "CsvLog '", path, "': no columns");
  std::string header;
  for (size_t i = 0; i < columns_.size(); ++i) {
    if (i) header += ',';
    header += quote(columns_[i]);
  }
  bool has_header = false, ends_in_newline = true;
  if (append) {
    std::ifstream in(path, std::ios::binary);
    std::string first;
    if (in && std::getline(in, first)) {
      if (!first.empty() && first.back() == '\r') first.pop_back();
      MDL_CHECK(first == header, "CsvLog: '", path, "' has the header '", first, "', not '", header,
                "'; not appending to a log of other columns");
      has_header = true;
      in.clear();
      in.seekg(-1, std::ios::end);
      ends_in_newline = in.get() == '\n';
    }
  }
  out_.open(path, append ? std::ios::app : std::ios::trunc);
  MDL_CHECK(out_.good(), "CsvLog: cannot open '", path, "' for writing");
  if (!ends_in_newline) out_ << "\n";  // a row cut short by a crash stays apart from the next
  if (!has_header) out_ << header << "\n";
  out_ << std::flush;
}

void CsvLog::row(const std::vector<Field>& fields) {
  MDL_CHECK(fields.size() == columns_.size(), "CsvLog '", path_, "': a row of ", fields.size(), " fields for ",
            columns_.size(), " columns");
  for (size_t i = 0; i < fields.size(); ++i) out_ << (i ? "," : "") << field_text(fields[i]);
  out_ << "\n" << std::flush;
  MDL_CHECK(out_.good(), "CsvLog: writing '", path_, "' failed");
}

namespace {

// The index'th comma-separated field of an unquoted line.
std::string_view field_at(std::string_view line, int index) {
  for (int i = 0; i < index; ++i) {
    const size_t comma = line.find(',');
    if (comma == std::string_view::npos) return {};
    line.remove_prefix(comma + 1);
  }
  return line.substr(0, line.find(','));
}

void replace_file(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  MDL_CHECK(f, "CsvLog: cannot create '", tmp, "': ", std::strerror(errno));
  const bool written = std::fwrite(text.data(), 1, text.size(), f) == text.size() && std::fflush(f) == 0 &&
                       ::fsync(::fileno(f)) == 0;
  const int e = errno;
  const bool closed = std::fclose(f) == 0;
  if (!written || !closed || std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int why = written && closed ? errno : e;
    std::remove(tmp.c_str());
    MDL_FAIL("CsvLog: cannot rewrite '", path, "': ", std::strerror(why));
  }
}

}  // namespace

void drop_rows_from(const std::string& path, const std::string& column, int64_t first) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return;
  const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  const size_t header_end = text.find('\n');
  if (header_end == std::string::npos) return;
  std::string_view header(text.data(), header_end);
  if (!header.empty() && header.back() == '\r') header.remove_suffix(1);
  int index = 0;
  for (std::string_view rest = header;; ++index) {
    const size_t comma = rest.find(',');
    if (rest.substr(0, comma) == column) break;
    if (comma == std::string_view::npos) return;  // no such column
    rest.remove_prefix(comma + 1);
  }
  std::string kept = text.substr(0, header_end + 1);
  bool dropped = false;
  for (size_t pos = header_end + 1; pos < text.size();) {
    const size_t end = text.find('\n', pos);
    if (end == std::string::npos) {  // a row cut short
      dropped = true;
      break;
    }
    const std::string_view line(text.data() + pos, end - pos);
    const std::string_view cell = field_at(line, index);
    int64_t value = 0;
    const auto [p, ec] = std::from_chars(cell.data(), cell.data() + cell.size(), value);
    if (ec == std::errc() && p == cell.data() + cell.size() && value >= first) dropped = true;
    else kept.append(line).push_back('\n');
    pos = end + 1;
  }
  if (dropped) replace_file(path, kept);
}

int CsvTable::column(const std::string& name) const {
  for (size_t i = 0; i < header.size(); ++i)
    if (header[i] == name) return int(i);
  return -1;
}

CsvTable read_csv(const std::string& path) {
  std::ifstream in(path);
  MDL_CHECK(in.good(), "read_csv: cannot open '", path, "'");
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  std::vector<std::vector<std::string>> records(1, std::vector<std::string>(1));
  bool quoted = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    std::string& cell = records.back().back();
    if (quoted) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') cell += '"', ++i;
      else if (c == '"') quoted = false;
      else cell += c;
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      records.back().emplace_back();
    } else if (c == '\n') {
      records.emplace_back(1);
    } else if (c != '\r') {
      cell += c;
    }
  }
  MDL_CHECK(!quoted, "read_csv '", path, "': a quoted field is not closed");
  if (records.back().size() == 1 && records.back()[0].empty()) records.pop_back();
  CsvTable t;
  if (records.empty()) return t;
  t.header = records[0];
  for (size_t r = 1; r < records.size(); ++r) {
    MDL_CHECK(records[r].size() == t.header.size(), "read_csv '", path, "': row ", r, " has ", records[r].size(),
              " fields, the header ", t.header.size());
    t.rows.push_back(records[r]);
  }
  return t;
}

}  // namespace mdl::train
