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

Result<UsageCheckpoint> decodeUsageConfigMap(std::string_view json) {
  UsageCheckpoint cp;
  Metadata meta;
  std::string usage;
  std::optional<std::string> through;
  Status status = withJsonValue(json, "", [&](od::value root) -> Status {
    return forEachField(root, "", [&](std::string_view key, od::value field) -> Status {
      if (key == "metadata") return readMetadata(field, meta);
      if (key != "data") return {};
      return forEachField(field, key, [&](std::string_view dataKey, od::value entry) -> Status {
        if (dataKey == kUsageKey) return readString(entry, keyField(dataKey), usage);
        if (dataKey == kUsageThroughKey) return readString(entry, keyField(dataKey), through.emplace());
        return {};
      });
    });
  });
  if (auto done = finished(std::move(status), "ConfigMap", meta); !done) return std::move(done).error();
  cp.name = meta.name;
  cp.resourceVersion = meta.resourceVersion;
  if (through) {
    auto t = parseRfc3339(*through);
    if (!t)
      return inObject(fieldError("data.through", "'" + *through + "' is not an RFC 3339 time"), "ConfigMap", meta);
    cp.through = t->seconds;
  }
  auto buckets = decodeUsageLines(usage);
  if (!buckets) return inObject(std::move(buckets).error().under("data[usage.jsonl]"), "ConfigMap", meta);
  cp.buckets = std::move(buckets).value();
  return cp;
}

std::string usageConfigMapName(model::Timestamp t) {
  std::string day = formatRfc3339(model::dayOf(t)).substr(0, 10);  // YYYY-MM-DD
  day.erase(std::remove(day.begin(), day.end(), '-'), day.end());
  return "tally-usage-" + day;
}

}  // namespace tally::codec
