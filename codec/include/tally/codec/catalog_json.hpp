#pragma once
// The catalogue options of a namespace as JSON: what the controller's
// GET /options answers and what `tallyctl options -o json` prints, one shape.
//
// {"namespace":"acme-ml","classes":[{"class":"h200","resourceName":"...",
//   "workload":"vm","allocation":"passthrough","maxCount":8,"orderable":true,
//   "largestCount":4,"refusals":[{"code":"NoSingleNode","message":"..."}]}]}

#include <string>

#include "tally/model/catalog.hpp"

namespace tally::codec {

std::string encodeCatalog(const model::CatalogOptions& options);

}  // namespace tally::codec
