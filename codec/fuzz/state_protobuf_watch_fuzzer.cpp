// libFuzzer target: arbitrary bytes as what the API server answers the state's
// informers in protobuf, for every kind they ask it of (the built-in kinds:
// state::kKinds' protobuf column): a watch stream of length-prefixed
// WatchEvent frames delivered in pieces whose size comes from the first input
// byte (runtime::ProtobufWatchDecoder, as Informer::pumpWith feeds it) and a
// LIST body (runtime::decodeProtobufList, as Informer::decodePage reads it),
// each through state::WatchCodec<Codec>, the adapter the informers decode
// with. Seeds: codec/fuzz/watch-protobuf-corpus (watch_seeds.py).

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <type_traits>

#include "tally/runtime/protobuf_watch.hpp"
#include "tally/state/kinds.hpp"
#include "tally/state/watch_codec.hpp"
#include "watch_fuzz.hpp"

using namespace tally;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* bytes, size_t size) {
  if (size == 0) return 0;
  const std::size_t piece = fuzz::pieceOf(bytes[0]);
  const std::string_view data(reinterpret_cast<const char*>(bytes + 1), size - 1);
  state::forEachKind([&](auto k) {
    constexpr model::Kind kind = decltype(k)::value;
    using Codec = typename state::KindCodec<kind>::type;
    if constexpr (!std::is_void_v<Codec>) {
      using C = state::WatchCodec<Codec>;
      if constexpr (runtime::ProtobufCodec<C>) {
        static_assert(state::kindInfo(kind).protobuf, "the informers ask protobuf of every kind that reads it");
        fuzz::feedStream<runtime::ProtobufWatchDecoder<C>, C>(data, piece);
        auto page = runtime::decodeProtobufList<C>(data);
        fuzz::refusedWithReason(page);
        if (page) {
          for (const auto& item : page->items) fuzz::store<C>(item);
        }
      }
    }
  });
  return 0;
}
