#include "tally/extender/wire.hpp"

#include <array>
#include <algorithm>
#include <bit>
#include <charconv>
#include <cstdint>
#include <cstring>

#include <simdjson.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "tally/codec/objects.hpp"
#include "tally/common/json.hpp"

namespace tally::extender::wire {
namespace {

namespace od = simdjson::ondemand;

// Reads one request body; the first error stops reading and names its path.
class Reader {
 public:
  explicit Reader(std::string_view root) : root_(root) {}

  bool failed() const { return !errors_.empty(); }
  // Called by a member's reader that has read and checked the rest of the
  // body itself: document() stops there, successfully.
  bool finish() {
    finished_ = true;
    return true;
  }
  std::vector<BadRequest> take() { return std::move(errors_); }

  bool fail(std::string kind, std::string_view path, std::string message) {
    if (errors_.empty()) errors_.push_back({std::move(kind), std::string(path) + ": " + std::move(message)});
    return false;
  }
  bool check(simdjson::error_code code, std::string_view path, std::string_view expected) {
    if (!code) return true;
    if (code == simdjson::INCORRECT_TYPE) return fail("schema", path, "expected " + std::string(expected));
    return fail("json", path, std::string("malformed JSON (") + simdjson::error_message(code) + ")");
  }

  // f(key, value) for every member; null counts as an empty object.
  template <class F>
  bool forEachField(od::value value, std::string_view path, F&& f) {
    bool null = false;
    if (!check(value.is_null().get(null), path, "an object")) return false;
    if (null) return true;
    od::object object;
    if (!check(value.get_object().get(object), path, "an object")) return false;
    return forEachMember(object, path, "an object", f);
  }

  // f(key, value) for every member of `object` until f says false or the
  // body's reader has finished; an error names `path` and what was `expected`.
  template <class F>
  bool forEachMember(od::object& object, std::string_view path, std::string_view expected, F&& f) {
    for (auto entry : object) {
      od::field member;
      if (!check(std::move(entry).get(member), path, expected)) return false;
      std::string_view key;
      if (!check(member.unescaped_key().get(key), path, expected)) return false;
      if (!f(key, member.value())) return false;
      if (finished_) return true;
    }
    return true;
  }

  template <class F>
  bool forEachElement(od::value value, std::string_view path, F&& f) {
    bool null = false;
    if (!check(value.is_null().get(null), path, "an array")) return false;
    if (null) return true;
    od::array array;
    if (!check(value.get_array().get(array), path, "an array")) return false;
    std::size_t index = 0;
    for (auto entry : array) {
      od::value element;
      if (!check(std::move(entry).get(element), path, "an array")) return false;
      if (!f(index++, element)) return false;
    }
    return true;
  }

  bool readString(od::value value, std::string_view path, std::string& out) {
    bool null = false;
    if (!check(value.is_null().get(null), path, "a string")) return false;
    if (null) return true;
    std::string_view text;
    if (!check(value.get_string().get(text), path, "a string")) return false;
    out.assign(text);
    return true;
  }

  bool readInteger(od::value value, std::string_view path, std::int64_t& out) {
    bool null = false;
    if (!check(value.is_null().get(null), path, "an integer")) return false;
    if (null) return true;
    return check(value.get_int64().get(out), path, "an integer");
  }

  bool readPod(od::value value, std::string_view path, model::Pod& pod, bool& seen) {
    bool null = false;
    if (!check(value.is_null().get(null), path, "a Pod object")) return false;
    if (null) return true;
    auto decoded = codec::decodePod(value);
    if (!decoded) return fail("pod", path, decoded.error().describe());
    pod = std::move(decoded).value();
    seen = true;
    return true;
  }

  // A v1 object's metadata.<field> (keys matched case-insensitively, as Go does).
  bool readMetadataField(od::value value, std::string_view path, std::string_view field, std::string& out) {
    return forEachField(value, path, [&](std::string_view key, od::value member) {
      if (!keyEquals(key, "metadata")) return true;
      std::string metaPath = std::string(path) + ".metadata";
      return forEachField(member, metaPath, [&](std::string_view metaKey, od::value metaValue) {
        if (!keyEquals(metaKey, field)) return true;
        return readString(metaValue, metaPath + "." + std::string(field), out);
      });
    });
  }

