"""One identity per workload that touches data: federated with its ServiceAccount, roles per blob container."""

from __future__ import annotations

import pytest

from components.azure import roles
from components.identity.workload_identity import CLIENT_ID_ANNOTATION, TOKEN_AUDIENCE
from offline.mocks import TENANT, azure_id, guid
from stacks import REGISTRY
from tests.helpers import STACKS, api_clients, data_identities, pod_templates

UAI = "azure-native:managedidentity:UserAssignedIdentity"
FIC = "azure-native:managedidentity:FederatedIdentityCredential"
ROLE = "azure-native:authorization:RoleAssignment"
MC = "azure-native:containerservice:ManagedCluster"


def data_access(render) -> dict[str, dict[str, bool]]:
    """What the stack's scenario says its workloads touch (``Needs.data_access``): workload → container → write."""
    cfg = render.cfg
    needs = REGISTRY[cfg.scenario].needs_of(cfg, cfg.settings)
    return {workload: {c: write for role, write in roles_.items() for c in cfg.storage_account(role).container_names}
            for workload, roles_ in needs.data_access.items()}


def with_data(renders):
    found = [r for r in renders.values() if data_access(r)]
    assert found
    return found


def identity_ids(render, workload):
    identity = render.named(f"identity-{workload}-identity", UAI)
    rid = azure_id(UAI, identity.name, identity.inputs)
    return guid(rid, "client"), guid(rid, "principal")


def test_each_data_workload_has_its_own_identity_federated_with_its_service_account(renders):
    for r in with_data(renders):
        federated(r)


def federated(r) -> None:
    cluster = r.named("aks-aks", MC)
    # The issuer the mocked cluster reports: the credential must trust exactly this cluster's tokens.
    issuer = f"https://eastus.oic.prod-aks.azure.com/{TENANT}/{guid(azure_id(MC, cluster.name, cluster.inputs))}/"
    namespace = r.named("workspace-ns").inputs["metadata"]["name"]
    assert data_identities(r) == {f"id-{r.cfg.naming.root}-{w}" for w in data_access(r)}
    for workload in data_access(r):
        client_id, _ = identity_ids(r, workload)
        fic = r.named(f"identity-{workload}-federation", FIC).revealed
        assert fic["resourceName"] == f"id-{r.cfg.naming.root}-{workload}"
        assert fic["issuer"] == issuer
        assert fic["subject"] == f"system:serviceaccount:{namespace}:{workload}"
        assert fic["audiences"] == [TOKEN_AUDIENCE]
        sa = r.named(f"identity-{workload}-service-account").revealed
        assert sa["metadata"]["name"] == workload and sa["metadata"]["namespace"] == namespace
        assert sa["metadata"]["annotations"] == {CLIENT_ID_ANNOTATION: client_id}
        assert sa["automountServiceAccountToken"] is False


def test_roles_are_per_container_and_read_only_where_the_workload_only_reads(renders):
    for r in with_data(renders):
        for workload, containers in data_access(r).items():
            _, principal = identity_ids(r, workload)
            grants = [a.revealed for a in r.of_type(ROLE) if a.revealed["principalId"] == principal]
            assert {g["scope"].rsplit("/containers/", 1)[1]: g["roleDefinitionId"].rsplit("/", 1)[1]
                    for g in grants} == {c: roles.STORAGE_BLOB_DATA_CONTRIBUTOR if write
                                         else roles.STORAGE_BLOB_DATA_READER for c, write in containers.items()}
            assert all("/blobServices/default/containers/" in g["scope"] for g in grants)
            assert all(g["principalType"] == "ServicePrincipal" for g in grants)


@pytest.mark.parametrize("stack", STACKS)
def test_the_kubelet_identity_holds_no_data_role(stack, render_of):
    r = render_of(stack)
    cluster = r.named("aks-aks", MC)
    kubelet = guid(azure_id(MC, cluster.name, cluster.inputs), "kubelet-object")
    for a in r.of_type(ROLE):
        if a.revealed["principalId"] == kubelet:
            assert a.revealed["roleDefinitionId"].endswith(roles.ACR_PULL), (r.stack, a.name)


def test_a_pod_mounts_only_its_own_workloads_claims_and_runs_as_that_workload(renders):
    for r in with_data(renders):
        only_its_own_claims(r)


def only_its_own_claims(r) -> None:
    claimants = {}
    clients = {a.split("/")[1] for a in api_clients(r)}
    for name, pod in pod_templates(r):
        claims = [v["persistentVolumeClaim"]["claimName"] for v in pod.get("volumes", [])
                  if "persistentVolumeClaim" in v]
        if not claims:
            assert pod.get("serviceAccountName") in {None, *clients}, name
            continue
        workload = pod["serviceAccountName"]
        assert workload in data_access(r), name
        assert all(c.startswith(tuple(f"{container}-{workload}-" for container in data_access(r)[workload]))
                   for c in claims), (name, claims)
        assert pod["automountServiceAccountToken"] is False
        claimants[name] = workload
    assert set(claimants.values()) == set(data_access(r))


@pytest.mark.parametrize("stack", STACKS)
def test_stacks_without_data_have_no_data_identities(stack, render_of):
    r = render_of(stack)
    if not data_access(r):
        assert not data_identities(r), r.stack
