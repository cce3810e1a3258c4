// libFuzzer target: arbitrary bytes as what the API server answers the state's
// informers in JSON, for each kind they watch (state::kKinds, the ledger's
// ConfigMap for Kind::Ledger): a watch stream delivered in pieces whose size
// comes from the first input byte (runtime::JsonWatchDecoder, as
// Informer::pumpWith feeds it) and a LIST body (runtime::decodeJsonList, as
// Informer::decodePage reads it), each through state::WatchCodec<Codec>, the
// adapter the informers decode with. The second byte picks the kind (one a
// run: the ledger's and billing plans' YAML is slow under the sanitizers).
// Seeds: codec/fuzz/watch-json-corpus (watch_seeds.py).

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

// The codec each kind's informer decodes with: the ledger has no API resource
// of its own, Informers::LedgerSource watches its ConfigMap.
template <model::Kind K>
using WatchedCodec = std::conditional_t<std::is_void_v<typename state::KindCodec<K>::type>, codec::LedgerConfigMapCodec,
                                        typename state::KindCodec<K>::type>;

template <class Codec>
void watchAndList(std::string_view data, std::size_t piece) {
  using C = state::WatchCodec<Codec>;
  fuzz::feedStream<runtime::JsonWatchDecoder<C>, C>(data, piece);
  simdjson::ondemand::parser parser;
  auto page = runtime::decodeJsonList<C>(parser, data);
  fuzz::refusedWithReason(page);
  if (page) {
    for (const auto& item : page->items) fuzz::store<C>(item);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* bytes, size_t size) {
  if (size < 2) return 0;
  const std::size_t piece = fuzz::pieceOf(bytes[0]);
  const std::size_t selected = bytes[1] % state::kKinds.size();
  const std::string_view data(reinterpret_cast<const char*>(bytes + 2), size - 2);
  state::forEachKind([&](auto k) {
    constexpr model::Kind kind = decltype(k)::value;
    static_assert(!std::is_void_v<typename state::KindCodec<kind>::type> || kind == model::Kind::Ledger,
                  "every kind but the ledger has an informer codec");
    if (static_cast<std::size_t>(kind) == selected) watchAndList<WatchedCodec<kind>>(data, piece);
  });
  return 0;
}