  // Parses `body` as one JSON object and calls f(key, value) per member.
  template <class F>
  bool document(std::string& body, F&& f) {
    thread_local od::parser parser;
    if (body.capacity() < body.size() + simdjson::SIMDJSON_PADDING)
      body.reserve(body.size() + simdjson::SIMDJSON_PADDING);
    od::document doc;
    if (!check(parser.iterate(body.data(), body.size(), body.capacity()).get(doc), root_, "an object")) return false;
    od::object object;
    if (!check(doc.get_object().get(object), root_, "an object")) return false;
    if (!forEachMember(object, root_, "an object", f)) return false;
    if (finished_) return true;
    if (doc.current_location().error() != simdjson::OUT_OF_BOUNDS) {
      return fail("json", root_, "unexpected content after the object");
    }
    return true;
  }

  std::string path(std::string_view field) const { return std::string(root_) + "." + std::string(field); }

 private:
  std::string_view root_;
  std::vector<BadRequest> errors_;
  bool finished_ = false;
};

std::string indexed(std::string_view path, std::size_t i) { return std::string(path) + "[" + std::to_string(i) + "]"; }

bool readVictims(Reader& r, od::value value, const std::string& path, bool meta,
                 std::vector<std::pair<std::string, MetaVictims>>& out) {
  return r.forEachField(value, path, [&](std::string_view node, od::value victims) {
    std::string nodePath = path + "[" + std::string(node) + "]";
    auto& entry = out.emplace_back(std::string(node), MetaVictims{}).second;
    return r.forEachField(victims, nodePath, [&](std::string_view key, od::value member) {
      if (keyEquals(key, "NumPDBViolations")) {
        return r.readInteger(member, nodePath + ".NumPDBViolations", entry.numPdbViolations);
      }
      if (!keyEquals(key, "Pods")) return true;
      return r.forEachElement(member, nodePath + ".Pods", [&](std::size_t i, od::value pod) {
        std::string uid;
        bool ok = meta ? r.forEachField(pod, indexed(nodePath + ".Pods", i),
                                        [&](std::string_view k, od::value v) {
                                          return keyEquals(k, "UID")
                                                     ? r.readString(v, indexed(nodePath + ".Pods", i) + ".UID", uid)
                                                     : true;
                                        })
                       : r.readMetadataField(pod, indexed(nodePath + ".Pods", i), "uid", uid);
        if (ok && !uid.empty()) entry.podUids.push_back(std::move(uid));
        return ok;
      });
    });
  });
}

}  // namespace

bool keyEquals(std::string_view key, std::string_view goName) {
  if (key.size() != goName.size()) return false;
  for (std::size_t i = 0; i < key.size(); ++i) {
    char a = key[i], b = goName[i];
    if (a >= 'A' && a <= 'Z') a = static_cast<char>(a - 'A' + 'a');
    if (b >= 'A' && b <= 'Z') b = static_cast<char>(b - 'A' + 'a');
    if (a != b) return false;
  }
  return true;
}

namespace {

// JSON's insignificant whitespace.
bool isJsonSpace(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

#if defined(__SSE2__)
// Over the 64 bytes at p: which are '"', and which no plain name holds ('\\'
// and control characters).
struct ByteMasks {
  std::uint64_t quote = 0, bad = 0;
};
inline ByteMasks byteMasks64(const char* p) {
  const __m128i quote = _mm_set1_epi8('"'), backslash = _mm_set1_epi8('\\'), lastControl = _mm_set1_epi8(0x1f);
  ByteMasks m;
  for (int k = 0; k < 4; ++k) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16 * k));
    const __m128i control = _mm_cmpeq_epi8(_mm_min_epu8(v, lastControl), v);  // v <= 0x1f
    const auto q = static_cast<std::uint32_t>(_mm_movemask_epi8(_mm_cmpeq_epi8(v, quote)));
    const auto b = static_cast<std::uint32_t>(_mm_movemask_epi8(_mm_or_si128(_mm_cmpeq_epi8(v, backslash), control)));
    m.quote |= static_cast<std::uint64_t>(q) << (16 * k);
    m.bad |= static_cast<std::uint64_t>(b) << (16 * k);
  }
  return m;
}

