#pragma once
// Per-node facts of one snapshot laid out for the extender's hot path: for every
// resource name a class sells, which class serves it on each node, whether the
// node is eligible, and its served, used and held units. The same decision code
// as filterNode() and scoreNode() runs on these facts, so the table refuses and
// scores exactly as they do, with a few array reads per node instead of map
// lookups.
//
// Tables of successive snapshots share storage: the node layout (names, name
// index, Node pointers) is shared until nodes or classes change, and rows live
// in blocks that are copied only when a node in them changed. A row holds one
// small id per resource: the id of its facts in a table of distinct facts
// (clusters have thousands of nodes but few distinct (class, served, used,
// held) combinations), so a query decides once per distinct id, not per node.

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tally/model/admission.hpp"
#include "tally/model/capacity.hpp"
#include "tally/model/cluster.hpp"

namespace tally::model {

class FitTable {
  struct Slot;
  struct Layout;
  struct Block;

 public:
  // Reads every node once. The table answers for `cluster` only and points into
  // it: keep both alive together (the extender publishes them in one snapshot).
  static FitTable build(const Cluster& cluster, const CapacityView& view);

  // The table after usage changed on `touched` nodes only (nodes and classes
  // themselves unchanged, `cluster` the very object `previous` was built over):
  // shares the layout and every block without a touched node with `previous`.
  static FitTable update(const FitTable& previous, const Cluster& cluster, const CapacityView& view,
                         const std::vector<std::string>& touched);

  FitTable() = default;
  FitTable(const FitTable&) = delete;
  FitTable& operator=(const FitTable&) = delete;
  FitTable(FitTable&&) = default;
  FitTable& operator=(FitTable&&) = default;

  // The row of a node, by name.
  std::optional<std::uint32_t> find(std::string_view node) const;
  // The rows of many nodes at once (kNoRow for a node the table does not hold):
  // the row after one just found (runs of consecutive rows, interleaved), or
  // a few rows on (the client dropped the rows between), else following the
  // order the last list was in (Layout::successor), else by
  // hash, with the memory each lookup touches fetched a few names ahead.
  // Safe to call from many threads on one table.
  static constexpr std::uint32_t kNoRow = UINT32_MAX;
  void findAll(std::span<const std::string_view> nodes, std::vector<std::uint32_t>& rows) const;
  // Names findAll() looked up by hash on this thread so far (for tests and benches).
  static std::size_t findAllProbesOnThisThread() { return findAllProbes_; }
  // Names findAll() resolved through the remembered order on this thread so
  // far: each costs loads along it that miss the cache when the rows are cold.
  static std::size_t findAllRememberedOnThisThread() { return findAllRemembered_; }
  const std::string& nodeName(std::uint32_t row) const;
  std::size_t size() const;
  // Blocks this table shares with the table it was updated from (for tests and stats).
  std::size_t blocksShared() const { return blocksShared_; }
  std::size_t blockCount() const { return blocks_.size(); }

  NodeVerdict filter(const Cluster& cluster, const PodDemand& demand, std::uint32_t row) const;

  // One pod's questions to the table. Nodes whose facts for the pod's resources
  // are equal get the same verdict and score, so each distinct verdict is worked
  // out (and its message formatted) once per request. Keep the table, cluster,
  // view and demand alive while the query is used.
  class Query {
   public:
    // `id` is the same for every node that shares `verdict`.
    struct Answer {
      std::uint32_t id;
      const NodeVerdict* verdict;
    };
    // Inline for the common case (one requested resource, its facts decided
    // before): two array reads.
    Answer filter(std::uint32_t row) {
      if (direct_ >= 0) {
        const std::uint32_t state = table_.stateId(row, static_cast<std::size_t>(direct_));
        if (state < answerOfState_.size() && answerOfState_[state].verdict) return answerOfState_[state];
      }
      return decide(row);
    }
    int score(std::uint32_t row, ScoreStrategy strategy) {
      const std::size_t s = strategy == ScoreStrategy::Spread ? 1 : 0;
      if (direct_ >= 0) {
        const std::uint32_t state = table_.stateId(row, static_cast<std::size_t>(direct_));
        if (state < scoreOfState_[s].size() && scoreOfState_[s][state] >= 0) return scoreOfState_[s][state];
      }
      return scoreOnce(row, strategy);
    }
    // filter() and score() of many rows (kNoRow: a name the table does not
    // hold, answered {0, nullptr} and 0), the rows' facts gathered first in a
    // loop of independent loads.
    void filterAll(std::span<const std::uint32_t> rows, std::vector<Answer>& out);
    void scoreAll(std::span<const std::uint32_t> rows, ScoreStrategy strategy, std::vector<int>& out);
    std::size_t distinctVerdicts() const { return verdicts_.size(); }

   private:
    friend class FitTable;
    Answer decide(std::uint32_t row);
    int scoreOnce(std::uint32_t row, ScoreStrategy strategy);
    Query(const FitTable& table, const Cluster& cluster, const CapacityView& view, const PodDemand& demand);
    // Index of the memo entry for the row's facts (inserted when new); kNoRow
    // when the pod's verdict may depend on which node it is (launchers). Not
    // for the direct case.
    std::uint32_t entryOf(std::uint32_t row);
    std::int64_t idleOthers(const DeviceClass& cls);

