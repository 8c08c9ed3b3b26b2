// shoal-test-cluster: the test cluster (TestCluster: the fake API server, the test kubelet running
// the built binaries as pods) as a process that real clients can be pointed at, for the
// end-to-end scripts in tests/e2e/: it writes a kubeconfig whose user is the cluster's admin
// (what `kubectl` and `helm` use), prints one line "ready <server URL> <kubeconfig>" on stdout
// once it serves, and serves until SIGTERM or SIGINT, then stops the pods and the server.
//
//   shoal-test-cluster --kubeconfig out.yaml --work-dir DIR [--ip-prefix 127.X.Y] [--operators N]
//                      [--namespaces a,b] [--in-cluster] [--crd FILE]... [--image NAME=BINARY]...
//                      [--keep-ended-empty-dirs]
//
// --in-cluster lets pods talk to the API server as in a cluster (TestClusterOptions::in_cluster):
// the Helm chart's operator Deployment then runs. --namespaces lists the namespaces whose pods
// the kubelet runs (default: default). --crd serves more CRDs from the start (as a cluster that
// has prometheus-operator's); --image maps more images (a container's command[0]) to binaries;
// --keep-ended-empty-dirs keeps what a restarted pod left in its emptyDirs (<volume>.ended-<uid>).
//
// --operators starts N shoal-operator processes outside the cluster (as `make run` does with a
// kubeconfig; their logs are DIR/operator-<i>.log), for scripts that install no operator with
// Helm.
#include <signal.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <iostream>

#include "support/fake_kube/test_cluster.h"
#include "support/loopback.h"

#ifndef SHOAL_OPERATOR_BIN
#error "SHOAL_OPERATOR_BIN, SHOAL_SIDECAR_BIN and SHOAL_CLI_BIN come from CMake"
#endif

int main(int argc, char** argv) {
  std::string kubeconfig, work_dir, ip_prefix = shoal::testing::RandomLoopbackPrefix();
  CLI::App app{"The test cluster (fake API server and test kubelet) for real kubectl and helm"};
  app.add_option("--kubeconfig", kubeconfig, "where to write the admin kubeconfig")->required();
  app.add_option("--work-dir", work_dir, "an existing directory for the node, logs and volumes")
      ->required()
      ->check(CLI::ExistingDirectory);
  app.add_option("--ip-prefix", ip_prefix, "pods get PREFIX.2, PREFIX.3, ... (127.X.Y)");
  int operators = 0;
  app.add_option("--operators", operators, "shoal-operator processes to start beside it")
      ->check(CLI::Range(0, 3));
  std::string namespaces = "default";
  bool in_cluster = false;
  std::vector<std::string> crds, images;
  app.add_option("--namespaces", namespaces, "comma-separated namespaces whose pods run here");
  app.add_flag("--in-cluster", in_cluster,
               "pods get the API server's address, CA and ServiceAccount tokens");
  app.add_option("--crd", crds, "another CRD file to serve from the start")
      ->check(CLI::ExistingFile);
  app.add_option("--image", images, "NAME=BINARY: the host binary that plays image NAME");
  std::vector<std::string> image_paths;
  app.add_option("--image-path", image_paths,
                 "PATH=DIR: the host directory that plays PATH inside every image");
  bool keep_ended_empty_dirs = false;
  app.add_flag("--keep-ended-empty-dirs", keep_ended_empty_dirs,
               "keep an ended pod's emptyDir volumes as <volume>.ended-<uid>");
  CLI11_PARSE(app, argc, argv);

  // Block the stop signals before any thread starts, and wait for them below.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);

  shoal::testing::TestClusterOptions o;
  o.work_dir = work_dir;
  o.operator_binary = SHOAL_OPERATOR_BIN;
  o.sidecar_binary = SHOAL_SIDECAR_BIN;
  o.shoal_binary = SHOAL_CLI_BIN;
  o.ip_prefix = ip_prefix;
  o.serve_tls = true;
  o.in_cluster = in_cluster;
  o.keep_ended_empty_dirs = keep_ended_empty_dirs;
  o.namespaces.clear();
  for (size_t start = 0; start <= namespaces.size();) {
    size_t comma = namespaces.find(',', start);
    if (comma == std::string::npos) comma = namespaces.size();
    if (comma > start) o.namespaces.push_back(namespaces.substr(start, comma - start));
    start = comma + 1;
  }
  o.extra_crd_files = crds;
  for (const auto& image : images) {
    const size_t eq = image.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == image.size()) {
      std::cerr << "shoal-test-cluster: --image wants NAME=BINARY, got \"" << image << "\"\n";
      return 2;
    }
    o.extra_images[image.substr(0, eq)] = image.substr(eq + 1);
  }
  for (const auto& path : image_paths) {
    const size_t eq = path.find('=');
    if (eq == std::string::npos || eq == 0 || path[0] != '/' || eq + 1 == path.size()) {
      std::cerr << "shoal-test-cluster: --image-path wants /PATH=DIR, got \"" << path << "\"\n";
      return 2;
    }
    o.image_paths[path.substr(0, eq)] = path.substr(eq + 1);
  }
  auto cluster = shoal::testing::TestCluster::Start(o);
  if (!cluster.ok()) {
    std::cerr << "shoal-test-cluster: " << cluster.status().ToString() << "\n";
    return 1;
  }
  const std::string server = (*cluster)->secure_url();
  {
    const std::string tmp = kubeconfig + ".tmp";
    std::ofstream out(tmp);
    out << "apiVersion: v1\nkind: Config\ncurrent-context: shoal-test\n"
        << "clusters:\n- name: shoal-test\n  cluster:\n    server: " << server << "\n"
        << "    certificate-authority: " << (*cluster)->ca_file() << "\n"
        << "users:\n- name: admin\n  user:\n    token: " << shoal::testing::kClusterAdminToken
        << "\n"
        << "contexts:\n- name: shoal-test\n  context:\n    cluster: shoal-test\n"
        << "    user: admin\n    namespace: default\n";
    out.close();
    if (!out || std::rename(tmp.c_str(), kubeconfig.c_str()) != 0) {
      std::cerr << "shoal-test-cluster: cannot write " << kubeconfig << "\n";
      return 1;
    }
  }
  for (int i = 0; i < operators; ++i) {
    if (auto st = (*cluster)->StartOperator(std::to_string(i)); !st.ok()) {
      std::cerr << "shoal-test-cluster: starting an operator: " << st.ToString() << "\n";
      return 1;
    }
  }
  std::cout << "ready " << server << " " << kubeconfig << std::endl;
  int sig = 0;
  sigwait(&stop, &sig);
  std::cerr << "shoal-test-cluster: signal " << sig << ", stopping\n";
  cluster->reset();
  return 0;
}