// Names in kube-scheduler's compact form ("a","b",...]) from the '"' at p,
// cut at the quotes of 64-byte windows. Returns the '"' of the first element
// it leaves to the byte-wise scan (any other spacing, an escape, a name
// longer than a window, the last 66 bytes), or, with `closed`, the position
// after the array's ']'.
const char* scanCompactRun(const char* p, const char* end, std::vector<std::string_view>& names, bool& closed) {
  while (end - p >= 66) {  // the window and the two bytes after a closing quote at its end
    const ByteMasks m = byteMasks64(p);
    std::uint64_t quotes = m.quote & ~std::uint64_t{1};  // after the opening quote at bit 0
    unsigned open = 0;
    for (;;) {
      if (quotes == 0) break;  // the name runs past the window
      const auto close = static_cast<unsigned>(std::countr_zero(quotes));
      const std::uint64_t inside = ((std::uint64_t{1} << close) - 1) & ~((std::uint64_t{2} << open) - 1);
      if (m.bad & inside) return p + open;
      const char after = p[close + 1];
      if (after == ',' && p[close + 2] == '"') {
        names.emplace_back(p + open + 1, close - open - 1);
        quotes &= quotes - 1;  // the closing quote
        quotes &= quotes - 1;  // the next opening one, at close + 2
        open = close + 2;
        continue;
      }
      if (after != ']') return p + open;
      names.emplace_back(p + open + 1, close - open - 1);
      closed = true;
      return p + close + 2;
    }
    if (open == 0) return p;  // longer than a window
    p += open;
  }
  return p;
}
#endif

// The NodeNames array as the scheduler writes it, from its '[' at `p`:
// strings that need no escape, separated by commas and whitespace. Appends
// views of the names and returns the position after the closing ']';
// nullptr (leaving partial output) at anything else.
const char* scanPlainNames(const char* p, const char* end, std::vector<std::string_view>& names) {
  using tally::detail::isJsonSpecial;
  using tally::detail::jsonSpecialBytes;
  auto skipSpace = [&] {
    while (p < end && isJsonSpace(*p)) ++p;
  };
  if (p == end || *p++ != '[') return nullptr;
  skipSpace();
  if (p < end && *p == ']') return p + 1;
  while (p < end) {
#if defined(__SSE2__)
    if (*p == '"' && end - p >= 66) {
      bool closed = false;
      p = scanCompactRun(p, end, names, closed);
      if (closed) return p;
    }
#endif
    if (*p != '"') return nullptr;
    // The first byte that is '"', '\\' or a control character, eight at a time:
    // the closing quote if the name needs no escape.
    const char* q = p + 1;
    for (;;) {
      if (end - q < 8) {
        while (q < end && !isJsonSpecial(static_cast<unsigned char>(*q))) ++q;
        break;
      }
      std::uint64_t w;
      std::memcpy(&w, q, 8);
      if (const std::uint64_t flags = jsonSpecialBytes(w)) {
        if constexpr (std::endian::native == std::endian::little) {
          // Flags can only be wrong above a real one: the lowest is real.
          q += std::countr_zero(flags) / 8;
        } else {
          while (!isJsonSpecial(static_cast<unsigned char>(*q))) ++q;
        }
        break;
      }
      q += 8;
    }
    if (q == end || *q != '"') return nullptr;  // an escape, a control character or no closing quote
    names.emplace_back(p + 1, static_cast<std::size_t>(q - p - 1));
    p = q + 1;
    if (p + 1 < end && *p == ',' && p[1] == '"') {  // the scheduler's compact form
      ++p;
      continue;
    }
    skipSpace();
    if (p < end && *p == ',') {
      ++p;
      skipSpace();
      continue;
    }
    return p < end && *p == ']' ? p + 1 : nullptr;
  }
  return nullptr;
}

// Whether [p, end) is what may follow the last member of the top-level
// object: its closing brace between whitespace.
bool onlyTheClosingBrace(const char* p, const char* end) {
  while (p < end && isJsonSpace(*p)) ++p;
  if (p == end || *p++ != '}') return false;
  while (p < end && isJsonSpace(*p)) ++p;
  return p == end;
}

