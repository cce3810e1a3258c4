// libFuzzer target: arbitrary bytes as what the API server answers the state's
// informers in JSON, for every kind they watch (state::kKinds with a codec,
// and the ledger ConfigMap): a watch stream delivered in pieces whose size
// comes from the first input byte (runtime::JsonWatchDecoder, as
// Informer::pumpWith feeds it) and a LIST body (runtime::decodeJsonList, as
// Informer::decodePage reads it), each through state::WatchCodec<Codec>, the
// adapter the informers decode with. Seeds: codec/fuzz/watch-json-corpus
// (watch_seeds.py).

#include <simdjson.h>

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <type_traits>

#include "tally/codec/ledger_configmap.hpp"
#include "tally/runtime/json_watch.hpp"
#include "tally/state/kinds.hpp"
#include "tally/state/watch_codec.hpp"
#include "watch_fuzz.hpp"

namespace {

using namespace tally;

template <class Codec>
void watchAndList(simdjson::ondemand::parser& parser, std::string_view data, std::size_t piece) {
  using C = state::WatchCodec<Codec>;
  fuzz::feedStream<runtime::JsonWatchDecoder<C>, C>(data, piece);
  auto page = runtime::decodeJsonList<C>(parser, data);
  fuzz::refusedWithReason(page);
  if (page) {
    for (const auto& item : page->items) fuzz::store<C>(item);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* bytes, size_t size) {
  if (size == 0) return 0;
  const std::size_t piece = fuzz::pieceOf(bytes[0]);
  const std::string_view data(reinterpret_cast<const char*>(bytes + 1), size - 1);
  simdjson::ondemand::parser parser;
  state::forEachKind([&](auto k) {
    using Codec = typename state::KindCodec<decltype(k)::value>::type;
    if constexpr (!std::is_void_v<Codec>) watchAndList<Codec>(parser, data, piece);
  });
  watchAndList<codec::LedgerConfigMapCodec>(parser, data, piece);  // Informers::LedgerSource
  return 0;
}