    const FitTable& table_;
    const Cluster& cluster_;
    const CapacityView& view_;
    const PodDemand& demand_;
    std::vector<std::int32_t> columns_;  // per demand.requests entry: the table's column, -1 if none
    bool memoizable_ = true;
    // The column of the one requested resource when verdicts are memoized by
    // its state id alone (the common case), else -1; then the answers and
    // scores are kept by state id, and the entries below are not used.
    std::int32_t direct_ = -1;
    std::vector<Answer> answerOfState_;
    std::vector<std::int32_t> scoreOfState_[2];
    // Otherwise: entry e's key is keys_[e * columns_.size() ...], a state id per
    // column (kModeKey | mode for a resource no class sells), found through slots_.
    std::vector<std::uint32_t> keys_;
    std::vector<std::uint32_t> slots_;  // open addressing over entries, 0 = empty, else entry + 1
    std::size_t entries_ = 0;
    std::vector<std::int32_t> verdictOf_;   // per entry: index into verdicts_, -1 not decided yet
    std::vector<std::int32_t> scoreOf_[2];  // per entry and strategy: score, -1 not scored yet
    std::deque<NodeVerdict> verdicts_;
    std::vector<std::pair<const DeviceClass*, std::int64_t>> idle_;
  };
  Query query(const Cluster& cluster, const CapacityView& view, const PodDemand& demand) const;

 private:
  struct Slot {
    std::int32_t cls = -1;  // index into classes, -1: no class serves the resource here
    bool eligible = false;
    NodeMode mode = NodeMode::Unset;
    std::int64_t served = 0;
    std::int64_t used = 0;
    std::int64_t held = 0;
    friend bool operator==(const Slot&, const Slot&) = default;
    std::uint64_t hash() const;
  };
  // Distinct slots, each once; ids index `values`. Immutable once a table
  // refers to it; update() copies it before adding a value.
  struct States {
    std::vector<Slot> values;
    std::vector<std::uint32_t> index;  // open addressing, id + 1, 0 = empty
    std::uint32_t intern(const Slot& slot);
    std::optional<std::uint32_t> find(const Slot& slot) const;
  };
  static constexpr std::uint32_t kModeKey = 0x80000000u;
  static thread_local std::size_t findAllProbes_;
  static thread_local std::size_t findAllRemembered_;
  // Layout::successor's mark of a successor a later list followed again.
  static constexpr std::uint32_t kConfirmed = 0x80000000u;
  static constexpr std::uint32_t kBlockShift = 7;  // 128 rows per block
  static constexpr std::uint32_t kBlockRows = 1u << kBlockShift;

  struct Layout {
    const Cluster* cluster = nullptr;  // the object the Node and class pointers point into
    std::vector<std::string> resources;
    std::vector<const DeviceClass*> classes;
    std::vector<std::string> names;
    std::vector<const Node*> nodes;
    std::vector<NodeMode> modes;  // poolMode() per row
    // Open addressing: (hash, row + 1); a power-of-two size.
    std::vector<std::pair<std::uint64_t, std::uint32_t>> index;
    // Per row, the row whose name followed it in the lists findAll() resolved
    // (kNoRow: none yet), kConfirmed set once a later list followed it again.
    // kube-scheduler lists candidates in the same order every cycle (its node
    // tree from a rotating start, runs of it interleaved by its parallel
    // workers), so the next name is most often the successor of a recent one:
    // one comparison of names instead of a hash and a probe. A hint only,
    // checked before use; concurrent lookups overwrite it in no particular order.
    std::unique_ptr<std::atomic<std::uint32_t>[]> successor;
    std::optional<std::uint32_t> find(std::string_view name) const;
    // The row of `name`, whose hashName() is `hash`.
    std::optional<std::uint32_t> probe(std::uint64_t hash, std::string_view name) const;
  };
  struct Block {
    std::vector<std::uint32_t> ids;  // rows x resources: state ids
  };

  std::uint32_t stateId(std::uint32_t row, std::size_t column) const {
    return blockData_[row >> kBlockShift][(row & (kBlockRows - 1)) * width_ + column];
  }
  const Slot& slot(std::uint32_t row, std::size_t column) const { return states_->values[stateId(row, column)]; }
  void indexBlocks();
  // The decision code's facts of a row: a callable from resource name to
  // detail::ResourceFacts (defined and used in fit_table.cpp only).
  auto factsOf(std::uint32_t row) const;
  static Slot rowSlot(const Layout& layout, const Cluster& cluster, const CapacityView& view, std::uint32_t row,
                      std::size_t column);

  std::shared_ptr<const Layout> layout_;
  std::vector<std::shared_ptr<const Block>> blocks_;
  std::shared_ptr<const States> states_;
  std::vector<const std::uint32_t*> blockData_;  // blocks_[b]->ids.data(): one load less per read
  std::size_t width_ = 0;                        // layout_->resources.size()
  std::size_t blocksShared_ = 0;
};

}  // namespace tally::model