// NodeNames element by element from the array's text (parsed again on its own):
// names are unescaped into `args.ownedNames`; null reads as an empty name (no
// node has it, so it fails as unknown).
bool readNamesCarefully(Reader& r, std::string_view text, const std::string& path, ExtenderArgs& args) {
  thread_local od::parser parser;
  // Inside an object, so that the array is an ordinary (non-root) value.
  simdjson::padded_string padded("{\"a\":" + std::string(text) + "}");
  od::document doc;
  if (!r.check(parser.iterate(padded).get(doc), path, "an array")) return false;
  od::object object;
  if (!r.check(doc.get_object().get(object), path, "an array")) return false;
  od::value value;
  if (!r.check(object.find_field("a").get(value), path, "an array")) return false;
  return r.forEachElement(value, path, [&](std::size_t i, od::value name) {
    std::string owned;
    if (!r.readString(name, indexed(path, i), owned)) return false;
    if (needsJsonEscape(owned)) args.plainNames = false;
    args.nodeNames.push_back(args.ownedNames.emplace_back(std::move(owned)));
    return true;
  });
}

}  // namespace

Parsed<ExtenderArgs> parseExtenderArgs(std::string& body) {
  Parsed<ExtenderArgs> out;
  Reader r("ExtenderArgs");
  bool seenPod = false;
  bool seenNames = false;
  std::deque<std::string> listed;  // from Nodes.items
  r.document(body, [&](std::string_view key, od::value value) {
    if (keyEquals(key, "Pod")) return r.readPod(value, r.path("Pod"), out.value.pod, seenPod);
    if (keyEquals(key, "NodeNames")) {
      std::string path = r.path("NodeNames");
      bool null = false;
      if (!r.check(value.is_null().get(null), path, "an array")) return false;
      if (null) return true;
      seenNames = true;
      out.value.nodeNames.clear();
      out.value.nodeNames.reserve(std::min<std::size_t>(body.size() / 8, 1u << 20));
      // kube-scheduler writes NodeNames last (Go writes fields in declaration
      // order): when the array ends the body, read it here and stop, without
      // walking its thousands of elements through the parser first.
      const char* at = value.raw_json_token().data();
      const char* bodyEnd = body.data() + body.size();
      const char* after = scanPlainNames(at, bodyEnd, out.value.nodeNames);
      if (after && onlyTheClosingBrace(after, bodyEnd)) return r.finish();
      // More follows: the parser skips the array to go on from there.
      od::array array;
      if (!r.check(value.get_array().get(array), path, "an array")) return false;
      std::string_view text;
      if (!r.check(array.raw_json().get(text), path, "an array")) return false;
      if (after) return true;  // the names were read above
      // Escapes, null, the wrong type or odd spacing: element by element, with
      // errors that name the element.
      out.value.nodeNames.clear();
      return readNamesCarefully(r, text, path, out.value);
    }
    if (keyEquals(key, "Nodes")) {
      bool null = false;
      if (!r.check(value.is_null().get(null), r.path("Nodes"), "a NodeList object")) return false;
      if (null) return true;
      out.value.fromNodeList = true;
      out.value.rawNodes.clear();
      listed.clear();
      return r.forEachField(value, r.path("Nodes"), [&](std::string_view listKey, od::value items) {
        if (!keyEquals(listKey, "items")) return true;
        std::string path = r.path("Nodes.items");
        return r.forEachElement(items, path, [&](std::size_t i, od::value item) {
          od::object node;
          if (!r.check(item.get_object().get(node), indexed(path, i), "a Node object")) return false;
          std::string_view raw;
          if (!r.check(node.raw_json().get(raw), indexed(path, i), "a Node object")) return false;
          if (!r.check(node.reset().error(), indexed(path, i), "a Node object")) return false;
          std::string name;
          // Only metadata.name is read; simdjson skips every other field unparsed.
          if (!r.forEachMember(node, indexed(path, i), "a Node object", [&](std::string_view k, od::value member) {
                if (!keyEquals(k, "metadata")) return true;
                std::string metaPath = indexed(path, i) + ".metadata";
                return r.forEachField(member, metaPath, [&](std::string_view mk, od::value mv) {
                  return keyEquals(mk, "name") ? r.readString(mv, metaPath + ".name", name) : true;
                });
              }))
            return false;
          if (name.empty()) return r.fail("schema", indexed(path, i) + ".metadata.name", "missing");
          listed.push_back(std::move(name));
          out.value.rawNodes.push_back(raw);
          return true;
        });
      });
    }
    return true;
  });
  if (!r.failed() && !seenPod) r.fail("missing", "ExtenderArgs.Pod", "missing");
  // NodeNames wins when both are sent (the scheduler sends one of them).
  if (!seenNames && out.value.fromNodeList) {
    out.value.ownedNames = std::move(listed);
    out.value.nodeNames.assign(out.value.ownedNames.begin(), out.value.ownedNames.end());
    out.value.plainNames = false;
  } else if (seenNames) {
    out.value.fromNodeList = false;
    out.value.rawNodes.clear();
  }
  out.errors = r.take();
  return out;
}

