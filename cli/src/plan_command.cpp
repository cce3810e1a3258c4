#include <fstream>
#include <iostream>
#include <sstream>

#include "commands.hpp"
#include "plan_output.hpp"
#include "tally/codec/reservation_record.hpp"
#include "tally/common/expected.hpp"
#include "tally/model/pool.hpp"

namespace tally::cli {
namespace {

// "org/addon=quantity"; the error quotes the flag's text and says what is wrong.
Expected<model::AddonQuantityChange, std::string> parseAddonChange(const std::string& text) {
  const std::string flag = "--addon \"" + text + "\": ";
  const auto slash = text.find('/');
  const auto equals = text.find('=', slash == std::string::npos ? 0 : slash);
  if (slash == std::string::npos || equals == std::string::npos || slash == 0 || equals == slash + 1)
    return flag + "want <organization>/<add-on>=<quantity>";
  model::AddonQuantityChange change;
  change.organization = text.substr(0, slash);
  change.addonId = text.substr(slash + 1, equals - slash - 1);
  const std::string quantity = text.substr(equals + 1);
  const std::string notCount = flag + "quantity \"" + quantity + "\" is not a whole number of 0 or more";
  try {
    std::size_t used = 0;
    change.quantity = std::stoll(quantity, &used);
    if (used != quantity.size() || change.quantity < 0) return notCount;
  } catch (const std::exception&) {
    return notCount;
  }
  return change;
}

// "node=mode"; the error quotes the flag's text and says what is wrong.
Expected<model::NodeModeChange, std::string> parseNodeModeChange(const std::string& text) {
  const std::string flag = "--node-mode \"" + text + "\": ";
  const auto equals = text.find('=');
  if (equals == std::string::npos || equals == 0) return flag + "want <node>=<mode>";
  model::NodeModeChange change;
  change.node = text.substr(0, equals);
  change.expectedMode = model::parseNodeMode(text.substr(equals + 1));
  if (change.expectedMode == model::NodeMode::Unknown || change.expectedMode == model::NodeMode::Unset)
    return flag + "mode \"" + text.substr(equals + 1) + "\" is not a workload mode";
  return change;
}

int badInput(const std::string& message) {
  std::cerr << "tallyctl plan: " << message << '\n';
  return kExitBadInput;
}

}  // namespace

int runPlan(const PlanOptions& options) {
  const int changes = !options.recordFile.empty() + !options.addon.empty() + !options.nodeMode.empty();
  if (changes != 1) return badInput("give exactly one of --record, --addon, --node-mode");

  std::optional<model::Change> change;
  std::string recordText;
  if (!options.recordFile.empty()) {
    std::ifstream in(options.recordFile, std::ios::binary);
    if (!in) return badInput("record " + options.recordFile + ": cannot be opened");
    std::ostringstream text;
    text << in.rdbuf();
    recordText = text.str();
    codec::RecordResult parsed = codec::decodeReservationRecord(recordText, options.recordFile);
    if (!parsed) {
      for (const auto& problem : parsed.error().problems) {
        std::cout << "refused: " << model::toString(problem.code) << ": " << problem.message << '\n';
      }
      return kExitCheckFailed;
    }
    change = model::AddRecordChange{std::move(parsed).value()};
  } else if (!options.addon.empty()) {
    auto addon = parseAddonChange(options.addon);
    if (!addon) return badInput(addon.error());
    change = std::move(addon).value();
  } else {
    auto mode = parseNodeModeChange(options.nodeMode);
    if (!mode) return badInput(mode.error());
    change = std::move(mode).value();
  }

  auto snapshot = loadInputs(options.input);
  if (!snapshot) return badInput(snapshot.error().describe());
  printSkipped(*snapshot);

  const model::PlanResult plan = model::plan(snapshot->cluster, *change);
  std::cout << (options.output == "json" ? planJson(plan) : planText(plan));
  if (plan.decision.allowed() && !recordText.empty() && options.output != "json") {
    std::cout << "\nthe record may be committed to the ledger as it is:\n---\n" << recordText;
  }
  return plan.decision.allowed() ? kExitOk : kExitCheckFailed;
}

}  // namespace tally::cli
