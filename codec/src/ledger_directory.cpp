#include "tally/codec/ledger_directory.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <fmt/format.h>
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

struct RecordFile {
  fs::path relative;
  std::string stamp;  // size, modification time, inode
};

struct Listing {
  fs::path root;  // the directory named, symlinks resolved
  std::vector<RecordFile> files;
};

std::string signatureOf(const Listing& listing) {
  std::string out = listing.root.string();
  for (const auto& f : listing.files) out += "\n" + f.relative.generic_string() + " " + f.stamp;
  return out;
}

// Every record file below the resolved directory, in path order. Hidden
// entries (.git, git-sync's worktrees and ..data links) are skipped.
Result<Listing> listRecordFiles(const fs::path& directory) {
  std::error_code ec;
  Listing listing;
  listing.root = fs::canonical(directory, ec);
  if (ec) return ioError(directory, "not a directory (" + ec.message() + ")");
  if (!fs::is_directory(listing.root, ec)) return ioError(directory, "not a directory");
  fs::recursive_directory_iterator it(listing.root, fs::directory_options::none, ec);
  if (ec) return ioError(directory, ec.message());
  for (; it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (ec) return ioError(directory, ec.message());
    const fs::path& path = it->path();
    if (isHidden(path)) {
      if (it->is_directory(ec)) it.disable_recursion_pending();
      continue;
    }
    if (!isRecordFile(path) || !it->is_regular_file(ec)) continue;
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) {
      return ioError(path,
                     fmt::format("cannot be read: {}", std::error_code(errno, std::generic_category()).message()));
    }
    listing.files.push_back({fs::relative(path, listing.root, ec),
                             fmt::format("{} {}.{} {}", st.st_size, st.st_mtim.tv_sec, st.st_mtim.tv_nsec, st.st_ino)});
  }
  if (ec) return ioError(directory, ec.message());
  std::sort(listing.files.begin(), listing.files.end(),
            [](const RecordFile& a, const RecordFile& b) { return a.relative < b.relative; });
  return listing;
}

Result<model::Ledger> readListing(const Listing& listing) {
  model::Ledger ledger;
  ledger.loaded = true;
  for (const RecordFile& file : listing.files) {
    std::ifstream in(listing.root / file.relative, std::ios::binary);
    if (!in) return ioError(listing.root / file.relative, "cannot be read");
    std::ostringstream text;
    text << in.rdbuf();
    if (in.bad()) return ioError(listing.root / file.relative, "cannot be read");
    addLedgerFile(ledger, text.str(), file.relative.generic_string());
  }
  return ledger;
}

}  // namespace

Result<model::Ledger> loadLedgerDirectory(const fs::path& directory) {
  auto listing = listRecordFiles(directory);
  if (!listing) return std::move(listing).error();
  return readListing(*listing);
}

Result<std::string> ledgerDirectorySignature(const fs::path& directory) {
  auto listing = listRecordFiles(directory);
  if (!listing) return std::move(listing).error();
  return signatureOf(*listing);
}

Result<LedgerDirectoryRead> readLedgerDirectory(const fs::path& directory) {
  auto before = listRecordFiles(directory);
  if (!before) return std::move(before).error();
  auto ledger = readListing(*before);
  if (!ledger) return std::move(ledger).error();
  auto after = ledgerDirectorySignature(directory);
  if (!after) return std::move(after).error();
  std::string signature = signatureOf(*before);
  if (*after != signature) return ioError(directory, "changed while it was read (a file being written?)");
  return LedgerDirectoryRead{std::move(ledger).value(), std::move(signature)};
}

}  // namespace tally::codec
