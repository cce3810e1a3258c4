// Decode throughput of a recorded pod watch stream, JSON (simdjson on-demand)
// and protobuf, through the codec tally-extender ships (codec::PodCodec: the
// model's Pod, from JSON or protobuf) under the runtime's watch decoders, as
// the informers run them. The stream is fed in 64 KiB pieces, as network reads
// deliver it.
//
// --readers adds the side-by-side of issue 28: the same protobuf pod decoders
// (codec::decodePodProtobufOn) on the wire reader the product ships
// (proto::Reader) and on libprotobuf's CodedInputStream (proto::CodedReader),
// on the same bytes, runs of the two alternated: once as the informers run it
// (watch framing and envelopes, which both share, then the pod) and once on
// the pod messages alone, cut out of the stream beforehand. --tile makes the
// protobuf stream from a small recording instead (runtime/test/testdata's
// golden frames from a real API server): its pod frames repeated to --events
// ADDED events, then its first bookmark.
//
//   tally-decode-bench --json pods_watch.json --protobuf pods_watch.pb [--repeat 5] [--min-seconds 1]
//   tally-decode-bench --protobuf pods_watch.pb --readers
//   tally-decode-bench --tile runtime/test/testdata/pods_watch.pb --events 5000 --readers

#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <vector>

#include "tally/codec/protobuf.hpp"
#include "tally/common/proto_coded_reader.hpp"
#include "tally/runtime/json_watch.hpp"
#include "tally/runtime/protobuf_watch.hpp"
#include "tally/state/watch_codec.hpp"

using namespace tally::runtime;
namespace proto = tally::proto;
using ShippedPodCodec = tally::state::WatchCodec<tally::codec::PodCodec>;  // what the informers run

