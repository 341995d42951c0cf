"""Pulumi mocks that answer like Azure and Kubernetes would, deterministically.

Ids are real Azure id shapes under a zero subscription; GUIDs are uuid5 of the stack and logical name, so the
same config always renders the same bytes.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import uuid
from typing import Any

import yaml
from pulumi.runtime import MockCallArgs, MockResourceArgs, Mocks

from components.kubernetes.kubeconfig import AKS_SERVER_ID

SUBSCRIPTION = "00000000-0000-0000-0000-000000000000"
TENANT = "11111111-1111-1111-1111-111111111111"
DEPLOYER_OBJECT_ID = "22222222-2222-2222-2222-222222222222"
AZURE_CLI_CLIENT_ID = "80faf920-1908-4b52-b5ef-a8e7bedfc67a"
_NS = uuid.UUID("6f1c2a57-6f0e-4d3a-9d9b-6b1f0f5a0b1e")

# Azure resource type → (ARM path under the resource group, input holding each name segment).
_ARM_PATHS: dict[str, tuple[str, ...]] = {
    "azure-native:network:VirtualNetwork": ("Microsoft.Network/virtualNetworks/{virtualNetworkName}",),
    "azure-native:network:Subnet": ("Microsoft.Network/virtualNetworks/{virtualNetworkName}/subnets/{subnetName}",),
    "azure-native:network:PrivateEndpoint": ("Microsoft.Network/privateEndpoints/{privateEndpointName}",),
    "azure-native:network:VirtualNetworkPeering": (
        "Microsoft.Network/virtualNetworks/{virtualNetworkName}/virtualNetworkPeerings/{virtualNetworkPeeringName}",),
    "azure-native:network:PrivateDnsZoneGroup": (
        "Microsoft.Network/privateEndpoints/{privateEndpointName}/privateDnsZoneGroups/{privateDnsZoneGroupName}",),
    "azure-native:privatedns:PrivateZone": ("Microsoft.Network/privateDnsZones/{privateZoneName}",),
    "azure-native:privatedns:VirtualNetworkLink": (
        "Microsoft.Network/privateDnsZones/{privateZoneName}/virtualNetworkLinks/{virtualNetworkLinkName}",),
    "azure-native:containerservice:ManagedCluster": ("Microsoft.ContainerService/managedClusters/{resourceName}",),
    "azure-native:containerservice:AgentPool": (
        "Microsoft.ContainerService/managedClusters/{resourceName}/agentPools/{agentPoolName}",),
    "azure-native:containerservice:MaintenanceConfiguration": (
        "Microsoft.ContainerService/managedClusters/{resourceName}/maintenanceConfigurations/{configName}",),
    "azure-native:containerregistry:Registry": ("Microsoft.ContainerRegistry/registries/{registryName}",),
    "azure-native:storage:StorageAccount": ("Microsoft.Storage/storageAccounts/{accountName}",),
    "azure-native:storage:BlobServiceProperties": (
        "Microsoft.Storage/storageAccounts/{accountName}/blobServices/default",),
    "azure-native:storage:BlobContainer": (
        "Microsoft.Storage/storageAccounts/{accountName}/blobServices/default/containers/{containerName}",),
    "azure-native:managedidentity:UserAssignedIdentity": (
        "Microsoft.ManagedIdentity/userAssignedIdentities/{resourceName}",),
    "azure-native:monitor:AzureMonitorWorkspace": ("Microsoft.Monitor/accounts/{azureMonitorWorkspaceName}",),
    "azure-native:monitor:DataCollectionEndpoint": (
        "Microsoft.Insights/dataCollectionEndpoints/{dataCollectionEndpointName}",),
    "azure-native:monitor:DataCollectionRule": ("Microsoft.Insights/dataCollectionRules/{dataCollectionRuleName}",),
    "azure-native:monitor:ActionGroup": ("Microsoft.Insights/actionGroups/{actionGroupName}",),
    "azure-native:alertsmanagement:PrometheusRuleGroup": (
        "Microsoft.AlertsManagement/prometheusRuleGroups/{ruleGroupName}",),
    "azure-native:dashboard:Grafana": ("Microsoft.Dashboard/grafana/{workspaceName}",),
    "azure-native:operationalinsights:Workspace": ("Microsoft.OperationalInsights/workspaces/{workspaceName}",),
    "azure-native:managedidentity:FederatedIdentityCredential": (
        "Microsoft.ManagedIdentity/userAssignedIdentities/{resourceName}/federatedIdentityCredentials/"
        "{federatedIdentityCredentialResourceName}",),
}
_EXTENSIONS = {
    "azure-native:monitor:DataCollectionRuleAssociation": (
        "Microsoft.Insights/dataCollectionRuleAssociations", "associationName"),
    "azure-native:monitor:DiagnosticSetting": ("Microsoft.Insights/diagnosticSettings", "name"),
}
_NAME_INPUT = {
    "azure-native:network:VirtualNetwork": "virtualNetworkName",
    "azure-native:network:Subnet": "subnetName",
    "azure-native:network:PrivateEndpoint": "privateEndpointName",
    "azure-native:privatedns:PrivateZone": "privateZoneName",
    "azure-native:containerservice:ManagedCluster": "resourceName",
    "azure-native:containerservice:AgentPool": "agentPoolName",
    "azure-native:containerregistry:Registry": "registryName",
    "azure-native:storage:StorageAccount": "accountName",
    "azure-native:storage:BlobContainer": "containerName",
    "azure-native:resources:ResourceGroup": "resourceGroupName",
    "azure-native:managedidentity:UserAssignedIdentity": "resourceName",
    "azure-native:monitor:AzureMonitorWorkspace": "azureMonitorWorkspaceName",
    "azure-native:dashboard:Grafana": "workspaceName",
    "azure-native:managedidentity:FederatedIdentityCredential": "federatedIdentityCredentialResourceName",
}


def guid(*parts: str) -> str:
    return str(uuid.uuid5(_NS, "/".join(parts)))


def azure_id(typ: str, name: str, inputs: dict[str, Any]) -> str:
    """The id Azure would give this resource."""
    sub = f"/subscriptions/{SUBSCRIPTION}"
    if typ == "azure-native:resources:ResourceGroup":
        return f"{sub}/resourceGroups/{inputs.get('resourceGroupName', name)}"
    if typ == "azure-native:authorization:RoleAssignment":
        return f"{inputs.get('scope', sub)}/providers/Microsoft.Authorization/roleAssignments/{guid(typ, name)}"
    if typ in _EXTENSIONS:  # resources that live under another resource's id
        path, name_input = _EXTENSIONS[typ]
        return f"{inputs.get('resourceUri', sub)}/providers/{path}/{inputs.get(name_input, name)}"
    group = f"{sub}/resourceGroups/{inputs.get('resourceGroupName', 'rg')}/providers/"
    if typ in _ARM_PATHS:
        return group + _ARM_PATHS[typ][0].format_map(_Defaulting(inputs, name))
    module, kind = typ.split(":")[1:3]
    return group + f"Mock.{module}/{kind}/{name}"


class _Defaulting(dict):
    def __init__(self, inputs: dict[str, Any], name: str):
        super().__init__({k: v for k, v in inputs.items() if isinstance(v, str)})
        self._name = name

    def __missing__(self, key: str) -> str:
        return self._name


@functools.cache  # the same text for the same cluster: written once per process, not once per render
def aad_kubeconfig(cluster: str, resource_group: str, fqdn: str) -> str:
    """The shape of ``az aks get-credentials`` output for an Entra ID cluster: kubelogin in devicecode mode."""
    ca = base64.b64encode(b"-----BEGIN CERTIFICATE-----\nMOCK\n-----END CERTIFICATE-----\n").decode()
    user = f"clusterUser_{resource_group}_{cluster}"
    return yaml.safe_dump({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": cluster, "cluster": {"certificate-authority-data": ca, "server": f"https://{fqdn}:443"}}],
        "contexts": [{"name": cluster, "context": {"cluster": cluster, "user": user}}],
        "current-context": cluster,
        "users": [{"name": user, "user": {"exec": {
            "apiVersion": "client.authentication.k8s.io/v1beta1",
            "command": "kubelogin",
            "args": ["get-token", "--environment", "AzurePublicCloud", "--server-id", AKS_SERVER_ID,
                     "--client-id", AZURE_CLI_CLIENT_ID, "--tenant-id", TENANT, "--login", "devicecode"],
            "env": None,
            "installHint": "kubelogin is not installed",
            "interactiveMode": "IfAvailable",
            "provideClusterInfo": False,
        }}}],
    }, sort_keys=False)


def cluster_fqdn(cluster: str, location: str = "eastus") -> str:
    return f"{cluster}-{hashlib.sha256(cluster.encode()).hexdigest()[:8]}.hcp.{location}.azmk8s.io"


class AzureMocks(Mocks):
    """Answers resource registrations and invokes as Azure and Kubernetes would."""

    def __init__(self, stack: str, subscription: str = SUBSCRIPTION):
        self.stack, self.subscription = stack, subscription
        self.invokes: list[str] = []
        """Tokens of the provider functions the program called, in call order."""
        self.calls: list[tuple[str, dict[str, Any]]] = []
        """Each provider function the program called with the arguments the provider would get, in call order."""

    def new_resource(self, args: MockResourceArgs) -> tuple[str, dict]:
        typ, name, inputs = args.typ, args.name, dict(args.inputs)
        outputs = dict(inputs)
        if typ.startswith("azure-native:"):
            rid = azure_id(typ, name, inputs)
            outputs.setdefault("name", inputs.get(_NAME_INPUT.get(typ, ""), name))
            outputs.update(self._azure_outputs(typ, name, inputs, rid))
            return rid, outputs
        if typ.startswith("kubernetes:"):
            return self._kubernetes(typ, name, inputs, outputs)
        if typ == "command:local:Command":
            # The import prints the digest the registry holds (a deterministic stand-in of its script).
            outputs["stdout"] = "sha256:" + hashlib.sha256(str(inputs.get("create")).encode()).hexdigest() + "\n"
            outputs["stderr"] = ""
            return f"{name}-id", outputs
        if typ == "random:index/randomPassword:RandomPassword":
            outputs["result"] = hashlib.sha256(f"{self.stack}/{name}".encode()).hexdigest()[: int(inputs["length"])]
            return f"{name}-id", outputs
        if typ == "docker:index/image:Image":
            # The registry answers a push with the manifest digest; derive a stable one from the tag.
            image = str(inputs.get("imageName", name))
            outputs["repoDigest"] = f"{image.rsplit(':', 1)[0]}@sha256:{hashlib.sha256(image.encode()).hexdigest()}"
        return f"{name}-id", outputs

    def _azure_outputs(self, typ: str, name: str, inputs: dict[str, Any], rid: str) -> dict[str, Any]:
        if typ == "azure-native:containerservice:ManagedCluster":
            cluster = inputs.get("resourceName", name)
            kubelet = f"{cluster}-agentpool"
            fqdn = cluster_fqdn(cluster, inputs.get("location", "eastus"))
            private = (inputs.get("apiServerAccessProfile") or {}).get("enablePrivateCluster")
            return {
                "fqdn": None if private else fqdn,
                # <host>.<guid>.privatelink.<region>.azmk8s.io; the zone AKS makes is all but the host label.
                "privateFQDN": fqdn.replace(".hcp.", f".{guid(rid, 'dns-zone')}.privatelink.") if private else None,
                "nodeResourceGroup": inputs.get("nodeResourceGroup"),
                "identity": {"type": "SystemAssigned", "principalId": guid(rid, "identity"), "tenantId": TENANT},
                "identityProfile": {"kubeletidentity": {
                    "clientId": guid(rid, "kubelet-client"),
                    "objectId": guid(rid, "kubelet-object"),
                    "resourceId": f"/subscriptions/{SUBSCRIPTION}/resourceGroups/{inputs.get('nodeResourceGroup')}"
                                  f"/providers/Microsoft.ManagedIdentity/userAssignedIdentities/{kubelet}",
                }},
                "oidcIssuerProfile": {"enabled": True,
                                      "issuerURL": f"https://eastus.oic.prod-aks.azure.com/{TENANT}/{guid(rid)}/"},
                "provisioningState": "Succeeded",
            }
        if typ == "azure-native:containerregistry:Registry":
            return {"loginServer": f"{inputs.get('registryName', name).lower()}.azurecr.io"}
        if typ == "azure-native:monitor:AzureMonitorWorkspace":
            workspace, region = inputs.get("azureMonitorWorkspaceName", name), inputs.get("location", "eastus")
            suffix = hashlib.sha256(rid.encode()).hexdigest()[:4]
            return {"metrics": {"prometheusQueryEndpoint": f"https://{workspace}-{suffix}.{region}.prometheus.monitor."
                                                           "azure.com", "internalId": guid(rid, "metrics")},
                    "accountId": guid(rid, "account"), "provisioningState": "Succeeded"}
        if typ == "azure-native:operationalinsights:Workspace":
            return {"customerId": guid(rid, "customer")}
        if typ == "azure-native:dashboard:Grafana":
            grafana = inputs.get("workspaceName", name)
            suffix = hashlib.sha256(rid.encode()).hexdigest()[:6]
            return {"identity": {"type": "SystemAssigned", "principalId": guid(rid, "identity"), "tenantId": TENANT},
                    "properties": {**(inputs.get("properties") or {}),
                                   "endpoint": f"https://{grafana}-{suffix}.eus.grafana.azure.com"}}
        if typ == "azure-native:managedidentity:UserAssignedIdentity":
            return {"clientId": guid(rid, "client"), "principalId": guid(rid, "principal"), "tenantId": TENANT}
        if typ == "azure-native:storage:StorageAccount":
            account = inputs.get("accountName", name)
            return {"primaryEndpoints": {"blob": f"https://{account}.blob.core.windows.net/"}}
        return {}

    def _kubernetes(self, typ: str, name: str, inputs: dict[str, Any], outputs: dict[str, Any]) -> tuple[str, dict]:
        if typ.startswith("pulumi:providers:"):
            return guid(typ, name), outputs
        meta = dict(inputs.get("metadata") or {})
        meta.setdefault("name", name)
        outputs["metadata"] = meta
        if typ == "kubernetes:core/v1:Service" and (inputs.get("spec") or {}).get("type") == "LoadBalancer":
            digest = hashlib.sha256(f"{self.stack}/{name}".encode()).digest()
            outputs["status"] = {"loadBalancer": {"ingress": [{"ip": f"20.{digest[0]}.{digest[1]}.{digest[2]}"}]}}
        ns = meta.get("namespace")
        return (f"{ns}/{meta['name']}" if ns else meta["name"]), outputs

    def call(self, args: MockCallArgs) -> dict:  # type: ignore[override]  # the runtime takes a bare dict too
        token, a = args.token, args.args
        self.invokes.append(token)
        self.calls.append((token, dict(a)))
        if token == "azure-native:authorization:getClientConfig":
            return {"clientId": AZURE_CLI_CLIENT_ID, "objectId": DEPLOYER_OBJECT_ID,
                    "subscriptionId": self.subscription, "tenantId": TENANT}
        if token in ("azure-native:containerservice:listManagedClusterUserCredentials",
                     "azure-native:containerservice:listManagedClusterAdminCredentials"):
            cluster, group = a.get("resourceName", "aks"), a.get("resourceGroupName", "rg")
            kubeconfig = aad_kubeconfig(cluster, group, cluster_fqdn(cluster))
            return {"kubeconfigs": [{"name": "clusterUser",
                                     "value": base64.b64encode(kubeconfig.encode()).decode()}]}
        if token == "command:local:run":
            # The one local command the program runs as a function: az acr login --expose-token.
            return {"stdout": "mock-entra-access-token\n", "stderr": "", "assets": {}, "archive": None}
        if token == "azure-native:storage:listStorageAccountServiceSAS":
            return {"serviceSasToken": f"sv=2022-11-02&sr={a.get('resource')}&sp={a.get('permissions')}&se="
                                       f"{a.get('sharedAccessExpiryTime')}&sig=MOCKSIGNATURE"}
        return {}
