#pragma once
// The one JSON and the one protobuf decoder of ObjectMeta (library
// tally_object_meta). Both read the `metadata` message/object itself, keep the
// parts asked for, and skip everything else unread. Their errors name the
// field under "metadata"; the layer above wraps them into its own error type.

#include <simdjson.h>

#include <string_view>

#include "tally/common/object_meta.hpp"

namespace tally {

// metav1.ObjectMeta as JSON; null reads as empty metadata.
MetaStatus decodeObjectMetaJson(simdjson::ondemand::value json, ObjectMeta& out, unsigned parts = kMetaAll);

// metav1.ObjectMeta as protobuf: name 1, namespace 3, uid 5, resourceVersion 6,
// generation 7, creationTimestamp 8 (Time: seconds 1), deletionTimestamp 9,
// labels 11, annotations 12, ownerReferences 13 (OwnerReference: kind 1,
// name 3, uid 4, apiVersion 5, controller 6), finalizers 14.
MetaStatus decodeObjectMetaProtobuf(std::string_view message, ObjectMeta& out, unsigned parts = kMetaAll);

}  // namespace tally