// codec::PodCodec with its protobuf decode walking on `Reader`.
template <proto::WireReader Reader>
struct PodCodecOn : tally::codec::PodCodec {
  static tally::codec::Status fromProtobuf(std::string_view message, Object& out,
                                           tally::codec::ObjectMeta* meta = nullptr) {
    return tally::codec::decodePodProtobufOn<Reader>(message, out, meta);
  }
  static tally::codec::Result<Object> fromProtobuf(std::string_view message, tally::codec::ObjectMeta* meta = nullptr) {
    Object pod;
    if (auto read = fromProtobuf(message, pod, meta); !read) return std::move(read).error();
    return pod;
  }
};

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
  auto sink = [&](typename Decoder::Event&& ev) {
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
bool report(const char* name, const std::string& data, int repeat, double minSeconds) {
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

// A stream of `events` ADDED frames cycled from the recording's pod frames
// (ADDED and MODIFIED), then its first BOOKMARK frame.
std::string tiled(const std::string& recording, size_t events) {
  std::vector<std::string_view> pods;
  std::string_view bookmark;
  for (std::string_view rest(recording); rest.size() >= 4;) {
    const auto* p = reinterpret_cast<const unsigned char*>(rest.data());
    const size_t len = (size_t{p[0]} << 24) | (size_t{p[1]} << 16) | (size_t{p[2]} << 8) | size_t{p[3]};
    if (rest.size() - 4 < len) break;
    const std::string_view frame = rest.substr(0, 4 + len);
    auto split = detail::splitWatchEvent(frame.substr(4));
    if (split && (split->type == "ADDED" || split->type == "MODIFIED")) pods.push_back(frame);
    if (split && split->type == "BOOKMARK" && bookmark.empty()) bookmark = frame;
    rest.remove_prefix(4 + len);
  }
  std::string out;
  if (pods.empty()) return out;
  for (size_t i = 0; i < events; ++i) {
    // Every frame says ADDED, as a watch from resourceVersion 0 does: the
    // type field (WatchEvent field 1) is the frame's first.
    std::string_view frame = pods[i % pods.size()];
    auto split = detail::splitWatchEvent(frame.substr(4));
    if (split->type == "ADDED") {
      out.append(frame);
      continue;
    }
    const size_t typeEnd = static_cast<size_t>(split->type.data() + split->type.size() - frame.data());
    std::string body = std::string(
                           "\x0a\x05"
                           "ADDED",
                           7) +
                       std::string(frame.substr(typeEnd));
    const uint32_t len = static_cast<uint32_t>(body.size());
    out += static_cast<char>(len >> 24);
    out += static_cast<char>(len >> 16);
    out += static_cast<char>(len >> 8);
    out += static_cast<char>(len);
    out += body;
  }
  out.append(bookmark);
  return out;
}

// The pod messages of a stream, cut out as the watch decoder cuts them.
std::vector<std::string_view> podMessages(std::string_view stream) {
  std::vector<std::string_view> pods;
  while (stream.size() >= 4) {
    const auto* p = reinterpret_cast<const unsigned char*>(stream.data());
    const size_t len = (size_t{p[0]} << 24) | (size_t{p[1]} << 16) | (size_t{p[2]} << 8) | size_t{p[3]};
    if (stream.size() - 4 < len) break;
    auto split = detail::splitWatchEvent(stream.substr(4, len));
    if (split && split->type != "BOOKMARK" && split->type != "ERROR") pods.push_back(split->object);
    stream.remove_prefix(4 + len);
  }
  return pods;
}

template <proto::WireReader Reader>
Outcome decodePodsOnce(const std::vector<std::string_view>& pods) {
  Outcome o;
  const auto start = std::chrono::steady_clock::now();
  for (std::string_view message : pods) {
    tally::model::Pod pod;
    tally::codec::ObjectMeta meta;
    if (!tally::codec::decodePodProtobufOn<Reader>(message, pod, &meta)) {
      o.ok = false;
      break;
    }
    ++o.events;
    ++o.pods;
    o.containers += pod.containers.size();
  }
  o.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return o;
}

struct Best {
  Outcome outcome;
  int runs = 0;
  void add(const Outcome& o) {
    ++runs;
    if (outcome.seconds == 0 || o.seconds < outcome.seconds) outcome = o;
  }
};

void printReader(const char* what, const char* reader, const Best& best, size_t bytes) {
  std::printf("reader    %-7s %-16s events=%zu pods=%zu containers=%zu bytes=%zu seconds=%.5f MBps=%.1f runs=%d\n",
              what, reader, best.outcome.events, best.outcome.pods, best.outcome.containers, bytes,
              best.outcome.seconds, static_cast<double>(bytes) / best.outcome.seconds / 1e6, best.runs);
}

// The two readers on the same bytes, their runs alternated so that a
// neighbour's burst falls on both alike; best of at least `repeat` each, and
// of more until `minSeconds` of decoding has passed on each.
template <class RunShipped, class RunCoded>
bool sideBySide(const char* what, size_t bytes, int repeat, double minSeconds, RunShipped&& shipped, RunCoded&& coded) {
  constexpr int kMaxRuns = 2000;
  Best a, b;
  double totalA = 0, totalB = 0;
  while (a.runs < repeat || ((totalA < minSeconds || totalB < minSeconds) && a.runs < kMaxRuns)) {
    Outcome oa = shipped();
    Outcome ob = coded();
    if (!oa.ok || !ob.ok) {
      std::fprintf(stderr, "%s: a reader refused the stream (proto::Reader %s, CodedInputStream %s)\n", what,
                   oa.ok ? "ok" : "refused", ob.ok ? "ok" : "refused");
      return false;
    }
    if (oa.events != ob.events || oa.pods != ob.pods || oa.containers != ob.containers) {
      std::fprintf(stderr, "%s: the readers decoded different streams\n", what);
      return false;
    }
    totalA += oa.seconds;
    totalB += ob.seconds;
    a.add(oa);
    b.add(ob);
  }
  printReader(what, "proto::Reader", a, bytes);
  printReader(what, "CodedInputStream", b, bytes);
  std::printf("ratio reader %s: CodedInputStream/proto::Reader = %.2fx\n", what, b.outcome.seconds / a.outcome.seconds);
  return true;
}

bool compareReaders(const std::string& data, int repeat, double minSeconds) {
  bool ok = sideBySide(
      "stream", data.size(), repeat, minSeconds,
      [&] { return decodeOnce<ProtobufWatchDecoder<tally::state::WatchCodec<PodCodecOn<proto::Reader>>>>(data); },
      [&] { return decodeOnce<ProtobufWatchDecoder<tally::state::WatchCodec<PodCodecOn<proto::CodedReader>>>>(data); });
  const std::vector<std::string_view> pods = podMessages(data);
  size_t podBytes = 0;
  for (std::string_view message : pods) podBytes += message.size();
  ok = sideBySide(
           "pods", podBytes, repeat, minSeconds, [&] { return decodePodsOnce<proto::Reader>(pods); },
           [&] { return decodePodsOnce<proto::CodedReader>(pods); }) &&
       ok;
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Tally watch decode benchmark"};
  std::string json, protobuf, tile;
  size_t events = 5000;
  bool readers = false;
  int repeat = 5;
  double minSeconds = 0;
  app.add_option("--json", json);
  app.add_option("--protobuf", protobuf);
  app.add_option("--tile", tile, "a small protobuf recording whose pod frames make the protobuf stream")
      ->excludes("--protobuf");
  app.add_option("--events", events, "ADDED events of the --tile stream");
  app.add_flag("--readers", readers, "the protobuf pod decoders on proto::Reader and on CodedInputStream");
  app.add_option("--repeat", repeat, "at least this many runs per format (the best is reported)");
  app.add_option("--min-seconds", minSeconds, "and more runs until this much decoding time has passed");
  CLI11_PARSE(app, argc, argv);
  auto load = [](const std::string& path) {
    std::string data = readFile(path);
    if (data.empty()) std::fprintf(stderr, "%s: empty or missing\n", path.c_str());
    return data;
  };
  bool ok = true;
  if (!json.empty()) {
    const std::string data = load(json);
    ok = !data.empty() && report<JsonWatchDecoder<ShippedPodCodec>>("json", data, repeat, minSeconds) && ok;
  }
  std::string stream;
  if (!protobuf.empty()) stream = load(protobuf);
  if (!tile.empty()) {
    const std::string recording = load(tile);
    stream = tiled(recording, events);
    if (stream.empty()) std::fprintf(stderr, "%s: no pod frames to tile\n", tile.c_str());
  }
  if (!protobuf.empty() || !tile.empty()) {
    ok = !stream.empty() && report<ProtobufWatchDecoder<ShippedPodCodec>>("protobuf", stream, repeat, minSeconds) && ok;
    if (readers) ok = !stream.empty() && compareReaders(stream, repeat, minSeconds) && ok;
  }
  return ok ? 0 : 1;
}
