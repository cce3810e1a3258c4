#pragma once
// The VirtualMachineInstance mutating webhook (SPEC 3.6, 5; the VM door).
// A VMI names held GPUDevices (annotation gpu.tally.dev/devices) and device
// templates (gpu.tally.dev/device-templates: [{class, count}]). At its CREATE:
//
//  1. every refusal check runs on this replica's snapshot before any write
//     (model::planVmiStart), so a refusal or a dry run leaves no trace;
//  2. the held devices are attached to the VMI — status.attachedTo with a
//     token, the whole set and the time — each write pinned to the
//     resourceVersion just read, and on 409 read and decided again, so two
//     VMIs never take one device; then the template devices are created,
//     carrying the same attachment in their template-of annotation;
//  3. it waits (at most --vmi-placement-wait) until the leader's binder has
//     placed the whole set on one node, as this replica's watch shows it;
//  4. it answers with a patch adding one spec.domain.devices.gpus[] entry per
//     GPU (deviceName: the class's resource name), never a resources key (the
//     launcher pod would request the sum), and the token as the VMI's
//     gpu.tally.dev/attachment annotation.
//
// Anything that fails after a write undoes what this call wrote. When the API
// server calls again for the same VMI (reinvocation after another mutator),
// the VMI carries the token: the plan finds its own attachment, writes
// nothing, and the answer is the same. The binder records the VMI's uid once
// it exists and undoes an attachment whose VMI never appears.
//
// It is an extension of the state writer whose snapshots it reads: each
// publication wakes the reviews waiting for the binder (no polling).

#include <chrono>
#include <condition_variable>
#include <optional>
#include <vector>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "tally/common/snapshot_cell.hpp"
#include "tally/observability/metrics.hpp"
#include "tally/runtime/admission/review.hpp"
#include "tally/runtime/admission/webhook.hpp"
#include "tally/model/vmi.hpp"
#include "tally/runtime/client.hpp"
#include "tally/state/snapshot.hpp"
#include "tally/state/writer.hpp"

namespace tally::controller {

inline constexpr std::string_view kVmiWebhookPath = "/mutate/virtualmachineinstances";

struct VmiWebhookOptions {
  // How long a CREATE waits for the binder to place the set (the webhook
  // configuration's timeoutSeconds must leave room for it).
  std::chrono::milliseconds placementWait{5'000};
  // How long an attachment may wait for its VMI to appear (the binder undoes
  // it after that); also how long a retried CREATE reuses its token.
  std::chrono::seconds attachTimeout{60};
  // Reads and writes of one device on 409 before the CREATE is refused.
  int maxConflicts = 8;
  observability::Registry* metrics = nullptr;
  // Test seam: called before each write with what it is ("attach ns/name",
  // "create ns/name"); a test writes the device there to force a 409.
  std::function<void(const std::string& step)> beforeWrite;
};

class VmiWebhook final : public state::Observer {
 public:
  VmiWebhook(std::shared_ptr<runtime::Client> client, VmiWebhookOptions options);
  ~VmiWebhook() override;

  // The snapshots it decides on: those of the writer it observes.
  void readFrom(const SnapshotCell<state::Snapshot>& cell) { cell_ = &cell; }

  runtime::admission::Answer review(const runtime::admission::AdmissionRequest& request);
  // The route's frame (the webhook must outlive the server).
  runtime::admission::Mutator handler();

  // state::Observer: a publication wakes the waiting reviews.
  void published(const state::Snapshot& snapshot) override;
  void stopped() override;

 private:
  struct Metrics;
  struct Call;
  runtime::admission::Answer create(const runtime::admission::AdmissionRequest& request);
  model::VmiStart planStart(const model::VirtualMachineInstance& vmi, const std::string& subject,
                            model::AttachWindow window, std::string& token);
  std::string write(Call& call, const model::VmiStart& plan);
  runtime::admission::Answer refused(const model::Decision& decision);
  void count(const char* result);
  std::string tokenFor(const std::string& key, const std::string& references);
  // Waits until the set's members hold units on one node in a snapshot, or
  // the deadline passes; the node, else why not (the last snapshot's reason).
  std::optional<std::string> waitPlaced(const std::string& ns, const std::vector<std::string>& set,
                                        Clock::time_point deadline, std::string& why);

  std::shared_ptr<runtime::Client> client_;
  const SnapshotCell<state::Snapshot>* cell_ = nullptr;
  VmiWebhookOptions options_;
  std::unique_ptr<Metrics> metrics_;
  // Tokens of recent CREATEs by VMI, so that an API server retrying a call
  // that timed out (its VMI has no token yet) finds the same attachment.
  struct Recent {
    std::string references;
    std::string token;
    std::chrono::steady_clock::time_point until;
  };
  std::mutex recentMu_;
  std::map<std::string, Recent> recent_;
  // Publications seen, for the waiting reviews.
  std::mutex publishedMu_;
  std::condition_variable publishedCv_;
  std::uint64_t publications_ = 0;
  bool stopped_ = false;
};

}  // namespace tally::controller