Parsed<PreemptionArgs> parsePreemptionArgs(std::string& body) {
  Parsed<PreemptionArgs> out;
  Reader r("ExtenderPreemptionArgs");
  bool seenPod = false;
  bool meta = false;
  std::vector<std::pair<std::string, MetaVictims>> full;
  r.document(body, [&](std::string_view key, od::value value) {
    if (keyEquals(key, "Pod")) return r.readPod(value, r.path("Pod"), out.value.pod, seenPod);
    if (keyEquals(key, "NodeNameToMetaVictims")) {
      bool null = false;
      if (!r.check(value.is_null().get(null), r.path("NodeNameToMetaVictims"), "an object")) return false;
      if (null) return true;
      meta = true;
      out.value.victims.clear();
      return readVictims(r, value, r.path("NodeNameToMetaVictims"), true, out.value.victims);
    }
    if (keyEquals(key, "NodeNameToVictims")) {
      full.clear();
      return readVictims(r, value, r.path("NodeNameToVictims"), false, full);
    }
    return true;
  });
  if (!r.failed() && !seenPod) r.fail("missing", "ExtenderPreemptionArgs.Pod", "missing");
  // The meta form wins when both are sent (it is what a nodeCacheCapable extender gets).
  if (!meta) out.value.victims = std::move(full);
  out.errors = r.take();
  return out;
}

Parsed<BindingArgs> parseBindingArgs(std::string& body) {
  Parsed<BindingArgs> out;
  Reader r("ExtenderBindingArgs");
  r.document(body, [&](std::string_view key, od::value value) {
    if (keyEquals(key, "PodName")) return r.readString(value, r.path("PodName"), out.value.podName);
    if (keyEquals(key, "PodNamespace")) return r.readString(value, r.path("PodNamespace"), out.value.podNamespace);
    if (keyEquals(key, "PodUID")) return r.readString(value, r.path("PodUID"), out.value.podUid);
    if (keyEquals(key, "Node")) return r.readString(value, r.path("Node"), out.value.node);
    return true;
  });
  if (!r.failed()) {
    if (out.value.podName.empty())
      r.fail("missing", "ExtenderBindingArgs.PodName", "missing");
    else if (out.value.node.empty())
      r.fail("missing", "ExtenderBindingArgs.Node", "missing");
  }
  out.errors = r.take();
  return out;
}

namespace {

constexpr std::string_view kNamesHead = "{\"Nodes\":null,\"NodeNames\":[";
constexpr std::string_view kNodeListHead = "{\"Nodes\":{\"metadata\":{},\"items\":[";

// The messages of a FilterResult already handed to the writer, by where their
// bytes are: nodes that share a verdict point at the same message.
class WrittenMessages {
 public:
  explicit WrittenMessages(FilterResultWriter& writer) : writer_(writer) {}
  FilterResultWriter::Message of(std::string_view message) {
    Entry& e = entries_[(reinterpret_cast<std::uintptr_t>(message.data()) >> 4) & 15];
    if (e.data != message.data() || e.size != message.size())
      e = {message.data(), message.size(), writer_.message(message)};
    return e.written;
  }

 private:
  struct Entry {
    const char* data = nullptr;
    std::size_t size = 0;
    FilterResultWriter::Message written = 0;
  };
  FilterResultWriter& writer_;
  std::array<Entry, 16> entries_{};
};

}  // namespace

