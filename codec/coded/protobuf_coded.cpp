// codec's protobuf decoders on libprotobuf's CodedInputStream (a library of
// its own, so that only the tests, the fuzz target and the bench that compare
// the two readers link libprotobuf).

#include "../src/protobuf_decoders.hpp"
#include "tally/common/proto_coded_reader.hpp"

namespace tally::codec {

TALLY_CODEC_PROTOBUF_DECODERS_ON(proto::CodedReader)

}  // namespace tally::codec
