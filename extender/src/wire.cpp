#include "tally/extender/wire.hpp"

#include <array>
#include <bit>
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
    for (auto entry : object) {
      od::field member;
      if (!check(std::move(entry).get(member), path, "an object")) return false;
      std::string_view key;
      if (!check(member.unescaped_key().get(key), path, "an object")) return false;
      if (!f(key, member.value())) return false;
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
    for (auto entry : object) {
      od::field member;
      if (!check(std::move(entry).get(member), root_, "an object")) return false;
      std::string_view key;
      if (!check(member.unescaped_key().get(key), root_, "an object")) return false;
      if (!f(key, member.value())) return false;
      if (finished_) return true;
    }
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

void appendFailures(std::string& out, std::string_view name,
                    const std::vector<std::pair<std::string_view, std::string_view>>& failures) {
  appendJsonString(out, name);
  out += ":{";
  // Nodes that share a verdict share its message (the same bytes): each message
  // is escaped once and then copied from where it was first written.
  struct Written {
    const char* data = nullptr;
    std::size_t size = 0, offset = 0, length = 0;
  };
  std::array<Written, 16> written{};
  for (std::size_t i = 0; i < failures.size(); ++i) {
    if (i) out += ',';
    appendJsonString(out, failures[i].first);
    out += ':';
    const std::string_view message = failures[i].second;
    Written& w = written[(reinterpret_cast<std::uintptr_t>(message.data()) >> 4) & 15];
    if (w.data == message.data() && w.size == message.size()) {
      out.append(out, w.offset, w.length);
    } else {
      const std::size_t offset = out.size();
      appendJsonString(out, message);
      w = {message.data(), message.size(), offset, out.size() - offset};
    }
  }
  out += '}';
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
          for (auto entry : node) {
            od::field member;
            if (!r.check(std::move(entry).get(member), indexed(path, i), "a Node object")) return false;
            std::string_view k;
            if (!r.check(member.unescaped_key().get(k), indexed(path, i), "a Node object")) return false;
            if (!keyEquals(k, "metadata")) continue;
            std::string metaPath = indexed(path, i) + ".metadata";
            if (!r.forEachField(member.value(), metaPath, [&](std::string_view mk, od::value mv) {
                  return keyEquals(mk, "name") ? r.readString(mv, metaPath + ".name", name) : true;
                }))
              return false;
          }
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

std::string encode(const FilterResult& result) {
  std::string out;
  std::size_t estimate = 96 + result.error.size();
  for (auto n : result.passed) estimate += n.size() + 3;
  for (auto n : result.rawPassed) estimate += n.size() + 1;
  for (const auto& [n, m] : result.failed) estimate += n.size() + m.size() + 8;
  for (const auto& [n, m] : result.unresolvable) estimate += n.size() + m.size() + 8;
  out.reserve(estimate);
  out += '{';
  if (result.asNodeList) {
    out += "\"Nodes\":{\"metadata\":{},\"items\":[";
    for (std::size_t i = 0; i < result.rawPassed.size(); ++i) {
      if (i) out += ',';
      out += result.rawPassed[i];
    }
    out += "]},\"NodeNames\":null,";
  } else {
    out += "\"Nodes\":null,\"NodeNames\":[";
    // Names read as written need no escape (the service answers those in
    // one pass, verbs.cpp's filterResponse; this is the general path).
    for (std::size_t i = 0; i < result.passed.size(); ++i) {
      if (i) out += ',';
      if (result.plainNames) {
        out += '"';
        out += result.passed[i];
        out += '"';
      } else {
        appendJsonString(out, result.passed[i]);
      }
    }
    out += "],";
  }
  appendFailures(out, "FailedNodes", result.failed);
  out += ',';
  appendFailures(out, "FailedAndUnresolvableNodes", result.unresolvable);
  out += ",\"Error\":";
  appendJsonString(out, result.error);
  out += '}';
  return out;
}

std::string encode(const std::vector<HostPriority>& priorities, bool plainHosts) {
  std::string out;
  std::size_t size = 2;
  for (const auto& p : priorities) size += p.host.size() + 32;
  out.reserve(size);
  out += '[';
  bool first = true;
  for (std::size_t i = 0; i < priorities.size(); ++i) {
    if (!listedScore(priorities[i].score)) continue;
    if (!first) out += ',';
    first = false;
    if (plainHosts) {
      out += "{\"Host\":\"";
      out += priorities[i].host;
      out += "\",\"Score\":";
    } else {
      out += "{\"Host\":";
      appendJsonString(out, priorities[i].host);
      out += ",\"Score\":";
    }
    const std::int64_t score = priorities[i].score;
    if (score >= 0 && score <= 9)
      out += static_cast<char>('0' + score);
    else
      out += std::to_string(score);
    out += '}';
  }
  out += ']';
  return out;
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
