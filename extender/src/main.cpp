// tally-extender: the kube-scheduler extender. Informers feed the model's
// incremental index; requests read immutable snapshots; bind records an
// assumed placement and posts the Binding.

#include <algorithm>
#include <CLI/CLI.hpp>
#include <boost/asio/ip/address.hpp>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <thread>

#include "tally/codec/codecs.hpp"
#include "tally/codec/json_text.hpp"
#include "tally/codec/snapshot.hpp"
#include "tally/common/log.hpp"
#include "tally/extender/allocator.hpp"
#include "tally/extender/assumptions.hpp"
#include "tally/extender/metrics.hpp"
#include "tally/extender/pod_binder.hpp"
#include "tally/extender/service.hpp"
#include "tally/runtime/client.hpp"
#include "tally/runtime/codec.hpp"
#include "tally/runtime/config.hpp"
#include "tally/runtime/manager.hpp"
#include "tally/runtime/process.hpp"
#include "tally/state/source_flags.hpp"
#include "tally/runtime/process_flags.hpp"
#include "tally/state/informers.hpp"

namespace {

using namespace tally;
using namespace tally::extender;
namespace obs = tally::observability;

struct Flags {
  std::string bindAddress = "127.0.0.1";
  std::uint16_t port = 8888;
  std::string urlPrefix = "/tally";
  std::uint16_t metricsPort = 8889;
  std::string scoring = "binpack";
  runtime::process::ProcessFlags process;
  runtime::process::ServingFlags serving{.threads = std::max(2u, std::thread::hardware_concurrency())};
  std::string clientCa;
  std::vector<std::string> allowedClients;
  std::size_t maxBodyBytes = 16 << 20;
  std::string assumeTtl = "30s", bindDeadline = "2s", bindPodWait = "500ms", bindPostTarget = "500ms";
  unsigned bindThreads = 64, bindPostsMin = 4;
  state::SourceFlags source;
  std::string snapshotFile;
  std::string gates = "published", gateStaleAfter = "300s";
};

void addFlags(CLI::App& app, Flags& f) {
  app.add_option("--bind-address", f.bindAddress, "Address of the verb listener")->capture_default_str();
  app.add_option("--port", f.port, "Port of <url-prefix>/{filter,prioritize,preempt,bind}, /healthz, /readyz, /metrics")
      ->capture_default_str();
  app.add_option("--url-prefix", f.urlPrefix, "Path prefix of the verbs")->capture_default_str();
  app.add_option("--metrics-port", f.metricsPort,
                 "Second listener on all addresses with only /healthz, /readyz, /metrics; 0 disables it")
      ->capture_default_str();
  app.add_option("--scoring,--score-strategy", f.scoring, "Prioritize strategy: binpack or spread")
      ->check(CLI::IsMember({"binpack", "spread"}))
      ->capture_default_str();
  runtime::process::addProcessFlags(app, f.process);
  runtime::process::addServingFlags(app, f.serving, "the verbs");
  app.get_option("--tls-cert-file")
      ->description("Serve the verb listener over HTTPS with this certificate chain (PEM); re-read when it changes");
  app.add_option("--client-ca-file", f.clientCa,
                 "CA bundle (PEM) that signs kube-scheduler's client certificate (extenders[].tlsConfig certFile); "
                 "the verbs then answer only callers with a certificate it verifies (401/403 otherwise). Needs "
                 "--tls-cert-file. Required unless --bind-address is a loopback address (a sidecar in the "
                 "scheduler's pod)");
  app.add_option("--allowed-clients", f.allowedClients,
                 "Names (subject CN or DNS subjectAltName) a verb caller's certificate must carry (comma-separated); "
                 "empty: any certificate --client-ca-file verifies")
      ->delimiter(',');
  app.add_option("--max-body-bytes", f.maxBodyBytes, "Largest request body; larger ones get 413")
      ->capture_default_str();
  state::addSourceFlags(app, f.source, "the verbs");
  app.add_option("--assume-ttl", f.assumeTtl,
                 "How long a placement recorded by bind holds its units without the watch confirming it")
      ->capture_default_str();
  app.add_option("--bind-threads", f.bindThreads,
                 "Threads posting Bindings (kept apart from the filter threads). kube-scheduler binds every pod in its "
                 "own goroutine and counts a pod scheduled only once its bind returns: at ~100 ms per POST under load, "
                 "N threads cap throughput near 10*N pods/s")
      ->capture_default_str();
  app.add_option("--bind-post-target", f.bindPostTarget,
                 "Binding POSTs run at most --bind-threads at once, and fewer while the API server answers them slower "
                 "than this: each answer within it raises the limit by about one per round, a slower one or a "
                 "failure cuts it by 30 % (once per round). Binds beyond the limit wait in arrival order, within "
                 "--bind-queue-deadline; keep it well under the extender entry's httpTimeout")
      ->capture_default_str();
  app.add_option("--bind-posts-min", f.bindPostsMin, "The fewest Binding POSTs the limit allows at once")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--bind-pod-wait", f.bindPodWait,
                 "How long a bind for a pod the pod watch has not delivered yet waits for its event before it is "
                 "refused as not seen (kube-scheduler's own watch can be ahead of the extender's); keep it well "
                 "under the extender entry's httpTimeout. 0: refuse at once")
      ->capture_default_str();
  app.add_option("--bind-queue-deadline", f.bindDeadline,
                 "A bind that waits longer than this for a bind thread is answered without posting (kube-scheduler has "
                 "given up on it and retries the pod); set it to the extender entry's httpTimeout. 0: no limit")
      ->capture_default_str();
  app.add_option("--snapshot-file", f.snapshotFile,
                 "Serve from a Kubernetes List JSON file instead of an API server (offline: benches, demos); "
                 "bind is then refused");
  app.add_option("--gates", f.gates,
                 "Where each pool's creation gate comes from: published (the CreationOpen condition tally-controller's "
                 "pool auditor writes; a pool without one is closed, 'not audited yet') or evaluated (no auditor runs: "
                 "the extender audits each pool itself on its snapshot)")
      ->check(CLI::IsMember({"published", "evaluated"}))
      ->capture_default_str();
  app.add_option("--gate-stale-after", f.gateStaleAfter,
                 "With --gates evaluated: how long a cache may go unconfirmed before the pools it feeds close "
                 "(StaleCapacity)")
      ->capture_default_str();
}

