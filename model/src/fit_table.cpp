#include "tally/model/fit_table.hpp"

#include <algorithm>
#include <array>
#include <cstring>

#include "filter_core.hpp"
#include "tally/common/cow_map.hpp"
#include "tally/model/units.hpp"

namespace tally::model {

namespace {

std::uint64_t mix(std::uint64_t h, std::uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  return h;
}

// Equality of two short names in whole-word loads (a call to memcmp costs
// more than the compare for the 10-20 bytes of a node name).
inline bool sameName(std::string_view a, std::string_view b) {
  const std::size_t n = a.size();
  if (n != b.size()) return false;
  if (n < 8) {
    if (n < 4) return a == b;
    auto load4 = [](const char* at) {
      std::uint32_t w;
      std::memcpy(&w, at, 4);
      return w;
    };
    return load4(a.data()) == load4(b.data()) && load4(a.data() + n - 4) == load4(b.data() + n - 4);
  }
  auto load8 = [](const char* at) {
    std::uint64_t w;
    std::memcpy(&w, at, 8);
    return w;
  };
  for (std::size_t i = 0; i + 8 <= n; i += 8) {
    if (load8(a.data() + i) != load8(b.data() + i)) return false;
  }
  return load8(a.data() + n - 8) == load8(b.data() + n - 8);
}

// Puts `valuePlusOne` into the first free slot of an open-addressing table of
// power-of-two size, probing linearly from `hash` (0 marks a free slot).
void placeAt(std::vector<std::uint32_t>& table, std::uint64_t hash, std::uint32_t valuePlusOne) {
  const std::size_t mask = table.size() - 1;
  std::size_t i = hash & mask;
  while (table[i] != 0) i = (i + 1) & mask;
  table[i] = valuePlusOne;
}

}  // namespace

std::uint64_t FitTable::Slot::hash() const {
  std::uint64_t h = mix(0, static_cast<std::uint64_t>(static_cast<std::uint32_t>(cls)) ^
                               (static_cast<std::uint64_t>(eligible) << 32) ^ (static_cast<std::uint64_t>(mode) << 40));
  h = mix(h, static_cast<std::uint64_t>(served));
  h = mix(h, static_cast<std::uint64_t>(used));
  return mix(h, static_cast<std::uint64_t>(held));
}

std::optional<std::uint32_t> FitTable::States::find(const Slot& slot) const {
  if (index.empty()) return std::nullopt;
  const std::size_t mask = index.size() - 1;
  for (std::size_t i = slot.hash() & mask;; i = (i + 1) & mask) {
    if (index[i] == 0) return std::nullopt;
    if (values[index[i] - 1] == slot) return index[i] - 1;
  }
}

std::uint32_t FitTable::States::intern(const Slot& slot) {
  if (auto id = find(slot)) return *id;
  const auto id = static_cast<std::uint32_t>(values.size());
  values.push_back(slot);
  if (values.size() * 2 > index.size()) {
    index.assign(std::max<std::size_t>(64, index.size() * 2), 0);
    for (std::uint32_t v = 0; v < values.size(); ++v) placeAt(index, values[v].hash(), v + 1);
  } else {
    placeAt(index, slot.hash(), id + 1);
  }
  return id;
}

std::optional<std::uint32_t> FitTable::Layout::find(std::string_view name) const {
  if (index.empty()) return std::nullopt;
  return probe(hashName(name), name);
}

std::optional<std::uint32_t> FitTable::Layout::probe(std::uint64_t h, std::string_view name) const {
  const std::size_t mask = index.size() - 1;
  for (std::size_t i = h & mask;; i = (i + 1) & mask) {
    const auto& [hash, rowPlusOne] = index[i];
    if (rowPlusOne == 0) return std::nullopt;
    if (hash == h && sameName(names[rowPlusOne - 1], name)) return rowPlusOne - 1;
  }
}

FitTable::Slot FitTable::rowSlot(const Layout& layout, const Cluster& cluster, const CapacityView& view,
                                 std::uint32_t row, std::size_t column) {
  const Node& node = *layout.nodes[row];
  Slot slot;
  slot.mode = layout.modes[row];
  const std::string& resource = layout.resources[column];
  const DeviceClass* cls = classServing(cluster, node, resource);
  if (!cls) return slot;
  slot.cls =
      static_cast<std::int32_t>(std::find(layout.classes.begin(), layout.classes.end(), cls) - layout.classes.begin());
  slot.eligible = !nodeIneligibility(node, *cls);
  slot.served = unitsServed(node, *cls).units;
  slot.used = view.nodeUsed(node.name, resource);
  slot.held = view.nodeHeld(node.name, resource);
  return slot;
}

FitTable FitTable::build(const Cluster& cluster, const CapacityView& view) {
  auto layout = std::make_shared<Layout>();
  layout->cluster = &cluster;
  for (const auto& [name, cls] : cluster.classes) {
    layout->classes.push_back(&cls);
    if (std::find(layout->resources.begin(), layout->resources.end(), cls.resourceName) == layout->resources.end()) {
      layout->resources.push_back(cls.resourceName);
    }
  }
  layout->names.reserve(cluster.nodes.size());
  layout->nodes.reserve(cluster.nodes.size());
  for (const auto& [name, node] : cluster.nodes) {
    layout->names.push_back(name);
    layout->nodes.push_back(&node);
    layout->modes.push_back(poolMode(node));
  }
  std::size_t capacity = 16;
  while (capacity < layout->names.size() * 2) capacity *= 2;
  layout->index.assign(capacity, {0, 0});
  for (std::uint32_t row = 0; row < layout->names.size(); ++row) {
    const std::uint64_t h = hashName(layout->names[row]);
    std::size_t i = h & (capacity - 1);
    while (layout->index[i].second != 0) i = (i + 1) & (capacity - 1);
    layout->index[i] = {h, row + 1};
  }
  layout->successor = std::make_unique<std::atomic<std::uint32_t>[]>(layout->names.size());
  for (std::size_t row = 0; row < layout->names.size(); ++row) layout->successor[row].store(kNoRow);

  FitTable t;
  auto states = std::make_shared<States>();
  const std::size_t width = layout->resources.size();
  const auto rows = static_cast<std::uint32_t>(layout->names.size());
  for (std::uint32_t first = 0; first < rows; first += kBlockRows) {
    auto block = std::make_shared<Block>();
    const std::uint32_t count = std::min(kBlockRows, rows - first);
    block->ids.resize(static_cast<std::size_t>(kBlockRows) * width);
    for (std::uint32_t k = 0; k < count; ++k) {
      for (std::size_t c = 0; c < width; ++c) {
        block->ids[k * width + c] = states->intern(rowSlot(*layout, cluster, view, first + k, c));
      }
    }
    t.blocks_.push_back(std::move(block));
  }
  t.layout_ = std::move(layout);
  t.states_ = std::move(states);
  t.indexBlocks();
  return t;
}

void FitTable::indexBlocks() {
  width_ = layout_->resources.size();
  blockData_.clear();
  for (const auto& b : blocks_) blockData_.push_back(b->ids.data());
}

FitTable FitTable::update(const FitTable& previous, const Cluster& cluster, const CapacityView& view,
                          const std::vector<std::string>& touched) {
  if (!previous.layout_ || previous.layout_->cluster != &cluster) return build(cluster, view);
  // Facts that no node holds any more stay interned; past this many, start afresh.
  constexpr std::size_t kMaxStates = 1u << 16;
  if (previous.states_->values.size() > kMaxStates) return build(cluster, view);
  FitTable t;
  t.layout_ = previous.layout_;
  t.blocks_ = previous.blocks_;
  t.states_ = previous.states_;
  std::shared_ptr<States> ownStates;  // a copy, made when a new value appears
  const std::size_t width = t.layout_->resources.size();
  std::vector<std::shared_ptr<Block>> copies(t.blocks_.size());
  for (const std::string& name : touched) {
    auto row = t.layout_->find(name);
    if (!row) continue;  // a pod on a node the cache does not hold
    const std::uint32_t b = *row >> kBlockShift;
    if (!copies[b]) {
      copies[b] = std::make_shared<Block>(*t.blocks_[b]);
      t.blocks_[b] = copies[b];
    }
    for (std::size_t c = 0; c < width; ++c) {
      Slot slot = rowSlot(*t.layout_, cluster, view, *row, c);
      std::optional<std::uint32_t> id = t.states_->find(slot);
      if (!id) {
        if (!ownStates) {
          ownStates = std::make_shared<States>(*t.states_);
          t.states_ = ownStates;
        }
        id = ownStates->intern(slot);
      }
      copies[b]->ids[(*row & (kBlockRows - 1)) * width + c] = *id;
    }
  }
  for (const auto& c : copies) t.blocksShared_ += c ? 0 : 1;
  t.indexBlocks();
  return t;
}

std::optional<std::uint32_t> FitTable::find(std::string_view node) const {
  if (!layout_) return std::nullopt;
  return layout_->find(node);
}

thread_local std::size_t FitTable::findAllProbes_ = 0;
thread_local std::size_t FitTable::findAllRemembered_ = 0;

void FitTable::findAll(std::span<const std::string_view> nodes, std::vector<std::uint32_t>& rows) const {
  const std::size_t n = nodes.size();
  rows.resize(n);  // every entry is written below
  if (!layout_ || layout_->index.empty()) {
    std::fill(rows.begin(), rows.end(), kNoRow);
    return;
  }
  const Layout& l = *layout_;
  const auto count = static_cast<std::uint32_t>(l.names.size());
  // A remembered successor is confirmed when a list follows it again; a
  // contradiction then only takes the confirmation away, the next one
  // replaces it. Two workers' nodes interleaving in one list contradict many
  // links once; the order itself survives that.
  auto successorOf = [&](std::uint32_t row) {
    if (row == kNoRow) return kNoRow;
    const std::uint32_t raw = l.successor[row].load(std::memory_order_relaxed);
    return raw == kNoRow ? kNoRow : raw & ~kConfirmed;
  };
  auto note = [&](std::uint32_t previous, std::uint32_t row) {
    if (previous == kNoRow) return;
    const std::uint32_t raw = l.successor[previous].load(std::memory_order_relaxed);
    if (raw != kNoRow && (raw & ~kConfirmed) == row) {
      if (!(raw & kConfirmed)) l.successor[previous].store(row | kConfirmed, std::memory_order_relaxed);
    } else if (raw != kNoRow && (raw & kConfirmed)) {
      l.successor[previous].store(raw & ~kConfirmed, std::memory_order_relaxed);
    } else {
      l.successor[previous].store(row, std::memory_order_relaxed);
    }
  };

  // Following the remembered order, along a few runs at once: kube-scheduler
  // filters its node list in chunks on parallel workers and lists the
  // feasible nodes as they are found, so runs of its order interleave. The
  // next name is tried as the row after each run's last row, then as its
  // remembered successor, most recently followed run first. Along the
  // remembered order two scouts run ahead of a run: the far one fetches the
  // name's string object, the near one the characters it points at (for
  // names too long to sit inside the object), so both are in cache when the
  // name is compared.
  constexpr std::size_t kNear = 4, kFar = 8, kRuns = 3;
  constexpr std::uint32_t kGap = 4;  // rows a run may skip and still count as following the table's order
  struct Run {
    std::uint32_t last = kNoRow, near = kNoRow, far = kNoRow;
    bool scouted = false;  // near and far lead along the remembered order
  };
  std::array<Run, kRuns> runs{};
  auto startRun = [&](std::uint32_t from) {
    Run run{from, from, kNoRow, true};
    for (std::size_t k = 0; k < kNear; ++k) run.near = successorOf(run.near);
    run.far = run.near;
    for (std::size_t k = kNear; k < kFar; ++k) {
      run.far = successorOf(run.far);
      if (run.far != kNoRow) __builtin_prefetch(&l.names[run.far]);
    }
    return run;
  };
  auto followed = [&](Run& run, std::uint32_t row) {
    if (!run.scouted) {  // the run leaves the table's own order: scouts out
      run = startRun(row);
      return;
    }
    run.last = row;
    run.near = successorOf(run.near);
    if (run.near < count) __builtin_prefetch(l.names[run.near].data());
    run.far = successorOf(run.far);
    if (run.far < count) __builtin_prefetch(&l.names[run.far]);
  };
  // Along the table's own rows the scouts need not chase: the far one is the
  // string object kFar rows on, the near one the characters kNear rows on.
  auto stepped = [&](Run& run, std::uint32_t row) {
    run.last = row;
    run.scouted = false;
    if (row + kFar < count) __builtin_prefetch(&l.names[row + kFar]);
    if (row + kNear < count) __builtin_prefetch(l.names[row + kNear].data());
  };
  std::uint32_t previous = kNoRow;
  std::size_t i = 0, misses = 0;
  // A list in another order than the remembered one (a client other than
  // kube-scheduler, or nodes added) misses at most names: after 64 names
  // with more than one in eight missed, the rest go by hash.
  for (; i < n && (i < 64 || misses * 8 <= i); ++i) {
    std::uint32_t row = kNoRow;
    std::size_t hit = kRuns;
    bool adjacent = false;
    // The table's next row after each run first: rows are in name order, the
    // order the API server lists nodes in and kube-scheduler keeps them in
    // within a zone. That costs no load from the remembered order, whose
    // successors miss the cache when the rows are cold.
    for (std::size_t r = 0; r < kRuns && runs[r].last != kNoRow; ++r) {
      const std::uint32_t after = runs[r].last + 1;
      if (after < count && sameName(l.names[after], nodes[i])) {
        row = after;
        hit = r;
        adjacent = true;
        break;
      }
    }
    // Then a few rows on: kube-scheduler's own filters dropped the nodes
    // between (full, tainted, cordoned). Their string objects are in cache:
    // stepped() fetched them kFar rows ahead.
    for (std::size_t r = 0; hit == kRuns && r < kRuns && runs[r].last != kNoRow; ++r) {
      for (std::uint32_t ahead = runs[r].last + 2; ahead <= runs[r].last + kGap && ahead < count; ++ahead) {
        if (sameName(l.names[ahead], nodes[i])) {
          row = ahead;
          hit = r;
          adjacent = true;
          break;
        }
      }
    }
    for (std::size_t r = 0; hit == kRuns && r < kRuns && runs[r].last != kNoRow; ++r) {
      const std::uint32_t next = successorOf(runs[r].last);
      const bool tried = next > runs[r].last && next <= runs[r].last + kGap;
      if (!tried && next < count && sameName(l.names[next], nodes[i])) {
        row = next;
        hit = r;
        ++findAllRemembered_;
      }
    }
    if (hit < kRuns) {
      if (adjacent) {
        stepped(runs[hit], row);
      } else {
        note(runs[hit].last, row);
        followed(runs[hit], row);
      }
      std::rotate(runs.begin(), runs.begin() + static_cast<std::ptrdiff_t>(hit),
                  runs.begin() + static_cast<std::ptrdiff_t>(hit) + 1);
    } else {
      ++misses;
      ++findAllProbes_;
      auto found = l.probe(hashName(nodes[i]), nodes[i]);
      row = found ? *found : kNoRow;
      note(previous, row);
      if (row != kNoRow) {
        std::move_backward(runs.begin(), runs.end() - 1, runs.end());
        runs[0] = Run{row, kNoRow, kNoRow, false};  // scouted once it follows the remembered order
      }
    }
    rows[i] = row;
    previous = row;
  }
  if (i == n) return;

  // By hash, in three stages a few names apart, so that the index slot and
  // then the name it points at are in cache by the time they are compared:
  // hash and fetch the slot; read the slot and fetch the name; compare. The
  // order is still remembered, for the next list.
  const std::size_t mask = l.index.size() - 1;
  constexpr std::size_t kAhead = 8;
  thread_local std::vector<std::uint64_t> hashes;  // scratch, reused by the thread's next request
  hashes.resize(n);
  auto stageHash = [&](std::size_t k) {
    hashes[k] = hashName(nodes[k]);
    __builtin_prefetch(&l.index[hashes[k] & mask]);
  };
  auto stageSlot = [&](std::size_t k) {
    const std::uint32_t rowPlusOne = l.index[hashes[k] & mask].second;
    if (rowPlusOne != 0) __builtin_prefetch(&l.names[rowPlusOne - 1]);
  };
  const std::size_t start = i;
  for (std::size_t k = start; k < std::min(n, start + 2 * kAhead); ++k) stageHash(k);
  for (std::size_t k = start; k < std::min(n, start + kAhead); ++k) stageSlot(k);
  for (; i < n; ++i) {
    if (i + 2 * kAhead < n) stageHash(i + 2 * kAhead);
    if (i + kAhead < n) stageSlot(i + kAhead);
    ++findAllProbes_;
    auto found = l.probe(hashes[i], nodes[i]);
    const std::uint32_t row = found ? *found : kNoRow;
    note(previous, row);
    rows[i] = row;
    previous = row;
  }
}

const std::string& FitTable::nodeName(std::uint32_t row) const { return layout_->names[row]; }

std::size_t FitTable::size() const { return layout_ ? layout_->names.size() : 0; }

auto FitTable::factsOf(std::uint32_t row) const {
  return [this, row](std::string_view resource) {
    const Layout& l = *layout_;
    detail::ResourceFacts facts;
    facts.mode = l.modes[row];
    for (std::size_t r = 0; r < l.resources.size(); ++r) {
      if (l.resources[r] != resource) continue;
      const Slot& s = slot(row, r);
      if (s.cls < 0) break;
      facts.cls = l.classes[static_cast<std::size_t>(s.cls)];
      facts.eligible = s.eligible;
      facts.served = s.served;
      facts.used = s.used;
      facts.held = s.held;
      break;
    }
    return facts;
  };
}

NodeVerdict FitTable::filter(const Cluster& cluster, const PodDemand& demand, std::uint32_t row) const {
  const Layout& l = *layout_;
  return detail::decideNode(cluster, demand, l.names[row], factsOf(row),
                            [&]() -> const Node& { return *l.nodes[row]; });
}

FitTable::Query FitTable::query(const Cluster& cluster, const CapacityView& view, const PodDemand& demand) const {
  return Query(*this, cluster, view, demand);
}

FitTable::Query::Query(const FitTable& table, const Cluster& cluster, const CapacityView& view, const PodDemand& demand)
    : table_(table), cluster_(cluster), view_(view), demand_(demand) {
  const auto& resources = table.layout_->resources;
  for (const auto& [resource, amount] : demand.requests) {
    auto it = std::find(resources.begin(), resources.end(), resource);
    columns_.push_back(it == resources.end() ? -1 : static_cast<std::int32_t>(it - resources.begin()));
  }
  // Only a launcher's verdict can depend on which node is asked about: its pinned
  // node, and the units its own devices cover there.
  memoizable_ = demand.attached.empty() && !(demand.launcherOf && !demand.requiredNode.empty());
  if (memoizable_ && columns_.size() == 1 && columns_[0] >= 0) direct_ = columns_[0];
}

std::uint32_t FitTable::Query::entryOf(std::uint32_t row) {
  if (!memoizable_) return kNoRow;
  auto newEntry = [&] {
    const auto entry = static_cast<std::uint32_t>(entries_++);
    verdictOf_.push_back(-1);
    scoreOf_[0].push_back(-1);
    scoreOf_[1].push_back(-1);
    return entry;
  };
  const std::size_t width = columns_.size();
  // The key: the row's state id of every requested resource (the node's mode
  // alone for a resource no class sells). Interned ids are equal exactly when
  // the facts are.
  auto keyAt = [&](std::size_t i) {
    return columns_[i] >= 0 ? table_.stateId(row, static_cast<std::size_t>(columns_[i]))
                            : kModeKey | static_cast<std::uint32_t>(table_.layout_->modes[row]);
  };
  auto hashOf = [&](auto&& key) {
    std::uint64_t h = 0;
    for (std::size_t i = 0; i < width; ++i) h = mix(h, key(i));
    return h;
  };
  const std::uint64_t h = hashOf(keyAt);
  if (slots_.empty()) slots_.assign(64, 0);
  const std::size_t mask = slots_.size() - 1;
  for (std::size_t s = h & mask;; s = (s + 1) & mask) {
    const std::uint32_t at = slots_[s];
    if (at == 0) break;
    bool same = true;
    for (std::size_t i = 0; i < width && same; ++i) same = keys_[(at - 1) * width + i] == keyAt(i);
    if (same) return at - 1;
  }
  const std::uint32_t entry = newEntry();
  for (std::size_t i = 0; i < width; ++i) keys_.push_back(keyAt(i));
  if (entries_ * 2 > slots_.size()) {
    slots_.assign(slots_.size() * 2, 0);
    for (std::uint32_t e = 0; e < entries_; ++e) {
      placeAt(slots_, hashOf([&](std::size_t i) { return keys_[e * width + i]; }), e + 1);
    }
  } else {
    placeAt(slots_, h, entry + 1);
  }
  return entry;
}

FitTable::Query::Answer FitTable::Query::decide(std::uint32_t row) {
  // The direct case was looked up by the caller (answerOfState_).
  const std::uint32_t entry = direct_ >= 0 ? kNoRow : entryOf(row);
  if (entry != kNoRow && verdictOf_[entry] >= 0) {
    const auto id = static_cast<std::uint32_t>(verdictOf_[entry]);
    return {id, &verdicts_[id]};
  }
  const Layout& l = *table_.layout_;
  bool askedNode = false;
  NodeVerdict v = detail::decideNode(cluster_, demand_, l.names[row], table_.factsOf(row), [&]() -> const Node& {
    askedNode = true;
    return *l.nodes[row];
  });
  const auto id = static_cast<std::uint32_t>(verdicts_.size());
  verdicts_.push_back(std::move(v));
  // A verdict read off the Node object (ineligibility, units not served) may
  // say something of that node alone: it is not shared.
  const Answer answer{id, &verdicts_.back()};
  if (askedNode) return answer;
  if (direct_ >= 0) {
    const std::uint32_t state = table_.stateId(row, static_cast<std::size_t>(direct_));
    if (state >= answerOfState_.size()) answerOfState_.resize(table_.states_->values.size(), Answer{0, nullptr});
    answerOfState_[state] = answer;
  } else if (entry != kNoRow) {
    verdictOf_[entry] = static_cast<std::int32_t>(id);
  }
  return answer;
}

void FitTable::Query::filterAll(std::span<const std::uint32_t> rows, std::vector<Answer>& out) {
  out.resize(rows.size());
  if (direct_ < 0) {
    for (std::size_t i = 0; i < rows.size(); ++i) out[i] = rows[i] == kNoRow ? Answer{0, nullptr} : filter(rows[i]);
    return;
  }
  // The state ids first (each load independent of the others, so many are in
  // flight at once), parked in the answers' id fields; then the answers.
  const auto column = static_cast<std::size_t>(direct_);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    out[i].id = rows[i] == kNoRow ? 0 : table_.stateId(rows[i], column);
  }
  for (std::size_t i = 0; i < rows.size(); ++i) {
    if (rows[i] == kNoRow) {
      out[i] = {0, nullptr};
      continue;
    }
    const std::uint32_t state = out[i].id;
    out[i] = state < answerOfState_.size() && answerOfState_[state].verdict ? answerOfState_[state] : decide(rows[i]);
  }
}

