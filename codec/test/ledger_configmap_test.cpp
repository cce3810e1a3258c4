#include "tally/codec/ledger_configmap.hpp"

#include <gtest/gtest.h>

#include <string>

namespace tally::codec {
namespace {

// A record as a JSON string value (newlines escaped).
std::string recordJson(std::string_view id, std::string_view state) {
  std::string text = "apiVersion: operations.kube-dc.com/v1alpha1\\nkind: GPUReservationRecord\\nmetadata:\\n  id: ";
  text += id;
  text +=
      "\\nspec:\\n  organization: acme\\n  project: \\\"\\\"\\n  profileId: nvidia-h200-passthrough\\n"
      "  devices: 1\\n  state: ";
  text += state;
  text +=
      "\\n  requestedAt: \\\"2026-09-20T09:00:00Z\\\"\\n  startsAt: \\\"2026-10-01T00:00:00Z\\\"\\n"
      "  addonId: gpu-h200-reserved\\n  billingReference: OPS-1\\n";
  return "\"" + text + "\"";
}

TEST(LedgerConfigMap, EachDataKeyIsOneRecordNamedByItsKeyInKeyOrder) {
  std::string json = R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"ledger","namespace":"tally"},)"
                     R"("data":{"gpu-res-2.yaml":)" +
                     recordJson("gpu-res-2", "pending") + R"(,"gpu-res-1.yaml":)" + recordJson("gpu-res-1", "pending") +
                     R"(,"broken":"spec: [1"}})";
  auto ledger = decodeLedgerConfigMapText(json);
  ASSERT_TRUE(ledger) << ledger.error().describe();
  EXPECT_TRUE(ledger->loaded);
  ASSERT_EQ(ledger->records.size(), 2u) << (ledger->invalid.empty() ? "" : ledger->invalid[0].problems[0].message);
  EXPECT_EQ(ledger->records[0].id, "gpu-res-1");
  EXPECT_EQ(ledger->records[0].source, "gpu-res-1.yaml");
  EXPECT_EQ(ledger->records[1].source, "gpu-res-2.yaml");
  ASSERT_EQ(ledger->invalid.size(), 1u);
  EXPECT_EQ(ledger->invalid[0].source, "broken");
}

TEST(LedgerConfigMap, NoDataIsAnEmptyLoadedLedger) {
  auto ledger = decodeLedgerConfigMapText(R"({"kind":"ConfigMap","metadata":{"name":"ledger","namespace":"t"}})");
  ASSERT_TRUE(ledger) << ledger.error().describe();
  EXPECT_TRUE(ledger->loaded);
  EXPECT_TRUE(ledger->records.empty());
}

TEST(LedgerConfigMap, BadShapesAreErrors) {
  EXPECT_FALSE(decodeLedgerConfigMapText(R"({"metadata":{"name":"l"},"data":{"a":1}})"));
  EXPECT_FALSE(decodeLedgerConfigMapText(R"({"metadata":{"name":"l"},"binaryData":{"a":"AAAA"}})"));
  EXPECT_FALSE(decodeLedgerConfigMapText(R"({"data":{}})"));  // no metadata.name
  EXPECT_FALSE(decodeLedgerConfigMapText(R"({"metadata":{"name":"l"},"data":{})"));
  auto error = decodeLedgerConfigMapText(R"({"metadata":{"name":"l","namespace":"t"},"data":{"a":1}})");
  ASSERT_FALSE(error);
  EXPECT_NE(error.error().describe().find("t/l"), std::string::npos) << error.error().describe();
}

}  // namespace
}  // namespace tally::codec
