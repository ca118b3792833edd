// A CSV log with a fixed header: one row per epoch (or step), numbers written with full
// precision, text fields quoted when they need it. Flushed per row so a crash keeps the rows.
// Appending (a resumed run) keeps the rows there and writes no second header; a file whose
// header differs is refused.
#pragma once
#include <cstdint>
#include <fstream>
#include <string>
#include <variant>
#include <vector>

namespace mdl::train {

class CsvLog {
 public:
  using Field = std::variant<double, int64_t, std::string>;
  // Throws naming the path. append: add to an existing log of these columns (a new or empty file
  // gets the header); otherwise the file starts afresh.
  CsvLog(const std::string& path, std::vector<std::string> columns, bool append = false);
  void row(const std::vector<Field>& fields);  // one field per column
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::vector<std::string> columns_;
  std::ofstream out_;
};

// Removes from the log at `path` the rows whose integer `column` is `first` or more, and a last row
// cut short (no newline), rewriting the file atomically: what a resumed run drops before it logs
// its epochs again (rows of epochs logged after the checkpoint it resumes from). A missing file, a
// file without that column, or one with nothing to drop is left as it is.
void drop_rows_from(const std::string& path, const std::string& column, int64_t first);

// Reads a CSV written by CsvLog (or any simple CSV): the header and the rows as text.
struct CsvTable {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
  int column(const std::string& name) const;  // -1 when absent
};
CsvTable read_csv(const std::string& path);

}  // namespace mdl::train