void FitTable::Query::scoreAll(std::span<const std::uint32_t> rows, ScoreStrategy strategy, std::vector<int>& out) {
  out.resize(rows.size());
  if (direct_ < 0) {
    for (std::size_t i = 0; i < rows.size(); ++i) out[i] = rows[i] == kNoRow ? 0 : score(rows[i], strategy);
    return;
  }
  const auto column = static_cast<std::size_t>(direct_);
  const std::size_t s = strategy == ScoreStrategy::Spread ? 1 : 0;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    out[i] = rows[i] == kNoRow ? -1 : static_cast<int>(table_.stateId(rows[i], column));
  }
  for (std::size_t i = 0; i < rows.size(); ++i) {
    if (out[i] < 0) {
      out[i] = 0;
      continue;
    }
    const auto state = static_cast<std::size_t>(out[i]);
    out[i] = state < scoreOfState_[s].size() && scoreOfState_[s][state] >= 0 ? scoreOfState_[s][state]
                                                                             : scoreOnce(rows[i], strategy);
  }
}

std::int64_t FitTable::Query::idleOthers(const DeviceClass& cls) {
  for (const auto& [c, idle] : idle_) {
    if (c == &cls) return idle;
  }
  std::int64_t idle = idleReservedByOthers(cluster_, view_, cls, demand_.organization);
  idle_.emplace_back(&cls, idle);
  return idle;
}

int FitTable::Query::scoreOnce(std::uint32_t row, ScoreStrategy strategy) {
  const std::size_t s = strategy == ScoreStrategy::Spread ? 1 : 0;
  // The direct case was looked up by the caller (scoreOfState_).
  const std::uint32_t entry = direct_ >= 0 ? kNoRow : entryOf(row);
  if (entry != kNoRow && scoreOf_[s][entry] >= 0) return scoreOf_[s][entry];
  int score = detail::scoreCore(cluster_, demand_, table_.layout_->names[row], strategy, table_.factsOf(row),
                                [&](const DeviceClass& cls) { return idleOthers(cls); });
  if (direct_ >= 0) {
    const std::uint32_t state = table_.stateId(row, static_cast<std::size_t>(direct_));
    if (state >= scoreOfState_[s].size()) scoreOfState_[s].resize(table_.states_->values.size(), -1);
    scoreOfState_[s][state] = score;
  } else if (entry != kNoRow) {
    scoreOf_[s][entry] = score;
  }
  return score;
}

}  // namespace tally::model
