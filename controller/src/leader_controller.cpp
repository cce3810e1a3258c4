#include "tally/controller/leader_controller.hpp"

#include "tally/common/json.hpp"
#include "tally/common/log.hpp"

namespace tally::controller {

namespace {
constexpr std::size_t kEventMessageBytes = 1024;  // what an Event keeps
}  // namespace

LeaderController::LeaderController(std::shared_ptr<runtime::Client> client, Identity identity)
    : client_(std::move(client)), identity_(std::move(identity)) {}

LeaderController::~LeaderController() = default;

void LeaderController::readFrom(const SnapshotCell<state::Snapshot>& cell) {
  cell_ = &cell;
  snapshotsSet();
}

runtime::ControllerOptions LeaderController::controllerOptions() {
  runtime::ControllerOptions o;
  o.name = identity_.name;
  o.workers = 1;  // decisions one at a time: each reads what the last one wrote
  o.leaderOnly = true;
  o.onStart = [this] { startTerm(); };
  return o;
}

void LeaderController::attach(runtime::Manager& manager) {
  runtime::Controller& c = manager.controller(
      controllerOptions(), [this](const std::string& key, std::stop_token stop) { return reconcile(key, stop); });
  enqueueInto(c);
}

void LeaderController::enqueue(const std::string& key, std::chrono::milliseconds delay) {
  runtime::Controller* c = controller_.load();
  if (!c) return;
  if (delay.count() > 0) {
    c->enqueueAfter(key, delay);
  } else {
    c->enqueue(key);
  }
}

void LeaderController::event(runtime::ObjectReference involved, std::string type, std::string reason,
                             std::string message) const {
  runtime::EventRecord e;
  e.involved = std::move(involved);
  e.type = std::move(type);
  e.reason = std::move(reason);
  e.message = truncatedText(std::move(message), kEventMessageBytes);
  e.reportingComponent = identity_.component;
  e.reportingInstance = identity_.instance;
  if (auto st = client_->createEvent(e); !st) {
    const std::string object =
        e.involved.kind + " " + (e.involved.namespace_.empty() ? "" : e.involved.namespace_ + "/") + e.involved.name;
    logWarning(identity_.name + ": event not recorded",
               {{"object", object}, {"reason", e.reason}, {"error", st.error().describe()}});
  }
}

}  // namespace tally::controller