FilterResultWriter::FilterResultWriter(bool plainNames, bool asNodeList)
    : plainNames_(plainNames), asNodeList_(asNodeList) {
  thread_local Scratch perThread;
  if (perThread.busy) {
    own_ = std::make_unique<Scratch>();
    scratch_ = own_.get();
  } else {
    scratch_ = &perThread;
  }
  scratch_->busy = true;
  scratch_->failed.clear();
  scratch_->unresolvable.clear();
  scratch_->messages = 0;
  out_ = asNodeList ? kNodeListHead : kNamesHead;
  at_ = end_ = first_ = out_.data() + out_.size();
}

FilterResultWriter::~FilterResultWriter() { scratch_->busy = false; }

void FilterResultWriter::room(std::size_t bytes) {
  const auto used = static_cast<std::size_t>(at_ - out_.data());
  if (out_.size() - used >= bytes) return;
  const auto head = static_cast<std::size_t>(first_ - out_.data());
  out_.resize(std::max(used + bytes, 2 * out_.size()));
  at_ = out_.data() + used;
  end_ = out_.data() + out_.size();
  first_ = out_.data() + head;
}

void FilterResultWriter::reserveFor(const std::vector<std::string_view>& entries) {
  std::size_t bytes = 0;
  for (std::string_view e : entries) bytes += e.size() + 3;
  room(bytes);
}

void FilterResultWriter::passEscaped(std::string_view name) {
  if (plainNames_) {  // out of room
    room(name.size() + 3);
    return pass(name);
  }
  const auto head = static_cast<std::size_t>(first_ - out_.data());
  out_.resize(static_cast<std::size_t>(at_ - out_.data()));
  if (out_.size() != head) out_ += ',';
  appendJsonString(out_, name);
  at_ = end_ = out_.data() + out_.size();
  first_ = out_.data() + head;
}

void FilterResultWriter::passNode(std::string_view rawNode) {
  room(rawNode.size() + 1);
  if (at_ != first_) *at_++ = ',';
  std::memcpy(at_, rawNode.data(), rawNode.size());
  at_ += rawNode.size();
}

FilterResultWriter::Message FilterResultWriter::message(std::string_view text) {
  const Message m = scratch_->messages++;
  if (m == scratch_->literals.size()) scratch_->literals.emplace_back();
  std::string& literal = scratch_->literals[m];
  literal.assign(1, ':');
  appendJsonString(literal, text);
  return m;
}

void FilterResultWriter::putEscapedFailure(std::string& to, std::string_view name, const std::string& literal) {
  if (!to.empty()) to += ',';
  appendJsonString(to, name);
  to += literal;
}

std::string FilterResultWriter::finish(std::string_view error) && {
  out_.resize(static_cast<std::size_t>(at_ - out_.data()));
  out_.reserve(out_.size() + scratch_->failed.size() + scratch_->unresolvable.size() + error.size() + 80);
  out_ += asNodeList_ ? "]},\"NodeNames\":null," : "],";
  out_ += "\"FailedNodes\":{";
  out_ += scratch_->failed;
  out_ += "},\"FailedAndUnresolvableNodes\":{";
  out_ += scratch_->unresolvable;
  out_ += "},\"Error\":";
  appendJsonString(out_, error);
  out_ += '}';
  at_ = end_ = first_ = nullptr;
  return std::move(out_);
}

std::string encode(const FilterResult& result) {
  // plainNames speaks for `passed` only: a failed node's name is escaped unless it needs none.
  auto plain = [](const auto& failures) {
    return std::none_of(failures.begin(), failures.end(), [](const auto& f) { return needsJsonEscape(f.first); });
  };
  FilterResultWriter writer(result.plainNames && plain(result.failed) && plain(result.unresolvable), result.asNodeList);
  if (result.asNodeList) {
    writer.reserveFor(result.rawPassed);
    for (std::string_view node : result.rawPassed) writer.passNode(node);
  } else {
    writer.reserveFor(result.passed);
    for (std::string_view name : result.passed) writer.pass(name);
  }
  WrittenMessages written(writer);
  for (const auto& [name, message] : result.failed) writer.fail(name, written.of(message));
  for (const auto& [name, message] : result.unresolvable) writer.failForGood(name, written.of(message));
  return std::move(writer).finish(result.error);
}

