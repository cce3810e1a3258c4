#include "tally/runtime/admission/certificate_keeper.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "tally/common/json.hpp"
#include "tally/runtime/admission/review.hpp"
#include "tally/runtime/config.hpp"
#include "tally/runtime/json_watch.hpp"
#include "tally/common/log.hpp"
#include "tally/runtime/object_meta.hpp"

namespace tally::runtime::admission {

namespace {

namespace od = simdjson::ondemand;
using Clock = std::chrono::system_clock;

constexpr std::string_view kNamesAnnotation = "tally.dev/serving-names";
constexpr std::string_view kCaSinceAnnotation = "tally.dev/ca-since";            // unix seconds
constexpr std::string_view kServingSinceAnnotation = "tally.dev/serving-since";  // unix seconds

const Resource kMutating = Resource::of("admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations");
const Resource kValidating = Resource::of("admissionregistration.k8s.io", "v1", "validatingwebhookconfigurations");

// The fields of a kubernetes.io/tls Secret the keeper reads.
struct TlsSecret {
  ObjectMeta metadata;
  std::string caCrt, caKey, tlsCrt, tlsKey;
};

struct TlsSecretCodec {
  using Object = TlsSecret;
  static Result<Object> fromJson(od::value v) {
    TlsSecret out;
    od::object object;
    if (auto e = v.get_object().get(object)) return jsonError(e, "Secret");
    for (auto member : object) {
      od::field field;
      if (auto e = std::move(member).get(field)) return jsonError(e, "Secret");
      std::string_view key;
      if (auto e = field.unescaped_key().get(key)) return jsonError(e, "Secret key");
      if (key == "metadata") {
        if (auto s = decodeObjectMetaJson(field.value(), out.metadata, kMetaCore | kMetaAnnotations); !s) {
          return metaError(s.error());
        }
      } else if (key == "data") {
        StringPairs data;
        if (auto s = jsonStringMapInto(field.value(), data, "Secret data"); !s) return s.error();
        for (auto& [k, encoded] : data) {
          std::string* into = k == "ca.crt"    ? &out.caCrt
                              : k == "ca.key"  ? &out.caKey
                              : k == "tls.crt" ? &out.tlsCrt
                              : k == "tls.key" ? &out.tlsKey
                                               : nullptr;
          if (!into) continue;
          auto decoded = base64Decode(encoded);
          if (!decoded) return std::move(decoded).error().withContext("Secret data " + k);
          *into = std::move(decoded).value();
        }
      }
    }
    return out;
  }
  static std::string key(const Object& o) { return o.metadata.key(); }
  static std::string_view resourceVersion(const Object& o) { return o.metadata.resourceVersion; }
};

// The caBundle of each webhook of a configuration, in order.
struct WebhookConfiguration {
  std::string resourceVersion;
  std::vector<std::string> caBundles;  // base64, as stored
};

Result<WebhookConfiguration> decodeWebhookConfiguration(std::string_view body) {
  simdjson::padded_string padded(body);
  od::parser parser;
  od::document doc;
  WebhookConfiguration out;
  if (auto e = parser.iterate(padded).get(doc)) return jsonError(e, "webhook configuration");
  std::string_view rv;
  if (auto e = doc.at_pointer("/metadata/resourceVersion").get_string().get(rv)) {
    return jsonError(e, "webhook configuration metadata.resourceVersion");
  }
  out.resourceVersion.assign(rv);
  doc.rewind();
  od::array webhooks;
  auto found = doc.find_field("webhooks").get_array().get(webhooks);
  if (found == simdjson::NO_SUCH_FIELD) return out;
  if (found) return jsonError(found, "webhook configuration webhooks");
  for (auto item : webhooks) {
    od::object webhook;
    if (auto e = item.get_object().get(webhook)) return jsonError(e, "webhook");
    std::string_view bundle;
    auto e = webhook.find_field_unordered("clientConfig").find_field_unordered("caBundle").get_string().get(bundle);
    if (e && e != simdjson::NO_SUCH_FIELD) return jsonError(e, "webhook clientConfig.caBundle");
    out.caBundles.emplace_back(e ? std::string_view{} : bundle);
  }
  return out;
}

std::string join(const std::vector<std::string>& items, std::string_view separator) {
  std::string out;
  for (const auto& item : items) {
    if (!out.empty()) out.append(separator);
    out.append(item);
  }
  return out;
}

std::int64_t unixNow() {
  return std::chrono::duration_cast<std::chrono::seconds>(Clock::now().time_since_epoch()).count();
}

std::int64_t annotationSeconds(const ObjectMeta& meta, std::string_view key) {
  const std::string* v = meta.annotation(key);
  if (!v) return 0;
  try {
    return std::stoll(*v);
  } catch (...) {
    return 0;
  }
}

std::string readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Writes `content` to a temporary file beside `path`, flushes it to disk, and
// renames it over `path`: a reader sees the old file or the new, never half.
Status writeAtomically(const std::string& path, const std::string& content, mode_t mode) {
  const std::string next = path + ".next";
  const int fd = ::open(next.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) return Error(ErrorCode::kInternal, "cannot create " + next + ": " + std::strerror(errno));
  std::size_t written = 0;
  while (written < content.size()) {
    const ssize_t n = ::write(fd, content.data() + written, content.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      ::close(fd);
      return Error(ErrorCode::kInternal, "cannot write " + next + ": " + std::strerror(errno));
    }
    written += static_cast<std::size_t>(n);
  }
  const bool synced = ::fsync(fd) == 0;
  ::close(fd);
  if (!synced || ::rename(next.c_str(), path.c_str()) != 0) {
    return Error(ErrorCode::kInternal, "cannot replace " + path + ": " + std::strerror(errno));
  }
  return {};
}

}  // namespace

struct CertificateKeeper::State {
  std::shared_ptr<Client> client;
  CertificateKeeperOptions options;
  std::atomic<bool> forceServing{false}, forceCa{false};
  std::atomic<std::uint64_t> secretsCreated{0}, servingRotations{0}, caRotations{0}, bundleInjections{0}, conflicts{0},
      filesWritten{0};
  std::atomic<std::int64_t> lastInjection{0};  // unix seconds of the last caBundle patch
  Controller* leader = nullptr;
  Informer<TlsSecretCodec>* secrets = nullptr;

