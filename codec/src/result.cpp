#include "tally/codec/result.hpp"

namespace tally::codec {

std::string joinField(std::string_view parent, std::string_view child) {
  if (parent.empty()) return std::string(child);
  if (child.empty()) return std::string(parent);
  std::string joined(parent);
  if (child.front() != '[') joined += '.';
  joined += child;
  return joined;
}

std::string DecodeError::describe() const {
  std::string text = item;
  if (!field.empty()) {
    if (!text.empty()) text += ": ";
    text += field;
  }
  if (!text.empty()) text += ": ";
  text += message;
  return text;
}

DecodeError&& DecodeError::under(std::string_view parent) && {
  field = joinField(parent, field);
  return std::move(*this);
}

DecodeError&& DecodeError::within(std::string_view place) && {
  if (item.empty()) {
    item = std::string(place);
  } else if (!place.empty()) {
    item = std::string(place) + " " + item;
  }
  return std::move(*this);
}

}  // namespace tally::codec
