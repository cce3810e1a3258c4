#pragma once
// One decoded watch event and the result of decoding a LIST page.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tally/runtime/api_status.hpp"

namespace tally::runtime {

enum class EventType : uint8_t { kAdded, kModified, kDeleted, kBookmark, kError };

// "ADDED" | "MODIFIED" | "DELETED" | "BOOKMARK" | "ERROR"; the error quotes (up to 32 bytes of) the text.
Result<EventType> parseEventType(std::string_view s);
std::string_view eventTypeName(EventType t);

inline constexpr std::string_view kInitialEventsEndAnnotation = "k8s.io/initial-events-end";

template <class Obj>
struct WatchEvent {
  EventType type = EventType::kAdded;
  std::optional<Obj> object;      // ADDED, MODIFIED, DELETED
  std::string resourceVersion;    // BOOKMARK
  bool initialEventsEnd = false;  // BOOKMARK that ends watch-list's initial events
  ApiStatus status;               // ERROR
};

template <class Obj>
struct ListPage {
  std::vector<Obj> items;
  std::string resourceVersion;
  std::string continueToken;
};

}  // namespace tally::runtime
