#!/usr/bin/env bash
# Runs COMMAND with az kept signed in as the workflow's app, for the end-to-end workflow (e2e.yml), whose jobs last
# longer than the tokens az caches (60-90 minutes):
#
#     scripts/az-signed-in.sh COMMAND [ARG...]
#
# az cannot renew the GitHub OIDC token it signed in with, which lives minutes (Azure/login#372: "The Azure CLI
# currently does not support ID token refresh"; Azure/azure-cli#28708), so every RENEW_SECONDS (240) it signs in
# again with a fresh one, as that workaround does; each token is masked in the log. Each sign-in goes into a
# config folder of its own, and AZURE_CONFIG_DIR, a link that COMMAND and everything it starts read (kubelogin, the
# Pulumi state backend and secrets provider, `az` itself), is switched to it in one rename once it is complete: no
# call reads a profile or token cache while `az login` writes it (concurrent az calls on one ~/.azure corrupt it:
# Azure/azure-cli#23642, #9427). A folder is removed two sign-ins later, when nothing still reads it.
# Needs ARM_CLIENT_ID, ARM_TENANT_ID, ARM_SUBSCRIPTION_ID and the job's id-token permission
# (ACTIONS_ID_TOKEN_REQUEST_URL, ACTIONS_ID_TOKEN_REQUEST_TOKEN). Exits with COMMAND's status.
set -euo pipefail

renew_seconds=${RENEW_SECONDS:-240}
base=$(mktemp -d "${RUNNER_TEMP:-/tmp}/az-config.XXXXXX")
link="$base/current"
ln -s "${AZURE_CONFIG_DIR:-$HOME/.azure}" "$link"  # where azure/login signed in, until the first renewal
export AZURE_CONFIG_DIR="$link"

renew() {
  # No errexit here: a failed mktemp, ln or mv must warn and try again, not end the loop silently while the run
  # goes on with tokens that expire.
  set +e
  local fresh previous="" current="" token
  while sleep "$renew_seconds"; do
    fresh=$(mktemp -d "$base/config.XXXXXX") || { echo "::warning::could not make a config folder"; continue; }
    if token=$(curl -sSf -H "Authorization: bearer $ACTIONS_ID_TOKEN_REQUEST_TOKEN" \
        "$ACTIONS_ID_TOKEN_REQUEST_URL&audience=api://AzureADTokenExchange" | jq -er .value); then
      echo "::add-mask::$token"
      if AZURE_CONFIG_DIR="$fresh" az login --service-principal --username "$ARM_CLIENT_ID" \
          --tenant "$ARM_TENANT_ID" --federated-token "$token" --output none &&
        AZURE_CONFIG_DIR="$fresh" az account set --subscription "$ARM_SUBSCRIPTION_ID"; then
        if ! { ln -sfn "$fresh" "$base/next" && mv -T "$base/next" "$link"; }; then  # rename(2): old or new, whole
          rm -rf "$fresh"
          echo "::warning::could not switch to the renewed Azure sign-in; trying again in $renew_seconds s"
          continue
        fi
        if [ -n "$previous" ]; then
          rm -rf "$previous"
        fi
        previous=$current
        current=$fresh
        continue
      fi
    fi
    rm -rf "$fresh"
    echo "::warning::could not renew the Azure sign-in; trying again in $renew_seconds s"
  done
}

renew &
renewing=$!
trap 'kill "$renewing" 2>/dev/null || true' EXIT
"$@"