namespace {

constexpr std::string_view kHost = "{\"Host\":\"", kScore = "\",\"Score\":";
// A HostPriority entry but its host, scored 0..10, at the most: ',' kHost kScore "10" '}'.
constexpr std::size_t kEntryBytes = 1 + kHost.size() + kScore.size() + 3;

// Writes the entry of a host that needs no escape, scored 0..10, at `d`; returns its end.
inline char* putPlainEntry(char* d, bool comma, std::string_view host, std::int64_t score) {
  if (comma) *d++ = ',';
  std::memcpy(d, kHost.data(), kHost.size());
  d += kHost.size();
  detail::copyShort(d, host.data(), host.size());
  d += host.size();
  std::memcpy(d, kScore.data(), kScore.size());
  d += kScore.size();
  if (score == 10) {
    *d++ = '1';
    *d++ = '0';
  } else {
    *d++ = static_cast<char>('0' + score);
  }
  *d++ = '}';
  return d;
}

}  // namespace

HostPriorityWriter::HostPriorityWriter(bool plainHosts) : out_("["), plainHosts_(plainHosts) {}

void HostPriorityWriter::add(std::string_view host, std::int64_t score) {
  if (!listedScore(score)) return;
  if (plainHosts_ && score >= 0 && score <= 10) {
    if (out_.size() - used_ < host.size() + kEntryBytes) {
      out_.resize(std::max(used_ + host.size() + kEntryBytes, 2 * out_.size()));
    }
    used_ = static_cast<std::size_t>(putPlainEntry(out_.data() + used_, used_ > 1, host, score) - out_.data());
    return;
  }
  out_.resize(used_);
  if (used_ > 1) out_ += ',';
  out_ += "{\"Host\":";
  appendJsonString(out_, host);
  out_ += ",\"Score\":";
  std::array<char, 20> digits;
  out_.append(digits.data(), std::to_chars(digits.data(), digits.data() + digits.size(), score).ptr);
  out_ += '}';
  used_ = out_.size();
}

void HostPriorityWriter::addAll(const std::vector<std::string_view>& hosts, const std::vector<int>& scores) {
  const std::size_t n = std::min(hosts.size(), scores.size());
  std::size_t i = 0;
  if (plainHosts_) {
    std::size_t bytes = used_ + 1;
    for (std::size_t k = 0; k < n; ++k) bytes += hosts[k].size() + kEntryBytes;
    if (out_.size() < bytes) out_.resize(bytes);
    char* d = out_.data() + used_;
    char* const first = out_.data() + 1;
    for (; i < n; ++i) {
      const int score = scores[i];
      if (!listedScore(score)) continue;
      if (score < 0 || score > 10) break;  // the rest entry by entry
      d = putPlainEntry(d, d != first, hosts[i], score);
    }
    used_ = static_cast<std::size_t>(d - out_.data());
  }
  for (; i < n; ++i) add(hosts[i], scores[i]);
}

std::string HostPriorityWriter::finish() && {
  out_.resize(used_);
  out_ += ']';
  return std::move(out_);
}

std::string encode(const std::vector<HostPriority>& priorities, bool plainHosts) {
  HostPriorityWriter writer(plainHosts);
  for (const HostPriority& p : priorities) writer.add(p.host, p.score);
  return std::move(writer).finish();
}

std::string encode(const PreemptionResult& result) {
  std::string out = "{\"NodeNameToMetaVictims\":{";
  for (std::size_t i = 0; i < result.victims.size(); ++i) {
    const auto& [node, v] = result.victims[i];
    if (i) out += ',';
    appendJsonString(out, node);
    out += ":{\"Pods\":[";
    for (std::size_t j = 0; j < v.podUids.size(); ++j) {
      if (j) out += ',';
      out += "{\"UID\":";
      appendJsonString(out, v.podUids[j]);
      out += '}';
    }
    out += "],\"NumPDBViolations\":" + std::to_string(v.numPdbViolations) + "}";
  }
  out += "}}";
  return out;
}

std::string encodeError(std::string_view error) {
  std::string out = "{\"Error\":";
  appendJsonString(out, error);
  out += '}';
  return out;
}

}  // namespace tally::extender::wire
