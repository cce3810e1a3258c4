// Runs a fuzz target without libFuzzer (for compilers that lack it): every
// seed file as is, then `-runs=N` deterministic mutations of the seeds
// (bit flips, truncation, duplication, splices, random bytes).
//   <target>_smoke [-runs=N] [-max_total_time=SECONDS] SEED_FILE_OR_DIR...
// (the time bound keeps sanitizer builds, several times slower, in budget)

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

void run(const std::string& input) {
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(input.data()), input.size());
}

std::string mutate(const std::vector<std::string>& seeds, std::mt19937_64& rng) {
  std::string s = seeds[rng() % seeds.size()];
  const int edits = 1 + static_cast<int>(rng() % 8);
  for (int e = 0; e < edits; ++e) {
    if (s.empty()) s.push_back(static_cast<char>(rng()));
    const size_t pos = rng() % s.size();
    switch (rng() % 6) {
      case 0: s[pos] = static_cast<char>(s[pos] ^ (1 << (rng() % 8))); break;
      case 1: s.resize(pos); break;
      case 2: s.insert(pos, s.substr(pos, rng() % 64)); break;
      case 3: s[pos] = static_cast<char>(rng()); break;
      case 4: {
        const std::string& other = seeds[rng() % seeds.size()];
        if (!other.empty()) s.insert(pos, other.substr(rng() % other.size(), rng() % 256));
        break;
      }
      case 5: s.erase(pos, rng() % 32); break;
    }
  }
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  long runs = 1000;
  double maxSeconds = 0;
  std::vector<std::string> seeds;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "-runs=", 6) == 0) {
      runs = std::atol(argv[i] + 6);
      continue;
    }
    if (std::strncmp(argv[i], "-max_total_time=", 16) == 0) {
      maxSeconds = std::atof(argv[i] + 16);
      continue;
    }
    std::vector<std::filesystem::path> files;
    if (std::filesystem::is_directory(argv[i])) {
      for (auto& e : std::filesystem::directory_iterator(argv[i])) files.push_back(e.path());
    } else {
      files.emplace_back(argv[i]);
    }
    for (auto& f : files) {
      std::ifstream in(f, std::ios::binary);
      std::ostringstream ss;
      ss << in.rdbuf();
      // The first byte picks the piece size; vary it per seed.
      for (char c : {'\0', '\x05', '\x3f'}) seeds.push_back(std::string(1, c) + ss.str());
    }
  }
  if (seeds.empty()) seeds.emplace_back("\x01{}");
  for (const auto& s : seeds) run(s);
  std::mt19937_64 rng(20261130);
  const auto start = std::chrono::steady_clock::now();
  long done = 0;
  for (; done < runs; ++done) {
    if (maxSeconds > 0 && (done & 63) == 0 &&
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > maxSeconds) {
      break;
    }
    run(mutate(seeds, rng));
  }
  std::printf("%zu seeds, %ld mutated runs: no crash\n", seeds.size(), done);
  return 0;
}
