#!/usr/bin/env bash
# Create, once, the team's Pulumi state backend: a private blob container for state and a Key Vault key
# that encrypts the stacks' secrets. Needs `az login` with rights to create resources and role assignments.
#
#   scripts/create-state-backend.sh RESOURCE_GROUP STORAGE_ACCOUNT KEY_VAULT [LOCATION]
#
# Then, for people and for the workflows (repository variables PULUMI_BACKEND_URL, PULUMI_SECRETS_PROVIDER):
#   pulumi login "azblob://state?storage_account=STORAGE_ACCOUNT"
#   pulumi stack init NAME --secrets-provider "azurekeyvault://KEY_VAULT.vault.azure.net/keys/pulumi"
set -euo pipefail

if [[ $# -lt 3 ]]; then
  echo "usage: $0 RESOURCE_GROUP STORAGE_ACCOUNT KEY_VAULT [LOCATION]" >&2
  exit 2
fi
group=$1 account=$2 vault=$3 location=${4:-eastus}
me=$(az ad signed-in-user show --query id --output tsv 2>/dev/null || az account show --query user.name --output tsv)

# A new role assignment takes up to 10 minutes to apply (Azure RBAC troubleshooting): a data-plane call right after
# the assignment that allows it is refused with 403 until then. Retry it, every 15 seconds, for up to 10 minutes.
retry() {
  local tries=40
  until "$@"; do
    tries=$((tries - 1))
    if [[ $tries -eq 0 ]]; then
      echo "still refused after 10 minutes: $*" >&2
      return 1
    fi
    echo "waiting for the role assignment to apply..." >&2
    sleep "${RETRY_SECONDS:-15}"
  done
}

# A fresh subscription has not registered these (MissingSubscriptionRegistration).
az provider register --namespace Microsoft.Storage --wait --output none
az provider register --namespace Microsoft.KeyVault --wait --output none

az group create --name "$group" --location "$location" --tags purpose=pulumi-state --output none

# State: Entra ID only (no shared keys), TLS 1.2, no public blobs, versioning and soft delete to undo mistakes.
az storage account create --name "$account" --resource-group "$group" --location "$location" \
  --sku Standard_ZRS --kind StorageV2 --min-tls-version TLS1_2 --https-only true \
  --allow-blob-public-access false --allow-shared-key-access false --output none
az storage account blob-service-properties update --account-name "$account" --resource-group "$group" \
  --enable-versioning true --enable-delete-retention true --delete-retention-days 30 --output none
account_id=$(az storage account show --name "$account" --resource-group "$group" --query id --output tsv)
az role assignment create --assignee "$me" --role "Storage Blob Data Contributor" --scope "$account_id" --output none
retry az storage container create --name state --account-name "$account" --auth-mode login --output none

# Secrets: an RBAC Key Vault with purge protection and one RSA key; Pulumi wraps each stack's data key with it.
az keyvault create --name "$vault" --resource-group "$group" --location "$location" \
  --enable-rbac-authorization true --enable-purge-protection true --output none
vault_id=$(az keyvault show --name "$vault" --query id --output tsv)
az role assignment create --assignee "$me" --role "Key Vault Crypto Officer" --scope "$vault_id" --output none
retry az keyvault key create --vault-name "$vault" --name pulumi --kty RSA --size 3072 --output none

cat <<DONE
State backend ready. Give the CI identity "Storage Blob Data Contributor" on $account_id
and "Key Vault Crypto User" on $vault_id, then set the repository variables:
  PULUMI_BACKEND_URL=azblob://state?storage_account=$account
  PULUMI_SECRETS_PROVIDER=azurekeyvault://$vault.vault.azure.net/keys/pulumi
DONE
