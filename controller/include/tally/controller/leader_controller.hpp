#pragma once
// What the leader-only controllers of tally-controller share (the device
// binder, the quota reconciler, the pool auditor): each is an observer of the
// writer that reads its snapshots, joins the manager as one named controller
// whose workers run only on the replica holding the leader Lease, begins every
// leadership term with startTerm() before its first reconcile, is woken from
// the writer thread by enqueue(), and records Events whose failure is logged,
// never returned (an Event is a report; the reconcile's write is the work).

#include <atomic>
#include <chrono>
#include <memory>
#include <stop_token>
#include <string>

#include "tally/common/snapshot_cell.hpp"
#include "tally/runtime/client.hpp"
#include "tally/runtime/controller.hpp"
#include "tally/runtime/manager.hpp"
#include "tally/state/snapshot.hpp"
#include "tally/state/writer.hpp"

namespace tally::controller {

class LeaderController : public state::Observer {
 public:
  ~LeaderController() override;
  LeaderController(const LeaderController&) = delete;
  LeaderController& operator=(const LeaderController&) = delete;

  // The snapshots it decides on (the writer it observes). Before attach().
  void readFrom(const SnapshotCell<state::Snapshot>& cell);
  // Adds the controller to the manager, leader-only.
  void attach(runtime::Manager& manager);
  // The same controller's options (its onStart begins a term) and where the
  // wake-ups go, for a controller run without a manager (tests).
  runtime::ControllerOptions controllerOptions();
  void enqueueInto(runtime::Controller& controller) { controller_.store(&controller); }

  // One key of the controller's kind.
  virtual runtime::Result<runtime::ReconcileResult> reconcile(const std::string& key, std::stop_token stop) = 0;

 protected:
  struct Identity {
    std::string name;       // the controller's (metrics, logs)
    std::string component;  // Events' reportingComponent
    std::string instance;   // Events' reportingInstance: this replica
  };
  LeaderController(std::shared_ptr<runtime::Client> client, Identity identity);

  // A new term, on the worker before its first reconcile: forget what the last
  // term kept, enqueue what must be looked at.
  virtual void startTerm() = 0;
  // readFrom() has set the cell (a controller reading snapshots at scrape
  // registers that here).
  virtual void snapshotsSet() {}

  // Wakes the key now, or after `delay`; nothing before enqueueInto/attach.
  void enqueue(const std::string& key, std::chrono::milliseconds delay = std::chrono::milliseconds(0));
  // Records an Event on `involved` (the message cut to the 1 KiB an Event keeps).
  void event(runtime::ObjectReference involved, std::string type, std::string reason, std::string message) const;

  const std::string& name() const { return identity_.name; }

  std::shared_ptr<runtime::Client> client_;
  const SnapshotCell<state::Snapshot>* cell_ = nullptr;

 private:
  Identity identity_;
  std::atomic<runtime::Controller*> controller_{nullptr};
};

}  // namespace tally::controller
