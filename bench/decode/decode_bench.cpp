// Decode throughput of a recorded pod watch stream, JSON (simdjson on-demand)
// and protobuf, through the codec tally-extender ships (codec::PodCodec: the
// model's Pod, from JSON or protobuf) under the runtime's watch decoders, as
// the informers run them. The stream is fed in 64 KiB pieces, as network reads
// deliver it.
//
//   tally-decode-bench --json pods_watch.json --protobuf pods_watch.pb [--repeat 5] [--min-seconds 1]

#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "tally/state/watch_codec.hpp"
#include "tally/runtime/json_watch.hpp"
#include "tally/runtime/protobuf_watch.hpp"

using namespace tally::runtime;
using ShippedPodCodec = tally::state::WatchCodec<tally::codec::PodCodec>;  // what the informers run

namespace {

std::string readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct Outcome {
  size_t events = 0;
  size_t pods = 0;
  size_t containers = 0;  // keeps the decoded data observable
  double seconds = 0;
  bool ok = true;
};

template <class Decoder>
Outcome decodeOnce(const std::string& data) {
  Outcome o;
  const auto start = std::chrono::steady_clock::now();
  Decoder decoder;
  auto sink = [&](WatchEvent<ShippedPodCodec::Object>&& ev) {
    ++o.events;
    if (ev.object) {
      ++o.pods;
      o.containers += ev.object->value.containers.size();
    }
  };
  constexpr size_t kPiece = 64 * 1024;
  for (size_t off = 0; off < data.size() && o.ok; off += kPiece) {
    if (auto st = decoder.feed(std::string_view(data).substr(off, kPiece), sink); !st) {
      std::fprintf(stderr, "decode error: %s\n", st.error().describe().c_str());
      o.ok = false;
    }
  }
  if (o.ok) o.ok = static_cast<bool>(decoder.finish(sink));
  o.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return o;
}

// Best of at least `repeat` runs, and of as many more as fit in `minSeconds`
// of decoding: a run of a few milliseconds is either wholly hit or wholly
// missed by a neighbour's burst, so five of them span too little time.
template <class Decoder>
bool report(const char* name, const std::string& path, int repeat, double minSeconds) {
  const std::string data = readFile(path);
  if (data.empty()) {
    std::fprintf(stderr, "%s: empty or missing\n", path.c_str());
    return false;
  }
  constexpr int kMaxRuns = 2000;
  Outcome best;
  double total = 0;
  int runs = 0;
  while (runs < repeat || (total < minSeconds && runs < kMaxRuns)) {
    Outcome o = decodeOnce<Decoder>(data);
    if (!o.ok) return false;
    ++runs;
    total += o.seconds;
    if (best.seconds == 0 || o.seconds < best.seconds) best = o;
  }
  std::printf("tally     %-8s events=%zu pods=%zu bytes=%zu seconds=%.5f MBps=%.1f events_per_s=%.0f runs=%d\n", name,
              best.events, best.pods, data.size(), best.seconds, static_cast<double>(data.size()) / best.seconds / 1e6,
              static_cast<double>(best.events) / best.seconds, runs);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Tally watch decode benchmark"};
  std::string json, protobuf;
  int repeat = 5;
  double minSeconds = 0;
  app.add_option("--json", json);
  app.add_option("--protobuf", protobuf);
  app.add_option("--repeat", repeat, "at least this many runs per format (the best is reported)");
  app.add_option("--min-seconds", minSeconds, "and more runs until this much decoding time has passed");
  CLI11_PARSE(app, argc, argv);
  bool ok = true;
  if (!json.empty()) ok = report<JsonWatchDecoder<ShippedPodCodec>>("json", json, repeat, minSeconds) && ok;
  if (!protobuf.empty())
    ok = report<ProtobufWatchDecoder<ShippedPodCodec>>("protobuf", protobuf, repeat, minSeconds) && ok;
  return ok ? 0 : 1;
}
