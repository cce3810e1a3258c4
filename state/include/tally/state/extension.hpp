#pragma once
// The two ways a binary joins the state writer's thread. An Observer is told
// what changed (a pod, an object of another kind, a batch applied, a snapshot
// published, the writer stopped) and adds nothing to the state. An Extension
// keeps state of its own on the same thread and adds it to every snapshot as
// a part of one type, which readers find by that type (Snapshot::part<Part>).
// One object may be both (the extender's assumptions are). Every call is made
// on the writer thread (or by Writer::flush()), never two at once.

#include <chrono>
#include <memory>
#include <string>
#include <typeindex>
#include <typeinfo>

#include "tally/model/cluster.hpp"
#include "tally/model/index.hpp"

namespace tally::state {

struct Snapshot;

// The writer's clock (deadlines, publication times), one type for both hooks.
struct WriterClock {
  using Clock = std::chrono::steady_clock;
};

class Observer : public WriterClock {
 public:
  virtual ~Observer() = default;
  // A pod event changed what the cache holds under `key` ("ns/name"): `pod` is
  // the live value, null once the cache holds none.
  virtual void podChanged(const std::string& /*key*/, const model::Pod* /*pod*/) {}
  // An object of another kind changed what the cache holds (a new value or a
  // removal; an upsert equal to the cached value is not a change): `key` is
  // "ns/name", or "name" for cluster-scoped kinds ("" for the singletons:
  // billing plans, the KubeVirt CR, the ledger).
  virtual void objectChanged(model::Kind /*kind*/, const std::string& /*key*/) {}
  // After a batch of events and tasks was applied: the live index, whose
  // cluster holds the pods a snapshot keeps only as sums.
  virtual void applied(const model::UsageIndex& /*live*/) {}
  // After `snapshot` became visible.
  virtual void published(const Snapshot& /*snapshot*/) {}
  // The writer stopped: nothing more is published.
  virtual void stopped() {}
};

// What the writer holds of an extension, whatever its part's type; a binary
// derives from Extension<Part>.
class AnyExtension : public WriterClock {
 public:
  virtual ~AnyExtension() = default;
  // After each batch: expires what is due at `now`; true when the index
  // changed (a publication is due then).
  virtual bool tick(model::UsageIndex& index, Clock::time_point now) = 0;
  // When tick() next has work (Clock::time_point::max(): nothing scheduled).
  virtual Clock::time_point nextDeadline() const = 0;

 private:
  template <class Part>
  friend class Extension;
  friend class Writer;
  AnyExtension() = default;
  virtual std::type_index partType() const = 0;
  virtual std::shared_ptr<const void> publishPart(const model::Cluster& live) = 0;
};

template <class Part>
class Extension : public AnyExtension {
 public:
  // Builds this extension's part of the next snapshot (Snapshot::part<Part>).
  virtual std::shared_ptr<const Part> publish(const model::Cluster& live) = 0;

 private:
  std::type_index partType() const final { return typeid(Part); }
  std::shared_ptr<const void> publishPart(const model::Cluster& live) final { return publish(live); }
};

}  // namespace tally::state
