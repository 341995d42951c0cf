"""Registry, network and storage: attach, private mode, secure storage defaults."""

import pytest

from components.vocabulary import SECURITY_EXCEPTION
from offline.mocks import azure_id, guid
from tests.helpers import STACKS, render_with

ACR = "azure-native:containerregistry:Registry"
ROLE = "azure-native:authorization:RoleAssignment"
SA = "azure-native:storage:StorageAccount"
MC = "azure-native:containerservice:ManagedCluster"


def kubelet_object_id(render):
    """The kubelet identity's objectId as the mocked cluster returned it (not the cluster's own identity)."""
    cluster = render.named("aks-aks")
    return guid(azure_id(MC, cluster.name, cluster.inputs), "kubelet-object")


def test_registry_has_no_admin_user_no_anonymous_pull_and_is_attached_by_acrpull_to_the_kubelet(render_shape):
    r = render_shape("dev-minimal")
    (acr,) = r.of_type(ACR)
    assert acr.inputs["adminUserEnabled"] is False and acr.inputs["anonymousPullEnabled"] is False
    pull = r.named("aks-acrpull").inputs
    assert pull["roleDefinitionId"].endswith("/roleDefinitions/7f951dda-4ed3-4680-a7ca-43fe172d538d")
    assert pull["principalType"] == "ServicePrincipal"
    assert pull["scope"].endswith(f"/registries/{r.named('registry-acr').inputs['registryName']}")
    assert pull["principalId"] == kubelet_object_id(r)


def test_private_registry_is_premium_without_public_access_behind_a_private_endpoint(render_shape):
    r = render_shape("private-two-pools")
    acr = r.named("registry-acr").inputs
    assert acr["sku"] == {"name": "Premium"} and acr["publicNetworkAccess"] == "Disabled"
    endpoint = r.named("registry-private-endpoint").inputs
    (conn,) = endpoint["privateLinkServiceConnections"]
    assert conn["groupIds"] == ["registry"]
    assert endpoint["subnet"]["id"].endswith("/subnets/private-endpoints")
    zone_group = r.named("registry-private-dns").inputs
    zone = zone_group["privateDnsZoneConfigs"][0]["privateDnsZoneId"]
    assert zone.endswith("/privateDnsZones/privatelink.azurecr.io")


def test_private_dns_zones_exist_once_per_service_and_are_linked_to_the_vnet(render_shape):
    r = render_shape("private-two-pools")
    zones = sorted(z.inputs["privateZoneName"] for z in r.of_type("azure-native:privatedns:PrivateZone"))
    assert zones == ["privatelink.azurecr.io", "privatelink.blob.core.windows.net"]
    links = r.of_type("azure-native:privatedns:VirtualNetworkLink")
    assert len(links) == 2
    vnet = f"/virtualNetworks/vnet-{r.cfg.naming.root}"
    assert all(link.inputs["virtualNetwork"]["id"].endswith(vnet) for link in links)


def test_public_stacks_have_no_private_endpoints(render_shape):
    assert not render_shape("dev-minimal").of_type("azure-native:network:PrivateEndpoint")


def test_vnet_has_node_and_private_endpoint_subnets_as_configured():
    r = render_with(network={"addressSpace": "10.50.0.0/16", "nodeSubnet": "10.50.0.0/20",
                             "endpointSubnet": "10.50.16.0/24"})
    subnets = {s.inputs["subnetName"]: s.inputs["addressPrefix"] for s in r.of_type("azure-native:network:Subnet")}
    assert subnets == {"nodes": "10.50.0.0/20", "private-endpoints": "10.50.16.0/24"}
    (vnet,) = r.of_type("azure-native:network:VirtualNetwork")
    assert vnet.inputs["addressSpace"] == {"addressPrefixes": ["10.50.0.0/16"]}


@pytest.mark.parametrize("stack", STACKS)
def test_storage_is_https_only_tls12_without_public_blobs_or_shared_keys(stack, render_of):
    """No account keeps shared keys in identity mode (every stack's mode): Entra ID tokens only."""
    for sa in render_of(stack).of_type(SA):
        i = sa.inputs
        assert i["enableHttpsTrafficOnly"] is True and i["minimumTlsVersion"] == "TLS1_2", stack
        assert i["allowBlobPublicAccess"] is False and i["allowSharedKeyAccess"] is False, stack
        assert SECURITY_EXCEPTION not in i["tags"], stack


def test_blob_containers_are_private(render_shape):
    containers = render_shape("training").of_type("azure-native:storage:BlobContainer")
    assert containers and all(c.inputs["publicAccess"] == "None" for c in containers)


def test_av_resim_storage_is_private_input_and_output(render_shape):
    r = render_shape("private-two-pools")
    accounts = {a.name: a.inputs for a in r.of_type(SA)}
    assert set(accounts) == {"storage-input-account", "storage-output-account"}
    for a in accounts.values():
        assert a["publicNetworkAccess"] == "Disabled" and a["networkRuleSet"]["defaultAction"] == "Deny"
    groups = [e.inputs["privateLinkServiceConnections"][0]["groupIds"]
              for e in r.of_type("azure-native:network:PrivateEndpoint")]
    assert sorted(map(tuple, groups)) == [("blob",), ("blob",), ("registry",)]


@pytest.mark.parametrize("stack", STACKS)
def test_every_azure_resource_that_takes_tags_carries_scenario_environment_and_owner(stack, render_of):
    r = render_of(stack)
    tagged = [x for x in r.resources if x.type.startswith("azure-native:") and "tags" in x.inputs]
    assert len(tagged) >= 5
    for x in tagged:
        assert {"scenario", "environment", "owner"} <= set(x.inputs["tags"]), (r.stack, x.name)
    for typ in ("azure-native:resources:ResourceGroup", "azure-native:containerservice:ManagedCluster",
                "azure-native:containerservice:AgentPool", "azure-native:network:VirtualNetwork"):
        assert all("tags" in x.inputs for x in r.of_type(typ)), (r.stack, typ)
