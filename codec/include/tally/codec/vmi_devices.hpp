#pragma once
// What the VM door writes into a VMI it admits: spec.domain.devices.gpus with
// Tally's entries (name, deviceName: the permitted host device) after the
// entries of others, kept as they were read (readDomainDevices).

#include <string>
#include <vector>

#include "tally/codec/admission_objects.hpp"
#include "tally/model/vmi.hpp"

namespace tally::codec {

// The JSON value for spec.domain.devices.gpus when `domain.hasDevices`, else
// for spec.domain.devices (an object holding only gpus). Entries of others
// whose names Tally's take are replaced.
std::string encodeVmiGpus(const DomainDevices& domain, const std::vector<model::VmiGpu>& ours);

}  // namespace tally::codec
