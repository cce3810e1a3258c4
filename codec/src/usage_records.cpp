#include "tally/codec/usage_records.hpp"

#include <algorithm>
#include <fmt/format.h>

#include "json_reader.hpp"
#include "metadata.hpp"
#include "tally/codec/json_text.hpp"
#include "tally/common/json.hpp"
#include "tally/common/rfc3339.hpp"

namespace tally::codec {

using namespace detail;

std::string usageLine(const model::UsageBucket& b) {
  JsonWriter w;
  w.beginObject()
      .field("type", "usage")
      .field("hour", formatRfc3339(b.hour))
      .field("kind", toString(b.holder.kind))
      .field("namespace", b.holder.ns)
      .field("name", b.holder.name)
      .field("uid", b.holder.uid)
      .field("class", b.holder.className)
      .field("resource", b.holder.resource)
      .field("units", b.holder.units)
      .field("unitSeconds", b.unitSeconds)
      .endObject();
  return w.str();
}

std::string windowLine(const model::BillingWindow& win) {
  JsonWriter w;
  w.beginObject()
      .field("type", "window")
      .field("id", win.id)
      .field("organization", win.organization)
      .field("project", win.project)
      .field("profileId", win.profileId)
      .field("addonId", win.addonId)
      .field("billingReference", win.billingReference)
      .field("state", model::toString(win.state))
      .field("devices", win.devices)
      .field("from", formatRfc3339(win.from))
      .field("until", formatRfc3339(win.until))
      .field("open", win.open)
      .field("deviceSeconds", win.deviceSeconds)
      .field("source", win.source)
      .endObject();
  return w.str();
}

std::string usageLines(const std::vector<model::UsageBucket>& buckets) {
  std::string out;
  for (const auto& b : buckets) out += usageLine(b) + "\n";
  return out;
}

namespace {

Status readTime(od::value value, std::string_view field, model::Timestamp& out) {
  std::string text;
  if (auto s = readString(value, field, text); !s) return s;
  auto t = parseRfc3339(text);
  if (!t) return fieldError(field, "'" + text + "' is not an RFC 3339 time");
  out = t->seconds;
  return {};
}

Status readInt(od::value value, std::string_view field, std::int64_t& out) {
  if (auto code = value.get_int64().get(out)) return jsonError(code, field, "a whole number");
  if (out < 0) return fieldError(field, "negative");
  return {};
}

Result<model::UsageBucket> decodeUsageLine(std::string_view line) {
  model::UsageBucket b;
  std::string type, kind;
  bool hour = false;
  Status status = withJsonValue(line, "", [&](od::value json) -> Status {
    return forEachField(json, "", [&](std::string_view key, od::value v) -> Status {
      if (key == "type") return readString(v, key, type);
      if (key == "hour") {
        hour = true;
        return readTime(v, key, b.hour);
      }
      if (key == "kind") return readString(v, key, kind);
      if (key == "namespace") return readString(v, key, b.holder.ns);
      if (key == "name") return readString(v, key, b.holder.name);
      if (key == "uid") return readString(v, key, b.holder.uid);
      if (key == "class") return readString(v, key, b.holder.className);
      if (key == "resource") return readString(v, key, b.holder.resource);
      if (key == "units") return readInt(v, key, b.holder.units);
      if (key == "unitSeconds") return readInt(v, key, b.unitSeconds);
      return {};
    });
  });
  if (!status) return std::move(status).error();
  if (type != "usage") return fieldError("type", "'" + type + "' is not a usage record");
  if (!hour) return fieldError("hour", "missing");
  auto k = model::parseHolderKind(kind);
  if (!k) return fieldError("kind", "'" + kind + "' is not Pod or GPUDevice");
  b.holder.kind = *k;
  if (b.holder.name.empty()) return fieldError("name", "missing");
  if (b.holder.resource.empty()) return fieldError("resource", "missing");
  return b;
}

}  // namespace

Result<std::vector<model::UsageBucket>> decodeUsageLines(std::string_view text) {
  std::vector<model::UsageBucket> out;
  std::size_t lineNo = 0;
  while (!text.empty()) {
    ++lineNo;
    const std::size_t end = text.find('\n');
    std::string_view line = text.substr(0, end);
    text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    auto bucket = decodeUsageLine(line);
    if (!bucket) {
      DecodeError e = std::move(bucket).error();
      e.item = fmt::format("usage line {}", lineNo);
      return e;
    }
    out.push_back(std::move(bucket).value());
  }
  return out;
}

namespace {

Status decodeCheckpoint(od::value root, UsageCheckpoint& cp) {
  Metadata meta;
  std::string usage;
  std::optional<std::string> through, sealed;
  Status status = forEachField(root, "", [&](std::string_view key, od::value field) -> Status {
    if (key == "metadata") return readMetadata(field, meta);
    if (key != "data") return {};
    return forEachField(field, key, [&](std::string_view dataKey, od::value entry) -> Status {
      if (dataKey == kUsageKey) return readString(entry, keyField(dataKey), usage);
      if (dataKey == kUsageThroughKey) return readString(entry, keyField(dataKey), through.emplace());
      if (dataKey == kUsageSealedKey) return readString(entry, keyField(dataKey), sealed.emplace());
      return {};
    });
  });
  if (auto done = finished(std::move(status), "ConfigMap", meta); !done) return done;
  cp.name = meta.name;
  cp.resourceVersion = meta.resourceVersion;
  auto named = parseUsageConfigMapName(meta.name);
  if (!named) {
    return inObject(fieldError("metadata.name", "not tally-usage-YYYYMMDD or tally-usage-YYYYMMDD-N"), "ConfigMap",
                    meta);
  }
  cp.day = named->day;
  cp.part = named->part;
  if (through) {
    auto t = parseRfc3339(*through);
    if (!t)
      return inObject(fieldError("data.through", "'" + *through + "' is not an RFC 3339 time"), "ConfigMap", meta);
    // The day's end itself is its own: a closed day is accrued through midnight.
    if (t->seconds < cp.day || t->seconds > cp.day + model::kSecondsPerDay) {
      return inObject(fieldError("data.through", "'" + *through + "' is outside the ConfigMap's day"), "ConfigMap",
                      meta);
    }
    cp.through = t->seconds;
  }
  if (sealed) {
    if (*sealed != "true")
      return inObject(fieldError("data.sealed", "'" + *sealed + "' is not true"), "ConfigMap", meta);
    cp.sealed = true;
  }
  auto buckets = decodeUsageLines(usage);
  if (!buckets) return inObject(std::move(buckets).error().under("data[usage.jsonl]"), "ConfigMap", meta);
  for (const auto& b : *buckets) {
    if (model::dayOf(b.hour) != cp.day) {
      return inObject(fieldError("data[usage.jsonl]", "a bucket of " + formatRfc3339(b.hour) + ", not of its day"),
                      "ConfigMap", meta);
    }
  }
  cp.bytes = usage.size();
  cp.buckets = std::move(buckets).value();
  return {};
}

}  // namespace

Result<UsageCheckpoint> decodeUsageConfigMap(std::string_view json) {
  UsageCheckpoint cp;
  Status status = withJsonValue(json, "", [&](od::value root) { return decodeCheckpoint(root, cp); });
  if (!status) return std::move(status).error();
  return cp;
}

Result<UsageCheckpointPage> decodeUsageConfigMapList(std::string_view json) {
  UsageCheckpointPage page;
  Status status = withJsonValue(json, "", [&](od::value root) -> Status {
    return forEachField(root, "", [&](std::string_view key, od::value field) -> Status {
      if (key == "metadata") {
        return forEachField(field, key, [&](std::string_view metaKey, od::value entry) -> Status {
          if (metaKey == "continue") return readString(entry, metaKey, page.continueToken);
          return {};
        });
      }
      if (key != "items") return {};
      return forEachElement(field, key, [&](std::size_t index, od::value item) -> Status {
        Status decoded = decodeCheckpoint(item, page.items.emplace_back());
        if (!decoded) return std::move(decoded).error().within(fmt::format("items[{}]", index));
        return {};
      });
    });
  });
  if (!status) return std::move(status).error();
  return page;
}

std::string usageDayLabel(model::Timestamp t) {
  std::string day = formatRfc3339(model::dayOf(t)).substr(0, 10);  // YYYY-MM-DD
  day.erase(std::remove(day.begin(), day.end(), '-'), day.end());
  return day;
}

std::string usageConfigMapName(model::Timestamp t, int part) {
  std::string name = "tally-usage-" + usageDayLabel(t);
  if (part > 0) name += "-" + std::to_string(part);
  return name;
}

std::optional<UsagePartName> parseUsageConfigMapName(std::string_view name) {
  constexpr std::string_view kPrefix = "tally-usage-";
  if (!name.starts_with(kPrefix)) return std::nullopt;
  name.remove_prefix(kPrefix.size());
  const std::string_view day = name.substr(0, 8);
  if (day.size() != 8 || day.find_first_not_of("0123456789") != std::string_view::npos) return std::nullopt;
  auto t = parseRfc3339(fmt::format("{}-{}-{}T00:00:00Z", day.substr(0, 4), day.substr(4, 2), day.substr(6, 2)));
  if (!t || usageDayLabel(t->seconds) != day) return std::nullopt;  // 20270230 is no day
  UsagePartName out{t->seconds, 0};
  std::string_view rest = name.substr(8);
  if (rest.empty()) return out;
  if (rest.size() < 2 || rest.size() > 5 || rest[0] != '-' || rest[1] == '0' ||
      rest.substr(1).find_first_not_of("0123456789") != std::string_view::npos) {
    return std::nullopt;
  }
  out.part = std::stoi(std::string(rest.substr(1)));
  return out;
}

std::string usageDaysSelector(model::Timestamp first, model::Timestamp last) {
  // YYYYMMDD orders as an integer: the day before `first` and the one after `last` bound it.
  const long from = std::stol(usageDayLabel(first)) - 1;
  const long to = std::stol(usageDayLabel(last)) + 1;
  return fmt::format("{0}>{1},{0}<{2}", kUsageDayLabel, from, to);
}

}  // namespace tally::codec
