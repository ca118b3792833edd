// A training checkpoint's files on disk (train/checkpoint.h): the state file's name beside the
// weights, a file's size and CRC-32, the staged names a save writes before it renames them into
// place, the durable rename, and the removal of what killed writers left behind.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace mdl::train::checkpoint_files {

std::string state_path(const std::string& checkpoint);  // CHECKPOINT.train.safetensors

// A file's size and CRC-32 (zlib's), as read back from the disk.
struct FileDigest {
  uint64_t bytes = 0;
  uint32_t crc = 0;
};
FileDigest digest(const std::string& path);
std::string hex(uint32_t v);  // 8 lowercase hex digits

// Where this process stages `file`: FILE.new.PID.
std::string staged_path(const std::string& file);
// The staged versions of `file` any writer left: FILE.new.PID for any PID, in name order.
std::vector<std::string> staged_versions(const std::string& file);

// Renames `from` over `to` and makes the rename durable (the directory fsynced, where the file
// system allows), so that a later rename never reaches the disk before it. Throws naming both.
void rename_durably(const std::string& from, const std::string& to);

// Removes the staged and temporary files of the checkpoint at `checkpoint` and of its state file
// (FILE.new.PID, FILE.tmp.PID, FILE.new.PID.tmp.PID) whose writers are gone: no process of that
// id runs on this machine. This process's own and those of running processes are kept.
void remove_abandoned(const std::string& checkpoint);

}  // namespace mdl::train::checkpoint_files