// Without `billingPlans` (--billing-plans "") the snapshot's catalogue is left
// out, as a live extender would watch no ConfigMap.
int loadSnapshotFile(const std::string& path, const std::optional<codec::BillingPlansLocation>& billingPlans,
                     CacheWriter& writer) {
  std::ifstream in(path);
  if (!in) {
    logError("cannot open --snapshot-file", {{"path", path}});
    return 2;
  }
  std::stringstream text;
  text << in.rdbuf();
  codec::SnapshotOptions options;
  if (billingPlans) options.billingPlans = *billingPlans;
  auto snapshot = codec::loadSnapshot(text.str(), options);
  if (!snapshot) {
    logError("cannot decode --snapshot-file", {{"path", path}, {"error", snapshot.error().describe()}});
    return 2;
  }
  model::Cluster& c = snapshot->cluster;
  if (!billingPlans) c.plans.reset();
  state::upsertCluster(writer, c);
  writer.flush();
  logInfo("serving from a snapshot file", {{"path", path}, {"nodes", c.nodes.size()}, {"pods", c.pods.size()}});
  return 0;
}

// Adds to `counter` what a running total grew by since it was last seen.
void forward(obs::Counter& counter, std::uint64_t total, std::uint64_t& seen) {
  if (total > seen) counter.inc(total - seen);
  seen = total;
}

void exportWriterStats(CacheWriter& writer, ExtenderMetrics& metrics) {
  // The writer keeps running totals; each scrape adds what grew since the last.
  struct Last {
    std::uint64_t publishes = 0, expired = 0, unchanged = 0, copies = 0, arrived = 0, timedOut = 0;
  };
  auto last = std::make_shared<Last>();
  metrics.registry().onScrape([&writer, &metrics, last] {
    PublishStats s = writer.stats();
    {
      auto snap = writer.snapshots().read();
      metrics.snapshotAge.set(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - snap->publishedAt).count());
      metrics.snapshotGeneration.set(static_cast<double>(snap->generation));
      metrics.assumedPlacements.set(static_cast<double>(snap->assumedPlacements));
    }
    if (s.publishes != last->publishes) {
      metrics.publishDuration.observe(std::chrono::duration<double>(s.lastPublish).count());
      last->publishes = s.publishes;
    }
    forward(metrics.assumptionsExpired, s.assumptionsExpired, last->expired);
    forward(metrics.bindPodArrived, s.bindPodArrivals, last->arrived);
    forward(metrics.bindPodWaitTimedOut, s.bindPodWaitsTimedOut, last->timedOut);
    forward(metrics.unchangedUpdates, s.skippedUnchanged, last->unchanged);
    forward(metrics.clusterCopies, s.clusterCopies, last->copies);
  });
}

