#!/usr/bin/env bash
# Runs one e2e scenario of Tally's scheduler extender against a real
# kube-apiserver + kube-scheduler + kwok (see e2e/suite/README.md).
#
#   e2e/suite/run.sh SCENARIO        a_modes b_held c_launcher d_fake_launcher
#                                    e_reservation f_gate g_overcapacity h_race
#   e2e/suite/run.sh --list
#
# Environment: TALLY_EXTENDER_BIN (the tally-extender binary; CTest passes the
# build tree's), TALLY_E2E_LOG_DIR (logs of a failed run are kept there),
# TALLY_E2E_KUBECONFIG + TALLY_E2E_SCHEDULER_NAME (use a running cluster where
# Tally is installed instead of starting one).
# Exit: 0 all checks passed, 1 a check failed, 77 skipped (CTest: Skipped).
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
if [[ "${1:-}" == --list ]]; then
  for f in "$here"/scenarios/*.sh; do basename "$f" .sh; done
  exit 0
fi
if [[ $# -ne 1 || "$1" == -h || "$1" == --help ]]; then
  sed -n '2,/^set -uo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'
  exit 2
fi
scenario_file="$here/scenarios/$1.sh"
[[ -f "$scenario_file" ]] || { echo "unknown scenario '$1' (see --list)"; exit 2; }
# shellcheck source=lib.sh
source "$here/lib.sh"
# The scenario id becomes part of node, namespace and cluster names.
suite_begin "$(tr '_' '-' <<<"$1")"
# shellcheck source=/dev/null
source "$scenario_file"
suite_finish