  std::vector<std::string> servingNames() const {
    std::vector<std::string> names;
    if (!options.serviceName.empty()) names = serviceDnsNames(options.serviceName, options.serviceNamespace);
    names.insert(names.end(), options.extraDnsNames.begin(), options.extraDnsNames.end());
    return names;
  }
  std::string namesAnnotation() const { return join(servingNames(), ",") + ";" + join(options.ipAddresses, ","); }
  Resource secretResource() const { return Resource::core("secrets", options.secretNamespace); }

  Result<CertificateAndKey> issue(const CertificateAndKey& ca) const {
    ServingRequest request;
    request.commonName = options.serviceName.empty() ? "tally-webhook" : options.serviceName;
    request.dnsNames = servingNames();
    request.ipAddresses = options.ipAddresses;
    request.validity = options.servingValidity;
    request.key = options.key;
    return issueServingCertificate(ca, request);
  }
  Result<CertificateAndKey> newCa() const {
    CaRequest request;
    request.commonName = (options.serviceName.empty() ? std::string("tally-webhook") : options.serviceName) + "-ca-" +
                         std::to_string(unixNow());
    request.validity = options.caValidity;
    request.key = options.key;
    return makeCa(request);
  }

  std::string secretBody(const TlsSecret& s) const {
    JsonWriter w;
    w.beginObject().field("apiVersion", "v1").field("kind", "Secret").key("metadata").beginObject();
    w.field("name", options.secretName).field("namespace", options.secretNamespace);
    if (!s.metadata.resourceVersion.empty()) w.field("resourceVersion", s.metadata.resourceVersion);
    w.key("labels").beginObject().field("app.kubernetes.io/managed-by", "tally").endObject();
    w.key("annotations").beginObject();
    for (const auto& [k, v] : s.metadata.annotations) w.field(k, v);
    w.endObject().endObject();
    w.field("type", "kubernetes.io/tls").key("data").beginObject();
    w.field("ca.crt", base64Encode(s.caCrt)).field("ca.key", base64Encode(s.caKey));
    w.field("tls.crt", base64Encode(s.tlsCrt)).field("tls.key", base64Encode(s.tlsKey));
    w.endObject().endObject();
    return w.str();
  }

  static void setAnnotation(ObjectMeta& meta, std::string_view key, std::string value) {
    for (auto& [k, v] : meta.annotations) {
      if (k == key) {
        v = std::move(value);
        return;
      }
    }
    meta.annotations.emplace_back(std::string(key), std::move(value));
  }