void exportBinderStats(const PodBinder& binder, ExtenderMetrics& metrics) {
  metrics.registry().onScrape([&binder, &metrics] {
    metrics.bindPostLimit.set(binder.postLimit());
    metrics.bindPostsInFlight.set(binder.postsInFlight());
  });
}

void exportClientStats(std::shared_ptr<runtime::Client> client, ExtenderMetrics& metrics) {
  struct Last {
    std::uint64_t full = 0, resumed = 0;
  };
  auto last = std::make_shared<Last>();
  metrics.registry().onScrape([client = std::move(client), &metrics, last] {
    forward(metrics.apiConnectionsResumed, client->tlsResumptions(), last->resumed);
    forward(metrics.apiConnectionsFull, client->tlsFullHandshakes(), last->full);
  });
}

}  // namespace

int main(int argc, char** argv) {
  tally::extender::tuneAllocatorForLargeRequests();
  CLI::App app{
      "tally-extender: kube-scheduler extender (filter, prioritize, preempt, bind) deciding by Tally's GPU model"};
  Flags f;
  addFlags(app, f);
  CLI11_PARSE(app, argc, argv);

  if (auto logging = runtime::process::setUpLogging(f.process.logLevel, f.process.logFormat); !logging) {
    std::cerr << logging.error().message << "\n";
    return 2;
  }

  auto settings = state::sourceSettings(f.source);
  if (!settings) {
    std::cerr << settings.error() << "\n";
    return 2;
  }
  const state::SourceOptions watchOptions = settings->source;
  const std::optional<codec::BillingPlansLocation>& billingPlans = watchOptions.billingPlans;

  // Before any thread starts: they all inherit SIGTERM and SIGINT blocked.
  runtime::SignalStop signals;

  try {
    obs::Registry registry;
    ExtenderMetrics metrics(registry);

    CacheWriter::Options writerOptions;
    writerOptions.publishInterval = settings->publishInterval;
    writerOptions.assumeTtl = runtime::process::durationFlag("--assume-ttl", f.assumeTtl);
    writerOptions.bindPodWait = runtime::process::durationFlag("--bind-pod-wait", f.bindPodWait);
    writerOptions.tenancy = settings->tenancy;
    bool offline = !f.snapshotFile.empty();
    writerOptions.watched = offline ? std::set<model::Kind>{} : state::watchedKinds(watchOptions);
    if (f.gates == "evaluated") {
      writerOptions.gates = model::GateSource::Evaluated;
      writerOptions.gateAudit.staleAfterSeconds =
          std::chrono::duration_cast<std::chrono::seconds>(
              runtime::process::durationFlag("--gate-stale-after", f.gateStaleAfter))
              .count();
    }
    CacheWriter writer(writerOptions);
    exportWriterStats(writer, metrics);

    std::shared_ptr<runtime::Client> client;
    std::unique_ptr<state::Informers> watches;
    std::unique_ptr<PodBinder> binder;
    if (offline) {
      if (int rc = loadSnapshotFile(f.snapshotFile, billingPlans, writer)) return rc;
    } else {
      auto created = runtime::process::connect(runtime::process::clientFlags(f.process, "tally-extender/0.1"));
      if (!created) {
        logError("cannot reach Kubernetes", {{"error", created.error().describe()}});
        return 2;
      }
      client = std::move(created).value();
      exportClientStats(client, metrics);
      watches = std::make_unique<state::Informers>(client, writer, watchOptions, &metrics.registry());
      PodBinder::Options bo;
      bo.threads = f.bindThreads;
      bo.queueDeadline = runtime::process::durationFlag("--bind-queue-deadline", f.bindDeadline);
      bo.postLimit.target = runtime::process::durationFlag("--bind-post-target", f.bindPostTarget);
      bo.postLimit.min = f.bindPostsMin;
      bo.postLimit.max = f.bindThreads;
      bo.postLimit.initial = std::max(f.bindPostsMin, f.bindThreads / 2);
      binder = std::make_unique<PodBinder>(
          writer,
          [client](const wire::BindingArgs& a) -> std::string {
            auto status = client->bindPod(a.podNamespace, a.podName, a.podUid, a.node);
            if (status) return {};
            // A bind whose answer kube-scheduler gave up waiting for is retried;
            // the retry meets 409 from the pod already bound. Bound to this very
            // node is what was asked: success.
            if (status.error().httpStatus == 409) {
              auto pod = client->get(runtime::Resource::core("pods", a.podNamespace), a.podName);
              if (pod) {
                auto decoded = codec::decodeText<codec::PodCodec>(*pod);
                if (decoded && decoded->nodeName == a.node && (a.podUid.empty() || decoded->uid == a.podUid)) return {};
              }
            }
            return status.error().describe();
          },
          bo);
      exportBinderStats(*binder, metrics);
    }
    writer.start();
    if (watches) watches->start();

    ServiceOptions so;
    so.urlPrefix = f.urlPrefix;
    so.verbCallers = f.clientCa.empty() ? http::Caller::Anyone : http::Caller::VerifiedClient;
    so.strategy = f.scoring == "spread" ? model::ScoreStrategy::Spread : model::ScoreStrategy::BinPack;
    ExtenderService service(writer.snapshots(), metrics, so, binder.get());

    const http::ServerOptions serving = runtime::process::serverOptions(f.serving);  // checks the TLS pair
    if (!f.clientCa.empty() && f.serving.tlsCert.empty()) {
      throw std::runtime_error(
          "--client-ca-file needs --tls-cert-file and --tls-key-file (client certificates are TLS)");
    }
    if (f.clientCa.empty()) {
      boost::system::error_code ec;
      const auto address = boost::asio::ip::make_address(f.bindAddress, ec);
      if (ec || !address.is_loopback()) {
        throw std::runtime_error(
            "--bind-address " + f.bindAddress +
            " is reachable from other hosts: whoever reaches it could bind pods; give --client-ca-file (and "
            "--tls-cert-file) so only kube-scheduler's certificate is served, or listen on 127.0.0.1 as a sidecar");
      }
      logWarning("verbs served to any caller on loopback: only safe as a sidecar in the scheduler's pod",
                 {{"address", f.bindAddress}});
    }
    http::ServerOptions ho = serverOptions();
    ho.address = f.bindAddress;
    ho.port = f.port;
    ho.threads = serving.threads;
    ho.maxBodyBytes = f.maxBodyBytes;
    ho.maxConnections = serving.maxConnections;
    ho.readTimeout = serving.readTimeout;
    ho.idleTimeout = serving.idleTimeout;
    if (!f.serving.tlsCert.empty()) ho.tls = http::TlsFiles{.certFile = f.serving.tlsCert, .keyFile = f.serving.tlsKey};
    if (!f.clientCa.empty()) ho.tls->clients = http::ClientCertificates{f.clientCa, f.allowedClients};
    http::Router verbs;
    service.addVerbRoutes(verbs);
    service.addOperationRoutes(verbs);
    http::Server server(ho, std::move(verbs), service.observer());
    server.start();

    std::unique_ptr<http::Server> opsServer;
    if (f.metricsPort != 0) {
      http::ServerOptions oo = ho;
      oo.address = "0.0.0.0";
      oo.port = f.metricsPort;
      oo.threads = 1;
      oo.tls.reset();
      http::Router ops;
      service.addOperationRoutes(ops);
      opsServer = std::make_unique<http::Server>(oo, std::move(ops), service.observer());
      opsServer->start();
    }
    logInfo("tally-extender serving", {{"address", f.bindAddress},
                                       {"port", server.port()},
                                       {"prefix", f.urlPrefix},
                                       {"tls", server.tls()},
                                       {"metricsPort", opsServer ? opsServer->port() : 0},
                                       {"offline", offline},
                                       {"jsonKernel", std::string(runtime::kJsonKernel)}});

    signals.wait();
    logInfo("shutting down", {{"signal", signals.received()}});
    server.stop();
    if (opsServer) opsServer->stop();
    if (binder) binder->stop();
    if (watches) watches->stop();
    writer.stop();
  } catch (const std::exception& e) {
    logError("tally-extender failed", {{"error", e.what()}});
    return 1;
  }
  return 0;
}
