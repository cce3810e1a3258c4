#include "tally/codec/ledger_directory.hpp"

#include <algorithm>
#include <fstream>
#include <sstream>
#include <system_error>
#include <vector>

#include "tally/codec/reservation_record.hpp"

namespace tally::codec {
namespace fs = std::filesystem;

namespace {

bool isRecordFile(const fs::path& path) {
  const std::string extension = path.extension().string();
  return extension == ".yaml" || extension == ".yml";
}

bool isHidden(const fs::path& path) {
  const std::string name = path.filename().string();
  return !name.empty() && name.front() == '.';
}

DecodeError ioError(const fs::path& path, const std::string& message) {
  DecodeError error;
  error.item = "ledger " + path.string();
  error.message = message;
  return error;
}

}  // namespace

Result<model::Ledger> loadLedgerDirectory(const fs::path& directory) {
  std::error_code ec;
  if (!fs::is_directory(directory, ec)) return ioError(directory, "not a directory");

  // Hidden entries (.git, git-sync's ..data links) are skipped; order is by
  // relative path so the result never depends on the file system.
  std::vector<fs::path> files;
  fs::recursive_directory_iterator it(directory, fs::directory_options::none, ec);
  if (ec) return ioError(directory, ec.message());
  for (; it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (ec) return ioError(directory, ec.message());
    const fs::path& path = it->path();
    if (isHidden(path)) {
      if (it->is_directory(ec)) it.disable_recursion_pending();
      continue;
    }
    if (it->is_regular_file(ec) && isRecordFile(path)) files.push_back(fs::relative(path, directory, ec));
  }
  if (ec) return ioError(directory, ec.message());
  std::sort(files.begin(), files.end());

  model::Ledger ledger;
  ledger.loaded = true;
  for (const fs::path& relative : files) {
    std::ifstream in(directory / relative, std::ios::binary);
    if (!in) return ioError(directory / relative, "cannot be read");
    std::ostringstream text;
    text << in.rdbuf();
    if (in.bad()) return ioError(directory / relative, "cannot be read");
    addLedgerFile(ledger, text.str(), relative.generic_string());
  }
  return ledger;
}

}  // namespace tally::codec