  Result<ReconcileResult> reconcileLeader();
  Result<ReconcileResult> createSecret();
  Result<bool> injectBundle(const std::string& bundle);
  Result<ReconcileResult> writeFiles(const std::string& key);
};

Result<ReconcileResult> CertificateKeeper::State::createSecret() {
  auto ca = newCa();
  if (!ca) return std::move(ca).error();
  auto serving = issue(*ca);
  if (!serving) return std::move(serving).error();
  TlsSecret s;
  s.caCrt = ca->certPem;
  s.caKey = ca->keyPem;
  s.tlsCrt = serving->certPem;
  s.tlsKey = serving->keyPem;
  setAnnotation(s.metadata, kNamesAnnotation, namesAnnotation());
  setAnnotation(s.metadata, kCaSinceAnnotation, std::to_string(unixNow()));
  setAnnotation(s.metadata, kServingSinceAnnotation, std::to_string(unixNow()));
  auto created = client->create(secretResource(), secretBody(s));
  if (!created) {
    if (created.error().is(ErrorCode::kAlreadyExists)) {
      conflicts.fetch_add(1);
      return ReconcileResult::requeue();
    }
    return std::move(created).error().withContext("create Secret " + options.secretName);
  }
  secretsCreated.fetch_add(1);
  logInfo("certificate keeper: created Secret", {{"secret", options.secretNamespace + "/" + options.secretName}});
  return ReconcileResult::requeue();
}

Result<bool> CertificateKeeper::State::injectBundle(const std::string& bundle) {
  const std::string encoded = base64Encode(bundle);
  bool patched = false;
  auto injectInto = [&](const Resource& resource, const std::string& name) -> Status {
    auto got = client->get(resource, name);
    if (!got) {
      if (got.error().is(ErrorCode::kNotFound)) return {};  // its informer brings us back when it appears
      return std::move(got).error().withContext("get " + resource.resource + "/" + name);
    }
    auto config = decodeWebhookConfiguration(*got);
    if (!config) return std::move(config).error().withContext(resource.resource + "/" + name);
    JsonPatch patch;
    patch.test("/metadata/resourceVersion", jsonString(config->resourceVersion));
    for (std::size_t i = 0; i < config->caBundles.size(); ++i) {
      if (config->caBundles[i] == encoded) continue;
      patch.add(JsonPatch::pointer({"webhooks", std::to_string(i), "clientConfig", "caBundle"}), jsonString(encoded));
    }
    if (patch.operations().size() == 1) return {};
    auto done = client->patch(resource, name, PatchType::kJsonPatch, patch.toJson());
    if (!done) return std::move(done).error().withContext("inject caBundle into " + resource.resource + "/" + name);
    bundleInjections.fetch_add(1);
    patched = true;
    return {};
  };
  for (const auto& name : options.mutatingWebhookConfigurations) {
    if (auto s = injectInto(kMutating, name); !s) return s.error();
  }
  for (const auto& name : options.validatingWebhookConfigurations) {
    if (auto s = injectInto(kValidating, name); !s) return s.error();
  }
  if (patched) lastInjection.store(unixNow());
  return patched;
}

Result<ReconcileResult> CertificateKeeper::State::reconcileLeader() {
  auto got = client->get(secretResource(), options.secretName);
  if (!got) {
    if (got.error().is(ErrorCode::kNotFound)) return createSecret();
    return std::move(got).error().withContext("get Secret " + options.secretName);
  }
  auto decoded = decodeJsonObject<TlsSecretCodec>(*got);
  if (!decoded) return std::move(decoded).error().withContext("Secret " + options.secretName);
  TlsSecret secret = std::move(*decoded);
  const auto now = Clock::now();
  const std::int64_t nowSeconds = unixNow();
  std::vector<std::string> bundle = splitCertificates(secret.caCrt);
  const bool caUsable = !bundle.empty() && keyMatches(bundle.front(), secret.caKey);
  auto caValidity = caUsable ? readValidity(bundle.front()) : Result<Validity>(Error(ErrorCode::kDecode, "no CA"));
  const bool servingUsable = caUsable && keyMatches(secret.tlsCrt, secret.tlsKey);
  const bool servingByCurrentCa = servingUsable && signedBy(secret.tlsCrt, bundle.front());
  auto servingValidity = servingUsable ? readValidity(secret.tlsCrt) : Result<Validity>(Error(ErrorCode::kDecode, ""));

  bool write = false;
  std::string what;
  Clock::time_point next = now + std::chrono::hours(1);
  if (!caUsable || !caValidity || now >= rotationDue(*caValidity, options.rotateFraction) || forceCa.load()) {
    // Step one of a CA rotation: the new CA joins the bundle; the serving
    // certificate stays until the bundle has reached the API server.
    auto ca = newCa();
    if (!ca) return std::move(ca).error();
    std::vector<std::string> kept{ca->certPem};
    for (const auto& old : bundle) {
      auto v = readValidity(old);
      if (kept.size() < 2 && v && v->notAfter > now) kept.push_back(old);
    }
    bundle = std::move(kept);
    secret.caCrt = join(bundle, "");
    secret.caKey = ca->keyPem;
    setAnnotation(secret.metadata, kCaSinceAnnotation, std::to_string(nowSeconds));
    write = true;
    what = "CA rotated";
    caRotations.fetch_add(1);
    forceCa.store(false);
    forceServing.store(true);
    next = now + options.bundlePropagation;
    if (!servingUsable) {
      auto serving = issue({bundle.front(), secret.caKey});
      if (!serving) return std::move(serving).error();
      secret.tlsCrt = serving->certPem;
      secret.tlsKey = serving->keyPem;
      setAnnotation(secret.metadata, kServingSinceAnnotation, std::to_string(nowSeconds));
    }
  } else {
    const bool due = !servingUsable || !servingByCurrentCa || !servingValidity ||
                     now >= rotationDue(*servingValidity, options.rotateFraction) || forceServing.load() ||
                     !secret.metadata.annotation(kNamesAnnotation) ||
                     *secret.metadata.annotation(kNamesAnnotation) != namesAnnotation();
    const std::int64_t bundleSince =
        std::max(annotationSeconds(secret.metadata, kCaSinceAnnotation), lastInjection.load());
    const auto propagated = Clock::time_point(std::chrono::seconds(bundleSince)) +
                            std::chrono::duration_cast<Clock::duration>(options.bundlePropagation);
    if (due && servingUsable && !servingByCurrentCa && now < propagated) {
      next = propagated;  // step two waits for the new bundle to have reached the API server
    } else if (due) {
      auto serving = issue({bundle.front(), secret.caKey});
      if (!serving) return std::move(serving).error();
      secret.tlsCrt = serving->certPem;
      secret.tlsKey = serving->keyPem;
      setAnnotation(secret.metadata, kNamesAnnotation, namesAnnotation());
      setAnnotation(secret.metadata, kServingSinceAnnotation, std::to_string(nowSeconds));
      write = true;
      what = "serving certificate rotated";
      servingRotations.fetch_add(1);
      forceServing.store(false);
      next = now + options.caOverlap;
    } else {
      next = std::min(rotationDue(*servingValidity, options.rotateFraction),
                      rotationDue(*caValidity, options.rotateFraction));
      // The previous CA leaves the bundle once nobody serves what it signed.
      const auto servingSince =
          Clock::time_point(std::chrono::seconds(annotationSeconds(secret.metadata, kServingSinceAnnotation)));
      const auto overlapEnd = servingSince + std::chrono::duration_cast<Clock::duration>(options.caOverlap);
      if (bundle.size() > 1 && now >= overlapEnd) {
        bundle.resize(1);
        secret.caCrt = bundle.front();
        write = true;
        what = "previous CA left the bundle";
      } else if (bundle.size() > 1) {
        next = std::min(next, overlapEnd);
      }
    }
  }

  if (write) {
    auto updated = client->update(secretResource(), options.secretName, secretBody(secret));
    if (!updated) {
      if (updated.error().is(ErrorCode::kConflict)) {
        conflicts.fetch_add(1);
        return ReconcileResult::requeue();
      }
      return std::move(updated).error().withContext("update Secret " + options.secretName);
    }
    logInfo("certificate keeper: " + what, {{"secret", options.secretNamespace + "/" + options.secretName}});
  }
  auto injected = injectBundle(secret.caCrt);
  if (!injected) return std::move(injected).error();
  if (*injected) next = std::min(next, now + options.bundlePropagation);
  const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(next - Clock::now());
  return ReconcileResult::requeueAfter(
      std::clamp(wait, std::chrono::milliseconds(200), std::chrono::milliseconds(std::chrono::hours(1))));
}

Result<ReconcileResult> CertificateKeeper::State::writeFiles(const std::string& key) {
  auto snapshot = secrets->snapshot();
  const TlsSecret* secret = snapshot->get(key);
  if (!secret || secret->tlsCrt.empty() || !keyMatches(secret->tlsCrt, secret->tlsKey)) return ReconcileResult::done();
  const std::string certPath = options.directory + "/tls.crt";
  const std::string keyPath = options.directory + "/tls.key";
  if (readFile(certPath) == secret->tlsCrt && readFile(keyPath) == secret->tlsKey) return ReconcileResult::done();
  std::error_code ec;
  std::filesystem::create_directories(options.directory, ec);
  // The key first: a server that looks between the two renames finds a pair
  // that does not match, keeps what it serves, and looks again.
  if (auto s = writeAtomically(keyPath, secret->tlsKey, 0600); !s) return s.error();
  if (auto s = writeAtomically(certPath, secret->tlsCrt, 0644); !s) return s.error();
  filesWritten.fetch_add(1);
  return ReconcileResult::done();
}

CertificateKeeper::CertificateKeeper(std::shared_ptr<Client> client, CertificateKeeperOptions options)
    : options_(std::move(options)), state_(std::make_shared<State>()) {
  state_->client = std::move(client);
  state_->options = options_;
}

CertificateKeeper::~CertificateKeeper() = default;

void CertificateKeeper::attach(Manager& manager) {
  if (!managing()) return;
  auto state = state_;
  InformerOptions secretWatch;
  secretWatch.resource = state->secretResource();
  secretWatch.fieldSelector = "metadata.name=" + options_.secretName;
  auto& secrets = manager.informer<TlsSecretCodec>(secretWatch);
  state->secrets = &secrets;

  ControllerOptions files;
  files.name = "certificate-files";
  files.leaderOnly = false;
  auto& writer =
      manager.controller(files, [state](const std::string& key, std::stop_token) { return state->writeFiles(key); });
  writer.watch(secrets);

  ControllerOptions leader;
  leader.name = "certificate-keeper";
  leader.leaderOnly = true;
  auto& keeper =
      manager.controller(leader, [state](const std::string&, std::stop_token) { return state->reconcileLeader(); });
  state->leader = &keeper;
  const std::string secretKey = namespacedKey(options_.secretNamespace, options_.secretName);
  keeper.watch(secrets, [secretKey](const TlsSecret&) { return std::vector<std::string>{secretKey}; });
  // A configuration created or changed (its caBundle dropped by an apply)
  // gets the bundle again.
  auto toSecret = [secretKey](const MetaObject&) { return std::vector<std::string>{secretKey}; };
  if (!options_.mutatingWebhookConfigurations.empty()) {
    keeper.watch(manager.informer<MetaCodec>(InformerOptions{.resource = kMutating}), toSecret);
  }
  if (!options_.validatingWebhookConfigurations.empty()) {
    keeper.watch(manager.informer<MetaCodec>(InformerOptions{.resource = kValidating}), toSecret);
  }
  // Runs whenever this replica starts leading, even before the Secret or any
  // configuration exists (nothing else would enqueue it then).
  keeper.enqueueOnStart(secretKey);
}

http::TlsFiles CertificateKeeper::tlsFiles() const {
  http::TlsFiles files;
  if (!managing()) {
    files.certFile = options_.certFile;
    files.keyFile = options_.keyFile;
  } else {
    files.certFile = options_.directory + "/tls.crt";
    files.keyFile = options_.directory + "/tls.key";
  }
  return files;
}

bool CertificateKeeper::ready() const {
  const auto files = tlsFiles();
  return keyMatches(readFile(files.certFile), readFile(files.keyFile));
}

void CertificateKeeper::forceRotation(bool withCa) {
  if (withCa) {
    state_->forceCa.store(true);
  } else {
    state_->forceServing.store(true);
  }
  if (state_->leader) state_->leader->enqueue(namespacedKey(options_.secretNamespace, options_.secretName));
}

CertificateKeeperStats CertificateKeeper::stats() const {
  CertificateKeeperStats s;
  s.secretsCreated = state_->secretsCreated.load();
  s.servingRotations = state_->servingRotations.load();
  s.caRotations = state_->caRotations.load();
  s.bundleInjections = state_->bundleInjections.load();
  s.conflicts = state_->conflicts.load();
  s.filesWritten = state_->filesWritten.load();
  return s;
}

}  // namespace tally::runtime::admission
